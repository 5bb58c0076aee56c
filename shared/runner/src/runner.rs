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
//!    [`Runner::cancel`] (from any replica: through the lease), stops the agent
//!    (and its model request) and releases the lease.
//!
//! The lease follows the runner's life: a heartbeat renews it every third of its
//! (short) TTL, so a crashed runner's sessions are free within one TTL; every
//! append of the invocation is fenced with the lease (a runner that lost it can
//! no longer write); and the next invocation closes one cut short by a crash
//! with an `interrupted` event, so the history stays well-formed.

use crate::compaction::{self, Trigger};
use crate::context::{AgentContext, Invocation, session_artifacts};
use crate::{AgentNames, USER_AUTHOR};
use adk_core::artifact::{LoadRequest, SaveRequest};
use adk_core::history;
use adk_core::memory::{AddEventsRequest, add_session_to_memory};
use adk_core::{
    Acquire, AdkError, Agent, AppendEventRequest, ArtifactService, CompactionConfig, Content, CreateRequest, Event,
    EventStream, GetRequest, InvocationContext, LeaseKey, Memory, MemoryService, PartKind, Precondition, Renewal,
    Result, RunConfig, ScopedMemory, Session, SessionLease, SessionService, find_agent, validate,
};
use async_stream::try_stream;
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, DropGuard};
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
    /// it; a live run's heartbeat renews its lease every third of this.
    pub lease_ttl: Duration,
    /// Event compaction and the model requests' token budget; None keeps every event
    /// in the model's history.
    pub compaction: Option<CompactionConfig>,
    /// What a run does when its session is busy, unless its [`RunOptions`] say otherwise.
    pub on_busy: OnBusy,
}

impl RunnerConfig {
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(5);

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
            compaction: None,
            on_busy: OnBusy::Reject,
        }
    }

    /// Compacts the app's sessions as `compaction` says (see [`CompactionConfig`]).
    pub fn with_compaction(mut self, compaction: CompactionConfig) -> Self {
        self.compaction = Some(compaction);
        self
    }
}

/// What a run does when another invocation is running on its session (a user
/// "double-texting"), as LangGraph's multitask strategies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnBusy {
    /// Refuse it: `ABORTED`.
    #[default]
    Reject,
    /// Wait for the running invocation to end, then run (waiting runs go in the
    /// order they asked, whichever replica they are on; one whose replica died loses
    /// its place within seconds).
    Enqueue,
    /// Cancel the running invocation (wherever it runs), then run.
    Interrupt,
    /// Interrupt, and rewind the session to before the interrupted invocation.
    Rollback,
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
    /// What to do when the session is busy; None: the runner's default ([`RunnerConfig::on_busy`]).
    pub on_busy: Option<OnBusy>,
}

/// A started invocation: the user's message as stored (with its invocation id and
/// sequence), then the stream of what the agents do.
pub struct StartedRun {
    pub user_event: Event,
    pub events: EventStream,
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
    compaction: Option<Arc<CompactionConfig>>,
    on_busy: OnBusy,
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
        check_agent_tree(&config.root_agent, &mut AgentNames::default())?;
        if config.lease_ttl.is_zero() {
            return Err(AdkError::Config("lease_ttl must be positive".into()));
        }
        if let Some(compaction) = &config.compaction {
            compaction.validate()?;
        }
        if config.add_to_memory.is_some() && config.memory_service.is_none() {
            return Err(AdkError::Config(
                "add_to_memory needs a memory service, and this runner has none".into(),
            ));
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
            compaction: config.compaction.map(Arc::new),
            on_busy: config.on_busy,
            running: Arc::default(),
        })
    }

    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    pub fn root_agent(&self) -> &Arc<dyn Agent> {
        &self.root_agent
    }

    /// The sessions this runner runs on (the A2A server reads tasks from their logs).
    pub fn session_service(&self) -> Arc<dyn SessionService> {
        self.session_service.clone()
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
        Ok(self.start_run(user_id, session_id, content, options).await?.events)
    }

    /// As [`Runner::run`], and also returns the user's message as stored, so a
    /// client learns the invocation id (to cancel it) before the agents answer.
    pub async fn start_run(
        &self,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
    ) -> Result<StartedRun> {
        validate::session_ids(&self.app_name, user_id, session_id)?;
        if content.parts.is_empty() {
            return Err(AdkError::invalid("new_message", "has no parts"));
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
        let on_busy = options.on_busy.unwrap_or(self.on_busy);
        let lease = self
            .acquire_lease(key, &invocation_id, on_busy)
            .instrument(span.clone())
            .await;
        let mut lease = match lease {
            Ok(lease) => lease,
            Err(e) => {
                observed.finish(Some(e.code()));
                return Err(e);
            }
        };
        if on_busy == OnBusy::Rollback
            && let Err(e) = self
                .roll_back_displaced(user_id, session_id, &mut lease)
                .instrument(span.clone())
                .await
        {
            lease.release().instrument(span).await;
            observed.finish(Some(e.code()));
            return Err(e);
        }
        let started = self
            .start(&invocation_id, user_id, session_id, content, options, &lease)
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
        let cancel = lease.signals.cancel.clone();
        let running = RunningInvocation {
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            cancel: cancel.clone(),
        };
        lock(&self.running).insert(invocation_id.clone(), running);
        let user_event = invocation.user_event();
        let add_to_memory = match (&self.memory_service, self.add_to_memory) {
            (Some(memory), Some(what)) => Some((memory.clone(), what)),
            _ => None,
        };
        let driver = Driver {
            session_service: self.session_service.clone(),
            app_name: self.app_name.clone(),
            compaction: self.compaction.clone(),
            add_to_memory,
            invocation,
            observed,
            events,
            lease,
            _registration: Registration {
                running: self.running.clone(),
                invocation_id,
            },
        };
        Ok(StartedRun {
            user_event,
            events: driver.into_stream(),
        })
    }

    /// Stops a running invocation on the given user's session, whichever replica
    /// runs it: its stream ends with `CANCELLED`. True exactly when the invocation
    /// was running (it held the session's lease); one running here stops at once,
    /// one elsewhere as soon as its replica hears the request (at the latest at its
    /// next lease renewal).
    pub async fn cancel(&self, user_id: &str, session_id: &str, invocation_id: &str) -> Result<bool> {
        validate::session_ids(&self.app_name, user_id, session_id)?;
        if invocation_id.is_empty() {
            return Err(AdkError::invalid("invocation_id", "is required"));
        }
        if let Some(running) = lock(&self.running).get(invocation_id)
            && running.user_id == user_id
            && running.session_id == session_id
        {
            running.cancel.cancel();
            return Ok(true);
        }
        self.lease
            .request_cancel(&self.lease_key(user_id, session_id), invocation_id)
            .await
    }

    fn lease_key(&self, user_id: &str, session_id: &str) -> LeaseKey {
        LeaseKey {
            app_name: self.app_name.clone(),
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
        }
    }

    /// Takes the session's lease for `invocation_id`, applying `on_busy` when it is held.
    async fn acquire_lease(&self, key: LeaseKey, invocation_id: &str, on_busy: OnBusy) -> Result<LeaseGuard> {
        match on_busy {
            OnBusy::Reject => LeaseGuard::acquire(self.lease.clone(), key, invocation_id, self.lease_ttl).await,
            OnBusy::Interrupt | OnBusy::Enqueue | OnBusy::Rollback => {
                LeaseGuard::acquire_when_free(self.lease.clone(), key, invocation_id, self.lease_ttl, on_busy).await
            }
        }
    }

    /// `rollback`: rewinds the session to before the invocation this run interrupted
    /// (or the one a crash cut short), so the new message replaces it. An invocation
    /// that stored nothing leaves nothing to undo.
    async fn roll_back_displaced(&self, user_id: &str, session_id: &str, lease: &mut LeaseGuard) -> Result<()> {
        let Some(target) = lease.displaced.clone().or_else(|| lease.interrupted.clone()) else {
            return Ok(());
        };
        let rewind_id = format!("e-{}", uuid::Uuid::new_v4());
        match self
            .rewind_holding_lease(user_id, session_id, &target, &rewind_id, lease)
            .await
        {
            Ok(_) | Err(AdkError::NotFound(..)) => {}
            Err(e) => return Err(e),
        }
        if lease.interrupted.as_deref() == Some(target.as_str()) {
            // Rewound: there is nothing left to close.
            lease.interrupted = None;
        }
        tracing::debug!(rolled_back = %target, session_id, "rolled back the interrupted invocation");
        Ok(())
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
            .rewind_holding_lease(user_id, session_id, rewind_before_invocation_id, &invocation_id, &lease)
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
        lease: &LeaseGuard,
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
        append(self.session_service.as_ref(), &session, event, lease.fence()).await
    }

    /// Stores the user's event and starts the agent that should answer it.
    async fn start(
        &self,
        invocation_id: &str,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
        lease: &LeaseGuard,
    ) -> Result<(Arc<Invocation>, EventStream)> {
        // A message answering function calls needs the calls, which may be older than
        // the latest compaction: it reads the whole log, any other turn its window.
        let window = !has_function_responses(&content);
        let mut session = self
            .load_session(user_id, session_id, options.create_session_if_missing, window)
            .await?;
        if let Some(interrupted) = &lease.interrupted {
            self.close_interrupted(&mut session, interrupted, lease).await?;
        }
        let (agent, branch) = self.agent_for(&session, &content)?;
        let mut user_event = Event::new(invocation_id).with_author(USER_AUTHOR).with_content(content);
        user_event.actions.state_delta = options.state_delta.clone();
        let stored = append(self.session_service.as_ref(), &session, user_event, lease.fence()).await?;
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
                self.compaction.clone(),
            )
            .with_memory(memory),
        );
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
            Err(AdkError::NotFound(..)) if create => {
                let create = CreateRequest {
                    app_name: self.app_name.clone(),
                    user_id: user_id.to_string(),
                    session_id: Some(session_id.to_string()),
                    ..Default::default()
                };
                match self.session_service.create(create).await {
                    // Created by someone else in the meantime: use theirs.
                    Err(AdkError::AlreadyExists(..)) => self.session_service.get(get).await,
                    created => created,
                }
            }
            loaded => loaded,
        }
    }

    /// Closes an invocation whose runner died mid-run (its lease ran out unreleased)
    /// with an `interrupted` event in the agent's name, when the log ends with it: the
    /// next model request then sees the agent's turn end instead of two user turns
    /// in a row. `session` is updated with the stored event.
    async fn close_interrupted(&self, session: &mut Session, interrupted: &str, lease: &LeaseGuard) -> Result<()> {
        let Some(last) = session.events.as_slice().last() else {
            return Ok(());
        };
        if last.invocation_id != interrupted || last.interrupted() {
            return Ok(());
        }
        let author = session
            .events
            .iter()
            .rev()
            .take_while(|event| event.invocation_id == interrupted)
            .find(|event| event.author != USER_AUTHOR && find_agent(&self.root_agent, &event.author).is_some())
            .map_or_else(|| self.root_agent.name().to_string(), |event| event.author.clone());
        let closing = Event::interrupted_by_crash(interrupted, &author);
        let stored = append(self.session_service.as_ref(), session, closing, lease.fence()).await?;
        tracing::info!(invocation_id = %interrupted, session_id = %session.id, "closed an invocation interrupted by a runner crash");
        let mut events = std::mem::take(&mut session.events).into_vec();
        events.push(stored);
        session.events = adk_core::Events::new(events);
        Ok(())
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
                Err(AdkError::NotFound(..)) => {
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
            AdkError::invalid(
                "function_response",
                format!(
                    "{} has no id: give the id of the function call it answers",
                    function_response.name
                ),
            )
        })?;
        let call = session.events.iter().rev().find(|event| {
            event.content().is_some_and(|c| {
                c.parts
                    .iter()
                    .any(|p| matches!(&p.kind, PartKind::FunctionCall { id: Some(call_id), .. } if call_id == id))
            })
        });
        let call = call.ok_or_else(|| {
            AdkError::invalid(
                "function_response",
                format!("{id} answers no function call in session {}", session.id),
            )
        })?;
        let found = (call.author.clone(), call.branch.clone());
        match &caller {
            Some(first) if *first != found => {
                return Err(AdkError::invalid(
                    "function_response",
                    "parts of one message must answer calls of one agent",
                ));
            }
            _ => caller = Some(found),
        }
    }
    Ok(caller)
}

/// Appends `event` fenced with the invocation's lease (`fence`): refused once the
/// lease is lost, so a runner that stalled past its TTL cannot write after another took over.
async fn append(service: &dyn SessionService, session: &Session, event: Event, fence: Precondition) -> Result<Event> {
    service
        .append_event(AppendEventRequest {
            timestamp_missing: false,
            app_name: session.app_name.clone(),
            user_id: session.user_id.clone(),
            session_id: session.id.clone(),
            event,
            precondition: Some(fence),
        })
        .await
}

/// Every agent name of the tree follows the library's rules: an identifier other
/// than "user", unique in the tree.
fn check_agent_tree(agent: &Arc<dyn Agent>, names: &mut AgentNames) -> Result<()> {
    crate::validate_agent_name(agent.name())?;
    names.insert(agent.name())?;
    agent
        .sub_agents()
        .iter()
        .try_for_each(|sub| check_agent_tree(sub, names))
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

/// One running invocation: pulls the agent's events, stores them; its lease's
/// heartbeat keeps the lease and tells it to stop.
struct Driver {
    session_service: Arc<dyn SessionService>,
    app_name: String,
    compaction: Option<Arc<CompactionConfig>>,
    /// Where and what to add to memory once the invocation finishes.
    add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
    invocation: Arc<Invocation>,
    /// Its span and metrics; dropped unfinished (the stream was dropped), it counts as CANCELLED.
    observed: adk_telemetry::Invocation,
    events: EventStream,
    lease: LeaseGuard,
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
            _ = self.lease.signals.cancel.cancelled() => return,
            summary = compaction::summarize(&config, plan, &self.app_name, &invocation_id, Trigger::Interval) => summary,
        };
        let stored = match summarized {
            Ok(event) => {
                append(
                    self.session_service.as_ref(),
                    &self.invocation.session,
                    event,
                    self.lease.fence(),
                )
                .await
            }
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
        let event = tokio::select! {
            biased;
            _ = self.lease.signals.cancel.cancelled() => {
                return Err(AdkError::Cancelled(format!(
                    "invocation {} was cancelled",
                    self.invocation.invocation_id
                )));
            }
            _ = self.lease.signals.lost.cancelled() => return Err(self.lease.lost()),
            event = self.events.next() => event,
        };
        let Some(event) = event.transpose()? else {
            return Ok(None);
        };
        if event.is_partial() {
            return Ok(Some(event));
        }
        // The store trims `temp:` keys; the overlay needs the delta as emitted.
        let delta = event.actions.state_delta.clone();
        let stored = append(
            self.session_service.as_ref(),
            &self.invocation.session,
            event,
            self.lease.fence(),
        )
        .await?;
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

/// The session's lease while this invocation holds it, with the heartbeat that
/// renews it (a task of its own, so the lease lives exactly as long as the runner
/// process does, however slowly the client reads the stream).
struct LeaseGuard {
    lease: Arc<dyn SessionLease>,
    key: LeaseKey,
    owner: String,
    ttl: Duration,
    held: bool,
    /// The previous holder, when it died without releasing the lease.
    interrupted: Option<String>,
    /// The invocation this one asked to stop to take the session (`interrupt`,
    /// `rollback`).
    displaced: Option<String>,
    signals: LeaseSignals,
    /// Stops the heartbeat when the guard goes.
    _heartbeat: DropGuard,
}

/// What the heartbeat tells the invocation.
#[derive(Clone, Default)]
struct LeaseSignals {
    /// Stop: a cancel was requested (here, or from another replica through the lease).
    cancel: CancellationToken,
    /// Stop: the lease was lost (not renewed in time; it may be another's now).
    lost: CancellationToken,
}

impl LeaseGuard {
    async fn acquire(lease: Arc<dyn SessionLease>, key: LeaseKey, owner: &str, ttl: Duration) -> Result<Self> {
        match Self::try_acquire(lease, key, owner, ttl, false).await? {
            Ok(guard) => Ok(guard),
            Err((key, holder)) => Err(busy(&key, &holder)),
        }
    }

    /// Takes the lease (`in_turn`: when it is `owner`'s turn among those waiting), or
    /// returns the key and the holder's owner token.
    async fn try_acquire(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        in_turn: bool,
    ) -> Result<std::result::Result<Self, (LeaseKey, String)>> {
        // Listening before the lease is taken: a cancel sent as soon as the
        // invocation id is known cannot be missed.
        let requests = lease.cancel_requests();
        let acquired = if in_turn {
            lease.acquire_in_turn(&key, owner, ttl, PLACE_IN_LINE_PATIENCE).await?
        } else {
            lease.acquire(&key, owner, ttl).await?
        };
        let interrupted = match acquired {
            Acquire::Acquired { interrupted } => interrupted,
            Acquire::Held(holder) => return Ok(Err((key, holder))),
        };
        let signals = LeaseSignals::default();
        let stop = CancellationToken::new();
        tokio::spawn(heartbeat(
            lease.clone(),
            key.clone(),
            owner.to_string(),
            ttl,
            requests,
            signals.clone(),
            stop.clone(),
        ));
        Ok(Ok(LeaseGuard {
            lease,
            key,
            owner: owner.to_string(),
            ttl,
            held: true,
            interrupted,
            displaced: None,
            signals,
            _heartbeat: stop.drop_guard(),
        }))
    }

    /// Waits for a busy session's lease: `Interrupt` first asks the holder to stop
    /// (wherever it runs), `Enqueue` lets it finish. Gives up with `ABORTED` when the
    /// session stays busy for [`MAX_BUSY_WAIT`].
    async fn acquire_when_free(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        on_busy: OnBusy,
    ) -> Result<Self> {
        let deadline = Instant::now() + MAX_BUSY_WAIT.max(ttl * 2);
        let mut pause = Duration::from_millis(10);
        let mut key = key;
        let mut cancelled = None::<String>;
        loop {
            let in_turn = on_busy == OnBusy::Enqueue;
            let holder = match Self::try_acquire(lease.clone(), key, owner, ttl, in_turn).await? {
                Ok(mut guard) => {
                    guard.displaced = cancelled;
                    return Ok(guard);
                }
                Err((returned, holder)) => {
                    key = returned;
                    holder
                }
            };
            let interrupts = matches!(on_busy, OnBusy::Interrupt | OnBusy::Rollback);
            if interrupts && cancelled.as_deref() != Some(holder.as_str()) {
                lease.request_cancel(&key, &holder).await?;
                tracing::debug!(interrupted = %holder, invocation_id = %owner, "interrupting the running invocation");
                cancelled = Some(holder.clone());
            }
            if Instant::now() >= deadline {
                return Err(busy(&key, &holder));
            }
            // Pacing between attempts: the holder releases the lease when it stops,
            // and a dead one's lease expires within one TTL.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// The precondition that fences this invocation's appends.
    fn fence(&self) -> Precondition {
        Precondition::LeaseHeldBy(self.owner.clone())
    }

    fn lost(&self) -> AdkError {
        AdkError::Aborted(
            adk_core::Conflict::LeaseLost,
            format!(
                "invocation {} lost its lease on session {} (not renewed within {:?}); it stops so that two \
             invocations never run on one session",
                self.owner, self.key.session_id, self.ttl
            ),
        )
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

/// How long a run that waits for a busy session (enqueue, interrupt) waits at most,
/// beyond two lease TTLs.
const MAX_BUSY_WAIT: Duration = Duration::from_secs(600);
/// An enqueued run asks again at least every 200 ms; one that has not asked for this
/// long (its replica died) loses its place in the line.
const PLACE_IN_LINE_PATIENCE: Duration = Duration::from_secs(2);

fn busy(key: &LeaseKey, holder: &str) -> AdkError {
    AdkError::Aborted(
        adk_core::Conflict::SessionBusy,
        format!(
            "session {} is busy with invocation {holder}: one invocation per session at a time",
            key.session_id
        ),
    )
}

/// Renews `owner`'s lease every third of its TTL until `stop`, and turns what it
/// learns into `signals`: a cancel requested (through the lease or on
/// `requests`), or the lease lost. A store hiccup is not a loss: the next tick
/// tries again.
async fn heartbeat(
    lease: Arc<dyn SessionLease>,
    key: LeaseKey,
    owner: String,
    ttl: Duration,
    mut requests: futures::stream::BoxStream<'static, String>,
    signals: LeaseSignals,
    stop: CancellationToken,
) {
    let mut renew = renew_interval(ttl);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            Some(cancelled) = requests.next() => {
                if cancelled == owner {
                    signals.cancel.cancel();
                }
            }
            _ = renew.tick() => match lease.renew(&key, &owner, ttl).await {
                Ok(Renewal::Held) => {}
                Ok(Renewal::CancelRequested) => signals.cancel.cancel(),
                Ok(Renewal::Lost) => {
                    signals.lost.cancel();
                    return;
                }
                Err(e) => tracing::warn!(invocation_id = %owner, error = %e, "could not renew the session lease; retrying"),
            },
        }
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
