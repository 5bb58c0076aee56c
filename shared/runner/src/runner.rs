//! `Runner`: runs an agent tree for one user message and streams what happens.
//!
//! Per invocation (`docs/semantics.md`, Runner 1-6):
//! 1. a new invocation id `e-<uuid>`; the session's lease is taken (one
//!    invocation per session at a time, across replicas);
//! 2. the user's message is stored as an event by `"user"` (with the run's
//!    `state_delta`); a message carrying `function_response` parts goes to the
//!    agent that issued the matching calls, any other to the root agent;
//! 3. every non-partial event the agent yields is appended to the session
//!    (deltas applied, id/timestamp/sequence assigned) and the stored event is
//!    streamed; partial events are only streamed;
//! 4. `temp:` state lives in the invocation's overlay and dies with it;
//! 5. an error ends the stream with `Err`; dropping the stream, or
//!    [`Runner::cancel`], stops the agent (and its model request) and releases
//!    the lease.

use crate::compaction::{self, Trigger};
use crate::context::{AgentContext, Invocation, session_artifacts};
use crate::llm::history::USER_AUTHOR;
use adk_core::artifact::{LoadRequest, SaveRequest};
use adk_core::history;
use adk_core::{
    Acquire, AdkError, Agent, AppendEventRequest, ArtifactService, CompactionConfig, Content, CreateRequest, Event,
    EventStream, GetRequest, InvocationContext, LeaseKey, PartKind, Result, RunConfig, Session, SessionLease,
    SessionService, find_agent, validate,
};
use async_stream::try_stream;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// What a runner needs.
pub struct RunnerConfig {
    pub app_name: String,
    pub root_agent: Arc<dyn Agent>,
    pub session_service: Arc<dyn SessionService>,
    /// Artifacts for agents and tools (`{artifact.x}`, `load_artifacts`, tool saves); optional.
    pub artifact_service: Option<Arc<dyn ArtifactService>>,
    /// Keeps one invocation per session at a time: in memory for one replica,
    /// in Redis for several.
    pub lease: Arc<dyn SessionLease>,
    /// How long a session stays locked after its runner died without releasing
    /// it; a live run renews its lease every third of this.
    pub lease_ttl: Duration,
    /// Event compaction and the model requests' token budget; None keeps every event
    /// in the model's history.
    pub compaction: Option<CompactionConfig>,
}

impl RunnerConfig {
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

    /// A configuration without artifacts and with the default lease TTL.
    pub fn new(
        app_name: impl Into<String>,
        root_agent: Arc<dyn Agent>,
        session_service: Arc<dyn SessionService>,
        lease: Arc<dyn SessionLease>,
    ) -> Self {
        RunnerConfig {
            app_name: app_name.into(),
            root_agent,
            session_service,
            artifact_service: None,
            lease,
            lease_ttl: Self::DEFAULT_LEASE_TTL,
            compaction: None,
        }
    }

    /// Compacts the app's sessions as `compaction` says (see [`CompactionConfig`]).
    pub fn with_compaction(mut self, compaction: CompactionConfig) -> Self {
        self.compaction = Some(compaction);
        self
    }
}

/// Per-run options.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stored with the user's event; `temp:` keys are seen by this invocation only.
    pub state_delta: HashMap<String, Value>,
    pub run_config: RunConfig,
    /// Create the session (empty) when it does not exist, instead of `NOT_FOUND`.
    pub create_session_if_missing: bool,
}

/// Runs agents against sessions. Cheap to share (`Arc<Runner>`); runs are independent.
pub struct Runner {
    app_name: String,
    root_agent: Arc<dyn Agent>,
    session_service: Arc<dyn SessionService>,
    artifact_service: Option<Arc<dyn ArtifactService>>,
    lease: Arc<dyn SessionLease>,
    lease_ttl: Duration,
    compaction: Option<Arc<CompactionConfig>>,
    running: Arc<Mutex<HashMap<String, RunningInvocation>>>,
}

/// A running invocation's owner, so a cancel naming another user's session is refused.
struct RunningInvocation {
    user_id: String,
    session_id: String,
    cancel: CancellationToken,
}

impl Runner {
    /// Checks the app name and the agent tree: valid, unique agent names (a
    /// transfer or a resumption finds its agent by name).
    pub fn new(config: RunnerConfig) -> Result<Runner> {
        validate::id("app_name", &config.app_name)?;
        check_agent_tree(&config.root_agent, &mut HashSet::new())?;
        if config.lease_ttl.is_zero() {
            return Err(AdkError::Config("lease_ttl must be positive".into()));
        }
        if let Some(compaction) = &config.compaction {
            compaction.validate()?;
        }
        Ok(Runner {
            app_name: config.app_name,
            root_agent: config.root_agent,
            session_service: config.session_service,
            artifact_service: config.artifact_service,
            lease: config.lease,
            lease_ttl: config.lease_ttl,
            compaction: config.compaction.map(Arc::new),
            running: Arc::default(),
        })
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn root_agent(&self) -> &Arc<dyn Agent> {
        &self.root_agent
    }

    /// Runs the agents on `content` in the session and streams the events.
    ///
    /// Fails before streaming with `INVALID_ARGUMENT` (bad ids, an empty message,
    /// a function response that answers no call), `NOT_FOUND` (no such session)
    /// or `ABORTED` (the session is busy with another invocation). Failures
    /// after that end the stream with an `Err`.
    pub async fn run(
        &self,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
    ) -> Result<EventStream> {
        validate::session_ids(&self.app_name, user_id, session_id)?;
        if content.parts.is_empty() {
            return Err(AdkError::invalid("new_message has no parts"));
        }
        let invocation_id = format!("e-{}", uuid::Uuid::new_v4());
        // The invocation's span and metrics: everything it does, from taking the lease
        // to its last event, runs inside the span (see Driver::into_stream).
        let observed = adk_telemetry::Invocation::start(&self.app_name, user_id, session_id, &invocation_id);
        let span = observed.span().clone();
        let key = LeaseKey {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
        };
        let lease = LeaseGuard::acquire(self.lease.clone(), key, &invocation_id, self.lease_ttl)
            .instrument(span.clone())
            .await;
        let lease = match lease {
            Ok(lease) => lease,
            Err(e) => {
                observed.finish(Some(e.code()));
                return Err(e);
            }
        };
        let started = self
            .start(&invocation_id, user_id, session_id, content, options)
            .instrument(span.clone())
            .await;
        let (invocation, events) = match started {
            Ok(started) => started,
            Err(e) => {
                lease.release().instrument(span).await;
                observed.finish(Some(e.code()));
                return Err(e);
            }
        };
        tracing::debug!(%invocation_id, session_id, "invocation started");
        let cancel = CancellationToken::new();
        let running = RunningInvocation {
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            cancel: cancel.clone(),
        };
        lock(&self.running).insert(invocation_id.clone(), running);
        let driver = Driver {
            session_service: self.session_service.clone(),
            app_name: self.app_name.clone(),
            compaction: self.compaction.clone(),
            invocation,
            observed,
            events,
            renew: renew_interval(self.lease_ttl),
            lease,
            cancel,
            _registration: Registration {
                running: self.running.clone(),
                invocation_id,
            },
        };
        Ok(driver.into_stream())
    }

    /// Stops a running invocation of this runner on the given user's session: its
    /// stream ends with `CANCELLED`. False when no such invocation is running here
    /// for that session.
    pub fn cancel(&self, user_id: &str, session_id: &str, invocation_id: &str) -> bool {
        match lock(&self.running).get(invocation_id) {
            Some(running) if running.user_id == user_id && running.session_id == session_id => {
                running.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Undoes the session to just before invocation `rewind_before_invocation_id`
    /// (ADK's `Runner.rewind_async`) and returns the rewind event as stored: its
    /// `state_delta` sets every session key back to its value then (`null` for keys
    /// that did not exist), and its `artifact_delta` names, for every session artifact
    /// changed since, the version that restores it (the old version saved again; an
    /// empty `application/octet-stream` tombstone for an artifact that did not exist).
    /// Later runs and the model's history leave the rewound invocations out; the log
    /// keeps them.
    ///
    /// Takes the session's lease as a run does: `ABORTED` while an invocation runs on
    /// it. `NOT_FOUND` for a missing session or an invocation with no event in it.
    pub async fn rewind(&self, user_id: &str, session_id: &str, rewind_before_invocation_id: &str) -> Result<Event> {
        validate::session_ids(&self.app_name, user_id, session_id)?;
        validate::id("rewind_before_invocation_id", rewind_before_invocation_id)?;
        let invocation_id = format!("e-{}", uuid::Uuid::new_v4());
        let key = LeaseKey {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
        };
        let lease = LeaseGuard::acquire(self.lease.clone(), key, &invocation_id, self.lease_ttl).await?;
        let rewound = self
            .rewind_holding_lease(user_id, session_id, rewind_before_invocation_id, &invocation_id)
            .await;
        lease.release().await;
        rewound
    }

    async fn rewind_holding_lease(
        &self,
        user_id: &str,
        session_id: &str,
        target: &str,
        invocation_id: &str,
    ) -> Result<Event> {
        // The whole log: the state then is built from every delta before the target.
        let session = self.load_session(user_id, session_id, false, false).await?;
        let events = session.events.as_slice();
        let cut = history::rewind_point(events, target)?;
        let current: HashMap<String, Value> = session
            .state
            .iter()
            .filter(|(key, _)| history::is_session_key(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let mut event = Event::new(invocation_id).with_author(USER_AUTHOR);
        event.actions.rewind_before_invocation_id = Some(target.to_string());
        event.actions.state_delta = history::rewind_state_delta(&events[..cut], &current);
        if let Some(artifacts) = &self.artifact_service {
            for restore in history::rewind_artifacts(events, cut) {
                let version = restore_artifact(artifacts.as_ref(), &session, &restore).await?;
                event.actions.artifact_delta.insert(restore.file_name, version);
            }
        }
        self.append(&session, event).await
    }

    /// Stores the user's event and starts the agent that should answer it.
    async fn start(
        &self,
        invocation_id: &str,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
    ) -> Result<(Arc<Invocation>, EventStream)> {
        // A message answering function calls needs the calls, which may be older than
        // the latest compaction: it reads the whole log, any other turn its window.
        let window = !has_function_responses(&content);
        let session = self
            .load_session(user_id, session_id, options.create_session_if_missing, window)
            .await?;
        let (agent, branch) = self.agent_for(&session, &content)?;
        let mut user_event = Event::new(invocation_id).with_author(USER_AUTHOR).with_content(content);
        user_event.actions.state_delta = options.state_delta.clone();
        let stored = self.append(&session, user_event).await?;
        let artifacts = self
            .artifact_service
            .clone()
            .map(|service| session_artifacts(service, &session));
        let invocation = Arc::new(Invocation::new(
            invocation_id.to_string(),
            session,
            stored,
            options.state_delta,
            options.run_config,
            artifacts,
            self.compaction.clone(),
        ));
        let ctx: Arc<dyn InvocationContext> = Arc::new(AgentContext::new(invocation.clone(), agent.clone(), branch));
        let events = agent.run(ctx).await?;
        Ok((invocation, events))
    }

    /// The session with the events a turn needs: with `window`, from the latest
    /// compaction on (an O(returned) read, however long the log), else all of them.
    async fn load_session(&self, user_id: &str, session_id: &str, create: bool, window: bool) -> Result<Session> {
        let get = GetRequest {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            since_compaction: window,
            ..Default::default()
        };
        match self.session_service.get(get.clone()).await {
            Err(AdkError::NotFound(_)) if create => {
                let create = CreateRequest {
                    app_name: self.app_name.clone(),
                    user_id: user_id.to_string(),
                    session_id: Some(session_id.to_string()),
                    ..Default::default()
                };
                match self.session_service.create(create).await {
                    // Created by someone else in the meantime: use theirs.
                    Err(AdkError::AlreadyExists(_)) => self.session_service.get(get).await,
                    created => created,
                }
            }
            loaded => loaded,
        }
    }

    async fn append(&self, session: &Session, event: Event) -> Result<Event> {
        append(self.session_service.as_ref(), session, event).await
    }

    /// The root agent, or for a message answering function calls, the agent that
    /// made them, on the branch it made them on.
    fn agent_for(&self, session: &Session, content: &Content) -> Result<(Arc<dyn Agent>, String)> {
        let Some((author, branch)) = caller_of(session, content)? else {
            return Ok((self.root_agent.clone(), String::new()));
        };
        let agent = find_agent(&self.root_agent, &author).ok_or_else(|| {
            AdkError::FailedPrecondition(format!(
                "agent {author}, which made the function call being answered, is not part of this runner's agents"
            ))
        })?;
        Ok((agent, branch))
    }
}

/// Saves the artifact's version at the rewind point again as its newest version (or
/// ADK's tombstone when it did not exist then) and returns the new version.
async fn restore_artifact(
    artifacts: &dyn ArtifactService,
    session: &Session,
    restore: &history::ArtifactRestore,
) -> Result<i64> {
    let part = match restore.version {
        Some(version) => {
            let load = LoadRequest {
                app_name: session.app_name.clone(),
                user_id: session.user_id.clone(),
                session_id: session.id.clone(),
                file_name: restore.file_name.clone(),
                version: Some(version),
            };
            match artifacts.load(load).await {
                Ok(loaded) => loaded.part,
                Err(AdkError::NotFound(_)) => {
                    tracing::warn!(
                        file_name = %restore.file_name, version,
                        "artifact version gone at rewind; saving a tombstone instead"
                    );
                    history::rewind_tombstone()
                }
                Err(e) => return Err(e),
            }
        }
        None => history::rewind_tombstone(),
    };
    let saved = artifacts
        .save(SaveRequest {
            app_name: session.app_name.clone(),
            user_id: session.user_id.clone(),
            session_id: session.id.clone(),
            file_name: restore.file_name.clone(),
            part,
            version: None,
        })
        .await?;
    Ok(saved.version)
}

fn has_function_responses(content: &Content) -> bool {
    content
        .parts
        .iter()
        .any(|p| matches!(p.kind, PartKind::FunctionResponse { .. }))
}

/// For a message with `function_response` parts: the author and branch of the
/// event holding the matching calls. None for an ordinary message.
fn caller_of(session: &Session, content: &Content) -> Result<Option<(String, String)>> {
    let mut caller: Option<(String, String)> = None;
    for part in &content.parts {
        let PartKind::FunctionResponse { id, function_response } = &part.kind else {
            continue;
        };
        let id = id.as_deref().filter(|id| !id.is_empty()).ok_or_else(|| {
            AdkError::invalid(format!(
                "function_response {} has no id: give the id of the function call it answers",
                function_response.name
            ))
        })?;
        let call = session.events.iter().rev().find(|event| {
            event.content().is_some_and(|c| {
                c.parts
                    .iter()
                    .any(|p| matches!(&p.kind, PartKind::FunctionCall { id: Some(call_id), .. } if call_id == id))
            })
        });
        let call = call.ok_or_else(|| {
            AdkError::invalid(format!(
                "function_response {id} answers no function call in session {}",
                session.id
            ))
        })?;
        let found = (call.author.clone(), call.branch.clone());
        match &caller {
            Some(first) if *first != found => {
                return Err(AdkError::invalid(
                    "function_response parts of one message must answer calls of one agent",
                ));
            }
            _ => caller = Some(found),
        }
    }
    Ok(caller)
}

async fn append(service: &dyn SessionService, session: &Session, event: Event) -> Result<Event> {
    service
        .append_event(AppendEventRequest {
            app_name: session.app_name.clone(),
            user_id: session.user_id.clone(),
            session_id: session.id.clone(),
            event,
            precondition: None,
        })
        .await
}

/// Agent names are identifiers (they appear in branches `a.b` and in the
/// model's `transfer_to_agent` calls), never "user" (the user's events carry
/// that author), and unique in the tree.
fn check_agent_tree(agent: &Arc<dyn Agent>, seen: &mut HashSet<String>) -> Result<()> {
    crate::validate_agent_name(agent.name())?;
    if !seen.insert(agent.name().to_string()) {
        return Err(AdkError::Config(format!(
            "two agents are named {}: names must be unique in the agent tree",
            agent.name()
        )));
    }
    agent
        .sub_agents()
        .iter()
        .try_for_each(|sub| check_agent_tree(sub, seen))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn renew_interval(ttl: Duration) -> Interval {
    let period = (ttl / 3).max(Duration::from_millis(1));
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// One running invocation: pulls the agent's events, stores them, keeps the lease.
struct Driver {
    session_service: Arc<dyn SessionService>,
    app_name: String,
    compaction: Option<Arc<CompactionConfig>>,
    invocation: Arc<Invocation>,
    /// Its span and metrics; dropped unfinished (the stream was dropped), it counts as CANCELLED.
    observed: adk_telemetry::Invocation,
    events: EventStream,
    lease: LeaseGuard,
    renew: Interval,
    cancel: CancellationToken,
    _registration: Registration,
}

impl Driver {
    fn into_stream(mut self) -> EventStream {
        Box::pin(try_stream! {
            let span = self.observed.span().clone();
            let mut failure = None;
            loop {
                match self.next().instrument(span.clone()).await {
                    Ok(Some(event)) => yield event,
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let invocation_id = self.invocation.invocation_id.clone();
            if failure.is_none() {
                // Still under the lease: no other invocation appends meanwhile. A
                // failure is only logged: the next invocation tries again.
                self.compact_if_due().instrument(span.clone()).await;
            }
            // Stop the agent before the session is free for the next invocation.
            drop(self.events);
            self.lease.release().instrument(span).await;
            self.observed.finish(failure.as_ref().map(AdkError::code));
            match failure {
                Some(e) => {
                    tracing::debug!(%invocation_id, error = %e, "invocation failed");
                    Err(e)?;
                }
                None => tracing::debug!(%invocation_id, "invocation finished"),
            }
        })
    }

    /// Appends a summary when the app's compaction interval says one is due.
    async fn compact_if_due(&mut self) {
        let Some(config) = self.compaction.clone() else {
            return;
        };
        let Some(plan) = compaction::interval_plan(&self.invocation.events(), &config) else {
            return;
        };
        let invocation_id = self.invocation.invocation_id.clone();
        let summarized = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return,
            summary = compaction::summarize(&config, plan, &self.app_name, &invocation_id, Trigger::Interval) => summary,
        };
        let stored = match summarized {
            Ok(event) => append(self.session_service.as_ref(), &self.invocation.session, event).await,
            Err(e) => Err(e),
        };
        match stored {
            Ok(event) => self.invocation.record(event, HashMap::new()),
            Err(e) => tracing::warn!(
                %invocation_id, error = %e,
                "event compaction failed; the session is unchanged and the next invocation tries again"
            ),
        }
    }

    /// The next event to stream (stored first unless partial); None when the agent is done.
    async fn next(&mut self) -> Result<Option<Event>> {
        let event = loop {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    return Err(AdkError::Cancelled(format!(
                        "invocation {} was cancelled",
                        self.invocation.invocation_id
                    )));
                }
                _ = self.renew.tick() => self.lease.renew().await?,
                event = self.events.next() => break event,
            }
        };
        let Some(event) = event.transpose()? else {
            return Ok(None);
        };
        if event.is_partial() {
            return Ok(Some(event));
        }
        // The store trims `temp:` keys; the overlay needs the delta as emitted.
        let delta = event.actions.state_delta.clone();
        let stored = append(self.session_service.as_ref(), &self.invocation.session, event).await?;
        self.invocation.record(stored.clone(), delta);
        Ok(Some(stored))
    }
}

/// The session's lease while this invocation holds it.
struct LeaseGuard {
    lease: Arc<dyn SessionLease>,
    key: LeaseKey,
    owner: String,
    ttl: Duration,
    held: bool,
}

impl LeaseGuard {
    async fn acquire(lease: Arc<dyn SessionLease>, key: LeaseKey, owner: &str, ttl: Duration) -> Result<Self> {
        match lease.acquire(&key, owner, ttl).await? {
            Acquire::Acquired => Ok(LeaseGuard {
                lease,
                key,
                owner: owner.to_string(),
                ttl,
                held: true,
            }),
            Acquire::Held(holder) => Err(AdkError::Aborted(format!(
                "session {} is busy with invocation {holder}: one invocation per session at a time",
                key.session_id
            ))),
        }
    }

    /// Keeps the lease. Losing it (it expired and may be someone else's now)
    /// stops the invocation; a store hiccup does not, the next tick tries again.
    async fn renew(&self) -> Result<()> {
        match self.lease.renew(&self.key, &self.owner, self.ttl).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(AdkError::Aborted(format!(
                "invocation {} lost its lease on session {} (not renewed within {:?}); it stops so that two \
                 invocations never run on one session",
                self.owner, self.key.session_id, self.ttl
            ))),
            Err(e) => {
                tracing::warn!(invocation_id = %self.owner, error = %e, "could not renew the session lease; retrying");
                Ok(())
            }
        }
    }

    async fn release(mut self) {
        if let Err(e) = self.lease.release(&self.key, &self.owner).await {
            tracing::warn!(invocation_id = %self.owner, error = %e, "could not release the session lease; it expires");
        }
        // Only now: a stream dropped while the release is in flight (a client
        // cancelling as the run ends) must still release from `Drop`. Releasing is
        // compare-and-delete, so a second release is harmless.
        self.held = false;
    }
}

impl Drop for LeaseGuard {
    /// A stream dropped mid-run cannot await: the release runs as a short task
    /// of its own (one store call). Without a runtime the lease simply expires.
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (lease, key, owner) = (self.lease.clone(), self.key.clone(), self.owner.clone());
            runtime.spawn(async move {
                if let Err(e) = lease.release(&key, &owner).await {
                    tracing::warn!(invocation_id = %owner, error = %e, "could not release the session lease; it expires");
                }
            });
        }
    }
}

/// The invocation's entry in the runner's registry, removed when the run ends or is dropped.
struct Registration {
    running: Arc<Mutex<HashMap<String, RunningInvocation>>>,
    invocation_id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.invocation_id);
    }
}
