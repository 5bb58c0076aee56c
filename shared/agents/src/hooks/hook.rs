//! The hook trait: one method per ADK callback point, and what it is called with and decides.

use adk_grpc_core::{AdkError, Content, EventActions, InvocationContext, LlmRequest, LlmResponse, Result, ToolContext};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;

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

    /// The points of one tool call (their hook context is the call's tool context).
    pub(crate) fn is_tool_point(self) -> bool {
        matches!(
            self,
            HookPoint::BeforeTool | HookPoint::AfterTool | HookPoint::OnToolError
        )
    }

    /// The points before the agent or the model runs, or in place of the model's
    /// reply: a hook that ends the invocation there stops the chain (what the chain
    /// leads to is skipped).
    pub(super) fn stops_once_ended(self) -> bool {
        matches!(
            self,
            HookPoint::BeforeAgent | HookPoint::BeforeModel | HookPoint::OnModelError
        )
    }
}

/// Code called at ADK's callback points (ADK's `BasePlugin`): one method per point,
/// each doing nothing by default, so a hook writes only the points it is called at.
/// The values that pass a point (request, response, arguments, result) go through
/// each hook, which gives them back the same or changed; `Err` fails the run.
#[async_trait]
pub trait Hook: Send + Sync {
    /// The points it is called at: a chain passes it over at the others, and an agent
    /// with a hook at `after_model` calls its model without streaming (the hook sees
    /// each reply whole before any of it reaches a client).
    fn points(&self) -> &[HookPoint];

    /// Before the agent runs: Some is its reply instead (the agent is skipped).
    async fn before_agent(&self, _ctx: &HookContext) -> Result<Option<Content>> {
        Ok(None)
    }

    /// After the agent's events: Some is a reply added after them.
    async fn after_agent(&self, _ctx: &HookContext) -> Result<Option<Content>> {
        Ok(None)
    }

    /// Before each model call: the request to send, or the model's reply instead.
    async fn before_model(&self, _ctx: &HookContext, request: LlmRequest) -> Result<BeforeModel> {
        Ok(BeforeModel::Continue(request))
    }

    /// On each complete model reply, before it is stored or streamed: the reply to use.
    async fn after_model(&self, _ctx: &HookContext, response: LlmResponse) -> Result<LlmResponse> {
        Ok(response)
    }

    /// When a model call fails: Some is the reply instead, None lets the error stand.
    async fn on_model_error(
        &self,
        _ctx: &HookContext,
        _request: &LlmRequest,
        _error: &AdkError,
    ) -> Result<Option<LlmResponse>> {
        Ok(None)
    }

    /// Before each tool call: the arguments to call it with, or its result instead.
    async fn before_tool(&self, _ctx: &HookContext, _tool: &str, args: Value) -> Result<BeforeTool> {
        Ok(BeforeTool::Continue(args))
    }

    /// On each tool result, before the model reads it: the result the model reads.
    async fn after_tool(&self, _ctx: &HookContext, _tool: &str, _args: &Value, response: Value) -> Result<Value> {
        Ok(response)
    }

    /// When a tool call fails or names no tool of the agent: Some is the result
    /// instead, None leaves the error for the model to read.
    async fn on_tool_error(
        &self,
        _ctx: &HookContext,
        _tool: &str,
        _args: &Value,
        _error: &AdkError,
    ) -> Result<Option<Value>> {
        Ok(None)
    }
}

/// What a hook decides at a point where it may answer in place of the model or the tool.
// One value per call, moved once: boxing the response would only make hooks harder to write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Decision<T, A> {
    /// Go on with this value (the same or changed): the next hook, then the model or tool, get it.
    Continue(T),
    /// Answer in its place: the later hooks and the model or tool are skipped.
    Respond(A),
}

/// What a `before_model` hook decides: the request to send, or the model's reply.
pub type BeforeModel = Decision<LlmRequest, LlmResponse>;

/// What a `before_tool` hook decides: the arguments to call the tool with, or its result.
pub type BeforeTool = Decision<Value, Value>;

impl<T> Decision<T, Infallible> {
    /// The value of a point where no hook answers in anyone's place.
    pub(super) fn value(self) -> T {
        match self {
            Decision::Continue(value) => value,
            Decision::Respond(never) => match never {},
        }
    }
}

impl<A> Decision<(), A> {
    /// The answer of a point where hooks only answer.
    pub(super) fn answer(self) -> Option<A> {
        match self {
            Decision::Continue(()) => None,
            Decision::Respond(answer) => Some(answer),
        }
    }
}

/// What a hook is called with.
#[derive(Clone)]
pub struct HookContext {
    invocation: Arc<dyn InvocationContext>,
    tool: Arc<dyn ToolContext>,
}

impl HookContext {
    pub(crate) fn new(invocation: Arc<dyn InvocationContext>, tool: Arc<dyn ToolContext>) -> Self {
        HookContext { invocation, tool }
    }

    /// The invocation the agent runs in (its ids, its state, `end_invocation`).
    pub fn invocation(&self) -> &Arc<dyn InvocationContext> {
        &self.invocation
    }

    /// The context the hook acts through, its state view showing its own writes: the
    /// call's tool context at the tool points; at the others one (with no function call
    /// id) whose actions go into the event the point concerns.
    pub fn tool_context(&self) -> &Arc<dyn ToolContext> {
        &self.tool
    }

    /// The actions recorded so far, which the caller puts into its event.
    pub(super) fn take_actions(&self) -> EventActions {
        let actions = self.tool.actions();
        self.tool.set_actions(EventActions::default());
        actions
    }
}
