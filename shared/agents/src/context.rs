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
    InvocationContext, Memory, Part, ReadonlyContext, ReadonlyState, Result, RunConfig, ScopedArtifacts, Session,
    State, ToolContext,
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
    events: Mutex<Vec<Event>>,
    state: LiveState,
    ended: AtomicBool,
    llm_calls: AtomicU32,
    compaction: Option<Arc<CompactionConfig>>,
    /// The user's long-term memory; None without a memory service.
    memory: Option<Arc<dyn Memory>>,
    /// The runner's agent tree, for transfers to parents and peers.
    root_agent: Arc<dyn Agent>,
    /// Whether another replica may resume it: only then are the positions of its
    /// workflow agents stored in the log ([`Invocation::stores`]).
    resumable: bool,
}

impl Invocation {
    /// `session` as loaded; `user_event` the user's message as stored, and
    /// `user_delta` the delta it was sent with (`temp:` keys included).
    #[allow(clippy::too_many_arguments)] // one call site, in the runner; each is a distinct part
    pub(crate) fn new(
        invocation_id: String,
        root_agent: Arc<dyn Agent>,
        mut session: Session,
        user_event: Event,
        user_delta: HashMap<String, Value>,
        run_config: RunConfig,
        artifacts: Option<Arc<dyn Artifacts>>,
        compaction: Option<Arc<CompactionConfig>>,
    ) -> Self {
        for (key, value) in &user_event.actions.state_delta {
            session.state.set(key.clone(), value.clone());
        }
        let user_content = user_event.content().cloned().unwrap_or_default();
        let mut events = std::mem::take(&mut session.events).into_vec();
        events.push(user_event);
        session.events = Events::new(events.clone());
        let mut state = session.state.as_map().clone();
        state.extend(user_delta);
        Invocation {
            invocation_id,
            user_content,
            session,
            run_config,
            artifacts,
            events: Mutex::new(events),
            state: LiveState(RwLock::new(state)),
            ended: AtomicBool::new(false),
            llm_calls: AtomicU32::new(0),
            compaction,
            memory: None,
            root_agent,
            resumable: false,
        }
    }

    /// An invocation resumed from the log: `session` holds its events already (the
    /// user's message first). `temp_delta` is the `temp:` state the run was sent with;
    /// `temp:` keys its steps set are gone with the runner that set them.
    #[allow(clippy::too_many_arguments)] // one call site, in the runner; each is a distinct part
    pub(crate) fn resumed(
        invocation_id: String,
        root_agent: Arc<dyn Agent>,
        session: Session,
        user_content: Content,
        temp_delta: HashMap<String, Value>,
        run_config: RunConfig,
        artifacts: Option<Arc<dyn Artifacts>>,
        compaction: Option<Arc<CompactionConfig>>,
    ) -> Self {
        let events = session.events.as_slice().to_vec();
        let mut state = session.state.as_map().clone();
        state.extend(temp_delta);
        let model_calls = events
            .iter()
            .filter(|e| e.invocation_id == invocation_id && e.author != crate::USER_AUTHOR)
            .filter(|e| e.content().is_some_and(|c| c.role == "model"))
            .count();
        Invocation {
            invocation_id,
            user_content,
            session,
            run_config,
            artifacts,
            events: Mutex::new(events),
            state: LiveState(RwLock::new(state)),
            ended: AtomicBool::new(false),
            llm_calls: AtomicU32::new(u32::try_from(model_calls).unwrap_or(u32::MAX)),
            compaction,
            memory: None,
            root_agent,
            resumable: false,
        }
    }

    /// Marks it resumable by another replica (its runner records the run).
    pub(crate) fn with_resumable(mut self, resumable: bool) -> Self {
        self.resumable = resumable;
        self
    }

    /// Gives agents and tools the user's long-term memory.
    pub(crate) fn with_memory(mut self, memory: Option<Arc<dyn Memory>>) -> Self {
        self.memory = memory;
        self
    }

    /// The user's message as stored: the first event of the invocation's live view.
    pub(crate) fn user_event(&self) -> Event {
        let events = sync::lock(&self.events);
        events
            .iter()
            .find(|event| event.invocation_id == self.invocation_id)
            .cloned()
            .expect("the invocation's view holds its user event")
    }

    /// The events this invocation stored (the user's message included), oldest first.
    pub(crate) fn own_events(&self) -> Vec<Event> {
        let events = sync::lock(&self.events);
        events
            .iter()
            .filter(|e| e.invocation_id == self.invocation_id)
            .cloned()
            .collect()
    }

    /// Whether `event`'s state writes fit its author's `state_schema` (checked
    /// before it is stored: one that does not fails the run, nothing stored).
    pub(crate) fn check_state_schema(&self, event: &Event) -> Result<()> {
        crate::state_schema::check_event(&self.root_agent, event)
    }

    /// Whether `event` goes to the log: every event but a workflow agent's position
    /// ([`is_position`]) in a run no other replica resumes. ADK stores no position of an
    /// app not marked resumable; its agents still record theirs, beside the log.
    pub(crate) fn stores(&self, event: &Event) -> bool {
        self.resumable || !is_position(event)
    }

    /// Makes a stored event part of the live view. `delta` is the delta the agent
    /// emitted, before the store trimmed its `temp:` keys. An event that is not stored
    /// ([`Invocation::stores`]) is not part of it.
    pub(crate) fn record(&self, stored: Event, delta: HashMap<String, Value>) {
        if !self.stores(&stored) {
            return;
        }
        if !delta.is_empty() {
            let mut state = sync::write(&self.state.0);
            state.extend(delta);
        }
        sync::lock(&self.events).push(stored);
    }

    /// The live events: as loaded (from the latest compaction on) plus those stored since.
    pub(crate) fn events(&self) -> Vec<Event> {
        sync::lock(&self.events).clone()
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
    fn events(&self) -> Vec<Event> {
        sync::lock(&self.invocation.events).clone()
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
    fn events(&self) -> Vec<Event> {
        self.parent.events()
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
    async fn load(&self, name: &str) -> Result<Part> {
        self.inner.load(name).await
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
