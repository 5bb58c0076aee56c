//! Workflow agents: they call no model themselves, they run their sub-agents
//! in order (`SequentialAgent`), at once (`ParallelAgent`) or repeatedly (`LoopAgent`).
//!
//! They record their position as ADK does (stored in the log when the invocation is
//! resumable, `docs/semantics.md`, Runner 27; kept beside it otherwise, see
//! `Invocation::stores`): an event of theirs with `actions.agent_state` before each
//! sub-agent they start (sequential: `current_sub_agent`; loop: also `times_looped`;
//! parallel: `{}` once), one with `actions.end_of_agent` when they finish, and a
//! parallel agent one with `end_of_agent` for each branch that finished. As ADK's, they
//! pause the invocation after a sub-agent (for a parallel agent, after all branches)
//! that called a long-running tool, even one answered at once: the steps after it wait
//! for the next message, and no end is stored. A resumed
//! invocation starts them again; they read that position back from the log and go
//! on from it, so finished sub-agents and branches are not run again.

use crate::run_state::{Saved, saved};
use adk_grpc_core::{Agent, AgentKind, AgentSpec, Event, EventStream, InvocationContext, JsonObject, Result};
use async_stream::try_stream;
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;

/// An event of `author` (a workflow agent, or a parallel branch's agent) on the
/// context's branch storing a position (`Some`) or its end (`None`).
pub(crate) fn state_event(ctx: &dyn InvocationContext, author: &str, branch: &str, state: Option<Value>) -> Event {
    let mut event = Event::new(ctx.invocation_id()).with_author(author);
    event.branch = branch.to_string();
    match state {
        Some(Value::Object(state)) => event.actions.agent_state = Some(state),
        _ => event.actions.end_of_agent = Some(true),
    }
    event
}

/// Where a sequence or a loop goes on: the index of the stored `current_sub_agent`
/// (0, from the start, when it is no longer one of them).
fn start_index(sub_agents: &[Arc<dyn Agent>], state: &JsonObject) -> usize {
    let current = state.get("current_sub_agent").and_then(Value::as_str);
    sub_agents
        .iter()
        .position(|agent| Some(agent.name()) == current)
        .unwrap_or_else(|| {
            tracing::warn!(
                ?current,
                "a resumed workflow's current sub-agent is gone; starting from the first"
            );
            0
        })
}

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
        fn spec(&self) -> AgentSpec<'_> {
            AgentSpec {
                kind: AgentKind::Workflow,
                ..AgentSpec::default()
            }
        }
    };
}

#[async_trait]
impl Agent for SequentialAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let sub_agents = self.workflow.sub_agents.clone();
        let name = self.workflow.name.clone();
        Ok(Box::pin(try_stream! {
            let saved_here = saved(ctx.as_ref(), &name);
            let done = saved_here == Some(Saved::Ended);
            let (start, mut resuming) = match saved_here {
                None => (0, false),
                Some(Saved::At(state)) => (start_index(&sub_agents, &state), true),
                Some(Saved::Ended) => (sub_agents.len(), true),
            };
            for agent in &sub_agents[start..] {
                if ctx.ended() {
                    break;
                }
                // The sub-agent the position names goes on; one that had finished is skipped.
                let resumed = std::mem::take(&mut resuming);
                if resumed && saved(ctx.as_ref(), agent.name()) == Some(Saved::Ended) {
                    continue;
                }
                if !resumed {
                    yield state_event(ctx.as_ref(), &name, ctx.branch(), Some(json!({"current_sub_agent": agent.name()})));
                }
                let mut events = agent.run(ctx.for_agent(agent.clone(), ctx.branch())).await?;
                let mut paused = false;
                while let Some(event) = events.next().await {
                    let event = event?;
                    paused |= event.calls_a_long_running_tool();
                    yield event;
                }
                if paused {
                    ctx.end_invocation();
                }
            }
            if !done && !ctx.ended() {
                yield state_event(ctx.as_ref(), &name, ctx.branch(), None);
            }
        }))
    }
}

#[async_trait]
impl Agent for ParallelAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let name = self.workflow.name.clone();
        let saved_here = saved(ctx.as_ref(), &name);
        let mut branches: Vec<EventStream> = Vec::with_capacity(self.workflow.sub_agents.len());
        for agent in &self.workflow.sub_agents {
            let parent = if ctx.branch().is_empty() {
                self.workflow.name.as_str()
            } else {
                ctx.branch()
            };
            let branch = format!("{parent}.{}", agent.name());
            let branch_ctx = ctx.for_agent(agent.clone(), &branch);
            // A resumed parallel agent runs again only the branches that had not finished.
            if saved_here.is_some() && saved(branch_ctx.as_ref(), agent.name()) == Some(Saved::Ended) {
                continue;
            }
            let mut events = agent.run(branch_ctx.clone()).await?;
            let agent_name = agent.name().to_string();
            branches.push(Box::pin(try_stream! {
                let (mut ended_itself, mut paused) = (false, false);
                while let Some(event) = events.next().await {
                    let event = event?;
                    ended_itself = event.author == agent_name && event.actions.end_of_agent == Some(true);
                    paused |= event.calls_a_long_running_tool();
                    yield event;
                }
                // A workflow agent stores its own end; an LLM agent's is stored for it
                // where it stores none itself (positions beside the log).
                if !ended_itself && !paused && !branch_ctx.ended() {
                    yield state_event(branch_ctx.as_ref(), &agent_name, branch_ctx.branch(), None);
                }
            }));
        }
        let run_anew = saved_here.is_none();
        let done = saved_here == Some(Saved::Ended);
        Ok(Box::pin(try_stream! {
            if run_anew {
                yield state_event(ctx.as_ref(), &name, ctx.branch(), Some(json!({})));
            }
            // All branches are polled by this one stream: no task outlives it.
            let mut merged = futures::stream::select_all(branches);
            let mut paused = false;
            while let Some(event) = merged.next().await {
                let event = event?;
                paused |= event.calls_a_long_running_tool();
                yield event;
            }
            if paused {
                ctx.end_invocation();
            }
            if !done && !ctx.ended() {
                yield state_event(ctx.as_ref(), &name, ctx.branch(), None);
            }
        }))
    }
}

#[async_trait]
impl Agent for LoopAgent {
    agent_identity!();

    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let sub_agents = self.workflow.sub_agents.clone();
        let max_iterations = self.max_iterations;
        let name = self.workflow.name.clone();
        Ok(Box::pin(try_stream! {
            let saved_here = saved(ctx.as_ref(), &name);
            let done = saved_here == Some(Saved::Ended);
            let (mut times_looped, mut start, mut resuming) = match saved_here {
                Some(Saved::At(state)) => {
                    let times = state.get("times_looped").and_then(Value::as_u64).unwrap_or(0);
                    (u32::try_from(times).unwrap_or(u32::MAX), start_index(&sub_agents, &state), true)
                }
                _ => (0, 0, false),
            };
            // Without sub-agents there is nothing to repeat (and nothing that could escalate).
            'rounds: while !done && !sub_agents.is_empty() && max_iterations.is_none_or(|max| times_looped < max) {
                for agent in &sub_agents[start..] {
                    if ctx.ended() {
                        break 'rounds;
                    }
                    let resumed = std::mem::take(&mut resuming);
                    if resumed && saved(ctx.as_ref(), agent.name()) == Some(Saved::Ended) {
                        continue;
                    }
                    if !resumed {
                        let state = json!({"current_sub_agent": agent.name(), "times_looped": times_looped});
                        yield state_event(ctx.as_ref(), &name, ctx.branch(), Some(state));
                    }
                    let mut events = agent.run(ctx.for_agent(agent.clone(), ctx.branch())).await?;
                    // As ADK's loop: an escalation ends the loop once the sub-agent that
                    // escalated has finished (its end stored after it, in a resumable app).
                    let (mut escalated, mut paused) = (false, false);
                    while let Some(event) = events.next().await {
                        let event = event?;
                        escalated |= event.actions.escalates();
                        paused |= event.calls_a_long_running_tool();
                        yield event;
                    }
                    if paused {
                        ctx.end_invocation();
                    }
                    if escalated {
                        break 'rounds;
                    }
                }
                start = 0;
                times_looped += 1;
            }
            if !done && !ctx.ended() {
                yield state_event(ctx.as_ref(), &name, ctx.branch(), None);
            }
        }))
    }
}
