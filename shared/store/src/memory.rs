//! `InMemorySessionService`: every rule of the contract, in one process, with
//! nothing to set up. The reference the Redis backend is tested against.
//!
//! Expired sessions are dropped when looked up, and by a background reaper every
//! [`REAP_INTERVAL`] (started by the first session created with a TTL; it holds only a
//! weak reference, so it ends once the store is dropped), so sessions nobody asks for
//! again do not stay in memory.

use crate::StoreConfig;
use crate::artifact::memory::InMemoryArtifactService;
use crate::lease::InMemorySessionLease;
use adk_core::history::{WindowUpdate, session_state_through, window_from, window_start};
use adk_core::session::{
    EventCursor, MODIFIED_SINCE_LOADED, SessionCursor, event_page_range, filter_events, lease_lost, next_event_token,
    session_update_time,
};
use adk_core::state::{ScopedDelta, merge_state, without_temp_keys};
use adk_core::validate::page_size;
use adk_core::{
    AdkError, AppendEventRequest, CreateRequest, DeleteRequest, Event, EventStream, Events, ForkRequest, GetRequest,
    LeaseKey, ListEventsRequest, ListEventsResponse, ListRequest, ListResponse, Precondition, Result, Session,
    SessionService, WatchRequest, new_event_id,
};
use adk_core::{AppStateRequest, Clock, ScopeState, UpdateAppStateRequest, UserStateRequest};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the reaper drops expired sessions. Each pass scans every session once,
/// under the store's lock.
pub const REAP_INTERVAL: Duration = Duration::from_secs(10);

type StateFields = HashMap<String, Value>;

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct SessionKey {
    app: String,
    user: String,
    session: String,
}

impl SessionKey {
    fn new(app: &str, user: &str, session: &str) -> Self {
        SessionKey {
            app: app.into(),
            user: user.into(),
            session: session.into(),
        }
    }
}

struct StoredSession {
    create_time: DateTime<Utc>,
    last_update_time: DateTime<Utc>,
    state: StateFields,
    events: Vec<Event>,
    /// Event id -> index in `events`, for idempotent re-appends.
    event_index: HashMap<String, usize>,
    ttl: Option<Duration>,
    expire_time: Option<DateTime<Utc>>,
    /// The first sequence of the bounded-read window (`GetRequest::since_compaction`);
    /// 0 (or 1) reads the whole log.
    window_start: u64,
    /// Tells watchers the last sequence; dropped with the session, which ends them.
    appended: watch::Sender<u64>,
}

impl StoredSession {
    fn last_sequence(&self) -> u64 {
        self.events.len() as u64
    }

    fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expire_time.is_some_and(|t| t <= now)
    }

    fn refresh_expiry(&mut self, now: DateTime<Utc>) {
        // TTLs are validated (at most 100 years), so this never saturates; checked anyway,
        // so no TTL can panic the store.
        self.expire_time = self.ttl.map(|ttl| {
            chrono::TimeDelta::from_std(ttl)
                .ok()
                .and_then(|ttl| now.checked_add_signed(ttl))
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        });
    }
}

#[derive(Default)]
struct Inner {
    app_state: HashMap<String, StateFields>,
    user_state: HashMap<(String, String), StateFields>,
    sessions: BTreeMap<SessionKey, StoredSession>,
    /// The background task dropping expired sessions, once a session has a TTL.
    reaper: Option<JoinHandle<()>>,
    /// What "now" is for timestamps and expiry (tests advance a manual one).
    clock: Clock,
}

impl Inner {
    /// The live session under `key`; an expired one is removed on the way, as Redis would.
    fn session_mut(&mut self, key: &SessionKey) -> Result<&mut StoredSession> {
        if self.sessions.get(key).is_some_and(|s| s.is_expired(self.clock.now())) {
            self.sessions.remove(key);
        }
        self.sessions.get_mut(key).ok_or_else(|| not_found(key))
    }

    /// Drops every expired session (their watchers end with `NOT_FOUND`).
    fn reap(&mut self, now: DateTime<Utc>) {
        self.sessions.retain(|_, session| !session.is_expired(now));
    }

    fn merged_state(&self, key: &SessionKey, session: &StoredSession) -> adk_core::StateMap {
        let app = self.app_state.get(&key.app).cloned().unwrap_or_default();
        let user = self
            .user_state
            .get(&(key.app.clone(), key.user.clone()))
            .cloned()
            .unwrap_or_default();
        merge_state(app, user, session.state.clone())
    }

    fn apply_shared_scopes(&mut self, key: &SessionKey, delta: &mut ScopedDelta) {
        let app = std::mem::take(&mut delta.app);
        let user = std::mem::take(&mut delta.user);
        self.app_state.entry(key.app.clone()).or_default().extend(app);
        self.user_state
            .entry((key.app.clone(), key.user.clone()))
            .or_default()
            .extend(user);
    }

    fn to_session(&self, key: &SessionKey, stored: &StoredSession, events: Vec<Event>) -> Session {
        Session {
            id: key.session.clone(),
            app_name: key.app.clone(),
            user_id: key.user.clone(),
            state: self.merged_state(key, stored),
            events: Events::new(events),
            create_time: stored.create_time,
            last_update_time: stored.last_update_time,
            event_count: stored.last_sequence(),
            expire_time: stored.expire_time,
        }
    }
}

fn not_found(key: &SessionKey) -> AdkError {
    AdkError::NotFound(
        adk_core::Missing::Session,
        format!(
            "session {} not found in app {} for user {}",
            key.session, key.app, key.user
        ),
    )
}

/// Sessions held in this process's memory; gone when it exits.
#[derive(Clone)]
pub struct InMemorySessionService {
    inner: Arc<Mutex<Inner>>,
    config: StoreConfig,
    reap_interval: Duration,
    /// The artifact store deployed with this one, if any: DeleteSession deletes the session's artifacts there.
    artifacts: Option<InMemoryArtifactService>,
    /// The session leases runners over this store take (see [`Self::leases`]): appends
    /// fenced with `Precondition::LeaseHeldBy` are checked against them.
    leases: InMemorySessionLease,
    /// The same clock as `Inner::clock` (clones share it), read without the lock.
    clock: Clock,
}

impl Default for InMemorySessionService {
    fn default() -> Self {
        Self::with_config(StoreConfig::default())
    }
}

impl InMemorySessionService {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_config(config: StoreConfig) -> Self {
        InMemorySessionService {
            inner: Arc::default(),
            config,
            reap_interval: REAP_INTERVAL,
            artifacts: None,
            leases: InMemorySessionLease::new(),
            clock: Clock::system(),
        }
    }

    /// The session leases that fence appends to this store: the leases a runner over
    /// this store should take (clones share them). Appends of a runner whose leases
    /// are another instance are not fenced.
    pub fn leases(&self) -> InMemorySessionLease {
        self.leases.clone()
    }

    /// Links the artifact store used with this session store (the same process, as in
    /// `adk-server` with `memory://`): DeleteSession then deletes the session's own
    /// artifacts in it, as the Redis stores do through the Redis they share.
    pub fn with_artifacts(mut self, artifacts: InMemoryArtifactService) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Sessions held in memory, expired ones the reaper has not dropped yet included.
    pub fn stored_session_count(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Starts the reaper unless it runs (it ends with the runtime that ran it: a store
    /// used from a later runtime gets a new one). Outside a Tokio runtime (another
    /// executor) there is none, and expired sessions are dropped only when looked up.
    fn ensure_reaper(&self, inner: &mut Inner) {
        if inner.reaper.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = Arc::downgrade(&self.inner);
        inner.reaper = Some(runtime.spawn(reap_until_dropped(store, self.reap_interval)));
    }

    /// The same store reading time from `clock` (and its leases too): tests pass a
    /// [`Clock::manual`] and advance it past a TTL instead of sleeping.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.lock().clock = clock.clone();
        self.clock = clock.clone();
        self.leases = InMemorySessionLease::new().with_clock(clock);
        self
    }

    /// The same store with the reaper running every `every` instead of [`REAP_INTERVAL`]
    /// (tests use a short one).
    pub fn with_reap_interval(mut self, every: Duration) -> Self {
        self.reap_interval = every;
        self
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding the lock cannot leave a half-applied append
    // (every mutation completes before any fallible step), so poisoning is safe to ignore.
    inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Drops expired sessions every `every` while the store exists.
async fn reap_until_dropped(store: Weak<Mutex<Inner>>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = store.upgrade() else { return };
        let mut inner = lock(&inner);
        let now = inner.clock.now();
        inner.reap(now);
    }
}

#[async_trait]
impl SessionService for InMemorySessionService {
    async fn create(&self, req: CreateRequest) -> Result<Session> {
        req.validate()?;
        let ttl = req.effective_ttl(self.config.default_session_ttl)?;
        let session_id = req.session_id.filter(|id| !id.is_empty()).unwrap_or_else(new_event_id);
        let key = SessionKey::new(&req.app_name, &req.user_id, &session_id);
        let mut inner = self.lock();
        if inner.session_mut(&key).is_ok() {
            return Err(AdkError::AlreadyExists(
                adk_core::Existing::Session,
                format!(
                    "session {session_id} already exists in app {} for user {}",
                    key.app, key.user
                ),
            ));
        }
        let mut delta = ScopedDelta::split(&req.state);
        inner.apply_shared_scopes(&key, &mut delta);
        let now = self.clock.now();
        let mut stored = StoredSession {
            create_time: now,
            last_update_time: now,
            state: delta.session,
            events: Vec::new(),
            event_index: HashMap::new(),
            ttl,
            expire_time: None,
            window_start: 0,
            appended: watch::Sender::new(0),
        };
        stored.refresh_expiry(now);
        if ttl.is_some() {
            self.ensure_reaper(&mut inner);
        }
        let session = inner.to_session(&key, &stored, Vec::new());
        inner.sessions.insert(key, stored);
        Ok(session)
    }

    async fn get(&self, req: GetRequest) -> Result<Session> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let mut inner = self.lock();
        let stored = inner.session_mut(&key)?;
        let window = match req.since_compaction {
            true => &stored.events[stored.window_start.saturating_sub(1) as usize..],
            false => &stored.events[..],
        };
        let events = filter_events(window, req.num_recent_events, req.after);
        let stored = &inner.sessions[&key];
        Ok(inner.to_session(&key, stored, events))
    }

    async fn list(&self, req: ListRequest) -> Result<ListResponse> {
        let cursor = req.validate()?;
        let now = self.clock.now();
        let inner = self.lock();
        // Listing order is (last update, index member), as in the Redis backend.
        let mut rows: Vec<(i64, String, &SessionKey, &StoredSession)> = inner
            .sessions
            .iter()
            .filter(|(key, stored)| {
                key.app == req.app_name
                    && req.user_id.as_ref().is_none_or(|u| *u == key.user)
                    && !stored.is_expired(now)
            })
            .map(|(key, stored)| {
                let member = SessionCursor::member(&req, &key.user, &key.session);
                (stored.last_update_time.timestamp_micros(), member, key, stored)
            })
            .filter(|(micros, member, ..)| cursor.as_ref().is_none_or(|c| c.is_before(*micros, member)))
            .collect();
        rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let size = page_size(req.page_size);
        let next_page_token = (rows.len() > size).then(|| {
            let (micros, member, ..) = &rows[size - 1];
            SessionCursor {
                update_micros: *micros,
                member: member.clone(),
            }
            .encode(&req)
        });
        let sessions = rows
            .iter()
            .take(size)
            .map(|(_, _, key, stored)| inner.to_session(key, stored, Vec::new()));
        Ok(ListResponse {
            sessions: sessions.collect(),
            next_page_token,
        })
    }

    async fn delete(&self, req: DeleteRequest) -> Result<()> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let mut inner = self.lock();
        inner.sessions.remove(&key);
        // Still under the session lock, so a re-create of this id cannot come in between.
        if let Some(artifacts) = &self.artifacts {
            artifacts.delete_session_artifacts(&key.app, &key.user, &key.session);
        }
        Ok(())
    }

    async fn append_event(&self, req: AppendEventRequest) -> Result<Event> {
        req.validate()?;
        let mut event = req.event;
        if event.is_partial() {
            return Ok(event);
        }
        if event.id.is_empty() {
            event.id = new_event_id();
        }
        without_temp_keys(&mut event.actions.state_delta);
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let mut inner = self.lock();
        let stored = inner.session_mut(&key)?;
        if let Some(&index) = stored.event_index.get(&event.id) {
            return Ok(stored.events[index].clone());
        }
        let unchanged = match &req.precondition {
            None => true,
            Some(Precondition::LastSequence(seq)) => *seq == stored.last_sequence(),
            Some(Precondition::LastEventId(id)) => stored.events.last().is_some_and(|e| e.id == *id),
            Some(Precondition::LeaseHeldBy(owner)) => {
                let lease = LeaseKey {
                    app_name: req.app_name.clone(),
                    user_id: req.user_id.clone(),
                    session_id: req.session_id.clone(),
                };
                // Checked under the session lock, so atomic with the append as in Redis.
                if !self.leases.fence_allows(&lease, owner) {
                    return Err(AdkError::Aborted(adk_core::Conflict::LeaseLost, lease_lost(owner)));
                }
                true
            }
        };
        if !unchanged {
            return Err(AdkError::Aborted(
                adk_core::Conflict::Precondition,
                MODIFIED_SINCE_LOADED.into(),
            ));
        }
        event.sequence = stored.last_sequence() + 1;
        match WindowUpdate::of(&event) {
            WindowUpdate::Keep => {}
            WindowUpdate::Reset => stored.window_start = 0,
            WindowUpdate::From { micros } => stored.window_start = window_from(&stored.events, micros, event.sequence),
        }
        let mut delta = ScopedDelta::split(&event.actions.state_delta);
        stored.state.extend(std::mem::take(&mut delta.session));
        stored.event_index.insert(event.id.clone(), stored.events.len());
        stored.events.push(event.clone());
        let now = self.clock.now();
        stored.last_update_time = session_update_time(event.timestamp, now);
        stored.refresh_expiry(now);
        stored.appended.send_replace(event.sequence);
        inner.apply_shared_scopes(&key, &mut delta);
        Ok(event)
    }

    async fn user_state(&self, req: UserStateRequest) -> Result<ScopeState> {
        req.validate()?;
        let inner = self.lock();
        let key = (req.app_name, req.user_id);
        Ok(inner.user_state.get(&key).cloned().unwrap_or_default())
    }

    async fn app_state(&self, req: AppStateRequest) -> Result<ScopeState> {
        req.validate()?;
        Ok(self.lock().app_state.get(&req.app_name).cloned().unwrap_or_default())
    }

    async fn update_app_state(&self, req: UpdateAppStateRequest) -> Result<ScopeState> {
        req.validate()?;
        let mut inner = self.lock();
        let state = inner.app_state.entry(req.app_name.clone()).or_default();
        state.extend(req.app_fields());
        Ok(state.clone())
    }

    async fn fork(&self, req: ForkRequest) -> Result<Session> {
        req.validate()?;
        let fork_id = req.fork_id();
        let source_key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let fork_key = SessionKey::new(&req.app_name, &req.user_id, &fork_id);
        let mut inner = self.lock();
        let source = inner.session_mut(&source_key)?;
        let &last = source
            .event_index
            .get(&req.up_to_event_id)
            .ok_or_else(|| req.event_not_found())?;
        let events = source.events[..=last].to_vec();
        let ttl = source.ttl;
        if inner.session_mut(&fork_key).is_ok() {
            return Err(AdkError::AlreadyExists(
                adk_core::Existing::Session,
                format!(
                    "session {fork_id} already exists in app {} for user {}",
                    fork_key.app, fork_key.user
                ),
            ));
        }
        let now = self.clock.now();
        let last_event_time = events.last().map_or(now, |e| session_update_time(e.timestamp, now));
        let mut fork = StoredSession {
            create_time: now,
            last_update_time: last_event_time,
            state: ScopedDelta::split(&session_state_through(&events)).session,
            event_index: events.iter().enumerate().map(|(i, e)| (e.id.clone(), i)).collect(),
            appended: watch::Sender::new(events.len() as u64),
            events,
            ttl,
            expire_time: None,
            window_start: 0,
        };
        fork.window_start = window_start(&fork.events);
        fork.refresh_expiry(now);
        if ttl.is_some() {
            self.ensure_reaper(&mut inner);
        }
        let session = inner.to_session(&fork_key, &fork, fork.events.clone());
        inner.sessions.insert(fork_key, fork);
        Ok(session)
    }

    async fn list_events(&self, req: ListEventsRequest) -> Result<ListEventsResponse> {
        let cursor: Option<EventCursor> = req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let mut inner = self.lock();
        let stored = inner.session_mut(&key)?;
        let last = stored.last_sequence();
        let mut events: Vec<Event> = match event_page_range(cursor, req.newest_first, page_size(req.page_size), last) {
            Some((from, to)) => stored.events[(from - 1) as usize..to as usize].to_vec(),
            None => Vec::new(),
        };
        if req.newest_first {
            events.reverse();
        }
        let next_page_token = next_event_token(&req, &events, last);
        Ok(ListEventsResponse {
            events,
            next_page_token,
        })
    }

    async fn watch(&self, req: WatchRequest) -> Result<EventStream> {
        req.validate()?;
        let key = SessionKey::new(&req.app_name, &req.user_id, &req.session_id);
        let (appended, start) = {
            let mut inner = self.lock();
            let stored = inner.session_mut(&key)?;
            (
                stored.appended.subscribe(),
                req.after_sequence.unwrap_or(stored.last_sequence()),
            )
        };
        let watcher = Watcher {
            store: self.clone(),
            key,
            appended,
            sent: start,
            pending: VecDeque::new(),
        };
        Ok(futures::stream::unfold(Some(watcher), |watcher| async move {
            let mut watcher = watcher?;
            match watcher.next_event().await {
                Ok(event) => Some((Ok(event), Some(watcher))),
                // After an error the stream ends.
                Err(err) => Some((Err(err), None)),
            }
        })
        .boxed())
    }
}

/// One client's position in a watched session.
struct Watcher {
    store: InMemorySessionService,
    key: SessionKey,
    appended: watch::Receiver<u64>,
    sent: u64,
    pending: VecDeque<Event>,
}

impl Watcher {
    async fn next_event(&mut self) -> Result<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.sent = event.sequence;
                return Ok(event);
            }
            {
                let mut inner = self.store.lock();
                let stored = inner.session_mut(&self.key)?;
                self.appended.mark_unchanged();
                let unsent = stored.events.get(self.sent as usize..).unwrap_or_default();
                self.pending.extend(unsent.iter().cloned());
            }
            if self.pending.is_empty() && self.appended.changed().await.is_err() {
                // The sender lives in the session: it is gone when the session is deleted.
                return Err(not_found(&self.key));
            }
        }
    }
}
