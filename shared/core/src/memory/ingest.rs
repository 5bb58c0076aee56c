//! Ingestion (Vertex AI Memory Bank's `IngestEvents`): events are buffered per user in
//! the store and generated from later, when the buffer holds the app's `max_events`,
//! when the user has sent nothing for the app's `idle_secs`, or when a caller flushes.
//!
//! What keeps a buffered event from being lost or generated twice, whichever replica
//! stops when (every step is [`super::CoreMemoryService`]'s, over the backend's
//! primitives):
//! - the events are in the store, beside the user's memories, before the call returns;
//! - a user with buffered events has an entry in the store's index of due users (written
//!   before the events, so a crash in between leaves an entry with nothing behind it,
//!   never events without an entry), due at the last ingest plus the idle time, or at
//!   once when the buffer is full;
//! - any replica's background task claims due users (their entry moved a lease ahead, so
//!   a replica that dies mid-generation only delays them), generates, and releases the
//!   claim only if no ingest moved the entry meanwhile;
//! - a generation commits its memories, marks the events generated and takes them out of
//!   the buffer in one step, under the user's generation version (GenerateMemories'
//!   compare-and-set), so two generations of one buffer commit it once.

use super::generate;
use super::{GeneratedMemory, MAX_ENTRIES_PER_ADD, MemoryService};
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::session::{GetRequest, SessionService};
use crate::validate;
use serde::Deserialize;
use std::time::Duration;

/// An ingest's buffer generates when it holds this many events, unless the app says otherwise.
pub const DEFAULT_INGEST_MAX_EVENTS: u32 = 100;
/// ...or when its user has sent nothing for this long.
pub const DEFAULT_INGEST_IDLE_SECS: u64 = 60;
/// Most events an app may let a buffer hold before it generates: one generation's worth.
pub const MAX_INGEST_MAX_EVENTS: u32 = MAX_ENTRIES_PER_ADD as u32;
/// Longest idle time an app may set: one day.
pub const MAX_INGEST_IDLE_SECS: u64 = 24 * 3600;
/// How long a claimed user is left to the replica that claimed it: past this (the replica
/// died, or its model is that slow) another replica may generate the user's buffer too
/// (the generation version keeps that from doubling anything).
pub const INGEST_CLAIM_LEASE: Duration = Duration::from_secs(120);
/// Most users one replica generates for per tick of its background task.
pub const INGEST_USERS_PER_TICK: usize = 16;
/// How often a server's background task looks for due users.
pub const INGEST_TICK: Duration = Duration::from_secs(1);

/// When an app's ingested events are generated from (the `ingest` of its
/// `--memory-generation` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// A user's buffer generates as soon as it holds this many events.
    pub max_events: u32,
    /// ...or once the user has sent nothing for this many seconds.
    pub idle_secs: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_events: DEFAULT_INGEST_MAX_EVENTS,
            idle_secs: DEFAULT_INGEST_IDLE_SECS,
        }
    }
}

impl IngestConfig {
    /// Checks both bounds; `field` names the config (e.g. `ingest`).
    pub fn validate(&self, field: &str) -> Result<()> {
        if !(1..=MAX_INGEST_MAX_EVENTS).contains(&self.max_events) {
            return Err(AdkError::invalid(
                format!("{field}.max_events"),
                format!("must be 1 to {MAX_INGEST_MAX_EVENTS}, got {}", self.max_events),
            ));
        }
        if !(1..=MAX_INGEST_IDLE_SECS).contains(&self.idle_secs) {
            return Err(AdkError::invalid(
                format!("{field}.idle_secs"),
                format!("must be 1 to {MAX_INGEST_IDLE_SECS}, got {}", self.idle_secs),
            ));
        }
        Ok(())
    }

    pub fn idle(&self) -> Duration {
        Duration::from_secs(self.idle_secs)
    }
}

/// Buffers events for generation (IngestEvents).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestEventsRequest {
    pub app_name: String,
    pub user_id: String,
    /// The conversation the events come from (Memory Bank's `stream_id`); optional.
    pub stream_id: String,
    /// Those with text are buffered, once each by id.
    pub events: Vec<Event>,
    /// Generate from the user's whole buffer now, and answer with what it changed.
    pub force_flush: bool,
}

impl IngestEventsRequest {
    pub fn validate(&self) -> Result<()> {
        super::user_ids(&self.app_name, &self.user_id)?;
        if !self.stream_id.is_empty() {
            validate::id("stream_id", &self.stream_id)?;
        }
        super::entry_count("events", self.events.len())?;
        for (i, event) in self.events.iter().enumerate() {
            // An event's id is what keeps it from being buffered or generated twice.
            if generate::has_text(event) {
                validate::id(&format!("events[{i}].id"), &event.id)?;
            }
            validate::event_limits(event)?;
        }
        Ok(())
    }
}

/// What an ingest did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestOutcome {
    /// Events in the user's buffer after the call (0 after a flush).
    pub buffered_events: u64,
    /// With `force_flush`: what the generation of the buffer changed.
    pub memories: Vec<GeneratedMemory>,
}

/// Ingests a stored session's events (IngestEvents, its id the stream id), in parts of
/// the largest size a request takes; returns the user's buffer size after the last.
/// The store skips events already buffered or generated from, so a runner ingesting
/// the session after each turn ingests each event once, and a turn whose ingest was lost
/// (its runner stopped after storing it) is ingested with the session's next turn.
pub async fn ingest_session(
    memory: &dyn MemoryService,
    sessions: &dyn SessionService,
    app_name: &str,
    user_id: &str,
    session_id: &str,
) -> Result<u64> {
    let session = sessions
        .get(GetRequest {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            ..Default::default()
        })
        .await?;
    let mut buffered_events = 0;
    for events in session.events.as_slice().chunks(MAX_ENTRIES_PER_ADD) {
        let outcome = memory
            .ingest(IngestEventsRequest {
                app_name: app_name.to_string(),
                user_id: user_id.to_string(),
                stream_id: session_id.to_string(),
                events: events.to_vec(),
                force_flush: false,
            })
            .await?;
        buffered_events = outcome.buffered_events;
    }
    Ok(buffered_events)
}
