//! The structure of the session layer, proved: a minimal backend (a map under a lock,
//! a couple of hundred lines that store and read, and no rule) passes the conformance
//! suite's rule cases under `CoreSessionService`, so adding a store never means
//! writing a rule again. It keeps no watch hub (a watch replays the stored events and
//! then waits) and drops an expired session when it is next looked up; the suite's
//! live-watch and expiry cases stay with the real backends.

use adk_grpc_core::history::{WindowUpdate, window_from};
use adk_grpc_core::session::backend::{
    AppStateWrite, Appended, Created, EventPage, EventRead, EventsRead, ForkPlan, Forked, ListedSession, NewEvent,
    NewSession, SessionBackend, SessionKey, SessionListing, Valid,
};
use adk_grpc_core::state::merge_state;
use adk_grpc_core::{
    AppStateRequest, CoreSessionService, Event, EventStream, Events, Result, RunMark, ScopeState, Session,
    UserStateRequest,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

struct Stored {
    create_time: DateTime<Utc>,
    update_time: DateTime<Utc>,
    state: ScopeState,
    events: Vec<Event>,
    ttl: Option<Duration>,
    expire_time: Option<DateTime<Utc>>,
    window_start: u64,
    run_marks: Vec<RunMark>,
}

impl Stored {
    fn renew(&mut self, now: DateTime<Utc>) {
        self.expire_time = self.ttl.map(|ttl| now + chrono::TimeDelta::from_std(ttl).unwrap());
    }
}

#[derive(Default)]
struct Maps {
    sessions: BTreeMap<SessionKey, Stored>,
    app: HashMap<String, ScopeState>,
    user: HashMap<(String, String), ScopeState>,
}

impl Maps {
    fn live(&mut self, key: &SessionKey) -> Option<&mut Stored> {
        if self
            .sessions
            .get(key)
            .is_some_and(|s| s.expire_time.is_some_and(|t| t <= Utc::now()))
        {
            self.sessions.remove(key);
        }
        self.sessions.get_mut(key)
    }

    fn session(&self, key: &SessionKey, stored: &Stored, events: Vec<Event>) -> Session {
        let app = self.app.get(&key.app_name).cloned().unwrap_or_default();
        let user = self.user.get(&(key.app_name.clone(), key.user_id.clone())).cloned();
        Session {
            id: key.session_id.clone(),
            app_name: key.app_name.clone(),
            user_id: key.user_id.clone(),
            state: merge_state(app, user.unwrap_or_default(), stored.state.clone()),
            events: Events::new(events),
            create_time: stored.create_time,
            last_update_time: stored.update_time,
            event_count: stored.events.len() as u64,
            expire_time: stored.expire_time,
        }
    }

    fn share(&mut self, key: &SessionKey, app: ScopeState, user: ScopeState) {
        self.app.entry(key.app_name.clone()).or_default().extend(app);
        let user_key = (key.app_name.clone(), key.user_id.clone());
        self.user.entry(user_key).or_default().extend(user);
    }
}

#[derive(Default)]
struct MapBackend(Mutex<Maps>);

impl MapBackend {
    fn maps(&self) -> MutexGuard<'_, Maps> {
        self.0.lock().unwrap()
    }
}

#[async_trait]
impl SessionBackend for MapBackend {
    async fn create(&self, new: NewSession) -> Result<Created> {
        let mut maps = self.maps();
        if maps.live(&new.key).is_some() {
            return Ok(Created::Exists);
        }
        maps.share(&new.key, new.state.app, new.state.user);
        let mut stored = Stored {
            create_time: new.now,
            update_time: new.now,
            state: new.state.session,
            events: Vec::new(),
            ttl: new.ttl,
            expire_time: None,
            window_start: 0,
            run_marks: Vec::new(),
        };
        stored.renew(new.now);
        let session = maps.session(&new.key, &stored, Vec::new());
        maps.sessions.insert(new.key, stored);
        Ok(Created::Stored(session))
    }

    async fn read(&self, key: &SessionKey, read: &EventRead) -> Result<Option<Session>> {
        let mut maps = self.maps();
        let Some(stored) = maps.live(key) else { return Ok(None) };
        let from = if read.since_compaction {
            stored.window_start.saturating_sub(1)
        } else {
            0
        };
        let events = stored.events[from as usize..].to_vec();
        Ok(Some(maps.session(key, &maps.sessions[key], events)))
    }

    async fn list(&self, listing: &SessionListing) -> Result<Vec<ListedSession>> {
        let req = &listing.request;
        let mut maps = self.maps();
        let keys: Vec<SessionKey> = maps.sessions.keys().cloned().collect();
        for key in &keys {
            maps.live(key);
        }
        let mut page: Vec<ListedSession> = maps
            .sessions
            .iter()
            .filter(|(key, _)| key.app_name == req.app_name && req.user_id.as_ref().is_none_or(|u| *u == key.user_id))
            .map(|(key, stored)| ListedSession {
                position: listing.position(stored.update_time, &key.user_id, &key.session_id),
                session: maps.session(key, stored, Vec::new()),
            })
            .filter(|listed| listing.follows_cursor(&listed.position))
            .collect();
        page.sort_by(|a, b| {
            (a.position.update_micros, &a.position.member).cmp(&(b.position.update_micros, &b.position.member))
        });
        page.truncate(listing.limit);
        Ok(page)
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        self.maps().sessions.remove(key);
        Ok(())
    }

    async fn append(&self, new: NewEvent) -> Result<Appended> {
        let mut maps = self.maps();
        let Some(stored) = maps.live(&new.key) else {
            return Ok(Appended::NotFound);
        };
        if let Some(event) = stored.events.iter().find(|e| e.id == new.event.id) {
            return Ok(Appended::Duplicate(event.clone()));
        }
        let last_id = stored.events.last().map(|e| e.id.as_str());
        // No leases here: a fence always passes, as for a store not linked to any.
        if let Some(refusal) = new.refusal(stored.events.len() as u64, last_id, |_, _| true) {
            return Ok(Appended::Refused(refusal));
        }
        let mut event = new.event;
        event.sequence = stored.events.len() as u64 + 1;
        match new.window {
            WindowUpdate::Keep => {}
            WindowUpdate::Reset => stored.window_start = 0,
            WindowUpdate::From { micros } => stored.window_start = window_from(&stored.events, micros, event.sequence),
        }
        stored.state.extend(new.delta.session);
        stored.events.push(event.clone());
        stored.update_time = new.update_time;
        stored.renew(new.now);
        maps.share(&new.key, new.delta.app, new.delta.user);
        Ok(Appended::New(event))
    }

    async fn append_run_mark(&self, new: NewEvent) -> Result<Appended> {
        let mut maps = self.maps();
        let Some(stored) = maps.live(&new.key) else {
            return Ok(Appended::NotFound);
        };
        stored.run_marks.push(RunMark {
            after_sequence: stored.events.len() as u64,
            event: new.event.clone(),
        });
        Ok(Appended::New(new.event))
    }

    async fn run_marks(&self, key: &SessionKey) -> Result<Vec<RunMark>> {
        let mut maps = self.maps();
        Ok(maps
            .live(key)
            .map(|stored| stored.run_marks.clone())
            .unwrap_or_default())
    }

    async fn events(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead>> {
        let mut maps = self.maps();
        let Some(stored) = maps.live(key) else { return Ok(None) };
        let last_sequence = stored.events.len() as u64;
        let events = match page.range(last_sequence) {
            Some((from, to)) => stored.events[from as usize - 1..to as usize].to_vec(),
            None => Vec::new(),
        };
        Ok(Some(EventsRead { events, last_sequence }))
    }

    async fn watch(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EventStream>> {
        let mut maps = self.maps();
        let Some(stored) = maps.live(key) else { return Ok(None) };
        let after = after_sequence.map_or(stored.events.len(), |after| after as usize);
        let replay: Vec<Result<Event>> = stored.events.iter().skip(after).cloned().map(Ok).collect();
        Ok(Some(
            futures::stream::iter(replay).chain(futures::stream::pending()).boxed(),
        ))
    }

    async fn user_state(&self, req: &Valid<UserStateRequest>) -> Result<ScopeState> {
        let key = (req.app_name.clone(), req.user_id.clone());
        Ok(self.maps().user.get(&key).cloned().unwrap_or_default())
    }

    async fn app_state(&self, req: &Valid<AppStateRequest>) -> Result<ScopeState> {
        Ok(self.maps().app.get(&req.app_name).cloned().unwrap_or_default())
    }

    async fn update_app_state(&self, write: AppStateWrite) -> Result<ScopeState> {
        let mut maps = self.maps();
        let state = maps.app.entry(write.app_name).or_default();
        state.extend(write.fields);
        Ok(state.clone())
    }

    async fn fork(&self, plan: ForkPlan) -> Result<Forked> {
        let mut maps = self.maps();
        let Some(source) = maps.live(&plan.source) else {
            return Ok(Forked::SourceNotFound);
        };
        let Some(last) = source.events.iter().position(|e| e.id == plan.up_to_event_id) else {
            return Ok(Forked::EventNotFound);
        };
        let (events, ttl) = (source.events[..=last].to_vec(), source.ttl);
        if maps.live(&plan.fork).is_some() {
            return Ok(Forked::Exists);
        }
        let contents = plan.contents(&events);
        let mut fork = Stored {
            create_time: plan.now,
            update_time: contents.update_time,
            state: contents.session_state,
            events,
            ttl,
            expire_time: None,
            window_start: contents.window_start,
            run_marks: Vec::new(),
        };
        fork.renew(plan.now);
        let session = maps.session(&plan.fork, &fork, fork.events.clone());
        maps.sessions.insert(plan.fork, fork);
        Ok(Forked::Stored(session))
    }
}

mod a_minimal_backend_needs_no_rule_of_its_own {
    use super::*;
    adk_grpc_testkit::session_rules_conformance_tests!(adk_grpc_testkit::Fixture::sessions(CoreSessionService::new(
        MapBackend::default()
    )));
}
