//! The agent interface (ADK's `BaseAgent`) and the per-invocation run settings.

use crate::context::InvocationContext;
use crate::error::Result;
use crate::model::Llm;
use crate::session::EventStream;
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// An agent: an LLM agent, a workflow agent or a custom one.
///
/// `run` yields the agent's events as they happen. The runner stores every
/// non-partial event before it polls the stream again, so when an agent resumes
/// after yielding an event, [`InvocationContext::events`] and
/// [`crate::context::ReadonlyContext::state`] already include it.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Unique within one agent tree: transfers and resumptions find agents by name.
    fn name(&self) -> &str;

    /// What the agent does; shown to models choosing where to transfer.
    fn description(&self) -> &str;

    /// The agents this one can run or hand over to.
    fn sub_agents(&self) -> &[Arc<dyn Agent>];

    /// Runs the agent for one invocation.
    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream>;

    /// Where the agent may hand the turn over besides its sub-agents; None for
    /// agents that never transfer (workflow and remote agents), as ADK's agents
    /// without `disallow_transfer_to_parent`.
    fn transfer_scope(&self) -> Option<TransferScope> {
        None
    }

    /// How its parent reaches it (ADK 2's `mode`): a transfer target ([`AgentMode::Chat`],
    /// every agent but an LLM agent set otherwise), or a tool of its parent.
    fn mode(&self) -> AgentMode {
        AgentMode::Chat
    }

    /// What the agent declares besides its behaviour, for the library code that
    /// resumes, calls or checks it without running it (a custom agent's by default).
    fn spec(&self) -> AgentSpec<'_> {
        AgentSpec::default()
    }
}

/// What the runner library reads of an agent besides running it: its kind (whether
/// a resumed run can go on from its position in the log) and an LLM agent's fields
/// other agents use (ADK's `LlmAgent` fields of the same names).
#[derive(Clone, Copy, Default)]
pub struct AgentSpec<'a> {
    pub kind: AgentKind,
    /// The root agent's instruction to every LLM agent of its tree.
    pub global_instruction: Option<&'a str>,
    /// Its own instruction, as written (placeholders not yet filled).
    pub instruction: Option<&'a str>,
    /// The texts of its static instruction, sent as written (its files left out); empty
    /// when it has none.
    pub static_instruction: &'a [String],
    /// The model it calls.
    pub model: Option<&'a Arc<dyn Llm>>,
    /// The JSON Schema of its arguments when it is called as a tool.
    pub input_schema: Option<&'a Value>,
    /// Whether `input_schema` is a Python class's (pydantic's): arguments it does not
    /// declare are then dropped from the agent's message, as pydantic drops them.
    pub input_schema_is_class: bool,
    /// The JSON Schema of its reply.
    pub output_schema: Option<&'a Value>,
    /// Whether `output_schema` is a Python object's (a pydantic class, a list of one, any
    /// other type such as `dict[str, int]`): a task's output of it is then given back as
    /// pydantic validates and dumps it (a class's field order, lax conversions made).
    pub output_schema_is_python: bool,
    /// What its events may write to the state.
    pub state_schema: Option<&'a dyn StateSchemaCheck>,
}

/// The kinds of agent the runner tells apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentKind {
    /// An LLM agent: its position is its events (model replies, calls, responses).
    Llm,
    /// A sequential, parallel or loop agent: it stores its position as state events
    /// (`actions.agent_state`, `actions.end_of_agent`).
    Workflow,
    /// Any other agent, whose position the runner cannot know.
    #[default]
    Custom,
}

impl AgentKind {
    /// Whether a run stopped inside such an agent can go on from its position in the log.
    pub fn resumable(self) -> bool {
        self != AgentKind::Custom
    }
}

/// A compiled `state_schema` (ADK's): the state writes an agent's events may make.
pub trait StateSchemaCheck: Send + Sync {
    /// The schema as given.
    fn schema(&self) -> &Value;
    /// Whether the writes of `delta` fit; Err says every way they do not, naming the keys.
    fn check(&self, delta: &HashMap<String, Value>) -> std::result::Result<(), String>;
}

/// ADK's `disallow_transfer_to_parent` / `disallow_transfer_to_peers`, the other way
/// round: ADK's default is both allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferScope {
    pub to_parent: bool,
    pub to_peers: bool,
}

impl Default for TransferScope {
    fn default() -> Self {
        TransferScope {
            to_parent: true,
            to_peers: true,
        }
    }
}

/// ADK 2's delegation modes of an LLM sub-agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgentMode {
    /// A transfer target: it takes the conversation over (`transfer_to_agent`).
    #[default]
    Chat,
    /// A tool of its parent that talks with the user across turns until it calls
    /// `finish_task`, whose arguments answer the parent's call.
    Task,
    /// A tool of its parent that runs to its reply without the user, which answers the call.
    SingleTurn,
}

impl AgentMode {
    /// ADK's spelling: `chat`, `task`, `single_turn`.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentMode::Chat => "chat",
            AgentMode::Task => "task",
            AgentMode::SingleTurn => "single_turn",
        }
    }
}

/// The agent called `name` in the tree below (and including) `root`, depth first.
pub fn find_agent(root: &Arc<dyn Agent>, name: &str) -> Option<Arc<dyn Agent>> {
    if root.name() == name {
        return Some(root.clone());
    }
    root.sub_agents().iter().find_map(|sub| find_agent(sub, name))
}

/// The parent of the agent called `name` in `root`'s tree; None for the root or a stranger.
pub fn parent_of(root: &Arc<dyn Agent>, name: &str) -> Option<Arc<dyn Agent>> {
    if root.sub_agents().iter().any(|sub| sub.name() == name) {
        return Some(root.clone());
    }
    root.sub_agents().iter().find_map(|sub| parent_of(sub, name))
}

/// The agents `agent` may transfer to (ADK's `_get_transfer_targets`): its sub-agents,
/// and, when its parent transfers too, the parent and the parent's other sub-agents
/// unless its [`TransferScope`] disallows them. Empty for agents that never transfer.
/// Agents of a mode other than [`AgentMode::Chat`] are their parent's tools, never a
/// target; they are offered the transfer themselves, as ADK offers it (without its
/// instruction).
pub fn transfer_targets(root: &Arc<dyn Agent>, agent: &Arc<dyn Agent>) -> Vec<Arc<dyn Agent>> {
    let Some(scope) = agent.transfer_scope() else {
        return Vec::new();
    };
    let chat = |a: &&Arc<dyn Agent>| a.mode() == AgentMode::Chat;
    let mut targets: Vec<Arc<dyn Agent>> = agent.sub_agents().iter().filter(chat).cloned().collect();
    let Some(parent) = parent_of(root, agent.name()).filter(|parent| parent.transfer_scope().is_some()) else {
        return targets;
    };
    if scope.to_parent {
        targets.push(parent.clone());
    }
    if scope.to_peers {
        targets.extend(
            parent
                .sub_agents()
                .iter()
                .filter(|peer| peer.name() != agent.name())
                .filter(chat)
                .cloned(),
        );
    }
    targets
}

/// Whether `agent` and every agent above it may transfer to its parent (ADK's
/// `is_transferable_across_agent_tree`): such an agent keeps the conversation
/// after it replied, the next message going to it rather than to the root.
pub fn transferable_across_tree(root: &Arc<dyn Agent>, agent: &Arc<dyn Agent>) -> bool {
    let mut current = agent.clone();
    loop {
        match current.transfer_scope() {
            // A task or single-turn agent answers its parent's call: it never keeps the
            // conversation by replying.
            Some(scope) if scope.to_parent && current.mode() == AgentMode::Chat => {}
            _ => return false,
        }
        match parent_of(root, current.name()) {
            Some(parent) => current = parent,
            None => return true,
        }
    }
}

/// How model replies reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamingMode {
    /// One complete event per model reply.
    #[default]
    None,
    /// Text is streamed as `partial` events as the model produces it, then the
    /// complete event (the only one stored) follows.
    Sse,
}

/// Settings of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    pub streaming_mode: StreamingMode,
    /// Upper bound on model calls in one invocation; 0 means no limit.
    pub max_llm_calls: u32,
    /// Whether another agent's thoughts are told to an agent when its turns are retold
    /// as context (ADK's `include_thoughts_from_other_agents`); off, they stay its own.
    pub include_thoughts_from_other_agents: bool,
}

impl RunConfig {
    /// ADK's default bound: generous for real work, but stops a runaway tool loop.
    pub const DEFAULT_MAX_LLM_CALLS: u32 = 500;
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            streaming_mode: StreamingMode::None,
            max_llm_calls: Self::DEFAULT_MAX_LLM_CALLS,
            include_thoughts_from_other_agents: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, Vec<Arc<dyn Agent>>);

    /// An agent that transfers, as an LLM agent does, within `scope`.
    struct Transferring(&'static str, Vec<Arc<dyn Agent>>, TransferScope);

    #[async_trait]
    impl Agent for Transferring {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            ""
        }
        fn sub_agents(&self) -> &[Arc<dyn Agent>] {
            &self.1
        }
        async fn run(&self, _ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
            Ok(Box::pin(futures::stream::empty()))
        }
        fn transfer_scope(&self) -> Option<TransferScope> {
            Some(self.2)
        }
    }

    fn names(agents: &[Arc<dyn Agent>]) -> Vec<&str> {
        agents.iter().map(|a| a.name()).collect()
    }

    #[test]
    fn transfer_targets_follow_adk_defaults_and_disallows() {
        let all = TransferScope::default();
        let only_down = TransferScope {
            to_parent: false,
            to_peers: false,
        };
        let leaf: Arc<dyn Agent> = Arc::new(Transferring("leaf", vec![], all));
        let billing: Arc<dyn Agent> = Arc::new(Transferring("billing", vec![leaf.clone()], all));
        let support: Arc<dyn Agent> = Arc::new(Transferring("support", vec![], only_down));
        let steps: Arc<dyn Agent> = Arc::new(Named("steps", vec![]));
        let root: Arc<dyn Agent> = Arc::new(Transferring(
            "root",
            vec![billing.clone(), support.clone(), steps.clone()],
            all,
        ));
        assert_eq!(names(&transfer_targets(&root, &root)), ["billing", "support", "steps"]);
        assert_eq!(
            names(&transfer_targets(&root, &billing)),
            ["leaf", "root", "support", "steps"]
        );
        assert_eq!(names(&transfer_targets(&root, &support)), Vec::<&str>::new());
        assert_eq!(names(&transfer_targets(&root, &leaf)), ["billing"]);
        assert!(
            transfer_targets(&root, &steps).is_empty(),
            "workflow agents do not transfer"
        );
        assert!(transferable_across_tree(&root, &leaf));
        assert!(!transferable_across_tree(&root, &support));
        assert!(!transferable_across_tree(&root, &steps));
        // Under a workflow agent nothing is transferable: it does not transfer.
        let inner: Arc<dyn Agent> = Arc::new(Transferring("inner", vec![], all));
        let workflow: Arc<dyn Agent> = Arc::new(Named("workflow", vec![inner.clone()]));
        assert!(!transferable_across_tree(&workflow, &inner));
        assert!(transfer_targets(&workflow, &inner).is_empty());
    }

    #[async_trait]
    impl Agent for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            ""
        }
        fn sub_agents(&self) -> &[Arc<dyn Agent>] {
            &self.1
        }
        async fn run(&self, _ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
            Ok(Box::pin(futures::stream::empty()))
        }
    }

    #[test]
    fn find_agent_searches_the_whole_tree() {
        let leaf: Arc<dyn Agent> = Arc::new(Named("leaf", vec![]));
        let mid: Arc<dyn Agent> = Arc::new(Named("mid", vec![leaf]));
        let root: Arc<dyn Agent> = Arc::new(Named("root", vec![mid]));
        assert_eq!(
            find_agent(&root, "root").map(|a| a.name().to_string()).as_deref(),
            Some("root")
        );
        assert_eq!(
            find_agent(&root, "leaf").map(|a| a.name().to_string()).as_deref(),
            Some("leaf")
        );
        assert!(find_agent(&root, "nobody").is_none());
    }
}
