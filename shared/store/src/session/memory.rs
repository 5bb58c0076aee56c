//! `InMemorySessionBackend`: sessions in one process's memory, with nothing to set up,
//! under the core session service (`adk_grpc_core::CoreSessionService`), which owns every
//! rule; this file only stores and reads, under one lock (so each write is atomic).
//!
//! Expired sessions are dropped when looked up, and by a background reaper every
//! [`REAP_INTERVAL`] (started by the first session created with a TTL; it holds only a
//! weak reference, so it ends once the store is dropped), so sessions nobody asks for
//! again do not stay in memory.

use crate::artifact::memory::InMemoryArtifactBackend;
use crate::lease::memory::InMemorySessionLease;
use adk_grpc_core::history::{WindowUpdate, window_from};
use adk_grpc_core::session::backend::{
    AppStateWrite, Appended, Created, EventPage, EventRead, EventsRead, ForkPlan, Forked, ListedSession, NewEvent,
    NewSession, SessionBackend, SessionKey, SessionListing, Valid,
};
use adk_grpc_core::session::{SessionCursor, filter_events};
use adk_grpc_core::state::{ScopedDelta, merge_state};
use adk_grpc_core::sync;
use adk_grpc_core::{AppStateRequest, Clock, ScopeState, UserStateRequest};
use adk_grpc_core::{Event, EventStream, Events, Result, RunMark, Session};
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
    /// Positions kept beside the log (`SessionBackend::append_run_mark`), oldest first.
    run_marks: Vec<RunMark>,
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
    fn session_mut(&mut self, key: &SessionKey) -> Option<&mut StoredSession> {
        if self.sessions.get(key).is_some_and(|s| s.is_expired(self.clock.now())) {
            self.sessions.remove(key);
        }
        self.sessions.get_mut(key)
    }

    /// Drops every expired session (their watchers end with `NOT_FOUND`).
    fn reap(&mut self, now: DateTime<Utc>) {
        self.sessions.retain(|_, session| !session.is_expired(now));
    }

    fn merged_state(&self, key: &SessionKey, session: &StoredSession) -> adk_grpc_core::StateMap {
        let app = self.app_state.get(&key.app_name).cloned().unwrap_or_default();
        let user = self
            .user_state
            .get(&(key.app_name.clone(), key.user_id.clone()))
            .cloned()
            .unwrap_or_default();
        merge_state(app, user, session.state.clone())
    }

    fn apply_shared_scopes(&mut self, key: &SessionKey, delta: &mut ScopedDelta) {
        let app = std::mem::take(&mut delta.app);
        let user = std::mem::take(&mut delta.user);
        self.app_state.entry(key.app_name.clone()).or_default().extend(app);
        self.user_state
            .entry((key.app_name.clone(), key.user_id.clone()))
            .or_default()
            .extend(user);
    }

    fn to_session(&self, key: &SessionKey, stored: &StoredSession, events: Vec<Event>) -> Session {
        Session {
            id: key.session_id.clone(),
            app_name: key.app_name.clone(),
            user_id: key.user_id.clone(),
            state: self.merged_state(key, stored),
            events: Events::new(events),
            create_time: stored.create_time,
            last_update_time: stored.last_update_time,
            event_count: stored.last_sequence(),
            expire_time: stored.expire_time,
        }
    }
}

/// Sessions held in this process's memory; gone when it exits.
#[derive(Clone)]
pub struct InMemorySessionBackend {
    inner: Arc<Mutex<Inner>>,
    reap_interval: Duration,
    /// The artifact store deployed with this one, if any: DeleteSession deletes the session's artifacts there.
    artifacts: Option<InMemoryArtifactBackend>,
    /// The session leases runners over this store take (see [`Self::leases`]): appends
    /// fenced with `Precondition::LeaseHeldBy` are checked against them.
    leases: InMemorySessionLease,
    /// The same clock as `Inner::clock` (clones share it), read without the lock.
    clock: Clock,
}

impl Default for InMemorySessionBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemorySessionBackend {
    pub fn new() -> Self {
        InMemorySessionBackend {
            inner: Arc::default(),
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
    pub fn with_artifacts(mut self, artifacts: InMemoryArtifactBackend) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        sync::lock(&self.inner)
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

/// Drops expired sessions every `every` while the store exists.
async fn reap_until_dropped(store: Weak<Mutex<Inner>>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = store.upgrade() else { return };
        let mut inner = sync::lock(&inner);
        let now = inner.clock.now();
        inner.reap(now);
    }
}

#[async_trait]
impl SessionBackend for InMemorySessionBackend {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    async fn create(&self, new: NewSession) -> Result<Created> {
        let NewSession {
            key,
            mut state,
            ttl,
            now,
            ..
        } = new;
        let mut inner = self.lock();
        if inner.session_mut(&key).is_some() {
            return Ok(Created::Exists);
        }
        inner.apply_shared_scopes(&key, &mut state);
        let mut stored = StoredSession {
            create_time: now,
            last_update_time: now,
            state: state.session,
            events: Vec::new(),
            event_index: HashMap::new(),
            ttl,
            expire_time: None,
            window_start: 0,
            appended: watch::Sender::new(0),
            run_marks: Vec::new(),
        };
        stored.refresh_expiry(now);
        if ttl.is_some() {
            self.ensure_reaper(&mut inner);
        }
        let session = inner.to_session(&key, &stored, Vec::new());
        inner.sessions.insert(key, stored);
        Ok(Created::Stored(session))
    }

    async fn read(&self, key: &SessionKey, read: &EventRead) -> Result<Option<Session>> {
        let mut inner = self.lock();
        let Some(stored) = inner.session_mut(key) else {
            return Ok(None);
        };
        let window = match read.since_compaction {
            true => &stored.events[stored.window_start.saturating_sub(1) as usize..],
            false => &stored.events[..],
        };
        // Copies only the events the filters keep.
        let events = filter_events(window, read.num_recent_events, read.after);
        let stored = &inner.sessions[key];
        Ok(Some(inner.to_session(key, stored, events)))
    }

    async fn list(&self, listing: &SessionListing) -> Result<Vec<ListedSession>> {
        let req = &listing.request;
        let now = self.clock.now();
        let inner = self.lock();
        let mut rows: Vec<(SessionCursor, &SessionKey, &StoredSession)> = inner
            .sessions
            .iter()
            .filter(|(key, stored)| {
                key.app_name == req.app_name
                    && req.user_id.as_ref().is_none_or(|u| *u == key.user_id)
                    && !stored.is_expired(now)
            })
            .map(|(key, stored)| {
                let position = listing.position(stored.last_update_time, &key.user_id, &key.session_id);
                (position, key, stored)
            })
            .filter(|(position, ..)| listing.follows_cursor(position))
            .collect();
        rows.sort_by(|a, b| (a.0.update_micros, &a.0.member).cmp(&(b.0.update_micros, &b.0.member)));
        Ok(rows
            .into_iter()
            .take(listing.limit)
            .map(|(position, key, stored)| ListedSession {
                position,
                session: inner.to_session(key, stored, Vec::new()),
            })
            .collect())
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        let mut inner = self.lock();
        inner.sessions.remove(key);
        // Still under the session lock, so a re-create of this id cannot come in between.
        if let Some(artifacts) = &self.artifacts {
            artifacts.delete_session_artifacts(&key.app_name, &key.user_id, &key.session_id);
        }
        Ok(())
    }

    async fn append(&self, new: NewEvent) -> Result<Appended> {
        let mut inner = self.lock();
        let Some(stored) = inner.session_mut(&new.key) else {
            return Ok(Appended::NotFound);
        };
        if let Some(&index) = stored.event_index.get(&new.event.id) {
            return Ok(Appended::Duplicate(stored.events[index].clone()));
        }
        // Checked under the session lock, so atomic with the append as in Redis.
        let last_id = stored.events.last().map(|e| e.id.as_str());
        if let Some(refusal) = new.refusal(stored.last_sequence(), last_id, |lease, owner| {
            self.leases.fence_allows(lease, owner)
        }) {
            return Ok(Appended::Refused(refusal));
        }
        let NewEvent {
            key,
            mut event,
            mut delta,
            window,
            update_time,
            now,
            ..
        } = new;
        event.sequence = stored.last_sequence() + 1;
        match window {
            WindowUpdate::Keep => {}
            WindowUpdate::Reset => stored.window_start = 0,
            WindowUpdate::From { micros } => stored.window_start = window_from(&stored.events, micros, event.sequence),
        }
        stored.state.extend(std::mem::take(&mut delta.session));
        stored.event_index.insert(event.id.clone(), stored.events.len());
        stored.events.push(event.clone());
        stored.last_update_time = update_time;
        stored.refresh_expiry(now);
        stored.appended.send_replace(event.sequence);
        inner.apply_shared_scopes(&key, &mut delta);
        Ok(Appended::New(event))
    }

    async fn append_run_mark(&self, new: NewEvent) -> Result<Appended> {
        let mut inner = self.lock();
        let Some(stored) = inner.session_mut(&new.key) else {
            return Ok(Appended::NotFound);
        };
        // Checked under the session lock, so atomic with the write, as for an append.
        let last_id = stored.events.last().map(|e| e.id.as_str());
        if let Some(refusal) = new.refusal(stored.last_sequence(), last_id, |lease, owner| {
            self.leases.fence_allows(lease, owner)
        }) {
            return Ok(Appended::Refused(refusal));
        }
        stored.run_marks.push(RunMark {
            after_sequence: stored.last_sequence(),
            event: new.event.clone(),
        });
        Ok(Appended::New(new.event))
    }

    async fn run_marks(&self, key: &SessionKey) -> Result<Vec<RunMark>> {
        let mut inner = self.lock();
        Ok(inner
            .session_mut(key)
            .map(|stored| stored.run_marks.clone())
            .unwrap_or_default())
    }

    async fn user_state(&self, req: &Valid<UserStateRequest>) -> Result<ScopeState> {
        let inner = self.lock();
        let key = (req.app_name.clone(), req.user_id.clone());
        Ok(inner.user_state.get(&key).cloned().unwrap_or_default())
    }

    async fn app_state(&self, req: &Valid<AppStateRequest>) -> Result<ScopeState> {
        Ok(self.lock().app_state.get(&req.app_name).cloned().unwrap_or_default())
    }

    async fn update_app_state(&self, write: AppStateWrite) -> Result<ScopeState> {
        let mut inner = self.lock();
        let state = inner.app_state.entry(write.app_name).or_default();
        state.extend(write.fields);
        Ok(state.clone())
    }

    async fn fork(&self, plan: ForkPlan) -> Result<Forked> {
        let mut inner = self.lock();
        let Some(source) = inner.session_mut(&plan.source) else {
            return Ok(Forked::SourceNotFound);
        };
        let Some(&last) = source.event_index.get(&plan.up_to_event_id) else {
            return Ok(Forked::EventNotFound);
        };
        let events = source.events[..=last].to_vec();
        let ttl = source.ttl;
        if inner.session_mut(&plan.fork).is_some() {
            return Ok(Forked::Exists);
        }
        let contents = plan.contents(&events);
        let mut fork = StoredSession {
            create_time: plan.now,
            last_update_time: contents.update_time,
            state: contents.session_state,
            event_index: events.iter().enumerate().map(|(i, e)| (e.id.clone(), i)).collect(),
            appended: watch::Sender::new(events.len() as u64),
            events,
            ttl,
            expire_time: None,
            window_start: contents.window_start,
            // A fork is a new session's log: no run of the source goes on in it.
            run_marks: Vec::new(),
        };
        fork.refresh_expiry(plan.now);
        if ttl.is_some() {
            self.ensure_reaper(&mut inner);
        }
        let session = inner.to_session(&plan.fork, &fork, fork.events.clone());
        inner.sessions.insert(plan.fork, fork);
        Ok(Forked::Stored(session))
    }

    async fn events(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead>> {
        let mut inner = self.lock();
        let Some(stored) = inner.session_mut(key) else {
            return Ok(None);
        };
        let last_sequence = stored.last_sequence();
        let events = match page.range(last_sequence) {
            Some((from, to)) => stored.events[(from - 1) as usize..to as usize].to_vec(),
            None => Vec::new(),
        };
        Ok(Some(EventsRead { events, last_sequence }))
    }

    async fn watch(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EventStream>> {
        let (appended, start) = {
            let mut inner = self.lock();
            let Some(stored) = inner.session_mut(key) else {
                return Ok(None);
            };
            (
                stored.appended.subscribe(),
                after_sequence.unwrap_or(stored.last_sequence()),
            )
        };
        let watcher = Watcher {
            store: self.clone(),
            key: key.clone(),
            appended,
            sent: start,
            pending: VecDeque::new(),
        };
        Ok(Some(
            futures::stream::unfold(Some(watcher), |watcher| async move {
                let mut watcher = watcher?;
                match watcher.next_event().await {
                    Ok(event) => Some((Ok(event), Some(watcher))),
                    // After an error the stream ends.
                    Err(err) => Some((Err(err), None)),
                }
            })
            .boxed(),
        ))
    }
}

/// One client's position in a watched session.
struct Watcher {
    store: InMemorySessionBackend,
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
                let stored = inner.session_mut(&self.key).ok_or_else(|| self.key.not_found())?;
                self.appended.mark_unchanged();
                let unsent = stored.events.get(self.sent as usize..).unwrap_or_default();
                self.pending.extend(unsent.iter().cloned());
            }
            if self.pending.is_empty() && self.appended.changed().await.is_err() {
                // The sender lives in the session: it is gone when the session is deleted.
                return Err(self.key.not_found());
            }
        }
    }
}
