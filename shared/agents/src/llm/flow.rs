//! The LLM agent's turn: request → model → function calls → tool responses → model again.
//!
//! The turn is a lazy stream: after it yields an event it is not polled again
//! until the runner has stored that event, so the next request is built from a
//! history (and state) that includes it. Dropping the stream drops the model
//! request in flight.

use super::callbacks::BeforeModel;
use super::{IncludeContents, Inner, history, instruction};
use crate::compaction::{self, Trigger};
use crate::context::ToolCallContext;
use crate::tools::TransferToAgentTool;
use adk_grpc_core::{
    AdkError, Agent, CallbackContext, CompactionConfig, Content, Event, EventActions, EventStream,
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
        while !ctx.ended() {
            let tools = agent.tools(&ctx).await?;
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
            let response = match agent.before_model(&ctx, request).await? {
                BeforeModel::Respond(response) => response,
                BeforeModel::Continue(request) => {
                    ctx.increment_llm_call_count()?;
                    let streaming = ctx.run_config().streaming_mode == StreamingMode::Sse;
                    let mut replies = call_model(&agent.model, request, streaming).await?;
                    let mut complete = None;
                    while let Some(reply) = replies.next().await {
                        let reply = reply?;
                        if reply.partial != Some(true) {
                            complete = Some(reply);
                            break;
                        }
                        if streaming {
                            yield agent.event(ctx.as_ref(), reply);
                        }
                    }
                    complete.ok_or_else(|| {
                        AdkError::Model(format!(
                            "model {} ended its reply without a complete response",
                            agent.model.name()
                        ))
                    })?
                }
            };
            let response = agent.after_model(&ctx, response).await?;
            let model_event = agent.model_event(ctx.as_ref(), response, &tools);
            let calls = function_calls(&model_event);
            let pauses = !model_event.long_running_tool_ids.is_empty();
            yield model_event;
            if calls.is_empty() {
                break;
            }

            let mut transfer = None;
            let mut skip_summarization = false;
            if let Some(responses) = agent.execute(&ctx, &tools, calls).await {
                transfer = responses.actions.transfer_to_agent.clone();
                skip_summarization = responses.actions.skips_summarization();
                yield responses;
            }
            if let Some(target) = transfer {
                let target = agent.sub_agent(&target)?;
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

/// One function call of a model reply.
struct Call {
    id: String,
    name: String,
    args: Value,
}

fn function_calls(event: &Event) -> Vec<Call> {
    let parts = event.content().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|part| match &part.kind {
            PartKind::FunctionCall { name, args, id } => Some(Call {
                id: id.clone().unwrap_or_default(),
                name: name.clone(),
                args: args.clone(),
            }),
            _ => None,
        })
        .collect()
}

impl Inner {
    /// The agent's tools for this step: its own, its toolsets', and
    /// `transfer_to_agent` when it has sub-agents.
    async fn tools(&self, ctx: &Arc<dyn InvocationContext>) -> Result<Vec<Arc<dyn Tool>>> {
        let mut tools = self.tools.clone();
        for toolset in &self.toolsets {
            let readonly: Arc<dyn ReadonlyContext> = ctx.clone();
            tools.extend(toolset.tools(readonly).await?);
        }
        if !self.sub_agents.is_empty() {
            let targets = self
                .sub_agents
                .iter()
                .map(|a| (a.name().to_string(), a.description().to_string()))
                .collect();
            tools.push(Arc::new(TransferToAgentTool::new(targets)));
        }
        Ok(tools)
    }

    async fn request(&self, ctx: &Arc<dyn InvocationContext>, tools: &[Arc<dyn Tool>]) -> Result<LlmRequest> {
        let system_instruction = match &self.instruction {
            Some(template) => Some(instruction::render(template, &self.name, ctx.as_ref()).await?),
            None => None,
        };
        let mut request = LlmRequest {
            model: self.model.name().to_string(),
            contents: match self.include_contents {
                IncludeContents::Default => history::conversation(&ctx.events(), &self.name, ctx.branch()),
                IncludeContents::None => history::current_turn(&ctx.events(), &self.name, ctx.branch()),
            },
            tools: tools.iter().map(|tool| tool.declaration()).collect(),
            system_instruction,
            config: self.config.clone(),
        };
        for tool in tools {
            let callback_ctx: Arc<dyn CallbackContext> = ctx.clone();
            tool.process_llm_request(callback_ctx, &mut request).await?;
        }
        Ok(request)
    }

    async fn before_model(&self, ctx: &Arc<dyn InvocationContext>, mut request: LlmRequest) -> Result<BeforeModel> {
        for callback in &self.before_model {
            match callback(ctx.clone(), request).await? {
                BeforeModel::Continue(changed) => request = changed,
                respond => return Ok(respond),
            }
        }
        Ok(BeforeModel::Continue(request))
    }

    async fn after_model(&self, ctx: &Arc<dyn InvocationContext>, mut response: LlmResponse) -> Result<LlmResponse> {
        for callback in &self.after_model {
            response = callback(ctx.clone(), response).await?;
        }
        Ok(response)
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
    /// and a final text reply goes to `output_key`.
    fn model_event(&self, ctx: &dyn InvocationContext, mut response: LlmResponse, tools: &[Arc<dyn Tool>]) -> Event {
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
        if let Some(key) = &self.output_key
            && !has_calls
            && let Some(text) = event.content().and_then(Content::text)
        {
            event.actions.state_delta.insert(key.clone(), Value::String(text));
        }
        event
    }

    /// Runs the calls concurrently and gathers their responses (and the actions
    /// their tools recorded) into one event; None when nothing is to be said yet
    /// (only long-running calls without an interim result).
    async fn execute(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        tools: &[Arc<dyn Tool>],
        calls: Vec<Call>,
    ) -> Option<Event> {
        let results = join_all(calls.into_iter().map(|call| call_tool(ctx, tools, call))).await;
        let mut parts = Vec::new();
        let mut actions = EventActions::default();
        for (call_parts, call_actions) in results {
            parts.extend(call_parts);
            merge_actions(&mut actions, call_actions);
        }
        if parts.is_empty() && actions == EventActions::default() {
            return None;
        }
        let mut event = self.event(ctx.as_ref(), LlmResponse::default());
        if !parts.is_empty() {
            event.llm_response.content = Some(Content {
                role: TOOL_ROLE.to_string(),
                parts,
            });
        }
        event.actions = actions;
        Some(event)
    }

    fn sub_agent(&self, name: &str) -> Result<Arc<dyn Agent>> {
        self.sub_agents
            .iter()
            .find(|agent| agent.name() == name)
            .cloned()
            .ok_or_else(|| AdkError::Agent(format!("agent {} has no sub-agent {name} to transfer to", self.name)))
    }
}

/// Executes one call: its function response, then any media the tool produced.
/// Failures (unknown tool, tool error) become an `error` response for the model
/// to read, not a failed run.
async fn call_tool(ctx: &Arc<dyn InvocationContext>, tools: &[Arc<dyn Tool>], call: Call) -> (Vec<Part>, EventActions) {
    let Some(tool) = tools.iter().find(|tool| tool.name() == call.name) else {
        ToolCall::unknown(&call.name, &call.id);
        let available: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
        let error = format!(
            "tool `{}` is not available; available tools: {}",
            call.name,
            available.join(", ")
        );
        return (
            vec![response_part(call, json!({ "error": error }))],
            EventActions::default(),
        );
    };
    let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
    // One span and metric sample per call; the tool runs inside the span, so an
    // HTTP tool's request carries the trace context.
    let observed = ToolCall::start(&call.name, &call.id, true);
    let result = tool
        .execute_with_parts(tool_ctx.clone(), call.args.clone())
        .instrument(observed.span().clone())
        .await;
    observed.finish(result.as_ref().err().map(AdkError::code));
    let actions = tool_ctx.take_actions();
    let (response, media) = match result {
        Ok(output) if output.response.is_null() && output.parts.is_empty() && tool.is_long_running() => {
            return (Vec::new(), actions);
        }
        Ok(ToolOutput {
            response: object @ Value::Object(_),
            parts,
        }) => (object, parts),
        Ok(ToolOutput { response, parts }) => (json!({ "result": response }), parts),
        Err(e) => {
            tracing::info!(tool = %call.name, error = %e, "tool call failed; the model gets the error");
            (json!({ "error": e.to_string() }), Vec::new())
        }
    };
    let mut parts = vec![response_part(call, response)];
    parts.extend(media);
    (parts, actions)
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
