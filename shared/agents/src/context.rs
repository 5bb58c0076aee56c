//! The runner's implementations of the context traits.
//!
//! One [`Invocation`] holds what every agent of an invocation shares: ids, the
//! user's message, the live event list and the live state (the stored state
//! plus every delta of this invocation, `temp:` keys included: the store drops
//! those, so this overlay is the only place they exist). Agents see it through
//! an [`AgentContext`] (agent + branch); tools through a [`ToolCallContext`].

use adk_grpc_core::sync;
use adk_grpc_core::{
    AdkError, Agent, Artifacts, CallbackContext, CompactionConfig, Content, Event, EventActions, Events,
    InvocationContext, Memory, Part, ReadonlyContext, ReadonlyState, Result, RunConfig, RunLog, ScopedArtifacts,
    Session, State, ToolContext,
};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// State as the invocation sees it.
#[derive(Default)]
pub(crate) struct LiveState(RwLock<HashMap<String, Value>>);

impl ReadonlyState for LiveState {
    fn get(&self, key: &str) -> Option<Value> {
        let map = sync::read(&self.0);
        map.get(key).cloned()
    }

    fn all(&self) -> HashMap<String, Value> {
        sync::read(&self.0).clone()
    }
}

/// What all agents of one invocation share.
pub(crate) struct Invocation {
    pub(crate) invocation_id: String,
    user_content: Content,
    pub(crate) session: Session,
    run_config: RunConfig,
    artifacts: Option<Arc<dyn Artifacts>>,
    /// The live log and its index: a snapshot replaced as events are recorded, which
    /// readers share ([`Invocation::run_log`]) instead of copying it.
    log: Mutex<Arc<RunLog>>,
    state: LiveState,
    ended: AtomicBool,
    llm_calls: AtomicU32,
    compaction: Option<Arc<CompactionConfig>>,
    /// The user's long-term memory; None without a memory service.
    memory: Option<Arc<dyn Memory>>,
    /// The runner's agent tree, for transfers to parents and peers.
    pub(crate) root_agent: Arc<dyn Agent>,
    /// Where the positions of its workflow agents go ([`Invocation::place_of`]).
    positions: Positions,
}

/// Where an invocation keeps its agents' positions ([`is_position`]): its workflow
/// agents' steps and ends, and, in the log only, its LLM agents' ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Positions {
    /// In the log, as ADK stores them for an app marked resumable.
    InLog,
    /// Beside the log, as run marks (`SessionService::append_run_mark`): the log is ADK's
    /// for an app not marked resumable, and another replica still finds them to go on
    /// with the run (merged back by `Runner::with_run_marks`).
    BesideLog,
    /// Nowhere: no other replica goes on with the run (a tree with a custom agent, an
    /// agent tool's run of its agent), or none would read them (a tree of LLM agents
    /// only, not marked resumable).
    Nowhere,
}

/// What an invocation is made of, started or resumed.
pub(crate) struct InvocationParts {
    pub(crate) invocation_id: String,
    pub(crate) root_agent: Arc<dyn Agent>,
    /// The session as loaded, holding the invocation's stored events, the user's
    /// message first ([`with_user_event`] for one that starts now).
    pub(crate) session: Session,
    /// The session's events (as `session` holds them), indexed.
    pub(crate) log: RunLog,
    /// The user's message that started the invocation.
    pub(crate) user_content: Content,
    /// State the store does not give back: `temp:` keys (the store drops them),
    /// on top of the stored state.
    pub(crate) overlay: HashMap<String, Value>,
    pub(crate) run_config: RunConfig,
    pub(crate) artifacts: Option<Arc<dyn Artifacts>>,
    pub(crate) compaction: Option<Arc<CompactionConfig>>,
    /// The user's long-term memory; None without a memory service.
    pub(crate) memory: Option<Arc<dyn Memory>>,
    /// Where its workflow agents' positions go.
    pub(crate) positions: Positions,
}

/// `session` as loaded, with the user's message as stored appended and its delta
/// applied: the session an invocation that starts now is made of.
pub(crate) fn with_user_event(mut session: Session, user_event: Event) -> Session {
    for (key, value) in &user_event.actions.state_delta {
        session.state.set(key.clone(), value.clone());
    }
    let mut events = std::mem::take(&mut session.events).into_vec();
    events.push(user_event);
    session.events = Events::new(events);
    session
}

impl Invocation {
    /// A resumed invocation goes on counting its model calls from those it stored.
    pub(crate) fn new(parts: InvocationParts) -> Self {
        let InvocationParts {
            invocation_id,
            root_agent,
            session,
            log,
            user_content,
            overlay,
            run_config,
            artifacts,
            compaction,
            memory,
            positions,
        } = parts;
        let mut state = session.state.as_map().clone();
        state.extend(overlay);
        // The model calls of this Run so far (a resumed one's): a task's later turn goes
        // on with the task's invocation, and counts from its own message, as ADK does.
        let model_calls = log
            .run_events(&invocation_id)
            .iter()
            .map(|&at| log.at(at))
            .filter(|e| e.author != crate::rules::USER_AUTHOR && e.content().is_some_and(|c| c.role == "model"))
            .count();
        Invocation {
            invocation_id,
            user_content,
            session,
            run_config,
            artifacts,
            log: Mutex::new(Arc::new(log)),
            state: LiveState(RwLock::new(state)),
            ended: AtomicBool::new(false),
            llm_calls: AtomicU32::new(u32::try_from(model_calls).unwrap_or(u32::MAX)),
            compaction,
            memory,
            root_agent,
            positions,
        }
    }

    /// The user's message as stored: the first event of the invocation's live view.
    pub(crate) fn user_event(&self) -> Event {
        self.own_events()
            .into_iter()
            .next()
            .expect("the invocation's view holds its user event")
    }

    /// The events this Run stored (the user's message included), oldest first: of a
    /// task's later turn, those from its message on ([`RunLog::run_events`]).
    pub(crate) fn own_events(&self) -> Vec<Event> {
        let log = self.run_log();
        log.run_events(&self.invocation_id)
            .iter()
            .map(|&at| log.at(at).clone())
            .collect()
    }

    /// Where `event` goes: the log, for every event but a workflow agent's position
    /// ([`is_position`]), which goes where the invocation keeps positions.
    pub(crate) fn place_of(&self, event: &Event) -> Positions {
        if is_position(event) {
            self.positions
        } else {
            Positions::InLog
        }
    }

    /// Makes a stored event (or a position kept beside the log) part of the live view.
    /// `delta` is the delta the agent emitted, before the store trimmed its `temp:` keys.
    /// A position kept nowhere is not part of it.
    pub(crate) fn record(&self, stored: Event, delta: HashMap<String, Value>) {
        if self.place_of(&stored) == Positions::Nowhere {
            return;
        }
        if !delta.is_empty() {
            let mut state = sync::write(&self.state.0);
            state.extend(delta);
        }
        // Copies the log only while a reader still holds the previous snapshot.
        Arc::make_mut(&mut sync::lock(&self.log)).record(stored);
    }

    /// The live log: as loaded (from the latest compaction on) plus what was stored
    /// since, as a snapshot shared with every other reader.
    pub(crate) fn run_log(&self) -> Arc<RunLog> {
        sync::lock(&self.log).clone()
    }

    /// The events of [`Invocation::run_log`].
    pub(crate) fn events(&self) -> Arc<Vec<Event>> {
        self.run_log().events().clone()
    }
}

/// Whether `event` only records an agent's position (`actions.agent_state`) or end
/// (`actions.end_of_agent`): no content, no other action.
pub(crate) fn is_position(event: &Event) -> bool {
    let actions = &event.actions;
    if event.content().is_some() || (actions.agent_state.is_none() && actions.end_of_agent.is_none()) {
        return false;
    }
    let others = EventActions {
        agent_state: None,
        end_of_agent: None,
        ..actions.clone()
    };
    others == EventActions::default()
}

/// One agent's view of an invocation.
pub(crate) struct AgentContext {
    invocation: Arc<Invocation>,
    agent: Arc<dyn Agent>,
    branch: String,
}

impl AgentContext {
    pub(crate) fn new(invocation: Arc<Invocation>, agent: Arc<dyn Agent>, branch: String) -> Self {
        AgentContext {
            invocation,
            agent,
            branch,
        }
    }
}

impl ReadonlyContext for AgentContext {
    fn invocation_id(&self) -> &str {
        &self.invocation.invocation_id
    }
    fn agent_name(&self) -> &str {
        self.agent.name()
    }
    fn user_id(&self) -> &str {
        &self.invocation.session.user_id
    }
    fn app_name(&self) -> &str {
        &self.invocation.session.app_name
    }
    fn session_id(&self) -> &str {
        &self.invocation.session.id
    }
    fn user_content(&self) -> &Content {
        &self.invocation.user_content
    }
    fn state(&self) -> &dyn ReadonlyState {
        &self.invocation.state
    }
}

impl CallbackContext for AgentContext {
    fn artifacts(&self) -> Option<Arc<dyn Artifacts>> {
        self.invocation.artifacts.clone()
    }
    fn memory(&self) -> Option<Arc<dyn Memory>> {
        self.invocation.memory.clone()
    }
}

impl InvocationContext for AgentContext {
    fn agent(&self) -> Arc<dyn Agent> {
        self.agent.clone()
    }
    fn session(&self) -> &Session {
        &self.invocation.session
    }
    fn run_log(&self) -> Arc<RunLog> {
        self.invocation.run_log()
    }
    fn branch(&self) -> &str {
        &self.branch
    }
    fn run_config(&self) -> &RunConfig {
        &self.invocation.run_config
    }
    fn end_invocation(&self) {
        self.invocation.ended.store(true, Ordering::SeqCst);
    }
    fn ended(&self) -> bool {
        self.invocation.ended.load(Ordering::SeqCst)
    }
    fn is_resumable(&self) -> bool {
        self.invocation.positions == Positions::InLog
    }
    fn increment_llm_call_count(&self) -> Result<()> {
        let limit = self.invocation.run_config.max_llm_calls;
        let calls = self.invocation.llm_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if limit > 0 && calls > limit {
            return Err(AdkError::limit(
                "max_llm_calls",
                limit,
                format!(
                    "max_llm_calls exceeded: invocation {} may call the model at most {limit} times \
                 (RunConfig::max_llm_calls)",
                    self.invocation.invocation_id
                ),
            ));
        }
        Ok(())
    }
    fn for_agent(&self, agent: Arc<dyn Agent>, branch: &str) -> Arc<dyn InvocationContext> {
        Arc::new(AgentContext::new(self.invocation.clone(), agent, branch.to_string()))
    }
    fn compaction(&self) -> Option<&CompactionConfig> {
        self.invocation.compaction.as_deref()
    }
    fn root_agent(&self) -> Arc<dyn Agent> {
        self.invocation.root_agent.clone()
    }
}

/// The context of one function call. It works on top of any `InvocationContext`,
/// so custom agents get the same tool semantics.
pub struct ToolCallContext {
    parent: Arc<dyn InvocationContext>,
    function_call_id: String,
    actions: Arc<Mutex<EventActions>>,
}

impl ToolCallContext {
    pub fn new(parent: Arc<dyn InvocationContext>, function_call_id: impl Into<String>) -> Self {
        ToolCallContext {
            parent,
            function_call_id: function_call_id.into(),
            actions: Arc::default(),
        }
    }

    /// The actions the tool recorded, for its response event.
    pub fn take_actions(&self) -> EventActions {
        std::mem::take(&mut *sync::lock(&self.actions))
    }
}

impl ReadonlyContext for ToolCallContext {
    fn invocation_id(&self) -> &str {
        self.parent.invocation_id()
    }
    fn agent_name(&self) -> &str {
        self.parent.agent_name()
    }
    fn user_id(&self) -> &str {
        self.parent.user_id()
    }
    fn app_name(&self) -> &str {
        self.parent.app_name()
    }
    fn session_id(&self) -> &str {
        self.parent.session_id()
    }
    fn user_content(&self) -> &Content {
        self.parent.user_content()
    }
    /// The invocation's state with this call's own pending writes on top, so a
    /// tool reads back what it wrote before its event is stored.
    fn state(&self) -> &dyn ReadonlyState {
        self
    }
}

impl ReadonlyState for ToolCallContext {
    fn get(&self, key: &str) -> Option<Value> {
        let pending = sync::lock(&self.actions).state_delta.get(key).cloned();
        pending.or_else(|| self.parent.state().get(key))
    }

    fn all(&self) -> HashMap<String, Value> {
        let mut all = self.parent.state().all();
        all.extend(sync::lock(&self.actions).state_delta.clone());
        all
    }
}

impl CallbackContext for ToolCallContext {
    /// Saves are recorded in this call's `artifact_delta`.
    fn artifacts(&self) -> Option<Arc<dyn Artifacts>> {
        let inner = self.parent.artifacts()?;
        Some(Arc::new(RecordingArtifacts {
            inner,
            actions: self.actions.clone(),
        }))
    }
    fn memory(&self) -> Option<Arc<dyn Memory>> {
        self.parent.memory()
    }
}

impl ToolContext for ToolCallContext {
    fn function_call_id(&self) -> &str {
        &self.function_call_id
    }
    fn actions(&self) -> EventActions {
        sync::lock(&self.actions).clone()
    }
    fn set_actions(&self, actions: EventActions) {
        *sync::lock(&self.actions) = actions;
    }
    fn events(&self) -> Arc<Vec<Event>> {
        self.parent.events()
    }
    fn calling_agent(&self) -> Option<Arc<dyn Agent>> {
        Some(self.parent.agent())
    }
    fn run_config(&self) -> RunConfig {
        self.parent.run_config().clone()
    }
}

/// Artifacts that note every saved version in a tool call's `artifact_delta`.
struct RecordingArtifacts {
    inner: Arc<dyn Artifacts>,
    actions: Arc<Mutex<EventActions>>,
}

#[async_trait]
impl Artifacts for RecordingArtifacts {
    async fn save(&self, name: &str, part: &Part) -> Result<i64> {
        let version = self.inner.save(name, part).await?;
        sync::lock(&self.actions)
            .artifact_delta
            .insert(name.to_string(), version);
        Ok(version)
    }
    async fn load_version(&self, name: &str, version: Option<i64>) -> Result<Part> {
        self.inner.load_version(name, version).await
    }
    async fn list(&self) -> Result<Vec<String>> {
        self.inner.list().await
    }
}

/// Artifacts bound to the invocation's session.
pub(crate) fn session_artifacts(
    service: Arc<dyn adk_grpc_core::ArtifactService>,
    session: &Session,
) -> Arc<dyn Artifacts> {
    Arc::new(ScopedArtifacts::new(
        service,
        session.app_name.clone(),
        session.user_id.clone(),
        session.id.clone(),
    ))
}
