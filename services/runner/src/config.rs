//! The agents file: models, tools and apps in YAML, checked as a whole when it is
//! loaded and turned into runners with the runner library's builders.
//!
//! ```yaml
//! models:                      # named model providers (adk_grpc_models::ProviderConfig)
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
//!   pets:
//!     kind: openapi            # one tool per operation of an OpenAPI 3.x spec (a file or a URL)
//!     spec: http://localhost:8000/openapi.json
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
//! default), then checked and built in one pass, every problem reported at once,
//! each naming the file, the app, the agent and the field. An agent's rules are
//! the runner library's own (`adk_grpc_agents::validate_agent_name` and its siblings,
//! the builders); the file adds only its own: references to declared models and
//! tools, and no field that does not fit an agent's or a tool's kind.
//!
//! - `file.rs`: the file as written (serde);
//! - `models.rs`, `tools.rs`, `hooks.rs`: the declared models, tools and hooks, built;
//! - `apps.rs`: the agent trees, checked and built;
//! - `problems.rs`: what is wrong, where;
//! - `adk_config.rs`: ADK's agent-config directories (`root_agent.yaml`, what
//!   `adk create --type=config` writes), translated into an agents file;
//! - `python.rs`: the Python worker serving a directory's tool and callback functions.

mod adk_config;
mod apps;
mod file;
mod hooks;
mod models;
mod problems;
mod python;
mod tools;

pub use problems::{ConfigError, Problem};

use crate::app::App;
use crate::stores::RunnerServices;
use adk_grpc_agents::Runner;
use apps::LoadedApp;
use file::AgentsFile;
use problems::{Problems, library_message};
use std::fmt;
use std::path::Path;

/// A loaded agents file: checked, and its agent trees built (every model and tool
/// too, API key variables included). [`AgentsConfig::build`] puts them over a
/// process's stores.
pub struct AgentsConfig {
    file: String,
    apps: Vec<LoadedApp>,
}

impl fmt::Debug for AgentsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentsConfig")
            .field("file", &self.file)
            .field("apps", &self.app_names())
            .finish()
    }
}

impl AgentsConfig {
    /// Reads and checks the agents file at `path`, or the ADK agent-config
    /// directory (see [`AgentsConfig::load_adk_dir`]); errors name it as given.
    pub fn load(path: &Path) -> Result<AgentsConfig, ConfigError> {
        Self::load_with_python(path, &python::interpreter_from_env())
    }

    /// [`AgentsConfig::load`], the Python functions an ADK agent-config directory names
    /// served by a worker run with the interpreter `python` (the binaries' `--python`).
    pub fn load_with_python(path: &Path, python: &Path) -> Result<AgentsConfig, ConfigError> {
        if path.is_dir() {
            return Self::load_adk_dir(path, python);
        }
        let file = path.display().to_string();
        let yaml = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::whole_file(&file, format!("cannot read the agents file: {e}")))?;
        Self::from_yaml(&file, &yaml)
    }

    /// Checks `yaml` and builds its agents; `file` is the name errors give it.
    pub fn from_yaml(file: &str, yaml: &str) -> Result<AgentsConfig, ConfigError> {
        // An empty file deserializes as "no value": say what is missing instead.
        if yaml.trim().is_empty() {
            return Err(ConfigError::whole_file(
                file,
                "the file is empty: declare at least one app under `apps:`".into(),
            ));
        }
        let spec: AgentsFile = yaml_serde::from_str(yaml).map_err(|e| ConfigError::whole_file(file, e.to_string()))?;
        Self::check(file, &spec, None)
    }

    /// Reads an ADK agent-config directory: `root_agent.yaml` (its `sub_agents`
    /// in the YAML files they name by `config_path`), one app named after the
    /// directory; or a directory of such directories, one app each. The YAML is
    /// translated into an agents file and checked by its rules; every problem
    /// names the YAML file and ADK's field. Python functions named as tools and
    /// callbacks are served by a worker started with `python` (python.rs); other
    /// Python code is refused.
    pub fn load_adk_dir(dir: &Path, python: &Path) -> Result<AgentsConfig, ConfigError> {
        let (spec, origins) = adk_config::read(dir, python)?;
        Self::check(&dir.display().to_string(), &spec, Some(&origins))
    }

    /// Checks `spec` and builds its agents; problems in an ADK directory's
    /// translation are moved to the YAML they come from (`origins`).
    fn check(
        file: &str,
        spec: &AgentsFile,
        origins: Option<&adk_config::Origins>,
    ) -> Result<AgentsConfig, ConfigError> {
        let mut problems = Problems(Vec::new());
        let models = models::build_models(spec, &mut problems);
        let tools = tools::build_tools(spec, &mut problems);
        let hooks = hooks::build_hooks(spec, &mut problems);
        let apps = apps::build_apps(spec, &models, &tools, &hooks, &mut problems);
        if !problems.0.is_empty() {
            if let Some(origins) = origins {
                origins.relocate(&mut problems.0);
            }
            return Err(ConfigError {
                file: file.to_string(),
                problems: problems.0,
            });
        }
        Ok(AgentsConfig {
            file: file.to_string(),
            apps,
        })
    }

    /// The names of the apps, sorted.
    pub fn app_names(&self) -> Vec<&str> {
        self.apps.iter().map(|app| app.name.as_str()).collect()
    }

    /// One runner per app over `services`. The agents are those built at load:
    /// each app has its own instance of every model it uses, shared by its agents
    /// (so a scripted mock model plays its script per app).
    pub fn build(&self, services: &RunnerServices) -> Result<Vec<App>, ConfigError> {
        let mut problems = Problems(Vec::new());
        let mut apps = Vec::new();
        for app in &self.apps {
            let place = format!("app {:?}", app.name);
            let mut config = services.runner_config(app.name.clone(), app.root_agent.clone());
            config.compaction = app.compaction.clone();
            config.context_budget_tokens = app.context_budget_tokens;
            config.on_busy = app.on_busy;
            config.add_to_memory = app.add_to_memory;
            config.resumability_config = app.resumability_config;
            // The runner refuses to add to memory without a memory store; the
            // problem is the file's field.
            let field = (app.add_to_memory.is_some() && services.memory.is_none()).then_some("memory.add");
            match Runner::new(config) {
                Ok(runner) => apps.push(App::with_description(runner, app.description.clone())),
                Err(e) => problems.add(&place, field, library_message(&e)),
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
}

#[cfg(test)]
mod adk_config_tests;
#[cfg(test)]
mod tests;
