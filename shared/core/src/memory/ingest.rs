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
use crate::error::Result;
use crate::event::Event;
use crate::session::SessionService;
use crate::validate;
use std::time::Duration;

/// How long a claimed user is left to the replica that claimed it: past this (the replica
/// died, or its model is that slow) another replica may generate the user's buffer too
/// (the generation version keeps that from doubling anything).
pub const INGEST_CLAIM_LEASE: Duration = Duration::from_secs(120);
/// Most users one replica generates for per tick of its background task.
pub const INGEST_USERS_PER_TICK: usize = 16;
/// How often a server's background task looks for due users.
pub const INGEST_TICK: Duration = Duration::from_secs(1);

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
    let session = super::whole_session(sessions, app_name, user_id, session_id).await?;
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
