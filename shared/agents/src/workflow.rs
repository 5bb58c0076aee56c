//! Workflow agents: they call no model themselves, they run their sub-agents
//! in order (`SequentialAgent`), at once (`ParallelAgent`) or repeatedly (`LoopAgent`).

use adk_grpc_core::{Agent, EventStream, InvocationContext, Result};
use async_stream::try_stream;
use async_trait::async_trait;
use futures::StreamExt;
use std::sync::Arc;

/// Name, description and sub-agents: what every workflow agent has.
struct Workflow {
    name: String,
    description: String,
    sub_agents: Vec<Arc<dyn Agent>>,
}

impl Workflow {
    fn new(name: impl Into<String>, sub_agents: Vec<Arc<dyn Agent>>) -> Self {
        Workflow {
            name: name.into(),
            description: String::new(),
            sub_agents,
        }
    }
}

macro_rules! workflow_agent_basics {
    ($agent:ty) => {
        impl $agent {
            pub fn description(mut self, description: impl Into<String>) -> Self {
                self.workflow.description = description.into();
                self
            }
        }
    };
}

/// Runs `sub_agents` one after another, on the parent's branch; stops early
/// when the invocation ends (e.g. a long-running call paused it).
pub struct SequentialAgent {
    workflow: Workflow,
}

impl SequentialAgent {
    pub fn new(name: impl Into<String>, sub_agents: Vec<Arc<dyn Agent>>) -> Self {
        SequentialAgent {
            workflow: Workflow::new(name, sub_agents),
        }
    }
}

/// Runs all `sub_agents` concurrently, each on its own branch
/// (`<branch>.<child>`, or `<parent>.<child>` at the top), so none sees the
/// others' events; their events are streamed as they come.
pub struct ParallelAgent {
    workflow: Workflow,
}

impl ParallelAgent {
    pub fn new(name: impl Into<String>, sub_agents: Vec<Arc<dyn Agent>>) -> Self {
        ParallelAgent {
            workflow: Workflow::new(name, sub_agents),
        }
    }
}

/// Runs `sub_agents` in order, again and again, until one of their events
/// escalates (e.g. the `exit_loop` tool), `max_iterations` rounds are done, or
/// the invocation ends.
pub struct LoopAgent {
    workflow: Workflow,
    max_iterations: Option<u32>,
}

impl LoopAgent {
    pub fn new(name: impl Into<String>, sub_agents: Vec<Arc<dyn Agent>>) -> Self {
        LoopAgent {
            workflow: Workflow::new(name, sub_agents),
            max_iterations: None,
        }
    }

    pub fn max_iterations(mut self, max_iterations: u32) -> Self {
        self.max_iterations = Some(max_iterations);
        self
    }
}

workflow_agent_basics!(SequentialAgent);
workflow_agent_basics!(ParallelAgent);
workflow_agent_basics!(LoopAgent);

macro_rules! agent_identity {
    () => {
        fn name(&self) -> &str {
            &self.workflow.name
        }
        fn description(&self) -> &str {
            &self.workflow.description
        }
        fn sub_agents(&self) -> &[Arc<dyn Agent>] {
            &self.workflow.sub_agents
        }
    };
}

#[async_trait]
impl Agent for SequentialAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let sub_agents = self.workflow.sub_agents.clone();
        Ok(Box::pin(try_stream! {
            for agent in sub_agents {
                if ctx.ended() {
                    break;
                }
                let mut events = agent.run(ctx.for_agent(agent.clone(), ctx.branch())).await?;
                while let Some(event) = events.next().await {
                    yield event?;
                }
            }
        }))
    }
}

#[async_trait]
impl Agent for ParallelAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let mut branches = Vec::with_capacity(self.workflow.sub_agents.len());
        for agent in &self.workflow.sub_agents {
            let parent = if ctx.branch().is_empty() {
                self.workflow.name.as_str()
            } else {
                ctx.branch()
            };
            let branch = format!("{parent}.{}", agent.name());
            branches.push(agent.run(ctx.for_agent(agent.clone(), &branch)).await?);
        }
        // All branches are polled by this one stream: no task outlives it.
        Ok(Box::pin(futures::stream::select_all(branches)))
    }
}

#[async_trait]
impl Agent for LoopAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let sub_agents = self.workflow.sub_agents.clone();
        let max_iterations = self.max_iterations;
        Ok(Box::pin(try_stream! {
            let mut iteration = 0;
            // Without sub-agents there is nothing to repeat (and nothing that could escalate).
            'rounds: while !sub_agents.is_empty() && max_iterations.is_none_or(|max| iteration < max) {
                iteration += 1;
                for agent in &sub_agents {
                    if ctx.ended() {
                        break 'rounds;
                    }
                    let mut events = agent.run(ctx.for_agent(agent.clone(), ctx.branch())).await?;
                    while let Some(event) = events.next().await {
                        let event = event?;
                        let escalates = event.actions.escalates();
                        yield event;
                        if escalates {
                            break 'rounds;
                        }
                    }
                }
            }
        }))
    }
}
