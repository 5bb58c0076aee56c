//! Rust closures as hooks: ADK's callbacks written in Rust, one closure at one point.
//!
//! A closure at an agent or model point gets the invocation as ADK's
//! `CallbackContext`; at a tool point, the call's `ToolContext` (its state writes go
//! into the call's response event). A closure's future owns what it uses: the error
//! at `on_model_error` and `on_tool_error` is lent to the closure, not to its future.

use super::hook::{BeforeModel, BeforeTool, Hook, HookContext, HookPoint};
use adk_grpc_core::{AdkError, CallbackContext, Content, LlmRequest, LlmResponse, Result, ToolContext};
use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

type Reply<T> = BoxFuture<'static, Result<T>>;
type AgentFn = Box<dyn Fn(Arc<dyn CallbackContext>) -> Reply<Option<Content>> + Send + Sync>;
type BeforeModelFn = Box<dyn Fn(Arc<dyn CallbackContext>, LlmRequest) -> Reply<BeforeModel> + Send + Sync>;
type AfterModelFn = Box<dyn Fn(Arc<dyn CallbackContext>, LlmResponse) -> Reply<LlmResponse> + Send + Sync>;
type ModelErrorFn =
    Box<dyn Fn(Arc<dyn CallbackContext>, &LlmRequest, &AdkError) -> Reply<Option<LlmResponse>> + Send + Sync>;
type BeforeToolFn = Box<dyn Fn(Arc<dyn ToolContext>, String, Value) -> Reply<BeforeTool> + Send + Sync>;
type AfterToolFn = Box<dyn Fn(Arc<dyn ToolContext>, String, Value, Value) -> Reply<Value> + Send + Sync>;
type ToolErrorFn = Box<dyn Fn(Arc<dyn ToolContext>, String, Value, &AdkError) -> Reply<Option<Value>> + Send + Sync>;

/// A Rust closure called at one point (what it returns means what the [`Hook`]
/// method of that point returns). Give it to an agent with
/// `LlmAgentBuilder::hook` or in its [`super::Hooks`].
pub struct Callback {
    point: HookPoint,
    call: Call,
}

enum Call {
    Agent(AgentFn),
    BeforeModel(BeforeModelFn),
    AfterModel(AfterModelFn),
    ModelError(ModelErrorFn),
    BeforeTool(BeforeToolFn),
    AfterTool(AfterToolFn),
    ToolError(ToolErrorFn),
}

impl Callback {
    /// Before the agent runs: Some is its reply instead (the agent is skipped).
    pub fn before_agent<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<Content>>> + Send + 'static,
    {
        Self::at(
            HookPoint::BeforeAgent,
            Call::Agent(Box::new(move |ctx| Box::pin(callback(ctx)))),
        )
    }

    /// After the agent's events: Some is a reply added after them.
    pub fn after_agent<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<Content>>> + Send + 'static,
    {
        Self::at(
            HookPoint::AfterAgent,
            Call::Agent(Box::new(move |ctx| Box::pin(callback(ctx)))),
        )
    }

    /// Before each model call: the request to send (the same or changed), or the
    /// model's reply instead.
    pub fn before_model<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<BeforeModel>> + Send + 'static,
    {
        let call = Call::BeforeModel(Box::new(move |ctx, request| Box::pin(callback(ctx, request))));
        Self::at(HookPoint::BeforeModel, call)
    }

    /// On each complete model reply: the reply to use (the same or a replacement).
    pub fn after_model<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, LlmResponse) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<LlmResponse>> + Send + 'static,
    {
        let call = Call::AfterModel(Box::new(move |ctx, response| Box::pin(callback(ctx, response))));
        Self::at(HookPoint::AfterModel, call)
    }

    /// When a model call fails: Some is the reply instead, None lets the error stand.
    pub fn on_model_error<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn CallbackContext>, &LlmRequest, &AdkError) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<LlmResponse>>> + Send + 'static,
    {
        let call = Call::ModelError(Box::new(move |ctx, request: &LlmRequest, error: &AdkError| {
            Box::pin(callback(ctx, request, error))
        }));
        Self::at(HookPoint::OnModelError, call)
    }

    /// Before each tool call, with the tool's name and the arguments: the arguments to
    /// call it with (the same or changed), or its result instead.
    pub fn before_tool<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn ToolContext>, String, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<BeforeTool>> + Send + 'static,
    {
        let call = Call::BeforeTool(Box::new(move |ctx, tool, args| Box::pin(callback(ctx, tool, args))));
        Self::at(HookPoint::BeforeTool, call)
    }

    /// On each tool result, with the tool's name, the arguments and the result: the
    /// result the model reads.
    pub fn after_tool<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn ToolContext>, String, Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value>> + Send + 'static,
    {
        let call = Call::AfterTool(Box::new(move |ctx, tool, args, response| {
            Box::pin(callback(ctx, tool, args, response))
        }));
        Self::at(HookPoint::AfterTool, call)
    }

    /// When a tool call fails or names no tool of the agent: Some is the result
    /// instead, None leaves the error for the model to read.
    pub fn on_tool_error<F, Fut>(callback: F) -> Self
    where
        F: Fn(Arc<dyn ToolContext>, String, Value, &AdkError) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<Value>>> + Send + 'static,
    {
        let call = Call::ToolError(Box::new(move |ctx, tool, args, error: &AdkError| {
            Box::pin(callback(ctx, tool, args, error))
        }));
        Self::at(HookPoint::OnToolError, call)
    }

    fn at(point: HookPoint, call: Call) -> Self {
        Callback { point, call }
    }

    fn callback_context(ctx: &HookContext) -> Arc<dyn CallbackContext> {
        ctx.invocation().clone()
    }
}

/// The chain calls a callback only at its point: each method answers for its own
/// point and is the trait's "nothing to say" at the others.
#[async_trait]
impl Hook for Callback {
    fn points(&self) -> &[HookPoint] {
        std::slice::from_ref(&self.point)
    }

    async fn before_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        match &self.call {
            Call::Agent(callback) if self.point == HookPoint::BeforeAgent => {
                callback(Self::callback_context(ctx)).await
            }
            _ => Ok(None),
        }
    }

    async fn after_agent(&self, ctx: &HookContext) -> Result<Option<Content>> {
        match &self.call {
            Call::Agent(callback) if self.point == HookPoint::AfterAgent => callback(Self::callback_context(ctx)).await,
            _ => Ok(None),
        }
    }

    async fn before_model(&self, ctx: &HookContext, request: LlmRequest) -> Result<BeforeModel> {
        match &self.call {
            Call::BeforeModel(callback) => callback(Self::callback_context(ctx), request).await,
            _ => Ok(BeforeModel::Continue(request)),
        }
    }

    async fn after_model(&self, ctx: &HookContext, response: LlmResponse) -> Result<LlmResponse> {
        match &self.call {
            Call::AfterModel(callback) => callback(Self::callback_context(ctx), response).await,
            _ => Ok(response),
        }
    }

    async fn on_model_error(
        &self,
        ctx: &HookContext,
        request: &LlmRequest,
        error: &AdkError,
    ) -> Result<Option<LlmResponse>> {
        match &self.call {
            Call::ModelError(callback) => callback(Self::callback_context(ctx), request, error).await,
            _ => Ok(None),
        }
    }

    async fn before_tool(&self, ctx: &HookContext, tool: &str, args: Value) -> Result<BeforeTool> {
        match &self.call {
            Call::BeforeTool(callback) => callback(ctx.tool_context().clone(), tool.to_string(), args).await,
            _ => Ok(BeforeTool::Continue(args)),
        }
    }

    async fn after_tool(&self, ctx: &HookContext, tool: &str, args: &Value, response: Value) -> Result<Value> {
        match &self.call {
            Call::AfterTool(callback) => {
                callback(ctx.tool_context().clone(), tool.to_string(), args.clone(), response).await
            }
            _ => Ok(response),
        }
    }

    async fn on_tool_error(
        &self,
        ctx: &HookContext,
        tool: &str,
        args: &Value,
        error: &AdkError,
    ) -> Result<Option<Value>> {
        match &self.call {
            Call::ToolError(callback) => {
                callback(ctx.tool_context().clone(), tool.to_string(), args.clone(), error).await
            }
            _ => Ok(None),
        }
    }
}
