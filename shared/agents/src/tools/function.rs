//! `FunctionTool` (a Rust closure as a tool) and `ClientTool` (a tool the client runs).

use adk_grpc_core::{Result, Tool, ToolContext};
use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

type Handler = Arc<dyn Fn(Arc<dyn ToolContext>, Value) -> BoxFuture<'static, Result<Value>> + Send + Sync>;

/// A tool whose body is an async Rust closure.
///
/// ```
/// # use adk_grpc_agents::FunctionTool;
/// # use serde_json::json;
/// let add = FunctionTool::new("add", "Adds a and b.", |_ctx, args| async move {
///     let (a, b) = (args["a"].as_f64().unwrap_or(0.0), args["b"].as_f64().unwrap_or(0.0));
///     Ok(json!({ "sum": a + b }))
/// })
/// .with_parameters_schema(json!({
///     "type": "object",
///     "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
///     "required": ["a", "b"]
/// }));
/// ```
#[derive(Clone)]
pub struct FunctionTool {
    name: String,
    description: String,
    parameters: Option<Value>,
    response: Option<Value>,
    long_running: bool,
    handler: Handler,
}

impl FunctionTool {
    pub fn new<F, Fut>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Arc<dyn ToolContext>, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value>> + Send + 'static,
    {
        FunctionTool {
            name: name.into(),
            description: description.into(),
            parameters: None,
            response: None,
            long_running: false,
            handler: Arc::new(move |ctx, args| Box::pin(handler(ctx, args))),
        }
    }

    pub fn with_parameters_schema(mut self, schema: Value) -> Self {
        self.parameters = Some(schema);
        self
    }

    pub fn with_response_schema(mut self, schema: Value) -> Self {
        self.response = Some(schema);
        self
    }

    /// Marks the tool long-running (see [`Tool::is_long_running`]).
    pub fn long_running(mut self) -> Self {
        self.long_running = true;
        self
    }
}

#[async_trait]
impl Tool for FunctionTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters_schema(&self) -> Option<Value> {
        self.parameters.clone()
    }
    fn response_schema(&self) -> Option<Value> {
        self.response.clone()
    }
    fn is_long_running(&self) -> bool {
        self.long_running
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        (self.handler)(ctx, args).await
    }
}

/// A tool the client executes. Nothing runs on the server: the model's call is
/// streamed to the client as a long-running call (its id in the event's
/// `long_running_tool_ids`), the turn ends there, and the client resumes by
/// sending a user message with a `function_response` part carrying that id.
#[derive(Debug, Clone)]
pub struct ClientTool {
    name: String,
    description: String,
    parameters: Option<Value>,
}

impl ClientTool {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ClientTool {
            name: name.into(),
            description: description.into(),
            parameters: None,
        }
    }

    pub fn with_parameters_schema(mut self, schema: Value) -> Self {
        self.parameters = Some(schema);
        self
    }
}

#[async_trait]
impl Tool for ClientTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters_schema(&self) -> Option<Value> {
        self.parameters.clone()
    }
    fn is_long_running(&self) -> bool {
        true
    }
    /// No response yet: the client will send it.
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, _args: Value) -> Result<Value> {
        Ok(Value::Null)
    }
}
