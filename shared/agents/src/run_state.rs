//! Where a run stands, read in one place from the log's index ([`RunLog`], kept current
//! as events are recorded): the run an invocation is part of (the invocation it
//! continues, when it answers calls one paused on inside a workflow agent), the workflow
//! agent a resumed or continued invocation starts again, whether a resumed invocation
//! has more to do, and each agent's saved position. None of these walks the log: they
//! read the positions the index keeps (a call by id, an agent's newest event, position
//! and end per invocation).
//!
//! Workflow agents record their position as ADK does (`workflow`): an event of theirs
//! with `actions.agent_state` before each sub-agent they start, one with
//! `actions.end_of_agent` when they finish.

use crate::rules::USER_AUTHOR;
use adk_grpc_core::{Agent, AgentKind, AgentMarks, Content, InvocationContext, JsonObject, RunLog, find_agent};
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

/// The newest position of `agent`'s events in the invocations `run`, as `pick` reads
/// it from its marks.
fn newest(log: &RunLog, run: &[String], agent: &str, pick: impl Fn(&AgentMarks) -> Option<usize>) -> Option<usize> {
    run.iter()
        .filter_map(|invocation| pick(log.invocation(invocation)?.agent(agent)?))
        .max()
}

/// The outermost workflow agent above `agent` (or `agent` itself) that stored a position
/// and not its end in the invocations `run`, with the branch it ran on, when there is
/// one: the agent a resumed invocation starts again.
pub(crate) fn open_workflow(
    root: &Arc<dyn Agent>,
    log: &RunLog,
    run: &[String],
    agent: &Arc<dyn Agent>,
) -> Option<AgentOnBranch> {
    let mut chain = path_to(root, agent.name())?;
    chain.reverse();
    let mut open = None;
    // Up from the agent (itself included when it is a workflow agent), while they are open.
    for (i, candidate) in chain.iter().enumerate() {
        let last_mark = newest(log, run, candidate.name(), AgentMarks::last_mark).map(|at| log.at(at));
        match last_mark {
            Some(event) if is_workflow(candidate) && event.actions.end_of_agent != Some(true) => {
                open = Some((candidate.clone(), event.branch.clone()));
            }
            _ if i > 0 => break,
            _ => {}
        }
    }
    open
}

/// The invocations of the run invocation `invocation_id` is part of, oldest first: it,
/// preceded by the invocation it continues when its first event answers calls that one
/// paused on inside a workflow agent it left open (and so on up). A client tool in a
/// sequence pauses the invocation; the answer goes on with the sequence from its
/// position, as ADK resumes an invocation from a function response.
pub(crate) fn run_invocations(root: &Arc<dyn Agent>, log: &RunLog, invocation_id: &str) -> Vec<String> {
    let first = log
        .run_events(invocation_id)
        .first()
        .copied()
        .filter(|&at| log.at(at).author == USER_AUTHOR);
    // The continued invocation's call is older than the answer (RunLog::call_answered_at),
    // so each step goes further back and the walk ends. An answer that went on with its
    // calls' own invocation (as ADK resolves it) continues nothing else: that
    // invocation's marks hold the paused Run's.
    let continued = first
        .filter(|&at| !answers_calls_of(log, at, invocation_id))
        .and_then(|at| continued_workflow(root, log, at, log.at(at).content()?));
    let mut run = match continued {
        Some((paused, _)) => run_invocations(root, log, &paused),
        None => Vec::new(),
    };
    run.push(invocation_id.to_string());
    run
}

/// Whether the message at `at` answers calls `agent` made.
fn answers_calls_by(log: &RunLog, at: usize, agent: &str) -> bool {
    log.at(at)
        .function_responses()
        .filter_map(|response| log.call_answered_at(response.id, at))
        .any(|call| call.author == agent)
}

/// Whether the message at `at` answers calls made in invocation `invocation_id`.
fn answers_calls_of(log: &RunLog, at: usize, invocation_id: &str) -> bool {
    log.at(at)
        .function_responses()
        .filter_map(|response| log.call_answered_at(response.id, at))
        .any(|call| call.invocation_id == invocation_id)
}

/// Whether this Run's message answers calls a Run paused on inside a workflow agent
/// left open: the workflow goes on from its position.
fn continues_a_workflow(root: &Arc<dyn Agent>, log: &RunLog, invocation_id: &str) -> bool {
    log.run_events(invocation_id).first().is_some_and(|&at| {
        log.at(at)
            .content()
            .is_some_and(|answer| continued_workflow(root, log, at, answer).is_some())
    })
}

/// For a message answering calls that an invocation paused on inside a workflow agent it
/// left open: that invocation's id, and the outermost open workflow agent with its branch
/// (the agent the answer starts again, so the workflow goes on from its position). `at`:
/// the message's position in the log (its length for a message not stored yet). None
/// for answers to calls of several invocations, which go on with none of them (an
/// invocation of their own, docs/semantics.md Runner 1b).
pub(crate) fn continued_workflow(
    root: &Arc<dyn Agent>,
    log: &RunLog,
    at: usize,
    answer: &Content,
) -> Option<(String, AgentOnBranch)> {
    let mut calls = answer
        .function_responses()
        .filter(|response| !response.id.is_empty())
        .filter_map(|response| log.call_answered_at(response.id, at));
    let call = calls.next()?;
    if calls.any(|other| other.invocation_id != call.invocation_id) {
        return None;
    }
    let caller = find_agent(root, &call.author)?;
    let paused = run_invocations(root, log, &call.invocation_id);
    let open = open_workflow(root, log, &paused, &caller)?;
    Some((call.invocation_id.clone(), open))
}

/// Whether resumed invocation `invocation_id` has more to do: not when its log ends with
/// its last word (a final reply, a pause on a client tool, an interruption).
pub(crate) fn unfinished(log: &RunLog, invocation_id: &str) -> bool {
    let Some(&last) = log.invocation(invocation_id).and_then(|marks| marks.events().last()) else {
        return false;
    };
    let last = log.at(last);
    if last.author == USER_AUTHOR {
        return true;
    }
    if last.interrupted() {
        return false;
    }
    transfer_not_acted_on(log, invocation_id).is_some() || !last.is_final_response()
}

/// The agent a transfer hands the turn to, when the invocation's log ends with the
/// transfer and the target has not run yet: the transfer's response is the last event,
/// or the transferring agent's end right after it (an app marked resumable stores it
/// there, as ADK does).
pub(crate) fn transfer_not_acted_on<'a>(log: &'a RunLog, invocation_id: &str) -> Option<&'a str> {
    let events = log.invocation(invocation_id)?.events();
    let mut last_two = events.iter().rev().map(|&at| log.at(at));
    let last = last_two.next()?;
    let transfer = if last.actions.end_of_agent == Some(true) && last.content().is_none() {
        last_two.next().filter(|before| before.author == last.author)?
    } else {
        last
    };
    transfer.actions.transfer_to_agent.as_deref()
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
    let user_content = ctx.user_content();
    let answers_calls = user_content.function_responses().next().is_some();
    // The log as loaded holds the Run's steps only when it is resumed: after its
    // message, which for an answer to calls goes on with the calls' invocation.
    let resumed = ctx
        .session()
        .events
        .as_slice()
        .iter()
        .rev()
        .take_while(|event| event.invocation_id == invocation)
        .take_while(|event| !(answers_calls && event.author == USER_AUTHOR && event.content() == Some(user_content)))
        .any(|event| event.author != USER_AUTHOR);
    if !resumed && !answers_calls {
        return None;
    }
    let root = ctx.root_agent();
    let log = ctx.run_log();
    // An answer to a client tool goes on from the position of the invocation it continues.
    if !resumed && !continues_a_workflow(&root, &log, invocation) {
        return None;
    }
    let run = run_invocations(&root, &log, invocation);
    let mut ancestors: Vec<String> = path_to(&root, agent)
        .unwrap_or_default()
        .iter()
        .map(|above| above.name().to_string())
        .collect();
    ancestors.pop();
    let last = newest(&log, &run, agent, |marks| Some(marks.last_event))?;
    // An ancestor that stored a position since moved on: the agent starts afresh.
    let moved_on = ancestors
        .iter()
        .filter_map(|ancestor| newest(&log, &run, ancestor, |marks| marks.last_state))
        .any(|at| at > last);
    if moved_on {
        return None;
    }
    let event = log.at(last);
    let actions = &event.actions;
    // The Run's message answers calls this agent made before it: the agent goes on with
    // the answers, even after a final reply (it replied after a long-running tool's interim
    // result), as ADK resumes it.
    let answered_here = log
        .run_events(invocation)
        .first()
        .is_some_and(|&message| last < message && answers_calls_by(&log, message, agent));
    Some(if actions.end_of_agent == Some(true) {
        Saved::Ended
    } else if let Some(state) = &actions.agent_state {
        Saved::At(state.clone())
    } else if event.content().is_some()
        && event.is_final_response()
        && actions.transfer_to_agent.is_none()
        && !event.interrupted()
        && event.long_running_tool_ids.is_empty()
        && !answered_here
    {
        // An LLM agent's final reply is its end (ADK's LLM agent stores an `end_of_agent`);
        // a pause on a client tool is not: the answer goes on with it.
        Saved::Ended
    } else {
        Saved::At(JsonObject::new())
    })
}
