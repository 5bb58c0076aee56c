//! Where a run stands, read in one place: the run an invocation is part of (the
//! invocation it continues, when it answers calls one paused on inside a workflow
//! agent), the workflow agent a resumed or continued invocation starts again, and each
//! agent's saved position. The log comes with its index ([`RunLog`]): an answer's call
//! is looked up by id, with the rule of repeated call ids written once, there.
//!
//! Workflow agents record their position as ADK does (`workflow`): an event of theirs
//! with `actions.agent_state` before each sub-agent they start, one with
//! `actions.end_of_agent` when they finish.

use crate::rules::USER_AUTHOR;
use adk_grpc_core::{Agent, AgentKind, Content, Event, InvocationContext, JsonObject, RunLog, find_agent};
use std::sync::Arc;

/// An agent and the branch it runs on.
pub(crate) type AgentOnBranch = (Arc<dyn Agent>, String);

/// The agents from `root` down to the one named `name`, both included; None when it is
/// not in the tree.
pub(crate) fn path_to(root: &Arc<dyn Agent>, name: &str) -> Option<Vec<Arc<dyn Agent>>> {
    if root.name() == name {
        return Some(vec![root.clone()]);
    }
    root.sub_agents().iter().find_map(|sub| {
        let mut path = path_to(sub, name)?;
        path.insert(0, root.clone());
        Some(path)
    })
}

fn is_workflow(agent: &Arc<dyn Agent>) -> bool {
    agent.spec().kind == AgentKind::Workflow
}

/// The outermost workflow agent above `agent` (or `agent` itself) that stored a position
/// and not its end in this run (`own`), with the branch it ran on, when there is one:
/// the agent a resumed invocation starts again.
pub(crate) fn open_workflow(root: &Arc<dyn Agent>, own: &[&Event], agent: &Arc<dyn Agent>) -> Option<AgentOnBranch> {
    let mut chain = path_to(root, agent.name())?;
    chain.reverse();
    let mut open = None;
    // Up from the agent (itself included when it is a workflow agent), while they are open.
    for (i, candidate) in chain.iter().enumerate() {
        let last_state = own.iter().rev().find(|event| {
            event.author == candidate.name()
                && (event.actions.agent_state.is_some() || event.actions.end_of_agent == Some(true))
        });
        match last_state {
            Some(event) if is_workflow(candidate) && event.actions.end_of_agent != Some(true) => {
                open = Some((candidate.clone(), event.branch.clone()));
            }
            _ if i > 0 => break,
            _ => {}
        }
    }
    open
}

/// The events of the run invocation `invocation_id` is part of, oldest first: its own,
/// preceded by those of the invocation it continues when its first event answers calls
/// that one paused on inside a workflow agent it left open (and so on up). A client tool
/// in a sequence pauses the invocation; the answer goes on with the sequence from its
/// position, as ADK resumes an invocation from a function response.
pub(crate) fn run_events<'a>(root: &Arc<dyn Agent>, log: &'a RunLog, invocation_id: &str) -> Vec<&'a Event> {
    let events = log.events();
    let mut run: Vec<&Event> = events
        .iter()
        .filter(|event| event.invocation_id == invocation_id)
        .collect();
    // The continued invocation's call is older than the answer (RunLog::call_answered_at),
    // so each step goes further back and the walk ends.
    let continued = events
        .iter()
        .position(|event| event.invocation_id == invocation_id)
        .filter(|&at| events[at].author == USER_AUTHOR)
        .and_then(|at| continued_workflow(root, log, at, events[at].content()?));
    if let Some((paused, _)) = continued {
        let mut before = run_events(root, log, &paused);
        before.append(&mut run);
        return before;
    }
    run
}

/// For a message answering calls that an invocation paused on inside a workflow agent it
/// left open: that invocation's id, and the outermost open workflow agent with its branch
/// (the agent the answer starts again, so the workflow goes on from its position). `at`:
/// the message's position in the log (its length for a message not stored yet).
pub(crate) fn continued_workflow(
    root: &Arc<dyn Agent>,
    log: &RunLog,
    at: usize,
    answer: &Content,
) -> Option<(String, AgentOnBranch)> {
    let call_id = answer
        .function_responses()
        .map(|response| response.id)
        .find(|id| !id.is_empty())?;
    let call = log.call_answered_at(call_id, at)?;
    let caller = find_agent(root, &call.author)?;
    let paused = run_events(root, log, &call.invocation_id);
    let open = open_workflow(root, &paused, &caller)?;
    Some((call.invocation_id.clone(), open))
}

/// Whether a resumed invocation whose own events are `own` has more to do: not when its
/// log ends with its last word (a final reply, a pause on a client tool, an interruption).
pub(crate) fn unfinished(own: &[&Event]) -> bool {
    let Some(last) = own.last() else { return false };
    if last.author == USER_AUTHOR {
        return true;
    }
    !(last.interrupted() || (last.is_final_response() && last.actions.transfer_to_agent.is_none()))
}

/// Where an agent was, as the log of a resumed invocation tells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Saved {
    /// Started and not finished; a workflow agent's position.
    At(JsonObject),
    Ended,
}

/// What `agent` stored of its position in this invocation, when the invocation is a
/// resumed one: its last state event (or, for an agent that stores none, whether its
/// last event was its final word) after the last position its ancestors stored (an
/// ancestor that moved on starts it afresh, as a loop's next round does). None in an
/// invocation that was not resumed: nothing it stored is a position to go back to.
pub(crate) fn saved(ctx: &dyn InvocationContext, agent: &str) -> Option<Saved> {
    let invocation = ctx.invocation_id();
    // The log as loaded holds the invocation's steps only when it is resumed.
    let resumed = ctx
        .session()
        .events
        .as_slice()
        .iter()
        .rev()
        .take_while(|event| event.invocation_id == invocation)
        .any(|event| event.author != USER_AUTHOR);
    let answers_calls = ctx.user_content().function_responses().next().is_some();
    if !resumed && !answers_calls {
        return None;
    }
    let root = ctx.root_agent();
    let log = ctx.run_log();
    let run = run_events(&root, &log, invocation);
    // An answer to a client tool goes on from the position of the invocation it continues.
    let continues = run.first().is_some_and(|first| first.invocation_id != invocation);
    if !resumed && !continues {
        return None;
    }
    let mut ancestors: Vec<String> = path_to(&root, agent)
        .unwrap_or_default()
        .iter()
        .map(|above| above.name().to_string())
        .collect();
    ancestors.pop();
    let mut saved = None;
    for event in run {
        let actions = &event.actions;
        if event.author == agent {
            saved = if actions.end_of_agent == Some(true) {
                Some(Saved::Ended)
            } else if let Some(state) = &actions.agent_state {
                Some(Saved::At(state.clone()))
            } else if event.content().is_some()
                && event.is_final_response()
                && actions.transfer_to_agent.is_none()
                && !event.interrupted()
                && event.long_running_tool_ids.is_empty()
            {
                // An LLM agent's final reply is its end (ADK's LLM agent stores an `end_of_agent`);
                // a pause on a client tool is not: the answer goes on with it.
                Some(Saved::Ended)
            } else {
                Some(Saved::At(JsonObject::new()))
            };
        } else if actions.agent_state.is_some() && ancestors.contains(&event.author) {
            saved = None;
        }
    }
    saved
}
