//! A hook served by an HTTP endpoint in any language: one JSON POST per point it is
//! called at (docs/hooks.md, "Hooks"):
//!
//! ```json
//! {"point": "before_tool", "hook": "guard", "agent_name": "helper",
//!  "context": {"app_name": …, "user_id": …, "session_id": …, "invocation_id": …,
//!              "function_call_id": …, "agent_name": …, "state": {…granted keys…}},
//!  "tool": "transfer_money", "args": {"amount": 10}}
//! ```
//!
//! The reply (an empty body or `{}`: the hook only observed) may change what
//! passes (`request`, `response`, `args`, `result`), answer in the place of the
//! model, the tool or the agent (`response`, `result`, `content`), end the
//! invocation (`end_invocation`), and carry the tool context's `actions`
//! ([`ToolActions`], as a remote tool's reply). A hook that fails (timeout,
//! unreachable, a reply that is not a hook reply) is skipped with a warning when it
//! fails open (the default), and fails the run, naming the hook, when it fails closed.

use super::codec::{
    content_from_json, content_json, error_json, request_from_json, request_json, response_from_json, response_json,
};
use super::hook::{BeforeModel, BeforeTool, Hook, HookContext, HookPoint};
use crate::http_json::{JsonEndpoint, PostFailure};
use crate::tools::{ContextGrant, ToolActions};
use adk_grpc_core::{AdkError, Content, LlmRequest, LlmResponse, Result};
use adk_grpc_telemetry::HookCall;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tracing::Instrument;

/// What a failing hook (timeout, unreachable, not a hook reply) does to the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Logged, counted, and the run goes on as if the hook had said nothing.
    #[default]
    FailOpen,
    /// The run fails with an error naming the hook (a guard that cannot be asked
    /// must not be passed by).
    FailClosed,
}

/// A hook served by an HTTP endpoint: POSTed JSON at each of its points.
#[derive(Debug, Clone)]
pub struct HttpHook {
    name: String,
    endpoint: JsonEndpoint,
    points: Vec<HookPoint>,
    on_failure: FailurePolicy,
    grant: ContextGrant,
}

impl HttpHook {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// A hook called at `points` (at least one). `Config` for an URL that is not
    /// http(s) or no point. By default it fails open, waits 10 s, and is sent the
    /// context's ids but no state ([`HttpHook::with_context`]).
    pub fn new(name: impl Into<String>, url: &str, points: impl IntoIterator<Item = HookPoint>) -> Result<Self> {
        let name = name.into();
        let endpoint = JsonEndpoint::new(format!("hook {name}"), url, Self::DEFAULT_TIMEOUT)?;
        let mut unique = Vec::new();
        for point in points {
            if !unique.contains(&point) {
                unique.push(point);
            }
        }
        if unique.is_empty() {
            return Err(AdkError::Config(format!(
                "hook {name}: name at least one point it is called at"
            )));
        }
        Ok(HttpHook {
            name,
            endpoint,
            points: unique,
            on_failure: FailurePolicy::default(),
            grant: ContextGrant::default(),
        })
    }

    /// The whole exchange must finish within this time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.set_timeout(timeout);
        self
    }

    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.on_failure = policy;
        self
    }

    /// The state the hook is sent in its `context` (as a remote tool's grant).
    pub fn with_context(mut self, grant: ContextGrant) -> Self {
        self.grant = grant;
        self
    }

    /// A header sent with every call (e.g. an API key).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        self.endpoint = self.endpoint.with_header(name, value)?;
        Ok(self)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn points(&self) -> &[HookPoint] {
        &self.points
    }

    fn failure(&self, point: HookPoint, what: impl std::fmt::Display) -> String {
        format!(
            "hook {} ({}): POST {} {what}",
            self.name,
            point.as_str(),
            self.endpoint.url()
        )
    }

    fn bad_reply(&self, point: HookPoint, what: impl std::fmt::Display) -> AdkError {
        AdkError::Agent(self.failure(point, format!("answered with a reply that is not a hook reply: {what}")))
    }

    /// One call, observed (span and metric), under the hook's failure policy: None
    /// when the hook only observed or failed open.
    async fn consult<T>(
        &self,
        point: HookPoint,
        ctx: &HookContext,
        payload: Value,
        interpret: impl FnOnce(Reply) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let observed = HookCall::start(&self.name, point.as_str());
        let result = self
            .exchange(point, ctx, payload, interpret)
            .instrument(observed.span().clone())
            .await;
        observed.finish(result.as_ref().err().map(AdkError::code));
        match result {
            Ok(decided) => Ok(decided),
            Err(e) if self.on_failure == FailurePolicy::FailOpen => {
                tracing::warn!(
                    hook = %self.name, point = point.as_str(), invocation_id = ctx.invocation().invocation_id(), error = %e,
                    "hook failed; it fails open, so the run goes on as if it had said nothing"
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// POSTs the call, reads and checks the reply, then applies it: nothing of a bad
    /// reply is applied.
    async fn exchange<T>(
        &self,
        point: HookPoint,
        ctx: &HookContext,
        payload: Value,
        interpret: impl FnOnce(Reply) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let sink = ctx.tool_context().as_ref();
        let mut context = match point.is_tool_point() {
            true => self.grant.context_json(sink),
            false => self.grant.callback_context_json(sink),
        };
        // Held until the hook has answered: a read after it is refused.
        let _reads = self.grant.open_reads(sink, &mut context)?;
        let mut body = json!({
            "point": point.as_str(),
            "hook": self.name,
            "agent_name": sink.agent_name(),
            "context": context,
        });
        if let (Some(body), Value::Object(payload)) = (body.as_object_mut(), payload) {
            body.extend(payload);
        }
        let mut reply = match self.post(point, &body).await? {
            Value::Null => Reply::default(),
            reply => serde_json::from_value::<Reply>(reply).map_err(|e| self.bad_reply(point, e))?,
        };
        if let Some(field) = reply.fields().find(|field| !reply_fields(point).contains(field)) {
            return Err(self.bad_reply(
                point,
                format!(
                    "`{field}` means nothing at {}; it takes {}, actions and end_invocation",
                    point.as_str(),
                    reply_fields(point).join(", ")
                ),
            ));
        }
        let actions =
            ToolActions::from_json(std::mem::take(&mut reply.actions)).map_err(|e| self.bad_reply(point, e))?;
        if actions.transfer_to_agent.is_some() && !point.is_tool_point() {
            return Err(self.bad_reply(
                point,
                "actions.transfer_to_agent is a tool's action: a hook transfers at before_tool or after_tool",
            ));
        }
        let end = reply.end_invocation;
        let decided = interpret(reply).map_err(|e| self.bad_reply(point, e))?;
        actions
            .apply(sink)
            .await
            .map_err(|e| AdkError::Agent(self.failure(point, format!("asked for actions that failed: {e}"))))?;
        if end {
            ctx.invocation().end_invocation();
        }
        Ok(decided)
    }

    /// POSTs `body`; the JSON reply, or `null` for an empty one.
    async fn post(&self, point: HookPoint, body: &Value) -> Result<Value> {
        let whose = |message: &str| format!("hook {} ({}): {message}", self.name, point.as_str());
        self.endpoint.post(body).await.map_err(|failure| match failure {
            PostFailure::TimedOut(m) => AdkError::DeadlineExceeded(whose(&m)),
            PostFailure::Unreachable(m) => AdkError::Unavailable(whose(&m)),
            PostFailure::NotJson(m) => AdkError::Agent(whose(&m)),
            PostFailure::TooLarge(m) => AdkError::limit(
                "max_tool_reply_bytes",
                adk_grpc_core::replies::max_tool_reply_bytes(),
                whose(&m),
            ),
        })
    }
}

/// A hook's reply, every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    end_invocation: bool,
    #[serde(default)]
    actions: Value,
}

impl Reply {
    /// The point-specific fields set.
    fn fields(&self) -> impl Iterator<Item = &'static str> {
        [
            ("request", self.request.is_some()),
            ("response", self.response.is_some()),
            ("args", self.args.is_some()),
            ("result", self.result.is_some()),
            ("content", self.content.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, set)| set.then_some(field))
    }
}

/// Each point: the payload it is sent, and what of its reply is taken.
#[async_trait]
impl Hook for HttpHook {
    fn points(&self) -> &[HookPoint] {
        &self.points
    }

    async fn before_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        let payload = json!({ "user_content": content_json(ctx.invocation().user_content()) });
        self.consult(HookPoint::BeforeAgent, ctx, payload, reply_content).await
    }

    async fn after_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        self.consult(HookPoint::AfterAgent, ctx, json!({}), reply_content).await
    }

    async fn before_model(&self, ctx: &HookContext, request: LlmRequest) -> Result<BeforeModel> {
        let payload = json!({ "request": request_json(&request) });
        let decided = self
            .consult(HookPoint::BeforeModel, ctx, payload, |reply| {
                if let Some(response) = reply.response {
                    let response = response_from_json(LlmResponse::default(), response)?;
                    return Ok(Some(BeforeModel::Respond(response)));
                }
                reply
                    .request
                    .map(|changed| request_from_json(request.clone(), changed).map(BeforeModel::Continue))
                    .transpose()
            })
            .await?;
        Ok(decided.unwrap_or(BeforeModel::Continue(request)))
    }

    async fn after_model(&self, ctx: &HookContext, response: LlmResponse) -> Result<LlmResponse> {
        let payload = json!({ "response": response_json(&response) });
        let replaced = self
            .consult(HookPoint::AfterModel, ctx, payload, |reply| {
                reply
                    .response
                    .map(|changed| response_from_json(response.clone(), changed))
                    .transpose()
            })
            .await?;
        Ok(replaced.unwrap_or(response))
    }

    async fn on_model_error(
        &self,
        ctx: &HookContext,
        request: &LlmRequest,
        error: &AdkError,
    ) -> Result<Option<LlmResponse>> {
        let payload = json!({ "request": request_json(request), "error": error_json(error) });
        self.consult(HookPoint::OnModelError, ctx, payload, |reply| {
            reply
                .response
                .map(|response| response_from_json(LlmResponse::default(), response))
                .transpose()
        })
        .await
    }

    async fn before_tool(&self, ctx: &HookContext, tool: &str, args: Value) -> Result<BeforeTool> {
        let payload = json!({ "tool": tool, "args": args });
        let decided = self
            .consult(HookPoint::BeforeTool, ctx, payload, |reply| {
                if let Some(result) = reply.result {
                    return Ok(Some(BeforeTool::Respond(result)));
                }
                match reply.args {
                    Some(changed) if changed.is_object() => Ok(Some(BeforeTool::Continue(changed))),
                    Some(other) => Err(AdkError::invalid("args", format!("must be an object, not {other}"))),
                    None => Ok(None),
                }
            })
            .await?;
        Ok(decided.unwrap_or(BeforeTool::Continue(args)))
    }

    async fn after_tool(&self, ctx: &HookContext, tool: &str, args: &Value, response: Value) -> Result<Value> {
        let payload = json!({ "tool": tool, "args": args, "response": response });
        let replaced = self
            .consult(HookPoint::AfterTool, ctx, payload, |reply| Ok(reply.result))
            .await?;
        Ok(replaced.unwrap_or(response))
    }

    async fn on_tool_error(
        &self,
        ctx: &HookContext,
        tool: &str,
        args: &Value,
        error: &AdkError,
    ) -> Result<Option<Value>> {
        let payload = json!({ "tool": tool, "args": args, "error": error_json(error) });
        self.consult(HookPoint::OnToolError, ctx, payload, |reply| Ok(reply.result))
            .await
    }
}

/// The `content` of an agent point's reply.
fn reply_content(reply: Reply) -> Result<Option<Content>> {
    reply
        .content
        .map(|content| content_from_json("content", content))
        .transpose()
}

/// The reply fields that mean something at `point` (besides `actions` and
/// `end_invocation`, which every point takes).
fn reply_fields(point: HookPoint) -> &'static [&'static str] {
    match point {
        HookPoint::BeforeAgent | HookPoint::AfterAgent => &["content"],
        HookPoint::BeforeModel => &["request", "response"],
        HookPoint::AfterModel | HookPoint::OnModelError => &["response"],
        HookPoint::BeforeTool => &["args", "result"],
        HookPoint::AfterTool | HookPoint::OnToolError => &["result"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_needs_a_point_and_an_http_url() {
        assert!(HttpHook::new("h", "http://127.0.0.1:1/", []).is_err());
        assert!(HttpHook::new("h", "ftp://x/", [HookPoint::BeforeModel]).is_err());
        let hook = HttpHook::new(
            "h",
            "http://127.0.0.1:1/",
            [HookPoint::AfterModel, HookPoint::AfterModel],
        )
        .unwrap();
        assert_eq!(hook.points(), [HookPoint::AfterModel]);
    }
}
