//! The LLM agent's turn: request → model → function calls → tool responses → model again.
//!
//! The turn is a lazy stream: after it yields an event it is not polled again
//! until the runner has stored that event, so the next request is built from a
//! history (and state) that includes it. Dropping the stream drops the model
//! request in flight.

use super::output_schema::{SET_MODEL_RESPONSE_INSTRUCTION, SET_MODEL_RESPONSE_TOOL_NAME, SetModelResponseTool};
use super::{IncludeContents, Inner, history, instruction, task};
use crate::compaction::{self, Trigger};
use crate::context::ToolCallContext;
use crate::hooks::{BeforeModel, BeforeTool, HookContext, HookPoint, Hooks};
use crate::state_schema::StateSchema;
use crate::tools::TransferToAgentTool;
use adk_grpc_core::{
    AdkError, Agent, AgentMode, CallbackContext, CompactionConfig, Content, Event, EventActions, EventStream,
    FunctionResponseData, InvocationContext, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part, PartKind,
    ReadonlyContext, Result, StreamingMode, Tool, ToolOutput,
};
use adk_grpc_telemetry::metrics::TokenUsage;
use adk_grpc_telemetry::{ModelCall, ToolCall};
use async_stream::try_stream;
use futures::StreamExt;
use futures::future::join_all;
use serde_json::{Value, json};
use std::sync::Arc;
use tracing::Instrument;

/// The role of the content that carries tool results.
const TOOL_ROLE: &str = "tool";
const MODEL_ROLE: &str = "model";

pub(super) fn run(agent: Arc<Inner>, ctx: Arc<dyn InvocationContext>) -> EventStream {
    Box::pin(try_stream! {
        // A client tool's answer may carry actions (recorded on the user event): a
        // transfer hands the turn over, escalate and skip_summarization end it here.
        let mut answered_by_client = false;
        if let Some(actions) = client_tool_actions(ctx.as_ref()) {
            answered_by_client = actions.escalates() || actions.skips_summarization();
            if let Some(target) = actions.transfer_to_agent {
                answered_by_client = true;
                let target = agent.transfer_target(&ctx, &target)?;
                let mut events = target.run(ctx.for_agent(target.clone(), ctx.branch())).await?;
                while let Some(event) = events.next().await {
                    yield event?;
                }
            }
        }
        // A resumed invocation whose runner died between storing this agent's function
        // calls and their responses answers them first (docs/semantics.md, Runner 27).
        let mut unanswered = unanswered_calls(ctx.as_ref()).or_else(|| agent.pending_delegations(ctx.as_ref()));
        while !answered_by_client && !ctx.ended() {
            let tools = agent.tools(&ctx).await?;
            let resumed = unanswered.take();
            let (calls, pauses) = if let Some(calls) = resumed.clone() {
                (calls, false)
            } else {
                let mut request = agent.request(&ctx, &tools).await?;
                if let Some(config) = ctx.compaction().filter(|c| c.token_budget.is_some()).cloned() {
                    let budget = config.token_budget.unwrap_or(usize::MAX);
                    if compaction::request_tokens(&request) > budget {
                        // Too big for the app's budget: summarise what came before this
                        // invocation first (the summary is stored as any event), then, if
                        // that was not enough or failed, leave out the oldest contents.
                        if let Some(summary) = compact_for_budget(&config, budget, ctx.as_ref()).await {
                            yield summary;
                            request = agent.request(&ctx, &tools).await?;
                        }
                        let dropped = compaction::trim_to_budget(&mut request, budget);
                        if dropped > 0 {
                            tracing::warn!(
                                invocation_id = ctx.invocation_id(), agent = %agent.name, dropped, budget,
                                "model request over the token budget after compaction: its oldest contents were left out"
                            );
                            adk_grpc_telemetry::metrics::history_contents_dropped(ctx.app_name(), dropped);
                        }
                    }
                }
                let request = request;
                // The actions of this model call's hooks go into its event.
                let hook_sink = Arc::new(ToolCallContext::new(ctx.clone(), ""));
                let hook_ctx = HookContext::new(ctx.clone(), hook_sink.clone());
                let response = match agent.hooks.before_model(&hook_ctx, request).await? {
                    BeforeModel::Respond(response) => response,
                    BeforeModel::Continue(_) if ctx.ended() => {
                        // A hook ended the invocation: the model is not called.
                        let actions = hook_sink.take_actions();
                        if actions != EventActions::default() {
                            let mut event = agent.event(ctx.as_ref(), LlmResponse::default());
                            event.actions = actions;
                            yield event;
                        }
                        break;
                    }
                    BeforeModel::Continue(request) => {
                        ctx.increment_llm_call_count()?;
                        // An after_model hook must see a reply whole before any of it is
                        // streamed (a redaction cannot work on fragments): no partials.
                        let streaming = ctx.run_config().streaming_mode == StreamingMode::Sse
                            && !agent.hooks.has(HookPoint::AfterModel);
                        // Kept for the on_model_error hooks, which are sent the request.
                        let failed_request = agent.hooks.has(HookPoint::OnModelError).then(|| request.clone());
                        let mut complete = None;
                        let mut failure = None;
                        match call_model_retrying(&agent.model, request, streaming, agent.retry.as_ref()).await {
                            Err(e) => failure = Some(e),
                            Ok(mut replies) => {
                                while let Some(reply) = replies.next().await {
                                    match reply {
                                        Err(e) => {
                                            failure = Some(e);
                                            break;
                                        }
                                        Ok(reply) if reply.partial != Some(true) => {
                                            complete = Some(reply);
                                            break;
                                        }
                                        Ok(reply) if streaming => yield agent.event(ctx.as_ref(), reply),
                                        Ok(_) => {}
                                    }
                                }
                            }
                        }
                        match complete {
                            Some(reply) => reply,
                            None => {
                                let error = failure.unwrap_or_else(|| {
                                    AdkError::Model(format!(
                                        "model {} ended its reply without a complete response",
                                        agent.model.name()
                                    ))
                                });
                                // ADK's on_model_error_callback: a hook's reply stands in for the
                                // model's (the after_model hooks then see it), else the error stands.
                                let answer = match &failed_request {
                                    Some(request) => {
                                        agent.hooks.on_model_error(&hook_ctx, request, &error).await?
                                    }
                                    None => None,
                                };
                                match answer {
                                    Some(reply) => reply,
                                    None => Err(error)?,
                                }
                            }
                        }
                    }
                };
                let response = agent.hooks.after_model(&hook_ctx, response).await?;
                let mut model_event = agent.model_event(ctx.as_ref(), response, &tools)?;
                merge_actions(&mut model_event.actions, hook_sink.take_actions());
                let calls = function_calls(&model_event);
                let pauses = !model_event.long_running_tool_ids.is_empty();
                yield model_event;
                if calls.is_empty() {
                    break;
                }
                (calls, pauses)
            };
            // A fitting set_model_response call is the final reply (a misfit one is
            // answered with the problem, and the model tries again).
            let structured = agent.structured_reply(&calls);

            // Calls of task and single-turn sub-agents run after the others are answered.
            let (delegated, calls): (Vec<Call>, Vec<Call>) =
                calls.into_iter().partition(|call| agent.delegate(&call.name).is_some());
            let mut transfer = None;
            let mut skip_summarization = false;
            let mut finished_task = false;
            if let Some(responses) = agent.execute(&ctx, &tools, calls, resumed.is_some()).await? {
                transfer = responses.actions.transfer_to_agent.clone();
                skip_summarization = responses.actions.skips_summarization();
                finished_task = agent.mode == AgentMode::Task && task::finishes(&responses);
                yield responses;
            }
            if finished_task {
                // finish_task answered the call that started this task: its caller goes on.
                break;
            }
            let mut waiting = false;
            for call in delegated {
                let Some(target) = agent.delegate(&call.name) else { continue };
                let branch = task::branch(ctx.branch(), &call.name, &call.id);
                // The tool hooks see a delegated call as any tool's: before_tool once, when
                // it starts (it may answer in the agent's place or change its arguments),
                // after_tool on its answer.
                let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
                let hook_ctx = HookContext::new(ctx.clone(), tool_ctx.clone());
                let mut answered = None;
                let before = ctx.run_log();
                if task::outcome(&before, &target, &branch).is_none() {
                    if !task::started(&before, &branch) {
                        match agent.hooks.before_tool(&hook_ctx, &call.name, call.args.clone()).await? {
                            BeforeTool::Respond(result) => answered = Some(result),
                            BeforeTool::Continue(args) if args != call.args => {
                                yield task::arguments_event(agent.event(ctx.as_ref(), LlmResponse::default()), &call.id, args);
                            }
                            BeforeTool::Continue(_) => {}
                        }
                    }
                    if answered.is_none() {
                        let mut events = task::dispatch(target.run(ctx.for_agent(target.clone(), &branch))).await?;
                        while let Some(event) = events.next().await {
                            yield event?;
                        }
                    }
                }
                let after = ctx.run_log();
                match answered.or_else(|| task::outcome(&after, &target, &branch)) {
                    Some(response) => {
                        let args = task::arguments(&after, &call.id).unwrap_or_else(|| call.args.clone());
                        let response = as_response(
                            agent.hooks.after_tool(&hook_ctx, &call.name, &args, as_response(response)).await?,
                        );
                        let mut event = agent.event(ctx.as_ref(), LlmResponse::default());
                        event.llm_response.content =
                            Some(Content::new(TOOL_ROLE).with_part(response_part(call, response)));
                        event.actions = tool_ctx.take_actions();
                        yield event;
                    }
                    None => {
                        // A task waiting for the user (or a pause on a client tool): the
                        // call stays open and the next turn comes back through here.
                        waiting = true;
                        break;
                    }
                }
            }
            if waiting {
                ctx.end_invocation();
                break;
            }
            if let Some(value) = structured {
                let reply = LlmResponse {
                    content: Some(Content::new(MODEL_ROLE).with_text(value.to_string())),
                    turn_complete: Some(true),
                    ..Default::default()
                };
                yield agent.model_event(ctx.as_ref(), reply, &tools)?;
                break;
            }
            if let Some(target) = transfer {
                let target = agent.transfer_target(&ctx, &target)?;
                let mut events = target.run(ctx.for_agent(target.clone(), ctx.branch())).await?;
                while let Some(event) = events.next().await {
                    yield event?;
                }
                break;
            }
            if pauses {
                // The client answers the long-running call in a later run; nothing
                // else in this invocation (e.g. a sequential agent's next step) goes on.
                ctx.end_invocation();
                break;
            }
            if skip_summarization {
                break;
            }
        }
    })
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

/// A summary of everything before this invocation, to store before the request; None
/// when there is nothing to summarise or the summariser failed (logged and counted).
async fn compact_for_budget(config: &CompactionConfig, budget: usize, ctx: &dyn InvocationContext) -> Option<Event> {
    let plan = compaction::budget_plan(&ctx.events(), ctx.invocation_id(), budget)?;
    let summary = compaction::summarize(config, plan, ctx.app_name(), ctx.invocation_id(), Trigger::TokenBudget).await;
    summary
        .inspect_err(|e| {
            tracing::warn!(
                invocation_id = ctx.invocation_id(), error = %e,
                "compaction for the token budget failed; the oldest contents are left out instead"
            )
        })
        .ok()
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

/// One function call of a model reply.
#[derive(Clone)]
struct Call {
    id: String,
    name: String,
    args: Value,
}

impl From<adk_grpc_core::FunctionCall<'_>> for Call {
    fn from(call: adk_grpc_core::FunctionCall<'_>) -> Self {
        Call {
            id: call.id.to_string(),
            name: call.name.to_string(),
            args: call.args.clone(),
        }
    }
}

fn function_calls(event: &Event) -> Vec<Call> {
    event.function_calls().map(Call::from).collect()
}

impl Inner {
    /// The agent's tools for this step: its own, its toolsets', and
    /// `transfer_to_agent` when it has sub-agents.
    /// With an `output_schema`, `set_model_response` joins any of them (ADK's way of
    /// combining tools and structured output).
    async fn tools(&self, ctx: &Arc<dyn InvocationContext>) -> Result<Vec<Arc<dyn Tool>>> {
        let mut tools = self.tools.clone();
        for toolset in &self.toolsets {
            let readonly: Arc<dyn ReadonlyContext> = ctx.clone();
            tools.extend(toolset.tools(readonly).await?);
        }
        // Task and single-turn sub-agents are tools (ADK 2's `mode`); a task agent ends
        // with finish_task.
        for delegate in task::delegates(&self.sub_agents) {
            tools.push(Arc::new(crate::tools::AgentTool::delegate(delegate.clone())));
        }
        if self.mode == AgentMode::Task {
            tools.push(Arc::new(task::FinishTaskTool::new(
                self.output_schema.clone(),
                self.output_key.clone(),
            )));
        }
        let targets = self.transfer_targets(ctx);
        if !targets.is_empty() {
            let targets = targets
                .iter()
                .map(|a| (a.name().to_string(), a.description().to_string()))
                .collect();
            tools.push(Arc::new(TransferToAgentTool::new(targets)));
        }
        if let Some(schema) = self.reply_schema()
            && !tools.is_empty()
        {
            tools.push(Arc::new(SetModelResponseTool::new(schema.clone())));
        }
        Ok(tools)
    }

    /// The schema the agent's final reply follows: its `output_schema`, except for a task
    /// agent, whose output goes through `finish_task` (as ADK's basic flow leaves it out).
    fn reply_schema(&self) -> Option<&Arc<super::output_schema::OutputSchema>> {
        self.output_schema.as_ref().filter(|_| self.mode != AgentMode::Task)
    }

    /// The task or single-turn sub-agent called `name`.
    fn delegate(&self, name: &str) -> Option<Arc<dyn Agent>> {
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

    /// The structured value of the step's `set_model_response` call, when it fits.
    fn structured_reply(&self, calls: &[Call]) -> Option<Value> {
        let schema = self.reply_schema()?;
        calls
            .iter()
            .filter(|call| call.name == SET_MODEL_RESPONSE_TOOL_NAME)
            .find_map(|call| schema.value_of_call(&call.args).ok())
    }

    async fn request(&self, ctx: &Arc<dyn InvocationContext>, tools: &[Arc<dyn Tool>]) -> Result<LlmRequest> {
        let (mut system_instruction, trailing_instruction) = self.instructions(ctx).await?;
        let mut config = self.config.clone();
        if let Some(schema) = self.reply_schema() {
            if tools.iter().any(|tool| tool.name() == SET_MODEL_RESPONSE_TOOL_NAME) {
                system_instruction = Some(match system_instruction {
                    Some(text) if !text.is_empty() => format!("{text}\n\n{SET_MODEL_RESPONSE_INSTRUCTION}"),
                    _ => SET_MODEL_RESPONSE_INSTRUCTION.to_string(),
                });
            } else {
                config.response_schema = Some(schema.schema().clone());
            }
        }
        // As ADK's ExampleTool: after the instructions, for a turn the user started.
        if !self.examples.is_empty() && !ctx.user_content().parts.is_empty() {
            let examples = super::examples::render(&self.examples);
            system_instruction = Some(match system_instruction {
                Some(text) if !text.is_empty() => format!("{text}\n\n{examples}"),
                _ => examples,
            });
        }
        let events = ctx.events();
        let mut contents = match self.include_contents {
            IncludeContents::Default => history::conversation(&events, &self.name, ctx.branch()),
            IncludeContents::None => history::current_turn(&events, &self.name, ctx.branch()),
        };
        // A task or single-turn agent's first message: the arguments of its parent's call.
        if let Some(input) = task::input(&ctx.run_log(), &ctx.agent(), ctx.branch()) {
            contents.insert(0, input);
        }
        contents.extend(trailing_instruction);
        let mut request = LlmRequest {
            model: self.model.name().to_string(),
            contents,
            tools: tools
                .iter()
                .filter(|tool| !tool.is_provider_builtin())
                .map(|tool| tool.declaration())
                .collect(),
            system_instruction,
            config,
        };
        for tool in tools {
            let callback_ctx: Arc<dyn CallbackContext> = ctx.clone();
            tool.process_llm_request(callback_ctx, &mut request).await?;
        }
        Ok(request)
    }

    /// An event of this agent on the context's branch.
    fn event(&self, ctx: &dyn InvocationContext, response: LlmResponse) -> Event {
        let mut event = Event::new(ctx.invocation_id()).with_author(&self.name);
        event.branch = ctx.branch().to_string();
        event.llm_response = response;
        event
    }

    /// The event of a complete model reply: every function call gets an id
    /// (`adk-<uuid>` when the model gave none), long-running calls are listed,
    /// and a final text reply goes to `output_key`: with an `output_schema`, as the
    /// JSON value, and a reply that is not JSON fitting the schema fails the run, as
    /// ADK's does (the reply is not stored).
    fn model_event(
        &self,
        ctx: &dyn InvocationContext,
        mut response: LlmResponse,
        tools: &[Arc<dyn Tool>],
    ) -> Result<Event> {
        let mut long_running = Vec::new();
        let mut has_calls = false;
        if let Some(content) = &mut response.content {
            if content.role.is_empty() {
                content.role = MODEL_ROLE.to_string();
            }
            for part in &mut content.parts {
                if let PartKind::FunctionCall { name, id, .. } = &mut part.kind {
                    has_calls = true;
                    let id = id.get_or_insert_with(String::new);
                    if id.is_empty() {
                        *id = format!("adk-{}", uuid::Uuid::new_v4());
                    }
                    if tools.iter().any(|tool| tool.name() == name && tool.is_long_running()) {
                        long_running.push(id.clone());
                    }
                }
            }
        }
        let mut event = self.event(ctx, response);
        event.long_running_tool_ids = long_running;
        let text = event.content().and_then(Content::text).filter(|_| !has_calls);
        let output = match (self.reply_schema(), text) {
            // An empty reply (e.g. a filtered one) has nothing to parse; ADK skips it too.
            (Some(schema), Some(text)) if !text.trim().is_empty() => {
                Some(schema.parse_reply(&text).map_err(|problem| {
                    AdkError::Model(format!(
                        "agent {}: the model's reply is not the structured output its output_schema asks for: \
                     {problem}; the reply was: {}",
                        self.name,
                        truncate(&text, 200)
                    ))
                })?)
            }
            (Some(_), _) | (None, None) => None,
            // A task agent's output is its finish_task call's; its replies talk with the user.
            (None, Some(_)) if self.mode == AgentMode::Task => None,
            (None, Some(text)) => Some(Value::String(text)),
        };
        if let Some(key) = &self.output_key
            && let Some(value) = output
        {
            event.actions.state_delta.insert(key.clone(), value);
        }
        Ok(event)
    }

    /// Runs the calls concurrently and gathers their responses (and the actions
    /// their tools recorded) into one event; None when nothing is to be said yet
    /// (only long-running calls without an interim result). Fails only when a hook
    /// that fails closed failed.
    async fn execute(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        tools: &[Arc<dyn Tool>],
        calls: Vec<Call>,
        resumed: bool,
    ) -> Result<Option<Event>> {
        let results = join_all(
            calls
                .into_iter()
                .map(|call| call_tool(ctx, tools, &self.hooks, self.state_schema.as_deref(), call, resumed)),
        )
        .await;
        let mut parts = Vec::new();
        let mut actions = EventActions::default();
        for result in results {
            let (call_parts, call_actions) = result?;
            parts.extend(call_parts);
            merge_actions(&mut actions, call_actions);
        }
        if parts.is_empty() && actions == EventActions::default() {
            return Ok(None);
        }
        let mut event = self.event(ctx.as_ref(), LlmResponse::default());
        if !parts.is_empty() {
            event.llm_response.content = Some(Content {
                role: TOOL_ROLE.to_string(),
                parts,
            });
        }
        event.actions = actions;
        Ok(Some(event))
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

    fn transfer_target(&self, ctx: &Arc<dyn InvocationContext>, name: &str) -> Result<Arc<dyn Agent>> {
        self.transfer_targets(ctx)
            .into_iter()
            .find(|agent| agent.name() == name)
            .ok_or_else(|| AdkError::Agent(format!("agent {} may not transfer to {name}", self.name)))
    }

    /// The system instruction (ADK's order: the root's global instruction, the static
    /// instruction, then the instruction, which follows the contents instead when
    /// there is a static one) and that trailing content.
    async fn instructions(&self, ctx: &Arc<dyn InvocationContext>) -> Result<(Option<String>, Option<Content>)> {
        let mut system = Vec::new();
        let root = ctx.root_agent();
        if let Some(template) = root.spec().global_instruction {
            system.push(instruction::render(template, &self.name, ctx.as_ref()).await?);
        }
        if let Some(text) = &self.static_instruction {
            system.push(text.clone());
        }
        let mut trailing = None;
        if let Some(template) = &self.instruction {
            let text = instruction::render(template, &self.name, ctx.as_ref()).await?;
            match self.static_instruction {
                Some(_) => trailing = Some(Content::new("user").with_text(text)),
                None => system.push(text),
            }
        }
        Ok(((!system.is_empty()).then(|| system.join("\n\n")), trailing))
    }
}

/// Executes one call ([`run_call`]) and holds its state writes to the agent's
/// `state_schema`: writes that do not fit are not made, and the call is answered
/// with the misfit as an error, for the model to read and do otherwise.
async fn call_tool(
    ctx: &Arc<dyn InvocationContext>,
    tools: &[Arc<dyn Tool>],
    hooks: &Hooks,
    schema: Option<&StateSchema>,
    call: Call,
    resumed: bool,
) -> Result<(Vec<Part>, EventActions)> {
    let (id, name) = (call.id.clone(), call.name.clone());
    let (parts, mut actions) = run_call(ctx, tools, hooks, call, resumed).await?;
    let Some(Err(problem)) = schema.map(|schema| schema.check(&actions.state_delta)) else {
        return Ok((parts, actions));
    };
    tracing::info!(tool = %name, %problem, "a tool's state write does not fit the agent's state_schema; the model gets the error");
    actions.state_delta.clear();
    let error = AdkError::invalid("state_delta", format!("of tool {name} was not written: {problem}"));
    let call = Call {
        id,
        name,
        args: Value::Null,
    };
    Ok((
        vec![response_part(call, json!({ "error": error.to_string() }))],
        actions,
    ))
}

/// Executes one call, inside its hooks: its function response, then any media the
/// tool produced. Failures (unknown tool, tool error) become an `error` response
/// for the model to read, not a failed run; only a hook that fails closed fails it.
/// A call a dead runner left unanswered (`resumed`) runs again only when its tool is
/// safe to repeat; any other is answered with an error saying it was interrupted.
async fn run_call(
    ctx: &Arc<dyn InvocationContext>,
    tools: &[Arc<dyn Tool>],
    hooks: &Hooks,
    call: Call,
    resumed: bool,
) -> Result<(Vec<Part>, EventActions)> {
    if resumed
        && tools
            .iter()
            .any(|tool| tool.name() == call.name && !tool.safe_to_repeat())
    {
        let error = format!(
            "interrupted: the runner running this call stopped before it answered, and tool `{}` is not \
             declared safe to repeat, so it was not run again; it may or may not have taken effect",
            call.name
        );
        return Ok((
            vec![response_part(call, json!({ "error": error }))],
            EventActions::default(),
        ));
    }
    let Some(tool) = tools.iter().find(|tool| tool.name() == call.name) else {
        ToolCall::unknown(&call.name, &call.id);
        let available: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
        let error = format!(
            "tool `{}` is not available; available tools: {}",
            call.name,
            available.join(", ")
        );
        // As ADK, the on_tool_error hooks may answer a call of no tool (after_tool is
        // not called: no tool ran).
        let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
        let hook_ctx = HookContext::new(ctx.clone(), tool_ctx.clone());
        let answer = hooks
            .on_tool_error(&hook_ctx, &call.name, &call.args, &AdkError::Tool(error.clone()))
            .await?;
        let response = answer.map_or_else(|| json!({ "error": error }), as_response);
        return Ok((vec![response_part(call, response)], tool_ctx.take_actions()));
    };
    let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
    let hook_ctx = HookContext::new(ctx.clone(), tool_ctx.clone());
    let (args, answered) = match hooks.before_tool(&hook_ctx, &call.name, call.args.clone()).await? {
        BeforeTool::Continue(args) => (args, None),
        BeforeTool::Respond(result) => (call.args.clone(), Some(result)),
    };
    let (response, media) = match answered {
        // A hook answered in the tool's place: the tool is not called.
        Some(result) => (as_response(result), Vec::new()),
        None => {
            // One span and metric sample per call; the tool runs inside the span, so an
            // HTTP tool's request carries the trace context.
            let observed = ToolCall::start(&call.name, &call.id, true);
            let result = tool
                .execute_with_parts(tool_ctx.clone(), args.clone())
                .instrument(observed.span().clone())
                .await
                .and_then(|output| crate::tools::within_reply_limit(&call.name, output));
            observed.finish(result.as_ref().err().map(AdkError::code));
            match result {
                Ok(output) if output.response.is_null() && output.parts.is_empty() && tool.is_long_running() => {
                    return Ok((Vec::new(), tool_ctx.take_actions()));
                }
                Ok(ToolOutput { response, parts }) => (as_response(response), parts),
                Err(e) => match hooks.on_tool_error(&hook_ctx, &call.name, &args, &e).await? {
                    // ADK's on_tool_error_callback: the hook's result is the tool's.
                    Some(result) => (as_response(result), Vec::new()),
                    None => {
                        tracing::info!(tool = %call.name, error = %e, "tool call failed; the model gets the error");
                        (json!({ "error": e.to_string() }), Vec::new())
                    }
                },
            }
        }
    };
    let response = as_response(hooks.after_tool(&hook_ctx, &call.name, &args, response).await?);
    let actions = tool_ctx.take_actions();
    let mut parts = vec![response_part(call, response)];
    parts.extend(media);
    Ok((parts, actions))
}

/// A function response is an object (google-genai's rule): anything else goes under `result`.
fn as_response(value: Value) -> Value {
    match value {
        object @ Value::Object(_) => object,
        other => json!({ "result": other }),
    }
}

/// [`call_model`], made again after a backoff while it fails transiently before its
/// reply begins and the agent's `retry_config` allows (each attempt observed as a call).
async fn call_model_retrying(
    model: &Arc<dyn Llm>,
    request: LlmRequest,
    streaming: bool,
    retry: Option<&super::RetryConfig>,
) -> Result<LlmResponseStream> {
    let Some(retry) = retry else {
        return call_model(model, request, streaming).await;
    };
    let mut delays = retry.delays();
    loop {
        match begun(call_model(model, request.clone(), streaming).await).await {
            Err(e) if super::retry::is_transient(&e) => match delays.next() {
                Some(delay) => {
                    tracing::warn!(model = model.name(), error = %e, ?delay, "model call failed; retrying (retry_config)");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(e),
            },
            other => return other,
        }
    }
}

/// The reply with its first item read: a failure before the reply begins is an `Err`.
async fn begun(replies: Result<LlmResponseStream>) -> Result<LlmResponseStream> {
    let mut replies = replies?;
    match replies.next().await {
        Some(Err(e)) => Err(e),
        Some(Ok(first)) => Ok(Box::pin(futures::stream::once(async { Ok(first) }).chain(replies))),
        None => Ok(replies),
    }
}

/// Calls the model inside a [`ModelCall`] span: the request is sent and every
/// reply chunk read inside it (so the provider request carries the trace context),
/// and the call is recorded once, when the complete reply or an error arrives. A
/// reply stream dropped before that (the invocation stopped) counts as CANCELLED.
async fn call_model(model: &Arc<dyn Llm>, request: LlmRequest, streaming: bool) -> Result<LlmResponseStream> {
    let call = ModelCall::start(model.provider(), model.name(), streaming);
    let replies = match model
        .generate_content(request, streaming)
        .instrument(call.span().clone())
        .await
    {
        Ok(replies) => replies,
        Err(e) => {
            call.finish(Err(e.code()));
            return Err(e);
        }
    };
    let observed = futures::stream::unfold((replies, Some(call)), |(mut replies, mut call)| async move {
        let item = match &call {
            Some(open) => replies.next().instrument(open.span().clone()).await,
            None => replies.next().await,
        };
        let Some(item) = item else {
            // The provider's stream ended without a complete reply; the flow reports it.
            if let Some(open) = call.take() {
                open.finish(Err(AdkError::Model(String::new()).code()));
            }
            return None;
        };
        match &item {
            Err(e) => {
                if let Some(open) = call.take() {
                    open.finish(Err(e.code()));
                }
            }
            Ok(reply) if reply.partial != Some(true) => {
                if let Some(open) = call.take() {
                    open.finish(Ok(reply.usage_metadata.as_ref().map(|usage| TokenUsage {
                        prompt: i64::from(usage.prompt_token_count.unwrap_or(0)),
                        completion: i64::from(usage.candidates_token_count.unwrap_or(0)),
                    })));
                }
            }
            Ok(_) => {}
        }
        Some((item, (replies, call)))
    });
    Ok(Box::pin(observed))
}

/// At most `max` characters of `text`, marked when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn response_part(call: Call, response: Value) -> Part {
    Part::function_response(
        FunctionResponseData {
            name: call.name,
            response,
        },
        Some(call.id),
    )
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
}
