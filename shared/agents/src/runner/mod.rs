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
//!
//! Here is the public API and how a run starts and ends; the parts it uses live
//! beside it: `lease` (the lease client: take, heartbeat, cancel and loss signals,
//! release), `driver` (the running invocation's event stream), `session` (what the
//! runner reads and appends), `artifacts` (restore on rewind), `memory` (ingestion).

mod artifacts;
mod driver;
mod lease;
mod memory;
mod resume;
mod session;

pub use resume::Resumer;
#[cfg(test)]
mod tests;

use crate::context::{AgentContext, Invocation, InvocationParts, Positions, session_artifacts, with_user_event};
use crate::rules::{AgentNames, USER_AUTHOR};
use crate::run_state;
use crate::tools::ToolActions;
use adk_grpc_core::history;
use adk_grpc_core::sync;
use adk_grpc_core::{
    AdkError, Agent, AgentKind, AgentMode, ArtifactService, CompactionConfig, Content, Event, EventStream,
    InvocationContext, LeaseKey, MemoryService, Result, RunConfig, RunLog, SessionLease, SessionService, validate,
};
use driver::Driver;
use lease::LeaseGuard;
use serde_json::Value;
use session::{append, has_function_responses};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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
    /// it; a live run's heartbeat renews its lease every third of this.
    pub lease_ttl: Duration,
    /// Event compaction and the model requests' token budget; None keeps every event
    /// in the model's history.
    pub compaction: Option<CompactionConfig>,
    /// Without compaction, the most estimated tokens of history a turn reads (newest
    /// first; older events are left out). None: the smallest default of the tree's
    /// models ([`history::default_context_budget_tokens`]).
    pub context_budget_tokens: Option<usize>,
    /// What a run does when its session is busy, unless its [`RunOptions`] say otherwise.
    pub on_busy: OnBusy,
    /// Whether the app is marked resumable, as ADK's `App.resumability_config`.
    pub resumability_config: ResumabilityConfig,
}

/// ADK's `ResumabilityConfig`: an app marked resumable (`is_resumable`) stores its
/// workflow agents' positions in the session's log (`actions.agent_state` before each
/// step, `actions.end_of_agent` at the end), as ADK does; one that is not (ADK's default)
/// stores the log ADK stores for it, without them. Every run of either is resumed after
/// its replica dies (`docs/semantics.md`, Runner 27): an app not marked resumable keeps
/// the positions beside the log, where only the runner reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumabilityConfig {
    pub is_resumable: bool,
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
            context_budget_tokens: None,
            on_busy: OnBusy::Reject,
            resumability_config: ResumabilityConfig::default(),
        }
    }

    /// Compacts the app's sessions as `compaction` says (see [`CompactionConfig`]).
    pub fn with_compaction(mut self, compaction: CompactionConfig) -> Self {
        self.compaction = Some(compaction);
        self
    }

    /// Without compaction, a turn reads at most `tokens` estimated tokens of history
    /// (see [`RunnerConfig::context_budget_tokens`]).
    pub fn with_context_budget_tokens(mut self, tokens: usize) -> Self {
        self.context_budget_tokens = Some(tokens);
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
    /// The session's events not ingested yet, to the memory service's ingest buffer
    /// (IngestEvents): the memory server generates facts from them when it is due.
    Ingest,
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
    /// What the client tools answered in the message did besides answering (the
    /// `actions` of its function responses, merged): recorded on the user event.
    pub tool_actions: Option<ToolActions>,
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
    context_budget_tokens: usize,
    on_busy: OnBusy,
    running: Arc<Mutex<HashMap<String, RunningInvocation>>>,
    /// Whether another replica can resume its runs (see `resume`).
    resumable: bool,
    /// Where its workflow agents' positions go (see [`ResumabilityConfig`]).
    positions: Positions,
    /// How a message of function responses is taken, by the root agent (see
    /// [`session::AnswerRules`]).
    answer_rules: session::AnswerRules,
    /// Fired when the replica shuts down: new runs are refused, and a resumable run
    /// stops at its next step boundary to be handed over (see `Driver::next`).
    draining: CancellationToken,
}

/// A running invocation's owner, so a cancel naming another user's session is refused.
struct RunningInvocation {
    /// Its lease's owner token: unique per Run, where the invocation id is not (a task's
    /// later turn goes on with the task's invocation).
    owner: String,
    user_id: String,
    session_id: String,
    cancel: CancellationToken,
    /// Stops it and hands its lease to another replica ([`Runner::hand_over_all`]).
    handover: CancellationToken,
}

impl Runner {
    /// Checks the app name and the agent tree: valid, unique agent names (a
    /// transfer or a resumption finds its agent by name).
    pub fn new(config: RunnerConfig) -> Result<Runner> {
        validate::id("app_name", &config.app_name)?;
        check_agent_tree(&config.root_agent, &mut AgentNames::default())?;
        if config.root_agent.mode() != AgentMode::Chat {
            return Err(AdkError::Config(format!(
                "the root agent {} is of mode {}: only a sub-agent is called by a parent",
                config.root_agent.name(),
                config.root_agent.mode().as_str()
            )));
        }
        if config.lease_ttl.is_zero() {
            return Err(AdkError::Config("lease_ttl must be positive".into()));
        }
        if let Some(compaction) = &config.compaction {
            compaction.validate()?;
        }
        if config.context_budget_tokens == Some(0) {
            return Err(AdkError::Config("context_budget_tokens must be positive".into()));
        }
        if config.add_to_memory.is_some() && config.memory_service.is_none() {
            return Err(AdkError::Config(
                "add_to_memory needs a memory service, and this runner has none".into(),
            ));
        }
        let context_budget_tokens = config
            .context_budget_tokens
            .unwrap_or_else(|| session::default_context_budget(&config.root_agent));
        let resumable = resume::resumable_tree(&config.root_agent);
        let positions = match (resumable, config.resumability_config.is_resumable) {
            (true, true) => Positions::InLog,
            (true, false) if has_workflow_agent(&config.root_agent) => Positions::BesideLog,
            // A tree another replica cannot resume, or one whose only positions would be
            // its LLM agents' ends, which the runner never reads back (an LLM agent's
            // final reply is its end): nothing kept, no marks read.
            _ => Positions::Nowhere,
        };
        let answer_rules =
            session::AnswerRules::of(config.root_agent.as_ref(), config.resumability_config.is_resumable);
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
            context_budget_tokens,
            on_busy: config.on_busy,
            running: Arc::default(),
            resumable,
            positions,
            answer_rules,
            draining: Default::default(),
        })
    }

    /// Whether a client's answer to calls made inside a workflow agent goes on with the
    /// workflow from its position, as ADK 2.13 resumes an app marked resumable (and a tree
    /// another replica can resume: its positions are in the log); in an app not marked
    /// resumable ADK runs only the agent that made the calls (docs/semantics.md, Runner 8).
    fn answers_go_on_with_workflows(&self) -> bool {
        self.positions == Positions::InLog
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
        if self.draining.is_cancelled() {
            return Err(AdkError::Unavailable(
                "this runner is shutting down and takes no new runs: run again (on another replica)".into(),
            ));
        }
        let run_id = format!("e-{}", uuid::Uuid::new_v4());
        // A message answering calls goes on with the calls' invocation (ADK's resolved
        // id), one joining a task that waits for the user with the task's (ADK 2's
        // borrowed id): the Run's invocation id is that one, its lease held under
        // `<invocation id>@<run>` (unique per Run, as a claim's token; the lease store
        // and Cancel read the invocation from it).
        let (invocation_id, owner) = match self.invocation_joined(user_id, session_id, &content).await {
            Some(task_invocation) => {
                let owner = adk_grpc_core::claim_owner(&task_invocation, &run_id);
                (task_invocation, owner)
            }
            None => (run_id.clone(), run_id),
        };
        // The invocation's span and metrics: everything it does, from taking the lease
        // to its last event, runs inside the span (see Driver::into_stream).
        let observed = adk_grpc_telemetry::Invocation::start(&self.app_name, user_id, session_id, &invocation_id);
        let span = observed.span().clone();
        let on_busy = options.on_busy.unwrap_or(self.on_busy);
        let started = self
            .take_session_and_start(&invocation_id, &owner, user_id, session_id, content, options, on_busy)
            .instrument(span)
            .await;
        // The one exit of a run that failed to start (its lease is already given back).
        let (lease, invocation, events) = match started {
            Ok(started) => started,
            Err(e) => {
                observed.finish(Some(e.code()));
                return Err(e);
            }
        };
        tracing::debug!(%invocation_id, session_id, "invocation started");
        let user_event = invocation.user_event();
        let add_to_memory = self.memory_to_add_to();
        let started = Started {
            invocation_id,
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            lease,
            invocation,
            observed,
            events,
        };
        Ok(StartedRun {
            user_event,
            events: self.drive(started, add_to_memory, None),
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
        if let Some(running) = sync::lock(&self.running).get(invocation_id)
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

    /// Takes the session's lease (as `on_busy` says) and starts the invocation under
    /// it: `rollback` rewinds the displaced invocation, then the user's message is
    /// stored and the agent started. Whatever fails after the lease is taken gives the
    /// lease back before the error returns, so every failed start frees the session here.
    #[allow(clippy::too_many_arguments)] // each is one of the run's inputs, named
    async fn take_session_and_start(
        &self,
        invocation_id: &str,
        owner: &str,
        user_id: &str,
        session_id: &str,
        content: Content,
        options: RunOptions,
        on_busy: OnBusy,
    ) -> Result<(LeaseGuard, Arc<Invocation>, EventStream)> {
        let key = self.lease_key(user_id, session_id);
        // A resumable run is recorded as its lease is taken (one store call): what
        // another replica needs besides the log to go on with it.
        let record = self
            .resumable
            .then(|| resume::ResumeOptions::of(&options.run_config, &user_state_delta(&options)).encode());
        let mut lease = LeaseGuard::take(self.lease.clone(), key, owner, self.lease_ttl, on_busy, record).await?;
        let started = async {
            if on_busy == OnBusy::Rollback {
                self.roll_back_displaced(user_id, session_id, &mut lease).await?;
            }
            self.start(invocation_id, user_id, session_id, content, options, &lease)
                .await
        }
        .await;
        match started {
            Ok((invocation, events)) => Ok((lease, invocation, events)),
            Err(e) => {
                lease.release().await;
                Err(e)
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
        let key = self.lease_key(user_id, session_id);
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
            let restored = artifacts::restore_artifacts(artifacts.as_ref(), &session, events, cut).await?;
            event.actions.artifact_delta.extend(restored);
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
        let mut session = self
            .load_turn(
                user_id,
                session_id,
                options.create_session_if_missing,
                &content,
                invocation_id,
            )
            .await?;
        // An answer to calls may go on with a workflow agent from its position.
        if has_function_responses(&content) {
            session = self.with_run_marks(session).await?;
        }
        if let Some(interrupted) = &lease.interrupted {
            self.close_interrupted(&mut session, interrupted, lease).await?;
        }
        let mut log = RunLog::new(session.events.as_slice().to_vec());
        let (caller, caller_branch) = self.agent_for(&session, &log, &content)?;
        // Should the open task (or the answered calls' invocation) have changed since the
        // read that chose the Run's id (another Run of the session ran meanwhile), the Run
        // keeps the id its lease was taken with: `place.joins` is not read again here.
        let place = session::user_place(&self.root_agent, self.answer_rules, &session, &log, &content)?;
        let mut user_event = Event::new(invocation_id).with_author(USER_AUTHOR).with_content(content);
        user_event.branch = place.branch;
        user_event.isolation_scope = place.isolation_scope;
        user_event.actions.state_delta = options.state_delta.clone();
        let artifacts = self
            .artifact_service
            .clone()
            .map(|service| session_artifacts(service, &session));
        let user_delta = user_state_delta(&options);
        if let Some(actions) = options.tool_actions {
            check_client_transfer(&caller, &actions)?;
            actions.record(artifacts.clone(), &mut user_event.actions).await?;
        }
        // An answer to a client tool that paused a workflow agent goes on with the workflow
        // (in an app marked resumable; else the agent that made the calls answers alone).
        let (agent, branch) = self
            .answers_go_on_with_workflows()
            .then(|| run_state::continued_workflow(&self.root_agent, &log, log.events().len(), user_event.content()?))
            .flatten()
            .map_or((caller, caller_branch), |(_, open)| open);
        let stored = append(self.session_service.as_ref(), &session, user_event, lease.fence()).await?;
        log.record(stored.clone());
        let memory = self
            .memory_service
            .clone()
            .map(|service| memory::scoped(service, &session));
        let invocation = Arc::new(Invocation::new(InvocationParts {
            invocation_id: invocation_id.to_string(),
            root_agent: self.root_agent.clone(),
            user_content: stored.content().cloned().unwrap_or_default(),
            log,
            session: with_user_event(session, stored),
            overlay: user_delta,
            run_config: options.run_config,
            artifacts,
            compaction: self.compaction.clone(),
            memory,
            positions: self.positions,
        }));
        let ctx: Arc<dyn InvocationContext> = Arc::new(AgentContext::new(invocation.clone(), agent.clone(), branch));
        let events = agent.run(ctx).await?;
        Ok((invocation, events))
    }
}

/// An invocation whose agents have started, under its lease: what [`Runner::drive`] streams.
struct Started {
    invocation_id: String,
    user_id: String,
    session_id: String,
    lease: LeaseGuard,
    invocation: Arc<Invocation>,
    observed: adk_grpc_telemetry::Invocation,
    events: EventStream,
}

impl Runner {
    /// Registers a started (or resumed) invocation as running here, so Cancel and a
    /// shutdown's hand-over reach it, and streams its events through the driver, which
    /// stores them under the lease. `lease_lost_at`: when the lease of a resumed run lapsed.
    /// Where and what a finished run adds to memory, when the runner is configured to.
    fn memory_to_add_to(&self) -> Option<(Arc<dyn MemoryService>, AddToMemory)> {
        match (&self.memory_service, self.add_to_memory) {
            (Some(memory), Some(what)) => Some((memory.clone(), what)),
            _ => None,
        }
    }

    fn drive(
        &self,
        started: Started,
        add_to_memory: Option<(Arc<dyn MemoryService>, AddToMemory)>,
        lease_lost_at: Option<std::time::Instant>,
    ) -> EventStream {
        let handover = CancellationToken::new();
        let owner = started.lease.owner().to_string();
        let running = RunningInvocation {
            owner: owner.clone(),
            user_id: started.user_id,
            session_id: started.session_id,
            cancel: started.lease.signals.cancel.clone(),
            handover: handover.clone(),
        };
        sync::lock(&self.running).insert(started.invocation_id.clone(), running);
        let driver = Driver {
            session_service: self.session_service.clone(),
            app_name: self.app_name.clone(),
            compaction: self.compaction.clone(),
            add_to_memory,
            invocation: started.invocation,
            observed: started.observed,
            events: started.events,
            lease: started.lease,
            _registration: Registration {
                running: self.running.clone(),
                invocation_id: started.invocation_id,
                owner,
            },
            handover,
            lease_lost_at,
            // A run that cannot be resumed elsewhere finishes here within the grace.
            draining: self.resumable.then(|| self.draining.clone()),
            in_step: false,
            isolation_scopes: Default::default(),
        };
        driver.into_stream()
    }
}

fn has_workflow_agent(agent: &Arc<dyn Agent>) -> bool {
    agent.spec().kind == AgentKind::Workflow || agent.sub_agents().iter().any(has_workflow_agent)
}

/// The state a run's user turn changes: its `state_delta` and, when it answers client
/// tools, theirs.
fn user_state_delta(options: &RunOptions) -> HashMap<String, Value> {
    let mut delta = options.state_delta.clone();
    if let Some(actions) = &options.tool_actions {
        delta.extend(actions.state_delta.clone());
    }
    delta
}

/// A client tool may hand the turn only to a sub-agent of the agent that made the call,
/// as that agent's own `transfer_to_agent` could; refused before anything is stored.
fn check_client_transfer(caller: &Arc<dyn Agent>, actions: &ToolActions) -> Result<()> {
    let Some(target) = &actions.transfer_to_agent else {
        return Ok(());
    };
    if caller.sub_agents().iter().any(|sub| sub.name() == target) {
        return Ok(());
    }
    Err(AdkError::invalid(
        "new_message.function_response.actions.transfer_to_agent",
        format!(
            "agent {}, which made the call, has no sub-agent {target}",
            caller.name()
        ),
    ))
}

/// Every agent name of the tree follows the library's rules: an identifier other
/// than "user", unique in the tree.
fn check_agent_tree(agent: &Arc<dyn Agent>, names: &mut AgentNames) -> Result<()> {
    crate::rules::validate_agent_name(agent.name())?;
    names.insert(agent.name())?;
    // A task or single-turn agent is a tool of its parent: only an llm agent calls tools.
    if agent.transfer_scope().is_none()
        && let Some(sub) = agent.sub_agents().iter().find(|sub| sub.mode() != AgentMode::Chat)
    {
        return Err(AdkError::Config(format!(
            "agent {} is of mode {} and its parent {} is not an llm agent: only an llm agent calls its sub-agents \
             as tools",
            sub.name(),
            sub.mode().as_str(),
            agent.name()
        )));
    }
    agent
        .sub_agents()
        .iter()
        .try_for_each(|sub| check_agent_tree(sub, names))
}

/// The invocation's entry in the runner's registry, removed when the run ends or is
/// dropped: its own entry only (a later Run of the same invocation, a task's next turn
/// taking the session over, may have replaced it).
struct Registration {
    running: Arc<Mutex<HashMap<String, RunningInvocation>>>,
    invocation_id: String,
    owner: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut running = sync::lock(&self.running);
        if running
            .get(&self.invocation_id)
            .is_some_and(|entry| entry.owner == self.owner)
        {
            running.remove(&self.invocation_id);
        }
    }
}
