//! The agents file as written: what serde reads, with `deny_unknown_fields`
//! everywhere (a misspelt key is an error, not a silent default).

use adk_grpc_agents::AddToMemory;
use adk_grpc_core::GenerateContentConfig;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentsFile {
    /// Read as JSON values, then as [`ProviderConfig`]s: the mock's script uses
    /// externally tagged enums (`- text: hi`), which serde's YAML readers only
    /// accept as YAML tags (`- !text hi`), while JSON values take the map form.
    #[serde(default)]
    pub(super) models: BTreeMap<String, Value>,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, ToolConfig>,
    #[serde(default)]
    pub(super) apps: BTreeMap<String, AppConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ToolKind {
    Http,
    Client,
    Mcp,
}

impl ToolKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ToolKind::Http => "http",
            ToolKind::Client => "client",
            ToolKind::Mcp => "mcp",
        }
    }
}

/// How an `mcp` tool reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum McpTransportKind {
    Stdio,
    Http,
}

/// One struct for every kind (rather than a tagged enum) so serde keeps the line
/// numbers of its errors and the checks can say which field does not fit the kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolConfig {
    pub(super) kind: ToolKind,
    #[serde(default)]
    pub(super) description: String,
    /// JSON Schema (an object schema) of the arguments.
    #[serde(default)]
    pub(super) parameters: Option<Value>,
    /// http: where the call's arguments are POSTed.
    #[serde(default)]
    pub(super) url: Option<String>,
    /// http, mcp: how long one call may take [default: 30 for http, 60 for mcp].
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// http, mcp over http: header name -> the NAME of the environment variable
    /// holding its value, so the file holds no secret.
    #[serde(default)]
    pub(super) headers_from_env: BTreeMap<String, String>,
    /// mcp: `stdio` (a child process) or `http` (streamable HTTP at `url`).
    #[serde(default)]
    pub(super) transport: Option<McpTransportKind>,
    /// mcp over stdio: the program to start, its arguments, its working directory.
    #[serde(default)]
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) working_dir: Option<String>,
    /// mcp over stdio: environment variables of the child, as values...
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// ...or as the NAME of the runner's variable holding the value (secrets).
    #[serde(default)]
    pub(super) env_from_env: BTreeMap<String, String>,
    /// mcp over http: the NAME of the variable holding a bearer token.
    #[serde(default)]
    pub(super) bearer_token_env: Option<String>,
    /// mcp: only these of the server's tools are offered.
    #[serde(default)]
    pub(super) tool_filter: Option<Vec<String>>,
    /// mcp: the model sees the server's `echo` as `<tool_prefix>_echo`.
    #[serde(default)]
    pub(super) tool_prefix: Option<String>,
    /// mcp: how long starting the server and the handshake may take [default: 30].
    #[serde(default)]
    pub(super) connect_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AppConfig {
    pub(super) root_agent: AgentConfig,
    /// Event compaction and the model requests' token budget (adk_grpc_core::CompactionConfig).
    #[serde(default)]
    pub(super) compaction: Option<CompactionFileConfig>,
    /// What a Run does when the session is busy and the request does not say
    /// [default: reject].
    #[serde(default)]
    pub(super) on_busy: OnBusyConfig,
    /// Long-term memory: what to add to it after each invocation.
    #[serde(default)]
    pub(super) memory: Option<MemoryConfig>,
}

/// `compaction:` of an app, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CompactionFileConfig {
    /// Summarise after this many new invocations (at least 1).
    pub(super) interval: Option<u32>,
    /// The newest invocations left out of a summary [default: 0].
    #[serde(default)]
    pub(super) overlap: u32,
    /// The declared model that writes summaries.
    pub(super) model: Option<String>,
    /// The most estimated tokens a model request may carry.
    #[serde(default)]
    pub(super) token_budget: Option<usize>,
}

/// `on_busy` in the agents file: the names of `adk.v1.OnBusy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum OnBusyConfig {
    #[default]
    Reject,
    Enqueue,
    Interrupt,
    Rollback,
}

impl From<OnBusyConfig> for adk_grpc_agents::OnBusy {
    fn from(config: OnBusyConfig) -> Self {
        match config {
            OnBusyConfig::Reject => adk_grpc_agents::OnBusy::Reject,
            OnBusyConfig::Enqueue => adk_grpc_agents::OnBusy::Enqueue,
            OnBusyConfig::Interrupt => adk_grpc_agents::OnBusy::Interrupt,
            OnBusyConfig::Rollback => adk_grpc_agents::OnBusy::Rollback,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MemoryConfig {
    /// `invocation` (its events) or `session` (the whole session) after each invocation.
    pub(super) add: AddToMemoryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AddToMemoryKind {
    Invocation,
    Session,
}

impl From<AddToMemoryKind> for AddToMemory {
    fn from(kind: AddToMemoryKind) -> Self {
        match kind {
            AddToMemoryKind::Invocation => AddToMemory::Invocation,
            AddToMemoryKind::Session => AddToMemory::Session,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AgentKind {
    #[default]
    Llm,
    Sequential,
    Parallel,
    Loop,
    /// Runs elsewhere, reached over A2A's gRPC binding (`lf.a2a.v1.A2AService`).
    A2a,
}

impl AgentKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            AgentKind::Llm => "llm",
            AgentKind::Sequential => "sequential",
            AgentKind::Parallel => "parallel",
            AgentKind::Loop => "loop",
            AgentKind::A2a => "a2a",
        }
    }
}

/// ADK's `include_contents`, by its values' names.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum IncludeContents {
    Default,
    None,
}

impl From<IncludeContents> for adk_grpc_agents::IncludeContents {
    fn from(include: IncludeContents) -> Self {
        match include {
            IncludeContents::Default => adk_grpc_agents::IncludeContents::Default,
            IncludeContents::None => adk_grpc_agents::IncludeContents::None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentConfig {
    /// Defaults to `llm`, the common case.
    #[serde(default)]
    pub(super) kind: AgentKind,
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    pub(super) instruction: Option<String>,
    #[serde(default)]
    pub(super) tools: Vec<String>,
    #[serde(default)]
    pub(super) sub_agents: Vec<AgentConfig>,
    #[serde(default)]
    pub(super) output_key: Option<String>,
    /// llm: `none` sends the model only the current turn (ADK's `include_contents`).
    #[serde(default)]
    pub(super) include_contents: Option<IncludeContents>,
    #[serde(default)]
    pub(super) max_iterations: Option<u32>,
    #[serde(default)]
    pub(super) generation: Option<GenerationConfig>,
    /// a2a: the remote agent's gRPC endpoint, `http://host:port` or `https://host:port`.
    #[serde(default)]
    pub(super) endpoint: Option<String>,
    /// a2a: the remote's tenant (on an ADK server: the app), when it serves several.
    #[serde(default)]
    pub(super) tenant: Option<String>,
    /// a2a over https: a CA certificate (PEM file) trusted besides the OS's roots.
    #[serde(default)]
    pub(super) ca_file: Option<String>,
    /// a2a: the NAME of the environment variable holding a bearer token.
    #[serde(default)]
    pub(super) bearer_token_env: Option<String>,
    /// a2a: offered to the parent (an llm agent) as a tool it calls, not a transfer target.
    #[serde(default)]
    pub(super) as_tool: bool,
}

/// The model's generation settings; any left out are the provider's defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GenerationConfig {
    #[serde(default)]
    pub(super) temperature: Option<f32>,
    #[serde(default)]
    pub(super) top_p: Option<f32>,
    #[serde(default)]
    pub(super) max_output_tokens: Option<i32>,
    #[serde(default)]
    pub(super) stop_sequences: Vec<String>,
}

impl From<&GenerationConfig> for GenerateContentConfig {
    fn from(g: &GenerationConfig) -> Self {
        GenerateContentConfig {
            temperature: g.temperature,
            top_p: g.top_p,
            max_output_tokens: g.max_output_tokens,
            stop_sequences: g.stop_sequences.clone(),
        }
    }
}

impl AppConfig {
    /// The models the app's agents and its summariser name, as written.
    pub(super) fn model_names(&self) -> Vec<&str> {
        fn walk<'a>(agent: &'a AgentConfig, names: &mut Vec<&'a str>) {
            names.extend(agent.model.as_deref());
            agent.sub_agents.iter().for_each(|sub| walk(sub, names));
        }
        let mut names = Vec::new();
        walk(&self.root_agent, &mut names);
        names.extend(self.compaction.as_ref().and_then(|c| c.model.as_deref()));
        names
    }
}
