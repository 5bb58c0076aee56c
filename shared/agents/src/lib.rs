//! Runs ADK agents, as `docs/semantics.md` section 7 (Runner) describes.
//!
//! - [`LlmAgent`] (built with [`LlmAgentBuilder`]): a model with an instruction,
//!   tools, sub-agents to transfer to, `output_key`, model callbacks;
//! - workflow agents [`SequentialAgent`], [`ParallelAgent`], [`LoopAgent`];
//! - tools: [`FunctionTool`] (an async closure), [`HttpTool`] (an HTTP endpoint),
//!   [`ClientTool`] (executed by the client), [`McpToolset`] (the tools of a
//!   Model Context Protocol server, over stdio or streamable HTTP), and ADK's built-ins
//!   [`ExitLoopTool`] and [`LoadArtifactsTool`] (`transfer_to_agent` is offered
//!   by itself to agents with sub-agents);
//! - [`hooks`]: ADK's callbacks and plugins, one [`Hook`] trait at every point, served
//!   by HTTP endpoints in any language ([`HttpHook`], per agent or app-wide) or written
//!   as Rust closures ([`Callback`]);
//! - [`Runner`]: runs an agent tree on a session, stores every complete event
//!   before streaming it, keeps one invocation per session at a time;
//! - [`a2a`]: Agent2Agent both ways: an app served as an A2A agent
//!   ([`a2a::A2aTaskService`]), and agents served elsewhere over A2A as agents or tools
//!   of ours ([`a2a::RemoteA2aAgent`], [`a2a::RemoteA2aTool`]).
//!
//! ```no_run
//! # use adk_grpc_agents::*;
//! # use adk_grpc_core::{Content, Llm, SessionLease, SessionService};
//! # use futures::StreamExt;
//! # use std::sync::Arc;
//! # async fn demo(model: Arc<dyn Llm>, sessions: Arc<dyn SessionService>, lease: Arc<dyn SessionLease>) -> adk_grpc_core::Result<()> {
//! let agent = LlmAgentBuilder::new("assistant").instruction("Be brief.").model(model).build()?;
//! let runner = Runner::new(RunnerConfig::new("my_app", Arc::new(agent), sessions, lease))?;
//! let options = RunOptions { create_session_if_missing: true, ..Default::default() };
//! let mut events = runner.run("user1", "session1", Content::new("user").with_text("Hi"), options).await?;
//! while let Some(event) = events.next().await {
//!     let event = event?;
//!     if let Some(text) = event.content().and_then(Content::text) {
//!         println!("{}: {text}", event.author);
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod a2a;
mod agent_hooks;
mod compaction;
mod context;
mod convert;
pub mod hooks;
mod http_json;
mod instruction;
mod json_schema;
mod large_reply;
mod llm;
mod pydantic_errors;
mod python_repr;
mod rules;
mod run_state;
mod runner;
mod state_schema;
mod timeout;
mod tools;
mod workflow;

pub use adk_grpc_core::CompactionConfig;
pub use agent_hooks::with_agent_hooks;
pub use context::ToolCallContext;
pub use convert::RunRequest;
pub use hooks::{
    BeforeModel, BeforeTool, Callback, Decision, FailurePolicy, Hook, HookContext, HookPoint, Hooks, HttpHook,
};
pub use large_reply::LargeReply;
pub use llm::{
    ClassValidator, Example, HttpClassValidator, IncludeContents, LlmAgent, LlmAgentBuilder, RetryConfig,
    SET_MODEL_RESPONSE_TOOL_NAME, SchemaClass, StaticInstruction, StaticPart, Unvalidated, ValidateClass,
    check_examples, check_object_schema, check_schema,
};
pub use rules::{
    AgentNames, MAX_TOOL_NAME_CHARS, TRANSFER_TOOL_NAME, USER_AUTHOR, is_identifier, is_tool_name, validate_agent_name,
    validate_output_key, validate_tool_list, validate_tool_name,
};
pub use runner::{AddToMemory, OnBusy, ResumabilityConfig, Resumer, RunOptions, Runner, RunnerConfig, StartedRun};
pub use state_schema::StateSchema;
pub use timeout::with_timeout;
pub use tools::{
    ACTIONS_META_KEY, AgentTool, BUILTIN_TOOLS, CONTEXT_META_KEY, ClientTool, ContextGrant, ExitLoopTool, FunctionTool,
    HttpTool, LoadArtifactsTool, LoadMemoryTool, McpConnectionState, McpToolset, McpToolsetStatus, McpTransport,
    OpenApiToolset, PreloadMemoryTool, ProviderBuiltinTool, ToolActions, builtin_tool,
};
pub use tools::{ConsultContext, MODEL_CONSULT_TOOL_NAME, ModelConsultTool};
pub use workflow::{LoopAgent, ParallelAgent, SequentialAgent};
