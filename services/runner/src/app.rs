//! An app the service runs: a [`Runner`] and a description of its agent tree
//! for `ListApps` / `GetApp`.
//!
//! The description is kept beside the runner because the `Agent` trait tells
//! only names, descriptions and sub-agents: an agent's kind, model and tools are
//! known to whoever built it (the agents file, or Rust code), not to the trait.

use adk_grpc_agents::{McpConnectionState, McpToolset, McpTransport, Runner};
use adk_grpc_core::convert::json_to_proto;
use adk_grpc_core::{Agent, Tool};
use adk_grpc_proto::v1 as pb;
use serde_json::Value;
use std::sync::Arc;

/// One app: a named root agent with its runner. Cheap to clone.
#[derive(Clone)]
pub struct App {
    runner: Arc<Runner>,
    root_agent: AgentDescription,
}

impl App {
    /// An app described from the `Agent` trait alone: names, descriptions and the
    /// tree, every agent of kind "custom". Use [`App::with_description`] to tell
    /// clients the kinds, models and tools.
    pub fn new(runner: impl Into<Arc<Runner>>) -> App {
        let runner = runner.into();
        let root_agent = AgentDescription::of(runner.root_agent());
        App { runner, root_agent }
    }

    /// An app whose agent tree `GetApp` shows as `root_agent` describes it.
    pub fn with_description(runner: impl Into<Arc<Runner>>, root_agent: AgentDescription) -> App {
        App {
            runner: runner.into(),
            root_agent,
        }
    }

    /// The app name, as `RunRequest.app_name` gives it.
    pub fn name(&self) -> &str {
        self.runner.app_name()
    }

    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    pub fn root_agent(&self) -> &AgentDescription {
        &self.root_agent
    }
}

impl From<&App> for pb::App {
    fn from(app: &App) -> Self {
        pb::App {
            name: app.name().to_string(),
            root_agent: Some(pb::AgentInfo::from(&app.root_agent)),
        }
    }
}

/// One agent of an app's tree, as `GetApp` shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentDescription {
    pub name: String,
    pub description: String,
    /// "llm", "sequential", "parallel", "loop" or "custom".
    pub kind: String,
    /// The model an LLM agent calls (e.g. "gpt-4o-mini"); empty for other kinds.
    pub model: String,
    pub tools: Vec<ToolDescription>,
    pub sub_agents: Vec<AgentDescription>,
    /// An LLM agent's mode ("chat", "task", "single_turn"); empty for other kinds.
    pub mode: String,
}

impl AgentDescription {
    pub const CUSTOM: &'static str = "custom";

    /// What the `Agent` trait tells of `agent` and its sub-agents; kind "custom".
    pub fn of(agent: &Arc<dyn Agent>) -> Self {
        AgentDescription {
            name: agent.name().to_string(),
            description: agent.description().to_string(),
            kind: Self::CUSTOM.to_string(),
            model: String::new(),
            tools: Vec::new(),
            sub_agents: agent.sub_agents().iter().map(AgentDescription::of).collect(),
            mode: String::new(),
        }
    }
}

impl From<&AgentDescription> for pb::AgentInfo {
    fn from(agent: &AgentDescription) -> Self {
        pb::AgentInfo {
            name: agent.name.clone(),
            description: agent.description.clone(),
            kind: agent.kind.clone(),
            model: agent.model.clone(),
            tools: agent.tools.iter().map(pb::ToolInfo::from).collect(),
            sub_agents: agent.sub_agents.iter().map(pb::AgentInfo::from).collect(),
            mode: agent.mode.clone(),
        }
    }
}

/// A tool as the model sees it, or a toolset whose tools the model gets at run time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolDescription {
    pub name: String,
    pub description: String,
    pub parameters_schema: Option<Value>,
    pub response_schema: Option<Value>,
    pub long_running: bool,
    /// For a toolset: asked, each time the app is described, for its connection
    /// and its tools as last listed.
    pub toolset: Option<DescribedToolset>,
}

impl ToolDescription {
    pub fn of(tool: &dyn Tool) -> Self {
        ToolDescription {
            name: tool.name().to_string(),
            description: tool.description().to_string(),
            parameters_schema: tool.parameters_schema(),
            response_schema: tool.response_schema(),
            long_running: tool.is_long_running(),
            toolset: None,
        }
    }

    /// An MCP toolset: named as declared, described by its server; `GetApp` adds
    /// its tools once the runner has listed them.
    pub fn mcp_toolset(toolset: &Arc<McpToolset>) -> Self {
        let server = match toolset.transport() {
            McpTransport::Stdio { command, args, .. } => format!("stdio: {command} {}", args.join(" ")),
            McpTransport::Http { url, .. } => format!("streamable HTTP: {url}"),
        };
        ToolDescription {
            name: adk_grpc_core::Toolset::name(toolset.as_ref()).to_string(),
            description: format!("MCP toolset: the tools of the MCP server ({})", server.trim_end()),
            toolset: Some(DescribedToolset(toolset.clone())),
            ..ToolDescription::default()
        }
    }
}

/// The toolset a [`ToolDescription`] stands for; equal when it is the same toolset.
#[derive(Clone)]
pub struct DescribedToolset(pub Arc<McpToolset>);

impl PartialEq for DescribedToolset {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for DescribedToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DescribedToolset")
            .field(&adk_grpc_core::Toolset::name(self.0.as_ref()))
            .finish()
    }
}

impl From<&DescribedToolset> for pb::ToolsetInfo {
    /// What the toolset knows now; describing never connects it.
    fn from(toolset: &DescribedToolset) -> Self {
        let status = toolset.0.status();
        let state = match status.state {
            McpConnectionState::NotStarted => pb::ToolsetState::NotStarted,
            McpConnectionState::Connecting => pb::ToolsetState::Connecting,
            McpConnectionState::Connected => pb::ToolsetState::Connected,
            McpConnectionState::Failing => pb::ToolsetState::Failing,
        };
        pb::ToolsetInfo {
            state: state.into(),
            error: status.error.unwrap_or_default(),
            tools_known: status.tools.is_some(),
            tools: status
                .tools
                .unwrap_or_default()
                .iter()
                .map(|tool| pb::ToolInfo::from(&ToolDescription::of(tool.as_ref())))
                .collect(),
        }
    }
}

impl From<&ToolDescription> for pb::ToolInfo {
    fn from(tool: &ToolDescription) -> Self {
        pb::ToolInfo {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters_schema: tool.parameters_schema.as_ref().map(json_to_proto),
            response_schema: tool.response_schema.as_ref().map(json_to_proto),
            long_running: tool.long_running,
            toolset: tool.toolset.as_ref().map(pb::ToolsetInfo::from),
        }
    }
}
