//! Sessions, their requests and the `SessionService` trait. Every store serves it through
//! [`service::CoreSessionService`], which owns the rules, over a [`backend::SessionBackend`]
//! that only stores and reads; the gRPC client and test doubles implement it directly.

use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::history::ForkRequest;
use crate::state::{Scope, ScopedDelta, StateMap};
use crate::validate;
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::time::Duration;

pub mod backend;
pub mod recent;
pub mod service;

/// A stream of events: a watch on a session, or an agent's output.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event>> + Send>>;

/// A conversation between a user and an app's agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    pub app_name: String,
    pub user_id: String,
    /// The merged state app -> user -> session.
    pub state: StateMap,
    /// The events the request asked for, oldest first.
    pub events: Events,
    pub create_time: DateTime<Utc>,
    /// The timestamp of the last appended event (creation time before any).
    pub last_update_time: DateTime<Utc>,
    /// Number of events in the whole log (the sequence of the last one).
    pub event_count: u64,
    /// When the session expires without further appends; None without a TTL.
    pub expire_time: Option<DateTime<Utc>>,
}

impl Session {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    pub fn state(&self) -> &StateMap {
        &self.state
    }

    pub fn events(&self) -> &Events {
        &self.events
    }

    pub fn last_update_time(&self) -> DateTime<Utc> {
        self.last_update_time
    }

    /// The contents of the session's events, oldest first.
    pub fn conversation_history(&self) -> Vec<crate::Content> {
        self.events.iter().filter_map(|e| e.content().cloned()).collect()
    }
}

/// A session's events, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Events(Vec<Event>);

impl Events {
    pub fn new(events: Vec<Event>) -> Self {
        Events(events)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn at(&self, index: usize) -> Option<&Event> {
        self.0.get(index)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Event> {
        self.0.iter()
    }

    pub fn as_slice(&self) -> &[Event] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<Event> {
        self.0
    }
}

/// An event in its protobuf encoding (`adk.v1.Event`, sequence included), as a store
/// keeps it, with the sequence the store keeps it under. The replies of GetSession,
/// ListEvents and WatchSession carry these as they are: a store that keeps events encoded
/// hands them over without decoding them, and the core service checks each one
/// ([`EncodedEvent::check`]) before it goes out (docs/semantics.md, "Event log and watches").
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedEvent {
    sequence: u64,
    bytes: Vec<u8>,
}

impl EncodedEvent {
    /// The bytes a store holds for its event `sequence` (written from
    /// [`EncodedEvent::encode`], or as the Redis append script writes them).
    pub fn from_stored(sequence: u64, bytes: Vec<u8>) -> Self {
        EncodedEvent { sequence, bytes }
    }

    /// The sequence the store keeps the event under (not read from the bytes).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// A session whose events are encoded: what [`SessionService::get_encoded`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedSession {
    /// The session, its `events` empty.
    pub session: Session,
    /// The events the request asked for, oldest first.
    pub events: Vec<EncodedEvent>,
}

impl From<Session> for EncodedSession {
    fn from(mut session: Session) -> Self {
        let events = std::mem::take(&mut session.events).into_vec();
        EncodedSession {
            session,
            events: events.iter().map(EncodedEvent::encode).collect(),
        }
    }
}

/// A stream of encoded events: a watch on a session as WatchSession streams it.
pub type EncodedEventStream = Pin<Box<dyn Stream<Item = Result<EncodedEvent>> + Send>>;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateRequest {
    pub app_name: String,
    pub user_id: String,
    /// None (or empty) generates a UUIDv4.
    pub session_id: Option<String>,
    /// Initial state, split by scope prefix.
    pub state: HashMap<String, Value>,
    /// Expire the session after this long without an append; None uses the store's default.
    pub ttl: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GetRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    /// Keep only the last N events (0 keeps none).
    pub num_recent_events: Option<usize>,
    /// Keep only events with `timestamp >= after`.
    pub after: Option<DateTime<Utc>>,
    /// Read only the window a runner turn needs: the events from the first one stamped
    /// at or after the latest compaction's range end (the compaction itself included),
    /// the whole log when there is none or a rewind came after it
    /// ([`crate::history::WindowUpdate`]). An O(returned) read on every store; the
    /// other filters apply within the window.
    pub since_compaction: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListRequest {
    pub app_name: String,
    /// None lists every user's sessions of the app.
    pub user_id: Option<String>,
    /// 0 means the default page size.
    pub page_size: usize,
    pub page_token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListResponse {
    /// Sessions with merged state and no events, oldest `last_update_time` first.
    pub sessions: Vec<Session>,
    pub next_page_token: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
}

/// Which user's `user:` state to read (SessionService.GetUserState).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserStateRequest {
    pub app_name: String,
    pub user_id: String,
}

/// Which app's `app:` state to read (SessionService.GetAppState).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppStateRequest {
    pub app_name: String,
}

/// An admin's change to an app's `app:` state without an event
/// (SessionService.UpdateAppState): every key of `state_delta` starts with `app:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdateAppStateRequest {
    pub app_name: String,
    pub state_delta: HashMap<String, Value>,
}

/// A scope's state as ADK's `get_user_state` returns it: keys without their `user:` or
/// `app:` prefix; empty when nothing was stored.
pub type ScopeState = HashMap<String, Value>;

/// What the client believes is the session's last event.
#[derive(Debug, Clone, PartialEq)]
pub enum Precondition {
    LastEventId(String),
    /// 0 means "no events yet".
    LastSequence(u64),
    /// Fencing for runners: the session's lease ([`crate::SessionLease`]) is held by
    /// this owner (the invocation id). A runner whose lease ran out (and may be
    /// another's now) can no longer append; the check is atomic with the append.
    /// Never sent by clients (the proto has no such precondition).
    LeaseHeldBy(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppendEventRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub event: Event,
    /// True for an event sent without a timestamp (a client may leave it out): the
    /// session service then stamps it with the store's clock on append, and
    /// `event.timestamp` is not read.
    pub timestamp_missing: bool,
    pub precondition: Option<Precondition>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListEventsRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub page_size: usize,
    pub page_token: Option<String>,
    pub newest_first: bool,
}

/// A page of a session's log: events (`E` = [`EncodedEvent`] for
/// [`SessionService::list_events_encoded`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListEventsResponse<E = Event> {
    pub events: Vec<E>,
    pub next_page_token: Option<String>,
}

impl From<ListEventsResponse> for ListEventsResponse<EncodedEvent> {
    fn from(page: ListEventsResponse) -> Self {
        ListEventsResponse {
            events: page.events.iter().map(EncodedEvent::encode).collect(),
            next_page_token: page.next_page_token,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    /// Replay stored events after this sequence first (0: all); None: only new events.
    pub after_sequence: Option<u64>,
}

/// The message a client gets when its precondition no longer holds.
pub const MODIFIED_SINCE_LOADED: &str =
    "the session was modified in storage since it was loaded; reload it before appending";

/// The message a runner gets when it appends after losing the session's lease.
pub fn lease_lost(owner: &str) -> String {
    format!(
        "invocation {owner} no longer holds the session's lease (it was not renewed in time and may be \
         another invocation's now): it cannot append, so that two invocations never write one session"
    )
}

/// Which session's run marks to read ([`SessionService::run_marks`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMarksRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
}

/// A workflow agent's position (an event carrying only `actions.agent_state` or
/// `actions.end_of_agent`) that a runner keeps beside a session's log instead of in it.
/// ADK stores no position for an app not marked resumable, and the runner still needs
/// them to go on with a run after its replica died (`docs/semantics.md`, Runner 27), so
/// they are kept where no reader of the log sees them: only the runner reads them back.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMark {
    /// The sequence of the log's last event when the mark was written (0: none yet).
    pub after_sequence: u64,
    pub event: Event,
}

impl RunMark {
    /// `events`, a read of a session's log (oldest first: the whole log or a newest part
    /// of it), with `marks` (oldest first) put back where they were written, each after
    /// the event it followed: the log as it reads when the marks are stored in it. Marks
    /// written before the read's first event are left out, as the events before it are.
    pub fn merge(events: Vec<Event>, marks: Vec<RunMark>) -> Vec<Event> {
        let start = events.first().map_or(0, |event| event.sequence.saturating_sub(1));
        let mut marks = marks.into_iter().filter(|mark| mark.after_sequence >= start).peekable();
        let mut merged = Vec::with_capacity(events.len() + marks.size_hint().0);
        for event in events {
            while let Some(mark) = marks.next_if(|mark| mark.after_sequence < event.sequence) {
                merged.push(mark.event);
            }
            merged.push(event);
        }
        merged.extend(marks.map(|mark| mark.event));
        merged
    }
}

/// Stores sessions, their scoped state and their event logs.
#[async_trait]
pub trait SessionService: Send + Sync {
    async fn create(&self, req: CreateRequest) -> Result<Session>;
    async fn get(&self, req: GetRequest) -> Result<Session>;
    /// [`get`](Self::get), the events in their protobuf encoding: what a GetSession reply
    /// carries. A store that keeps its events encoded hands them over undecoded.
    async fn get_encoded(&self, req: GetRequest) -> Result<EncodedSession> {
        self.get(req).await.map(EncodedSession::from)
    }
    async fn list(&self, req: ListRequest) -> Result<ListResponse>;
    /// The session with its newest events, as far back as `req.budget_tokens` of
    /// estimated tokens allow (and further, to the calls `req.function_call_ids`
    /// names): what a turn without compaction reads, in time proportional to what it
    /// returns, whatever the log's length. See [`recent::RecentRequest`].
    async fn get_recent(&self, req: recent::RecentRequest) -> Result<recent::RecentSession> {
        recent::get_recent(self, req).await
    }
    async fn delete(&self, req: DeleteRequest) -> Result<()>;
    /// Applies the event's state delta by scope and adds it to the log, atomically.
    /// Returns the event as stored (id, timestamp and sequence filled in).
    async fn append_event(&self, req: AppendEventRequest) -> Result<Event>;
    /// Keeps `req.event`, a workflow agent's position, beside the log as a [`RunMark`]
    /// written after the log's last event: under the session's lease only
    /// (`Precondition::LeaseHeldBy`, checked atomically with the write), with no state
    /// delta, and seen by no read of the log (Get, ListEvents, Watch). A service that keeps
    /// no marks (one over gRPC) stores it in the log instead, as for an app marked resumable:
    /// the position is kept either way.
    async fn append_run_mark(&self, req: AppendEventRequest) -> Result<Event> {
        self.append_event(req).await
    }
    /// The session's run marks, oldest first (none for a service that keeps them in the
    /// log); [`RunMark::merge`] puts them back into a read of the log.
    async fn run_marks(&self, req: RunMarksRequest) -> Result<Vec<RunMark>> {
        validate::session_ids(&req.app_name, &req.user_id, &req.session_id)?;
        Ok(Vec::new())
    }
    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse>;
    /// [`list_events`](Self::list_events), the events in their protobuf encoding: what a
    /// ListEvents reply carries. A store that keeps its events encoded hands them over undecoded.
    async fn list_events_encoded(&self, req: ListEventsRequest) -> Result<ListEventsResponse<EncodedEvent>> {
        self.list_events(req).await.map(ListEventsResponse::from)
    }
    /// Stored events after the requested sequence, then live ones, until dropped.
    async fn watch(&self, req: WatchRequest) -> Result<EventStream>;
    /// [`watch`](Self::watch), the events in their protobuf encoding: what a WatchSession
    /// stream carries. A store that keeps its events encoded hands them over undecoded.
    async fn watch_encoded(&self, req: WatchRequest) -> Result<EncodedEventStream> {
        let events = self.watch(req).await?;
        Ok(Box::pin(
            events.map(|event| event.map(|event| EncodedEvent::encode(&event))),
        ))
    }
    /// The user's `user:` state in the app, without a session (ADK's `get_user_state`).
    async fn user_state(&self, req: UserStateRequest) -> Result<ScopeState>;
    /// The app's `app:` state, without a session.
    async fn app_state(&self, req: AppStateRequest) -> Result<ScopeState>;
    /// Applies `app:` keys to the app's state without an event, as an append's delta
    /// would (values replace, `null` is stored), and returns the app's state after it.
    /// Every reader sees it as it sees an append's `app:` values.
    async fn update_app_state(&self, req: UpdateAppStateRequest) -> Result<ScopeState>;
    /// Copies the source's events up to `up_to_event_id` (inclusive) into a new session
    /// of the same app and user, in one step and in time proportional to what is copied
    /// (see [`ForkRequest`]). `NOT_FOUND` for a missing session or event,
    /// `ALREADY_EXISTS` when the new id is taken.
    async fn fork(&self, req: ForkRequest) -> Result<Session> {
        req.validate()?;
        Err(AdkError::FailedPrecondition(
            "this session store cannot fork sessions".into(),
        ))
    }
    /// Ok while the backing store answers.
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
}

impl CreateRequest {
    pub fn validate(&self) -> Result<()> {
        validate::id("app_name", &self.app_name)?;
        validate::id("user_id", &self.user_id)?;
        if let Some(id) = self.session_id.as_deref().filter(|id| !id.is_empty()) {
            validate::id("session_id", id)?;
        }
        if let Some(ttl) = self.ttl {
            validate::session_ttl("ttl", ttl)?;
        }
        validate::state_keys("state", &self.state)?;
        validate::state_limits("state", &self.state)
    }

    /// The TTL the new session gets: its own, else the store's `default`. A default above
    /// [`validate::MAX_SESSION_TTL`] is a configuration error (the servers' flag refuses it).
    pub fn effective_ttl(&self, default: Option<Duration>) -> Result<Option<Duration>> {
        match (self.ttl, default) {
            (Some(ttl), _) => Ok(Some(ttl)),
            (None, Some(default)) => {
                validate::session_ttl("the default session TTL", default)
                    .map_err(|e| AdkError::Config(e.to_string()))?;
                Ok(Some(default))
            }
            (None, None) => Ok(None),
        }
    }
}

impl GetRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        if let Some(after) = &self.after {
            validate::timestamp("after", after)?;
        }
        Ok(())
    }
}

impl ListRequest {
    /// Checks the ids and decodes the page token.
    pub fn validate(&self) -> Result<Option<SessionCursor>> {
        validate::id("app_name", &self.app_name)?;
        if let Some(user) = &self.user_id {
            validate::id("user_id", user)?;
        }
        let token = self.page_token.as_deref();
        token.map(|token| SessionCursor::decode(token, self)).transpose()
    }
}

impl DeleteRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)
    }
}

impl UserStateRequest {
    pub fn validate(&self) -> Result<()> {
        validate::id("app_name", &self.app_name)?;
        validate::id("user_id", &self.user_id)
    }
}

impl AppStateRequest {
    pub fn validate(&self) -> Result<()> {
        validate::id("app_name", &self.app_name)
    }
}

impl UpdateAppStateRequest {
    /// The app id, and a delta of `app:` keys only (the same key and size rules as any
    /// delta): a key of another scope is `INVALID_ARGUMENT` naming it.
    pub fn validate(&self) -> Result<()> {
        validate::id("app_name", &self.app_name)?;
        validate::state_keys("state_delta", &self.state_delta)?;
        if let Some(key) = self.state_delta.keys().find(|key| Scope::of(key).0 != Scope::App) {
            return Err(AdkError::invalid(
                "state_delta",
                format!(
                    "key {} is not an app: key; UpdateAppState changes app: state only",
                    validate::quoted(key)
                ),
            ));
        }
        validate::state_limits("state_delta", &self.state_delta)
    }

    /// The delta as app state fields: keys without their `app:` prefix.
    pub fn app_fields(&self) -> ScopeState {
        ScopedDelta::split(&self.state_delta).app
    }
}

impl AppendEventRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        if !self.event.id.is_empty() {
            validate::id("event.id", &self.event.id)?;
        }
        if !self.timestamp_missing {
            validate::timestamp("event.timestamp", &self.event.timestamp)?;
        }
        if let Some(Precondition::LastEventId(id)) = &self.precondition {
            validate::id("precondition.last_event_id", id)?;
        }
        validate::state_keys("event.actions.state_delta", &self.event.actions.state_delta)?;
        validate::state_limits("event.actions.state_delta", &self.event.actions.state_delta)?;
        validate::event_limits(&self.event)
    }
}

impl ListEventsRequest {
    /// Checks the ids and decodes the page token.
    pub fn validate(&self) -> Result<Option<EventCursor>> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        let token = self.page_token.as_deref();
        let cursor = token.map(|token| EventCursor::decode(token, self)).transpose()?;
        if cursor.as_ref().is_some_and(|c| c.newest_first != self.newest_first) {
            return Err(AdkError::invalid(
                "page_token",
                "was issued for the other order: keep newest_first as in the first request",
            ));
        }
        Ok(cursor)
    }
}

impl WatchRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)
    }
}

/// Applies `num_recent_events` and `after` to a session's events (oldest first):
/// the last N, those at or after `after`, or the intersection of both.
pub fn filter_events(events: &[Event], num_recent_events: Option<usize>, after: Option<DateTime<Utc>>) -> Vec<Event> {
    let recent = match num_recent_events {
        Some(n) => &events[events.len().saturating_sub(n)..],
        None => events,
    };
    recent
        .iter()
        .filter(|e| after.is_none_or(|t| e.timestamp >= t))
        .cloned()
        .collect()
}

/// How far ahead of the server's clock an event's timestamp may move its session's
/// `last_update_time`. ADK sets a session's update time to its last event's timestamp; a
/// client clock a little ahead is tolerated as is, but an event stamped years ahead must
/// not pin the session to the end of every listing for years.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// A session's `last_update_time` after appending an event stamped `event_time` at `now`:
/// the event's timestamp (as in ADK), at most [`MAX_CLOCK_SKEW`] ahead of `now`.
pub fn session_update_time(event_time: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let latest = chrono::TimeDelta::from_std(MAX_CLOCK_SKEW)
        .ok()
        .and_then(|skew| now.checked_add_signed(skew))
        .unwrap_or(now);
    event_time.min(latest)
}

// ---------- page tokens ----------
//
// A token is unpadded base64url of `<kind>.v2.<listing>.<position>`: `listing` is a short
// digest of the listing it was issued for (app, user, session), so a token is refused
// on any other listing, and `position` is range-checked, so no token can reach outside
// a log. Tokens are opaque to clients and may change with the version.

fn bad_token(what: &str) -> AdkError {
    AdkError::invalid(
        "page_token",
        format!("is malformed ({what}); pass the next_page_token of a previous response"),
    )
}

fn other_listing() -> AdkError {
    AdkError::invalid(
        "page_token",
        "was issued for another listing (another app, user or session); \
         pass the next_page_token of this listing's previous response",
    )
}

/// The first 8 bytes of SHA-256 over the listing's identity, in hex. Not a secret: it
/// tells listings apart, it does not authenticate (a client may only page through
/// listings it may read anyway).
fn listing_digest(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in parts {
        // Ids cannot contain NUL, so the parts cannot run into each other.
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_token(kind: &str, listing: &str, position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{kind}.v2.{listing}.{position}"))
}

/// The position in a token of `kind` issued for `listing`.
fn decode_token(token: &str, kind: &str, listing: &str) -> Result<String> {
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad_token("not base64url"))?;
    let text = String::from_utf8(bytes).map_err(|_| bad_token("not UTF-8"))?;
    let body = text
        .strip_prefix(kind)
        .and_then(|rest| rest.strip_prefix(".v2."))
        .ok_or_else(|| bad_token("not a token of this listing"))?;
    let (digest, position) = body.split_once('.').ok_or_else(|| bad_token("no position"))?;
    if digest != listing {
        return Err(other_listing());
    }
    Ok(position.to_string())
}

/// A page token of another listing built on the stores' data (A2A's ListTasks over
/// session logs), in the same opaque form as the session and event tokens: `kind` and a
/// digest of `listing` (the request fields that name the listing) are checked on decode.
pub fn encode_page_token(kind: &str, listing: &[&str], position: &str) -> String {
    encode_token(kind, &listing_digest(listing), position)
}

/// The position in a token [`encode_page_token`] made for the same `kind` and `listing`;
/// `INVALID_ARGUMENT` naming `page_token` for any other token.
pub fn decode_page_token(token: &str, kind: &str, listing: &[&str]) -> Result<String> {
    decode_token(token, kind, &listing_digest(listing))
}

/// Position in a session listing ordered by (last update time, index member).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionCursor {
    /// The last listed session's update time, in microseconds since the epoch.
    pub update_micros: i64,
    /// The last listed session's index member (see [`SessionCursor::member`]): its encoded id,
    /// or `<user>:<id>` (both encoded) for app-wide listings.
    pub member: String,
}

impl SessionCursor {
    const KIND: &'static str = "sessions";

    fn listing(req: &ListRequest) -> String {
        listing_digest(&[Self::KIND, &req.app_name, req.user_id.as_deref().unwrap_or("")])
    }

    /// The token of this position in the listing `req` asked for.
    pub fn encode(&self, req: &ListRequest) -> String {
        let position = format!("{}.{}", self.update_micros, self.member);
        encode_token(Self::KIND, &Self::listing(req), &position)
    }

    /// The position of a token `req`'s listing issued; `INVALID_ARGUMENT` naming
    /// `page_token` for any other token.
    pub fn decode(token: &str, req: &ListRequest) -> Result<Self> {
        let position = decode_token(token, Self::KIND, &Self::listing(req))?;
        let (micros, member) = position.split_once('.').ok_or_else(|| bad_token("no position"))?;
        let update_micros: i64 = micros.parse().map_err(|_| bad_token("bad time"))?;
        let seconds = update_micros.div_euclid(1_000_000);
        if !(validate::MIN_TIMESTAMP_SECONDS..=validate::MAX_TIMESTAMP_SECONDS).contains(&seconds) {
            return Err(AdkError::invalid(
                "page_token",
                format!("names the update time {update_micros} µs, outside google.protobuf.Timestamp's range"),
            ));
        }
        // A per-user listing names sessions by id, an app-wide one by `user:id` (both encoded).
        let parts: Vec<&str> = member.split(':').collect();
        let expected = if req.user_id.is_some() { 1 } else { 2 };
        let is_id = |part: &&str| validate::id_from_key(part).is_some_and(|id| validate::id("page_token", &id).is_ok());
        if parts.len() != expected || !parts.iter().all(is_id) {
            return Err(bad_token("bad session"));
        }
        Ok(SessionCursor {
            update_micros,
            member: member.to_string(),
        })
    }

    /// The index member of a session in a listing of `req`'s kind, the tie-breaker of listing
    /// order: the session id in a per-user listing, `<user>:<session>` in an app-wide one,
    /// each id encoded with [`validate::id_key`], so the `:` between them is unambiguous.
    pub fn member(req: &ListRequest, user_id: &str, session_id: &str) -> String {
        match req.user_id {
            Some(_) => validate::id_key(session_id).into_owned(),
            None => format!("{}:{}", validate::id_key(user_id), validate::id_key(session_id)),
        }
    }

    /// The (user, session) ids a [`SessionCursor::member`] of `req`'s listing names; None
    /// for anything else.
    pub fn ids_of_member(req: &ListRequest, member: &str) -> Option<(String, String)> {
        match &req.user_id {
            Some(user) => Some((user.clone(), validate::id_from_key(member)?)),
            None => {
                let (user, session) = member.split_once(':')?;
                Some((validate::id_from_key(user)?, validate::id_from_key(session)?))
            }
        }
    }

    /// True when (micros, member) comes after this cursor in listing order.
    pub fn is_before(&self, update_micros: i64, member: &str) -> bool {
        (self.update_micros, self.member.as_str()) < (update_micros, member)
    }
}

/// Position in an event listing: the last sequence returned, and the direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventCursor {
    pub sequence: u64,
    pub newest_first: bool,
}

impl EventCursor {
    const KIND: &'static str = "events";

    fn listing(req: &ListEventsRequest) -> String {
        listing_digest(&[Self::KIND, &req.app_name, &req.user_id, &req.session_id])
    }

    /// The token of this position in the log `req` lists.
    pub fn encode(&self, req: &ListEventsRequest) -> String {
        let direction = if self.newest_first { "desc" } else { "asc" };
        let position = format!("{direction}.{}", self.sequence);
        encode_token(Self::KIND, &Self::listing(req), &position)
    }

    /// The position of a token issued for `req`'s log (in either order); `INVALID_ARGUMENT`
    /// naming `page_token` for any other token or a sequence no log can reach.
    pub fn decode(token: &str, req: &ListEventsRequest) -> Result<Self> {
        let position = decode_token(token, Self::KIND, &Self::listing(req))?;
        let (direction, sequence) = position.split_once('.').ok_or_else(|| bad_token("no position"))?;
        let newest_first = match direction {
            "asc" => false,
            "desc" => true,
            _ => return Err(bad_token("bad direction")),
        };
        let sequence: u64 = sequence.parse().map_err(|_| bad_token("bad sequence"))?;
        if sequence > validate::MAX_SEQUENCE {
            return Err(AdkError::invalid(
                "page_token",
                format!(
                    "names event sequence {sequence}, beyond any log (at most {})",
                    validate::MAX_SEQUENCE
                ),
            ));
        }
        Ok(EventCursor { sequence, newest_first })
    }
}

/// Events `(after, after + page]` forward, or `[before - page, before)` newest first,
/// given the log's length: the sequence range a page covers, inclusive. None when the
/// cursor is at or past the end of the log in its direction (an empty last page).
pub fn event_page_range(
    cursor: Option<EventCursor>,
    newest_first: bool,
    page_size: usize,
    last_sequence: u64,
) -> Option<(u64, u64)> {
    let page = (page_size as u64).max(1);
    if newest_first {
        let end = cursor
            .map_or(last_sequence, |c| c.sequence.saturating_sub(1))
            .min(last_sequence);
        (end >= 1).then(|| (end.saturating_sub(page - 1).max(1), end))
    } else {
        let start = cursor.map_or(1, |c| c.sequence.saturating_add(1));
        (start <= last_sequence).then(|| (start, start.saturating_add(page - 1).min(last_sequence)))
    }
}

/// The token for the page of `req`'s listing after a page whose last event has the
/// sequence `page_end` (None: an empty page), or None when the log has no more in that
/// direction.
pub fn next_event_token(req: &ListEventsRequest, page_end: Option<u64>, last_sequence: u64) -> Option<String> {
    let page_end = page_end?;
    let more = if req.newest_first {
        page_end > 1
    } else {
        page_end < last_sequence
    };
    more.then(|| {
        EventCursor {
            sequence: page_end,
            newest_first: req.newest_first,
        }
        .encode(req)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn event_at(seq: u64, secs: i64) -> Event {
        let mut e = Event::new("i");
        e.sequence = seq;
        e.timestamp = Utc.timestamp_opt(secs, 0).unwrap();
        e
    }

    #[test]
    fn filters_keep_recent_after_and_their_intersection() {
        let events: Vec<Event> = (1..=5).map(|i| event_at(i, i as i64 * 10)).collect();
        let seqs = |v: Vec<Event>| v.iter().map(|e| e.sequence).collect::<Vec<_>>();
        assert_eq!(seqs(filter_events(&events, None, None)), [1, 2, 3, 4, 5]);
        assert_eq!(seqs(filter_events(&events, Some(2), None)), [4, 5]);
        assert_eq!(seqs(filter_events(&events, Some(0), None)), Vec::<u64>::new());
        assert_eq!(seqs(filter_events(&events, Some(99), None)), [1, 2, 3, 4, 5]);
        let t = Utc.timestamp_opt(30, 0).unwrap();
        assert_eq!(seqs(filter_events(&events, None, Some(t))), [3, 4, 5]);
        assert_eq!(seqs(filter_events(&events, Some(4), Some(t))), [3, 4, 5]);
        assert_eq!(seqs(filter_events(&events, Some(1), Some(t))), [5]);
    }

    fn sessions_of(user: Option<&str>) -> ListRequest {
        ListRequest {
            app_name: "a".into(),
            user_id: user.map(Into::into),
            ..Default::default()
        }
    }

    fn events_of(session: &str, newest_first: bool) -> ListEventsRequest {
        ListEventsRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: session.into(),
            newest_first,
            ..Default::default()
        }
    }

    fn invalid_naming_page_token<T: std::fmt::Debug>(result: Result<T>) -> String {
        let err = result.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
        assert!(err.to_string().contains("page_token"), "{err}");
        err.to_string()
    }

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let app_wide = sessions_of(None);
        let c = SessionCursor {
            update_micros: 1_700_000_000_000_000,
            member: "alice:s-1.x".into(),
        };
        assert_eq!(SessionCursor::decode(&c.encode(&app_wide), &app_wide).unwrap(), c);
        let log = events_of("s", true);
        let e = EventCursor {
            sequence: 42,
            newest_first: true,
        };
        assert_eq!(EventCursor::decode(&e.encode(&log), &log).unwrap(), e);
        for bad in ["", "!!!", "bm90IGEgdG9rZW4", &e.encode(&log)] {
            invalid_naming_page_token(SessionCursor::decode(bad, &app_wide));
        }
        let forged = |text: &str| URL_SAFE_NO_PAD.encode(text);
        let digest = SessionCursor::listing(&app_wide);
        for bad in [
            format!("sessions.v2.{digest}.5.a:b:c"),
            format!("sessions.v2.{digest}.5.a{{b}}"),
            format!("sessions.v2.{digest}.5.no-user"),
            format!("sessions.v2.{digest}.x.a:b"),
            // Version 1 tokens named no listing.
            "sessions.v1.5.a:b".into(),
        ] {
            invalid_naming_page_token(SessionCursor::decode(&forged(&bad), &app_wide));
        }
        let alice = sessions_of(Some("alice"));
        let per_user = SessionCursor {
            update_micros: 5,
            member: "s1".into(),
        };
        assert_eq!(
            SessionCursor::decode(&per_user.encode(&alice), &alice).unwrap(),
            per_user
        );
        let forged_member = SessionCursor {
            update_micros: 5,
            member: "bob:s1".into(),
        };
        invalid_naming_page_token(SessionCursor::decode(&forged_member.encode(&alice), &alice));
    }

    #[test]
    fn tokens_are_bound_to_their_listing() {
        let alice = sessions_of(Some("alice"));
        let token = SessionCursor {
            update_micros: 5,
            member: "s1".into(),
        }
        .encode(&alice);
        for other in [
            sessions_of(Some("bob")),
            sessions_of(None),
            ListRequest {
                app_name: "b".into(),
                ..alice.clone()
            },
        ] {
            let err = invalid_naming_page_token(SessionCursor::decode(&token, &other));
            assert!(err.contains("another listing"), "{err}");
        }
        let token = EventCursor {
            sequence: 3,
            newest_first: false,
        }
        .encode(&events_of("s1", false));
        for other in [
            events_of("s2", false),
            ListEventsRequest {
                user_id: "v".into(),
                ..events_of("s1", false)
            },
            ListEventsRequest {
                app_name: "b".into(),
                ..events_of("s1", false)
            },
        ] {
            let err = invalid_naming_page_token(EventCursor::decode(&token, &other));
            assert!(err.contains("another listing"), "{err}");
        }
        let err = invalid_naming_page_token(
            ListEventsRequest {
                page_token: Some(token),
                ..events_of("s1", true)
            }
            .validate(),
        );
        assert!(err.contains("other order"), "{err}");
    }

    #[test]
    fn token_positions_are_range_checked() {
        let log = events_of("s", false);
        // The token of the issue: version 1, the largest u64.
        let issue = URL_SAFE_NO_PAD.encode("events.v1.asc.18446744073709551615");
        invalid_naming_page_token(EventCursor::decode(&issue, &log));
        for sequence in [u64::MAX, validate::MAX_SEQUENCE + 1] {
            let token = EventCursor {
                sequence,
                newest_first: false,
            }
            .encode(&log);
            let err = invalid_naming_page_token(EventCursor::decode(&token, &log));
            assert!(err.contains("beyond any log"), "{err}");
        }
        let last = EventCursor {
            sequence: validate::MAX_SEQUENCE,
            newest_first: false,
        };
        assert_eq!(EventCursor::decode(&last.encode(&log), &log).unwrap(), last);
        // Past the end of a log: an empty last page, whatever the page size.
        assert_eq!(event_page_range(Some(last), false, MAX_PAGE, 25), None);
        let desc = EventCursor {
            sequence: validate::MAX_SEQUENCE,
            newest_first: true,
        };
        assert_eq!(event_page_range(Some(desc), true, MAX_PAGE, 25), Some((1, 25)));
        let forward = EventCursor {
            sequence: u64::MAX,
            newest_first: false,
        };
        assert_eq!(event_page_range(Some(forward), false, usize::MAX, 25), None);

        let sessions = sessions_of(Some("u"));
        for micros in [i64::MIN, i64::MAX, -62_135_596_800_000_001, 253_402_300_800_000_000] {
            let token = SessionCursor {
                update_micros: micros,
                member: "s".into(),
            }
            .encode(&sessions);
            invalid_naming_page_token(SessionCursor::decode(&token, &sessions));
        }
        let edge = SessionCursor {
            update_micros: 253_402_300_799_999_999,
            member: "s".into(),
        };
        assert_eq!(SessionCursor::decode(&edge.encode(&sessions), &sessions).unwrap(), edge);
    }

    #[test]
    fn the_default_ttl_obeys_the_same_maximum() {
        let own = CreateRequest {
            ttl: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        let none = CreateRequest::default();
        let too_long = validate::MAX_SESSION_TTL + Duration::from_secs(1);
        assert_eq!(own.effective_ttl(Some(too_long)).unwrap(), Some(Duration::from_secs(5)));
        assert_eq!(none.effective_ttl(None).unwrap(), None);
        assert_eq!(
            none.effective_ttl(Some(validate::MAX_SESSION_TTL)).unwrap(),
            Some(validate::MAX_SESSION_TTL)
        );
        let err = none.effective_ttl(Some(too_long)).unwrap_err();
        assert_eq!(
            err.code(),
            tonic::Code::FailedPrecondition,
            "a configuration error, not the client's"
        );
        assert!(err.to_string().contains("default session TTL"), "{err}");
    }

    const MAX_PAGE: usize = crate::validate::MAX_PAGE_SIZE;

    #[test]
    fn far_future_events_move_the_update_time_only_up_to_the_skew() {
        let now = Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        let skew = chrono::TimeDelta::from_std(MAX_CLOCK_SKEW).unwrap();
        let soon = now + chrono::TimeDelta::seconds(30);
        assert_eq!(session_update_time(soon, now), soon, "a small skew is kept, as in ADK");
        let past = Utc.timestamp_opt(-62_135_596_800, 0).unwrap();
        assert_eq!(session_update_time(past, now), past, "past times are kept");
        let far = Utc.timestamp_opt(validate::MAX_TIMESTAMP_SECONDS, 999_999_999).unwrap();
        assert_eq!(session_update_time(far, now), now + skew);
    }

    #[test]
    fn event_pages_cover_the_log_both_ways() {
        assert_eq!(event_page_range(None, false, 10, 25), Some((1, 10)));
        let c = EventCursor {
            sequence: 20,
            newest_first: false,
        };
        assert_eq!(event_page_range(Some(c), false, 10, 25), Some((21, 25)));
        let c = EventCursor {
            sequence: 25,
            newest_first: false,
        };
        assert_eq!(event_page_range(Some(c), false, 10, 25), None);
        assert_eq!(event_page_range(None, true, 10, 25), Some((16, 25)));
        let c = EventCursor {
            sequence: 6,
            newest_first: true,
        };
        assert_eq!(event_page_range(Some(c), true, 10, 25), Some((1, 5)));
        assert_eq!(event_page_range(None, true, 10, 0), None);
    }

    #[test]
    fn list_events_rejects_a_token_of_the_other_direction() {
        let req = ListEventsRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            page_token: Some(
                EventCursor {
                    sequence: 3,
                    newest_first: true,
                }
                .encode(&events_of("s", true)),
            ),
            newest_first: false,
            ..Default::default()
        };
        assert_eq!(req.validate().unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
