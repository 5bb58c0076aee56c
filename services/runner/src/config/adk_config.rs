//! ADK agent-config directories (what `adk create --type=config` writes): a
//! `root_agent.yaml` whose `sub_agents` name other YAML files by `config_path`,
//! or a directory of such directories (as `adk web` reads), one app per
//! subdirectory, named after it.
//!
//! The YAML is TRANSLATED into the agents file's own structs ([`AgentsFile`]), so
//! every rule and builder of the agents file applies unchanged; this module adds
//! only what is ADK's: following `config_path`, the agent classes, model strings
//! turned into providers, the Python functions named as tools and callbacks (served
//! by the directory's Python worker, python.rs, as http tools and hooks) and the
//! `output_schema` classes (which the worker reports as ADK sends them), and
//! refusing, naming the YAML file and the field, what needs other Python code
//! (agent classes, input and state schemas, models) or what the agents file does not offer yet:
//! nothing is dropped silently.
//!
//! Model strings (ADK's registry resolves them by name; here, by prefix):
//! - `gemini-…` and `gemini/<model>`: `provider: gemini`, the key from
//!   `GOOGLE_API_KEY` (else `GEMINI_API_KEY`, as google-genai reads them), the
//!   base URL from `GOOGLE_GEMINI_BASE_URL` when set (google-genai's variable);
//! - `openai/<model>` (LiteLLM's spelling): `provider: openai`, the key from
//!   `OPENAI_API_KEY`, the base URL from `OPENAI_BASE_URL` when set (the OpenAI
//!   SDK's variable; any OpenAI-compatible server).
//!
//! An `LlmAgent` without `model` inherits its nearest `LlmAgent` ancestor's by the
//! agents file's own rule, as in ADK (without one above, it is refused: ADK's
//! default model is not assumed). ADK's `.env` files are not read: the server's
//! environment is.

use super::file::{
    AgentConfig, AgentKind, AgentsFile, AppConfig, ConsultContextConfig, ExampleConfig, GenerationConfig, HookConfig,
    HttpToolConfig, IncludeContents, McpToolConfig, McpTransportKind, Mode, ModelConsultToolConfig,
    StaticInstructionConfig, ToolConfig, ToolContextConfig,
};
use super::problems::{ConfigError, Problem, Problems};
use super::python::{self, ServedAs};
use adk_grpc_agents::{BUILTIN_TOOLS, FailurePolicy, HookPoint, MODEL_CONSULT_TOOL_NAME, TRANSFER_TOOL_NAME};
use adk_grpc_core::ThinkingEffort;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The file ADK reads an agent-config directory's root agent from.
pub(super) const ROOT_AGENT_FILE: &str = "root_agent.yaml";

/// Where the translated agents and models came from, so problems the agents
/// file's rules find name the YAML file (and ADK's field) instead.
#[derive(Default)]
pub(super) struct Origins {
    /// The agents file's place (`app "a", agent "n"`, `model "m"`) -> the YAML's.
    places: HashMap<String, String>,
}

impl Origins {
    /// Renames the places (and the agents-file fields that ADK spells otherwise)
    /// of `problems` found in the translated file.
    pub(super) fn relocate(&self, problems: &mut [Problem]) {
        for problem in problems {
            if let Some(place) = self.places.get(&problem.place) {
                problem.place = place.clone();
            }
            if let Some(field) = &mut problem.field {
                *field = match field.as_str() {
                    "kind" => "agent_class".to_string(),
                    "generation.thinking" => "generate_content_config.thinking_config".to_string(),
                    // A ModelConsultTool's generate_content_config, named as ADK's.
                    other
                        if other == "generate_content_config.thinking"
                            || other.starts_with("generate_content_config.thinking.") =>
                    {
                        other.replacen("thinking", "thinking_config", 1)
                    }
                    other => match other.strip_prefix("generation") {
                        Some(rest) if rest.is_empty() || rest.starts_with('.') => {
                            format!("generate_content_config{rest}")
                        }
                        _ => other.to_string(),
                    },
                };
            }
        }
    }
}

/// Reads the ADK agent-config directory `dir` (one app, or a directory of them)
/// as an agents file; errors name `dir` and, in each problem, the YAML file. The
/// Python functions an app names are served by a worker run with `python`.
pub(super) fn read(dir: &Path, python: &Path) -> Result<(AgentsFile, Origins), ConfigError> {
    let file = dir.display().to_string();
    let mut reader = Reader {
        root: dir,
        problems: Problems(Vec::new()),
        models: BTreeMap::new(),
        tools: BTreeMap::new(),
        hooks: BTreeMap::new(),
        code: CodeRefs::default(),
        origins: Origins::default(),
    };
    // Translated first; served once every app's Python worker has started.
    let mut translated = Vec::new();
    if dir.join(ROOT_AGENT_FILE).is_file() {
        // `.` and `..` have no name of their own: the app is named after the directory they are.
        let name = std::fs::canonicalize(dir)
            .ok()
            .and_then(|dir| dir.file_name().map(|name| name.to_string_lossy().into_owned()))
            .unwrap_or_default();
        if let Some(app) = reader.app(&name, dir) {
            translated.push(app);
        }
    } else {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| ConfigError::whole_file(&file, format!("cannot read the directory: {e}")))?;
        let mut subdirs: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.is_dir())
            .collect();
        subdirs.sort();
        for subdir in subdirs {
            let name = subdir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Hidden directories, __pycache__ and the like hold no agent (adk web skips them too).
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            if subdir.join(ROOT_AGENT_FILE).is_file() {
                if let Some(app) = reader.app(&name, &subdir) {
                    translated.push(app);
                }
            } else if ["agent.py", "__init__.py"].iter().any(|f| subdir.join(f).is_file()) {
                reader.problems.add(
                    &format!("{name}/"),
                    None,
                    format!(
                        "app {name:?} is an ADK agent written in Python, which the suite does not run: \
                         write it as an agent-config directory ({ROOT_AGENT_FILE}) or as an agents file"
                    ),
                );
            }
        }
        if translated.is_empty() && reader.problems.0.is_empty() {
            return Err(ConfigError::whole_file(
                &file,
                format!(
                    "neither an agents file nor an ADK agent-config directory: no {ROOT_AGENT_FILE} here \
                     nor in a subdirectory"
                ),
            ));
        }
    }
    let mut apps = BTreeMap::new();
    for (app, worker) in start_workers(python, translated) {
        if let Some((name, config)) = reader.serve_code(app, worker) {
            apps.insert(name, config);
        }
    }
    if !reader.problems.0.is_empty() {
        return Err(ConfigError {
            file,
            problems: reader.problems.0,
        });
    }
    let spec = AgentsFile {
        models: reader.models,
        tools: reader.tools,
        hooks: reader.hooks,
        apps,
    };
    Ok((spec, reader.origins))
}

/// An ADK agent config as written: the fields the suite maps, typed loosely so
/// that each problem can be reported with its field; every other key is in `rest`.
#[derive(Debug, Deserialize)]
struct AdkAgent {
    #[serde(default)]
    agent_class: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    instruction: Option<String>,
    #[serde(default)]
    sub_agents: Option<Vec<Value>>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    output_key: Option<String>,
    #[serde(default)]
    include_contents: Option<String>,
    #[serde(default)]
    max_iterations: Option<i64>,
    #[serde(default)]
    generate_content_config: Option<Map<String, Value>>,
    #[serde(default)]
    output_schema: Option<Value>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    state_schema: Option<Value>,
    #[serde(default)]
    disallow_transfer_to_parent: Option<bool>,
    #[serde(default)]
    disallow_transfer_to_peers: Option<bool>,
    #[serde(default)]
    static_instruction: Option<StaticInstructionConfig>,
    #[serde(default)]
    global_instruction: Option<String>,
    /// ADK 2's `LlmAgent.mode` (its YAML config class has no such key yet): taken here
    /// so a config directory can make a sub-agent a task or single-turn tool.
    #[serde(default)]
    mode: Option<String>,
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

/// ADK's advisor when a `ModelConsultTool` names no `model`.
/// ADK's own Python function tools that its YAML names bare (they are exported by
/// `google.adk.tools`): the app's Python worker runs ADK's tool itself, as for a tool
/// named by its Python path, so its declaration and its pause are ADK's.
const ADK_FUNCTION_TOOLS: [&str; 2] = ["get_user_choice", "request_input"];

const ADK_DEFAULT_ADVISOR: &str = "gemini-3.1-pro-preview";

/// The fields of ADK's `ModelConsultContextConfig` (it forbids others).
const CONSULT_CONTEXT_FIELDS: [&str; 6] = [
    "include_session",
    "max_events",
    "max_chars",
    "max_part_chars",
    "include_media",
    "include_thoughts",
];

/// The `generate_content_config` keys the agents file's `generation` has, by ADK's
/// snake_case (the agents file's name too) and camelCase spellings (pydantic accepts
/// both). `thinking_config` is translated on its own.
const GENERATION_FIELDS: [(&str, &str); 23] = [
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("max_output_tokens", "maxOutputTokens"),
    ("stop_sequences", "stopSequences"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("response_mime_type", "responseMimeType"),
    ("safety_settings", "safetySettings"),
    ("candidate_count", "candidateCount"),
    ("response_logprobs", "responseLogprobs"),
    ("logprobs", "logprobs"),
    ("media_resolution", "mediaResolution"),
    ("cached_content", "cachedContent"),
    ("response_modalities", "responseModalities"),
    ("enable_enhanced_civic_answers", "enableEnhancedCivicAnswers"),
    ("tool_config", "toolConfig"),
    ("image_config", "imageConfig"),
    ("speech_config", "speechConfig"),
    ("audio_transcription_config", "audioTranscriptionConfig"),
    ("service_tier", "serviceTier"),
    ("store", "store"),
];

/// `image_config`'s keys google-genai refuses on the Gemini API (Vertex AI's only).
const IMAGE_CONFIG_VERTEX_ONLY: [(&str, &str); 5] = [
    ("person_generation", "personGeneration"),
    ("prominent_people", "prominentPeople"),
    ("output_mime_type", "outputMimeType"),
    ("output_compression_quality", "outputCompressionQuality"),
    ("image_output_options", "imageOutputOptions"),
];

/// The `generate_content_config` keys the agents file does not take, with why
/// (docs/adk-agent-fields.md gives the same reasons), by ADK's snake_case and camelCase.
const GENERATION_REFUSED: [(&str, &str, &str); 14] = [
    ("tools", "tools", "ADK refuses it too: tools go in the agent's tools"),
    (
        "system_instruction",
        "systemInstruction",
        "ADK refuses it too: the instruction goes in the agent's instruction",
    ),
    (
        "response_schema",
        "responseSchema",
        "ADK refuses it too: the schema goes in the agent's output_schema",
    ),
    (
        "response_json_schema",
        "responseJsonSchema",
        "the schema goes in the agent's output_schema (sent as Gemini's responseJsonSchema)",
    ),
    (
        "http_options",
        "httpOptions",
        "transport settings belong to the model: its base_url and timeout_secs",
    ),
    (
        "should_return_http_response",
        "shouldReturnHttpResponse",
        "a google.genai client switch, not a request setting",
    ),
    (
        "automatic_function_calling",
        "automaticFunctionCalling",
        "a google.genai client feature ADK turns off: the runner calls the tools",
    ),
    (
        "audio_timestamp",
        "audioTimestamp",
        "Vertex AI only (google.genai refuses it on the Gemini API)",
    ),
    (
        "routing_config",
        "routingConfig",
        "Vertex AI only (google.genai refuses it on the Gemini API)",
    ),
    (
        "model_selection_config",
        "modelSelectionConfig",
        "Vertex AI only (google.genai refuses it on the Gemini API)",
    ),
    (
        "model_armor_config",
        "modelArmorConfig",
        "Vertex AI only (google.genai refuses it on the Gemini API)",
    ),
    (
        "generation_output_config",
        "generationOutputConfig",
        "Vertex AI only (google.genai refuses it on the Gemini API)",
    ),
    (
        "continuation_token",
        "continuationToken",
        "a google.genai client feature (resuming a reply that ended with CONTINUATION)",
    ),
    (
        "automatic_continuation",
        "automaticContinuation",
        "a google.genai client feature (resuming a reply that ended with CONTINUATION)",
    ),
];

/// `thinking_config`'s keys: the agents file's `generation.thinking` name, ADK's spellings.
const THINKING_FIELDS: [(&str, &str, &str); 3] = [
    ("budget_tokens", "thinking_budget", "thinkingBudget"),
    ("include_thoughts", "include_thoughts", "includeThoughts"),
    ("effort", "thinking_level", "thinkingLevel"),
];

/// The directories' agents while they are read and translated.
struct Reader<'a> {
    /// The directory given: YAML files are named relative to it.
    root: &'a Path,
    problems: Problems,
    /// The providers of the model strings used, by model string.
    models: BTreeMap<String, Value>,
    /// The tools declared for `ModelConsultTool` entries and Python functions, by tool name.
    tools: BTreeMap<String, ToolConfig>,
    /// The hooks serving Python callbacks, by hook name.
    hooks: BTreeMap<String, HookConfig>,
    /// The Python code the app being read names.
    code: CodeRefs,
    origins: Origins,
}

/// The Python code references of one app, each with where it is named (place, field).
#[derive(Default)]
struct CodeRefs {
    /// Each `tools:` entry naming Python code, with where it is named.
    tools: Vec<(python::ToolEntry, CodeRef)>,
    /// Each with its point and the name of the hook that serves it there.
    callbacks: Vec<(CodeRef, HookPoint, String)>,
    /// `output_schema` and `input_schema` classes (the field in the `CodeRef`), each with
    /// the name of its agent.
    schemas: Vec<(CodeRef, String)>,
}

struct CodeRef {
    /// `module.function`, as ADK's loader imports it.
    reference: String,
    place: String,
    field: String,
}

/// An app translated, its Python code not served yet.
struct TranslatedApp {
    name: String,
    dir: PathBuf,
    config: AppConfig,
    code: CodeRefs,
}

impl CodeRefs {
    /// What the app's worker is started for (each tool entry and callback once); None
    /// when the app names no Python code.
    fn worker_refs(&self) -> Option<WorkerRefs> {
        if self.tools.is_empty() && self.callbacks.is_empty() && self.schemas.is_empty() {
            return None;
        }
        let mut tools: Vec<python::ToolEntry> = self.tools.iter().map(|(entry, _)| entry.clone()).collect();
        tools.sort_by(|a, b| a.key.cmp(&b.key));
        tools.dedup_by(|a, b| a.key == b.key);
        let mut callbacks: Vec<String> = self.callbacks.iter().map(|(c, _, _)| c.reference.clone()).collect();
        let mut schemas: Vec<String> = self.schemas.iter().map(|(c, _)| c.reference.clone()).collect();
        for list in [&mut callbacks, &mut schemas] {
            list.sort();
            list.dedup();
        }
        Some(WorkerRefs {
            tools,
            callbacks,
            schemas,
        })
    }
}

/// What an app's worker is started for.
struct WorkerRefs {
    tools: Vec<python::ToolEntry>,
    callbacks: Vec<String>,
    schemas: Vec<String>,
}

/// Starts the Python worker of each app naming Python code, side by side: each imports
/// ADK and the app's modules, which takes seconds.
fn start_workers(
    python: &Path,
    apps: Vec<TranslatedApp>,
) -> Vec<(TranslatedApp, Option<Result<python::Worker, String>>)> {
    let started: Vec<_> = std::thread::scope(|scope| {
        let starting: Vec<_> = apps
            .iter()
            .map(|app| {
                let refs = app.code.worker_refs()?;
                Some(scope.spawn(move || python::start(python, &app.dir, &refs.tools, &refs.callbacks, &refs.schemas)))
            })
            .collect();
        starting
            .into_iter()
            .map(|start| {
                let started = start?.join();
                Some(started.unwrap_or_else(|_| Err("starting the Python worker panicked".to_string())))
            })
            .collect()
    });
    apps.into_iter().zip(started).collect()
}

impl Reader<'_> {
    /// The app whose root agent is `dir/root_agent.yaml`, as an agents file's app,
    /// with the Python code it names.
    fn app(&mut self, name: &str, dir: &Path) -> Option<TranslatedApp> {
        let mut stack = Vec::new();
        self.code = CodeRefs::default();
        let root_agent = self.agent(name, &dir.join(ROOT_AGENT_FILE), &mut stack)?;
        let config = AppConfig {
            root_agent,
            compaction: None,
            on_busy: Default::default(),
            memory: None,
            hooks: Vec::new(),
            // ADK's agent-config YAML has no app: `adk web` runs it not resumable.
            resumability_config: Default::default(),
        };
        Some(TranslatedApp {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            config,
            code: std::mem::take(&mut self.code),
        })
    }

    /// `path` relative to the directory given, as problems name it.
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(self.root).unwrap_or(path).display().to_string()
    }

    /// The agent of the YAML file at `path` (and, recursively, its sub-agents) as
    /// an agents file's agent; None after a problem. `stack` holds the files being
    /// read above it (a `config_path` cycle is a problem, not a stack overflow).
    fn agent(&mut self, app: &str, path: &Path, stack: &mut Vec<PathBuf>) -> Option<AgentConfig> {
        let shown = self.shown(path);
        let yaml = match std::fs::read_to_string(path) {
            Ok(yaml) => yaml,
            Err(e) => {
                self.problems
                    .add(&shown, None, format!("cannot read the agent config: {e}"));
                return None;
            }
        };
        let value: Value = match yaml_serde::from_str(&yaml) {
            Ok(Value::Null) => {
                self.problems.add(&shown, None, "the agent config is empty");
                return None;
            }
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                self.problems
                    .add(&shown, None, "an agent config is a mapping of its fields");
                return None;
            }
            Err(e) => {
                self.problems.add(&shown, None, e.to_string());
                return None;
            }
        };
        let agent = match AdkAgent::deserialize(value) {
            Ok(agent) => agent,
            Err(e) => {
                self.problems.add(&shown, None, e.to_string());
                return None;
            }
        };
        let Some(name) = agent.name.clone() else {
            self.problems.add(&shown, Some("name"), "an agent needs a name");
            return None;
        };
        let place = format!("{shown}, agent {name:?}");
        let before = self.problems.0.len();
        // The agents file's rule too, checked here so that each of its places
        // (app and agent name) stands for one file.
        let agents_file_place = format!("app {app:?}, agent {name:?}");
        if let Some(first) = self.origins.places.insert(agents_file_place, place.clone()) {
            self.add(
                &place,
                "name",
                format!("{first} has the same name: names are unique in an agent tree, as in ADK"),
            );
        }
        let class = self.class(&place, agent.agent_class.as_deref());
        let hooks = self.callbacks(app, &place, &agent.rest);
        self.rest(&place, &agent.rest);

        let mut out = AgentConfig {
            kind: class.unwrap_or_default(),
            name,
            description: agent.description.unwrap_or_default(),
            instruction: agent.instruction,
            output_key: agent.output_key,
            static_instruction: agent.static_instruction,
            global_instruction: agent.global_instruction,
            disallow_transfer_to_parent: agent.disallow_transfer_to_parent.unwrap_or_default(),
            disallow_transfer_to_peers: agent.disallow_transfer_to_peers.unwrap_or_default(),
            hooks,
            ..AgentConfig::default()
        };
        out.include_contents = match agent.include_contents.as_deref() {
            None => None,
            Some("default") => Some(IncludeContents::Default),
            Some("none") => Some(IncludeContents::None),
            Some(other) => {
                self.add(
                    &place,
                    "include_contents",
                    format!("{other:?} is neither \"default\" nor \"none\""),
                );
                None
            }
        };
        // Checked by the agents file's rules (an llm sub-agent of an llm agent).
        out.mode = match agent.mode.as_deref() {
            None => None,
            Some("chat") => Some(Mode::Chat),
            Some("task") => Some(Mode::Task),
            Some("single_turn") => Some(Mode::SingleTurn),
            Some(other) => {
                self.add(
                    &place,
                    "mode",
                    format!("{other:?} is none of \"chat\", \"task\" and \"single_turn\""),
                );
                None
            }
        };
        if let Some(n) = agent.max_iterations {
            out.max_iterations = u32::try_from(n).ok();
            if n < 0 {
                self.add(&place, "max_iterations", "must not be negative");
            } else if out.max_iterations.is_none() {
                self.add(&place, "max_iterations", format!("must be at most {}", u32::MAX));
            }
        }
        let agent_name = out.name.clone();
        for (field, schema, slot) in [
            ("output_schema", agent.output_schema, &mut out.output_schema),
            ("input_schema", agent.input_schema, &mut out.input_schema),
            ("state_schema", agent.state_schema, &mut out.state_schema),
        ] {
            let code = match &schema {
                // ADK's CodeConfig (`{name: my_lib.Model}`) or its short form, a dotted name.
                Some(Value::String(name)) => Some(name.clone()),
                Some(Value::Object(map)) if map.contains_key("name") && map.len() == 1 => {
                    Some(map["name"].as_str().unwrap_or_default().to_string())
                }
                _ => None,
            };
            match (schema, code) {
                (None | Some(Value::Null), _) => {}
                // A pydantic class, resolved by the app's Python worker (Self::serve_code).
                (_, Some(reference)) if field != "state_schema" => {
                    let at = CodeRef {
                        reference,
                        place: place.clone(),
                        field: field.to_string(),
                    };
                    self.code.schemas.push((at, agent_name.clone()));
                }
                (_, Some(_)) => self.code_schema(&place, field),
                // A JSON Schema, as ADK 2 takes one too: the agents file's rules check it.
                (Some(schema), None) => *slot = Some(schema),
            }
        }
        if let Some(config) = &agent.generate_content_config {
            out.generation = self.generation(&place, config);
        }

        // The model as written: an llm agent without one inherits its nearest llm
        // ancestor's by the agents file's rule; another kind's is passed on for the
        // agents file's rule to refuse.
        out.model = match (agent.model, class) {
            (Some(model), Some(AgentKind::Llm)) => self.model(&shown, &model).then_some(model),
            (model, _) => model,
        };
        let sub_agents = agent.sub_agents.as_deref().unwrap_or_default();
        let mut agent_tools = Vec::new();
        if let Some(tools) = &agent.tools {
            let (tools, agents, examples) = self.tools(&place, path, tools, !sub_agents.is_empty());
            agent_tools = agents;
            out.tools = tools;
            out.examples = examples;
        }

        // Sub-agents, each from its own file, relative to this one's directory.
        stack.push(path.to_path_buf());
        // An AgentTool's agent is a sub-agent its parent calls as a tool (`as_tool`).
        let entries = sub_agents
            .iter()
            .enumerate()
            .map(|(i, sub)| (format!("sub_agents[{i}]"), sub, false))
            .chain(agent_tools.iter().map(|(field, sub)| (field.clone(), sub, true)));
        for (field, sub, as_tool) in entries {
            let Some(sub_path) = self.sub_agent_path(&place, &field, path, sub) else {
                continue;
            };
            let canonical = std::fs::canonicalize(&sub_path).unwrap_or_else(|_| sub_path.clone());
            if stack
                .iter()
                .any(|above| std::fs::canonicalize(above).is_ok_and(|above| above == canonical))
            {
                self.add(
                    &place,
                    &field,
                    format!(
                        "config_path {:?} leads back to a file above it: agents form a tree",
                        self.shown(&sub_path)
                    ),
                );
                continue;
            }
            if let Some(mut built) = self.agent(app, &sub_path, stack) {
                built.as_tool = as_tool;
                out.sub_agents.push(built);
            }
        }
        stack.pop();
        (self.problems.0.len() == before).then_some(out)
    }

    /// `value` as a field of type `T`; None, and a problem naming `field`, when it is not one.
    fn typed<T: DeserializeOwned>(&mut self, place: &str, field: &str, value: &Value) -> Option<T> {
        T::deserialize(value)
            .inspect_err(|e| self.add(place, field, e.to_string()))
            .ok()
    }

    fn code_schema(&mut self, place: &str, field: &str) {
        self.add(
            place,
            field,
            format!(
                "a Python class (a code reference), which the suite does not run (it runs Python tool and callback functions only): give {field} as a JSON Schema \
                 (a mapping) instead"
            ),
        );
    }

    fn add(&mut self, place: &str, field: &str, message: impl Into<String>) {
        self.problems.add(place, Some(field), message);
    }

    /// ADK's `agent_class`: a class of `google.adk.agents` by its short or full name.
    fn class(&mut self, place: &str, agent_class: Option<&str>) -> Option<AgentKind> {
        let written = agent_class.unwrap_or("LlmAgent");
        // google.adk.agents.LoopAgent, google.adk.agents.loop_agent.LoopAgent: ADK's own classes.
        let short = match written.strip_prefix("google.adk.agents.") {
            Some(path) => path.rsplit('.').next().unwrap_or(path),
            None => written,
        };
        match short {
            "" | "LlmAgent" | "Agent" => Some(AgentKind::Llm),
            "SequentialAgent" => Some(AgentKind::Sequential),
            "ParallelAgent" => Some(AgentKind::Parallel),
            "LoopAgent" => Some(AgentKind::Loop),
            _ if short.contains('.') => {
                self.add(
                    place,
                    "agent_class",
                    format!(
                        "{written:?} is a Python class (a code reference), which the suite does not run (it runs Python tool and callback functions only): \
                         use LlmAgent, SequentialAgent, ParallelAgent or LoopAgent, with its tools served \
                         over HTTP or MCP (kind: http, kind: mcp in an agents file)"
                    ),
                );
                None
            }
            _ => {
                self.add(
                    place,
                    "agent_class",
                    format!(
                        "ADK's {written:?} is not supported: the suite runs LlmAgent, SequentialAgent, \
                         ParallelAgent and LoopAgent (and, in an agents file, remote agents: kind: a2a)"
                    ),
                );
                None
            }
        }
    }

    /// Every key of the agent the suite does not map: each refused, by what it is.
    fn rest(&mut self, place: &str, rest: &BTreeMap<String, Value>) {
        // A key set to null is a key left out, for ADK as here.
        for (field, _) in rest.iter().filter(|(_, value)| !value.is_null()) {
            let message = match field.as_str() {
                // Served by the app's Python worker (Self::callbacks).
                _ if callback_point(field).is_some() => continue,
                "model_code" => "a Python code reference building a model, which the suite does not run (it runs Python tool and callback functions only): set \
                                 model to a model string (gemini-…, openai/<model>), or declare the provider \
                                 in an agents file (models:)"
                    .to_string(),
                "planner" | "code_executor" => {
                    "a Python object (a code reference), which the suite does not run (it runs Python tool and callback functions only): not offered".to_string()
                }
                _ => "not supported yet in an ADK agent-config directory (docs/adk-agent-fields.md says what \
                      each ADK field maps to)"
                    .to_string(),
            };
            self.add(place, field, message);
        }
    }

    /// The agent's `*_callback(s)` fields: each Python function a hook of the app's
    /// worker at that point, in the order written; the hooks' names.
    fn callbacks(&mut self, app: &str, place: &str, rest: &BTreeMap<String, Value>) -> Vec<String> {
        let mut hooks = Vec::new();
        for (field, value) in rest.iter().filter(|(_, value)| !value.is_null()) {
            let Some(point) = callback_point(field) else {
                continue;
            };
            // ADK takes a list of `{name: ref}` or refs, or one of them.
            let entries = match value {
                Value::Array(entries) => entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (format!("{field}[{i}]"), e))
                    .collect(),
                entry => vec![(field.clone(), entry)],
            };
            for (at, entry) in entries {
                let reference = match entry {
                    Value::String(reference) => Some(reference.as_str()),
                    Value::Object(code) if code.len() == 1 => code.get("name").and_then(Value::as_str),
                    _ => None,
                };
                let Some(reference) = reference.filter(|r| r.contains('.')) else {
                    self.add(
                        place,
                        &at,
                        "a callback is a Python function named module.function ({name: …})",
                    );
                    continue;
                };
                let function = reference.rsplit('.').next().unwrap_or(reference);
                // Named per app: two apps' `callbacks.guard` are different functions.
                let hook = format!("{app}-{function}-{}", point.as_str());
                self.code.callbacks.push((
                    CodeRef {
                        reference: reference.to_string(),
                        place: place.to_string(),
                        field: at,
                    },
                    point,
                    hook.clone(),
                ));
                hooks.push(hook);
            }
        }
        hooks
    }

    /// A `tools:` entry naming Python code (`module.name`, with ADK's `args` if any),
    /// served by the app's worker; its key, which stands for its tools in the agent's
    /// list until the worker says them (Self::serve_code). Agents naming the same code
    /// without args share one entry; an entry with args is its own (ADK makes a tool
    /// of each).
    fn python_tool(&mut self, place: &str, field: &str, path: &Path, reference: &str, args: Option<&Value>) -> String {
        let key = match args {
            None => reference.to_string(),
            Some(_) => format!("{reference}@{}", self.code.tools.len()),
        };
        let entry = python::ToolEntry {
            key: key.clone(),
            name: reference.to_string(),
            args: args.cloned(),
            config_path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        };
        let named = CodeRef {
            reference: reference.to_string(),
            place: place.to_string(),
            field: field.to_string(),
        };
        self.code.tools.push((entry, named));
        key
    }

    /// The app served: with its started `worker` (when its YAML names Python code),
    /// declares the tools of each `tools:` entry (under a key of the app: another
    /// app's Python tools may have the same names, as in ADK, where each app is its
    /// own) and each callback as the hook it serves, and puts the declared keys in its
    /// tree. None after a problem (a reference that does not import names its field).
    fn serve_code(
        &mut self,
        translated: TranslatedApp,
        worker: Option<Result<python::Worker, String>>,
    ) -> Option<(String, AppConfig)> {
        let TranslatedApp {
            name: app,
            mut config,
            code,
            ..
        } = translated;
        let worker = match worker {
            None => return Some((app, config)),
            Some(Ok(worker)) => worker,
            Some(Err(message)) => {
                let first = code
                    .tools
                    .first()
                    .map(|(_, named)| named)
                    .or(code.callbacks.first().map(|(c, _, _)| c))
                    .or(code.schemas.first().map(|(c, _)| c))
                    .expect("a worker is started for an app naming Python code");
                self.add(&first.place, &first.field, message);
                return None;
            }
        };
        let before = self.problems.0.len();
        let mut declared_keys = HashMap::new();
        for (
            entry,
            CodeRef {
                reference,
                place,
                field,
            },
        ) in &code.tools
        {
            let served = match worker.tools.get(&entry.key) {
                Some(Ok(served)) => served,
                Some(Err(why)) => {
                    self.add(
                        place,
                        field,
                        format!("the Python tool {reference:?} does not import: {why}"),
                    );
                    continue;
                }
                None => continue,
            };
            let declared = format!("{app}:{}", entry.key);
            if declared_keys.insert(entry.key.clone(), declared.clone()).is_some() {
                continue;
            }
            // The agents file's problems with these tools are named at the YAML's entry.
            let at = format!("{place}, field {field:?}");
            for tool in served {
                self.origins
                    .places
                    .insert(format!("tool {declared:?}, tool {:?}", tool.name), at.clone());
            }
            self.origins.places.insert(format!("tool {declared:?}"), at);
            let http_tools = served
                .iter()
                .map(|tool| {
                    let config = HttpToolConfig {
                        description: tool.description.clone(),
                        parameters: tool.parameters.clone(),
                        url: Some(worker.url(ServedAs::Tool {
                            entry: &entry.key,
                            name: &tool.name,
                        })),
                        timeout_secs: None,
                        safe_to_repeat: None,
                        headers_from_env: BTreeMap::new(),
                        // ADK's ToolContext reads the whole state, and the session's
                        // artifacts and the user's memories while the call runs.
                        context: Some(ToolContextConfig {
                            state: vec!["*".into()],
                            session_reads: true,
                        }),
                        large_reply: Default::default(),
                        long_running: tool.long_running,
                    };
                    (tool.name.clone(), config)
                })
                .collect();
            self.tools.insert(declared, ToolConfig::Python(http_tools));
        }
        for (
            CodeRef {
                reference,
                place,
                field,
            },
            point,
            hook,
        ) in &code.callbacks
        {
            if let Some(Err(why)) = worker.callbacks.get(reference) {
                self.add(
                    place,
                    field,
                    format!("the Python callback {reference:?} does not import: {why}"),
                );
                continue;
            }
            self.hooks.insert(
                hook.clone(),
                HookConfig {
                    url: worker.url(ServedAs::Callback(reference)),
                    points: vec![*point],
                    timeout_secs: None,
                    // A callback that raises fails ADK's run too.
                    on_failure: FailurePolicy::FailClosed,
                    headers_from_env: BTreeMap::new(),
                    context: Some(ToolContextConfig {
                        state: vec!["*".into()],
                        session_reads: true,
                    }),
                },
            );
        }
        let validates = self.schema_classes(&worker, &code.schemas, &mut config.root_agent);
        // A worker that only resolved classes ADK does not validate serves nothing: it is
        // not kept running.
        if self.problems.0.len() > before || (code.tools.is_empty() && code.callbacks.is_empty() && !validates) {
            worker.stop();
        }
        if self.problems.0.len() > before {
            return None;
        }
        name_tools(&mut config.root_agent, &declared_keys);
        Some((app, config))
    }

    /// Each `output_schema` and `input_schema` class as the worker resolved it, on its
    /// agent in `root`'s tree: an input schema is the class's JSON Schema, which ADK
    /// declares as the agent's parameters when it is called as a tool. Whether an
    /// `output_schema` is validated by the worker (which must then keep running).
    fn schema_classes(
        &mut self,
        worker: &python::Worker,
        schemas: &[(CodeRef, String)],
        root: &mut AgentConfig,
    ) -> bool {
        let mut validates = false;
        for (
            CodeRef {
                reference,
                place,
                field,
            },
            agent,
        ) in schemas
        {
            match worker.schemas.get(reference) {
                Some(Ok(schema)) if field == "input_schema" && !schema.pydantic_class => self.add(
                    place,
                    field,
                    format!(
                        "the Python object {reference:?} cannot be the input_schema: ADK's input_schema is a \
                         pydantic model class (a subclass of pydantic's BaseModel)"
                    ),
                ),
                Some(Ok(schema)) => {
                    if let Some(agent) = find_agent(root, agent) {
                        let mut class = adk_grpc_agents::SchemaClass::from(schema.clone());
                        if field == "input_schema" {
                            agent.input_schema = Some(class.json_schema);
                            agent.input_schema_is_class = true;
                            continue;
                        }
                        // ADK's finish_task validates a task's output of any type.
                        let is_task = agent.mode == Some(Mode::Task);
                        if class.validated || (schema.type_adapter && is_task) {
                            // pydantic's own validation, so the class's validators and types count.
                            let url = worker.url(ServedAs::Validation(reference));
                            match adk_grpc_agents::HttpClassValidator::new(reference, &url) {
                                Ok(validator) => {
                                    class.validator = Some(adk_grpc_agents::ClassValidator(Arc::new(validator)));
                                    validates = true;
                                }
                                Err(e) => self.add(place, field, e.to_string()),
                            }
                        }
                        agent.output_schema = Some(class.json_schema.clone());
                        agent.output_schema_class = Some(class);
                    }
                }
                Some(Err(why)) => self.add(
                    place,
                    field,
                    format!("the Python object {reference:?} cannot be the {field}: {why}"),
                ),
                None => {}
            }
        }
        validates
    }

    /// `generate_content_config` as the agents file's `generation` (None when it sets
    /// nothing); every other key refused.
    fn generation(&mut self, place: &str, config: &Map<String, Value>) -> Option<GenerationConfig> {
        let mut written = Map::new();
        let mut thinking = None;
        for (key, value) in config.iter().filter(|(_, value)| !value.is_null()) {
            if key == "thinking_config" || key == "thinkingConfig" {
                thinking = self.thinking(place, key, value);
                continue;
            }
            if key == "labels" {
                // Google Cloud's billing labels: ADK drops them for the Gemini API (its
                // Gemini model sets them to None there) and its LiteLlm sends none.
                if !value
                    .as_object()
                    .is_some_and(|labels| labels.values().all(Value::is_string))
                {
                    self.add(
                        place,
                        "generate_content_config.labels",
                        "must be a mapping of names to texts",
                    );
                }
                continue;
            }
            if key == "image_config" || key == "imageConfig" {
                let vertex_only: Vec<&str> = IMAGE_CONFIG_VERTEX_ONLY
                    .iter()
                    .filter(|(snake, camel)| {
                        value
                            .get(snake)
                            .or_else(|| value.get(camel))
                            .is_some_and(|v| !v.is_null())
                    })
                    .map(|(snake, _)| *snake)
                    .collect();
                for field in &vertex_only {
                    self.add(
                        place,
                        &format!("generate_content_config.{key}.{field}"),
                        "Vertex AI only (google.genai refuses it on the Gemini API)",
                    );
                }
                if !vertex_only.is_empty() {
                    continue;
                }
            }
            match GENERATION_FIELDS
                .iter()
                .find(|(snake, camel)| key == snake || key == camel)
            {
                // ADK's snake_case names are the agents file's; each value is read on its
                // own, so a problem names its key.
                Some((snake, _)) => {
                    let alone = Value::Object(Map::from_iter([(snake.to_string(), value.clone())]));
                    let at = format!("generate_content_config.{key}");
                    if self.typed::<GenerationConfig>(place, &at, &alone).is_some() {
                        written.insert(snake.to_string(), value.clone());
                    }
                }
                None => {
                    let reason = match GENERATION_REFUSED
                        .iter()
                        .find(|(snake, camel, _)| key == snake || key == camel)
                    {
                        Some((_, _, why)) => format!("not offered: {why}"),
                        None => format!(
                            "not supported: the agents file takes {} and thinking_config",
                            GENERATION_FIELDS.map(|(snake, _)| snake).join(", ")
                        ),
                    };
                    self.add(place, &format!("generate_content_config.{key}"), reason);
                }
            }
        }
        if written.is_empty() && thinking.is_none() {
            return None;
        }
        let mut generation: GenerationConfig = self.typed(place, "generate_content_config", &Value::Object(written))?;
        generation.thinking = thinking;
        Some(generation)
    }

    /// `thinking_config` as `generation.thinking`; None when it is not a mapping.
    fn thinking(&mut self, place: &str, key: &str, value: &Value) -> Option<adk_grpc_core::ThinkingConfig> {
        let Value::Object(config) = value else {
            self.add(place, &format!("generate_content_config.{key}"), "must be a mapping");
            return None;
        };
        let mut thinking = adk_grpc_core::ThinkingConfig::default();
        for (field, value) in config.iter().filter(|(_, value)| !value.is_null()) {
            let at = format!("generate_content_config.{key}.{field}");
            let ours = THINKING_FIELDS
                .iter()
                .find(|(_, snake, camel)| field == snake || field == camel)
                .map(|(ours, _, _)| *ours);
            match ours {
                Some("budget_tokens") => thinking.budget_tokens = self.typed(place, &at, value),
                Some("include_thoughts") => thinking.include_thoughts = self.typed(place, &at, value),
                // ADK's ThinkingLevel is upper case (LOW); the agents file's effort lower case.
                Some(_) => {
                    thinking.effort = match value.as_str().map(str::to_ascii_lowercase).as_deref() {
                        Some("minimal") => Some(ThinkingEffort::Minimal),
                        Some("low") => Some(ThinkingEffort::Low),
                        Some("medium") => Some(ThinkingEffort::Medium),
                        Some("high") => Some(ThinkingEffort::High),
                        _ => {
                            self.add(
                                place,
                                &at,
                                format!("{value} is not supported yet: MINIMAL, LOW, MEDIUM or HIGH"),
                            );
                            None
                        }
                    }
                }
                None => self.add(
                    place,
                    &at,
                    "not supported yet: the agents file takes thinking_budget, include_thoughts and thinking_level",
                ),
            }
        }
        Some(thinking)
    }

    /// Declares the provider of the model string `model` (once); false after a problem.
    fn model(&mut self, shown: &str, model: &str) -> bool {
        if self.models.contains_key(model) {
            return true;
        }
        match provider(model) {
            Ok(provider) => {
                self.models.insert(model.to_string(), provider);
                self.origins
                    .places
                    .insert(format!("model {model:?}"), format!("{shown}, model {model:?}"));
                true
            }
            Err(message) => {
                self.problems
                    .add(&format!("{shown}, model {model:?}"), Some("model"), message);
                false
            }
        }
    }

    /// `tools` as the agents file's tool names: the suite's built-ins; every
    /// other entry refused, saying what the suite offers instead.
    /// Also returns the agents of `AgentTool` entries (`args.agent`, by `config_path`),
    /// with the field each came from, to be built as sub-agents called as tools.
    fn tools(
        &mut self,
        place: &str,
        path: &Path,
        tools: &[Value],
        has_sub_agents: bool,
    ) -> (Vec<String>, Vec<(String, Value)>, Vec<ExampleConfig>) {
        let mut names = Vec::new();
        let mut agents = Vec::new();
        let mut examples = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            let field = format!("tools[{i}]");
            // ADK takes `- name: x` (with `args`) and, since 2.x, a bare `- x`.
            let (name, args) = match tool {
                Value::String(name) => (name.as_str(), None),
                Value::Object(entry) => match entry.get("name").and_then(Value::as_str) {
                    Some(name) => {
                        if let Some(key) = entry.keys().find(|key| *key != "name" && *key != "args") {
                            self.add(place, &format!("{field}.{key}"), "a tool has only name and args");
                        }
                        (name, entry.get("args").filter(|args| !args.is_null()))
                    }
                    None => {
                        self.add(place, &field, "a tool needs a name");
                        continue;
                    }
                },
                _ => {
                    self.add(place, &field, "a tool is a name or a mapping with name and args");
                    continue;
                }
            };
            if name == "AgentTool" {
                let args = args.and_then(Value::as_object);
                for key in args.into_iter().flat_map(|a| a.keys()) {
                    match key.as_str() {
                        "agent" | "include_plugins" => {}
                        "skip_summarization" if args.and_then(|a| a.get(key)) == Some(&json!(false)) => {}
                        other => self.add(
                            place,
                            &format!("{field}.args.{other}"),
                            "not supported yet for an AgentTool (its reply always goes back to the model)",
                        ),
                    }
                }
                match args.and_then(|a| a.get("agent")) {
                    Some(agent) => agents.push((format!("{field}.args.agent"), agent.clone())),
                    None => self.add(place, &format!("{field}.args.agent"), "an AgentTool names its agent"),
                }
            } else if name == "ExampleTool" {
                examples.extend(self.examples(place, &format!("{field}.args"), args));
            } else if name == "ModelConsultTool" {
                names.extend(self.model_consult(place, &format!("{field}.args"), args));
            } else if matches!(name.rsplit('.').next(), Some("McpToolset" | "MCPToolset")) {
                names.extend(self.mcp_toolset(place, &format!("{field}.args"), args));
            } else if name.rsplit('.').next() == Some("OpenAPIToolset") {
                // ADK's own loader cannot build it either: the class has no from_config.
                self.add(
                    place,
                    &field,
                    "ADK builds an OpenAPIToolset in Python code only (its YAML loader refuses it too): \
                     declare the spec as a tool of kind: openapi in an agents file",
                );
            } else if name.contains('.') {
                // Named by the entry's key until the worker says its tools (Self::serve_code).
                names.push(self.python_tool(place, &field, path, name, args));
            } else if ADK_FUNCTION_TOOLS.contains(&name) {
                let reference = format!("google.adk.tools.{name}");
                names.push(self.python_tool(place, &field, path, &reference, args));
            } else if name == TRANSFER_TOOL_NAME {
                // The runner gives it to every agent with sub-agents: listing it is saying so.
                if !has_sub_agents {
                    self.add(
                        place,
                        &field,
                        "transfer_to_agent is given to an agent with sub_agents, and this one has none",
                    );
                }
            } else if BUILTIN_TOOLS.contains(&name) {
                if args.is_some() {
                    self.add(
                        place,
                        &format!("{field}.args"),
                        format!("the built-in {name} takes no args"),
                    );
                } else {
                    names.push(name.to_string());
                }
            } else {
                self.add(
                    place,
                    &field,
                    format!(
                        "ADK's tool {name:?} is not offered here (built in: {}, {TRANSFER_TOOL_NAME}); other \
                         tools are served over HTTP or MCP and declared in an agents file (kind: http, kind: mcp)",
                        BUILTIN_TOOLS.join(", ")
                    ),
                );
            }
        }
        (names, agents, examples)
    }

    /// A `ModelConsultTool` as a declared tool of kind `model_consult`, its advisor
    /// (`model`, ADK's default when left out) a model string like an agent's; its name.
    fn model_consult(&mut self, place: &str, field: &str, args: Option<&Value>) -> Option<String> {
        let args = match args {
            None => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => {
                self.add(place, field, "a ModelConsultTool's args are a mapping");
                return None;
            }
        };
        let before = self.problems.0.len();
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let name = text("name").unwrap_or(MODEL_CONSULT_TOOL_NAME).to_string();
        let advisor = text("model").unwrap_or(ADK_DEFAULT_ADVISOR).to_string();
        let mut tool = ModelConsultToolConfig::default();
        for (key, value) in args.iter().filter(|(_, value)| !value.is_null()) {
            let at = format!("{field}.{key}");
            match key.as_str() {
                "name" | "model" | "description" if !value.is_string() => self.add(place, &at, "must be a string"),
                "name" | "model" => {}
                "description" => tool.description = value.as_str().unwrap_or_default().to_string(),
                "max_uses" | "session_max_uses" => {
                    let max = value.as_u64().filter(|n| *n >= 1).and_then(|n| u32::try_from(n).ok());
                    if max.is_none() {
                        self.add(
                            place,
                            &at,
                            "must be a whole number, at least 1 (leave it out for no limit)",
                        );
                    }
                    match key.as_str() {
                        "max_uses" => tool.max_uses = max,
                        _ => tool.session_max_uses = max,
                    }
                }
                "timeout_seconds" => match value.as_f64() {
                    // The agents file counts whole seconds: a fraction is rounded up.
                    Some(secs) if secs > 0.0 => tool.timeout_secs = Some(secs.ceil() as u64),
                    _ => self.add(place, &at, "must be a positive number of seconds"),
                },
                "max_output_tokens" => {
                    tool.max_output_tokens = value.as_u64().filter(|n| *n >= 1).and_then(|n| i32::try_from(n).ok());
                    if tool.max_output_tokens.is_none() {
                        self.add(place, &at, "must be a whole number, at least 1");
                    }
                }
                "thinking_level" | "executor_instruction" | "advisor_instruction" if !value.is_string() => {
                    self.add(place, &at, "must be a string")
                }
                // Checked as the agents file's fields of the same names.
                "thinking_level" => tool.thinking_level = value.as_str().map(str::to_string),
                "executor_instruction" => tool.executor_instruction = value.as_str().map(str::to_string),
                "advisor_instruction" => tool.advisor_instruction = value.as_str().map(str::to_string),
                "include_agent_instruction" | "include_tool_inventory" if !value.is_boolean() => {
                    self.add(place, &at, "must be true or false")
                }
                "include_agent_instruction" => tool.include_agent_instruction = value.as_bool(),
                "include_tool_inventory" => tool.include_tool_inventory = value.as_bool(),
                "context_config" => match value {
                    Value::Object(config) => {
                        for key in config
                            .keys()
                            .filter(|key| !CONSULT_CONTEXT_FIELDS.contains(&key.as_str()))
                        {
                            self.add(
                                place,
                                &format!("{at}.{key}"),
                                format!(
                                    "not a field of ModelConsultContextConfig ({})",
                                    CONSULT_CONTEXT_FIELDS.join(", ")
                                ),
                            );
                        }
                        tool.context_config = self.typed::<ConsultContextConfig>(place, &at, value);
                    }
                    _ => self.add(place, &at, "must be a mapping"),
                },
                "generate_content_config" => match value {
                    Value::Object(config) => {
                        // An agent's generate_content_config rules, named at this tool's args.
                        let first = self.problems.0.len();
                        tool.generate_content_config =
                            Some(Box::new(self.generation(place, config).unwrap_or_default()));
                        for problem in &mut self.problems.0[first..] {
                            if let Some(at) = problem.field.as_mut() {
                                *at = format!("{field}.{at}");
                            }
                        }
                    }
                    _ => self.add(place, &at, "must be a mapping"),
                },
                _ => self.add(
                    place,
                    &at,
                    "not an argument of ADK's ModelConsultTool (model, max_uses, session_max_uses, thinking_level, \
                     max_output_tokens, name, description, executor_instruction, advisor_instruction, \
                     include_agent_instruction, include_tool_inventory, context_config, generate_content_config, \
                     timeout_seconds)",
                ),
            }
        }
        // ADK's default level when none is given (its `None` turns the override off).
        tool.thinking_level = match args.get("thinking_level") {
            None => Some("high".to_string()),
            Some(Value::Null) => Some("off".to_string()),
            Some(_) => tool.thinking_level,
        };
        if !self.model(place, &advisor) || self.problems.0.len() > before {
            return None;
        }
        tool.advisor = Some(advisor);
        match self.tools.get(&name) {
            Some(ToolConfig::ModelConsult(declared)) if *declared != tool => {
                self.add(
                    place,
                    field,
                    format!("another ModelConsultTool named {name:?} has other args: give this one another name"),
                );
                None
            }
            _ => {
                self.tools.insert(name.clone(), ToolConfig::ModelConsult(tool));
                Some(name)
            }
        }
    }

    /// An `McpToolset` (ADK's `McpToolsetConfig`) as a declared tool of kind `mcp`; its name.
    fn mcp_toolset(&mut self, place: &str, field: &str, args: Option<&Value>) -> Option<String> {
        let Some(Value::Object(args)) = args else {
            self.add(
                place,
                field,
                "an McpToolset's args are a mapping (ADK's McpToolsetConfig)",
            );
            return None;
        };
        let before = self.problems.0.len();
        let mut toolset = McpToolConfig {
            adk_forms: true,
            ..McpToolConfig::default()
        };
        let mut connections = Vec::new();
        for (key, value) in args.iter().filter(|(_, value)| !value.is_null()) {
            let at = format!("{field}.{key}");
            match key.as_str() {
                "stdio_server_params" => {
                    connections.push(key.as_str());
                    self.mcp_stdio(place, &at, value, &mut toolset);
                }
                "stdio_connection_params" => {
                    connections.push(key.as_str());
                    for (key, value) in value.as_object().into_iter().flatten() {
                        match key.as_str() {
                            "server_params" => self.mcp_stdio(place, &format!("{at}.{key}"), value, &mut toolset),
                            "timeout" => {
                                toolset.connect_timeout_secs = self.seconds(place, &format!("{at}.{key}"), value)
                            }
                            _ => self.add(place, &format!("{at}.{key}"), "not a field of StdioConnectionParams"),
                        }
                    }
                }
                "streamable_http_connection_params" => {
                    connections.push(key.as_str());
                    toolset.transport = Some(McpTransportKind::Http);
                    for (key, value) in value.as_object().into_iter().flatten() {
                        let at = format!("{at}.{key}");
                        match key.as_str() {
                            "url" => toolset.url = self.typed(place, &at, value),
                            "timeout" => toolset.connect_timeout_secs = self.seconds(place, &at, value),
                            "sse_read_timeout" => toolset.timeout_secs = self.seconds(place, &at, value),
                            "terminate_on_close" => {}
                            "headers" => self.add(
                                place,
                                &at,
                                "not supported yet: headers written in the YAML (an agents file's mcp tool takes \
                                 them from the environment: headers_from_env, bearer_token_env)",
                            ),
                            _ => self.add(place, &at, "not supported yet for an McpToolset's connection"),
                        }
                    }
                }
                "sse_connection_params" => {
                    connections.push(key.as_str());
                    self.add(
                        place,
                        &at,
                        "MCP's SSE transport (which MCP deprecated) is not offered: the runner speaks stdio and \
                         streamable HTTP (streamable_http_connection_params)",
                    );
                }
                "tool_filter" => toolset.tool_filter = self.typed(place, &at, value),
                "tool_name_prefix" => toolset.tool_prefix = self.typed(place, &at, value),
                "use_mcp_resources" => toolset.use_mcp_resources = self.typed(place, &at, value),
                _ => self.add(place, &at, "not supported yet for an McpToolset"),
            }
        }
        if connections.len() != 1 {
            self.add(
                place,
                field,
                "exactly one of stdio_server_params, stdio_connection_params, sse_connection_params, \
                 streamable_http_connection_params must be set (as ADK requires)",
            );
        }
        if self.problems.0.len() > before {
            return None;
        }
        let name = format!("mcp_toolset_{}", self.tools.len() + 1);
        // The agents file's problems with it are named at the YAML's entry.
        self.origins
            .places
            .insert(format!("tool {name:?}"), format!("{place}, field {field:?}"));
        self.tools.insert(name.clone(), ToolConfig::Mcp(toolset));
        Some(name)
    }

    /// ADK's (MCP's) `StdioServerParameters`: a stdio toolset's command.
    fn mcp_stdio(&mut self, place: &str, field: &str, params: &Value, toolset: &mut McpToolConfig) {
        toolset.transport = Some(McpTransportKind::Stdio);
        let Value::Object(params) = params else {
            self.add(place, field, "must be a mapping (command, args, env, cwd)");
            return;
        };
        for (key, value) in params.iter().filter(|(_, value)| !value.is_null()) {
            let at = format!("{field}.{key}");
            match key.as_str() {
                "command" => toolset.command = self.typed(place, &at, value),
                "args" => toolset.args = self.typed(place, &at, value).unwrap_or_default(),
                "env" => toolset.env = self.typed(place, &at, value).unwrap_or_default(),
                "cwd" => toolset.working_dir = self.typed(place, &at, value),
                _ => self.add(
                    place,
                    &at,
                    "not supported yet: an MCP server is given command, args, env and cwd",
                ),
            }
        }
    }

    /// A timeout in seconds (a fraction rounded up: the agents file counts whole seconds).
    fn seconds(&mut self, place: &str, field: &str, value: &Value) -> Option<u64> {
        match value.as_f64() {
            Some(secs) if secs > 0.0 => Some(secs.ceil() as u64),
            _ => {
                self.add(place, field, "must be a positive number of seconds");
                None
            }
        }
    }

    /// An `ExampleTool`'s examples as the agents file's `examples` (text only: an
    /// input content and output contents of the model, their text parts joined).
    fn examples(&mut self, place: &str, field: &str, args: Option<&Value>) -> Vec<ExampleConfig> {
        let mut found = Vec::new();
        let Some(Value::Array(examples)) = args.and_then(|args| args.get("examples")) else {
            let message = match args.and_then(|args| args.get("examples")) {
                Some(Value::String(_)) => {
                    "a BaseExampleProvider (a code reference), which the suite does not run (it runs Python tool and callback functions only): list the examples \
                     ({input, output} contents)"
                }
                _ => "an ExampleTool lists its examples: [{input: <content>, output: [<content>, …]}]",
            };
            self.add(place, &format!("{field}.examples"), message);
            return found;
        };
        for (i, example) in examples.iter().enumerate() {
            let at = format!("{field}.examples[{i}]");
            let input = self.example_text(place, &format!("{at}.input"), example.get("input"), "user");
            let outputs = match example.get("output") {
                Some(Value::Array(outputs)) => outputs.iter().collect(),
                Some(output) => vec![output],
                None => Vec::new(),
            };
            let mut output = Vec::new();
            for (j, content) in outputs.iter().enumerate() {
                output.extend(self.example_text(place, &format!("{at}.output[{j}]"), Some(content), "model"));
            }
            if outputs.is_empty() {
                self.add(place, &format!("{at}.output"), "an example needs the model's reply");
            }
            if let (Some(input), false) = (input, output.is_empty()) {
                found.push(ExampleConfig {
                    input,
                    output: output.join("\n"),
                });
            }
        }
        found
    }

    /// The text of one example content of `role`; None after a problem.
    fn example_text(&mut self, place: &str, field: &str, content: Option<&Value>, role: &str) -> Option<String> {
        let parts = content.and_then(|c| c.get("parts")).and_then(Value::as_array);
        let written_role = content.and_then(|c| c.get("role")).and_then(Value::as_str);
        // Only text parts: a part with anything besides its text is not an example here.
        fn text_of(part: &Value) -> Option<&str> {
            part.get("text")
                .and_then(Value::as_str)
                .filter(|_| part.as_object().is_some_and(|p| p.len() == 1))
        }
        let texts: Option<Vec<&str>> = parts.and_then(|parts| parts.iter().map(text_of).collect());
        match texts {
            Some(texts) if !texts.is_empty() && written_role.is_none_or(|r| r == role) => Some(texts.join("\n")),
            _ => {
                self.add(
                    place,
                    field,
                    format!(
                        "not supported yet: an example here is text, a content of role {role} with text parts \
                         ({{role: {role}, parts: [{{text: …}}]}}); function calls and other parts are not"
                    ),
                );
                None
            }
        }
    }

    /// The file a `sub_agents` entry names: `config_path` (or, since ADK 2, the
    /// path alone), relative to `referrer`'s directory and inside it, as ADK has it.
    fn sub_agent_path(&mut self, place: &str, field: &str, referrer: &Path, entry: &Value) -> Option<PathBuf> {
        let config_path = match entry {
            Value::String(path) => path.as_str(),
            Value::Object(entry) => {
                if let Some(code) = entry.get("code").and_then(Value::as_str) {
                    self.add(
                        place,
                        &format!("{field}.code"),
                        format!(
                            "{code:?} is an agent defined in Python (a code reference), which the suite does not run \
                             (it runs Python tool and callback functions only): write it as a YAML agent config and name it by config_path"
                        ),
                    );
                    return None;
                }
                if let Some(key) = entry.keys().find(|key| *key != "config_path") {
                    self.add(
                        place,
                        &format!("{field}.{key}"),
                        "a sub-agent is named by config_path (or code)",
                    );
                    return None;
                }
                match entry.get("config_path").and_then(Value::as_str) {
                    Some(path) => path,
                    None => {
                        self.add(place, &format!("{field}.config_path"), "must be a path");
                        return None;
                    }
                }
            }
            _ => {
                self.add(place, field, "a sub-agent is named by config_path (or code)");
                return None;
            }
        };
        let relative = Path::new(config_path);
        let escapes = relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
        if escapes {
            self.add(
                place,
                &format!("{field}.config_path"),
                format!("{config_path:?} must be a relative path inside this file's directory, as ADK requires"),
            );
            return None;
        }
        Some(referrer.parent().unwrap_or(Path::new(".")).join(relative))
    }
}

/// The hook point of an ADK callback field (`before_model_callback`, or `…_callbacks`).
fn callback_point(field: &str) -> Option<HookPoint> {
    let point = field
        .strip_suffix("_callbacks")
        .or_else(|| field.strip_suffix("_callback"))?;
    HookPoint::ALL.into_iter().find(|p| p.as_str() == point)
}

/// The agent called `name` in `agent`'s tree.
fn find_agent<'a>(agent: &'a mut AgentConfig, name: &str) -> Option<&'a mut AgentConfig> {
    if agent.name == name {
        return Some(agent);
    }
    agent.sub_agents.iter_mut().find_map(|sub| find_agent(sub, name))
}

/// Renames the Python tool entries in `agent`'s tree from their keys to their declared keys.
fn name_tools(agent: &mut AgentConfig, names: &HashMap<String, String>) {
    for tool in &mut agent.tools {
        if let Some(name) = names.get(tool) {
            *tool = name.clone();
        }
    }
    for sub in &mut agent.sub_agents {
        name_tools(sub, names);
    }
}

/// The provider of an ADK model string (see the module's documentation).
fn provider(model: &str) -> Result<Value, String> {
    let set = |var: &str| std::env::var(var).ok().filter(|value| !value.trim().is_empty());
    let (provider, name) = if let Some(name) = model.strip_prefix("openai/") {
        ("openai", name)
    } else if let Some(name) = model.strip_prefix("gemini/") {
        ("gemini", name)
    } else if model.starts_with("gemini-") {
        ("gemini", model)
    } else {
        return Err(format!(
            "the model string {model:?} names no provider the suite maps: gemini-… or gemini/<model> (Gemini \
             API, GOOGLE_API_KEY), openai/<model> (an OpenAI-compatible server, OPENAI_API_KEY, \
             OPENAI_BASE_URL); for others, declare the provider in an agents file (models:)"
        ));
    };
    if name.trim().is_empty() {
        return Err(format!("the model string {model:?} names no model after the provider"));
    }
    let (key_var, base_url) = match provider {
        "openai" => ("OPENAI_API_KEY", set("OPENAI_BASE_URL")),
        // google-genai's order: GOOGLE_API_KEY first, then GEMINI_API_KEY.
        _ if set("GOOGLE_API_KEY").is_none() && set("GEMINI_API_KEY").is_some() => {
            ("GEMINI_API_KEY", set("GOOGLE_GEMINI_BASE_URL"))
        }
        _ => ("GOOGLE_API_KEY", set("GOOGLE_GEMINI_BASE_URL")),
    };
    let mut config = json!({ "provider": provider, "model": name, "api_key_env": key_var });
    if let Some(base_url) = base_url {
        config["base_url"] = json!(base_url);
    }
    Ok(config)
}
