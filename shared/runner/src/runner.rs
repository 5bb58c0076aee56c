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

use crate::context::{AgentContext, Invocation, session_artifacts};
use crate::llm::history::USER_AUTHOR;
use adk_core::memory::{AddEventsRequest, add_session_to_memory};
use adk_core::{
    Acquire, AdkError, Agent, AppendEventRequest, ArtifactService, Content, CreateRequest, Event, EventStream,
    GetRequest, InvocationContext, LeaseKey, Memory, MemoryService, PartKind, Result, RunConfig, ScopedMemory, Session,
    SessionLease, SessionService, find_agent, validate,
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
    /// Long-term memory for agents and tools (`load_memory`, `preload_memory`,
    /// `ToolContext::search_memory`); optional.
    pub memory_service: Option<Arc<dyn MemoryService>>,
    /// What to add to memory when an invocation finishes (needs `memory_service`).
    pub add_to_memory: Option<AddToMemory>,
    /// Keeps one invocation per session at a time: in memory for one replica,
    /// in Redis for several.
    pub lease: Arc<dyn SessionLease>,
    /// How long a session stays locked after its runner died without releasing
    /// it; a live run renews its lease every third of this.
    pub lease_ttl: Duration,
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
            memory_service: None,
            add_to_memory: None,
            lease,
            lease_ttl: Self::DEFAULT_LEASE_TTL,
        }
    }
}

/// What a runner adds to long-term memory after each invocation that finishes
/// without error, before its stream ends (so a client that saw the end can recall it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddToMemory {
    /// The invocation's own events (the user's message and the agents' replies).
    Invocation,
    /// The whole session, as ADK's `add_session_to_memory` (adding again replaces).
    Session,
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
    memory_service: Option<Arc<dyn MemoryService>>,
    add_to_memory: Option<AddToMemory>,
    lease: Arc<dyn SessionLease>,
    lease_ttl: Duration,
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
        if config.add_to_memory.is_some() && config.memory_service.is_none() {
            return Err(AdkError::Config("add_to_memory needs a memory_service".into()));
        }
        Ok(Runner {
            app_name: config.app_name,
            root_agent: config.root_agent,
            session_service: config.session_service,
            artifact_service: config.artifact_service,
            memory_service: config.memory_service,
            add_to_memory: config.add_to_memory,
            lease: config.lease,
            lease_ttl: config.lease_ttl,
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
        let add_to_memory = match (&self.memory_service, self.add_to_memory) {
            (Some(memory), Some(what)) => Some((memory.clone(), what)),
            _ => None,
        };
        let driver = Driver {
            session_service: self.session_service.clone(),
            add_to_memory,
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

    /// Stores the user's event and starts the agent that should answer it.
    async fn start(
        &self,
        invocation_id: &str,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
    ) -> Result<(Arc<Invocation>, EventStream)> {
        let session = self
            .load_session(user_id, session_id, options.create_session_if_missing)
            .await?;
        let (agent, branch) = self.agent_for(&session, &content)?;
        let mut user_event = Event::new(invocation_id).with_author(USER_AUTHOR).with_content(content);
        user_event.actions.state_delta = options.state_delta.clone();
        let stored = self.append(&session, user_event).await?;
        let artifacts = self
            .artifact_service
            .clone()
            .map(|service| session_artifacts(service, &session));
        let memory = self.memory_service.clone().map(|service| {
            Arc::new(ScopedMemory::new(service, &session.app_name, &session.user_id)) as Arc<dyn Memory>
        });
        let invocation = Arc::new(
            Invocation::new(
                invocation_id.to_string(),
                session,
                stored,
                options.state_delta,
                options.run_config,
                artifacts,
            )
            .with_memory(memory),
        );
        let ctx: Arc<dyn InvocationContext> = Arc::new(AgentContext::new(invocation.clone(), agent.clone(), branch));
        let events = agent.run(ctx).await?;
        Ok((invocation, events))
    }

    async fn load_session(&self, user_id: &str, session_id: &str, create: bool) -> Result<Session> {
        let get = GetRequest {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
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
    /// Where and what to add to memory once the invocation finishes.
    add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
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
                // Still under the lease, so the session added is the one this invocation left.
                let added = add_to_memory(self.add_to_memory.clone(), self.invocation.clone(), self.session_service.clone());
                failure = added.instrument(span.clone()).await.err();
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

/// Adds the finished invocation (or its session) to long-term memory, if configured.
/// A failure fails the invocation: its events are stored, but the client must know
/// they were not remembered (a retry of the add is `AddSessionToMemory`).
async fn add_to_memory(
    add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
    invocation: Arc<Invocation>,
    session_service: Arc<dyn SessionService>,
) -> Result<()> {
    let Some((memory, what)) = add_to_memory else {
        return Ok(());
    };
    let session = &invocation.session;
    match what {
        AddToMemory::Invocation => {
            let events = AddEventsRequest {
                app_name: session.app_name.clone(),
                user_id: session.user_id.clone(),
                session_id: session.id.clone(),
                events: invocation.own_events(),
                custom_metadata: HashMap::new(),
            };
            memory.add_events(events).await?;
        }
        AddToMemory::Session => {
            add_session_to_memory(
                memory.as_ref(),
                session_service.as_ref(),
                &session.app_name,
                &session.user_id,
                &session.id,
            )
            .await?;
        }
    }
    Ok(())
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
