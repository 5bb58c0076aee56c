//! A step's function calls, run concurrently, each inside the tool hooks (before_tool →
//! the tool → on_tool_error → after_tool); their answers make one event.

use super::super::Inner;
use super::merge_actions;
use crate::context::ToolCallContext;
use crate::hooks::{BeforeTool, HookContext, Hooks};
use crate::state_schema::StateSchema;
use adk_grpc_core::{
    AdkError, Content, Event, EventActions, FunctionResponseData, InvocationContext, LlmResponse, Part, Result, Tool,
    ToolOutput,
};
use adk_grpc_telemetry::ToolCall;
use futures::future::join_all;
use serde_json::{Value, json};
use std::sync::Arc;
use tracing::Instrument;

/// The role of the content that carries tool results: "user", as ADK stores them
/// (google.genai has no tool role). Sessions stored before this carry "tool"; every
/// provider conversion reads a function response by its part, whatever the role.
pub(crate) const FUNCTION_RESPONSE_ROLE: &str = "user";

/// One function call of a model reply.
#[derive(Clone)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) args: Value,
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

/// The function calls of `event`.
pub(super) fn function_calls(event: &Event) -> Vec<Call> {
    event.function_calls().map(Call::from).collect()
}

/// Runs the calls concurrently and gathers their responses (and the actions
/// their tools recorded) into one event; None when nothing is to be said yet
/// (only long-running calls without an interim result). Fails only when a hook
/// that fails closed failed.
pub(super) async fn run(
    agent: &Inner,
    ctx: &Arc<dyn InvocationContext>,
    tools: &[Arc<dyn Tool>],
    calls: Vec<Call>,
    resumed: bool,
) -> Result<Option<Event>> {
    let schema = agent.state_schema.as_deref();
    let results = join_all(
        calls
            .into_iter()
            .map(|call| call_tool(ctx, tools, &agent.hooks, schema, call, resumed)),
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
    let mut event = agent.event(ctx.as_ref(), LlmResponse::default());
    if !parts.is_empty() {
        event.llm_response.content = Some(Content {
            role: FUNCTION_RESPONSE_ROLE.to_string(),
            parts,
        });
    }
    event.actions = actions;
    Ok(Some(event))
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
    let tool_ctx = Arc::new(ToolCallContext::new(ctx.clone(), call.id.clone()));
    let hook_ctx = HookContext::new(ctx.clone(), tool_ctx.clone());
    let Some(tool) = tools.iter().find(|tool| tool.name() == call.name) else {
        let response = unknown_tool(tools, hooks, &hook_ctx, &call).await?;
        return Ok((vec![response_part(call, response)], tool_ctx.take_actions()));
    };
    let (args, answered) = match hooks.before_tool(&hook_ctx, &call.name, call.args.clone()).await? {
        BeforeTool::Continue(args) => (args, None),
        BeforeTool::Respond(result) => (call.args.clone(), Some(result)),
    };
    let (response, media) = match answered {
        // A hook answered in the tool's place: the tool is not called.
        Some(result) => (as_response(result), Vec::new()),
        None => match execute(tool, &tool_ctx, hooks, &hook_ctx, &call, &args).await? {
            Some(answer) => answer,
            None => return Ok((Vec::new(), tool_ctx.take_actions())),
        },
    };
    let response = as_response(hooks.after_tool(&hook_ctx, &call.name, &args, response).await?);
    let actions = tool_ctx.take_actions();
    let mut parts = vec![response_part(call, response)];
    parts.extend(media);
    Ok((parts, actions))
}

/// The answer to a call of no tool: an error naming the tools there are, unless an
/// on_tool_error hook answers it (as in ADK; after_tool is not called: no tool ran).
async fn unknown_tool(tools: &[Arc<dyn Tool>], hooks: &Hooks, hook_ctx: &HookContext, call: &Call) -> Result<Value> {
    ToolCall::unknown(&call.name, &call.id);
    let available: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    let error = format!(
        "tool `{}` is not available; available tools: {}",
        call.name,
        available.join(", ")
    );
    let answer = hooks
        .on_tool_error(hook_ctx, &call.name, &call.args, &AdkError::Tool(error.clone()))
        .await?;
    Ok(answer.map_or_else(|| json!({ "error": error }), as_response))
}

/// Runs the tool with `args`: its response and media, a failure as the on_tool_error
/// hooks' answer or else an `error` response; None for a long-running tool with
/// nothing to say yet.
async fn execute(
    tool: &Arc<dyn Tool>,
    tool_ctx: &Arc<ToolCallContext>,
    hooks: &Hooks,
    hook_ctx: &HookContext,
    call: &Call,
    args: &Value,
) -> Result<Option<(Value, Vec<Part>)>> {
    // One span and metric sample per call; the tool runs inside the span, so an
    // HTTP tool's request carries the trace context.
    let observed = ToolCall::start(&call.name, &call.id, true);
    let result = tool
        .execute_with_parts(tool_ctx.clone(), args.clone())
        .instrument(observed.span().clone())
        .await
        .and_then(|output| crate::tools::within_reply_limit(&call.name, output));
    observed.finish(result.as_ref().err().map(AdkError::code));
    Ok(Some(match result {
        Ok(output) if output.response.is_null() && output.parts.is_empty() && tool.is_long_running() => {
            return Ok(None);
        }
        Ok(ToolOutput { response, parts }) => (as_response(response), parts),
        Err(e) => match hooks.on_tool_error(hook_ctx, &call.name, args, &e).await? {
            // ADK's on_tool_error_callback: the hook's result is the tool's.
            Some(result) => (as_response(result), Vec::new()),
            None => {
                tracing::info!(tool = %call.name, error = %e, "tool call failed; the model gets the error");
                (json!({ "error": e.to_string() }), Vec::new())
            }
        },
    }))
}

/// A function response is an object (google-genai's rule): anything else goes under `result`.
pub(crate) fn as_response(value: Value) -> Value {
    match value {
        object @ Value::Object(_) => object,
        other => json!({ "result": other }),
    }
}

/// The function response part answering `call`.
pub(crate) fn response_part(call: Call, response: Value) -> Part {
    Part::function_response(
        FunctionResponseData {
            name: call.name,
            response,
        },
        Some(call.id),
    )
}
