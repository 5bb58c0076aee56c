//! The narrow trait a session store implements: store and read, nothing else.
//!
//! Every rule of the session contract (validation, id and time fill, partial events,
//! `temp:` keys, the scope split, limits, preconditions' meaning and errors, fork
//! rules, paging, the default TTL, not-found wording) lives once in
//! [`CoreSessionService`](super::service::CoreSessionService), which serves
//! [`SessionService`](super::SessionService) over any [`SessionBackend`]. A backend
//! only gets data the core has checked and prepared: the types it is called with
//! have a field only the core can set, so no backend can be handed unvalidated input,
//! and it answers with data or an outcome (an enum), never a rule's error. Adding a
//! store means writing a backend; no rule is written again.

use super::{
    EncodedEvent, EncodedEventStream, EncodedSession, EventCursor, EventStream, ListRequest, Precondition, ScopeState,
    Session, SessionCursor, event_page_range,
};
use crate::error::{AdkError, Existing, Missing, Result};
use crate::event::Event;
use crate::history::{WindowUpdate, session_state_through, window_start};
use crate::lease::LeaseKey;
use crate::state::ScopedDelta;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// Marks a value the core built: the field holding it is private to the crate, so a
/// backend (in another crate) can read such a value but never make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checked(());

impl Checked {
    pub(crate) const fn new() -> Self {
        Checked(())
    }
}

/// A request the core has validated; a backend reads it through `Deref`.
#[derive(Debug, Clone, PartialEq)]
pub struct Valid<T>(T);

impl<T> Valid<T> {
    pub(crate) fn new(checked: T) -> Self {
        Valid(checked)
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Valid<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One session's validated ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub(crate) _checked: Checked,
}

impl SessionKey {
    pub(crate) fn new(app_name: &str, user_id: &str, session_id: &str) -> Self {
        SessionKey {
            app_name: app_name.to_string(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            _checked: Checked::new(),
        }
    }

    /// `NOT_FOUND` for this session: the one wording every store's callers (and a watch
    /// of a session that goes away) see.
    pub fn not_found(&self) -> AdkError {
        AdkError::NotFound(
            Missing::Session,
            format!(
                "session {} not found in app {} for user {}",
                self.session_id, self.app_name, self.user_id
            ),
        )
    }

    /// `ALREADY_EXISTS` for a create or fork whose id is taken.
    pub(crate) fn already_exists(&self) -> AdkError {
        AdkError::AlreadyExists(
            Existing::Session,
            format!(
                "session {} already exists in app {} for user {}",
                self.session_id, self.app_name, self.user_id
            ),
        )
    }

    /// The key of this session's lease (a `Precondition::LeaseHeldBy` fence checks it).
    pub fn lease_key(&self) -> LeaseKey {
        LeaseKey {
            app_name: self.app_name.clone(),
            user_id: self.user_id.clone(),
            session_id: self.session_id.clone(),
        }
    }
}

/// A session to create: ids checked, the id filled in, the state split by scope (no
/// `temp:` keys), the TTL decided (the request's or the store's default).
#[derive(Debug, Clone)]
pub struct NewSession {
    pub key: SessionKey,
    pub state: ScopedDelta,
    pub ttl: Option<Duration>,
    /// The creation time (the backend's [`SessionBackend::now`]).
    pub now: DateTime<Utc>,
    pub(crate) _checked: Checked,
}

/// What a create did.
#[derive(Debug)]
pub enum Created {
    /// Stored: the session as a Get would return it (merged state, no events).
    Stored(Session),
    /// A live session has the id; nothing changed.
    Exists,
}

/// Which events a Get needs. A backend returns at least the events of the read window
/// that pass these filters (it may return more: the core applies them exactly).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRead {
    pub num_recent_events: Option<usize>,
    pub after: Option<DateTime<Utc>>,
    /// Only the events from the bounded-read window's start (see
    /// [`GetRequest::since_compaction`](super::GetRequest::since_compaction)).
    pub since_compaction: bool,
    pub(crate) _checked: Checked,
}

/// A page of a session listing to read: the sessions after `after` in (last update
/// time, member) order, at most `limit` of them.
#[derive(Debug, Clone)]
pub struct SessionListing {
    /// The validated request (app, and user unless app-wide).
    pub request: ListRequest,
    pub after: Option<SessionCursor>,
    /// One more than the page, so the core knows whether another page follows.
    pub limit: usize,
    pub(crate) _checked: Checked,
}

impl SessionListing {
    /// The position of a session in this listing (see [`SessionCursor::member`]).
    pub fn position(&self, update_time: DateTime<Utc>, user_id: &str, session_id: &str) -> SessionCursor {
        SessionCursor {
            update_micros: update_time.timestamp_micros(),
            member: SessionCursor::member(&self.request, user_id, session_id),
        }
    }

    /// True when a session at `position` belongs on this page or a later one.
    pub fn follows_cursor(&self, position: &SessionCursor) -> bool {
        self.after
            .as_ref()
            .is_none_or(|c| c.is_before(position.update_micros, &position.member))
    }
}

/// A session of a listing page, with its position in the listing.
#[derive(Debug)]
pub struct ListedSession {
    pub position: SessionCursor,
    /// Merged state, no events.
    pub session: Session,
}

/// An event to append, prepared: ids checked, the event's id filled in, its `temp:`
/// keys gone, its sequence 0 (the backend assigns the next one), its delta split by
/// scope, and the session's new update time and read window worked out.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub key: SessionKey,
    pub event: Event,
    /// The event's `state_delta` by scope (keys without their prefix).
    pub delta: ScopedDelta,
    /// How the append moves the bounded-read window.
    pub window: WindowUpdate,
    /// The session's `last_update_time` after the append.
    pub update_time: DateTime<Utc>,
    /// The time of the append (expiry is renewed from it).
    pub now: DateTime<Utc>,
    pub precondition: Option<Precondition>,
    pub(crate) _checked: Checked,
}

impl NewEvent {
    /// Whether the precondition holds for a session whose log ends at `last_sequence`
    /// with the event `last_event_id`, `lease_holds` telling whether the session's lease
    /// is held by an owner. A backend calls this atomically with its write (or does the
    /// same inside it, as the Redis script does) and reports the refusal.
    pub fn refusal(
        &self,
        last_sequence: u64,
        last_event_id: Option<&str>,
        lease_holds: impl FnOnce(&LeaseKey, &str) -> bool,
    ) -> Option<Refusal> {
        match &self.precondition {
            None => None,
            Some(Precondition::LastSequence(seq)) => (*seq != last_sequence).then_some(Refusal::Modified),
            Some(Precondition::LastEventId(id)) => (last_event_id != Some(id.as_str())).then_some(Refusal::Modified),
            Some(Precondition::LeaseHeldBy(owner)) => {
                (!lease_holds(&self.key.lease_key(), owner)).then_some(Refusal::LeaseLost)
            }
        }
    }
}

/// Why an append's precondition refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The log changed since the client loaded it.
    Modified,
    /// The fencing lease is no longer the appender's.
    LeaseLost,
}

/// What an append did.
#[derive(Debug)]
pub enum Appended {
    /// Stored: the event with its sequence.
    New(Event),
    /// The event id was in the session already: the stored event, nothing changed.
    Duplicate(Event),
    /// No live session has the key.
    NotFound,
    Refused(Refusal),
}

/// A page of a session's log to read.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPage {
    pub cursor: Option<EventCursor>,
    pub newest_first: bool,
    pub size: usize,
    pub(crate) _checked: Checked,
}

impl EventPage {
    /// The sequences (inclusive) the page covers in a log whose last sequence is
    /// `last_sequence`; None for an empty page.
    pub fn range(&self, last_sequence: u64) -> Option<(u64, u64)> {
        event_page_range(self.cursor, self.newest_first, self.size, last_sequence)
    }
}

/// The events of an [`EventPage`]'s range, oldest first, and the log's last sequence
/// (`E` = [`EncodedEvent`] for [`SessionBackend::events_encoded`]).
#[derive(Debug)]
pub struct EventsRead<E = Event> {
    pub events: Vec<E>,
    pub last_sequence: u64,
}

/// A fork to make: the source, the new session's key (its id filled in), the last
/// event copied.
#[derive(Debug, Clone)]
pub struct ForkPlan {
    pub source: SessionKey,
    pub fork: SessionKey,
    pub up_to_event_id: String,
    pub now: DateTime<Utc>,
    pub(crate) _checked: Checked,
}

/// What a fork starts with, given the copied events (the source's log through
/// `up_to_event_id`): the rules of a fork, for backends to store.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkContents {
    /// The session-scoped state through the copied events (keys without prefix).
    pub session_state: HashMap<String, Value>,
    /// The copied events' own bounded-read window.
    pub window_start: u64,
    /// The fork's `last_update_time`: its last event's, as after its append.
    pub update_time: DateTime<Utc>,
}

impl ForkPlan {
    pub fn contents(&self, copied: &[Event]) -> ForkContents {
        ForkContents {
            session_state: ScopedDelta::split(&session_state_through(copied)).session,
            window_start: window_start(copied),
            update_time: copied
                .last()
                .map_or(self.now, |e| super::session_update_time(e.timestamp, self.now)),
        }
    }
}

/// What a fork did.
#[derive(Debug)]
pub enum Forked {
    /// The new session, with its events.
    Stored(Session),
    SourceNotFound,
    /// `up_to_event_id` is not an event of the source.
    EventNotFound,
    /// A live session has the fork's id.
    Exists,
}

/// `app:` values to write (keys without the prefix), as an admin's UpdateAppState.
#[derive(Debug, Clone)]
pub struct AppStateWrite {
    pub app_name: String,
    pub fields: ScopeState,
    pub(crate) _checked: Checked,
}

/// Stores sessions, their scoped state and their logs, and reads them back. Called
/// only by the core service, with checked, prepared data; answers with data and
/// outcomes. What a backend owns is what is really its own: atomicity, durability,
/// expiry on its clock, watches, caches.
#[async_trait]
pub trait SessionBackend: Send + Sync + 'static {
    /// The store's time: creation and update times, expiry.
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    /// Stores a new session with its scoped state, unless a live one has the id.
    async fn create(&self, new: NewSession) -> Result<Created>;

    /// The session with merged state and the events `read` asks for (see
    /// [`EventRead`]); None when no live session has the key.
    async fn read(&self, key: &SessionKey, read: &EventRead) -> Result<Option<Session>>;

    /// [`read`](Self::read), the events in their protobuf encoding (see
    /// [`SessionService::get_encoded`](super::SessionService::get_encoded)): a backend
    /// that stores them encoded overrides it to hand them over undecoded.
    async fn read_encoded(&self, key: &SessionKey, read: &EventRead) -> Result<Option<EncodedSession>> {
        Ok(self.read(key, read).await?.map(EncodedSession::from))
    }

    /// Up to `listing.limit` sessions after its cursor, in listing order, merged state
    /// and no events.
    async fn list(&self, listing: &SessionListing) -> Result<Vec<ListedSession>>;

    /// Removes the session (its shared scopes stay); nothing happens when there is none.
    async fn delete(&self, key: &SessionKey) -> Result<()>;

    /// Applies the delta and adds the event to the log, atomically with the idempotency
    /// check (an event id already in the log: [`Appended::Duplicate`]) and the
    /// precondition ([`NewEvent::refusal`]).
    async fn append(&self, new: NewEvent) -> Result<Appended>;

    /// Keeps `new.event` as a [`RunMark`](super::RunMark) after the log's last event,
    /// atomically with the precondition ([`NewEvent::refusal`]); the log, the state, the
    /// update time and the expiry are left as they are. The marks go with the session
    /// (deleted or expired with it) and are not copied by a fork.
    async fn append_run_mark(&self, new: NewEvent) -> Result<Appended>;

    /// The session's run marks, oldest first; empty when it has none or is gone.
    async fn run_marks(&self, key: &SessionKey) -> Result<Vec<super::RunMark>>;

    /// The events of `page` (its [`EventPage::range`] of the log); None when no live
    /// session has the key.
    async fn events(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead>>;

    /// [`events`](Self::events), in their protobuf encoding: a backend that stores them
    /// encoded overrides it to hand them over undecoded.
    async fn events_encoded(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead<EncodedEvent>>> {
        Ok(self.events(key, page).await?.map(|read| EventsRead {
            events: read.events.iter().map(EncodedEvent::encode).collect(),
            last_sequence: read.last_sequence,
        }))
    }

    /// Stored events after `after_sequence` (None: none), then live ones; the stream
    /// ends with [`SessionKey::not_found`] when the session goes. None when no live
    /// session has the key.
    async fn watch(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EventStream>>;

    /// [`watch`](Self::watch), the events in their protobuf encoding: a backend that
    /// stores them encoded overrides it to hand them over undecoded.
    async fn watch_encoded(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EncodedEventStream>> {
        let events = self.watch(key, after_sequence).await?;
        Ok(events.map(|events| -> EncodedEventStream {
            Box::pin(events.map(|event| event.map(|event| EncodedEvent::encode(&event))))
        }))
    }

    /// The user's `user:` state (keys without prefix).
    async fn user_state(&self, req: &Valid<super::UserStateRequest>) -> Result<ScopeState>;

    /// The app's `app:` state (keys without prefix).
    async fn app_state(&self, req: &Valid<super::AppStateRequest>) -> Result<ScopeState>;

    /// Applies `app:` values and returns the app's state after them.
    async fn update_app_state(&self, write: AppStateWrite) -> Result<ScopeState>;

    /// Copies the source's log through `up_to_event_id` into a new session of the same
    /// user with [`ForkPlan::contents`] and the source's TTL.
    async fn fork(&self, plan: ForkPlan) -> Result<Forked>;

    /// Ok while the backing store answers.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}
