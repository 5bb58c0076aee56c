//! The apps: each agent checked field by field and built with the runner
//! library's builders, in one pass over the tree. The library's rules (agent
//! names, unique names in a tree, tool lists, `output_key`, compaction settings)
//! are applied by calling the library's own functions on each field, so a problem
//! names its field; the rules here are the file's own (references to declared
//! models and tools, fields that do not fit an agent's kind).

use super::file::{AgentConfig, AgentKind, AgentsFile, AppConfig, CompactionFileConfig};
use super::models::AppModels;
use super::problems::{Problems, library_message, names};
use super::tools::Declared;
use crate::app::{AgentDescription, ToolDescription};
use adk_grpc_agents::a2a::{RemoteA2aAgent, RemoteA2aConfig, RemoteA2aTool};
use adk_grpc_agents::{
    AddToMemory, AgentNames, BUILTIN_TOOLS, LlmAgent, LlmAgentBuilder, LoopAgent, OnBusy, ParallelAgent,
    SequentialAgent, TRANSFER_TOOL_NAME,
};
use adk_grpc_core::{AdkError, Agent, CompactionConfig, Llm, Tool, Toolset};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An app of the file, built but for its stores (they belong to the process).
pub(super) struct LoadedApp {
    pub(super) name: String,
    pub(super) root_agent: Arc<dyn Agent>,
    pub(super) description: AgentDescription,
    pub(super) compaction: Option<CompactionConfig>,
    pub(super) on_busy: OnBusy,
    pub(super) add_to_memory: Option<AddToMemory>,
}

/// Every app of the file; those with a problem are left out (and the problem added).
pub(super) fn build_apps(
    spec: &AgentsFile,
    models: &BTreeMap<String, AppModels>,
    tools: &BTreeMap<String, Declared>,
    problems: &mut Problems,
) -> Vec<LoadedApp> {
    if spec.apps.is_empty() {
        problems.add("", Some("apps"), "declare at least one app");
    }
    let no_models = AppModels::new();
    let mut apps = Vec::new();
    for (app_name, app) in &spec.apps {
        let before = problems.0.len();
        let place = format!("app {app_name:?}");
        if let Err(e) = adk_grpc_core::validate::id("app name", app_name) {
            problems.add(&place, None, e.to_string());
        }
        let mut tree = Tree {
            spec,
            app_name,
            models: models.get(app_name).unwrap_or(&no_models),
            tools,
            names: AgentNames::default(),
            problems: &mut *problems,
        };
        let root = tree.agent(&app.root_agent, None);
        let compaction = app
            .compaction
            .as_ref()
            .and_then(|compaction| tree.compaction(&place, compaction));
        let complete = problems.0.len() == before;
        match root {
            Some(Built::Agent(root_agent, description)) if complete => {
                apps.push(loaded(app_name, app, root_agent, description, compaction))
            }
            _ => {}
        }
    }
    apps
}

fn loaded(
    app_name: &str,
    app: &AppConfig,
    root_agent: Arc<dyn Agent>,
    description: AgentDescription,
    compaction: Option<CompactionConfig>,
) -> LoadedApp {
    LoadedApp {
        name: app_name.to_string(),
        root_agent,
        description,
        compaction,
        on_busy: app.on_busy.into(),
        add_to_memory: app.memory.as_ref().map(|memory| memory.add.into()),
    }
}

/// What an agent of the file becomes: an agent, or (an a2a agent with `as_tool`)
/// a tool of its parent.
enum Built {
    Agent(Arc<dyn Agent>, AgentDescription),
    Tool(Arc<dyn Tool>),
}

/// An llm agent's checked model and tools, waiting for its sub-agents.
struct LlmParts {
    model: Arc<dyn Llm>,
    tools: Vec<Arc<dyn Tool>>,
    toolsets: Vec<Arc<dyn Toolset>>,
    descriptions: Vec<ToolDescription>,
}

impl LlmParts {
    /// The agent, with the library's builder; `sub_tools` (its a2a sub-agents
    /// offered as tools) come first among its tools.
    fn build(
        self,
        agent: &AgentConfig,
        sub_tools: Vec<Arc<dyn Tool>>,
        sub_agents: Vec<Arc<dyn Agent>>,
        description: &mut AgentDescription,
    ) -> adk_grpc_core::Result<LlmAgent> {
        description.model = self.model.name().to_string();
        for tool in &sub_tools {
            let mut described = ToolDescription::of(tool.as_ref());
            described.description = format!("A2A agent as a tool: {}", described.description);
            description.tools.push(described);
        }
        description.tools.extend(self.descriptions);
        let mut builder = LlmAgentBuilder::new(&agent.name)
            .description(&agent.description)
            .model(self.model)
            .tools(sub_tools)
            .tools(self.tools)
            .toolsets(self.toolsets)
            .sub_agents(sub_agents);
        if let Some(instruction) = &agent.instruction {
            builder = builder.instruction(instruction);
        }
        if let Some(key) = &agent.output_key {
            builder = builder.output_key(key);
        }
        if let Some(include) = agent.include_contents {
            builder = builder.include_contents(include.into());
        }
        if let Some(generation) = &agent.generation {
            builder = builder.generate_content_config(generation.into());
        }
        builder.build()
    }
}

/// One app's agent tree while it is checked and built.
struct Tree<'a> {
    spec: &'a AgentsFile,
    app_name: &'a str,
    models: &'a AppModels,
    tools: &'a BTreeMap<String, Declared>,
    /// The library's rule: agent names are unique in a tree.
    names: AgentNames,
    problems: &'a mut Problems,
}

impl Tree<'_> {
    fn place(&self, agent: &AgentConfig) -> String {
        format!("app {:?}, agent {:?}", self.app_name, agent.name)
    }

    fn add(&mut self, place: &str, field: &str, message: impl Into<String>) {
        self.problems.add(place, Some(field), message);
    }

    /// Checks `agent` and its sub-agents (every problem of the tree is reported)
    /// and builds it when none of them has one. The tree is written inline, so it
    /// cannot have cycles.
    fn agent(&mut self, agent: &AgentConfig, parent: Option<&AgentConfig>) -> Option<Built> {
        let place = self.place(agent);
        let before = self.problems.0.len();
        if let Err(e) = adk_grpc_agents::validate_agent_name(&agent.name) {
            self.add(&place, "name", library_message(&e));
        }
        if let Err(e) = self.names.insert(&agent.name) {
            self.add(&place, "name", library_message(&e));
        }
        let kind = agent.kind.as_str();
        if agent.kind != AgentKind::A2a {
            let a2a_only = [
                ("endpoint", agent.endpoint.is_some()),
                ("tenant", agent.tenant.is_some()),
                ("ca_file", agent.ca_file.is_some()),
                ("bearer_token_env", agent.bearer_token_env.is_some()),
                ("as_tool", agent.as_tool),
            ];
            for (field, _) in a2a_only.into_iter().filter(|(_, set)| *set) {
                self.add(
                    &place,
                    field,
                    format!("only a2a agents have it; this is a {kind} agent"),
                );
            }
        }
        match (agent.as_tool, parent) {
            (false, _) => {}
            (true, None) => self.add(&place, "as_tool", "the root agent has no parent to call it as a tool"),
            (true, Some(parent)) if parent.kind != AgentKind::Llm => self.add(
                &place,
                "as_tool",
                format!(
                    "only an llm agent calls tools; its parent {:?} is a {} agent",
                    parent.name,
                    parent.kind.as_str()
                ),
            ),
            (true, Some(_)) => {}
        }
        match (agent.kind, agent.max_iterations) {
            (AgentKind::Loop, Some(0)) => self.add(
                &place,
                "max_iterations",
                "must be at least 1 (leave it out to loop until a sub-agent escalates)",
            ),
            (AgentKind::Loop, _) | (_, None) => {}
            (_, Some(_)) => self.add(
                &place,
                "max_iterations",
                format!("only loop agents have it; this is a {kind} agent"),
            ),
        }
        if agent.kind == AgentKind::A2a {
            return self.remote(&place, agent, before);
        }
        // The agent's own fields first, then its sub-agents', as the file reads.
        let llm = match agent.kind {
            AgentKind::Llm => self.llm_parts(&place, agent),
            _ => {
                self.workflow_fields(&place, agent);
                None
            }
        };

        // Sub-agents: transfer targets, or (a2a with as_tool) tools of this agent.
        let mut sub_agents = Vec::new();
        let mut sub_descriptions = Vec::new();
        let mut sub_tools = Vec::new();
        let mut complete = true;
        for sub in &agent.sub_agents {
            match self.agent(sub, Some(agent)) {
                Some(Built::Agent(built, description)) => {
                    sub_agents.push(built);
                    sub_descriptions.push(description);
                }
                Some(Built::Tool(tool)) => sub_tools.push(tool),
                None => complete = false,
            }
        }
        if !complete || self.problems.0.len() > before {
            return None;
        }
        let mut description = AgentDescription {
            name: agent.name.clone(),
            description: agent.description.clone(),
            kind: kind.to_string(),
            model: String::new(),
            tools: Vec::new(),
            sub_agents: sub_descriptions,
        };
        let built: Arc<dyn Agent> = match agent.kind {
            AgentKind::Llm => {
                let built = llm?.build(agent, sub_tools, sub_agents, &mut description);
                Arc::new(self.built(&place, built)?)
            }
            AgentKind::Sequential => {
                Arc::new(SequentialAgent::new(&agent.name, sub_agents).description(&agent.description))
            }
            AgentKind::Parallel => {
                Arc::new(ParallelAgent::new(&agent.name, sub_agents).description(&agent.description))
            }
            AgentKind::Loop => {
                let mut built = LoopAgent::new(&agent.name, sub_agents).description(&agent.description);
                if let Some(max) = agent.max_iterations {
                    built = built.max_iterations(max);
                }
                Arc::new(built)
            }
            AgentKind::A2a => unreachable!("a2a agents are built by Tree::remote"),
        };
        Some(Built::Agent(built, description))
    }

    /// A workflow agent has sub-agents and none of an llm agent's fields.
    fn workflow_fields(&mut self, place: &str, agent: &AgentConfig) {
        let kind = agent.kind.as_str();
        let llm_only = [
            ("model", agent.model.is_some()),
            ("instruction", agent.instruction.is_some()),
            ("tools", !agent.tools.is_empty()),
            ("output_key", agent.output_key.is_some()),
            ("include_contents", agent.include_contents.is_some()),
            ("generation", agent.generation.is_some()),
        ];
        for (field, _) in llm_only.into_iter().filter(|(_, set)| *set) {
            self.add(place, field, format!("only llm agents have it; this is a {kind} agent"));
        }
        if agent.sub_agents.is_empty() {
            self.add(
                place,
                "sub_agents",
                format!("a {kind} agent runs its sub_agents and has none"),
            );
        }
    }

    /// An llm agent's model, tools and settings, checked; None when one of them
    /// is missing. Its a2a sub-agents offered `as_tool` count among its tools.
    fn llm_parts(&mut self, place: &str, agent: &AgentConfig) -> Option<LlmParts> {
        let declared_models = names(self.spec.models.keys());
        let model = match &agent.model {
            None => {
                self.add(
                    place,
                    "model",
                    format!("an llm agent needs a model (declared: {declared_models})"),
                );
                None
            }
            Some(model) if !self.spec.models.contains_key(model) => {
                self.add(
                    place,
                    "model",
                    format!("unknown model {model:?} (declared: {declared_models})"),
                );
                None
            }
            // Declared but not built: reported at the model.
            Some(model) => self.models.get(model).cloned(),
        };
        let listed = agent.tools.iter().map(String::as_str);
        let sub_tools = agent.sub_agents.iter().filter(|sub| sub.as_tool);
        if let Err(e) = adk_grpc_agents::validate_tool_list(listed.chain(sub_tools.map(|sub| sub.name.as_str()))) {
            self.add(place, "tools", library_message(&e));
        }
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut toolsets: Vec<Arc<dyn Toolset>> = Vec::new();
        let mut descriptions = Vec::new();
        let mut all_tools = true;
        for name in &agent.tools {
            if let Some(tool) = adk_grpc_agents::builtin_tool(name) {
                descriptions.push(ToolDescription::of(tool.as_ref()));
                tools.push(tool);
                continue;
            }
            match self.tools.get(name) {
                Some(Declared::Tool(tool)) => {
                    descriptions.push(ToolDescription::of(tool.as_ref()));
                    tools.push(tool.clone());
                }
                Some(Declared::Toolset(toolset)) => {
                    descriptions.push(ToolDescription::mcp_toolset(toolset));
                    toolsets.push(toolset.clone());
                }
                // Declared but not built: reported at the tool.
                None if self.spec.tools.contains_key(name) => all_tools = false,
                // Reported by the tool list's rule.
                None if name == TRANSFER_TOOL_NAME => all_tools = false,
                None => {
                    all_tools = false;
                    self.add(
                        place,
                        "tools",
                        format!(
                            "unknown tool {name:?} (declared: {}; built in: {})",
                            names(self.spec.tools.keys()),
                            BUILTIN_TOOLS.join(", ")
                        ),
                    );
                }
            }
        }
        if let Some(key) = &agent.output_key
            && let Err(e) = adk_grpc_agents::validate_output_key(key)
        {
            self.add(place, "output_key", library_message(&e));
        }
        if let Some(generation) = &agent.generation
            && generation.max_output_tokens.is_some_and(|n| n < 1)
        {
            self.add(place, "generation", "max_output_tokens must be at least 1");
        }
        let model = model?;
        all_tools.then_some(LlmParts {
            model,
            tools,
            toolsets,
            descriptions,
        })
    }

    /// A remote agent: its own settings, nothing of the local kinds (it runs
    /// elsewhere); built as an agent, or as a tool of its parent with `as_tool`.
    fn remote(&mut self, place: &str, agent: &AgentConfig, before: usize) -> Option<Built> {
        let local_only = [
            ("model", agent.model.is_some()),
            ("instruction", agent.instruction.is_some()),
            ("tools", !agent.tools.is_empty()),
            ("output_key", agent.output_key.is_some()),
            ("include_contents", agent.include_contents.is_some()),
            ("generation", agent.generation.is_some()),
            ("sub_agents", !agent.sub_agents.is_empty()),
        ];
        for (field, _) in local_only.into_iter().filter(|(_, set)| *set) {
            self.add(
                place,
                field,
                "an a2a agent runs elsewhere: its model, instruction, tools and sub_agents are the remote's",
            );
        }
        let config = self.remote_config(place, agent)?;
        let endpoint = config.endpoint.clone();
        let built = if agent.as_tool {
            RemoteA2aTool::new(&agent.name, &agent.description, config).map(|tool| Built::Tool(Arc::new(tool)))
        } else {
            RemoteA2aAgent::new(&agent.name, &agent.description, config).map(|remote| {
                let description = AgentDescription {
                    name: agent.name.clone(),
                    description: agent.description.clone(),
                    kind: agent.kind.as_str().to_string(),
                    model: format!("A2A: {endpoint}"),
                    tools: Vec::new(),
                    sub_agents: Vec::new(),
                };
                Built::Agent(Arc::new(remote), description)
            })
        };
        match built {
            Err(e) => {
                let field = if e.to_string().contains("bearer token") {
                    "bearer_token_env"
                } else {
                    "endpoint"
                };
                self.add(place, field, library_message(&e));
                None
            }
            Ok(_) if self.problems.0.len() > before => None,
            Ok(built) => Some(built),
        }
    }

    /// The settings of an a2a agent; None when one of them has a problem.
    fn remote_config(&mut self, place: &str, agent: &AgentConfig) -> Option<RemoteA2aConfig> {
        let Some(endpoint) = agent.endpoint.clone() else {
            self.add(
                place,
                "endpoint",
                "an a2a agent needs the remote's gRPC endpoint: http://host:port or https://host:port",
            );
            return None;
        };
        // Both read, so a bad ca_file does not hide an unset token variable.
        let before = self.problems.0.len();
        let ca_pem = agent.ca_file.as_ref().and_then(|file| match std::fs::read(file) {
            Ok(pem) => Some(pem),
            Err(e) => {
                self.add(place, "ca_file", format!("cannot read {file:?}: {e}"));
                None
            }
        });
        let bearer_token = agent
            .bearer_token_env
            .as_ref()
            .and_then(|var| match std::env::var(var) {
                Ok(token) if !token.is_empty() => Some(token),
                _ => {
                    self.add(
                        place,
                        "bearer_token_env",
                        format!("environment variable {var} (for the bearer token) is not set"),
                    );
                    None
                }
            });
        if self.problems.0.len() > before {
            return None;
        }
        Some(RemoteA2aConfig {
            endpoint,
            tenant: agent.tenant.clone().unwrap_or_default(),
            ca_pem,
            bearer_token,
        })
    }

    /// The library's verdict on an agent whose fields all passed its rules: a
    /// failure here is a rule the fields do not cover, reported at the agent.
    fn built<T>(&mut self, place: &str, built: adk_grpc_core::Result<T>) -> Option<T> {
        built
            .inspect_err(|e: &AdkError| self.problems.add(place, None, library_message(e)))
            .ok()
    }

    /// The app's compaction settings, its summariser shared with its agents when
    /// they use the same model. The interval and the token budget follow the
    /// core's rules (`CompactionConfig::validate`), each checked on its own so a
    /// problem names its field.
    fn compaction(&mut self, place: &str, config: &CompactionFileConfig) -> Option<CompactionConfig> {
        let interval = config.interval;
        if interval.is_none() {
            self.add(
                place,
                "compaction.interval",
                "compaction needs an interval: the number of new invocations that triggers a summary",
            );
        }
        let declared_models = names(self.spec.models.keys());
        let summarizer = match &config.model {
            None => {
                self.add(
                    place,
                    "compaction.model",
                    format!("compaction needs the model that writes summaries (declared: {declared_models})"),
                );
                None
            }
            Some(model) if !self.spec.models.contains_key(model) => {
                self.add(
                    place,
                    "compaction.model",
                    format!("unknown model {model:?} (declared: {declared_models})"),
                );
                None
            }
            Some(model) => self.models.get(model).cloned(),
        };
        let (interval, summarizer) = (interval?, summarizer?);
        let mut valid = true;
        let alone = [
            (
                "compaction.interval",
                CompactionConfig::new(interval, summarizer.clone()),
            ),
            (
                "compaction.token_budget",
                CompactionConfig::new(1, summarizer.clone()).with_token_budget(config.token_budget.unwrap_or(1)),
            ),
        ];
        for (field, setting) in alone {
            if let Err(e) = setting.validate() {
                self.add(place, field, library_message(&e));
                valid = false;
            }
        }
        let mut compaction = CompactionConfig::new(interval, summarizer).with_overlap(config.overlap);
        compaction.token_budget = config.token_budget;
        valid.then_some(compaction)
    }
}
