//! Hooks: ADK's callbacks (`before_agent` … `after_tool`) and plugins (the same
//! callbacks for every agent of an app) served by an HTTP endpoint in any language.
//!
//! At each point an agent's hooks for it are called in order (app-wide ones first),
//! one JSON POST each (docs/agents-and-tools.md, "Hooks"):
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

use crate::context::ToolCallContext;
use crate::http_json::{JsonEndpoint, PostFailure};
use crate::llm::BeforeModel;
use crate::state_schema::{StateSchema, check_writes};
use crate::tools::{ContextGrant, ToolActions};
use adk_grpc_core::{
    AdkError, Agent, Content, Event, EventActions, EventStream, FinishReason, InvocationContext, LlmRequest,
    LlmResponse, Part, ReadonlyContext, Result, ToolDeclaration,
};
use adk_grpc_telemetry::HookCall;
use async_stream::try_stream;
use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// Where in a run a hook is called (ADK's callback names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    /// Before an agent runs; may answer in its place (the agent is skipped).
    BeforeAgent,
    /// After an agent's events; may add a reply.
    AfterAgent,
    /// Before each model call; may change the request or answer in the model's place.
    BeforeModel,
    /// On each complete model reply, before it is stored or streamed; may replace it.
    AfterModel,
    /// Before each tool call; may change the arguments or answer in the tool's place.
    BeforeTool,
    /// On each tool result, before the model sees it; may replace it.
    AfterTool,
    /// When a model call fails (ADK's `on_model_error_callback`): may answer with
    /// the reply instead, else the error fails the run.
    OnModelError,
    /// When a tool call fails or names no tool of the agent (ADK's
    /// `on_tool_error_callback`): may answer with the result instead, else the model
    /// reads the error.
    OnToolError,
}

impl HookPoint {
    pub const ALL: [HookPoint; 8] = [
        HookPoint::BeforeAgent,
        HookPoint::AfterAgent,
        HookPoint::BeforeModel,
        HookPoint::AfterModel,
        HookPoint::BeforeTool,
        HookPoint::AfterTool,
        HookPoint::OnModelError,
        HookPoint::OnToolError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::BeforeAgent => "before_agent",
            HookPoint::AfterAgent => "after_agent",
            HookPoint::BeforeModel => "before_model",
            HookPoint::AfterModel => "after_model",
            HookPoint::BeforeTool => "before_tool",
            HookPoint::AfterTool => "after_tool",
            HookPoint::OnModelError => "on_model_error",
            HookPoint::OnToolError => "on_tool_error",
        }
    }

    /// Points every kind of agent has; the others (model and tool) only llm agents.
    pub fn is_agent_point(self) -> bool {
        matches!(self, HookPoint::BeforeAgent | HookPoint::AfterAgent)
    }

    fn is_tool_point(self) -> bool {
        matches!(
            self,
            HookPoint::BeforeTool | HookPoint::AfterTool | HookPoint::OnToolError
        )
    }

    /// The reply fields that mean something at this point (besides `actions` and
    /// `end_invocation`, which every point takes).
    fn reply_fields(self) -> &'static [&'static str] {
        match self {
            HookPoint::BeforeAgent | HookPoint::AfterAgent => &["content"],
            HookPoint::BeforeModel => &["request", "response"],
            HookPoint::AfterModel | HookPoint::OnModelError => &["response"],
            HookPoint::BeforeTool => &["args", "result"],
            HookPoint::AfterTool | HookPoint::OnToolError => &["result"],
        }
    }
}

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
        ctx: &dyn InvocationContext,
        sink: &ToolCallContext,
        payload: Value,
        interpret: impl FnOnce(Reply) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let observed = HookCall::start(&self.name, point.as_str());
        let result = self
            .exchange(point, ctx, sink, payload, interpret)
            .instrument(observed.span().clone())
            .await;
        observed.finish(result.as_ref().err().map(AdkError::code));
        match result {
            Ok(decided) => Ok(decided),
            Err(e) if self.on_failure == FailurePolicy::FailOpen => {
                tracing::warn!(
                    hook = %self.name, point = point.as_str(), invocation_id = ctx.invocation_id(), error = %e,
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
        ctx: &dyn InvocationContext,
        sink: &ToolCallContext,
        payload: Value,
        interpret: impl FnOnce(Reply) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let context = match point.is_tool_point() {
            true => self.grant.context_json(sink),
            false => self.grant.callback_context_json(sink),
        };
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
        if let Some(field) = reply.fields().find(|field| !point.reply_fields().contains(field)) {
            return Err(self.bad_reply(
                point,
                format!(
                    "`{field}` means nothing at {}; it takes {}, actions and end_invocation",
                    point.as_str(),
                    point.reply_fields().join(", ")
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
            ctx.end_invocation();
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

/// An agent's hooks, in the order they are called (app-wide ones first). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    hooks: Arc<Vec<Arc<HttpHook>>>,
}

/// What the `before_tool` hooks decided.
pub(crate) enum BeforeTool {
    /// Call the tool with these (possibly changed) arguments.
    Call(Value),
    /// Do not call the tool: this is its result.
    Answer(Value),
}

impl Hooks {
    pub fn new(hooks: impl IntoIterator<Item = Arc<HttpHook>>) -> Self {
        Hooks {
            hooks: Arc::new(hooks.into_iter().collect()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Some hook is called at `point`.
    pub fn has(&self, point: HookPoint) -> bool {
        self.hooks.iter().any(|hook| hook.points.contains(&point))
    }

    fn at(&self, point: HookPoint) -> impl Iterator<Item = &Arc<HttpHook>> {
        self.hooks.iter().filter(move |hook| hook.points.contains(&point))
    }

    /// A sink for the actions of hooks outside a tool call (they go into the event
    /// they concern), with the tool context's state view of pending writes.
    pub(crate) fn sink(ctx: &Arc<dyn InvocationContext>) -> ToolCallContext {
        ToolCallContext::new(ctx.clone(), "")
    }

    /// Runs after the agent's own before-model callbacks: each hook may change the
    /// request; the first that answers is the model's reply (later ones are not
    /// called). A hook that ends the invocation stops the others; the flow then
    /// skips the model.
    pub(crate) async fn before_model(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        sink: &ToolCallContext,
        mut request: LlmRequest,
    ) -> Result<BeforeModel> {
        for hook in self.at(HookPoint::BeforeModel) {
            let payload = json!({ "request": request_json(&request) });
            let decided = hook
                .consult(HookPoint::BeforeModel, ctx.as_ref(), sink, payload, |reply| {
                    if let Some(response) = reply.response {
                        let response = response_from_json(LlmResponse::default(), response)?;
                        return Ok(Some(BeforeModel::Respond(response)));
                    }
                    match reply.request {
                        Some(changed) => Ok(Some(BeforeModel::Continue(request_from_json(
                            request.clone(),
                            changed,
                        )?))),
                        None => Ok(None),
                    }
                })
                .await?;
            match decided {
                Some(BeforeModel::Continue(changed)) => request = changed,
                Some(respond) => return Ok(respond),
                None => {}
            }
            if ctx.ended() {
                break;
            }
        }
        Ok(BeforeModel::Continue(request))
    }

    /// Each hook sees (and may replace) the complete reply, before it is stored or streamed.
    pub(crate) async fn after_model(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        sink: &ToolCallContext,
        mut response: LlmResponse,
    ) -> Result<LlmResponse> {
        for hook in self.at(HookPoint::AfterModel) {
            let payload = json!({ "response": response_json(&response) });
            let replaced = hook
                .consult(HookPoint::AfterModel, ctx.as_ref(), sink, payload, |reply| {
                    reply
                        .response
                        .map(|changed| response_from_json(response.clone(), changed))
                        .transpose()
                })
                .await?;
            if let Some(replaced) = replaced {
                response = replaced;
            }
        }
        Ok(response)
    }

    /// Each hook may change the arguments; the first that answers is the tool's result.
    pub(crate) async fn before_tool(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        tool_ctx: &ToolCallContext,
        tool: &str,
        mut args: Value,
    ) -> Result<BeforeTool> {
        for hook in self.at(HookPoint::BeforeTool) {
            let payload = json!({ "tool": tool, "args": args });
            let decided = hook
                .consult(HookPoint::BeforeTool, ctx.as_ref(), tool_ctx, payload, |reply| {
                    if let Some(result) = reply.result {
                        return Ok(Some(BeforeTool::Answer(result)));
                    }
                    match reply.args {
                        Some(changed) if changed.is_object() => Ok(Some(BeforeTool::Call(changed))),
                        Some(other) => Err(AdkError::invalid("args", format!("must be an object, not {other}"))),
                        None => Ok(None),
                    }
                })
                .await?;
            match decided {
                Some(BeforeTool::Call(changed)) => args = changed,
                Some(answer) => return Ok(answer),
                None => {}
            }
        }
        Ok(BeforeTool::Call(args))
    }

    /// Each hook sees (and may replace) the response the model is to read.
    pub(crate) async fn after_tool(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        tool_ctx: &ToolCallContext,
        tool: &str,
        args: &Value,
        mut response: Value,
    ) -> Result<Value> {
        for hook in self.at(HookPoint::AfterTool) {
            let payload = json!({ "tool": tool, "args": args, "response": response });
            let replaced = hook
                .consult(HookPoint::AfterTool, ctx.as_ref(), tool_ctx, payload, |reply| {
                    Ok(reply.result)
                })
                .await?;
            if let Some(replaced) = replaced {
                response = replaced;
            }
        }
        Ok(response)
    }

    /// A failed model call: the first hook that answers gives the reply instead (ADK
    /// stops at the first callback that returns one); None leaves the error standing.
    pub(crate) async fn on_model_error(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        sink: &ToolCallContext,
        request: &LlmRequest,
        error: &AdkError,
    ) -> Result<Option<LlmResponse>> {
        for hook in self.at(HookPoint::OnModelError) {
            let payload = json!({ "request": request_json(request), "error": error_json(error) });
            let answer = hook
                .consult(HookPoint::OnModelError, ctx.as_ref(), sink, payload, |reply| {
                    reply
                        .response
                        .map(|response| response_from_json(LlmResponse::default(), response))
                        .transpose()
                })
                .await?;
            if answer.is_some() || ctx.ended() {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    /// A failed tool call: the first hook that answers gives the result instead;
    /// None leaves the error standing.
    pub(crate) async fn on_tool_error(
        &self,
        ctx: &Arc<dyn InvocationContext>,
        tool_ctx: &ToolCallContext,
        tool: &str,
        args: &Value,
        error: &AdkError,
    ) -> Result<Option<Value>> {
        for hook in self.at(HookPoint::OnToolError) {
            let payload = json!({ "tool": tool, "args": args, "error": error_json(error) });
            let answer = hook
                .consult(HookPoint::OnToolError, ctx.as_ref(), tool_ctx, payload, |reply| {
                    Ok(reply.result)
                })
                .await?;
            if answer.is_some() {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    /// The first hook that answers is the agent's reply (the agent is skipped).
    async fn before_agent(&self, ctx: &Arc<dyn InvocationContext>, sink: &ToolCallContext) -> Result<Option<Content>> {
        for hook in self.at(HookPoint::BeforeAgent) {
            let payload = json!({ "user_content": content_json(ctx.user_content()) });
            let answer = hook
                .consult(HookPoint::BeforeAgent, ctx.as_ref(), sink, payload, |reply| {
                    reply
                        .content
                        .map(|content| content_from_json("content", content))
                        .transpose()
                })
                .await?;
            if answer.is_some() || ctx.ended() {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    /// The replies the hooks add after the agent's events (the last one given wins).
    async fn after_agent(&self, ctx: &Arc<dyn InvocationContext>, sink: &ToolCallContext) -> Result<Option<Content>> {
        let mut added = None;
        for hook in self.at(HookPoint::AfterAgent) {
            let reply = hook
                .consult(HookPoint::AfterAgent, ctx.as_ref(), sink, json!({}), |reply| {
                    reply
                        .content
                        .map(|content| content_from_json("content", content))
                        .transpose()
                })
                .await?;
            if reply.is_some() {
                added = reply;
            }
        }
        Ok(added)
    }
}

/// Runs an agent inside its `before_agent` and `after_agent` hooks: a
/// `before_agent` answer (or `end_invocation`) skips the agent; hook actions are
/// stored as an event of the agent (with the answer or the added reply, if any).
/// As in ADK, `after_agent` is not called once the invocation has ended.
pub(crate) fn around_agent<F>(
    hooks: Hooks,
    state_schema: Option<Arc<StateSchema>>,
    ctx: Arc<dyn InvocationContext>,
    run: F,
) -> BoxFuture<'static, Result<EventStream>>
where
    F: FnOnce(Arc<dyn InvocationContext>) -> BoxFuture<'static, Result<EventStream>> + Send + 'static,
{
    if !hooks.has(HookPoint::BeforeAgent) && !hooks.has(HookPoint::AfterAgent) {
        return run(ctx);
    }
    Box::pin(async move {
        let stream: EventStream = Box::pin(try_stream! {
            let sink = Hooks::sink(&ctx);
            let answer = hooks.before_agent(&ctx, &sink).await?;
            let skipped = answer.is_some() || ctx.ended();
            let actions = sink.take_actions();
            check_writes(state_schema.as_deref(), ctx.agent_name(), &actions.state_delta)?;
            if let Some(event) = hook_event(ctx.as_ref(), answer, actions) {
                yield event;
            }
            if !skipped {
                let mut events = run(ctx.clone()).await?;
                while let Some(event) = events.next().await {
                    yield event?;
                }
                if !ctx.ended() {
                    let sink = Hooks::sink(&ctx);
                    let added = hooks.after_agent(&ctx, &sink).await?;
                    let actions = sink.take_actions();
                    check_writes(state_schema.as_deref(), ctx.agent_name(), &actions.state_delta)?;
                    if let Some(event) = hook_event(ctx.as_ref(), added, actions) {
                        yield event;
                    }
                }
            }
        });
        Ok(stream)
    })
}

/// An event of the agent carrying a hook's reply and actions; None when there is neither.
fn hook_event(ctx: &dyn InvocationContext, content: Option<Content>, actions: EventActions) -> Option<Event> {
    if content.is_none() && actions == EventActions::default() {
        return None;
    }
    let mut event = Event::new(ctx.invocation_id()).with_author(ctx.agent_name());
    event.branch = ctx.branch().to_string();
    event.llm_response.content = content;
    event.actions = actions;
    Some(event)
}

/// An agent of any kind with the agent points of `hooks` around its runs (llm agents
/// take their hooks through [`crate::LlmAgentBuilder::hooks`] instead, which also
/// covers the model and tool points), the hooks' state writes held to the agent's
/// `state_schema`. The agent itself when no hook is called at `before_agent` or
/// `after_agent`.
pub fn with_agent_hooks(agent: Arc<dyn Agent>, hooks: Hooks, state_schema: Option<Arc<StateSchema>>) -> Arc<dyn Agent> {
    if !hooks.has(HookPoint::BeforeAgent) && !hooks.has(HookPoint::AfterAgent) {
        return agent;
    }
    Arc::new(HookedAgent {
        inner: agent,
        hooks,
        state_schema,
    })
}

struct HookedAgent {
    inner: Arc<dyn Agent>,
    hooks: Hooks,
    state_schema: Option<Arc<StateSchema>>,
}

#[async_trait]
impl Agent for HookedAgent {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn sub_agents(&self) -> &[Arc<dyn Agent>] {
        self.inner.sub_agents()
    }
    fn transfer_scope(&self) -> Option<adk_grpc_core::TransferScope> {
        self.inner.transfer_scope()
    }
    fn mode(&self) -> adk_grpc_core::AgentMode {
        self.inner.mode()
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        self.inner.as_any()
    }
    async fn run(&self, ctx: Arc<dyn InvocationContext>) -> Result<EventStream> {
        let inner = self.inner.clone();
        around_agent(self.hooks.clone(), self.state_schema.clone(), ctx, move |ctx| {
            Box::pin(async move { inner.run(ctx).await })
        })
        .await
    }
}

// The JSON forms hooks read and write: google-genai's (snake_case, as Python's
// `model_dump(mode="json", exclude_none=True)` writes and `model_validate` reads).

/// A part as google-genai's JSON: `{"text": "…"}`, `{"function_call": {"name", "args", "id"}}`,
/// `{"function_response": {"name", "response", "id"}}`, `{"inline_data": {"mime_type", "data"}}`, …
pub(crate) fn part_json(part: &Part) -> Value {
    let mut json = serde_json::to_value(part).unwrap_or(Value::Null);
    if let Some(object) = json.as_object_mut() {
        // The core's serde form nests these one level deeper than google-genai.
        if let Some(Value::Object(text)) = object.get_mut("text") {
            let text = text.remove("text").unwrap_or_default();
            object.insert("text".into(), text);
        }
        if let Some(Value::Object(outer)) = object.get_mut("function_response") {
            let mut flat = match outer.remove("function_response") {
                Some(Value::Object(inner)) => inner,
                _ => Map::new(),
            };
            if let Some(id) = outer.remove("id").filter(|id| !id.is_null()) {
                flat.insert("id".into(), id);
            }
            object.insert("function_response".into(), Value::Object(flat));
        }
        for key in ["function_call", "executable_code", "code_execution_result"] {
            if let Some(Value::Object(inner)) = object.get_mut(key) {
                inner.retain(|_, value| !value.is_null());
            }
        }
    }
    json
}

pub(crate) fn part_from_json(field: &str, json: Value) -> Result<Part> {
    let Value::Object(mut object) = json else {
        return Err(AdkError::invalid(
            field,
            "a part must be an object such as {\"text\": \"…\"}",
        ));
    };
    if let Some(Value::String(text)) = object.remove("text") {
        object.insert("text".into(), json!({ "text": text }));
    }
    if let Some(Value::Object(mut flat)) = object.remove("function_response") {
        let id = flat.remove("id").unwrap_or(Value::Null);
        object.insert(
            "function_response".into(),
            json!({ "function_response": Value::Object(flat), "id": id }),
        );
    }
    for key in ["function_call", "executable_code", "code_execution_result"] {
        if let Some(Value::Object(inner)) = object.get_mut(key) {
            for optional in ["id", "code", "language", "outcome", "output"] {
                if !inner.contains_key(optional) && (key != "function_call" || optional == "id") {
                    inner.insert(optional.into(), Value::Null);
                }
            }
        }
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| AdkError::invalid(field, e.to_string()))
}

pub(crate) fn content_json(content: &Content) -> Value {
    json!({
        "role": content.role,
        "parts": content.parts.iter().map(part_json).collect::<Vec<_>>(),
    })
}

/// A content as google-genai's JSON, or a string (a model's text reply).
pub(crate) fn content_from_json(field: &str, json: Value) -> Result<Content> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ContentJson {
        #[serde(default)]
        role: Option<String>,
        #[serde(default)]
        parts: Vec<Value>,
    }
    if let Value::String(text) = json {
        return Ok(Content::new("model").with_text(text));
    }
    let content: ContentJson = serde_json::from_value(json).map_err(|e| AdkError::invalid(field, e.to_string()))?;
    let parts = content
        .parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| part_from_json(&format!("{field}.parts[{i}]"), part))
        .collect::<Result<Vec<_>>>()?;
    Ok(Content {
        role: content
            .role
            .filter(|role| !role.is_empty())
            .unwrap_or_else(|| "model".into()),
        parts,
    })
}

fn request_json(request: &LlmRequest) -> Value {
    json!({
        "model": request.model,
        "contents": request.contents.iter().map(content_json).collect::<Vec<_>>(),
        "system_instruction": request.system_instruction,
        "tools": request.tools,
    })
}

/// `changed` over `request`: each of `contents`, `system_instruction` and `tools`
/// given replaces the request's.
fn request_from_json(mut request: LlmRequest, changed: Value) -> Result<LlmRequest> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Changed {
        #[serde(default)]
        model: Option<Value>,
        #[serde(default)]
        contents: Option<Vec<Value>>,
        #[serde(default, deserialize_with = "present")]
        system_instruction: Option<Option<String>>,
        #[serde(default)]
        tools: Option<Vec<ToolDeclaration>>,
    }
    let changed: Changed = serde_json::from_value(changed).map_err(|e| AdkError::invalid("request", e.to_string()))?;
    if changed
        .model
        .as_ref()
        .is_some_and(|model| model != &json!(request.model))
    {
        return Err(AdkError::invalid(
            "request.model",
            "the agent's model is not changed by a hook",
        ));
    }
    if let Some(contents) = changed.contents {
        request.contents = contents
            .into_iter()
            .enumerate()
            .map(|(i, content)| content_from_json(&format!("request.contents[{i}]"), content))
            .collect::<Result<_>>()?;
    }
    if let Some(instruction) = changed.system_instruction {
        request.system_instruction = instruction;
    }
    if let Some(tools) = changed.tools {
        request.tools = tools;
    }
    Ok(request)
}

/// A field given as `null` is `Some(None)`, one left out `None`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

/// An error as a hook reads it: its gRPC code's name and its message.
fn error_json(error: &AdkError) -> Value {
    json!({ "code": adk_grpc_telemetry::code_name(error.code()), "message": error.to_string() })
}

fn response_json(response: &LlmResponse) -> Value {
    json!({
        "content": response.content.as_ref().map(content_json),
        "finish_reason": response.finish_reason,
        "usage_metadata": response.usage_metadata,
    })
}

/// `changed` over `response`: its `content` (required) and `finish_reason` replace
/// the response's; the rest (usage, model version) stays what the model said.
fn response_from_json(mut response: LlmResponse, changed: Value) -> Result<LlmResponse> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Changed {
        content: Value,
        #[serde(default)]
        finish_reason: Option<FinishReason>,
        /// Accepted as a hook echoes it, and ignored: usage is what the model spent.
        #[serde(default, rename = "usage_metadata")]
        _usage_metadata: Option<serde::de::IgnoredAny>,
    }
    let changed: Changed = serde_json::from_value(changed).map_err(|e| AdkError::invalid("response", e.to_string()))?;
    response.content = Some(content_from_json("response.content", changed.content)?);
    if changed.finish_reason.is_some() {
        response.finish_reason = changed.finish_reason;
    }
    if response.turn_complete.is_none() {
        response.turn_complete = Some(true);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::FunctionResponseData;

    #[test]
    fn parts_travel_as_google_genai_json_and_back() {
        let parts = [
            Part::text_part("hi"),
            Part::function_call("add", json!({"a": 1}), Some("c1".into())),
            Part::function_response(
                FunctionResponseData {
                    name: "add".into(),
                    response: json!({"sum": 2}),
                },
                Some("c1".into()),
            ),
            Part::inline_data("image/png", vec![1, 2, 3]),
            Part::file_data("text/plain", "gs://b/f"),
        ];
        let json: Vec<Value> = parts.iter().map(part_json).collect();
        assert_eq!(json[0], json!({"text": "hi"}));
        assert_eq!(
            json[1],
            json!({"function_call": {"name": "add", "args": {"a": 1}, "id": "c1"}})
        );
        assert_eq!(
            json[2],
            json!({"function_response": {"name": "add", "response": {"sum": 2}, "id": "c1"}})
        );
        assert_eq!(
            json[3],
            json!({"inline_data": {"mime_type": "image/png", "data": "AQID"}})
        );
        assert_eq!(
            json[4],
            json!({"file_data": {"mime_type": "text/plain", "file_uri": "gs://b/f"}})
        );
        for (part, json) in parts.iter().zip(json) {
            assert_eq!(&part_from_json("p", json).unwrap(), part);
        }
        let mut thought = Part::text_part("hmm");
        thought.thought = Some(true);
        assert_eq!(part_json(&thought), json!({"text": "hmm", "thought": true}));
        let call = part_from_json("p", json!({"function_call": {"name": "f", "args": {}}})).unwrap();
        assert_eq!(call, Part::function_call("f", json!({}), None));
        assert!(part_from_json("p", json!("hi")).is_err());
    }

    #[test]
    fn a_changed_request_replaces_only_what_it_names() {
        let request = LlmRequest {
            model: "m".into(),
            contents: vec![Content::new("user").with_text("hello")],
            system_instruction: Some("Be brief.".into()),
            ..Default::default()
        };
        let changed = request_from_json(
            request.clone(),
            json!({"contents": [{"role": "user", "parts": [{"text": "bye"}]}]}),
        )
        .unwrap();
        assert_eq!(changed.contents, vec![Content::new("user").with_text("bye")]);
        assert_eq!(changed.system_instruction.as_deref(), Some("Be brief."));
        let cleared = request_from_json(request.clone(), json!({"system_instruction": null})).unwrap();
        assert_eq!(cleared.system_instruction, None);
        assert!(request_from_json(request.clone(), json!({"model": "other"})).is_err());
        assert!(request_from_json(request, json!({"contens": []})).is_err());
    }

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
