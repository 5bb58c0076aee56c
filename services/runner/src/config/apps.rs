//! The apps: each agent checked field by field and built with the runner
//! library's builders, in one pass over the tree. The library's rules (agent
//! names, unique names in a tree, tool lists, `output_key`, compaction settings)
//! are applied by calling the library's own functions on each field, so a problem
//! names its field; the rules here are the file's own (references to declared
//! models and tools, fields that do not fit an agent's kind).

use super::file::{AgentConfig, AgentKind, AgentsFile, AppConfig, CompactionFileConfig, GenerationConfig, Mode};
use super::models::AppModels;
use super::problems::{Problems, library_message, names};
use super::tools::{Declared, ModelConsultSpec};
use crate::app::{AgentDescription, ToolDescription};
use adk_grpc_agents::a2a::{RemoteA2aAgent, RemoteA2aConfig, RemoteA2aTool};
use adk_grpc_agents::{
    AddToMemory, AgentNames, AgentTool, BUILTIN_TOOLS, Hook, Hooks, HttpHook, LlmAgent, LlmAgentBuilder, LoopAgent,
    ModelConsultTool, OnBusy, ParallelAgent, ResumabilityConfig, SequentialAgent, StateSchema, TRANSFER_TOOL_NAME,
    with_agent_hooks,
};
use adk_grpc_core::{AdkError, Agent, CompactionConfig, Llm, Tool, Toolset};
use adk_grpc_models::ProviderConfig;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// An app of the file, built but for its stores (they belong to the process).
pub(super) struct LoadedApp {
    pub(super) name: String,
    pub(super) root_agent: Arc<dyn Agent>,
    pub(super) description: AgentDescription,
    pub(super) compaction: Option<CompactionConfig>,
    /// The smallest `context_budget_tokens` of the models the app's llm agents use
    /// (each model's own or its provider's default); None without llm agents.
    pub(super) context_budget_tokens: Option<usize>,
    pub(super) on_busy: OnBusy,
    pub(super) add_to_memory: Option<AddToMemory>,
    pub(super) resumability_config: ResumabilityConfig,
}

/// Every app of the file; those with a problem are left out (and the problem added).
pub(super) fn build_apps(
    spec: &AgentsFile,
    models: &BTreeMap<String, AppModels>,
    tools: &BTreeMap<String, Declared>,
    hooks: &BTreeMap<String, Arc<HttpHook>>,
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
        let app_hooks = listed_hooks(spec, hooks, &app.hooks, &place, problems);
        let mut tree = Tree {
            spec,
            app_name,
            models: models.get(app_name).unwrap_or(&no_models),
            tools,
            hooks,
            app_hooks,
            names: AgentNames::default(),
            inherited_model: None,
            inherited_state_schema: None,
            context_budget_tokens: None,
            problems: &mut *problems,
        };
        let root = tree.agent(&app.root_agent, None);
        let compaction = app
            .compaction
            .as_ref()
            .and_then(|compaction| tree.compaction(&place, compaction));
        let context_budget_tokens = tree.context_budget_tokens;
        let complete = problems.0.len() == before;
        match root {
            Some(Built::Agent(root_agent, description)) if complete => {
                let mut loaded = loaded(app_name, app, root_agent, description, compaction);
                loaded.context_budget_tokens = context_budget_tokens;
                apps.push(loaded)
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
        context_budget_tokens: None,
        on_busy: app.on_busy.into(),
        add_to_memory: app.memory.as_ref().map(|memory| memory.add.into()),
        resumability_config: app.resumability_config.into(),
    }
}

/// The hooks `listed` at `place`, in order; unknown or repeated names are problems
/// (a declared hook that was not built is reported at the hook).
fn listed_hooks(
    spec: &AgentsFile,
    hooks: &BTreeMap<String, Arc<HttpHook>>,
    listed: &[String],
    place: &str,
    problems: &mut Problems,
) -> Vec<Arc<HttpHook>> {
    let mut found: Vec<Arc<HttpHook>> = Vec::new();
    for name in listed {
        match hooks.get(name) {
            Some(_) if found.iter().any(|hook| hook.name() == name) => {
                problems.add(place, Some("hooks"), format!("{name} is listed twice"));
            }
            Some(hook) => found.push(hook.clone()),
            None if spec.hooks.contains_key(name) => {}
            None => problems.add(
                place,
                Some("hooks"),
                format!("unknown hook {name:?} (declared: {})", names(spec.hooks.keys())),
            ),
        }
    }
    found
}

/// `agent` bounded by its `timeout_secs` (ADK's `timeout`), when it has one.
fn timed(agent: Arc<dyn Agent>, timeout: Option<Duration>) -> Arc<dyn Agent> {
    match timeout {
        Some(timeout) => adk_grpc_agents::with_timeout(agent, timeout),
        None => agent,
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
    /// Its own `state_schema`, or the nearest one above it.
    state_schema: Option<Arc<StateSchema>>,
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
        hooks: Hooks,
        description: &mut AgentDescription,
    ) -> adk_grpc_core::Result<LlmAgent> {
        description.model = self.model.name().to_string();
        description.mode = agent
            .mode
            .map_or(adk_grpc_core::AgentMode::Chat, adk_grpc_core::AgentMode::from)
            .as_str()
            .to_string();
        for tool in &sub_tools {
            let mut described = ToolDescription::of(tool.as_ref());
            described.description = format!("An agent as a tool: {}", described.description);
            description.tools.push(described);
        }
        description.tools.extend(self.descriptions);
        let mut builder = LlmAgentBuilder::new(&agent.name)
            .description(&agent.description)
            .model(self.model)
            .tools(sub_tools)
            .tools(self.tools)
            .toolsets(self.toolsets)
            .sub_agents(sub_agents)
            .hooks(hooks);
        if let Some(schema) = self.state_schema {
            builder = builder.state_schema(schema);
        }
        agent.llm_fields(builder).builder?.build()
    }
}

/// One app's agent tree while it is checked and built.
struct Tree<'a> {
    spec: &'a AgentsFile,
    app_name: &'a str,
    models: &'a AppModels,
    tools: &'a BTreeMap<String, Declared>,
    hooks: &'a BTreeMap<String, Arc<HttpHook>>,
    /// The app's hooks, called for every agent before its own.
    app_hooks: Vec<Arc<HttpHook>>,
    /// The library's rule: agent names are unique in a tree.
    names: AgentNames,
    /// The model of the nearest llm agent above the one being checked: an llm agent
    /// without `model` uses it (ADK's `canonical_model`: workflow agents in between
    /// are passed over).
    inherited_model: Option<String>,
    /// The smallest history budget of the models its llm agents use so far.
    context_budget_tokens: Option<usize>,
    /// The `state_schema` of the nearest agent above the one being checked that has
    /// one: an agent without its own is held to it (ADK's context scoping).
    inherited_state_schema: Option<Arc<StateSchema>>,
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
            ];
            for (field, _) in a2a_only.into_iter().filter(|(_, set)| *set) {
                self.add(
                    &place,
                    field,
                    format!("only a2a agents have it; this is a {kind} agent"),
                );
            }
        }
        if parent.is_some() && agent.global_instruction.is_some() {
            self.add(
                &place,
                "global_instruction",
                "only the root agent's is used (it applies to every agent of the tree): move it to the root",
            );
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
        self.mode(&place, agent, parent);
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
        let timeout = self.timeout(&place, agent);
        let hooks = self.agent_hooks(&place, agent);
        if agent.kind == AgentKind::A2a {
            return self.remote(&place, agent, before).map(|built| match built {
                Built::Agent(remote, description) => {
                    Built::Agent(timed(with_agent_hooks(remote, hooks, None), timeout), description)
                }
                tool => tool,
            });
        }
        // The agent's own fields first, then its sub-agents', as the file reads.
        let state_schema = self.state_schema(&place, agent);
        let llm = match agent.kind {
            AgentKind::Llm => self.llm_parts(&place, agent).map(|parts| LlmParts {
                state_schema: state_schema.clone(),
                ..parts
            }),
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
        let inherited_model = self.inherited_model.clone();
        if agent.kind == AgentKind::Llm && agent.model.is_some() {
            self.inherited_model = agent.model.clone();
        }
        // Its hooks' writes are held to it too (an llm agent's where its events are stored).
        let hooks_schema = state_schema.clone();
        let inherited_state_schema = std::mem::replace(&mut self.inherited_state_schema, state_schema);
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
        self.inherited_model = inherited_model;
        self.inherited_state_schema = inherited_state_schema;
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
            mode: String::new(),
        };
        let built: Arc<dyn Agent> = match agent.kind {
            AgentKind::Llm => {
                let built = llm?.build(agent, sub_tools, sub_agents, hooks, &mut description);
                Arc::new(self.built(&place, built)?)
            }
            AgentKind::Sequential => with_agent_hooks(
                Arc::new(SequentialAgent::new(&agent.name, sub_agents).description(&agent.description)),
                hooks,
                hooks_schema,
            ),
            AgentKind::Parallel => with_agent_hooks(
                Arc::new(ParallelAgent::new(&agent.name, sub_agents).description(&agent.description)),
                hooks,
                hooks_schema,
            ),
            AgentKind::Loop => {
                let mut built = LoopAgent::new(&agent.name, sub_agents).description(&agent.description);
                if let Some(max) = agent.max_iterations {
                    built = built.max_iterations(max);
                }
                with_agent_hooks(Arc::new(built), hooks, hooks_schema)
            }
            AgentKind::A2a => unreachable!("a2a agents are built by Tree::remote"),
        };
        let built = timed(built, timeout);
        if agent.as_tool {
            // ADK's AgentTool: the parent calls it; its reply is the call's result.
            return Some(Built::Tool(Arc::new(AgentTool::new(built))));
        }
        Some(Built::Agent(built, description))
    }

    /// A model_consult tool with this app's instance of its advisor; None when the
    /// advisor was not built (reported at the model).
    fn model_consult(&mut self, name: &str, spec: &ModelConsultSpec) -> Option<Arc<dyn Tool>> {
        let advisor = self.models.get(&spec.advisor)?.clone();
        let place = format!("tool {name:?}");
        if let Some(generation) = &spec.generation {
            // The agents' `generation` checks, against the advisor's provider, named
            // as the tool's field.
            let before = self.problems.0.len();
            self.generation(&place, generation, Some(advisor.provider()));
            for problem in &mut self.problems.0[before..] {
                if let Some(field) = problem.field.as_mut().filter(|f| f.starts_with("generation")) {
                    *field = field.replacen("generation", "generate_content_config", 1);
                }
            }
            if self.problems.0.len() > before {
                return None;
            }
        }
        let built = ModelConsultTool::new(name, advisor).and_then(|mut tool| {
            tool = tool
                .with_description(&spec.description)
                .with_agent_instruction(spec.include_agent_instruction)
                .with_tool_inventory(spec.include_tool_inventory)
                .with_generate_content_config(spec.config.clone())
                .with_context(spec.context.clone())?;
            if let Some(instruction) = &spec.advisor_instruction {
                tool = tool.with_advisor_instruction(instruction);
            }
            if let Some(instruction) = &spec.executor_instruction {
                tool = tool.with_executor_instruction(instruction);
            }
            if let Some(max) = spec.max_uses {
                tool = tool.with_max_uses(max)?;
            }
            if let Some(max) = spec.session_max_uses {
                tool = tool.with_session_max_uses(max)?;
            }
            if let Some(timeout) = spec.timeout {
                tool = tool.with_timeout(timeout);
            }
            Ok(tool)
        });
        match built {
            Ok(tool) => Some(Arc::new(tool)),
            Err(e) => {
                self.problems.add(&place, None, library_message(&e));
                None
            }
        }
    }

    /// The agent's `state_schema` (inline, or read from the file it names), compiled;
    /// else the one it inherits.
    fn state_schema(&mut self, place: &str, agent: &AgentConfig) -> Option<Arc<StateSchema>> {
        let written = match &agent.state_schema {
            None => return self.inherited_state_schema.clone(),
            Some(Value::String(path)) => {
                let read = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {path:?}: {e}"))
                    .and_then(|text| {
                        yaml_serde::from_str::<Value>(&text).map_err(|e| format!("{path:?} is not JSON or YAML: {e}"))
                    });
                match read {
                    Ok(schema) => schema,
                    Err(message) => {
                        self.add(place, "state_schema", message);
                        return None;
                    }
                }
            }
            Some(schema) => schema.clone(),
        };
        match StateSchema::new(written) {
            Ok(schema) => Some(Arc::new(schema)),
            Err(e) => {
                self.add(place, "state_schema", library_message(&e));
                None
            }
        }
    }

    /// `mode` (ADK 2's): task and single_turn make an llm sub-agent a tool its llm parent
    /// calls in the same session, so not a transfer target, not `as_tool` (ADK's
    /// `AgentTool`, a session of its own), never the root; such an agent answers its
    /// parent's call and never hands over, so its own sub-agents are task or single_turn.
    /// (Other kinds are refused with the llm-only fields.)
    fn mode(&mut self, place: &str, agent: &AgentConfig, parent: Option<&AgentConfig>) {
        let Some(mode) = agent
            .mode
            .filter(|mode| *mode != Mode::Chat && agent.kind == AgentKind::Llm)
        else {
            return;
        };
        let mode = adk_grpc_core::AgentMode::from(mode).as_str();
        match parent {
            None => self.add(
                place,
                "mode",
                format!("the root agent has no parent to call it ({mode})"),
            ),
            Some(parent) if parent.kind != AgentKind::Llm => self.add(
                place,
                "mode",
                format!(
                    "a {mode} agent is a tool of its parent and only an llm agent calls tools; its parent {:?} is a {} \
                     agent",
                    parent.name,
                    parent.kind.as_str()
                ),
            ),
            Some(_) => {}
        }
        if agent.as_tool {
            self.add(
                place,
                "as_tool",
                format!(
                    "set mode or as_tool, not both: as_tool runs the agent in a session of its own (ADK's AgentTool),                      mode {mode} in its parent's"
                ),
            );
        }
        for sub in agent
            .sub_agents
            .iter()
            .filter(|sub| sub.mode.is_none_or(|m| m == Mode::Chat) && !sub.as_tool)
        {
            self.add(
                place,
                "sub_agents",
                format!(
                    "a {mode} agent answers its parent's call and never hands the conversation over: its sub-agent {:?} \
                     must be of mode task or single_turn (or as_tool)",
                    sub.name
                ),
            );
        }
    }

    /// `timeout_secs`: at least 1, on an agent that is run (an a2a agent offered as a
    /// tool is called: its parent's model waits for it as for any tool).
    fn timeout(&mut self, place: &str, agent: &AgentConfig) -> Option<Duration> {
        match agent.timeout_secs {
            None => None,
            Some(0) => {
                self.add(
                    place,
                    "timeout_secs",
                    "must be at least 1 (leave it out for no timeout)",
                );
                None
            }
            Some(_) if agent.kind == AgentKind::A2a && agent.as_tool => {
                self.add(
                    place,
                    "timeout_secs",
                    "an a2a agent offered as a tool is called, not run as an agent: it has no timeout of its own",
                );
                None
            }
            Some(secs) => Some(Duration::from_secs(secs)),
        }
    }

    /// The agent's hooks: the app's, then its own. Only llm agents call models and
    /// tools, so another kind may list only hooks of `before_agent` and `after_agent`
    /// (app-wide hooks apply to every agent at the points it has).
    fn agent_hooks(&mut self, place: &str, agent: &AgentConfig) -> Hooks {
        let own = listed_hooks(self.spec, self.hooks, &agent.hooks, place, self.problems);
        for hook in &own {
            if self.app_hooks.iter().any(|app_hook| Arc::ptr_eq(app_hook, hook)) {
                self.add(
                    place,
                    "hooks",
                    format!(
                        "{} is a hook of the whole app already (app {:?}, hooks): listed here too, it would be called \
                         twice",
                        hook.name(),
                        self.app_name
                    ),
                );
            }
            let other_points: Vec<&str> = hook
                .points()
                .iter()
                .filter(|point| !point.is_agent_point())
                .map(|point| point.as_str())
                .collect();
            if agent.kind != AgentKind::Llm && !other_points.is_empty() {
                self.add(
                    place,
                    "hooks",
                    format!(
                        "hook {} is called at {}: only llm agents call models and tools; a {} agent has \
                         before_agent and after_agent",
                        hook.name(),
                        other_points.join(", "),
                        agent.kind.as_str()
                    ),
                );
            }
        }
        if agent.as_tool && !agent.hooks.is_empty() {
            self.add(
                place,
                "hooks",
                "an a2a agent offered as a tool is called, not run as an agent: its hooks would never be called \
                 (its parent's before_tool and after_tool hooks see its calls)",
            );
        }
        Hooks::new(
            self.app_hooks
                .iter()
                .cloned()
                .chain(own)
                .map(|hook| hook as Arc<dyn Hook>),
        )
    }

    /// A workflow agent has sub-agents and none of an llm agent's fields.
    fn workflow_fields(&mut self, place: &str, agent: &AgentConfig) {
        let kind = agent.kind.as_str();
        for field in agent.llm_fields_set() {
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
        let model = match agent.model.as_ref().or(self.inherited_model.as_ref()) {
            None => {
                self.add(
                    place,
                    "model",
                    format!(
                        "an llm agent needs a model, its own or an llm agent's above it (declared: {declared_models})"
                    ),
                );
                None
            }
            // An inherited one is reported at the agent that names it.
            Some(model) if !self.spec.models.contains_key(model) => {
                if agent.model.is_some() {
                    self.add(
                        place,
                        "model",
                        format!("unknown model {model:?} (declared: {declared_models})"),
                    );
                }
                None
            }
            // Declared but not built: reported at the model.
            Some(model) => {
                let config = ProviderConfig::deserialize(&self.spec.models[model]).ok();
                if let Some(budget) = config.as_ref().map(ProviderConfig::context_budget_tokens) {
                    self.context_budget_tokens = Some(self.context_budget_tokens.map_or(budget, |b| b.min(budget)));
                }
                self.models.get(model).cloned()
            }
        };
        let listed = agent.tools.iter().map(String::as_str);
        // Its as_tool, task and single_turn sub-agents are tools by their names.
        let sub_tools = agent
            .sub_agents
            .iter()
            .filter(|sub| sub.as_tool || sub.mode.is_some_and(|mode| mode != Mode::Chat));
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
                Some(Declared::ModelConsult(spec)) => match self.model_consult(name, spec) {
                    Some(tool) => {
                        descriptions.push(ToolDescription::of(tool.as_ref()));
                        tools.push(tool);
                    }
                    None => all_tools = false,
                },
                Some(Declared::Tools(operations)) => {
                    for tool in operations {
                        // The model calls an operation by its name: no other tool of the agent may have it.
                        let taken = tools.iter().any(|other| other.name() == tool.name())
                            || agent.tools.iter().any(|listed| listed != name && listed == tool.name());
                        if taken {
                            self.add(
                                place,
                                "tools",
                                format!(
                                    "{name}'s operation {} has the name of another of the agent's tools: give \
                                     {name} a tool_prefix",
                                    tool.name()
                                ),
                            );
                        }
                        descriptions.push(ToolDescription::of(tool.as_ref()));
                        tools.push(tool.clone());
                    }
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
        if let Some(schema) = &agent.output_schema
            && let Err(e) = adk_grpc_agents::check_schema("output_schema", schema)
        {
            self.add(place, "output_schema", library_message(&e));
        }
        if let Some(schema) = &agent.input_schema
            && let Err(e) = adk_grpc_agents::check_object_schema("input_schema", schema)
        {
            self.add(place, "input_schema", library_message(&e));
        }
        let examples: Vec<adk_grpc_agents::Example> = agent.examples.iter().map(Into::into).collect();
        if let Err(e) = adk_grpc_agents::check_examples(&examples) {
            self.add(place, "examples", library_message(&e));
        }
        if agent.output_schema.is_some()
            && agent
                .tools
                .iter()
                .any(|t| t == adk_grpc_agents::SET_MODEL_RESPONSE_TOOL_NAME)
        {
            self.add(
                place,
                "tools",
                "set_model_response is offered by itself to an agent with an output_schema and tools: name the tool \
                 otherwise",
            );
        }
        let provider = model.as_ref().map(|m| m.provider().to_string());
        if let Some(generation) = &agent.generation {
            self.generation(place, generation, provider.as_deref());
        }
        // Gemini runs these itself; another provider would refuse every request.
        let provider_builtins = tools.iter().filter(|tool| tool.is_provider_builtin());
        for tool in provider_builtins {
            if let Some(provider) = provider.as_deref().filter(|p| *p != "gemini" && *p != "mock") {
                self.add(
                    place,
                    "tools",
                    format!(
                        "{} is a tool Gemini runs itself, and this agent's model is not a gemini model ({provider})",
                        tool.name()
                    ),
                );
            }
        }
        let model = model?;
        all_tools.then_some(LlmParts {
            model,
            state_schema: None,
            tools,
            toolsets,
            descriptions,
        })
    }

    /// `generation`: each setting in its range, and only what the agent's model's
    /// provider has (`provider` is None when the model is not built).
    fn generation(&mut self, place: &str, generation: &GenerationConfig, provider: Option<&str>) {
        if generation.max_output_tokens.is_some_and(|n| n < 1) {
            self.add(place, "generation", "max_output_tokens must be at least 1");
        }
        if generation.top_k.is_some_and(|k| k < 1) {
            self.add(place, "generation.top_k", "must be at least 1");
        }
        let openai = provider == Some("openai");
        if let Some(mime) = &generation.response_mime_type {
            match mime.as_str() {
                "text/plain" | "application/json" => {}
                _ if openai => self.add(
                    place,
                    "generation.response_mime_type",
                    format!(
                        "an openai model replies in text/plain or application/json, not {mime:?} (the output_schema \
                         field asks for structured JSON)"
                    ),
                ),
                m if m.split_once('/').is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()) => {}
                _ => self.add(
                    place,
                    "generation.response_mime_type",
                    format!("{mime:?} is not a MIME type (e.g. application/json)"),
                ),
            }
        }
        if !generation.safety_settings.is_empty() && openai {
            self.add(
                place,
                "generation.safety_settings",
                "safety settings are Gemini's (safetySettings): an openai model has none; leave them out or use a \
                 gemini model",
            );
        }
        for (i, setting) in generation.safety_settings.iter().enumerate() {
            let fits = setting.as_object().is_some_and(|s| {
                s.get("category").is_some_and(serde_json::Value::is_string)
                    && s.get("threshold").is_some_and(serde_json::Value::is_string)
            });
            if !fits {
                self.add(
                    place,
                    "generation.safety_settings",
                    format!(
                        "entry {} must be {{category: HARM_CATEGORY_…, threshold: BLOCK_…}} as Gemini's API takes it, \
                         not {setting}",
                        i + 1
                    ),
                );
            }
        }
        if let Some(thinking) = &generation.thinking {
            let field = "generation.thinking";
            if thinking.budget_tokens.is_none() && thinking.include_thoughts.is_none() && thinking.effort.is_none() {
                self.add(place, field, "set budget_tokens, include_thoughts or effort");
            }
            if thinking.budget_tokens.is_some_and(|b| b < -1) {
                self.add(
                    place,
                    "generation.thinking.budget_tokens",
                    "must be -1 (the model decides), 0 (no thinking) or a number of tokens",
                );
            }
            if thinking.budget_tokens.is_some() && thinking.effort.is_some() {
                self.add(
                    place,
                    field,
                    "set budget_tokens or effort, not both (Gemini refuses a thinkingBudget with a thinkingLevel)",
                );
            }
            if openai && thinking.budget_tokens.is_some() {
                self.add(
                    place,
                    "generation.thinking.budget_tokens",
                    "an openai model takes an effort (reasoning_effort: low, medium, high), not a token budget",
                );
            }
            if openai && thinking.include_thoughts.is_some() {
                self.add(
                    place,
                    "generation.thinking.include_thoughts",
                    "an openai model has no such switch: a server that reasons returns its reasoning \
                     (reasoning_content) by itself, and it is stored as thought parts",
                );
            }
        }
        self.generation_output(place, generation, openai);
    }

    /// `generation`'s reply settings: candidates, log probabilities, Gemini's own keys.
    fn generation_output(&mut self, place: &str, generation: &GenerationConfig, openai: bool) {
        if generation.candidate_count.is_some_and(|n| n != 1) {
            self.add(
                place,
                "generation.candidate_count",
                "only 1: ADK reads the first candidate of a reply (and so does the runner), so the others would be \
                 paid for and lost",
            );
        }
        if let Some(n) = generation.logprobs {
            if !(0..=20).contains(&n) {
                self.add(place, "generation.logprobs", "must be 0 to 20 (top tokens per step)");
            }
            if generation.response_logprobs != Some(true) {
                self.add(
                    place,
                    "generation.logprobs",
                    "needs response_logprobs: true (both providers refuse top tokens without it)",
                );
            }
        }
        if generation
            .speech_config
            .as_ref()
            .is_some_and(|s| !s.is_string() && !s.is_object())
        {
            self.add(
                place,
                "generation.speech_config",
                "must be a mapping (google-genai's SpeechConfig: voice_config, language_code, …) or a voice name",
            );
        }
        if generation
            .audio_transcription_config
            .as_ref()
            .is_some_and(|c| !c.is_object())
        {
            self.add(
                place,
                "generation.audio_transcription_config",
                "must be a mapping (google-genai's AudioTranscriptionConfig)",
            );
        }
        let gemini_only = [
            (
                "generation.media_resolution",
                generation.media_resolution.is_some(),
                "mediaResolution",
            ),
            (
                "generation.cached_content",
                generation.cached_content.is_some(),
                "cachedContent",
            ),
            (
                "generation.enable_enhanced_civic_answers",
                generation.enable_enhanced_civic_answers.is_some(),
                "enableEnhancedCivicAnswers",
            ),
        ];
        for (field, set, wire) in gemini_only {
            if set && openai {
                self.add(
                    place,
                    field,
                    format!(
                        "Gemini's ({wire}): chat completions have no such setting; leave it out or use a gemini model"
                    ),
                );
            }
        }
        if let Some(resolution) = &generation.media_resolution {
            const RESOLUTIONS: [&str; 4] = [
                "MEDIA_RESOLUTION_UNSPECIFIED",
                "MEDIA_RESOLUTION_LOW",
                "MEDIA_RESOLUTION_MEDIUM",
                "MEDIA_RESOLUTION_HIGH",
            ];
            if !RESOLUTIONS.contains(&resolution.as_str()) {
                self.add(
                    place,
                    "generation.media_resolution",
                    format!("{resolution:?} is not one of {}", RESOLUTIONS.join(", ")),
                );
            }
        }
        if generation
            .cached_content
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            self.add(
                place,
                "generation.cached_content",
                "is empty: name a cache (cachedContents/…)",
            );
        }
        for modality in &generation.response_modalities {
            match modality.as_str() {
                "TEXT" => {}
                "IMAGE" if !openai => {}
                "IMAGE" => self.add(
                    place,
                    "generation.response_modalities",
                    "IMAGE replies are Gemini's: chat completions reply in text",
                ),
                "AUDIO" => self.add(
                    place,
                    "generation.response_modalities",
                    "AUDIO replies are not offered: they need speech_config and a speech model, and ADK plays them \
                     through run_live, which the runner does not offer",
                ),
                other => self.add(
                    place,
                    "generation.response_modalities",
                    format!("{other:?} is not TEXT or IMAGE"),
                ),
            }
        }
    }

    /// A remote agent: its own settings, nothing of the local kinds (it runs
    /// elsewhere); built as an agent, or as a tool of its parent with `as_tool`.
    fn remote(&mut self, place: &str, agent: &AgentConfig, before: usize) -> Option<Built> {
        let local = [
            ("state_schema", agent.state_schema.is_some()),
            ("sub_agents", !agent.sub_agents.is_empty()),
        ];
        let local_only = local.into_iter().filter(|(_, set)| *set).map(|(field, _)| field);
        for field in agent.llm_fields_set().into_iter().chain(local_only) {
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
                    mode: String::new(),
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
