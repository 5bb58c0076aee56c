//! Tools for LLM agents: Rust closures, HTTP endpoints, client-side tools, MCP
//! servers' tools, and ADK's built-ins.

mod builtin;
mod function;
mod http;
mod mcp;
mod memory;

pub(crate) use builtin::TransferToAgentTool;
pub use builtin::{ExitLoopTool, LoadArtifactsTool};
pub use function::{ClientTool, FunctionTool};
pub use http::HttpTool;
pub use mcp::{McpToolset, McpTransport};
pub use memory::{LoadMemoryTool, PreloadMemoryTool};
