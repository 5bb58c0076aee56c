//! A step's model call: before_model hooks → the call (made again on transient failures)
//! → on_model_error hooks → after_model hooks → the model's event.

use super::super::output_schema::OutputSchema;
use super::super::{Inner, RetryConfig, retry};
use super::merge_actions;
use crate::context::ToolCallContext;
use crate::hooks::{BeforeModel, HookContext, HookPoint};
use adk_grpc_core::{
    AdkError, AgentMode, BuiltinTool, Content, Event, EventActions, FinishReason, InvocationContext, Llm, LlmRequest,
    LlmResponse, LlmResponseStream, Part, PartKind, Result, StreamingMode, Tool,
};
use adk_grpc_telemetry::ModelCall;
use adk_grpc_telemetry::metrics::TokenUsage;
use async_stream::try_stream;
use backon::Retryable;
use futures::{Stream, StreamExt};
use serde_json::Value;
use std::sync::Arc;
use tracing::Instrument;

pub(super) const MODEL_ROLE: &str = "model";

/// Calls the model with `request` inside the agent's model hooks. Yields the partial
/// replies (when streaming) and then the model's event; when a before_model hook ended
/// the invocation, the model is not called and only the hooks' actions are yielded (if any).
pub(super) fn run<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    tools: &'a [Arc<dyn Tool>],
    request: LlmRequest,
) -> impl Stream<Item = Result<Event>> + Send + 'a {
    try_stream! {
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
                return;
            }
            BeforeModel::Continue(request) => {
                // Replaced by the complete reply, which the call ends with (or it fails).
                let mut complete = LlmResponse::default();
                for await reply in call(agent, ctx, &hook_ctx, request) {
                    match reply? {
                        partial if partial.partial == Some(true) => yield agent.event(ctx.as_ref(), partial),
                        reply => complete = reply,
                    }
                }
                complete
            }
        };
        let mut response = agent.hooks.after_model(&hook_ctx, response).await?;
        mark_a_reply_with_no_content(&mut response, ctx.run_config().streaming_mode);
        if let Some(event) = code_execution_event(agent, ctx, tools, &mut response).await? {
            yield event;
        }
        let mut model_event = agent.model_event(ctx.as_ref(), response, tools).await?;
        merge_actions(&mut model_event.actions, hook_sink.take_actions());
        yield model_event;
    }
}

/// ADK's built-in code executor's step after a reply with content (its response
/// processor, run after the after_model hooks): each image the reply generated is saved
/// as an artifact (named by its display name, else the time and its type) and its part
/// becomes the text `Saved as artifact: <name>. `, and an event of the agent's, without
/// content, names the saved images in its `artifact_delta`; stored before the reply, as
/// ADK stores it. None when the agent has no code execution.
async fn code_execution_event(
    agent: &Inner,
    ctx: &Arc<dyn InvocationContext>,
    tools: &[Arc<dyn Tool>],
    response: &mut LlmResponse,
) -> Result<Option<Event>> {
    let executes_code = tools
        .iter()
        .any(|tool| tool.is_provider_builtin() && tool.name() == BuiltinTool::CodeExecution.name());
    let Some(content) = response.content.as_mut().filter(|_| executes_code) else {
        return Ok(None);
    };
    let mut actions = EventActions::default();
    for part in &mut content.parts {
        let PartKind::InlineData { mime_type, .. } = &part.kind else {
            continue;
        };
        if !mime_type.starts_with("image/") {
            continue;
        }
        let Some(artifacts) = ctx.artifacts() else {
            return Err(AdkError::Config(
                "an image the model generated with code execution needs an artifact service".into(),
            ));
        };
        let name = match &part.display_name {
            Some(name) => name.clone(),
            None => {
                let extension = mime_type.rsplit('/').next().unwrap_or("image");
                format!("{}.{extension}", chrono::Local::now().format("%Y%m%d_%H%M%S"))
            }
        };
        // The image leaves the reply for the artifact: taken, not copied.
        let text = Part::text_part(format!("Saved as artifact: {name}. "));
        let image = Part::from(std::mem::replace(part, text).kind);
        let version = artifacts.save(&name, &image).await?;
        actions.artifact_delta.insert(name, version);
    }
    let mut event = agent.event(ctx.as_ref(), LlmResponse::default());
    event.actions = actions;
    Ok(Some(event))
}

/// The model called for one complete reply, which it yields last, after the partial
/// replies when streaming. A failure goes to the on_model_error hooks (ADK's
/// on_model_error_callback): a hook's reply stands in for the model's (the after_model
/// hooks then see it), else the error stands.
fn call<'a>(
    agent: &'a Inner,
    ctx: &'a Arc<dyn InvocationContext>,
    hook_ctx: &'a HookContext,
    request: LlmRequest,
) -> impl Stream<Item = Result<LlmResponse>> + Send + 'a {
    try_stream! {
        ctx.increment_llm_call_count()?;
        let mut request = request;
        end_on_a_user_turn(&mut request);
        // An after_model hook must see a reply whole before any of it is
        // streamed (a redaction cannot work on fragments): no partials.
        let streaming = ctx.run_config().streaming_mode == StreamingMode::Sse && !agent.hooks.has(HookPoint::AfterModel);
        // Kept for the on_model_error hooks, which are sent the request.
        let failed_request = agent.hooks.has(HookPoint::OnModelError).then(|| request.clone());
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
                            yield reply;
                            return;
                        }
                        Ok(reply) if streaming => yield reply,
                        Ok(_) => {}
                    }
                }
            }
        }
        let error = failure.unwrap_or_else(|| {
            AdkError::Model(format!("model {} ended its reply without a complete response", agent.model.name()))
        });
        let answer = match &failed_request {
            Some(request) => agent.hooks.on_model_error(hook_ctx, request, &error).await?,
            None => None,
        };
        match answer {
            Some(reply) => yield reply,
            None => Err(error)?,
        }
    }
}

/// The error code of a finished reply with nothing in it to act on (ADK's).
pub(crate) const NO_CONTENT_ERROR_CODE: &str = "MODEL_RETURNED_NO_CONTENT";
/// ADK's message for such a reply without parts.
const NO_CONTENT_ERROR_MESSAGE: &str = "The model returned no content (finish_reason=STOP with empty parts).";
/// ADK's message for such a reply of thoughts or blank texts only.
const NO_MEANINGFUL_CONTENT_ERROR_MESSAGE: &str =
    "The model returned no actionable content (finish_reason=STOP with thought-only or whitespace-only parts).";

/// ADK's empty-response policy (`apply_empty_response_policy`), applied to the reply
/// the after_model hooks leave: a complete reply that finished with STOP but holds
/// nothing to act on (no parts, thoughts only, blank texts) is marked
/// `MODEL_RETURNED_NO_CONTENT` with ADK's message, so it reads as the error it is rather
/// than as an answer. It is stored so and ends the run as any final reply. When
/// streaming, a reply without parts is the stream's closing chunk and is left as it is.
fn mark_a_reply_with_no_content(reply: &mut LlmResponse, streaming_mode: StreamingMode) {
    let parts = reply.content.as_ref().map_or(&[][..], |content| &content.parts[..]);
    let has_parts = !parts.is_empty();
    let no_content = reply.partial != Some(true)
        && reply.error_code.is_none()
        && reply.finish_reason == Some(FinishReason::Stop)
        && !parts.iter().any(is_actionable)
        && (streaming_mode != StreamingMode::Sse || has_parts);
    if no_content {
        reply.error_code = Some(NO_CONTENT_ERROR_CODE.to_string());
        let message = if has_parts {
            NO_MEANINGFUL_CONTENT_ERROR_MESSAGE
        } else {
            NO_CONTENT_ERROR_MESSAGE
        };
        reply.error_message.get_or_insert_with(|| message.to_string());
    }
}

/// A part a reply can be acted on for (ADK's `has_meaningful_content`): anything but a
/// thought or a blank text.
fn is_actionable(part: &Part) -> bool {
    match &part.kind {
        PartKind::Text { text } => !part.is_thought() && !text.trim().is_empty(),
        _ => true,
    }
}

/// ADK's hint for a request with no contents.
const FOLLOW_THE_INSTRUCTION: &str = "Handle the requests as specified in the System Instruction.";
/// ADK's hint for a request ending on the model's turn.
const CONTINUE: &str =
    "Continue processing previous requests as instructed. Exit or provide a summary if no more outputs are needed.";

/// Ends the request on a user turn, as ADK's model clients do after the before_model
/// callbacks (`BaseLlm._maybe_append_user_content`): a model asked with no contents, or
/// with its own turn last (a loop's agent after its own reply, one with
/// `include_contents: none` after another agent's), answers nothing or refuses, so ADK
/// adds a user turn saying to go on. Function responses are user turns (stored with role
/// "user"; older sessions' "tool" is read alike).
fn end_on_a_user_turn(request: &mut LlmRequest) {
    let hint = match request.contents.last() {
        None => FOLLOW_THE_INSTRUCTION,
        Some(last) if last.role != "user" && last.role != "tool" => CONTINUE,
        Some(_) => return,
    };
    request.contents.push(Content::new("user").with_text(hint));
}

/// [`call_model`], made again after a backoff while it fails transiently before its
/// reply begins and the agent's `retry_config` allows (each attempt observed as a call).
async fn call_model_retrying(
    model: &Arc<dyn Llm>,
    request: LlmRequest,
    streaming: bool,
    retry: Option<&RetryConfig>,
) -> Result<LlmResponseStream> {
    let Some(retry) = retry else {
        return call_model(model, request, streaming).await;
    };
    // A transient failure before the reply begins is made again after backon's delay
    // (its tokio sleeper).
    (|| async { begun(call_model(model, request.clone(), streaming).await).await })
        .retry(retry.backoff())
        .when(retry::is_transient)
        .notify(|e, delay| {
            tracing::warn!(model = model.name(), error = %e, ?delay, "model call failed; retrying (retry_config)")
        })
        .await
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

impl Inner {
    /// The event of a complete model reply: every function call gets an id
    /// (`adk-<uuid>` when the model gave none), long-running calls are listed,
    /// and a final text reply goes to `output_key`: with an `output_schema`, as the
    /// JSON value, and a reply that is not JSON fitting the schema fails the run, as
    /// ADK's does (the reply is not stored).
    /// A final reply's text as the structured value its `output_schema` asks for; a reply
    /// that is not fails the run, as ADK's validation of the node's output raises.
    pub(super) async fn reply_as_schema_value(&self, schema: &OutputSchema, text: &str) -> Result<Value> {
        schema.parse_reply(text).await.map_err(|problem| {
            AdkError::Model(format!(
                "agent {}: the model's reply is not the structured output its output_schema asks for: \
                 {problem}; the reply was: {}",
                self.name,
                truncate(text, 200)
            ))
        })
    }

    pub(super) async fn model_event(
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
                Some(self.reply_as_schema_value(schema, &text).await?)
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
}

/// At most `max` characters of `text`, marked when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(contents: Vec<Content>) -> Vec<Content> {
        let mut request = LlmRequest {
            contents,
            ..Default::default()
        };
        end_on_a_user_turn(&mut request);
        request.contents
    }

    #[test]
    fn a_request_ends_on_a_user_turn_as_adks_model_clients_end_it() {
        let user = Content::new("user").with_text("Ideas?");
        let model = Content::new("model").with_text("Lanterns.");
        assert_eq!(
            ended(vec![]),
            vec![Content::new("user").with_text(FOLLOW_THE_INSTRUCTION)]
        );
        assert_eq!(
            ended(vec![user.clone(), model.clone()]),
            vec![user.clone(), model, Content::new("user").with_text(CONTINUE)]
        );
        assert_eq!(ended(vec![user.clone()]), vec![user]);
        let older_function_response = Content::new("tool").with_text("{}");
        assert_eq!(
            ended(vec![older_function_response.clone()]),
            vec![older_function_response]
        );
    }

    fn marked(parts: Vec<Part>, finish: Option<FinishReason>, mode: StreamingMode) -> (Option<String>, Option<String>) {
        let mut reply = LlmResponse {
            content: Some(Content {
                role: MODEL_ROLE.into(),
                parts,
            }),
            finish_reason: finish,
            ..Default::default()
        };
        mark_a_reply_with_no_content(&mut reply, mode);
        (reply.error_code, reply.error_message)
    }

    #[test]
    fn a_stop_reply_with_nothing_to_act_on_is_marked_as_adk_marks_it() {
        let thought = Part {
            thought: Some(true),
            ..Part::text_part("hmm")
        };
        let stop = Some(FinishReason::Stop);
        let actionless = (
            Some(NO_CONTENT_ERROR_CODE.to_string()),
            Some(NO_MEANINGFUL_CONTENT_ERROR_MESSAGE.to_string()),
        );
        assert_eq!(marked(vec![thought.clone()], stop, StreamingMode::None), actionless);
        assert_eq!(
            marked(vec![Part::text_part(" \n")], stop, StreamingMode::Sse),
            actionless
        );
        assert_eq!(
            marked(vec![], stop, StreamingMode::None),
            (
                Some(NO_CONTENT_ERROR_CODE.to_string()),
                Some(NO_CONTENT_ERROR_MESSAGE.to_string())
            )
        );
        // Streamed, a reply without parts is the closing chunk: left alone.
        assert_eq!(marked(vec![], stop, StreamingMode::Sse), (None, None));
        // Not a STOP, or something to act on: left alone.
        assert_eq!(
            marked(
                vec![thought.clone()],
                Some(FinishReason::MaxTokens),
                StreamingMode::None
            ),
            (None, None)
        );
        assert_eq!(marked(vec![thought.clone()], None, StreamingMode::None), (None, None));
        let call = Part::function_call("f", serde_json::json!({}), None);
        assert_eq!(
            marked(vec![thought.clone(), call], stop, StreamingMode::None),
            (None, None)
        );
        assert_eq!(
            marked(vec![thought, Part::text_part("ok")], stop, StreamingMode::None),
            (None, None)
        );
    }
}
