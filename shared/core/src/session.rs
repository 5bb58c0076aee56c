//! Sessions and the `SessionService` trait every backend implements.

use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::state::StateMap;
use crate::validate;
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use futures::Stream;
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::time::Duration;

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

/// What the client believes is the session's last event.
#[derive(Debug, Clone, PartialEq)]
pub enum Precondition {
    LastEventId(String),
    /// 0 means "no events yet".
    LastSequence(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppendEventRequest {
    pub app_name: String,
    pub user_id: String,
    pub session_id: String,
    pub event: Event,
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListEventsResponse {
    pub events: Vec<Event>,
    pub next_page_token: Option<String>,
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

/// Stores sessions, their scoped state and their event logs.
#[async_trait]
pub trait SessionService: Send + Sync {
    async fn create(&self, req: CreateRequest) -> Result<Session>;
    async fn get(&self, req: GetRequest) -> Result<Session>;
    async fn list(&self, req: ListRequest) -> Result<ListResponse>;
    async fn delete(&self, req: DeleteRequest) -> Result<()>;
    /// Applies the event's state delta by scope and adds it to the log, atomically.
    /// Returns the event as stored (id, timestamp and sequence filled in).
    async fn append_event(&self, req: AppendEventRequest) -> Result<Event>;
    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse>;
    /// Stored events after the requested sequence, then live ones, until dropped.
    async fn watch(&self, req: WatchRequest) -> Result<EventStream>;
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
        if self.ttl.is_some_and(|ttl| ttl.is_zero()) {
            return Err(AdkError::invalid("ttl must be positive"));
        }
        validate::state_keys("state", &self.state)?;
        validate::state_limits("state", &self.state)
    }
}

impl GetRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)
    }
}

impl ListRequest {
    /// Checks the ids and decodes the page token.
    pub fn validate(&self) -> Result<Option<SessionCursor>> {
        validate::id("app_name", &self.app_name)?;
        if let Some(user) = &self.user_id {
            validate::id("user_id", user)?;
        }
        self.page_token.as_deref().map(SessionCursor::decode).transpose()
    }
}

impl DeleteRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)
    }
}

impl AppendEventRequest {
    pub fn validate(&self) -> Result<()> {
        validate::session_ids(&self.app_name, &self.user_id, &self.session_id)?;
        if !self.event.id.is_empty() {
            validate::id("event.id", &self.event.id)?;
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
        let cursor = self.page_token.as_deref().map(EventCursor::decode).transpose()?;
        if cursor.as_ref().is_some_and(|c| c.newest_first != self.newest_first) {
            return Err(AdkError::invalid(
                "page_token was issued for the other order: keep newest_first as in the first request",
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

fn bad_token(what: &str) -> AdkError {
    AdkError::invalid(format!(
        "page_token is malformed ({what}); pass the next_page_token of a previous response"
    ))
}

fn decode_token(token: &str, kind: &str) -> Result<String> {
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad_token("not base64url"))?;
    let text = String::from_utf8(bytes).map_err(|_| bad_token("not UTF-8"))?;
    text.strip_prefix(kind)
        .map(str::to_string)
        .ok_or_else(|| bad_token("not a token of this listing"))
}

/// Position in a session listing ordered by (last update time, index member).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionCursor {
    /// The last listed session's update time, in microseconds since the epoch.
    pub update_micros: i64,
    /// The last listed session's index member: its id, or `user:id` for app-wide listings.
    pub member: String,
}

impl SessionCursor {
    const KIND: &'static str = "sessions.v1.";

    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}{}.{}", Self::KIND, self.update_micros, self.member))
    }

    pub fn decode(token: &str) -> Result<Self> {
        let body = decode_token(token, Self::KIND)?;
        let (micros, member) = body.split_once('.').ok_or_else(|| bad_token("no position"))?;
        let update_micros = micros.parse().map_err(|_| bad_token("bad time"))?;
        let ids_ok = member.split(':').all(|part| validate::id("page_token", part).is_ok());
        if member.is_empty() || member.matches(':').count() > 1 || !ids_ok {
            return Err(bad_token("bad session"));
        }
        Ok(SessionCursor {
            update_micros,
            member: member.to_string(),
        })
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
    const KIND: &'static str = "events.v1.";

    pub fn encode(&self) -> String {
        let direction = if self.newest_first { "desc" } else { "asc" };
        URL_SAFE_NO_PAD.encode(format!("{}{direction}.{}", Self::KIND, self.sequence))
    }

    pub fn decode(token: &str) -> Result<Self> {
        let body = decode_token(token, Self::KIND)?;
        let (direction, sequence) = body.split_once('.').ok_or_else(|| bad_token("no position"))?;
        let newest_first = match direction {
            "asc" => false,
            "desc" => true,
            _ => return Err(bad_token("bad direction")),
        };
        let sequence = sequence.parse().map_err(|_| bad_token("bad sequence"))?;
        Ok(EventCursor { sequence, newest_first })
    }
}

/// Events `(after, after + page]` forward, or `[before - page, before)` newest first,
/// given the log's length: the sequence range a page covers, inclusive.
pub fn event_page_range(
    cursor: Option<EventCursor>,
    newest_first: bool,
    page_size: usize,
    last_sequence: u64,
) -> Option<(u64, u64)> {
    let page = page_size as u64;
    if newest_first {
        let end = cursor
            .map_or(last_sequence, |c| c.sequence.saturating_sub(1))
            .min(last_sequence);
        (end >= 1).then(|| (end.saturating_sub(page - 1).max(1), end))
    } else {
        let start = cursor.map_or(1, |c| c.sequence + 1);
        (start <= last_sequence).then(|| (start, (start + page - 1).min(last_sequence)))
    }
}

/// The token for the page after `events`, or None when the log has no more in that direction.
pub fn next_event_token(events: &[Event], newest_first: bool, last_sequence: u64) -> Option<String> {
    let last = events.last()?;
    let more = if newest_first {
        last.sequence > 1
    } else {
        last.sequence < last_sequence
    };
    more.then(|| {
        EventCursor {
            sequence: last.sequence,
            newest_first,
        }
        .encode()
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

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let c = SessionCursor {
            update_micros: 1_700_000_000_000_000,
            member: "alice:s-1.x".into(),
        };
        assert_eq!(SessionCursor::decode(&c.encode()).unwrap(), c);
        let e = EventCursor {
            sequence: 42,
            newest_first: true,
        };
        assert_eq!(EventCursor::decode(&e.encode()).unwrap(), e);
        for bad in ["", "!!!", "bm90IGEgdG9rZW4", &e.encode()] {
            let err = SessionCursor::decode(bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
        }
        let forged = URL_SAFE_NO_PAD.encode("sessions.v1.5.a:b:c");
        assert!(SessionCursor::decode(&forged).is_err());
        let forged = URL_SAFE_NO_PAD.encode("sessions.v1.5.a{b}");
        assert!(SessionCursor::decode(&forged).is_err());
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
                .encode(),
            ),
            newest_first: false,
            ..Default::default()
        };
        assert_eq!(req.validate().unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
