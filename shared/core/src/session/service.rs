//! [`CoreSessionService`]: the session contract's rules, once, over any
//! [`SessionBackend`] (see `backend.rs`).

use super::backend::{
    AppStateWrite, Appended, Checked, Created, EventPage, EventRead, EventsRead, ForkPlan, Forked, NewEvent,
    NewSession, Refusal, SessionBackend, SessionKey, SessionListing, Valid,
};
use super::{
    AppStateRequest, AppendEventRequest, CreateRequest, DeleteRequest, EncodedEvent, EncodedEventStream,
    EncodedSession, EventStream, Events, GetRequest, ListEventsRequest, ListEventsResponse, ListRequest, ListResponse,
    MODIFIED_SINCE_LOADED, Precondition, RunMark, RunMarksRequest, ScopeState, Session, SessionService,
    UpdateAppStateRequest, UserStateRequest, WatchRequest, lease_lost, next_event_token, session_update_time,
};
use crate::error::{AdkError, Conflict, Result};
use crate::event::{Event, new_event_id};
use crate::history::{ForkRequest, WindowUpdate};
use crate::state::{ScopedDelta, without_temp_keys};
use crate::validate::{self, page_size};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use std::time::Duration;

/// The [`SessionService`] every store serves: validates and prepares each request, has
/// the backend store or read, and turns the backend's outcome into the answer or the
/// error the contract names.
#[derive(Debug, Clone)]
pub struct CoreSessionService<B> {
    backend: B,
    /// The TTL of sessions created without one.
    default_ttl: Option<Duration>,
}

impl<B: SessionBackend> CoreSessionService<B> {
    pub fn new(backend: B) -> Self {
        CoreSessionService {
            backend,
            default_ttl: None,
        }
    }

    /// Sessions created without a TTL get `ttl` (None keeps them until deleted).
    pub fn with_default_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// The backend, for what is its own (a memory store's leases, a test's peek).
    pub fn backend(&self) -> &B {
        &self.backend
    }
}

/// `events` with `num_recent_events` and `after` applied (see [`super::filter_events`]),
/// without copying the events kept; `time` reads an event's timestamp (only with `after`).
fn keep_filtered<E>(
    mut events: Vec<E>,
    num_recent_events: Option<usize>,
    after: Option<DateTime<Utc>>,
    time: impl Fn(&E) -> Result<DateTime<Utc>>,
) -> Result<Vec<E>> {
    if let Some(n) = num_recent_events {
        events.drain(..events.len().saturating_sub(n));
    }
    if let Some(after) = after {
        let mut kept = Vec::with_capacity(events.len());
        for event in events {
            if time(&event)? >= after {
                kept.push(event);
            }
        }
        events = kept;
    }
    Ok(events)
}

/// The check every read that passes stored events on as they are (GetSession, ListEvents,
/// WatchSession) applies to each event before it goes out: [`EncodedEvent::check`], and
/// the one error for an event that fails it (docs/semantics.md, "Event log and watches" 6).
fn check_stored(key: &SessionKey, event: &EncodedEvent) -> Result<()> {
    event.check().map_err(|reason| broken_event(key, event, reason))
}

/// `INTERNAL` naming the session, the event's sequence and what is wrong with its bytes.
fn broken_event(key: &SessionKey, event: &EncodedEvent, reason: String) -> AdkError {
    AdkError::Internal(format!(
        "stored event {} of session {} in app {} for user {} is broken: {reason}",
        event.sequence(),
        key.session_id,
        key.app_name,
        key.user_id
    ))
}

/// The session and the page of its log a ListEvents reads.
fn events_page(req: &ListEventsRequest) -> Result<(SessionKey, EventPage)> {
    let cursor = req.validate()?;
    let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
    let page = EventPage {
        cursor,
        newest_first: req.newest_first,
        size: page_size(req.page_size),
        _checked: Checked::new(),
    };
    Ok((key, page))
}

/// The reply to `req` from the events read, `sequence` reading an event's sequence.
fn page_of<E>(req: &ListEventsRequest, read: EventsRead<E>, sequence: impl Fn(&E) -> u64) -> ListEventsResponse<E> {
    let mut events = read.events;
    if req.newest_first {
        events.reverse();
    }
    let next_page_token = next_event_token(req, events.last().map(sequence), read.last_sequence);
    ListEventsResponse {
        events,
        next_page_token,
    }
}

/// The session and the events a Get reads.
fn get_read(req: &GetRequest) -> Result<(SessionKey, EventRead)> {
    req.validate()?;
    let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
    let read = EventRead {
        num_recent_events: req.num_recent_events,
        after: req.after,
        since_compaction: req.since_compaction,
        _checked: Checked::new(),
    };
    Ok((key, read))
}

impl<B: SessionBackend> CoreSessionService<B> {
    /// A checked request's event made ready for the log: its time (the store's when it
    /// was sent without one), id, no `temp:` keys, its delta split by scope; a partial
    /// event, which is never stored, as the append returns it.
    fn prepare_append(&self, req: AppendEventRequest) -> Prepared {
        let AppendEventRequest {
            app_name,
            user_id,
            session_id,
            mut event,
            timestamp_missing,
            precondition,
        } = req;
        let now = self.backend.now();
        // An event sent without a time happened when the store received it.
        if timestamp_missing {
            event.timestamp = now;
        }
        if event.is_partial() {
            return Prepared::Partial(Box::new(event));
        }
        if event.id.is_empty() {
            event.id = new_event_id();
        }
        without_temp_keys(&mut event.actions.state_delta);
        event.sequence = 0;
        Prepared::New(Box::new(NewEvent {
            delta: ScopedDelta::split(&event.actions.state_delta),
            window: WindowUpdate::of(&event),
            update_time: session_update_time(event.timestamp, now),
            now,
            key: SessionKey::new(&app_name, &user_id, &session_id),
            event,
            precondition,
            _checked: Checked::new(),
        }))
    }
}

/// An append's event as [`CoreSessionService::prepare_append`] leaves it.
/// Boxed: both are large, and an append moves one through.
enum Prepared {
    New(Box<NewEvent>),
    Partial(Box<Event>),
}

/// The owner a lease precondition names ("" without one), for the error of a lost lease.
fn lease_owner(new: &NewEvent) -> String {
    match &new.precondition {
        Some(Precondition::LeaseHeldBy(owner)) => owner.clone(),
        _ => String::new(),
    }
}

/// What an append's outcome means for its caller.
fn append_outcome(appended: Appended, key: &SessionKey, lease_owner: &str) -> Result<Event> {
    match appended {
        Appended::New(event) | Appended::Duplicate(event) => Ok(event),
        Appended::NotFound => Err(key.not_found()),
        Appended::Refused(Refusal::Modified) => {
            Err(AdkError::Aborted(Conflict::Precondition, MODIFIED_SINCE_LOADED.into()))
        }
        Appended::Refused(Refusal::LeaseLost) => Err(AdkError::Aborted(Conflict::LeaseLost, lease_lost(lease_owner))),
    }
}

#[async_trait]
impl<B: SessionBackend> SessionService for CoreSessionService<B> {
    async fn create(&self, req: CreateRequest) -> Result<Session> {
        req.validate()?;
        let ttl = req.effective_ttl(self.default_ttl)?;
        let session_id = req.session_id.filter(|id| !id.is_empty()).unwrap_or_else(new_event_id);
        let key = SessionKey::new(&req.app_name, &req.user_id, &session_id);
        let new = NewSession {
            state: ScopedDelta::split(&req.state),
            key: key.clone(),
            ttl,
            now: self.backend.now(),
            _checked: Checked::new(),
        };
        match self.backend.create(new).await? {
            Created::Stored(session) => Ok(session),
            Created::Exists => Err(key.already_exists()),
        }
    }

    async fn get(&self, req: GetRequest) -> Result<Session> {
        let (key, read) = get_read(&req)?;
        let mut session = self.backend.read(&key, &read).await?.ok_or_else(|| key.not_found())?;
        let events = std::mem::take(&mut session.events).into_vec();
        session.events = Events::new(keep_filtered(events, req.num_recent_events, req.after, |e| {
            Ok(e.timestamp)
        })?);
        Ok(session)
    }

    async fn get_encoded(&self, req: GetRequest) -> Result<EncodedSession> {
        let (key, read) = get_read(&req)?;
        let mut session = self
            .backend
            .read_encoded(&key, &read)
            .await?
            .ok_or_else(|| key.not_found())?;
        let events = std::mem::take(&mut session.events);
        for event in &events {
            check_stored(&key, event)?;
        }
        session.events = keep_filtered(events, req.num_recent_events, req.after, |event| {
            event.timestamp().map_err(|reason| broken_event(&key, event, reason))
        })?;
        Ok(session)
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        let after = req.validate()?;
        let size = page_size(req.page_size);
        let listing = SessionListing {
            request: req,
            after,
            limit: size + 1,
            _checked: Checked::new(),
        };
        let mut page = self.backend.list(&listing).await?;
        let next_page_token = (page.len() > size).then(|| page[size - 1].position.encode(&listing.request));
        page.truncate(size);
        Ok(ListResponse {
            sessions: page.into_iter().map(|listed| listed.session).collect(),
            next_page_token,
        })
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        self.backend.delete(&key).await
    }

    async fn append_event(&self, req: AppendEventRequest) -> Result<Event> {
        req.validate()?;
        // A partial event is a streaming fragment: the client sees it, the log never does.
        let new = match self.prepare_append(req) {
            Prepared::New(new) => *new,
            Prepared::Partial(partial) => return Ok(*partial),
        };
        let (key, owner) = (new.key.clone(), lease_owner(&new));
        append_outcome(self.backend.append(new).await?, &key, &owner)
    }

    async fn append_run_mark(&self, req: AppendEventRequest) -> Result<Event> {
        req.validate()?;
        if !matches!(req.precondition, Some(Precondition::LeaseHeldBy(_))) {
            return Err(AdkError::invalid(
                "precondition",
                "a run mark is written only by a runner holding the session's lease",
            ));
        }
        let not_a_position = || {
            AdkError::invalid(
                "event",
                "a run mark records a position: it is complete and changes no state or artifact",
            )
        };
        let actions = &req.event.actions;
        if !actions.state_delta.is_empty() || !actions.artifact_delta.is_empty() {
            return Err(not_a_position());
        }
        let Prepared::New(new) = self.prepare_append(req) else {
            return Err(not_a_position());
        };
        let new = *new;
        let (key, owner) = (new.key.clone(), lease_owner(&new));
        append_outcome(self.backend.append_run_mark(new).await?, &key, &owner)
    }

    async fn run_marks(&self, req: RunMarksRequest) -> Result<Vec<RunMark>> {
        validate::session_ids(&req.app_name, &req.user_id, &req.session_id)?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        self.backend.run_marks(&key).await
    }

    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse> {
        let (key, page) = events_page(&req)?;
        let read = self.backend.events(&key, &page).await?.ok_or_else(|| key.not_found())?;
        Ok(page_of(&req, read, |event| event.sequence))
    }

    async fn list_events_encoded(&self, req: ListEventsRequest) -> Result<ListEventsResponse<EncodedEvent>> {
        let (key, page) = events_page(&req)?;
        let read = self
            .backend
            .events_encoded(&key, &page)
            .await?
            .ok_or_else(|| key.not_found())?;
        for event in &read.events {
            check_stored(&key, event)?;
        }
        Ok(page_of(&req, read, EncodedEvent::sequence))
    }

    async fn watch(&self, req: WatchRequest) -> Result<EventStream> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        self.backend
            .watch(&key, req.after_sequence)
            .await?
            .ok_or_else(|| key.not_found())
    }

    async fn watch_encoded(&self, req: WatchRequest) -> Result<EncodedEventStream> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let events = self
            .backend
            .watch_encoded(&key, req.after_sequence)
            .await?
            .ok_or_else(|| key.not_found())?;
        // A broken event ends the stream with its error, as it fails the other two reads.
        Ok(Box::pin(events.map(move |event| {
            let event = event?;
            check_stored(&key, &event)?;
            Ok(event)
        })))
    }

    async fn user_state(&self, req: UserStateRequest) -> Result<ScopeState> {
        req.validate()?;
        self.backend.user_state(&Valid::new(req)).await
    }

    async fn app_state(&self, req: AppStateRequest) -> Result<ScopeState> {
        req.validate()?;
        self.backend.app_state(&Valid::new(req)).await
    }

    async fn update_app_state(&self, req: UpdateAppStateRequest) -> Result<ScopeState> {
        req.validate()?;
        let write = AppStateWrite {
            fields: req.app_fields(),
            app_name: req.app_name,
            _checked: Checked::new(),
        };
        self.backend.update_app_state(write).await
    }

    async fn fork(&self, req: ForkRequest) -> Result<Session> {
        req.validate()?;
        let source = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let fork = SessionKey::new(&req.app_name, &req.user_id, &req.fork_id());
        let plan = ForkPlan {
            source: source.clone(),
            fork: fork.clone(),
            up_to_event_id: req.up_to_event_id.clone(),
            now: self.backend.now(),
            _checked: Checked::new(),
        };
        match self.backend.fork(plan).await? {
            Forked::Stored(session) => Ok(session),
            Forked::SourceNotFound => Err(source.not_found()),
            Forked::EventNotFound => Err(req.event_not_found()),
            Forked::Exists => Err(fork.already_exists()),
        }
    }

    async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::filter_events;
    use chrono::TimeZone;

    #[test]
    fn filtering_in_place_keeps_what_the_filters_keep() {
        let events: Vec<Event> = (1..=6)
            .map(|i| {
                let mut e = Event::new("i");
                e.sequence = i;
                // Clocks are not order: the last event is stamped first.
                e.timestamp = Utc.timestamp_opt(if i == 6 { 0 } else { i as i64 * 10 }, 0).unwrap();
                e
            })
            .collect();
        let at = |secs| Some(Utc.timestamp_opt(secs, 0).unwrap());
        for recent in [None, Some(0), Some(2), Some(99)] {
            for after in [None, at(30), at(0), at(99)] {
                let kept = keep_filtered(events.clone(), recent, after, |e| Ok(e.timestamp)).unwrap();
                assert_eq!(
                    kept,
                    filter_events(&events, recent, after),
                    "recent {recent:?}, after {after:?}"
                );
                // Encoded, the same events are kept.
                let encoded = events.iter().map(EncodedEvent::encode).collect();
                let kept_encoded = keep_filtered(encoded, recent, after, |e| Ok(e.timestamp().unwrap())).unwrap();
                let expected: Vec<_> = kept.iter().map(EncodedEvent::encode).collect();
                assert_eq!(kept_encoded, expected, "encoded: recent {recent:?}, after {after:?}");
            }
        }
    }
}
