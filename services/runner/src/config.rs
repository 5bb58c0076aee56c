//! The agents file: models, tools and apps in YAML, checked as a whole when it is
//! loaded and turned into runners with the runner library's builders.
//!
//! ```yaml
//! models:                      # named model providers (adk_models::ProviderConfig)
//!   fast: { provider: mock }
//!   smart: { provider: openai, model: gpt-4o-mini, api_key_env: OPENAI_API_KEY }
//! tools:                       # named tools agents refer to
//!   get_weather:
//!     kind: http               # POSTs the call's JSON arguments, the JSON reply is the result
//!     url: http://localhost:8080/weather
//!     description: Current weather of a city.
//!     parameters: { type: object, properties: { city: { type: string } }, required: [city] }
//!   confirm:
//!     kind: client             # long-running: the gRPC client runs it and answers with a function_response
//!     description: Asks the user to confirm.
//!   files:
//!     kind: mcp                # every tool of an MCP server (a toolset), over stdio or streamable HTTP
//!     transport: stdio
//!     command: npx
//!     args: [-y, "@modelcontextprotocol/server-filesystem", /data]
//! apps:
//!   weather:
//!     root_agent:              # a tree: sub_agents are written inline
//!       name: assistant
//!       model: fast
//!       tools: [get_weather, confirm]
//!       sub_agents:
//!         - name: forecaster     # an agent served elsewhere over A2A's gRPC binding
//!           kind: a2a
//!           description: Long-range forecasts.
//!           endpoint: https://forecasts.example.com:443
//!           bearer_token_env: FORECASTS_TOKEN
//! ```
//!
//! `examples/agents.yaml` documents every field. The file is read with
//! `deny_unknown_fields` everywhere (a misspelt key is an error, not a silent
//! default), then every rule is checked and every problem reported at once, each
//! naming the file, the app, the agent and the field.

use crate::a2a::{RemoteA2aAgent, RemoteA2aConfig, RemoteA2aTool};
use crate::app::{AgentDescription, App, ToolDescription};
use crate::stores::RunnerServices;
use adk_core::{AdkError, Agent, CompactionConfig, GenerateContentConfig, Llm, Tool, Toolset};
use adk_models::{ProviderConfig, build_model};
use adk_runner::{
    AddToMemory, ClientTool, ExitLoopTool, HttpTool, LlmAgentBuilder, LoadArtifactsTool, LoadMemoryTool, LoopAgent,
    McpToolset, McpTransport, ParallelAgent, PreloadMemoryTool, Runner, SequentialAgent,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The tools the runner library provides; agents list them like declared tools.
const BUILTIN_TOOLS: [&str; 4] = [
    ExitLoopTool::NAME,
    LoadArtifactsTool::NAME,
    LoadMemoryTool::NAME,
    PreloadMemoryTool::NAME,
];
/// Offered by the library itself to every LLM agent with sub-agents: not declarable.
const TRANSFER_TOOL: &str = "transfer_to_agent";
/// The author of the user's events: no agent may be called that.
const USER_AUTHOR: &str = "user";
/// The longest function name OpenAI and Gemini accept.
const MAX_TOOL_NAME_CHARS: usize = 64;

// ---------- the file, as written ----------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    /// Read as JSON values, then as [`ProviderConfig`]s: the mock's script uses
    /// externally tagged enums (`- text: hi`), which serde's YAML readers only
    /// accept as YAML tags (`- !text hi`), while JSON values take the map form.
    #[serde(default)]
    models: BTreeMap<String, Value>,
    #[serde(default)]
    tools: BTreeMap<String, ToolConfig>,
    #[serde(default)]
    apps: BTreeMap<String, AppConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ToolKind {
    Http,
    Client,
    Mcp,
}

impl ToolKind {
    fn as_str(self) -> &'static str {
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
enum McpTransportKind {
    Stdio,
    Http,
}

/// One struct for every kind (rather than a tagged enum) so serde keeps the line
/// numbers of its errors and the checks can say which field does not fit the kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolConfig {
    kind: ToolKind,
    #[serde(default)]
    description: String,
    /// JSON Schema (an object schema) of the arguments.
    #[serde(default)]
    parameters: Option<Value>,
    /// http: where the call's arguments are POSTed.
    #[serde(default)]
    url: Option<String>,
    /// http, mcp: how long one call may take [default: 30 for http, 60 for mcp].
    #[serde(default)]
    timeout_secs: Option<u64>,
    /// http, mcp over http: header name -> the NAME of the environment variable
    /// holding its value, so the file holds no secret.
    #[serde(default)]
    headers_from_env: BTreeMap<String, String>,
    /// mcp: `stdio` (a child process) or `http` (streamable HTTP at `url`).
    #[serde(default)]
    transport: Option<McpTransportKind>,
    /// mcp over stdio: the program to start, its arguments, its working directory.
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    working_dir: Option<String>,
    /// mcp over stdio: environment variables of the child, as values...
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// ...or as the NAME of the runner's variable holding the value (secrets).
    #[serde(default)]
    env_from_env: BTreeMap<String, String>,
    /// mcp over http: the NAME of the variable holding a bearer token.
    #[serde(default)]
    bearer_token_env: Option<String>,
    /// mcp: only these of the server's tools are offered.
    #[serde(default)]
    tool_filter: Option<Vec<String>>,
    /// mcp: the model sees the server's `echo` as `<tool_prefix>_echo`.
    #[serde(default)]
    tool_prefix: Option<String>,
    /// mcp: how long starting the server and the handshake may take [default: 30].
    #[serde(default)]
    connect_timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppConfig {
    root_agent: AgentConfig,
    /// Event compaction and the model requests' token budget (adk_core::CompactionConfig).
    #[serde(default)]
    compaction: Option<CompactionFileConfig>,
    /// What a Run does when the session is busy and the request does not say
    /// [default: reject].
    #[serde(default)]
    on_busy: OnBusyConfig,
    /// Long-term memory: what to add to it after each invocation.
    #[serde(default)]
    memory: Option<MemoryConfig>,
}

/// `compaction:` of an app, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactionFileConfig {
    /// Summarise after this many new invocations (at least 1).
    interval: Option<u32>,
    /// The newest invocations left out of a summary [default: 0].
    #[serde(default)]
    overlap: u32,
    /// The declared model that writes summaries.
    model: Option<String>,
    /// The most estimated tokens a model request may carry.
    #[serde(default)]
    token_budget: Option<usize>,
}

/// `on_busy` in the agents file: the names of `adk.v1.OnBusy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OnBusyConfig {
    #[default]
    Reject,
    Enqueue,
    Interrupt,
    Rollback,
}

impl From<OnBusyConfig> for adk_runner::OnBusy {
    fn from(config: OnBusyConfig) -> Self {
        match config {
            OnBusyConfig::Reject => adk_runner::OnBusy::Reject,
            OnBusyConfig::Enqueue => adk_runner::OnBusy::Enqueue,
            OnBusyConfig::Interrupt => adk_runner::OnBusy::Interrupt,
            OnBusyConfig::Rollback => adk_runner::OnBusy::Rollback,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryConfig {
    /// `invocation` (its events) or `session` (the whole session) after each invocation.
    add: AddToMemoryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AddToMemoryKind {
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
enum AgentKind {
    #[default]
    Llm,
    Sequential,
    Parallel,
    Loop,
    /// Runs elsewhere, reached over A2A's gRPC binding (`lf.a2a.v1.A2AService`).
    A2a,
}

impl AgentKind {
    fn as_str(self) -> &'static str {
        match self {
            AgentKind::Llm => "llm",
            AgentKind::Sequential => "sequential",
            AgentKind::Parallel => "parallel",
            AgentKind::Loop => "loop",
            AgentKind::A2a => "a2a",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentConfig {
    /// Defaults to `llm`, the common case.
    #[serde(default)]
    kind: AgentKind,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    instruction: Option<String>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    sub_agents: Vec<AgentConfig>,
    #[serde(default)]
    output_key: Option<String>,
    #[serde(default)]
    max_iterations: Option<u32>,
    #[serde(default)]
    generation: Option<GenerationConfig>,
    /// a2a: the remote agent's gRPC endpoint, `http://host:port` or `https://host:port`.
    #[serde(default)]
    endpoint: Option<String>,
    /// a2a: the remote's tenant (on an ADK server: the app), when it serves several.
    #[serde(default)]
    tenant: Option<String>,
    /// a2a over https: a CA certificate (PEM file) trusted besides the OS's roots.
    #[serde(default)]
    ca_file: Option<String>,
    /// a2a: the NAME of the environment variable holding a bearer token.
    #[serde(default)]
    bearer_token_env: Option<String>,
    /// a2a: offered to the parent (an llm agent) as a tool it calls, not a transfer target.
    #[serde(default)]
    as_tool: bool,
}

/// The model's generation settings; any left out are the provider's defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerationConfig {
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    max_output_tokens: Option<i32>,
    #[serde(default)]
    stop_sequences: Vec<String>,
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

// ---------- errors ----------

/// One thing wrong with the agents file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where: `app "weather", agent "planner"`, `model "smart"`, `tool "lookup"`;
    /// empty for the file as a whole.
    pub place: String,
    /// The field at fault, when one is.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.place.is_empty() {
            write!(f, "{}: ", self.place)?;
        }
        if let Some(field) = &self.field {
            write!(f, "field {field:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Why an agents file cannot be served: every problem found, each naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub problems: Vec<Problem>,
}

/// One line per problem, each starting with the file name (so editors and
/// terminals can jump to it); several are announced by a count on a line of its own.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.problems.len() > 1 {
            writeln!(f, "{}: {} problems", self.file, self.problems.len())?;
        }
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {problem}", self.file)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn whole_file(file: &str, message: String) -> Self {
        ConfigError {
            file: file.to_string(),
            problems: vec![Problem {
                place: String::new(),
                field: None,
                message,
            }],
        }
    }
}

/// The library's configuration errors read "configuration error: …"; the
/// problem's place already says that much.
fn library_message(error: &AdkError) -> String {
    match error {
        AdkError::Config(message) => message.clone(),
        other => other.to_string(),
    }
}

/// Collects problems while the file is checked.
struct Problems(Vec<Problem>);

impl Problems {
    fn add(&mut self, place: &str, field: Option<&str>, message: impl Into<String>) {
        self.0.push(Problem {
            place: place.to_string(),
            field: field.map(str::to_string),
            message: message.into(),
        });
    }
}

fn names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

// ---------- the checked configuration ----------

/// A loaded and checked agents file: every reference resolves, every model and
/// tool could be built (API key variables included). [`AgentsConfig::build`]
/// turns it into apps over a process's stores.
pub struct AgentsConfig {
    file: String,
    spec: AgentsFile,
    models: BTreeMap<String, ProviderConfig>,
    /// Built once and shared by every agent that lists them (HTTP tools hold a
    /// connection pool, MCP toolsets a connection or child process).
    tools: BTreeMap<String, Declared>,
}

/// A declared tool: one tool, or a toolset (an MCP server's tools).
#[derive(Clone)]
enum Declared {
    Tool(Arc<dyn Tool>),
    Toolset(Arc<McpToolset>),
}

impl fmt::Debug for AgentsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentsConfig")
            .field("file", &self.file)
            .field("apps", &self.spec.apps.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AgentsConfig {
    /// Reads and checks the file at `path`; errors name it as given.
    pub fn load(path: &Path) -> Result<AgentsConfig, ConfigError> {
        let file = path.display().to_string();
        let yaml = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::whole_file(&file, format!("cannot read the agents file: {e}")))?;
        Self::from_yaml(&file, &yaml)
    }

    /// Checks `yaml`; `file` is the name errors give it.
    pub fn from_yaml(file: &str, yaml: &str) -> Result<AgentsConfig, ConfigError> {
        // An empty file deserializes as "no value": say what is missing instead.
        if yaml.trim().is_empty() {
            return Err(ConfigError::whole_file(
                file,
                "the file is empty: declare at least one app under `apps:`".into(),
            ));
        }
        let spec: AgentsFile = yaml_serde::from_str(yaml).map_err(|e| ConfigError::whole_file(file, e.to_string()))?;
        let mut problems = Problems(Vec::new());
        let models = check_models(&spec, &mut problems);
        let tools = build_tools(&spec, &mut problems);
        check_apps(&spec, &mut problems);
        if !problems.0.is_empty() {
            return Err(ConfigError {
                file: file.to_string(),
                problems: problems.0,
            });
        }
        Ok(AgentsConfig {
            file: file.to_string(),
            spec,
            models,
            tools,
        })
    }

    /// The names of the apps, sorted.
    pub fn app_names(&self) -> Vec<&str> {
        self.spec.apps.keys().map(String::as_str).collect()
    }

    /// One runner per app over `services`. Each app gets its own instance of every
    /// model it uses, shared by its agents (so a scripted mock model plays its
    /// script per app).
    pub fn build(&self, services: &RunnerServices) -> Result<Vec<App>, ConfigError> {
        let mut problems = Problems(Vec::new());
        let mut apps = Vec::new();
        for (app_name, app) in &self.spec.apps {
            let place = format!("app {app_name:?}");
            let mut models = HashMap::new();
            let built = self
                .build_agent(app_name, &app.root_agent, &mut models)
                .and_then(|(agent, description)| {
                    let mut config = services.runner_config(app_name.clone(), agent);
                    if let Some(compaction) = &app.compaction {
                        config = config.with_compaction(self.compaction(&place, compaction, &mut models)?);
                    }
                    config.on_busy = app.on_busy.into();
                    if let Some(memory) = &app.memory {
                        if services.memory.is_none() {
                            let message = "memory.add needs a memory store, and this runner has none";
                            return Err((place.clone(), message.to_string()));
                        }
                        config.add_to_memory = Some(memory.add.into());
                    }
                    let runner = Runner::new(config).map_err(|e| (place.clone(), library_message(&e)))?;
                    Ok(App::with_description(runner, description))
                });
            match built {
                Ok(app) => apps.push(app),
                Err((place, message)) => problems.add(&place, None, message),
            }
        }
        if problems.0.is_empty() {
            Ok(apps)
        } else {
            Err(ConfigError {
                file: self.file.clone(),
                problems: problems.0,
            })
        }
    }

    /// Builds one agent and its sub-agents with the library's builders. The file
    /// was checked, so failures here are the library's own rules; they are
    /// reported at the agent all the same.
    fn build_agent(
        &self,
        app_name: &str,
        config: &AgentConfig,
        models: &mut HashMap<String, Arc<dyn Llm>>,
    ) -> Result<(Arc<dyn Agent>, AgentDescription), (String, String)> {
        let place = format!("app {app_name:?}, agent {:?}", config.name);
        let fail = |e: AdkError| (place.clone(), library_message(&e));
        let mut sub_agents = Vec::new();
        let mut sub_descriptions = Vec::new();
        let mut agent_tools: Vec<Arc<dyn Tool>> = Vec::new();
        for sub in config.sub_agents.iter().filter(|sub| sub.as_tool) {
            let sub_place = format!("app {app_name:?}, agent {:?}", sub.name);
            let remote = remote_config(&sub_place, sub, &mut Problems(Vec::new())).ok_or_else(|| {
                (
                    sub_place.clone(),
                    "the a2a settings changed since the file was checked".into(),
                )
            })?;
            let tool = RemoteA2aTool::new(&sub.name, &sub.description, remote)
                .map_err(|e| (sub_place.clone(), library_message(&e)))?;
            agent_tools.push(Arc::new(tool));
        }
        for sub in config.sub_agents.iter().filter(|sub| !sub.as_tool) {
            let (agent, description) = self.build_agent(app_name, sub, models)?;
            sub_agents.push(agent);
            sub_descriptions.push(description);
        }
        let mut description = AgentDescription {
            name: config.name.clone(),
            description: config.description.clone(),
            kind: config.kind.as_str().to_string(),
            model: String::new(),
            tools: Vec::new(),
            sub_agents: sub_descriptions,
        };
        let agent: Arc<dyn Agent> = match config.kind {
            AgentKind::Llm => {
                let model_name = config.model.as_deref().unwrap_or_default();
                let model = match models.get(model_name) {
                    Some(model) => model.clone(),
                    None => {
                        let provider = self
                            .models
                            .get(model_name)
                            .ok_or_else(|| (place.clone(), format!("unknown model {model_name:?}")))?;
                        let model = build_model(provider).map_err(fail)?;
                        models.insert(model_name.to_string(), model.clone());
                        model
                    }
                };
                let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
                let mut toolsets: Vec<Arc<dyn Toolset>> = Vec::new();
                description.model = model.name().to_string();
                for tool in agent_tools {
                    let mut described = ToolDescription::of(tool.as_ref());
                    described.description = format!("A2A agent as a tool: {}", described.description);
                    description.tools.push(described);
                    tools.push(tool);
                }
                for name in &config.tools {
                    match self.tool(name) {
                        Some(Declared::Tool(tool)) => {
                            description.tools.push(ToolDescription::of(tool.as_ref()));
                            tools.push(tool);
                        }
                        Some(Declared::Toolset(toolset)) => {
                            description.tools.push(toolset_description(name, &toolset));
                            toolsets.push(toolset);
                        }
                        None => return Err((place.clone(), format!("unknown tool {name:?}"))),
                    }
                }
                let mut builder = LlmAgentBuilder::new(&config.name)
                    .description(&config.description)
                    .model(model)
                    .tools(tools)
                    .toolsets(toolsets)
                    .sub_agents(sub_agents);
                if let Some(instruction) = &config.instruction {
                    builder = builder.instruction(instruction);
                }
                if let Some(key) = &config.output_key {
                    builder = builder.output_key(key);
                }
                if let Some(generation) = &config.generation {
                    builder = builder.generate_content_config(generation.into());
                }
                Arc::new(builder.build().map_err(fail)?)
            }
            AgentKind::Sequential => {
                Arc::new(SequentialAgent::new(&config.name, sub_agents).description(&config.description))
            }
            AgentKind::Parallel => {
                Arc::new(ParallelAgent::new(&config.name, sub_agents).description(&config.description))
            }
            AgentKind::Loop => {
                let mut agent = LoopAgent::new(&config.name, sub_agents).description(&config.description);
                if let Some(max) = config.max_iterations {
                    agent = agent.max_iterations(max);
                }
                Arc::new(agent)
            }
            AgentKind::A2a => {
                let remote = remote_config(&place, config, &mut Problems(Vec::new())).ok_or_else(|| {
                    (
                        place.clone(),
                        "the a2a settings changed since the file was checked".into(),
                    )
                })?;
                let agent = RemoteA2aAgent::new(&config.name, &config.description, remote).map_err(fail)?;
                description.model = format!("A2A: {}", agent.endpoint());
                Arc::new(agent)
            }
        };
        Ok((agent, description))
    }

    /// The app's compaction settings, its summariser shared with its agents when
    /// they use the same model.
    fn compaction(
        &self,
        place: &str,
        config: &CompactionFileConfig,
        models: &mut HashMap<String, Arc<dyn Llm>>,
    ) -> Result<CompactionConfig, (String, String)> {
        let model_name = config.model.as_deref().unwrap_or_default();
        let summarizer = match models.get(model_name) {
            Some(model) => model.clone(),
            None => {
                let provider = self
                    .models
                    .get(model_name)
                    .ok_or_else(|| (place.to_string(), format!("unknown model {model_name:?}")))?;
                let model = build_model(provider).map_err(|e| (place.to_string(), library_message(&e)))?;
                models.insert(model_name.to_string(), model.clone());
                model
            }
        };
        let mut compaction =
            CompactionConfig::new(config.interval.unwrap_or(1), summarizer).with_overlap(config.overlap);
        compaction.token_budget = config.token_budget;
        Ok(compaction)
    }

    fn tool(&self, name: &str) -> Option<Declared> {
        match name {
            ExitLoopTool::NAME => Some(Declared::Tool(Arc::new(ExitLoopTool))),
            LoadArtifactsTool::NAME => Some(Declared::Tool(Arc::new(LoadArtifactsTool))),
            LoadMemoryTool::NAME => Some(Declared::Tool(Arc::new(LoadMemoryTool))),
            PreloadMemoryTool::NAME => Some(Declared::Tool(Arc::new(PreloadMemoryTool))),
            _ => self.tools.get(name).cloned(),
        }
    }
}

/// An MCP toolset in an app's description: its tools are only known once the
/// server answers, so the entry names the toolset and its server.
fn toolset_description(name: &str, toolset: &McpToolset) -> ToolDescription {
    let server = match toolset.transport() {
        McpTransport::Stdio { command, args, .. } => format!("stdio: {command} {}", args.join(" ")),
        McpTransport::Http { url, .. } => format!("streamable HTTP: {url}"),
    };
    ToolDescription {
        name: name.to_string(),
        description: format!("MCP toolset: the tools of the MCP server ({})", server.trim_end()),
        parameters_schema: None,
        response_schema: None,
        long_running: false,
    }
}

// ---------- checks ----------

/// Every declared model is built once, so a bad provider setting or a missing
/// API key variable fails the start rather than the first call (a server that
/// starts and then fails every run is worse than one that does not start).
fn check_models(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, ProviderConfig> {
    let mut models = BTreeMap::new();
    for (name, value) in &spec.models {
        let place = format!("model {name:?}");
        let provider = match ProviderConfig::deserialize(value) {
            Ok(provider) => provider,
            Err(e) => {
                problems.add(&place, None, e.to_string());
                continue;
            }
        };
        match build_model(&provider) {
            Ok(_) => {
                models.insert(name.clone(), provider);
            }
            Err(e) => problems.add(&place, None, library_message(&e)),
        }
    }
    models
}

fn build_tools(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, Declared> {
    let mut tools = BTreeMap::new();
    for (name, config) in &spec.tools {
        if let Some(tool) = build_tool(name, config, problems) {
            tools.insert(name.clone(), tool);
        }
    }
    tools
}

fn build_tool(name: &str, config: &ToolConfig, problems: &mut Problems) -> Option<Declared> {
    let place = format!("tool {name:?}");
    let before = problems.0.len();
    if !is_function_name(name) {
        problems.add(
            &place,
            None,
            format!(
                "a tool name is what the model calls: 1-{MAX_TOOL_NAME_CHARS} characters of [A-Za-z0-9_-], \
                 starting with a letter or _"
            ),
        );
    }
    if BUILTIN_TOOLS.contains(&name) || name == TRANSFER_TOOL {
        problems.add(
            &place,
            None,
            format!("{name} is a built-in tool: list it in an agent's tools without declaring it"),
        );
    }
    if config.description.trim().is_empty() && config.kind != ToolKind::Mcp {
        problems.add(
            &place,
            Some("description"),
            "a tool needs a description: the model reads it to decide when to call the tool",
        );
    }
    if let Some(schema) = &config.parameters
        && !schema.is_object()
    {
        problems.add(
            &place,
            Some("parameters"),
            "must be a JSON Schema object, e.g. {type: object, properties: {city: {type: string}}}",
        );
    }
    check_kind_fields(&place, config, problems);
    let headers = match config.kind {
        ToolKind::Http => {
            if config.url.is_none() {
                problems.add(
                    &place,
                    Some("url"),
                    "an http tool needs the url its calls are POSTed to",
                );
            }
            check_timeouts(&place, config, problems);
            header_values(&place, config, problems)
        }
        ToolKind::Client => Vec::new(),
        ToolKind::Mcp => return build_mcp_toolset(name, &place, config, problems, before),
    };
    if problems.0.len() > before {
        return None;
    }
    let tool: Arc<dyn Tool> = match config.kind {
        ToolKind::Http => {
            let url = config.url.as_deref().unwrap_or_default();
            let built = HttpTool::new(name, &config.description, url).and_then(|mut tool| {
                if let Some(schema) = &config.parameters {
                    tool = tool.with_parameters_schema(schema.clone());
                }
                if let Some(secs) = config.timeout_secs {
                    tool = tool.with_timeout(Duration::from_secs(secs));
                }
                for (header, value) in &headers {
                    tool = tool.with_header(header, value)?;
                }
                Ok(tool)
            });
            match built {
                Ok(tool) => Arc::new(tool),
                Err(e) => {
                    problems.add(&place, None, library_message(&e));
                    return None;
                }
            }
        }
        ToolKind::Client => {
            let mut tool = ClientTool::new(name, &config.description);
            if let Some(schema) = &config.parameters {
                tool = tool.with_parameters_schema(schema.clone());
            }
            Arc::new(tool)
        }
        ToolKind::Mcp => unreachable!("mcp toolsets are built by build_mcp_toolset"),
    };
    Some(Declared::Tool(tool))
}

/// Fields that mean nothing for the tool's kind (or transport) are errors, not
/// silently ignored settings.
fn check_kind_fields(place: &str, config: &ToolConfig, problems: &mut Problems) {
    let transport = config.transport;
    let stdio = config.kind == ToolKind::Mcp && transport == Some(McpTransportKind::Stdio);
    let mcp_http = config.kind == ToolKind::Mcp && transport == Some(McpTransportKind::Http);
    let http = config.kind == ToolKind::Http;
    // (field, set, allowed for this kind, who has it)
    let fields = [
        (
            "url",
            config.url.is_some(),
            http || mcp_http || (config.kind == ToolKind::Mcp && transport.is_none()),
            "http tools and mcp tools over http",
        ),
        (
            "timeout_secs",
            config.timeout_secs.is_some(),
            config.kind != ToolKind::Client,
            "http and mcp tools",
        ),
        (
            "headers_from_env",
            !config.headers_from_env.is_empty(),
            http || mcp_http,
            "http tools and mcp tools over http",
        ),
        (
            "parameters",
            config.parameters.is_some(),
            config.kind != ToolKind::Mcp,
            "http and client tools",
        ),
        (
            "transport",
            transport.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
        (
            "command",
            config.command.is_some(),
            stdio || (config.kind == ToolKind::Mcp && transport.is_none()),
            "mcp tools over stdio",
        ),
        ("args", !config.args.is_empty(), stdio, "mcp tools over stdio"),
        (
            "working_dir",
            config.working_dir.is_some(),
            stdio,
            "mcp tools over stdio",
        ),
        ("env", !config.env.is_empty(), stdio, "mcp tools over stdio"),
        (
            "env_from_env",
            !config.env_from_env.is_empty(),
            stdio,
            "mcp tools over stdio",
        ),
        (
            "bearer_token_env",
            config.bearer_token_env.is_some(),
            mcp_http,
            "mcp tools over http",
        ),
        (
            "tool_filter",
            config.tool_filter.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
        (
            "tool_prefix",
            config.tool_prefix.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
        (
            "connect_timeout_secs",
            config.connect_timeout_secs.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
    ];
    let kind = match (config.kind, transport) {
        (ToolKind::Mcp, Some(McpTransportKind::Stdio)) => "an mcp tool over stdio".to_string(),
        (ToolKind::Mcp, Some(McpTransportKind::Http)) => "an mcp tool over http".to_string(),
        (ToolKind::Client, _) => "a client tool".to_string(),
        (kind, _) => format!("an {} tool", kind.as_str()),
    };
    for (field, set, allowed, owners) in fields {
        if set && !allowed {
            problems.add(place, Some(field), format!("only {owners} have it; this is {kind}"));
        }
    }
}

fn check_timeouts(place: &str, config: &ToolConfig, problems: &mut Problems) {
    for (field, value) in [
        ("timeout_secs", config.timeout_secs),
        ("connect_timeout_secs", config.connect_timeout_secs),
    ] {
        if value == Some(0) {
            problems.add(place, Some(field), "must be at least 1");
        }
    }
}

/// The values of `headers_from_env`, each variable required to be set.
fn header_values(place: &str, config: &ToolConfig, problems: &mut Problems) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for (header, var) in &config.headers_from_env {
        match std::env::var(var) {
            Ok(value) if !value.is_empty() => headers.push((header.clone(), value)),
            _ => problems.add(
                place,
                Some("headers_from_env"),
                format!("environment variable {var} (for header {header}) is not set"),
            ),
        }
    }
    headers
}

/// Whether `command` can be started: a path to a file, or a name found on PATH.
fn command_exists(command: &str) -> bool {
    if command.contains('/') {
        return Path::new(command).is_file();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
}

/// An `mcp` tool: checks its settings (the server itself is only started on
/// first use, so a server that is down does not stop the runner) and builds the
/// toolset. Every problem is reported, even when an earlier one means nothing is built.
fn build_mcp_toolset(
    name: &str,
    place: &str,
    config: &ToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    check_timeouts(place, config, problems);
    let toolset = match config.transport {
        None => {
            problems.add(
                place,
                Some("transport"),
                "an mcp tool needs a transport: stdio (with a command) or http (with a url)",
            );
            None
        }
        Some(McpTransportKind::Stdio) => stdio_toolset(name, place, config, problems),
        Some(McpTransportKind::Http) => http_toolset(name, place, config, problems),
    };
    if let Some(filter) = &config.tool_filter
        && (filter.is_empty() || filter.iter().any(|tool| tool.trim().is_empty()))
    {
        problems.add(
            place,
            Some("tool_filter"),
            "list the server's tools to offer by name (leave the field out to offer them all)",
        );
    }
    if let Some(prefix) = &config.tool_prefix
        && !is_agent_name(prefix)
    {
        problems.add(
            place,
            Some("tool_prefix"),
            "must be an identifier ([A-Za-z_][A-Za-z0-9_]*): it starts the tools' function names",
        );
    }
    let mut toolset = toolset?;
    if problems.0.len() > before {
        return None;
    }
    if let Some(filter) = &config.tool_filter {
        toolset = toolset.with_tool_filter(filter.iter().cloned());
    }
    if let Some(prefix) = &config.tool_prefix {
        toolset = toolset.with_prefix(prefix);
    }
    if let Some(secs) = config.timeout_secs {
        toolset = toolset.with_call_timeout(Duration::from_secs(secs));
    }
    if let Some(secs) = config.connect_timeout_secs {
        toolset = toolset.with_connect_timeout(Duration::from_secs(secs));
    }
    Some(Declared::Toolset(Arc::new(toolset)))
}

fn stdio_toolset(name: &str, place: &str, config: &ToolConfig, problems: &mut Problems) -> Option<McpToolset> {
    let command = config.command.as_deref().unwrap_or_default();
    if command.trim().is_empty() {
        problems.add(
            place,
            Some("command"),
            "an mcp tool over stdio needs the command that starts the server",
        );
    } else if !command_exists(command) {
        problems.add(
            place,
            Some("command"),
            format!("{command:?} is neither a file nor a program on PATH"),
        );
    }
    if let Some(dir) = &config.working_dir
        && !Path::new(dir).is_dir()
    {
        problems.add(place, Some("working_dir"), format!("{dir:?} is not a directory"));
    }
    let mut toolset = McpToolset::stdio(name, command).with_args(config.args.iter().cloned());
    for (var, value) in &config.env {
        toolset = toolset.with_env(var, value);
    }
    for (var, source) in &config.env_from_env {
        match std::env::var(source) {
            Ok(value) => toolset = toolset.with_env(var, value),
            Err(_) => problems.add(
                place,
                Some("env_from_env"),
                format!("environment variable {source} (for the server's {var}) is not set"),
            ),
        }
    }
    if let Some(dir) = &config.working_dir {
        toolset = toolset.with_working_dir(dir);
    }
    Some(toolset)
}

fn http_toolset(name: &str, place: &str, config: &ToolConfig, problems: &mut Problems) -> Option<McpToolset> {
    let toolset = match config.url.as_deref().map(|url| McpToolset::http(name, url)) {
        None => {
            problems.add(place, Some("url"), "an mcp tool over http needs the server's url");
            None
        }
        Some(Err(e)) => {
            problems.add(place, Some("url"), library_message(&e));
            None
        }
        Some(Ok(toolset)) => Some(toolset),
    };
    let headers = header_values(place, config, problems);
    let token = config
        .bearer_token_env
        .as_ref()
        .and_then(|var| match std::env::var(var) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => {
                problems.add(
                    place,
                    Some("bearer_token_env"),
                    format!("environment variable {var} (for the bearer token) is not set"),
                );
                None
            }
        });
    let mut toolset = toolset?;
    for (header, value) in headers {
        toolset = toolset.with_header(header, value);
    }
    if let Some(token) = token {
        toolset = toolset.with_bearer_token(token);
    }
    Some(toolset)
}

fn is_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().count() <= MAX_TOOL_NAME_CHARS
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn is_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name != USER_AUTHOR
}

fn check_apps(spec: &AgentsFile, problems: &mut Problems) {
    if spec.apps.is_empty() {
        problems.add("", Some("apps"), "declare at least one app");
    }
    for (app_name, app) in &spec.apps {
        if let Err(e) = adk_core::validate::id("app name", app_name) {
            problems.add(&format!("app {app_name:?}"), None, e.to_string());
        }
        let mut seen = HashSet::new();
        if app.root_agent.as_tool {
            problems.add(
                &format!("app {app_name:?}, agent {:?}", app.root_agent.name),
                Some("as_tool"),
                "the root agent has no parent to call it as a tool",
            );
        }
        check_agent(spec, app_name, &app.root_agent, &mut seen, problems);
        if let Some(compaction) = &app.compaction {
            check_compaction(spec, &format!("app {app_name:?}"), compaction, problems);
        }
    }
}

fn check_compaction(spec: &AgentsFile, place: &str, compaction: &CompactionFileConfig, problems: &mut Problems) {
    match compaction.interval {
        None => problems.add(
            place,
            Some("compaction.interval"),
            "compaction needs an interval: the number of new invocations that triggers a summary",
        ),
        Some(0) => problems.add(place, Some("compaction.interval"), "interval must be at least 1"),
        Some(_) => {}
    }
    match &compaction.model {
        None => problems.add(
            place,
            Some("compaction.model"),
            format!(
                "compaction needs the model that writes summaries (declared: {})",
                names(spec.models.keys())
            ),
        ),
        Some(model) if !spec.models.contains_key(model) => problems.add(
            place,
            Some("compaction.model"),
            format!("unknown model {model:?} (declared: {})", names(spec.models.keys())),
        ),
        Some(_) => {}
    }
    if compaction.token_budget == Some(0) {
        problems.add(
            place,
            Some("compaction.token_budget"),
            "token_budget must be at least 1",
        );
    }
}

/// The rules of one agent; sub-agents are checked recursively. The tree is
/// written inline, so it cannot have cycles.
fn check_agent(
    spec: &AgentsFile,
    app_name: &str,
    agent: &AgentConfig,
    seen: &mut HashSet<String>,
    problems: &mut Problems,
) {
    let place = format!("app {app_name:?}, agent {:?}", agent.name);
    let kind = agent.kind.as_str();
    if !is_agent_name(&agent.name) {
        problems.add(
            &place,
            Some("name"),
            "an agent name must be an identifier ([A-Za-z_][A-Za-z0-9_]*) other than \"user\": it appears in \
             branches and in transfer_to_agent calls",
        );
    }
    if !seen.insert(agent.name.clone()) {
        problems.add(
            &place,
            Some("name"),
            "another agent of this app has the same name: names are unique within an app",
        );
    }

    let a2a_only = [
        ("endpoint", agent.endpoint.is_some()),
        ("tenant", agent.tenant.is_some()),
        ("ca_file", agent.ca_file.is_some()),
        ("bearer_token_env", agent.bearer_token_env.is_some()),
        ("as_tool", agent.as_tool),
    ];
    if agent.kind != AgentKind::A2a {
        for (field, set) in a2a_only {
            if set {
                problems.add(
                    &place,
                    Some(field),
                    format!("only a2a agents have it; this is a {kind} agent"),
                );
            }
        }
    }
    if agent.kind == AgentKind::Llm {
        check_llm_agent(spec, &place, agent, problems);
    } else if agent.kind == AgentKind::A2a {
        check_a2a_agent(&place, agent, problems);
    } else {
        let llm_only = [
            ("model", agent.model.is_some()),
            ("instruction", agent.instruction.is_some()),
            ("tools", !agent.tools.is_empty()),
            ("output_key", agent.output_key.is_some()),
            ("generation", agent.generation.is_some()),
        ];
        for (field, set) in llm_only {
            if set {
                problems.add(
                    &place,
                    Some(field),
                    format!("only llm agents have it; this is a {kind} agent"),
                );
            }
        }
        if agent.sub_agents.is_empty() {
            problems.add(
                &place,
                Some("sub_agents"),
                format!("a {kind} agent runs its sub_agents and has none"),
            );
        }
    }
    match (agent.kind, agent.max_iterations) {
        (AgentKind::Loop, Some(0)) => problems.add(
            &place,
            Some("max_iterations"),
            "must be at least 1 (leave it out to loop until a sub-agent escalates)",
        ),
        (AgentKind::Loop, _) | (_, None) => {}
        (_, Some(_)) => problems.add(
            &place,
            Some("max_iterations"),
            format!("only loop agents have it; this is a {kind} agent"),
        ),
    }
    for sub in &agent.sub_agents {
        if sub.as_tool && agent.kind != AgentKind::Llm {
            problems.add(
                &format!("app {app_name:?}, agent {:?}", sub.name),
                Some("as_tool"),
                format!(
                    "only an llm agent calls tools; its parent {:?} is a {kind} agent",
                    agent.name
                ),
            );
        }
        check_agent(spec, app_name, sub, seen, problems);
    }
}

/// A remote agent: its own settings, and nothing of the local kinds (it runs elsewhere).
fn check_a2a_agent(place: &str, agent: &AgentConfig, problems: &mut Problems) {
    let local_only = [
        ("model", agent.model.is_some()),
        ("instruction", agent.instruction.is_some()),
        ("tools", !agent.tools.is_empty()),
        ("output_key", agent.output_key.is_some()),
        ("generation", agent.generation.is_some()),
        ("sub_agents", !agent.sub_agents.is_empty()),
    ];
    for (field, set) in local_only {
        if set {
            problems.add(
                place,
                Some(field),
                "an a2a agent runs elsewhere: its model, instruction, tools and sub_agents are the remote's",
            );
        }
    }
    remote_config(place, agent, problems);
}

/// The settings of an a2a agent, every problem with them added to `problems`; None
/// when there is one.
fn remote_config(place: &str, agent: &AgentConfig, problems: &mut Problems) -> Option<RemoteA2aConfig> {
    let before = problems.0.len();
    let Some(endpoint) = agent.endpoint.clone() else {
        problems.add(
            place,
            Some("endpoint"),
            "an a2a agent needs the remote's gRPC endpoint: http://host:port or https://host:port",
        );
        return None;
    };
    let ca_pem = agent.ca_file.as_ref().and_then(|file| match std::fs::read(file) {
        Ok(pem) => Some(pem),
        Err(e) => {
            problems.add(place, Some("ca_file"), format!("cannot read {file:?}: {e}"));
            None
        }
    });
    let bearer_token = agent
        .bearer_token_env
        .as_ref()
        .and_then(|var| match std::env::var(var) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => {
                problems.add(
                    place,
                    Some("bearer_token_env"),
                    format!("environment variable {var} (for the bearer token) is not set"),
                );
                None
            }
        });
    let config = RemoteA2aConfig {
        endpoint,
        tenant: agent.tenant.clone().unwrap_or_default(),
        ca_pem,
        bearer_token,
    };
    if let Err(e) = RemoteA2aAgent::new(&agent.name, &agent.description, config.clone()) {
        let field = if e.to_string().contains("bearer token") {
            "bearer_token_env"
        } else {
            "endpoint"
        };
        problems.add(place, Some(field), library_message(&e));
    }
    (problems.0.len() == before).then_some(config)
}

fn check_llm_agent(spec: &AgentsFile, place: &str, agent: &AgentConfig, problems: &mut Problems) {
    match &agent.model {
        None => problems.add(
            place,
            Some("model"),
            format!("an llm agent needs a model (declared: {})", names(spec.models.keys())),
        ),
        Some(model) if !spec.models.contains_key(model) => problems.add(
            place,
            Some("model"),
            format!("unknown model {model:?} (declared: {})", names(spec.models.keys())),
        ),
        Some(_) => {}
    }
    let mut listed = HashSet::new();
    for tool in &agent.tools {
        if !listed.insert(tool) {
            problems.add(place, Some("tools"), format!("{tool} is listed twice"));
        } else if tool == TRANSFER_TOOL {
            problems.add(
                place,
                Some("tools"),
                "transfer_to_agent is offered by itself to agents with sub_agents: leave it out",
            );
        } else if !spec.tools.contains_key(tool) && !BUILTIN_TOOLS.contains(&tool.as_str()) {
            problems.add(
                place,
                Some("tools"),
                format!(
                    "unknown tool {tool:?} (declared: {}; built in: {})",
                    names(spec.tools.keys()),
                    BUILTIN_TOOLS.join(", ")
                ),
            );
        }
    }
    if let Some(key) = &agent.output_key {
        let probe = HashMap::from([(key.clone(), Value::Null)]);
        if let Err(e) = adk_core::validate::state_keys("output_key", &probe) {
            problems.add(place, Some("output_key"), e.to_string());
        }
    }
    if let Some(generation) = &agent.generation
        && generation.max_output_tokens.is_some_and(|n| n < 1)
    {
        problems.add(place, Some("generation"), "max_output_tokens must be at least 1");
    }
}

#[cfg(test)]
mod tests;
