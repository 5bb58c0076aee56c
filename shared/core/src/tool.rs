//! Tools the model can call (ADK's `BaseTool`) and toolsets that provide them per context.

use crate::content::Part;
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

    /// A long-running call's id goes into the event's `long_running_tool_ids`.
    /// `execute` runs at once: `Value::Null` means "no response yet", and the call
    /// ends the agent's turn until the client sends the function response; an
    /// interim result (e.g. a task id, "pending") is the model's to read, and the
    /// agent goes on, as ADK's `LongRunningFunctionTool`.
    fn is_long_running(&self) -> bool {
        false
    }

    /// A tool the model's provider runs itself (Gemini's `google_search`): it is not
    /// declared as a function; it names itself in the request in
    /// [`Tool::process_llm_request`] and is never executed here.
    fn is_provider_builtin(&self) -> bool {
        false
    }

    /// Whether the tool reads the agent's tools off the step's request
    /// ([`LlmRequest::agent_tools`], the model consult's inventory): only a step with
    /// such a tool lists them.
    fn lists_agent_tools(&self) -> bool {
        false
    }

    /// Whether the call may run again with the same arguments when the runner that
    /// made it died before storing its response (a read, or a write keyed by the
    /// call): a resumed invocation re-runs such a call, and answers any other with
    /// an error saying it was interrupted (`docs/semantics.md`, Runner 27).
    fn safe_to_repeat(&self) -> bool {
        false
    }

    /// Runs the call. An `Err` becomes an `{"error": ...}` response the model sees.
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value>;

    /// Runs the call for the agent: the response plus any media the tool produced
    /// (e.g. an MCP tool's images), which go into the tool event next to the
    /// function response as their own parts, so the model sees them as media and
    /// not as base64 text. By default [`Tool::execute`] with no media.
    async fn execute_with_parts(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<ToolOutput> {
        Ok(ToolOutput::new(self.execute(ctx, args).await?))
    }

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
            response: self.response_schema(),
        }
    }
}

/// What a tool call produced: the function response and, after it, media parts.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub response: Value,
    pub parts: Vec<Part>,
}

impl ToolOutput {
    pub fn new(response: Value) -> Self {
        ToolOutput {
            response,
            parts: Vec::new(),
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
