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
//! apps:
//!   weather:
//!     root_agent:              # a tree: sub_agents are written inline
//!       name: assistant
//!       model: fast
//!       tools: [get_weather, confirm]
//! ```
//!
//! `examples/agents.yaml` documents every field. The file is read with
//! `deny_unknown_fields` everywhere (a misspelt key is an error, not a silent
//! default), then every rule is checked and every problem reported at once, each
//! naming the file, the app, the agent and the field.

use crate::app::{AgentDescription, App, ToolDescription};
use crate::stores::RunnerServices;
use adk_core::{AdkError, Agent, GenerateContentConfig, Llm, Tool};
use adk_models::{ProviderConfig, build_model};
use adk_runner::{
    ClientTool, ExitLoopTool, HttpTool, LlmAgentBuilder, LoadArtifactsTool, LoopAgent, ParallelAgent, Runner,
    SequentialAgent,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The tools the runner library provides; agents list them like declared tools.
const BUILTIN_TOOLS: [&str; 2] = [ExitLoopTool::NAME, LoadArtifactsTool::NAME];
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
}

/// One struct for both kinds (rather than a tagged enum) so serde keeps the line
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
    /// http: how long one call may take [default: 30].
    #[serde(default)]
    timeout_secs: Option<u64>,
    /// http: header name -> the NAME of the environment variable holding its
    /// value, so the file holds no secret.
    #[serde(default)]
    headers_from_env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppConfig {
    root_agent: AgentConfig,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AgentKind {
    #[default]
    Llm,
    Sequential,
    Parallel,
    Loop,
}

impl AgentKind {
    fn as_str(self) -> &'static str {
        match self {
            AgentKind::Llm => "llm",
            AgentKind::Sequential => "sequential",
            AgentKind::Parallel => "parallel",
            AgentKind::Loop => "loop",
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
    /// connection pool).
    tools: BTreeMap<String, Arc<dyn Tool>>,
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
                    let runner = Runner::new(services.runner_config(app_name.clone(), agent))
                        .map_err(|e| (place.clone(), library_message(&e)))?;
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
        for sub in &config.sub_agents {
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
                let tools: Vec<Arc<dyn Tool>> = config
                    .tools
                    .iter()
                    .map(|name| {
                        self.tool(name)
                            .ok_or_else(|| (place.clone(), format!("unknown tool {name:?}")))
                    })
                    .collect::<Result<_, _>>()?;
                description.model = model.name().to_string();
                description.tools = tools.iter().map(|tool| ToolDescription::of(tool.as_ref())).collect();
                let mut builder = LlmAgentBuilder::new(&config.name)
                    .description(&config.description)
                    .model(model)
                    .tools(tools)
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
        };
        Ok((agent, description))
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        match name {
            ExitLoopTool::NAME => Some(Arc::new(ExitLoopTool)),
            LoadArtifactsTool::NAME => Some(Arc::new(LoadArtifactsTool)),
            _ => self.tools.get(name).cloned(),
        }
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

fn build_tools(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, Arc<dyn Tool>> {
    let mut tools = BTreeMap::new();
    for (name, config) in &spec.tools {
        if let Some(tool) = build_tool(name, config, problems) {
            tools.insert(name.clone(), tool);
        }
    }
    tools
}

fn build_tool(name: &str, config: &ToolConfig, problems: &mut Problems) -> Option<Arc<dyn Tool>> {
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
    if config.description.trim().is_empty() {
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
    let mut headers = Vec::new();
    match config.kind {
        ToolKind::Http => {
            if config.url.is_none() {
                problems.add(
                    &place,
                    Some("url"),
                    "an http tool needs the url its calls are POSTed to",
                );
            }
            if config.timeout_secs == Some(0) {
                problems.add(&place, Some("timeout_secs"), "must be at least 1");
            }
            for (header, var) in &config.headers_from_env {
                match std::env::var(var) {
                    Ok(value) if !value.is_empty() => headers.push((header.as_str(), value)),
                    _ => problems.add(
                        &place,
                        Some("headers_from_env"),
                        format!("environment variable {var} (for header {header}) is not set"),
                    ),
                }
            }
        }
        ToolKind::Client => {
            // These would be silently ignored: the client, not the server, runs the tool.
            let server_side = [
                ("url", config.url.is_some()),
                ("timeout_secs", config.timeout_secs.is_some()),
                ("headers_from_env", !config.headers_from_env.is_empty()),
            ];
            for (field, set) in server_side {
                if set {
                    problems.add(
                        &place,
                        Some(field),
                        "only http tools have it: a client tool is run by the gRPC client",
                    );
                }
            }
        }
    }
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
    };
    Some(tool)
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
        check_agent(spec, app_name, &app.root_agent, &mut seen, problems);
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

    if agent.kind == AgentKind::Llm {
        check_llm_agent(spec, &place, agent, problems);
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
        check_agent(spec, app_name, sub, seen, problems);
    }
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
