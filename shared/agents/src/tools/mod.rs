//! Tools for LLM agents: Rust closures, HTTP endpoints, client-side tools, MCP
//! servers' tools, OpenAPI operations, and ADK's built-ins.

pub(crate) mod agent_tool;
mod builtin;
mod function;
mod http;
mod mcp;
mod mcp_stdio;
mod memory;
mod model_consult;
mod openapi;
mod remote_context;
mod remote_part;
mod reply_limit;
mod session_reads;
mod untrusted;

pub use agent_tool::AgentTool;
pub(crate) use builtin::TransferToAgentTool;
pub use builtin::{ExitLoopTool, LoadArtifactsTool, ProviderBuiltinTool};
pub use function::{ClientTool, FunctionTool};
pub use http::HttpTool;
pub use mcp::{ACTIONS_META_KEY, CONTEXT_META_KEY, McpConnectionState, McpToolset, McpToolsetStatus, McpTransport};
pub use memory::{LoadMemoryTool, PreloadMemoryTool};
pub use model_consult::{ConsultContext, MODEL_CONSULT_TOOL_NAME, ModelConsultTool};
pub use openapi::OpenApiToolset;
pub use remote_context::{ContextGrant, ToolActions};
pub(crate) use remote_part::part_json;
pub(crate) use reply_limit::within_reply_limit;

use adk_grpc_core::Tool;
use std::sync::Arc;

/// The names of the tools the library provides, which agents list without declaring them.
pub const BUILTIN_TOOLS: [&str; 8] = [
    ExitLoopTool::NAME,
    LoadArtifactsTool::NAME,
    LoadMemoryTool::NAME,
    PreloadMemoryTool::NAME,
    ProviderBuiltinTool::GOOGLE_SEARCH,
    ProviderBuiltinTool::URL_CONTEXT,
    ProviderBuiltinTool::CODE_EXECUTION,
    ProviderBuiltinTool::GOOGLE_MAPS,
];

/// The built-in tool called `name` (one of [`BUILTIN_TOOLS`]).
pub fn builtin_tool(name: &str) -> Option<Arc<dyn Tool>> {
    match name {
        ExitLoopTool::NAME => Some(Arc::new(ExitLoopTool)),
        LoadArtifactsTool::NAME => Some(Arc::new(LoadArtifactsTool)),
        LoadMemoryTool::NAME => Some(Arc::new(LoadMemoryTool)),
        PreloadMemoryTool::NAME => Some(Arc::new(PreloadMemoryTool)),
        other => ProviderBuiltinTool::named(other).map(|tool| Arc::new(tool) as Arc<dyn Tool>),
    }
}
