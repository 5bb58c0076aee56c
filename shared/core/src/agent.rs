//! The agent interface (ADK's `BaseAgent`) and the per-invocation run settings.

use crate::context::InvocationContext;
use crate::error::Result;
use crate::session::EventStream;
use async_trait::async_trait;
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
}

/// The agent called `name` in the tree below (and including) `root`, depth first.
pub fn find_agent(root: &Arc<dyn Agent>, name: &str) -> Option<Arc<dyn Agent>> {
    if root.name() == name {
        return Some(root.clone());
    }
    root.sub_agents().iter().find_map(|sub| find_agent(sub, name))
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, Vec<Arc<dyn Agent>>);

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
