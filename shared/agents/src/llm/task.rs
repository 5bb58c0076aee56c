//! ADK 2's delegation modes (`mode: task` and `mode: single_turn`): an LLM sub-agent its
//! parent calls as a tool, run by the parent's flow in the same session.
//!
//! A call of such a sub-agent runs it on a branch of its own, `<caller's branch>.<agent>@<call id>`
//! (ADK's sub-branch), and everything it does is stored as any event, on that branch.
//! The branch is also its scope (ADK's `isolation_scope`, which a task's events carry
//! too, [`IsolationScopes`]): an agent sees only the events of its own scope
//! ([`scope_key`]), so the sub-agent sees the call's arguments (as its
//! first user message), its own work and, for a task, the user's replies to it, and the
//! parent never sees the sub-agent's conversation, only the call's answer.
//!
//! - single_turn: runs to its final reply without the user (told so); the reply (JSON
//!   with an `output_schema`) answers the call.
//! - task: may reply to the user and wait. Its parent's call stays open, the invocation
//!   ends, and the next user message goes to the parent (the runner routes it,
//!   [`route`]), stored in the task's scope (ADK's `isolation_scope`, the call's id) and
//!   going on with the task's invocation ([`joined`]); the parent's flow finds its open call
//!   ([`pending_calls`]) and runs the task agent again, which now sees the reply. When the
//!   task agent calls `finish_task` and the call succeeds, the arguments (its
//!   `output_schema`, by default `{result: string}`) answer the parent's call and the
//!   parent goes on in the same turn. Nothing is held in memory: all of it is read from
//!   the log, so a restarted runner goes on where the last one stopped.

use super::Inner;
use super::flow::tool_calls::{Call, FUNCTION_RESPONSE_ROLE, as_response, response_part};
use super::output_schema::OutputSchema;
use crate::context::ToolCallContext;
use crate::hooks::{BeforeTool, HookContext};
use crate::json_schema::PydanticClass;
use crate::rules::USER_AUTHOR;
use crate::tools::agent_tool::{reply_value, single_turn_input_message};
use adk_grpc_core::{
    Agent, AgentMode, CallbackContext, Content, Event, FunctionResponse, InvocationContext, JsonObject, LlmRequest,
    LlmResponse, Result, RunLog, Tool, ToolContext, find_agent, python_json,
};
use async_stream::try_stream;
use async_trait::async_trait;
use futures::Stream;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

/// The tool a task agent ends its task with (ADK's name).
pub const FINISH_TASK_TOOL_NAME: &str = "finish_task";
/// `finish_task`'s answer when its arguments fit (ADK's).
const FINISH_TASK_DONE: &str = "Task completed.";

/// The argument carrying a task's output when its schema is not an object's (ADK's
/// wrapper key).
const FINISH_TASK_WRAPPER_KEY: &str = "result";

/// Added to a task agent's system instruction with `finish_task`: ADK's text, its line
/// breaks included (an agent moved from ADK Python is told the same).
const FINISH_TASK_INSTRUCTION: &str = "Do NOT call `finish_task` prematurely. Use your available tools to
fully complete every aspect of the delegated task first. If the
task is unclear, ask the user for clarification before proceeding.
Once the task is fully complete, call `finish_task` by itself with
no accompanying text output.";

/// `finish_task`'s description (ADK's), and what it adds when the agent has an
/// `output_schema`.
const FINISH_TASK_DESCRIPTION: &str =
    "Signal that this agent has completed its delegated task. Call this when you have finished your delegated task.";
const FINISH_TASK_DESCRIPTION_WITH_SCHEMA: &str = "Signal that this agent has completed its delegated task. Call \
this when you have finished your delegated task. Pass the required output data in the parameters.";

/// ADK's answer to `finish_task` arguments that miss the schema, around the problems
/// (pydantic's error text where the schema is a Python class, else the schema check's).
fn finish_task_misfit(problem: &str) -> String {
    format!(
        "Invoking `{FINISH_TASK_TOOL_NAME}()` failed due to validation errors:\n{problem}\nYou could retry calling \
         this tool, but it is IMPORTANT for you to provide all the mandatory parameters with correct types."
    )
}

/// The output a task agent without an `output_schema` gives (ADK's `_DefaultTaskOutput`,
/// as pydantic writes its JSON Schema: `finish_task`'s parameters).
fn default_task_output() -> Value {
    json!({
        "additionalProperties": false,
        "description": "Default output schema when no custom output_schema is provided.\n\nUsed by FinishTaskTool to \
            generate the function declaration when the\ntask agent does not define an explicit output_schema.",
        "properties": { "result": { "title": "Result", "type": "string" } },
        "required": ["result"],
        "title": "_DefaultTaskOutput",
        "type": "object"
    })
}

/// The branch a delegated call of `agent` made on `caller_branch` runs on.
pub(crate) fn branch(caller_branch: &str, agent: &str, call_id: &str) -> String {
    if caller_branch.is_empty() {
        format!("{agent}@{call_id}")
    } else {
        format!("{caller_branch}.{agent}@{call_id}")
    }
}

/// `branch` without its last segment: the branch of the agent whose run or call the last
/// segment is ("" at the top).
fn parent_branch(branch: &str) -> &str {
    branch.rsplit_once('.').map_or("", |(above, _)| above)
}

/// The agent of `branch`'s last segment when it is a run or a call (`<agent>@<…>`).
fn segment_agent(branch: &str) -> Option<&str> {
    let last = branch.rsplit('.').next()?;
    last.split_once('@').map(|(agent, _)| agent)
}

/// Whether a branch segment `<agent>@<run>` is a re-run of its agent (ADK 2's workflow
/// running a node again, its run id a number, see [`rerun_branch`]) rather than a
/// delegated call (`<agent>@<call id>`), as ADK tells them apart.
fn is_rerun(segment: &str) -> bool {
    segment
        .split_once('@')
        .is_some_and(|(_, run)| !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()))
}

/// The delegation scope of `branch`: the branch up to its last `<agent>@<call id>` segment;
/// "" outside any delegated call. Agent names cannot hold `@`, so other branches have none.
pub(crate) fn scope(branch: &str) -> &str {
    let (mut end, mut at) = (0, 0);
    for segment in branch.split('.') {
        at += segment.len();
        if segment.contains('@') && !is_rerun(segment) {
            end = at;
        }
        at += 1;
    }
    &branch[..end]
}

/// The re-run `branch` is in when no delegated call is below it: the branch up to its
/// last re-run segment (see [`rerun_branch`]); None otherwise.
fn rerun_prefix(branch: &str) -> Option<&str> {
    let (mut end, mut at) = (None, 0);
    for segment in branch.split('.') {
        at += segment.len();
        if is_rerun(segment) {
            end = Some(at);
        } else if segment.contains('@') {
            end = None;
        }
        at += 1;
    }
    end.map(|end| &branch[..end])
}

/// The id of the task call a re-run on `branch` takes up (see [`rerun_branch`]): the
/// call of the task's run just below the re-run, the first a re-run starts. None outside
/// a re-run.
fn rerun_call<'a>(events: &'a [Event], branch: &str) -> Option<&'a str> {
    let prefix = rerun_prefix(branch)?;
    events
        .iter()
        .find_map(|event| {
            let below = event.branch.strip_prefix(prefix)?.strip_prefix('.')?;
            let segment = below.split('.').next()?;
            segment.split_once('@').map(|(_, id)| id).filter(|_| !is_rerun(segment))
        })
        .or_else(|| peer_call(events, prefix))
}

/// The id of the task call a peer's run `prefix` (`<caller's branch>.<peer>@<n>`, see
/// [`peer_branch`]) stands in for: the latest call whose task agent, on a branch right
/// below the caller's, transferred to the peer. None for any other run.
fn peer_call<'a>(events: &'a [Event], prefix: &str) -> Option<&'a str> {
    let (base, run) = prefix.rsplit_once('.').unwrap_or(("", prefix));
    let (peer, _) = run.split_once('@')?;
    events.iter().rev().find_map(|event| {
        (event.actions.transfer_to_agent.as_deref() == Some(peer)).then_some(())?;
        let segment = match base {
            "" => event.branch.as_str(),
            base => event.branch.strip_prefix(base)?.strip_prefix('.')?,
        };
        let (_, id) = segment.split_once('@')?;
        (!segment.contains('.') && !is_rerun(segment)).then_some(id)
    })
}

/// The branch the agent `caller`, on `branch`, runs again on when a task it called hands
/// the turn back to it (ADK 2's workflow re-running the caller's node, see
/// [`handed_back`]): `<caller>@<n>` beside its first run ([`first_run`]), `n` one past the
/// run that ran the task, 2 for the first re-run (its first run is 1). As ADK 2.13's
/// scheduler counts a node's runs afresh each turn (each turn resumes the caller's first
/// run, which takes up its open calls, [`pending_calls`]), the number follows the chain
/// of hand-backs in the turn, not the runs the log holds.
pub(crate) fn rerun_branch(branch: &str, caller: &str) -> String {
    let base = first_run(branch, caller);
    // The run that ran the task: the re-run segment `first_run` took off, else the first.
    let run = branch[base.len()..]
        .split_once('@')
        .and_then(|(_, n)| n.parse::<u64>().ok())
        .unwrap_or(1);
    self::branch(base, caller, &(run + 1).to_string())
}

/// The branch of `caller`'s first run when `branch` is a re-run of it ([`rerun_branch`]):
/// `branch` without its last segment `<caller>@<n>`; else `branch` itself.
fn first_run<'a>(branch: &'a str, caller: &str) -> &'a str {
    let is_callers_rerun =
        |segment: &str| is_rerun(segment) && segment.split_once('@').is_some_and(|(name, _)| name == caller);
    match branch.rsplit_once('.') {
        Some((above, last)) if is_callers_rerun(last) => above,
        None if is_callers_rerun(branch) => "",
        _ => branch,
    }
}

/// The branch the chat agent `peer` runs on when the task agent on `task_branch`
/// transfers to it, as ADK 2.13 runs it: a new node of the task's caller,
/// `<caller's branch>.<peer>@<n>` (`n` one past its latest run there, 1 for the first),
/// in the task's scope ([`peer_call`]), standing in for the task, whose call it ends
/// ([`outcome`]).
pub(crate) fn peer_branch(log: &RunLog, task_branch: &str, peer: &str) -> String {
    numbered_run(log, parent_branch(task_branch), peer, 0)
}

/// `<base>.<agent>@<n>`: the next numbered run of `agent` below `base`, `n` one past its
/// latest there (`first_before` when it has none).
fn numbered_run(log: &RunLog, base: &str, agent: &str, first_before: u64) -> String {
    let head = branch(base, agent, "");
    let latest = log
        .events()
        .iter()
        .filter_map(|event| event.branch.strip_prefix(&head))
        .filter_map(|rest| rest.split('.').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(first_before);
    format!("{head}{}", latest + 1)
}

/// Whether the task agent `task`'s run on `branch` ended by handing the turn back to the
/// agent that called it (its `transfer_to_agent` naming its caller): then the call stays
/// open and the caller runs again ([`rerun_branch`]), as ADK 2.13 runs it.
pub(crate) fn handed_back(log: &RunLog, task: &Arc<dyn Agent>, branch: &str) -> bool {
    task.mode() == AgentMode::Task && transferred_to_caller(log, task.name(), branch)
}

/// Whether the delegated agent `agent`'s last word on `branch` is a transfer to the agent
/// that called it.
fn transferred_to_caller(log: &RunLog, agent: &str, branch: &str) -> bool {
    last_transfer(log, agent, branch).is_some_and(|(target, caller)| target == caller)
}

/// Whether the delegated agent `agent`'s last word on `branch` is a transfer to an agent
/// other than its caller (a task agent's chat peer, [`peer_branch`]).
fn transferred_to_peer(log: &RunLog, agent: &str, branch: &str) -> bool {
    last_transfer(log, agent, branch).is_some_and(|(target, caller)| target != caller)
}

/// The target of the transfer that is the delegated agent `agent`'s last word on `branch`,
/// and the agent that called it; None when its last word is no transfer.
fn last_transfer<'a>(log: &'a RunLog, agent: &str, branch: &str) -> Option<(&'a str, &'a str)> {
    let caller = call_id(branch).and_then(|id| log.latest_call(id))?;
    let target = log
        .thread(branch, agent)
        .rev()
        .find(|(_, event)| event.content().is_some())
        .and_then(|(_, event)| event.actions.transfer_to_agent.as_deref())?;
    Some((target, caller.author.as_str()))
}

/// Whether the delegated agent of `ctx` was called by the agent `target`.
pub(crate) fn called_by(ctx: &dyn InvocationContext, target: &str) -> bool {
    call_id(ctx.branch())
        .and_then(|id| ctx.run_log().latest_call(id).map(|call| call.author == target))
        .unwrap_or(false)
}

/// Whether a task agent on `branch` transferring to `target` hands the turn back to its
/// caller ([`handed_back`]) rather than to another agent.
pub(crate) fn hands_back(ctx: &dyn InvocationContext, target: &str) -> bool {
    ctx.agent().mode() == AgentMode::Task && called_by(ctx, target)
}

/// The branch a transfer stored last on `branch` goes on from in a resumed
/// run: the branch itself (the target runs where the transferring agent ran), but after a
/// task agent's hand-back to its caller ([`handed_back`]), the caller's branch, whose flow
/// then runs the caller again.
pub(crate) fn transfer_goes_on_from(root: &Arc<dyn Agent>, log: &RunLog, branch: &str) -> String {
    let task = segment_agent(branch).and_then(|name| find_agent(root, name));
    match task {
        Some(task) if handed_back(log, &task, branch) => parent_branch(branch).to_string(),
        _ => branch.to_string(),
    }
}

/// The chat peer the task agent `task`, whose run on `task_branch` ended with a transfer to
/// it, runs in the task's place, and the branch it runs on ([`peer_branch`]; its run's
/// own when a runner died during it); None when the task did not transfer to a peer or
/// the peer's run has ended (a final reply, or a transfer of its own).
pub(crate) fn peer_to_run(
    log: &RunLog,
    root: &Arc<dyn Agent>,
    task: &Arc<dyn Agent>,
    task_branch: &str,
) -> Option<(Arc<dyn Agent>, String)> {
    if task.mode() != AgentMode::Task || !transferred_to_peer(log, task.name(), task_branch) {
        return None;
    }
    let (name, _) = last_transfer(log, task.name(), task_branch)?;
    let peer = find_agent(root, name)?;
    let id = call_id(task_branch)?;
    let (transferred_at, _) = log
        .thread(task_branch, task.name())
        .rev()
        .find(|(_, event)| event.content().is_some())?;
    let head = branch(parent_branch(task_branch), name, "");
    let its_run = |event: &Event| {
        event.author == name
            && event.isolation_scope == id
            && event
                .branch
                .strip_prefix(&head)
                .is_some_and(|run| run.parse::<u64>().is_ok())
    };
    match log.events()[transferred_at + 1..]
        .iter()
        .rev()
        .find(|event| its_run(event))
    {
        None => Some((peer, peer_branch(log, task_branch, name))),
        Some(last) if last.actions.transfer_to_agent.is_some() || last.is_final_response() => None,
        Some(last) => Some((peer, last.branch.clone())),
    }
}

/// For a resumed run whose last step, on `branch`, is a task agent's transfer to a chat
/// peer or the peer's run in the task's place: the task's caller, on its branch, whose
/// flow runs the peer to its end ([`peer_to_run`]) and answers the call, as the run that
/// died would have.
pub(crate) fn peer_transfer_to_resume(
    root: &Arc<dyn Agent>,
    log: &RunLog,
    branch: &str,
) -> Option<(Arc<dyn Agent>, String)> {
    let (id, caller_branch) = match call_id(branch) {
        Some(id) => {
            let task = segment_agent(branch)?;
            let on_the_tasks_own_branch = scope(branch) == branch;
            (on_the_tasks_own_branch && transferred_to_peer(log, task, branch)).then_some(())?;
            (id, parent_branch(branch))
        }
        None => {
            let run = rerun_prefix(branch)?;
            let id = peer_call(log.events(), run)?;
            let (caller_branch, segment) = run.rsplit_once('.').unwrap_or(("", run));
            let peer = segment.split_once('@')?.0;
            // A caller's own re-run after a hand-back is no peer's.
            (log.latest_call(id)?.author != peer).then_some(())?;
            (id, caller_branch)
        }
    };
    let caller = find_agent(root, &log.latest_call(id)?.author)?;
    Some((caller, caller_branch.to_string()))
}

/// The branch a delegated call `id` of agent `name` made on `caller_branch` last ran
/// on: `<caller_branch>.<name>@<id>`, or below the caller's latest re-run when a hand-back
/// ran it again there ([`rerun_branch`]).
fn latest_run(log: &RunLog, caller_branch: &str, name: &str, id: &str) -> String {
    let first = branch(caller_branch, name, id);
    let segment = format!(".{name}@{id}");
    log.events()
        .iter()
        .rev()
        .map(|event| event.branch.as_str())
        .find(|event_branch| *event_branch == first || event_branch.ends_with(&segment))
        .map_or(first.clone(), str::to_string)
}

/// The id of the call whose scope `branch` is in.
fn call_id(branch: &str) -> Option<&str> {
    let scope = scope(branch);
    scope.rfind('@').map(|at| &scope[at + 1..])
}

/// The delegated call whose events `event` sees and is seen with (ADK's strict
/// `isolation_scope` filter, as the runner keys it): the call of its branch's scope (a
/// task's or a single-turn agent's events, and whatever runs below them), else its
/// `isolation_scope` (the user's message answering a task, stored on no branch, as ADK
/// stores it); "" for the events of no delegated call. An agent reads only the events
/// whose key is its branch's ([`call_id`]; "" outside any delegated call).
pub(crate) fn scope_key(event: &Event) -> &str {
    call_id(&event.branch).unwrap_or(&event.isolation_scope)
}

/// Whether `reader`, on `branch`, runs there in place of the single-turn agent of the
/// branch's call (its caller, to which the single-turn agent transferred, see
/// `flow::transfer`): as ADK 2.13 runs it, it then reads the unscoped events of its branch
/// and those above, as its caller does (a single-turn agent a chat agent calls has no
/// `isolation_scope`), not the call's own scope alone.
pub(crate) fn reads_in_callers_place(events: &[Event], reader: &str, branch: &str) -> bool {
    let Some(agent) = segment_agent(scope(branch)) else {
        return false;
    };
    agent != reader
        && events
            .iter()
            .find(|event| event.branch == branch)
            .is_some_and(|first| first.isolation_scope.is_empty())
}

/// The events `reader` on `branch` reads, when it runs in a single-turn agent's place
/// ([`reads_in_callers_place`]) for the first time: with the single-turn agent's message
/// (its `request`) as the user's, before the agent's first event, where ADK 2.13 keeps it
/// while the agent's node runs. None otherwise.
pub(crate) fn with_single_turn_message(
    log: &RunLog,
    root: &Arc<dyn Agent>,
    reader: &str,
    branch: &str,
) -> Option<Vec<Event>> {
    let events = log.events();
    if !reads_in_callers_place(events, reader, branch) || log.thread(branch, reader).next().is_some() {
        return None;
    }
    let id = call_id(branch)?;
    let call = log.latest_call(id)?;
    let name = call.function_calls().find(|c| c.id == id)?.name.to_string();
    let agent = find_agent(root, &name).filter(|agent| agent.mode() == AgentMode::SingleTurn)?;
    let args = call_arguments(log, id)?;
    let at = events.iter().position(|event| event.branch == branch)?;
    let mut message = Event::new(&call.invocation_id).with_author(USER_AUTHOR);
    message.llm_response.content = Some(single_turn_input_message(&agent, &args));
    message.branch = branch.to_string();
    let mut read = events[..at].to_vec();
    read.push(message);
    read.extend_from_slice(&events[at..]);
    Some(read)
}

/// The key an agent running on `branch` reads the events of (see [`scope_key`]): its
/// delegated call's, on a re-run the call it takes up (ADK's re-run keeps the task's
/// `isolation_scope`), else "".
pub(crate) fn branch_key<'a>(events: &'a [Event], branch: &'a str) -> &'a str {
    call_id(branch)
        .or_else(|| rerun_call(events, branch))
        .unwrap_or_default()
}

/// ADK 2's `isolation_scope` of an event on `branch`: the id of the innermost call of a
/// task agent on the branch (a task's own events, a user's answer to a call made in it,
/// and the events of a single-turn agent it called, which runs in its caller's scope as
/// ADK runs it); "" outside any task (a single-turn agent a chat agent called carries none,
/// as ADK stores it).
pub(crate) fn isolation_scope(root: &Arc<dyn Agent>, branch: &str) -> String {
    branch
        .split('.')
        .rev()
        // A re-run's number is no call's id: a task agent run again is still in its call's scope.
        .filter(|segment| !is_rerun(segment))
        .filter_map(|segment| segment.split_once('@'))
        .find(|(agent, _)| find_agent(root, agent).is_some_and(|agent| agent.mode() == AgentMode::Task))
        .map(|(_, id)| id.to_string())
        .unwrap_or_default()
}

/// The `isolation_scope` of each branch a run's events are on (see [`isolation_scope`]),
/// worked out once per branch: every event of the run is stamped, partial ones too, and
/// each would search the agent tree again.
#[derive(Default)]
pub(crate) struct IsolationScopes(HashMap<String, String>);

impl IsolationScopes {
    /// Stamps `event` (an event of agents under `root`, the run's root every time) with
    /// the `isolation_scope` of its branch, unless it has one; on a re-run, the call it
    /// takes up, whose scope ADK's re-run keeps (read from the log, `events`, until found:
    /// the call may be stored after the re-run's first event).
    pub(crate) fn stamp(&mut self, root: &Arc<dyn Agent>, events: impl FnOnce() -> Arc<Vec<Event>>, event: &mut Event) {
        if !event.isolation_scope.is_empty() || !event.branch.contains('@') {
            return;
        }
        if let Some(scope) = self.0.get(&event.branch) {
            event.isolation_scope = scope.clone();
            return;
        }
        let mut scope = isolation_scope(root, &event.branch);
        if scope.is_empty() && rerun_prefix(&event.branch).is_some() {
            match rerun_call(&events(), &event.branch) {
                Some(id) => scope = id.to_string(),
                None => return,
            }
        }
        self.0.insert(event.branch.clone(), scope.clone());
        event.isolation_scope = scope;
    }
}

/// The ids of the delegated calls whose events `events` hold without the calls themselves
/// (made before a bounded read or a compaction window starts): a turn reads back to them,
/// since the open task call decides which agent has the conversation.
pub(crate) fn calls_missing_from(events: &[Event]) -> Vec<String> {
    let made: HashSet<&str> = events
        .iter()
        .flat_map(Event::function_calls)
        .map(|call| call.id)
        .collect();
    let mut missing: Vec<String> = Vec::new();
    for event in events {
        let on_branch = event
            .branch
            .split('.')
            .filter(|segment| !is_rerun(segment))
            .filter_map(|segment| segment.split_once('@'))
            .map(|(_, id)| id);
        let scoped = Some(event.isolation_scope.as_str()).filter(|id| !id.is_empty());
        for id in on_branch.chain(scoped) {
            if !made.contains(id) && !missing.iter().any(|known| known == id) {
                missing.push(id.to_string());
            }
        }
    }
    missing
}

tokio::task_local! {
    /// Set while a caller's flow starts one of its task or single-turn sub-agents.
    static DISPATCHING: ();
}

/// Starts a task or single-turn agent from its caller's flow (see [`caller_to_resume`]).
pub(crate) async fn dispatch<T>(start: impl std::future::Future<Output = T>) -> T {
    DISPATCHING.scope((), start).await
}

/// For a task or single-turn agent started by anything but its caller's flow (the runner
/// resuming a run whose last author it was): the agent that made the outermost call of
/// its branch, on its branch, whose flow runs the open calls again and goes on after them.
pub(crate) fn caller_to_resume(
    mode: AgentMode,
    ctx: &dyn adk_grpc_core::InvocationContext,
) -> Option<(Arc<dyn Agent>, String)> {
    if mode == AgentMode::Chat || DISPATCHING.try_with(|_| ()).is_ok() {
        return None;
    }
    // The outermost delegated call of the branch, and the branch its caller ran on (a
    // re-run's, [`rerun_branch`], when a hand-back ran the caller again).
    let branch = ctx.branch();
    let mut above = 0;
    let (caller_branch, outermost) = loop {
        let rest = &branch[above..];
        let segment = rest.split('.').next()?;
        if segment.contains('@') && !is_rerun(segment) {
            break (branch[..above].trim_end_matches('.'), segment.split_once('@')?.1);
        }
        above += segment.len() + 1;
        if above > branch.len() {
            return None;
        }
    };
    let log = ctx.run_log();
    let call = log.latest_call(outermost)?;
    let caller = find_agent(&ctx.root_agent(), &call.author)?;
    Some((caller, caller_branch.to_string()))
}

/// The sub-agents `agents` its parent calls as tools.
pub(crate) fn delegates(agents: &[Arc<dyn Agent>]) -> impl Iterator<Item = &Arc<dyn Agent>> {
    agents.iter().filter(|agent| agent.mode() != AgentMode::Chat)
}

/// Told to a single-turn agent run inside a task, after the task's input (ADK's text).
const SINGLE_TURN_NUDGE: &str = "Important: You will not receive any user replies or clarifications. Complete the task using only the information provided above.";

/// The first user messages of a delegated agent on `branch`, from the arguments of the
/// call that started it, as ADK 2.13 gives them: a task agent the arguments as `json.dumps`
/// writes them (in the model's order, whatever its `input_schema`); a single-turn agent,
/// which ADK runs as its `AgentTool` runs an agent, the `request` text (or its
/// `input_schema`'s validated arguments as `json.dumps` writes them), told nothing more, but inside a task: there it
/// runs in the task's scope, whose input ADK gives it first, with [`SINGLE_TURN_NUDGE`].
/// A chat agent run again by a task's hand-back ([`rerun_branch`]) is, as ADK 2.13 runs it,
/// in the task's scope, so ADK gives it the task's input first too.
pub(crate) fn input(log: &RunLog, root: &Arc<dyn Agent>, agent: &Arc<dyn Agent>, branch: &str) -> Vec<Content> {
    // A chat agent has an input only as a caller run again, the task's call taken up.
    let id = match agent.mode() {
        AgentMode::Chat => rerun_call(log.events(), branch),
        AgentMode::Task | AgentMode::SingleTurn => call_id(branch),
    };
    let Some(args) = id.and_then(|id| call_arguments(log, id)) else {
        return Vec::new();
    };
    match agent.mode() {
        AgentMode::Chat | AgentMode::Task => vec![Content::new("user").with_text(python_json(&args))],
        AgentMode::SingleTurn => {
            let task = isolation_scope(root, branch);
            let task_input = Some(task.as_str())
                .filter(|id| !id.is_empty())
                .and_then(|id| call_arguments(log, id))
                .map(|task_args| {
                    Content::new("user")
                        .with_text(python_json(&task_args))
                        .with_text(SINGLE_TURN_NUDGE)
                });
            task_input
                .into_iter()
                .chain([single_turn_input_message(agent, &args)])
                .collect()
        }
    }
}

/// The arguments delegated call `id` runs with: as a hook changed them, else the model's.
fn call_arguments(log: &RunLog, id: &str) -> Option<Value> {
    arguments(log, id).or_else(|| {
        log.latest_call(id)?
            .function_calls()
            .find(|call| call.id == id)
            .map(|call| call.args.clone())
    })
}

/// Where a caller records the arguments a `before_tool` hook gave a delegated call (the
/// model's call is stored already): `custom_metadata` of a content-less event of the caller.
const CHANGED_ARGUMENTS: &str = "adk-grpc/delegated_call_args";

/// `event` (the caller's, without content) recording `args` as call `call_id`'s arguments.
pub(crate) fn arguments_event(mut event: Event, call_id: &str, args: Value) -> Event {
    let mut recorded = JsonObject::new();
    recorded.insert(CHANGED_ARGUMENTS.into(), json!({ "call_id": call_id, "args": args }));
    event.llm_response.custom_metadata = Some(recorded);
    event
}

/// The arguments a hook gave call `call_id`, when one changed them (the latest change):
/// recorded by the caller, on its branch ([`arguments_event`]).
pub(crate) fn arguments(log: &RunLog, call_id: &str) -> Option<Value> {
    let call = log.latest_call(call_id)?;
    log.thread(&call.branch, &call.author).rev().find_map(|(_, event)| {
        let recorded = event.llm_response.custom_metadata.as_ref()?.get(CHANGED_ARGUMENTS)?;
        (recorded["call_id"] == call_id).then(|| recorded["args"].clone())
    })
}

/// Whether the delegated call on `branch` has started: an event is on its branch.
pub(crate) fn started(log: &RunLog, branch: &str) -> bool {
    log.started(branch)
}

/// What answers the call of `agent` that ran on `branch`, when it is done: a task's
/// `finish_task` arguments, a single-turn agent's final reply. None while it is not.
/// What a rewind took back does not count.
pub(crate) fn outcome(log: &RunLog, agent: &Arc<dyn Agent>, branch: &str) -> Option<Value> {
    let own = || {
        log.thread(branch, agent.name())
            .filter(|(at, _)| !log.taken_back(*at))
            .map(|(_, event)| event)
    };
    match agent.mode() {
        AgentMode::Chat => None,
        // A single-turn agent that handed the turn to its caller, which then ran in its
        // place (`transfer`), answers nothing: ADK's `{"result": null}`.
        AgentMode::SingleTurn if transferred_to_caller(log, agent.name(), branch) => Some(Value::Null),
        AgentMode::SingleTurn => {
            let reply = own()
                .rev()
                .find(|event| event.is_final_response() && !event.is_partial())?;
            if !reply.long_running_tool_ids.is_empty() {
                return None;
            }
            let text = reply.content().and_then(Content::text).unwrap_or_default();
            Some(reply_value(agent, text))
        }
        // A task agent that transferred to a chat peer, which ran in its place
        // (`flow::transfer`), ends with no output: ADK's `{"output": null}`.
        AgentMode::Task if transferred_to_peer(log, agent.name(), branch) => Some(json!({ "output": null })),
        AgentMode::Task => {
            let done = own()
                .find_map(|event| event.function_responses().find(finished_task))?
                .id;
            let args = own().find_map(|event| {
                event
                    .function_calls()
                    .find(|call| call.id == done)
                    .map(|call| call.args.clone())
            })?;
            let output = task_output(agent.spec().output_schema, agent.spec().output_schema_is_python, &args);
            // ADK's answer: an object as it is, any other value under `output`.
            Some(match output {
                object @ Value::Object(_) => object,
                other => json!({ "output": other }),
            })
        }
    }
}

/// A task agent's `finish_task` calls among `calls` (none for another agent): their
/// arguments are the task's output, put on the response that ends it ([`finished_output`]).
pub(crate) fn finish_calls(mode: AgentMode, calls: &[Call]) -> Vec<Call> {
    calls
        .iter()
        .filter(|call| mode == AgentMode::Task && call.name == FINISH_TASK_TOOL_NAME)
        .cloned()
        .collect()
}

/// The task's output a successful `finish_task` among `responses` ends it with (ADK 2's
/// `Event.output` of the response, the task's last event), from the call's arguments
/// among `calls`: as it answers the delegating call ([`task_output`]), unwrapped. None
/// when no `finish_task` succeeded there.
pub(crate) fn finished_output(schema: Option<&OutputSchema>, calls: &[Call], responses: &Event) -> Option<Value> {
    let done = responses.function_responses().find(finished_task)?.id;
    let call = calls.iter().find(|call| call.id == done)?;
    Some(task_output(
        schema.map(OutputSchema::schema),
        schema.is_some_and(OutputSchema::is_python),
        &call.args,
    ))
}

/// Whether this responses event holds a `finish_task` call that succeeded.
pub(crate) fn finishes(event: &Event) -> bool {
    event.function_responses().any(|response| finished_task(&response))
}

/// Whether `response` is the answer of a `finish_task` call that succeeded.
fn finished_task(response: &FunctionResponse) -> bool {
    response.name == FINISH_TASK_TOOL_NAME && response.response["result"] == FINISH_TASK_DONE
}

/// What of `finish_task`'s arguments is the task's output, as ADK reads them: the value
/// under `result` when the schema is not an object's, else the arguments themselves (also
/// without an `output_schema`, whose default is the object `{result: string}`).
fn raw_output(schema: Option<&Value>, args: &Value) -> Value {
    match schema {
        Some(schema) if schema["type"] != "object" => args.get(FINISH_TASK_WRAPPER_KEY).cloned().unwrap_or(Value::Null),
        _ => args.clone(),
    }
}

/// The output that answers the task's call, from arguments `finish_task` accepted: as
/// ADK's task node gives it back, validated and dumped where the schema is a Python
/// object, which ADK's `TypeAdapter` validates (a class's fields in its order, "3" for an
/// `int` 3: the rule output_schema's values follow, [`PydanticClass`]); else (an agents
/// file's JSON Schema, no ADK equivalent) as the model wrote it.
fn task_output(schema: Option<&Value>, is_python: bool, args: &Value) -> Value {
    let raw = raw_output(schema, args);
    match schema {
        Some(schema) if is_python => PydanticClass::new(schema).validate_and_dump(&raw),
        _ => raw,
    }
}

/// The calls of the delegating agent `me` that its flow must run before anything else:
/// the open calls of its task agents (the task talks with the user across turns) and
/// single-turn agents (a runner stopped before answering it), from its latest event with
/// calls on its branch. One whose agent is done is answered from the log, without running
/// it again. Returned as (id, name, args).
pub(crate) fn pending_calls(
    log: &RunLog,
    me: &str,
    branch: &str,
    sub_agents: &[Arc<dyn Agent>],
) -> Vec<(String, String, Value)> {
    // As ADK 2.13's chat coordinator finds its open task calls wherever it made them: the
    // agent's first run and each of its re-runs (a task's hand-back, [`rerun_branch`])
    // take up the calls made on any of them, so a call a re-run made is taken up the next
    // turn, when the first run is resumed.
    let base = first_run(branch, me);
    let threads: Vec<(usize, &Event)> = log
        .events()
        .iter()
        .enumerate()
        .filter(|(_, event)| event.author == me && first_run(&event.branch, me) == base)
        .collect();
    let Some(&(at, latest)) = threads
        .iter()
        .rev()
        .filter(|(at, _)| !log.taken_back(*at))
        .find(|(_, event)| event.function_calls().next().is_some())
    else {
        return Vec::new();
    };
    latest
        .function_calls()
        .filter(|call| !call.id.is_empty() && !log.answered(call.id, at))
        .filter(|call| delegates(sub_agents).any(|agent| agent.name() == call.name))
        .map(|call| (call.id.to_string(), call.name.to_string(), call.args.clone()))
        .collect()
}

/// Where a turn goes while a task is open: the agent that made the oldest open task call
/// (outermost: it runs the task, which runs any task it opened in turn), on its branch,
/// and the branch of the newest task still waiting for the user, which the user's
/// message joins ([`joined`]; none when the open tasks have all finished and only their
/// callers must go on).
pub(crate) struct Route {
    pub(crate) caller: Arc<dyn Agent>,
    pub(crate) caller_branch: String,
    pub(crate) user_branch: String,
}

/// The [`Route`] of a turn of a session whose log is `log`; None without open tasks.
pub(crate) fn route(root: &Arc<dyn Agent>, log: &RunLog) -> Option<Route> {
    // Every turn asks: a tree without task agents answers without reading the log.
    if !has_task_agent(root) {
        return None;
    }
    let mut open = Vec::new();
    for (at, event) in log.call_events().filter(|(_, event)| event.author != USER_AUTHOR) {
        let Some(caller) = find_agent(root, &event.author) else {
            continue;
        };
        for call in event.function_calls().filter(|call| !call.id.is_empty()) {
            let (id, name) = (call.id, call.name);
            let task = caller
                .sub_agents()
                .iter()
                .find(|agent| agent.name() == name && agent.mode() == AgentMode::Task);
            if let Some(task) = task.filter(|_| !log.answered(id, at)) {
                // The task's latest run (below a re-run of its caller after a hand-back);
                // the turn goes to the caller's first run, which takes up its open calls
                // wherever it made them, as ADK 2.13 resumes the caller's first node run
                // ([`pending_calls`]).
                let task_branch = latest_run(log, &event.branch, name, id);
                let caller_branch = first_run(&event.branch, caller.name()).to_string();
                let waiting = outcome(log, task, &task_branch).is_none();
                open.push((caller.clone(), caller_branch, task_branch, waiting));
            }
        }
    }
    let (caller, caller_branch, ..) = open.first().cloned()?;
    let user_branch = open
        .iter()
        .filter(|(.., waiting)| *waiting)
        .map(|(_, _, task_branch, _)| task_branch)
        .fold(None::<&String>, |deepest, candidate| match deepest {
            Some(d) if d.matches('@').count() >= candidate.matches('@').count() => Some(d),
            _ => Some(candidate),
        })
        .cloned()
        .unwrap_or_default();
    Some(Route {
        caller,
        caller_branch,
        user_branch,
    })
}

/// A user's message joining the task that waits for it (ADK 2's active task scope): it
/// is stored with the task's scope, the id of the call that opened it, and goes on with
/// the task's invocation, the invocation of the task's latest event (ADK's borrowed id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Joined {
    pub(crate) isolation_scope: String,
    pub(crate) invocation_id: String,
}

/// What a user's message that answers no call joins, given the [`Route`]'s
/// `user_branch` (the task waiting for the user; "" for none).
pub(crate) fn joined(log: &RunLog, user_branch: &str) -> Option<Joined> {
    let id = call_id(user_branch)?;
    let latest = log
        .events()
        .iter()
        .enumerate()
        .rev()
        .filter(|(at, _)| !log.taken_back(*at))
        .find(|(_, event)| scope_key(event) == id)
        .map(|(_, event)| event)
        .or_else(|| log.latest_call(id))?;
    Some(Joined {
        isolation_scope: id.to_string(),
        invocation_id: latest.invocation_id.clone(),
    })
}

/// What a user's message joins when no task waits for it but the log's latest scoped
/// event is in the scope of a task that ended by transferring to a chat peer (its call
/// answered with nothing, [`outcome`]): as ADK 2.13 finds the active task scope (the
/// latest scope no `finish_task` closed), the message still joins that scope and the
/// task's invocation, so the caller, which has the conversation, never reads it.
pub(crate) fn left_to_peer(root: &Arc<dyn Agent>, log: &RunLog) -> Option<Joined> {
    let latest = log
        .events()
        .iter()
        .enumerate()
        .rev()
        .filter(|(at, _)| !log.taken_back(*at))
        .map(|(_, event)| event)
        .find(|event| !event.isolation_scope.is_empty())?;
    let id = latest.isolation_scope.as_str();
    let call = log.latest_call(id)?;
    let name = call.function_calls().find(|c| c.id == id)?.name;
    find_agent(root, name).filter(|agent| agent.mode() == AgentMode::Task)?;
    let task_branch = latest_run(log, &call.branch, name, id);
    transferred_to_peer(log, name, &task_branch).then(|| Joined {
        isolation_scope: id.to_string(),
        invocation_id: latest.invocation_id.clone(),
    })
}

/// Whether the tree has a task agent (only then can a turn belong to a task).
pub(crate) fn has_task_agent(agent: &Arc<dyn Agent>) -> bool {
    agent.mode() == AgentMode::Task || agent.sub_agents().iter().any(has_task_agent)
}

/// ADK's `FinishTaskTool`: a task agent's last call, whose arguments are its output.
/// Without an `output_schema`, the output is ADK's `_DefaultTaskOutput`.
pub(crate) struct FinishTaskTool {
    schema: Arc<OutputSchema>,
    has_own_schema: bool,
    output_key: Option<String>,
}

impl FinishTaskTool {
    pub(crate) fn new(schema: Option<Arc<OutputSchema>>, output_key: Option<String>) -> Self {
        // Compiled once: the tool is made for each step of a task agent.
        static DEFAULT_TASK_OUTPUT: LazyLock<Arc<OutputSchema>> = LazyLock::new(|| {
            Arc::new(OutputSchema::new(default_task_output()).expect("_DefaultTaskOutput's schema compiles"))
        });
        FinishTaskTool {
            has_own_schema: schema.is_some(),
            schema: schema.unwrap_or_else(|| DEFAULT_TASK_OUTPUT.clone()),
            output_key,
        }
    }

    /// Whether `args` fit, checked as ADK checks them (`TypeAdapter(schema).validate_python`
    /// of the output, [`raw_output`]), the problems in pydantic's text
    /// ([`OutputSchema::check_as_pydantic`]).
    async fn check(&self, args: &Value) -> std::result::Result<(), String> {
        let raw = raw_output(Some(self.schema.schema()), args);
        self.schema.check_as_pydantic(&raw).await
    }
}

#[async_trait]
impl Tool for FinishTaskTool {
    fn name(&self) -> &str {
        FINISH_TASK_TOOL_NAME
    }

    fn description(&self) -> &str {
        if self.has_own_schema {
            FINISH_TASK_DESCRIPTION_WITH_SCHEMA
        } else {
            FINISH_TASK_DESCRIPTION
        }
    }

    fn parameters_schema(&self) -> Option<Value> {
        Some(self.schema.call_parameters_keyed(FINISH_TASK_WRAPPER_KEY))
    }

    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        if let Err(problem) = self.check(&args).await {
            return Ok(json!({ "error": finish_task_misfit(&problem) }));
        }
        // ADK writes a task's output (not its chat replies) to its output_key, as the
        // model wrote it (the arguments, or the value under `result`).
        if let Some(key) = &self.output_key {
            ctx.set_state(key, raw_output(Some(self.schema.schema()), &args));
        }
        Ok(json!({ "result": FINISH_TASK_DONE }))
    }

    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        request.system_instruction = Some(match request.system_instruction.take() {
            Some(text) if !text.is_empty() => format!("{text}\n\n{FINISH_TASK_INSTRUCTION}"),
            _ => FINISH_TASK_INSTRUCTION.to_string(),
        });
        Ok(())
    }
}

/// Runs a step's delegated calls in order, each to its answer, which it yields after
/// the sub-agent's events; at the first still open (a task waiting for the user, or a
/// pause on a client tool) it stops and sets `waiting`: the call stays open and the next
/// turn comes back through here.
pub(super) fn run_delegated<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    calls: Vec<Call>,
    waiting: &'a mut Waiting,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        for call in calls {
            let Some(target) = agent.delegate(&call.name) else { continue };
            let task_branch = branch(ctx.branch(), &call.name, &call.id);
            let mut answered = false;
            for await event in run_delegated_call(agent, ctx, target.clone(), call, &mut answered) {
                yield event?;
            }
            if !answered {
                *waiting = if handed_back(&ctx.run_log(), &target, &task_branch) {
                    Waiting::HandedBack
                } else {
                    Waiting::OnTheUser
                };
                break;
            }
        }
    }
}

/// Why a step's delegated calls stopped before all were answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Waiting {
    /// All were answered.
    #[default]
    No,
    /// A task waits for the user (or a client's tool): the invocation ends.
    OnTheUser,
    /// A task handed the turn back to its caller ([`handed_back`]): the caller runs
    /// again on [`rerun_branch`], taking the call up there.
    HandedBack,
}

/// Runs one delegated call of `agent` to `target` on the call's branch, unless it is
/// done already, and yields its answer (setting `answered`) once it has one. The tool
/// hooks see a delegated call as any tool's: before_tool once, when it starts (it may
/// answer in the agent's place or change its arguments), after_tool on its answer.
fn run_delegated_call<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    target: Arc<dyn Agent>,
    call: Call,
    answered: &'a mut bool,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let branch = branch(ctx.branch(), &call.name, &call.id);
        let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
        let hook_ctx = HookContext::new(ctx.clone(), tool_ctx.clone());
        let mut hook_answer = None;
        let before = ctx.run_log();
        // A task that handed the turn back (a resumed run stopped before its caller ran
        // again) is not run here: its caller runs again ([`Waiting::HandedBack`]).
        if outcome(&before, &target, &branch).is_none() && !handed_back(&before, &target, &branch) {
            if !started(&before, &branch) {
                match agent.hooks.before_tool(&hook_ctx, &call.name, call.args.clone()).await? {
                    BeforeTool::Respond(result) => hook_answer = Some(result),
                    BeforeTool::Continue(args) if args != call.args => {
                        yield arguments_event(agent.event(ctx.as_ref(), LlmResponse::default()), &call.id, args);
                    }
                    BeforeTool::Continue(_) => {}
                }
            }
            if hook_answer.is_none() {
                for await event in dispatch(target.run(ctx.for_agent(target.clone(), &branch))).await? {
                    yield event?;
                }
            }
        }
        // A task that transferred to a chat peer: the peer runs in its place, to its end,
        // before the call is answered (`outcome`).
        if let Some((peer, peer_branch)) = peer_to_run(&ctx.run_log(), &ctx.root_agent(), &target, &branch) {
            for await event in peer.run(ctx.for_agent(peer.clone(), &peer_branch)).await? {
                yield event?;
            }
        }
        let after = ctx.run_log();
        if let Some(response) = hook_answer.or_else(|| outcome(&after, &target, &branch)) {
            let args = arguments(&after, &call.id).unwrap_or_else(|| call.args.clone());
            let response = as_response(agent.hooks.after_tool(&hook_ctx, &call.name, &args, as_response(response)).await?);
            // A task's answer is authored by the user, as ADK 2 stores it (its task node hands
            // the output back as the user's function response); a single-turn agent's, a
            // tool's answer, by the caller. Either on the caller's branch.
            let mut event = agent.event(ctx.as_ref(), LlmResponse::default());
            if target.mode() == AgentMode::Task {
                event.author = USER_AUTHOR.to_string();
            }
            event.llm_response.content = Some(Content::new(FUNCTION_RESPONSE_ROLE).with_part(response_part(call, response)));
            event.actions = tool_ctx.take_actions();
            *answered = true;
            yield event;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::output_schema::{ClassValidator, SchemaClass, Unvalidated, ValidateClass};
    use adk_grpc_core::ResponseSchemaAsSent;

    #[test]
    fn a_delegated_call_has_a_branch_and_scope_of_its_own() {
        assert_eq!(branch("", "intake", "c1"), "intake@c1");
        assert_eq!(branch("intake@c1", "check", "c2"), "intake@c1.check@c2");
        assert_eq!(scope("intake@c1"), "intake@c1");
        assert_eq!(scope("intake@c1.check@c2"), "intake@c1.check@c2");
        assert_eq!(scope("intake@c1.par.a"), "intake@c1");
        assert_eq!(scope("par.a"), "");
        assert_eq!(scope(""), "");
        assert_eq!(call_id("intake@c1.check@c2"), Some("c2"));
        assert_eq!(call_id("par.a"), None);
    }

    #[test]
    fn an_events_scope_is_its_branchs_call_else_its_isolation_scope() {
        let mut event = Event::new("e-1");
        event.branch = "intake@c1.par.a".into();
        assert_eq!(
            scope_key(&event),
            "c1",
            "whatever runs below a delegated call is in its scope"
        );
        event.branch = "intake@c1.check@c2".into();
        assert_eq!(scope_key(&event), "c2");
        // The user's answer to a task: on no branch, scoped by the task's call (ADK 2's).
        event.branch = String::new();
        assert_eq!(scope_key(&event), "");
        event.isolation_scope = "c1".into();
        assert_eq!(scope_key(&event), "c1");
        assert_eq!(branch_key(&[], "intake@c1"), "c1");
        assert_eq!(branch_key(&[], "par.a"), "");
        assert_eq!(branch_key(&[], ""), "");
        // A delegated call's events missing their call read back to it, by branch or scope.
        let mut answer = Event::new("e-1").with_author("user");
        answer.isolation_scope = "c3".into();
        let mut on_branch = Event::new("e-1");
        on_branch.branch = "intake@c1".into();
        assert_eq!(calls_missing_from(&[on_branch, answer]), ["c1", "c3"]);
    }

    #[test]
    fn a_hand_back_runs_the_caller_again_on_a_numbered_branch_in_the_tasks_scope() {
        // `host@2` is the host's second run (ADK's node re-run), not a delegated call.
        assert_eq!(scope("host@2"), "");
        assert_eq!(scope("host@2.intake@c1"), "host@2.intake@c1");
        assert_eq!(call_id("host@2.intake@c1"), Some("c1"));
        assert_eq!(call_id("host@2"), None);
        assert_eq!(rerun_prefix("host@2"), Some("host@2"));
        assert_eq!(rerun_prefix("host@2.intake@c1"), None);
        assert_eq!(rerun_prefix("intake@c1"), None);
        let on = |branch: &str| {
            let mut event = Event::new("e-1");
            event.branch = branch.into();
            event
        };
        assert_eq!(rerun_branch("", "host"), "host@2");
        assert_eq!(
            rerun_branch("host@2", "host"),
            "host@3",
            "a second hand-back in the turn: the third run"
        );
        assert_eq!(rerun_branch("planner@c0", "host"), "planner@c0.host@2");
        assert_eq!(rerun_branch("planner@c0.host@2", "host"), "planner@c0.host@3");
        let log = RunLog::new(vec![on(""), on("intake@c1"), on("host@2.intake@c1")]);
        // A later turn resumes the first run, whose hand-back is again the second run
        // (ADK 2.13 counts a node's runs afresh each turn).
        assert_eq!(rerun_branch("", "host"), "host@2");
        assert_eq!(first_run("host@2", "host"), "");
        assert_eq!(first_run("host@2", "intake"), "host@2");
        assert_eq!(first_run("host@2.intake@c1", "host"), "host@2.intake@c1");
        // The re-run reads, and its events carry, the scope of the call it takes up.
        assert_eq!(branch_key(log.events(), "host@2"), "c1");
        assert_eq!(latest_run(&log, "", "intake", "c1"), "host@2.intake@c1");
        assert_eq!(latest_run(&log, "", "intake", "c9"), "intake@c9");
        assert_eq!(calls_missing_from(&[on("host@2.intake@c1")]), ["c1"]);
    }

    #[test]
    fn a_task_agent_run_again_keeps_its_calls_isolation_scope() {
        let agent = |name: &str, mode: AgentMode, subs: Vec<Arc<dyn Agent>>| -> Arc<dyn Agent> {
            Arc::new(
                crate::LlmAgentBuilder::new(name)
                    .mode(mode)
                    .model(Arc::new(adk_grpc_models::MockModel::echo()))
                    .sub_agents(subs)
                    .build()
                    .unwrap(),
            )
        };
        let inner = agent("inner", AgentMode::Task, vec![]);
        let outer = agent("outer", AgentMode::Task, vec![inner]);
        let root = agent("host", AgentMode::Chat, vec![outer]);
        // `outer@2` is outer's second run, inside its call c0: a number is no call's id.
        assert_eq!(isolation_scope(&root, "outer@c0.outer@2"), "c0");
        assert_eq!(isolation_scope(&root, "outer@c0.outer@2.inner@c5"), "c5");
        assert_eq!(isolation_scope(&root, "host@2"), "");
    }

    #[test]
    fn a_peer_a_task_transfers_to_runs_as_a_new_node_in_the_tasks_scope_and_ends_the_call() {
        let on = |author: &str, branch: &str, scope: &str| {
            let mut event = Event::new("e-1").with_author(author);
            event.branch = branch.into();
            event.isolation_scope = scope.into();
            event
        };
        let call = |author: &str, branch: &str, id: &str, name: &str| {
            let mut event = on(author, branch, "");
            let part = adk_grpc_core::Part::function_call(name, json!({}), Some(id.into()));
            event.llm_response.content = Some(Content::new("model").with_part(part));
            event
        };
        let mut transfer = call("intake", "intake@c1", "x1", "transfer_to_agent");
        transfer.isolation_scope = "c1".into();
        let mut answer = on("intake", "intake@c1", "c1");
        answer.llm_response.content = Some(Content::new("user").with_text("{}"));
        answer.actions.transfer_to_agent = Some("hours".into());
        let mut log = RunLog::new(vec![
            on("user", "", ""),
            call("host", "", "c1", "intake"),
            on("intake", "intake@c1", "c1"),
            on("user", "", "c1"),
            transfer,
            answer,
        ]);
        assert!(transferred_to_peer(&log, "intake", "intake@c1"));
        assert!(!transferred_to_caller(&log, "intake", "intake@c1"));
        // The peer's first run beside the caller's, numbered 1 (ADK's new node), in the
        // task's scope, which its events carry and it reads.
        assert_eq!(peer_branch(&log, "intake@c1", "hours"), "hours@1");
        assert_eq!(branch_key(log.events(), "hours@1"), "c1");
        assert_eq!(branch_key(log.events(), "other@1"), "", "no task transferred to it");
        let mut events = log.events().to_vec();
        events.push(on("hours", "hours@1", "c1"));
        log = RunLog::new(events);
        assert_eq!(peer_branch(&log, "intake@c1", "hours"), "hours@2", "its second run");
        assert_eq!(
            peer_branch(&log, "host@2.intake@c1", "hours"),
            "host@2.hours@1",
            "beside the caller's re-run"
        );
    }

    #[test]
    fn a_task_call_a_callers_rerun_made_is_taken_up_by_its_first_run_the_next_turn() {
        let agent = |name: &str, mode: AgentMode, subs: Vec<Arc<dyn Agent>>| -> Arc<dyn Agent> {
            Arc::new(
                crate::LlmAgentBuilder::new(name)
                    .mode(mode)
                    .model(Arc::new(adk_grpc_models::MockModel::echo()))
                    .sub_agents(subs)
                    .build()
                    .unwrap(),
            )
        };
        let intake = agent("intake", AgentMode::Task, vec![]);
        let root = agent("host", AgentMode::Chat, vec![intake.clone()]);
        let on = |author: &str, branch: &str, scope: &str| {
            let mut event = Event::new("e-1").with_author(author);
            event.branch = branch.into();
            event.isolation_scope = scope.into();
            event.llm_response.content = Some(Content::new("model").with_text("..."));
            event
        };
        let with_part = |mut event: Event, part: adk_grpc_core::Part| {
            event.llm_response.content = Some(Content::new("model").with_part(part));
            event
        };
        let call = |author: &str, branch: &str, scope: &str, id: &str| {
            with_part(
                on(author, branch, scope),
                adk_grpc_core::Part::function_call("intake", json!({}), Some(id.into())),
            )
        };
        let answer = |branch: &str, scope: &str, id: &str| {
            let data = adk_grpc_core::FunctionResponseData {
                name: "intake".into(),
                response: json!({}),
            };
            let response = adk_grpc_core::Part::function_response(data, Some(id.into()));
            with_part(on("user", branch, scope), response)
        };
        // c1 handed back and finished on the host's re-run `host@2`, which then called the
        // task again (c2), which waits for the user.
        let log = RunLog::new(vec![
            on("user", "", ""),
            call("host", "", "", "c1"),
            on("intake", "intake@c1", "c1"),
            on("intake", "host@2.intake@c1", "c1"),
            answer("host@2", "c1", "c1"),
            call("host", "host@2", "c1", "c2"),
            on("intake", "host@2.intake@c2", "c2"),
        ]);
        let subs = [intake];
        let pending = |branch: &str| -> Vec<String> {
            pending_calls(&log, "host", branch, &subs)
                .into_iter()
                .map(|(id, ..)| id)
                .collect()
        };
        // The next turn resumes the host's first run, which takes c2 up though a re-run
        // made it, as does every re-run a hand-back of c2 starts in that turn.
        let route = route(&root, &log).expect("c2 is open");
        assert_eq!(route.caller_branch, "");
        assert_eq!(route.user_branch, "host@2.intake@c2");
        assert_eq!(pending(""), ["c2"]);
        assert_eq!(pending("host@2"), ["c2"]);
        assert_eq!(pending("host@3"), ["c2"]);
        assert!(pending("intake@c1").is_empty(), "another agent's branch");
    }

    #[test]
    fn a_caller_in_a_single_turn_agents_place_reads_as_its_caller_and_a_tasks_does_not() {
        let on = |author: &str, branch: &str, scope: &str| {
            let mut event = Event::new("e-1").with_author(author);
            event.branch = branch.into();
            event.isolation_scope = scope.into();
            event
        };
        // A single-turn agent a chat agent called: its events carry no isolation_scope.
        let single_turn = [on("user", "", ""), on("notes", "notes@c1", "")];
        assert!(reads_in_callers_place(&single_turn, "host", "notes@c1"));
        assert!(
            !reads_in_callers_place(&single_turn, "notes", "notes@c1"),
            "the agent reads its own scope"
        );
        assert!(!reads_in_callers_place(&single_turn, "host", ""));
        // A task's events carry its call's scope: whoever runs there reads the task's.
        let task = [on("user", "", ""), on("intake", "intake@c1", "c1")];
        assert!(!reads_in_callers_place(&task, "host", "intake@c1"));
    }

    /// Stands in for the Python worker's pydantic: refuses a `guests` that is no integer
    /// with pydantic's words (the text ADK's recording shows for `Booking`).
    struct Pydantic;

    const PYDANTIC_INT_PARSING: &str = "1 validation error for Booking\nguests\n  Input should be a valid integer, \
        unable to parse string as an integer [type=int_parsing, input_value='four', input_type=str]";

    #[async_trait]
    impl ValidateClass for Pydantic {
        async fn validate(&self, unvalidated: Unvalidated<'_>) -> std::result::Result<Value, String> {
            let Unvalidated::Value(value) = unvalidated else {
                panic!("finish_task validates a value, not a text");
            };
            match value["guests"] {
                Value::Number(_) => Ok(json!({"name": value["name"], "guests": value["guests"]})),
                _ => Err(PYDANTIC_INT_PARSING.into()),
            }
        }
    }

    /// `Booking(name: str, guests: int)`, a directory's pydantic class with its worker.
    fn booking() -> Arc<OutputSchema> {
        let json_schema = json!({
            "type": "object", "title": "Booking",
            "properties": {"name": {"type": "string", "title": "Name"}, "guests": {"type": "integer", "title": "Guests"}},
            "required": ["name", "guests"]
        });
        Arc::new(
            OutputSchema::of_class(SchemaClass {
                validator: Some(ClassValidator(Arc::new(Pydantic))),
                json_schema,
                validated: true,
                as_sent: ResponseSchemaAsSent {
                    gemini: json!({}),
                    openai: None,
                },
                set_model_response_parameters: json!({}),
                set_model_response_argument: None,
            })
            .unwrap(),
        )
    }

    #[tokio::test]
    async fn a_misfit_finish_task_is_answered_with_adks_words_around_pydantics() {
        let tool = FinishTaskTool::new(Some(booking()), None);
        let problem = tool.check(&json!({"name": "Ada", "guests": "four"})).await.unwrap_err();
        assert_eq!(problem, PYDANTIC_INT_PARSING, "pydantic's text, verbatim");
        assert_eq!(
            finish_task_misfit(&problem),
            format!(
                "Invoking `finish_task()` failed due to validation errors:\n{PYDANTIC_INT_PARSING}\nYou could retry \
                 calling this tool, but it is IMPORTANT for you to provide all the mandatory parameters with correct \
                 types."
            )
        );
        assert_eq!(tool.check(&json!({"guests": 4, "name": "Ada"})).await, Ok(()));
        assert_eq!(tool.description(), FINISH_TASK_DESCRIPTION_WITH_SCHEMA);
    }

    #[tokio::test]
    async fn without_an_output_schema_finish_task_takes_adks_default_result() {
        let tool = FinishTaskTool::new(None, None);
        assert_eq!(tool.description(), FINISH_TASK_DESCRIPTION);
        assert_eq!(tool.parameters_schema(), Some(default_task_output()));
        assert_eq!(tool.check(&json!({"result": "booked"})).await, Ok(()));
        // No Python class: pydantic's text all the same, as ADK's `_DefaultTaskOutput` gives it
        // (it forbids extras).
        assert_eq!(
            tool.check(&json!({"result": 3})).await,
            Err(
                "1 validation error for _DefaultTaskOutput\nresult\n  Input should be a valid string \
                 [type=string_type, input_value=3, input_type=int]\n    For further information visit \
                 https://errors.pydantic.dev/2.14/v/string_type"
                    .into()
            )
        );
        assert_eq!(
            tool.check(&json!({"result": "booked", "note": "x"})).await,
            Err(
                "1 validation error for _DefaultTaskOutput\nnote\n  Extra inputs are not permitted \
                 [type=extra_forbidden, input_value='x', input_type=str]\n    For further information visit \
                 https://errors.pydantic.dev/2.14/v/extra_forbidden"
                    .into()
            )
        );
    }

    /// An agents file's JSON Schema has no Python class: the misfit is in pydantic's text all
    /// the same, the schema's `title` standing for the class's name (else pydantic's name of
    /// its type), a constraint the stand-in does not check in the schema check's words.
    #[tokio::test]
    async fn an_agents_files_json_schema_misfit_reads_as_pydantics_named_by_its_title() {
        let titled = json!({
            "title": "Booking", "type": "object",
            "properties": {"name": {"type": "string"}, "guests": {"type": "integer", "minimum": 1}},
            "required": ["name", "guests"]
        });
        let tool = FinishTaskTool::new(Some(Arc::new(OutputSchema::new(titled).unwrap())), None);
        assert_eq!(
            tool.check(&json!({"guests": "four"})).await,
            Err(
                "2 validation errors for Booking\nname\n  Field required [type=missing, input_value={'guests': \
                 'four'}, input_type=dict]\n    For further information visit \
                 https://errors.pydantic.dev/2.14/v/missing\nguests\n  Input should be a valid integer, unable to \
                 parse string as an integer [type=int_parsing, input_value='four', input_type=str]\n    For \
                 further information visit https://errors.pydantic.dev/2.14/v/int_parsing"
                    .into()
            )
        );
        // Undeclared keys are allowed (a JSON Schema's default) and kept.
        assert_eq!(
            tool.check(&json!({"name": "Ada", "guests": 4, "note": "x"})).await,
            Ok(())
        );
        let constraint = tool.check(&json!({"name": "Ada", "guests": 0})).await.unwrap_err();
        assert!(constraint.contains("/guests"), "{constraint}");
        let untitled = json!({"type": "array", "items": {"type": "integer"}});
        let tool = FinishTaskTool::new(Some(Arc::new(OutputSchema::new(untitled).unwrap())), None);
        let misfit = tool.check(&json!({"result": [1, "x"]})).await.unwrap_err();
        assert!(misfit.starts_with("1 validation error for list[int]\n1\n"), "{misfit}");
    }

    #[test]
    fn a_finished_task_keeps_the_arguments_as_its_output() {
        let object = json!({"type": "object", "properties": {"n": {"type": "integer"}, "a": {"type": "string"}}});
        let args = json!({"a": "x", "n": 2});
        // The state gets the arguments as the model wrote them (ADK's `pending_fc_args`).
        assert_eq!(python_json(&raw_output(Some(&object), &args)), r#"{"a": "x", "n": 2}"#);
        assert_eq!(raw_output(None, &json!({"result": "done"})), json!({"result": "done"}));
        let list = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(raw_output(Some(&list), &json!({"result": ["a"]})), json!(["a"]));
        // The caller's answer: a JSON Schema's output as it came, a class's in its order.
        assert_eq!(
            python_json(&task_output(Some(&object), false, &args)),
            r#"{"a": "x", "n": 2}"#
        );
        assert_eq!(
            python_json(&task_output(Some(&object), true, &args)),
            r#"{"n": 2, "a": "x"}"#
        );
    }
}
