//! Tools the model can call (ADK's `BaseTool`) and toolsets that provide them per context.

use crate::context::{CallbackContext, ReadonlyContext, ToolContext};
use crate::error::Result;
use crate::model::{LlmRequest, ToolDeclaration};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

#[async_trait]
pub trait Tool: Send + Sync {
    /// The function name the model calls.
    fn name(&self) -> &str;

    /// What the tool does and when to use it, for the model.
    fn description(&self) -> &str;

    /// JSON Schema of the arguments.
    fn parameters_schema(&self) -> Option<Value> {
        None
    }

    /// JSON Schema of the result.
    fn response_schema(&self) -> Option<Value> {
        None
    }

    /// A long-running call ends the agent's turn: its id goes into the event's
    /// `long_running_tool_ids` and the model is not called again until the client
    /// sends the function response. `execute` runs at once and may return an
    /// interim result (e.g. a task id); `Value::Null` means "no response yet".
    fn is_long_running(&self) -> bool {
        false
    }

    /// Runs the call. An `Err` becomes an `{"error": ...}` response the model sees.
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value>;

    /// Adjusts a model request before it is sent (e.g. to add instructions or
    /// content); most tools leave it alone.
    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, _request: &mut LlmRequest) -> Result<()> {
        Ok(())
    }

    /// The tool as the model sees it.
    fn declaration(&self) -> ToolDeclaration {
        ToolDeclaration {
            name: self.name().to_string(),
            description: self.description().to_string(),
            parameters: self.parameters_schema(),
        }
    }
}

/// Tools chosen at run time (by user, permissions, a remote catalogue...).
#[async_trait]
pub trait Toolset: Send + Sync {
    fn name(&self) -> &str;

    /// The tools available in this context.
    async fn tools(&self, ctx: Arc<dyn ReadonlyContext>) -> Result<Vec<Arc<dyn Tool>>>;
}
