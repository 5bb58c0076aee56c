//! The LLM agent's turn: steps of request → model → function calls → tool responses,
//! until the model replies without calls, hands the turn over or the turn pauses
//! (ADK's `runOneStep`). A step's parts: [`request`] builds the model request (named
//! processors, in order), [`model_call`] calls the model inside its hooks,
//! [`tool_calls`] runs the function calls, `task::run_delegated` the calls of task and
//! single-turn sub-agents, and [`transfer`] hands the turn to another agent.
//!
//! The turn is a lazy stream: after it yields an event it is not polled again
//! until the runner has stored that event, so the next request is built from a
//! history (and state) that includes it. Dropping the stream drops the model
//! request in flight.

mod model_call;
mod request;
pub(crate) mod tool_calls;

use super::output_schema::{OutputSchema, SET_MODEL_RESPONSE_TOOL_NAME, SetModelResponseTool};
use super::{Inner, task};
use crate::tools::TransferToAgentTool;
use adk_grpc_core::{
    AdkError, Agent, AgentMode, Content, Event, EventActions, EventStream, InvocationContext, LlmResponse,
    ReadonlyContext, Result, Tool,
};
use async_stream::try_stream;
use futures::Stream;
use model_call::MODEL_ROLE;
use std::sync::Arc;
use tool_calls::{Call, function_calls};

/// The agent's turn, then, in an invocation that keeps its ends in the log (an app
/// marked resumable), its end (`actions.end_of_agent`), as ADK's LLM agent stores it:
/// at a transfer, before the agent it hands the turn to runs (see [`transfer`]);
/// otherwise after the turn, and not when the turn called a long-running tool (even one
/// answered at once) or one of the last two events of the invocation on its branch did.
pub(super) fn run(agent: Arc<Inner>, ctx: Arc<dyn InvocationContext>) -> EventStream {
    Box::pin(try_stream! {
        let (mut paused, mut ended) = (false, false);
        for await event in turn(agent.clone(), ctx.clone()) {
            let event = event?;
            paused |= event.calls_a_long_running_tool();
            ended |= event.author == agent.name && event.actions.end_of_agent == Some(true);
            yield event;
        }
        if ctx.is_resumable() && !paused && !ended && !ended_on_a_long_running_call(ctx.as_ref()) {
            yield crate::workflow::state_event(ctx.as_ref(), &agent.name, ctx.branch(), None);
        }
    })
}

/// One of the last two events of this invocation on this branch calls a long-running tool.
fn ended_on_a_long_running_call(ctx: &dyn InvocationContext) -> bool {
    ctx.events()
        .iter()
        .rev()
        .filter(|event| event.invocation_id == ctx.invocation_id() && event.branch == ctx.branch())
        .take(2)
        .any(Event::calls_a_long_running_tool)
}

fn turn(agent: Arc<Inner>, ctx: Arc<dyn InvocationContext>) -> EventStream {
    Box::pin(try_stream! {
        // A client tool's answer may carry actions (recorded on the user event): a
        // transfer hands the turn over, escalate and skip_summarization end it here.
        if let Some(actions) = client_tool_actions(ctx.as_ref()) {
            if let Some(target) = &actions.transfer_to_agent {
                for await event in transfer(&agent, &ctx, target) {
                    yield event?;
                }
                return;
            }
            if actions.escalates() || actions.skips_summarization() {
                return;
            }
        }
        // A resumed invocation whose runner died between storing this agent's function
        // calls and their responses answers them first (docs/semantics.md, Runner 27).
        let mut resumed = unanswered_calls(ctx.as_ref()).or_else(|| agent.pending_delegations(ctx.as_ref()));
        let mut goes_on = true;
        while goes_on && !ctx.ended() {
            goes_on = false;
            for await event in step(&agent, &ctx, resumed.take(), &mut goes_on) {
                yield event?;
            }
        }
    })
}

/// One step: the model is called (or the calls a resumed invocation left unanswered
/// are taken up), its function calls are run, the delegated ones after the others, and
/// what they did decides whether another step follows (`goes_on`).
fn step<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    resumed: Option<Vec<Call>>,
    goes_on: &'a mut bool,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let tools = agent.tools(ctx).await?;
        let is_resumed = resumed.is_some();
        let (calls, mut unanswered) = match resumed {
            Some(calls) => (calls, Vec::new()),
            None => {
                let (mut calls, mut long_running) = (Vec::new(), Vec::new());
                for await event in model_turn(agent, ctx, &tools) {
                    let event = event?;
                    // The model's event comes last: its calls are the step's.
                    calls = function_calls(&event);
                    long_running = event.long_running_tool_ids.clone();
                    yield event;
                }
                (calls, long_running)
            }
        };
        if calls.is_empty() {
            return;
        }
        // A fitting set_model_response call is the final reply (a misfit one is
        // answered with the problem, and the model tries again).
        let structured = agent.structured_reply(&calls).await;
        // Calls of task and single-turn sub-agents run after the others are answered.
        let (delegated, calls): (Vec<Call>, Vec<Call>) =
            calls.into_iter().partition(|call| agent.delegate(&call.name).is_some());
        let (mut transfer_to, mut skip_summarization) = (None, false);
        let finishing = task::finish_calls(agent.mode, &calls);
        if let Some(mut responses) = tool_calls::run(agent, ctx, &tools, calls, is_resumed).await? {
            // A long-running call answered at once (an interim result, e.g. "pending") is
            // read by the model, which goes on, as in ADK; only one left unanswered pauses.
            unanswered.retain(|id| responses.function_responses().all(|response| response.id != id.as_str()));
            transfer_to = responses.actions.transfer_to_agent.clone();
            skip_summarization = responses.actions.skips_summarization();
            // finish_task answered the call that started this task: its caller goes on.
            let finished_task = agent.mode == AgentMode::Task && task::finishes(&responses);
            if finished_task {
                responses.output = task::finished_output(agent.output_schema.as_deref(), &finishing, &responses);
            }
            yield responses;
            if finished_task {
                return;
            }
        }
        let mut stopped = false;
        for await event in delegated_calls(agent, ctx, delegated, &mut stopped) {
            yield event?;
        }
        if stopped {
            return;
        }
        if let Some(text) = structured {
            yield agent.structured_event(ctx.as_ref(), text, &tools).await?;
            return;
        }
        if let Some(target) = transfer_to {
            for await event in transfer(agent, ctx, &target) {
                yield event?;
            }
            return;
        }
        if !unanswered.is_empty() {
            // The client answers the long-running call in a later run; nothing
            // else in this invocation (e.g. a sequential agent's next step) goes on.
            ctx.end_invocation();
            return;
        }
        *goes_on = !skip_summarization;
    }
}

/// The model's part of a step: the request built, held to the app's token budget, and
/// the model call. Yields a summary made for the budget, the partial replies and the
/// model's event, last.
fn model_turn<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    tools: &'a [Arc<dyn Tool>],
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let mut request = request::build(agent, ctx, tools).await?;
        if let Some((config, budget)) = request::over_budget(ctx.as_ref(), &request) {
            // Too big for the app's budget: summarise what came before this
            // invocation first (the summary is stored as any event), then, if
            // that was not enough or failed, leave out the oldest contents.
            if let Some(summary) = request::compact_for_budget(&config, budget, ctx.as_ref()).await {
                yield summary;
                request = request::build(agent, ctx, tools).await?;
            }
            request::trim_to_budget(agent, ctx.as_ref(), &mut request, budget);
        }
        for await event in model_call::run(agent, ctx, tools, request) {
            yield event?;
        }
    }
}

/// Hands the turn to the agent called `target` (a transfer): it runs on this branch.
/// In an invocation that keeps its ends in the log, this agent's end comes first, as
/// ADK 2 stores it (its agent wrapper ends the agent at the transfer's response, and
/// the target runs after it); a resumed invocation whose log ends there goes on with
/// the target (`run_state::transfer_not_acted_on`). A task agent's transfer to its caller
/// is no hand-over: its run ends and the caller runs again (`task::handed_back`); nor is
/// its transfer to a chat peer, which its caller's flow runs on its own branch in the
/// task's place (`task::peer_to_run`).
fn transfer<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    target: &'a str,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let target = agent.transfer_target(ctx, target)?;
        if ctx.is_resumable() {
            yield crate::workflow::state_event(ctx.as_ref(), &agent.name, ctx.branch(), None);
        }
        if task::hands_back(ctx.as_ref(), target.name()) {
            // A task agent's transfer to its caller ends its run here, its call still
            // open: the caller runs again and takes the call up ([`run_again`]).
            return;
        }
        if agent.mode == AgentMode::Task {
            // A task agent's transfer to a chat peer is no hand-over either: as ADK 2.13's
            // workflow runs it, the task's run ends, and the caller's flow runs the peer as
            // a new node in the task's scope, then answers the call with nothing
            // (`task::peer_to_run`, `task::outcome`) and goes on.
            return;
        }
        let in_callers_place = agent.mode == AgentMode::SingleTurn && task::called_by(ctx.as_ref(), target.name());
        for await event in target.run(ctx.for_agent(target.clone(), ctx.branch())).await? {
            let mut event = event?;
            if in_callers_place {
                agent.keep_as_output(&target, &mut event).await?;
            }
            yield event;
        }
        if in_callers_place {
            // As ADK 2.13's transfer loop runs it: the caller's reply in the single-turn
            // agent's place is that agent's output, then the caller runs once more there,
            // and the call is answered with nothing (`task::outcome`).
            for await event in target.run(ctx.for_agent(target.clone(), ctx.branch())).await? {
                yield event?;
            }
        }
    }
}

/// Runs the step's delegated calls (`task::run_delegated`); `stopped` when the turn stops
/// there: a task waits for the user (the invocation ends), or handed the turn back, and
/// this agent has run again ([`run_again`]).
fn delegated_calls<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    calls: Vec<Call>,
    stopped: &'a mut bool,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let mut waiting = task::Waiting::No;
        for await event in task::run_delegated(agent, ctx, calls, &mut waiting) {
            yield event?;
        }
        match waiting {
            task::Waiting::No => {}
            task::Waiting::OnTheUser => {
                ctx.end_invocation();
                *stopped = true;
            }
            task::Waiting::HandedBack => {
                for await event in run_again(agent, ctx) {
                    yield event?;
                }
                *stopped = true;
            }
        }
    }
}

/// This agent's run again after a task it called handed the turn back to it, as ADK
/// 2.13's workflow runs it: a new run of the agent on `task::rerun_branch`, in the task's
/// scope, whose flow takes up the task's open call (the task agent runs again, afresh,
/// below it) and goes on after its answer.
fn run_again<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
        let me = adk_grpc_core::find_agent(&ctx.root_agent(), &agent.name)
            .ok_or_else(|| AdkError::Agent(format!("agent {} is not in the runner's tree", agent.name)))?;
        let branch = task::rerun_branch(ctx.branch(), &agent.name);
        for await event in me.run(ctx.for_agent(me.clone(), &branch)).await? {
            yield event?;
        }
    }
}

impl Inner {
    /// A single-turn agent's caller's final reply in its place (`transfer`) is this agent's
    /// output, as ADK's node stores it: the text in its `output_key`; with an
    /// `output_schema`, the value the schema validates, which the event carries as its
    /// `output` too, and a reply that does not fit fails the run, as it does when the
    /// agent replies itself.
    async fn keep_as_output(&self, caller: &Arc<dyn Agent>, event: &mut Event) -> Result<()> {
        if event.author != caller.name() || !event.is_final_response() {
            return Ok(());
        }
        let Some(text) = event.content().and_then(Content::text) else {
            return Ok(());
        };
        let value = match &self.output_schema {
            Some(schema) => {
                let value = self.reply_as_schema_value(schema, &text).await?;
                event.output = Some(value.clone());
                value
            }
            None => serde_json::Value::String(text),
        };
        if let Some(key) = &self.output_key {
            event.actions.state_delta.insert(key.clone(), value);
        }
        Ok(())
    }
}

/// The actions of the client tool answers this invocation began with, when this
/// agent made the calls answered and nothing has happened since the user's message
/// (a sub-agent it transfers to must not act on them again).
fn client_tool_actions(ctx: &dyn InvocationContext) -> Option<EventActions> {
    let log = ctx.run_log();
    let last = log.events().last()?;
    if last.invocation_id != ctx.invocation_id() || last.author != crate::rules::USER_AUTHOR {
        return None;
    }
    let answered = last.function_responses().next()?.id;
    let caller = log.call_answered_at(answered, log.events().len() - 1)?;
    (caller.author == ctx.agent_name()).then(|| last.actions.clone())
}

/// The function calls of this agent's last event when the invocation's log ends with
/// them unanswered: only a resumed invocation starts so (a running one answers its
/// calls before it goes on). None for a pause on a client tool, which the client answers.
fn unanswered_calls(ctx: &dyn InvocationContext) -> Option<Vec<Call>> {
    let events = ctx.events();
    let last = events.last()?;
    if last.invocation_id != ctx.invocation_id()
        || last.author != ctx.agent_name()
        || !last.long_running_tool_ids.is_empty()
    {
        return None;
    }
    let calls = function_calls(last);
    (!calls.is_empty()).then_some(calls)
}

impl Inner {
    /// The agent's tools for this step: `transfer_to_agent` when it has sub-agents,
    /// then its own and its toolsets', a task agent's `finish_task`, then its task and
    /// single-turn sub-agents.
    /// With an `output_schema`, `set_model_response` joins its own (ADK's way of
    /// combining tools and structured output for a model that cannot take both).
    async fn tools(&self, ctx: &Arc<dyn InvocationContext>) -> Result<Vec<Arc<dyn Tool>>> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        // First, as ADK declares it: its transfer request processor adds it before the
        // agent's own tools are.
        let targets = self.transfer_targets(ctx);
        if !targets.is_empty() {
            let targets = targets
                .iter()
                .map(|a| (a.name().to_string(), a.description().to_string()))
                .collect();
            tools.push(Arc::new(if self.mode == AgentMode::Chat {
                TransferToAgentTool::new(targets, self.parent_to_tell(ctx))
            } else {
                TransferToAgentTool::without_instruction(targets)
            }));
        }
        tools.extend(self.tools.iter().cloned());
        for toolset in &self.toolsets {
            let readonly: Arc<dyn ReadonlyContext> = ctx.clone();
            tools.extend(toolset.tools(readonly).await?);
        }
        // A task agent ends with finish_task, and task and single-turn sub-agents are
        // tools (ADK 2's `mode`): in that order, as ADK adds them after the agent's own.
        if self.mode == AgentMode::Task {
            tools.push(Arc::new(task::FinishTaskTool::new(
                self.output_schema.clone(),
                self.output_key.clone(),
            )));
        }
        for delegate in task::delegates(&self.sub_agents) {
            tools.push(Arc::new(crate::tools::AgentTool::delegate(delegate.clone())));
        }
        // Under ADK's condition: the agent has tools of its own (its examples are ADK's
        // ExampleTool; transfer_to_agent and task agents do not count), and its model
        // cannot take the schema with them.
        let own_tools = !self.tools.is_empty() || !self.toolsets.is_empty() || !self.examples.is_empty();
        if let Some(schema) = self.reply_schema()
            && own_tools
            && !self.model.output_schema_with_tools()
        {
            // First, as ADK declares it: its output-schema request processor adds it
            // before the agent's tools are.
            tools.insert(0, Arc::new(SetModelResponseTool::new(schema.clone())));
        }
        Ok(tools)
    }

    /// The schema the agent's final reply follows: its `output_schema`, except for a task
    /// agent, whose output goes through `finish_task` (as ADK's basic flow leaves it out).
    fn reply_schema(&self) -> Option<&Arc<OutputSchema>> {
        self.output_schema.as_ref().filter(|_| self.mode != AgentMode::Task)
    }

    /// The task or single-turn sub-agent called `name`.
    pub(super) fn delegate(&self, name: &str) -> Option<Arc<dyn Agent>> {
        task::delegates(&self.sub_agents).find(|a| a.name() == name).cloned()
    }

    /// The open calls of its task and single-turn sub-agents it must run (or answer from
    /// the log) before its model is called again (see `task::pending_calls`).
    fn pending_delegations(&self, ctx: &dyn InvocationContext) -> Option<Vec<Call>> {
        let calls: Vec<Call> = task::pending_calls(&ctx.run_log(), &self.name, ctx.branch(), &self.sub_agents)
            .into_iter()
            .map(|(id, name, args)| Call { id, name, args })
            .collect();
        (!calls.is_empty()).then_some(calls)
    }

    /// The final reply of the step's `set_model_response` call, when it fits: the value
    /// as the text ADK writes of it.
    async fn structured_reply(&self, calls: &[Call]) -> Option<String> {
        let schema = self.reply_schema()?;
        for call in calls.iter().filter(|call| call.name == SET_MODEL_RESPONSE_TOOL_NAME) {
            if let Ok(Some(value)) = schema.value_of_call(&call.args).await {
                return Some(schema.reply_text(&value));
            }
        }
        None
    }

    /// The final reply a fitting `set_model_response` call gave, as the model's.
    async fn structured_event(
        &self,
        ctx: &dyn InvocationContext,
        text: String,
        tools: &[Arc<dyn Tool>],
    ) -> Result<Event> {
        let reply = LlmResponse {
            content: Some(Content::new(MODEL_ROLE).with_text(text)),
            ..Default::default()
        };
        self.model_event(ctx, reply, tools).await
    }

    /// An event of this agent on the context's branch.
    pub(super) fn event(&self, ctx: &dyn InvocationContext, response: LlmResponse) -> Event {
        let mut event = Event::new(ctx.invocation_id()).with_author(&self.name);
        event.branch = ctx.branch().to_string();
        event.llm_response = response;
        event
    }

    /// The agents this one may hand the turn to: its sub-agents, and, as in ADK by
    /// default, its parent and peers (see `adk_grpc_core::transfer_targets`).
    fn transfer_targets(&self, ctx: &Arc<dyn InvocationContext>) -> Vec<Arc<dyn Agent>> {
        let root = ctx.root_agent();
        match adk_grpc_core::find_agent(&root, &self.name) {
            Some(me) => adk_grpc_core::transfer_targets(&root, &me),
            // Run outside the runner's tree (e.g. as a tool): only its own chat sub-agents.
            None if self.mode == AgentMode::Chat => self
                .sub_agents
                .iter()
                .filter(|a| a.mode() == AgentMode::Chat)
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    }

    /// The parent its transfer instruction names (ADK tells an agent with a parent it
    /// may hand the question back, unless `disallow_transfer_to_parent`).
    fn parent_to_tell(&self, ctx: &Arc<dyn InvocationContext>) -> Option<String> {
        let parent = adk_grpc_core::parent_of(&ctx.root_agent(), &self.name)?;
        self.transfer_scope.to_parent.then(|| parent.name().to_string())
    }

    fn transfer_target(&self, ctx: &Arc<dyn InvocationContext>, name: &str) -> Result<Arc<dyn Agent>> {
        self.transfer_targets(ctx)
            .into_iter()
            .find(|agent| agent.name() == name)
            .ok_or_else(|| AdkError::Agent(format!("agent {} may not transfer to {name}", self.name)))
    }
}

/// Several tools of one step share one event: their actions add up.
fn merge_actions(into: &mut EventActions, from: EventActions) {
    if from.skips_summarization() {
        into.skip_summarization = Some(true);
    }
    if from.escalates() {
        into.escalate = Some(true);
    }
    into.state_delta.extend(from.state_delta);
    into.artifact_delta.extend(from.artifact_delta);
    into.requested_auth_configs.extend(from.requested_auth_configs);
    into.requested_tool_confirmations
        .extend(from.requested_tool_confirmations);
    into.extensions.extend(from.extensions);
    if from.transfer_to_agent.is_some() {
        into.transfer_to_agent = from.transfer_to_agent;
        into.transfer_reason = from.transfer_reason;
    }
    if from.set_model_response.is_some() {
        into.set_model_response = from.set_model_response;
    }
}
