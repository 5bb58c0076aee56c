//! The agents file as written: what serde reads, with `deny_unknown_fields`
//! everywhere (a misspelt key is an error, not a silent default).

use adk_grpc_agents::{AddToMemory, LlmAgentBuilder, RetryConfig, StaticInstruction, StaticPart};
use adk_grpc_core::{AdkError, GenerateContentConfig};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

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
    /// Named hooks (ADK's callbacks and plugins, served over HTTP) apps and agents list.
    #[serde(default)]
    pub(super) hooks: BTreeMap<String, HookConfig>,
    #[serde(default)]
    pub(super) apps: BTreeMap<String, AppConfig>,
}

/// A hook: an HTTP endpoint POSTed JSON at each of its points (adk_grpc_agents::hooks).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HookConfig {
    pub(super) url: String,
    /// `before_agent`, `after_agent`, `before_model`, `after_model`, `before_tool`, `after_tool`,
    /// `on_model_error`, `on_tool_error`.
    #[serde(default)]
    pub(super) points: Vec<adk_grpc_agents::HookPoint>,
    /// How long one call may take [default: 10].
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// `fail_open` [default] or `fail_closed`.
    #[serde(default)]
    pub(super) on_failure: adk_grpc_agents::FailurePolicy,
    /// Header name -> the NAME of the environment variable holding its value.
    #[serde(default)]
    pub(super) headers_from_env: BTreeMap<String, String>,
    /// The state the hook is sent in its `context`, as a tool's.
    #[serde(default)]
    pub(super) context: Option<ToolContextConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ToolKind {
    Http,
    Client,
    Mcp,
    Openapi,
    /// ADK's ModelConsultTool: another declared model advises the agent's.
    ModelConsult,
}

impl ToolKind {
    /// A tool of the kind, as errors name it.
    fn described(self) -> &'static str {
        match self {
            ToolKind::Http => "an http tool",
            ToolKind::Client => "a client tool",
            ToolKind::Mcp => "an mcp tool",
            ToolKind::Openapi => "an openapi tool",
            ToolKind::ModelConsult => "a model_consult tool",
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

/// A declared tool: one struct per kind, each with exactly that kind's fields, so a
/// field another kind has is refused by serde, naming it, the tool, the kind and the line.
#[derive(Debug)]
pub(super) enum ToolConfig {
    Http(HttpToolConfig),
    Client(ClientToolConfig),
    Mcp(McpToolConfig),
    Openapi(OpenApiToolConfig),
    ModelConsult(ModelConsultToolConfig),
    /// The tools of one `tools:` entry of an ADK agent-config directory naming Python
    /// code (a function, a tool, a toolset's tools), served by its app's Python worker:
    /// made by that translation only (adk_config.rs), never written in an agents file.
    /// Declared under a key of its app, so two apps' tools may share a name.
    Python(Vec<(String, HttpToolConfig)>),
}

/// `kind: http`: the call's arguments are POSTed as JSON, the JSON reply is the result.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpToolConfig {
    #[serde(default)]
    pub(super) description: String,
    /// JSON Schema (an object schema) of the arguments.
    #[serde(default)]
    pub(super) parameters: Option<Value>,
    /// Where the call's arguments are POSTed.
    #[serde(default)]
    pub(super) url: Option<String>,
    /// How long one call may take [default: 30].
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// The endpoint may be called again with the same arguments (a read, or a write keyed
    /// by the call id): a resumed invocation re-runs a call its dead runner left unanswered
    /// instead of telling the model it was interrupted [default: false].
    #[serde(default)]
    pub(super) safe_to_repeat: Option<bool>,
    /// Header name -> the NAME of the environment variable holding its value, so the
    /// file holds no secret.
    #[serde(default)]
    pub(super) headers_from_env: BTreeMap<String, String>,
    /// The tool context is exchanged with the tool: the body and the reply become the envelope.
    #[serde(default)]
    pub(super) context: Option<ToolContextConfig>,
    /// A reply longer than `--max-tool-reply-bytes`: `error` [default], an error the model
    /// reads; or `artifact`, read up to `--max-artifact-bytes`, saved as a session artifact,
    /// and the model reads a reference to it.
    #[serde(default)]
    pub(super) large_reply: adk_grpc_agents::LargeReply,
    /// ADK's `LongRunningFunctionTool` served by an agent-config directory's Python
    /// worker: set by that translation only, not a field of the agents file.
    #[serde(skip)]
    pub(super) long_running: bool,
}

/// `kind: client`: long-running; the gRPC client runs it and answers with a
/// function_response (it gets the call and the session from the run it resumes).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientToolConfig {
    #[serde(default)]
    pub(super) description: String,
    /// JSON Schema (an object schema) of the arguments.
    #[serde(default)]
    pub(super) parameters: Option<Value>,
}

/// `kind: mcp`: every tool of an MCP server (a toolset). Its transport's fields are
/// checked against `transport` when it is built (tools.rs), so a missing transport is
/// reported as such rather than as a misfit field.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct McpToolConfig {
    /// Taken as every tool's, and unused: the server describes its tools.
    #[serde(default)]
    #[allow(dead_code)]
    pub(super) description: String,
    /// `stdio` (a child process) or `http` (streamable HTTP at `url`).
    #[serde(default)]
    pub(super) transport: Option<McpTransportKind>,
    /// Over stdio: the program to start, its arguments, its working directory.
    #[serde(default)]
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) working_dir: Option<String>,
    /// Over stdio: environment variables of the child, as values...
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// ...or as the NAME of the runner's variable holding the value (secrets).
    #[serde(default)]
    pub(super) env_from_env: BTreeMap<String, String>,
    /// Over http: the server's URL.
    #[serde(default)]
    pub(super) url: Option<String>,
    /// Over http: header name -> the NAME of the environment variable holding its value.
    #[serde(default)]
    pub(super) headers_from_env: BTreeMap<String, String>,
    /// Over http: the NAME of the variable holding a bearer token.
    #[serde(default)]
    pub(super) bearer_token_env: Option<String>,
    /// Only these of the server's tools are offered.
    #[serde(default)]
    pub(super) tool_filter: Option<Vec<String>>,
    /// The model sees the server's `echo` as `<tool_prefix>_echo`.
    #[serde(default)]
    pub(super) tool_prefix: Option<String>,
    /// How long one call may take [default: 60].
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// How long starting the server and the handshake may take [default: 30].
    #[serde(default)]
    pub(super) connect_timeout_secs: Option<u64>,
    /// ADK's `use_mcp_resources`: also offer `load_mcp_resource`, which shows the model
    /// the server's resources for one request [default: false].
    #[serde(default)]
    pub(super) use_mcp_resources: Option<bool>,
    /// As an http tool's: a resumed invocation re-runs an unanswered call [default: false].
    #[serde(default)]
    pub(super) safe_to_repeat: Option<bool>,
    /// The tool context is exchanged with the server, in a call's `_meta`.
    #[serde(default)]
    pub(super) context: Option<ToolContextConfig>,
    /// As an http tool's, for a tool result (the server's messages are then read up to
    /// `--max-artifact-bytes`).
    #[serde(default)]
    pub(super) large_reply: adk_grpc_agents::LargeReply,
    /// Set for an ADK agent-config directory's `McpToolset` (not an agents file's key):
    /// its tools are declared and answered as ADK's `McpTool` (`McpToolset::with_adk_forms`).
    #[serde(skip)]
    pub(super) adk_forms: bool,
}

/// `kind: openapi`: one tool per operation of an OpenAPI 3.x spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OpenApiToolConfig {
    /// Taken as every tool's, and unused: the spec describes its operations.
    #[serde(default)]
    #[allow(dead_code)]
    pub(super) description: String,
    /// The spec (OpenAPI 3.x, JSON or YAML): a file path (relative to the working
    /// directory) or an http(s) URL, read when the file is loaded.
    #[serde(default)]
    pub(super) spec: Option<String>,
    /// Where calls go instead of the spec's first `servers` URL.
    #[serde(default)]
    pub(super) base_url: Option<String>,
    /// Header name -> the NAME of the environment variable holding its value.
    #[serde(default)]
    pub(super) headers_from_env: BTreeMap<String, String>,
    /// Only these operations are offered, by tool name or operationId.
    #[serde(default)]
    pub(super) tool_filter: Option<Vec<String>>,
    /// The model sees the operation `list` as `<tool_prefix>_list`.
    #[serde(default)]
    pub(super) tool_prefix: Option<String>,
    /// How long one call may take.
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// Whether a resumed invocation re-runs an unanswered call: true every operation,
    /// false none [default: those whose method HTTP defines as idempotent].
    #[serde(default)]
    pub(super) safe_to_repeat: Option<bool>,
    /// As an http tool's; a reply that is not JSON is saved as text.
    #[serde(default)]
    pub(super) large_reply: adk_grpc_agents::LargeReply,
}

/// `kind: model_consult`: ADK's ModelConsultTool, another declared model advises the agent's.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelConsultToolConfig {
    /// Left out: ADK's.
    #[serde(default)]
    pub(super) description: String,
    /// The declared model (of `models`) that advises.
    #[serde(default)]
    pub(super) advisor: Option<String>,
    /// The most consults per turn (invocation) [default: no limit].
    #[serde(default)]
    pub(super) max_uses: Option<u32>,
    /// The most consults per session [default: no limit].
    #[serde(default)]
    pub(super) session_max_uses: Option<u32>,
    /// The advisor's thinking level, `minimal`, `low`, `medium`, `high` or `off` (ADK's
    /// `thinking_level`) [default: off, the model's own].
    #[serde(default)]
    pub(super) thinking_level: Option<String>,
    /// The most tokens of the advisor's answer.
    #[serde(default)]
    pub(super) max_output_tokens: Option<i32>,
    /// What the executor's system instruction gets instead of ADK's text ("" for nothing).
    #[serde(default)]
    pub(super) executor_instruction: Option<String>,
    /// The advisor's system instruction instead of ADK's.
    #[serde(default)]
    pub(super) advisor_instruction: Option<String>,
    /// Send the advisor the executor's instruction [default: true].
    #[serde(default)]
    pub(super) include_agent_instruction: Option<bool>,
    /// Send the advisor the executor's tools [default: true].
    #[serde(default)]
    pub(super) include_tool_inventory: Option<bool>,
    /// How much of the session the advisor reads.
    #[serde(default)]
    pub(super) context_config: Option<ConsultContextConfig>,
    /// The advisor request's generation settings, as an agent's `generation` (boxed: the
    /// settings are many, and a tool entry is most often of another kind).
    #[serde(default)]
    pub(super) generate_content_config: Option<Box<GenerationConfig>>,
    /// How long one consult may take.
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
}

// Not serde's `#[serde(tag = "kind")]`: that reads the whole mapping first, and its
// errors then name neither the tool nor the field's line (only `tools`). This reads
// the fields into the kind's struct as they come, so serde's errors keep both.
impl<'de> Deserialize<'de> for ToolConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ToolVisitor)
    }
}

struct ToolVisitor;

impl<'de> Visitor<'de> for ToolVisitor {
    type Value = ToolConfig;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tool: a mapping of its kind and that kind's fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolConfig, A::Error> {
        // The fields written before `kind` are held until it says whose they are.
        let mut before = Vec::new();
        let kind = loop {
            match map.next_key::<String>()? {
                Some(key) if key == "kind" => break map.next_value::<ToolKind>()?,
                Some(key) => before.push((key, map.next_value::<Value>()?)),
                None => return Err(de::Error::missing_field("kind")),
            }
        };
        let fields = de::value::MapAccessDeserializer::new(KindFields {
            before: before.into_iter(),
            held: None,
            rest: map,
            kind,
        });
        match kind {
            ToolKind::Http => HttpToolConfig::deserialize(fields).map(ToolConfig::Http),
            ToolKind::Client => ClientToolConfig::deserialize(fields).map(ToolConfig::Client),
            ToolKind::Mcp => McpToolConfig::deserialize(fields).map(ToolConfig::Mcp),
            ToolKind::Openapi => OpenApiToolConfig::deserialize(fields).map(ToolConfig::Openapi),
            ToolKind::ModelConsult => ModelConsultToolConfig::deserialize(fields).map(ToolConfig::ModelConsult),
        }
    }
}

/// A tool's fields but `kind`: those held, then the rest of the mapping.
struct KindFields<A> {
    before: std::vec::IntoIter<(String, Value)>,
    /// The value of the held field whose key was just given.
    held: Option<Value>,
    rest: A,
    kind: ToolKind,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for KindFields<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.before.next() {
            Some((key, value)) => {
                self.held = Some(value);
                FieldOfKind { seed, kind: self.kind }.visit_string(key).map(Some)
            }
            None => self.rest.next_key_seed(FieldOfKind { seed, kind: self.kind }),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.held.take() {
            Some(value) => seed.deserialize(value).map_err(de::Error::custom),
            None => self.rest.next_value_seed(seed),
        }
    }
}

/// A field name read for the kind's struct: one it lacks is refused saying the kind,
/// at the name's line (the check runs while the YAML reader is at it).
struct FieldOfKind<S> {
    seed: S,
    kind: ToolKind,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for FieldOfKind<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for FieldOfKind<S> {
    type Value = S::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<S::Value, E> {
        let kind = self.kind.described();
        self.seed
            .deserialize(name.into_deserializer())
            .map_err(|e: E| E::custom(format!("{e} (this is {kind})")))
    }
}

/// `context:` of a tool: what of the tool context it is sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolContextConfig {
    /// The state keys the tool reads: keys, prefixes ending in `*`, or `*`.
    #[serde(default)]
    pub(super) state: Vec<String>,
    /// Reads of the call's session while it runs (artifacts, memories): set only for
    /// the Python worker's tools and callbacks, never by a file.
    #[serde(skip)]
    pub(super) session_reads: bool,
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
    /// Hooks of every agent of the app (ADK's plugins), called before the agents' own.
    #[serde(default)]
    pub(super) hooks: Vec<String>,
    /// ADK's `App.resumability_config`: `{is_resumable: true}` stores the workflow agents'
    /// positions in the log [default: not resumable, ADK's log without them].
    #[serde(default)]
    pub(super) resumability_config: ResumabilityFileConfig,
}

/// `resumability_config:` of an app, as ADK's `ResumabilityConfig`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResumabilityFileConfig {
    #[serde(default)]
    pub(super) is_resumable: bool,
}

impl From<ResumabilityFileConfig> for adk_grpc_agents::ResumabilityConfig {
    fn from(config: ResumabilityFileConfig) -> Self {
        adk_grpc_agents::ResumabilityConfig {
            is_resumable: config.is_resumable,
        }
    }
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
    /// `invocation` (its events) or `session` (the whole session) after each invocation;
    /// `ingest`: the session's new events to the ingest buffer, generated into facts.
    pub(super) add: AddToMemoryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AddToMemoryKind {
    Invocation,
    Session,
    Ingest,
}

impl From<AddToMemoryKind> for AddToMemory {
    fn from(kind: AddToMemoryKind) -> Self {
        match kind {
            AddToMemoryKind::Invocation => AddToMemory::Invocation,
            AddToMemoryKind::Session => AddToMemory::Session,
            AddToMemoryKind::Ingest => AddToMemory::Ingest,
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

/// ADK 2's `mode` of an llm sub-agent, by its values' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Mode {
    Chat,
    Task,
    SingleTurn,
}

impl From<Mode> for adk_grpc_core::AgentMode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Chat => adk_grpc_core::AgentMode::Chat,
            Mode::Task => adk_grpc_core::AgentMode::Task,
            Mode::SingleTurn => adk_grpc_core::AgentMode::SingleTurn,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
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
    /// llm: the JSON Schema of the reply (ADK's `output_schema`): structured output, the
    /// JSON value stored under `output_key`.
    #[serde(default)]
    pub(super) output_schema: Option<Value>,
    /// llm, from an ADK agent-config directory only: the `output_schema` is this Python
    /// class (resolved by the directory's Python worker), `output_schema` its JSON Schema.
    #[serde(skip)]
    pub(super) output_schema_class: Option<adk_grpc_agents::SchemaClass>,
    /// Not a2a: the JSON Schema (an object schema) of the state keys its events may
    /// write (ADK's `state_schema`), inline or the path of a JSON or YAML file; the
    /// agents under it without one of their own are held to it too.
    #[serde(default)]
    pub(super) state_schema: Option<Value>,
    /// llm: the JSON Schema (an object schema) of the arguments when the agent is
    /// called as a tool (ADK's `input_schema`).
    #[serde(default)]
    pub(super) input_schema: Option<Value>,
    /// llm, from an ADK agent-config directory only: `input_schema` is a Python class's.
    #[serde(skip)]
    pub(super) input_schema_is_class: bool,
    /// llm sub-agent: how its parent reaches it (ADK 2's `mode`): `chat` (default) a
    /// transfer target; `single_turn` a tool run to its reply without the user; `task` a
    /// tool that talks with the user across turns until it calls `finish_task`.
    #[serde(default)]
    pub(super) mode: Option<Mode>,
    /// llm: `none` sends the model only the current turn (ADK's `include_contents`).
    #[serde(default)]
    pub(super) include_contents: Option<IncludeContents>,
    /// llm, the root agent: put before every llm agent's instruction (ADK's `global_instruction`).
    #[serde(default)]
    pub(super) global_instruction: Option<String>,
    /// llm: system text sent first and literally, for providers' prompt caching; the
    /// `instruction` then follows the contents (ADK's `static_instruction`). A text, or
    /// as ADK's content: a part, a list of parts, or `{parts: […]}`, each part a text
    /// or a file (`inline_data`, `file_data`).
    #[serde(default)]
    pub(super) static_instruction: Option<StaticInstructionConfig>,
    /// llm: true keeps the agent from handing the turn back to its parent [default: false, as ADK].
    #[serde(default)]
    pub(super) disallow_transfer_to_parent: bool,
    /// llm: true keeps the agent from handing the turn to its parent's other sub-agents [default: false].
    #[serde(default)]
    pub(super) disallow_transfer_to_peers: bool,
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
    /// Offered to the parent (an llm agent) as a tool it calls, not a transfer target
    /// (ADK's `AgentTool`): its final reply is the call's result.
    #[serde(default)]
    pub(super) as_tool: bool,
    /// The agent's own hooks (ADK's callbacks), after the app's.
    #[serde(default)]
    pub(super) hooks: Vec<String>,
    /// llm: few-shot examples put after the instructions (ADK's `ExampleTool`).
    #[serde(default)]
    pub(super) examples: Vec<ExampleConfig>,
    /// Any kind: the most seconds one run of the agent may take (ADK's `timeout`).
    #[serde(default)]
    pub(super) timeout_secs: Option<u64>,
    /// llm: a model call that fails transiently is made again (ADK's `retry_config`).
    #[serde(default)]
    pub(super) retry_config: Option<RetryFileConfig>,
}

impl AgentConfig {
    /// The fields only llm agents have, each applied to `builder` (the agent's model,
    /// tools, sub-agents, hooks and state schema already on it) in one line of this
    /// table, so a new field is a line here; the names of those set come back too, for
    /// the other kinds, which refuse them. `model` and `tools` are resolved by the tree
    /// (apps.rs): named here only.
    pub(super) fn llm_fields(&self, builder: LlmAgentBuilder) -> LlmFields {
        LlmFields::new(builder)
            .named("model", self.model.is_some())
            .named("tools", !self.tools.is_empty())
            .set("instruction", self.instruction.as_ref(), |b, text| b.instruction(text))
            .set("output_key", self.output_key.as_ref(), |b, key| b.output_key(key))
            .set("output_schema", self.output_schema.clone(), |b, schema| {
                match self.output_schema_class.clone() {
                    Some(class) => b.output_schema_class(class),
                    None => b.output_schema(schema),
                }
            })
            .set("input_schema", self.input_schema.clone(), |b, schema| {
                if self.input_schema_is_class {
                    b.input_schema_class(schema)
                } else {
                    b.input_schema(schema)
                }
            })
            .set("include_contents", self.include_contents, |b, include| {
                b.include_contents(include.into())
            })
            .set("global_instruction", self.global_instruction.as_ref(), |b, text| {
                b.global_instruction(text)
            })
            .try_set(
                "static_instruction",
                self.static_instruction.as_ref().filter(|config| config.is_set()),
                |b, instruction| Ok(b.static_instruction(StaticInstruction::try_from(instruction)?)),
            )
            .try_set("retry_config", self.retry_config.as_ref(), |b, retry| {
                Ok(b.retry_config(retry.try_into()?))
            })
            .set(
                "disallow_transfer_to_parent",
                self.disallow_transfer_to_parent.then_some(true),
                |b, no| b.disallow_transfer_to_parent(no),
            )
            .set(
                "disallow_transfer_to_peers",
                self.disallow_transfer_to_peers.then_some(true),
                |b, no| b.disallow_transfer_to_peers(no),
            )
            .set("generation", self.generation.as_ref(), |b, generation| {
                b.generate_content_config(generation.into())
            })
            .set(
                "examples",
                Some(&self.examples).filter(|e| !e.is_empty()),
                |b, examples| b.examples(examples.iter().map(Into::into)),
            )
            .set("mode", self.mode, |b, mode| b.mode(mode.into()))
    }

    /// The llm agents' fields this agent sets, by name (from the same table).
    pub(super) fn llm_fields_set(&self) -> Vec<&'static str> {
        self.llm_fields(LlmAgentBuilder::new(&self.name)).set
    }
}

/// An llm agent's builder with its fields of the file applied, and which were set.
pub(super) struct LlmFields {
    pub(super) builder: adk_grpc_core::Result<LlmAgentBuilder>,
    pub(super) set: Vec<&'static str>,
}

impl LlmFields {
    fn new(builder: LlmAgentBuilder) -> Self {
        LlmFields {
            builder: Ok(builder),
            set: Vec::new(),
        }
    }

    fn named(mut self, field: &'static str, set: bool) -> Self {
        if set {
            self.set.push(field);
        }
        self
    }

    fn set<T>(
        self,
        field: &'static str,
        value: Option<T>,
        apply: impl FnOnce(LlmAgentBuilder, T) -> LlmAgentBuilder,
    ) -> Self {
        self.try_set(field, value, |builder, value| Ok(apply(builder, value)))
    }

    fn try_set<T>(
        mut self,
        field: &'static str,
        value: Option<T>,
        apply: impl FnOnce(LlmAgentBuilder, T) -> adk_grpc_core::Result<LlmAgentBuilder>,
    ) -> Self {
        if let Some(value) = value {
            self.set.push(field);
            self.builder = self.builder.and_then(|builder| apply(builder, value));
        }
        self
    }
}

/// `retry_config` as ADK writes it: seconds as numbers, every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryFileConfig {
    #[serde(default)]
    pub(super) max_attempts: Option<u32>,
    #[serde(default)]
    pub(super) initial_delay: Option<f64>,
    #[serde(default)]
    pub(super) max_delay: Option<f64>,
    #[serde(default)]
    pub(super) backoff_factor: Option<f32>,
    /// 0 removes the randomness of the delays.
    #[serde(default)]
    pub(super) jitter: Option<f64>,
}

/// `retry_config` in the library's terms, ADK's defaults for what is left out;
/// `Config` naming the field for a value out of range.
impl TryFrom<&RetryFileConfig> for RetryConfig {
    type Error = AdkError;

    fn try_from(file: &RetryFileConfig) -> adk_grpc_core::Result<RetryConfig> {
        let defaults = RetryConfig::default();
        let seconds = |field: &str, value: Option<f64>, default: Duration| match value {
            None => Ok(default),
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s)),
            Some(s) => Err(AdkError::Config(format!(
                "retry_config.{field}: {s} is not a number of seconds of at least 0"
            ))),
        };
        let backoff_factor = file.backoff_factor.unwrap_or(defaults.backoff_factor);
        if !(backoff_factor.is_finite() && backoff_factor >= 1.0) {
            return Err(AdkError::Config(format!(
                "retry_config.backoff_factor: {backoff_factor} must be at least 1"
            )));
        }
        let jitter = file.jitter.unwrap_or(1.0);
        if !(jitter.is_finite() && jitter >= 0.0) {
            return Err(AdkError::Config(format!(
                "retry_config.jitter: {jitter} must be at least 0"
            )));
        }
        Ok(RetryConfig {
            max_attempts: file.max_attempts.unwrap_or(defaults.max_attempts),
            initial_delay: seconds("initial_delay", file.initial_delay, defaults.initial_delay)?,
            max_delay: seconds("max_delay", file.max_delay, defaults.max_delay)?,
            backoff_factor,
            jitter: jitter > 0.0,
        })
    }
}

/// One of an llm agent's `examples`: a user message and the reply expected.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExampleConfig {
    pub(super) input: String,
    pub(super) output: String,
}

impl From<&ExampleConfig> for adk_grpc_agents::Example {
    fn from(example: &ExampleConfig) -> Self {
        adk_grpc_agents::Example::new(&example.input, &example.output)
    }
}

/// `static_instruction` as written: ADK's `types.ContentUnion` forms.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum StaticInstructionConfig {
    Text(String),
    Parts(Vec<StaticPartConfig>),
    Content(StaticContentConfig),
    Part(StaticPartConfig),
}

/// A content: its parts (a static instruction's role is not sent: it becomes system text).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StaticContentConfig {
    #[serde(default)]
    #[allow(dead_code)] // Read as ADK reads it, and not used, as ADK does not use it.
    pub(super) role: Option<String>,
    pub(super) parts: Vec<StaticPartConfig>,
}

/// A part: a text, or a mapping with one of `text`, `inline_data`, `file_data`
/// (camelCase accepted, as pydantic accepts it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum StaticPartConfig {
    Text(String),
    Part(StaticPartFields),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StaticPartFields {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default, alias = "inlineData")]
    pub(super) inline_data: Option<InlineDataConfig>,
    #[serde(default, alias = "fileData")]
    pub(super) file_data: Option<FileDataConfig>,
}

/// A file in the instruction itself: its bytes in base64, as ADK's YAML writes them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InlineDataConfig {
    #[serde(alias = "mimeType")]
    pub(super) mime_type: String,
    pub(super) data: String,
    #[serde(default, alias = "displayName")]
    pub(super) display_name: Option<String>,
}

/// A file named by its URI.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileDataConfig {
    #[serde(default, alias = "mimeType")]
    pub(super) mime_type: Option<String>,
    #[serde(alias = "fileUri")]
    pub(super) file_uri: String,
    #[serde(default, alias = "displayName")]
    pub(super) display_name: Option<String>,
}

impl StaticInstructionConfig {
    /// Whether ADK takes it as set: it tests the field's truth, so an empty text or an
    /// empty list of parts is no static instruction (the instruction stays system text),
    /// while a content or a part is one whatever it holds.
    pub(super) fn is_set(&self) -> bool {
        match self {
            StaticInstructionConfig::Text(text) => !text.is_empty(),
            StaticInstructionConfig::Parts(parts) => !parts.is_empty(),
            StaticInstructionConfig::Content(_) | StaticInstructionConfig::Part(_) => true,
        }
    }
}

impl TryFrom<&StaticInstructionConfig> for StaticInstruction {
    type Error = AdkError;

    fn try_from(config: &StaticInstructionConfig) -> Result<Self, AdkError> {
        let parts: &[StaticPartConfig] = match config {
            StaticInstructionConfig::Text(text) => return Ok(text.into()),
            StaticInstructionConfig::Parts(parts) => parts,
            StaticInstructionConfig::Content(content) => &content.parts,
            StaticInstructionConfig::Part(part) => std::slice::from_ref(part),
        };
        let parts = parts
            .iter()
            .enumerate()
            .filter_map(|(i, part)| static_part(part).map_err(|why| (i, why)).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|(i, why)| AdkError::Config(format!("static_instruction.parts[{i}]: {why}")))?;
        Ok(StaticInstruction::new(parts))
    }
}

/// A part as the agent takes it; None for a part ADK leaves out (no text nor file).
fn static_part(part: &StaticPartConfig) -> Result<Option<StaticPart>, String> {
    let fields = match part {
        StaticPartConfig::Text(text) => return Ok(Some(StaticPart::Text(text.clone()))),
        StaticPartConfig::Part(fields) => fields,
    };
    // In ADK's order of precedence: a text, else inline data, else a file.
    if let Some(text) = fields.text.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Some(StaticPart::Text(text.clone())));
    }
    if let Some(inline) = &fields.inline_data {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD
            .decode(&inline.data)
            .map_err(|e| format!("inline_data.data is not base64: {e}"))?;
        return Ok(Some(StaticPart::InlineData {
            mime_type: inline.mime_type.clone(),
            data,
            display_name: inline.display_name.clone(),
        }));
    }
    Ok(fields.file_data.as_ref().map(|file| StaticPart::FileData {
        mime_type: file.mime_type.clone().unwrap_or_default(),
        file_uri: file.file_uri.clone(),
        display_name: file.display_name.clone(),
    }))
}

/// The model's generation settings; any left out are the provider's defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
    #[serde(default)]
    pub(super) top_k: Option<i32>,
    #[serde(default)]
    pub(super) seed: Option<i64>,
    #[serde(default)]
    pub(super) presence_penalty: Option<f32>,
    #[serde(default)]
    pub(super) frequency_penalty: Option<f32>,
    /// `text/plain` or `application/json` (Gemini takes others too).
    #[serde(default)]
    pub(super) response_mime_type: Option<String>,
    /// Gemini only: its `safetySettings`, `{category, threshold}` objects as its API takes them.
    #[serde(default)]
    pub(super) safety_settings: Vec<Value>,
    /// How much the model reasons, and whether its thoughts come back (ADK's
    /// `thinking_config` / `BuiltInPlanner`).
    #[serde(default)]
    pub(super) thinking: Option<adk_grpc_core::ThinkingConfig>,
    /// Only 1: ADK reads the first candidate of a reply and so does the runner.
    #[serde(default)]
    pub(super) candidate_count: Option<i32>,
    /// The reply's token log probabilities, kept on its event (`avg_logprobs`, `logprobs_result`).
    #[serde(default)]
    pub(super) response_logprobs: Option<bool>,
    /// With `response_logprobs`: how many of the likeliest tokens each step also reports (0-20).
    #[serde(default)]
    pub(super) logprobs: Option<i32>,
    /// Gemini only: `MEDIA_RESOLUTION_LOW`, `_MEDIUM`, `_HIGH` or `_UNSPECIFIED`.
    #[serde(default)]
    pub(super) media_resolution: Option<String>,
    /// Gemini only: a context cache's name (`cachedContents/…`).
    #[serde(default)]
    pub(super) cached_content: Option<String>,
    /// `TEXT` (any provider), `IMAGE` (Gemini only); audio replies are not offered.
    #[serde(default)]
    pub(super) response_modalities: Vec<String>,
    /// Gemini only: its `enableEnhancedCivicAnswers`.
    #[serde(default)]
    pub(super) enable_enhanced_civic_answers: Option<bool>,
    /// Whether and which functions the model may call: `function_calling_config`'s
    /// `mode` (AUTO, ANY, NONE, VALIDATED) and `allowed_function_names`.
    #[serde(default)]
    pub(super) tool_config: Option<adk_grpc_core::ToolConfig>,
    /// Gemini only (dropped for an openai model, as ADK's LiteLlm drops it): IMAGE
    /// replies' `aspect_ratio` and `image_size`.
    #[serde(default)]
    pub(super) image_config: Option<adk_grpc_core::ImageConfig>,
    /// Gemini only (dropped for an openai model): its `speechConfig`, a mapping as
    /// google-genai's `SpeechConfig` or a voice name.
    #[serde(default)]
    pub(super) speech_config: Option<Value>,
    /// Gemini only (dropped for an openai model): its `audioTranscriptionConfig`, a mapping.
    #[serde(default)]
    pub(super) audio_transcription_config: Option<Value>,
    /// Gemini only (dropped for an openai model): its `serviceTier`.
    #[serde(default)]
    pub(super) service_tier: Option<String>,
    /// Gemini only (dropped for an openai model): its `store`.
    #[serde(default)]
    pub(super) store: Option<bool>,
}

/// A speech or transcription setting as google-genai sends it: validated into its
/// pydantic class and written with that class's field names, so in snake_case
/// whichever case the YAML used; a bare voice name is `SpeechConfig`'s shorthand.
fn as_google_genai_sends(value: &Value) -> Value {
    match value {
        Value::String(voice) => serde_json::json!({"voice_config": {"prebuilt_voice_config": {"voice_name": voice}}}),
        other => adk_grpc_core::with_snake_case_keys(other.clone()),
    }
}

/// A model_consult tool's `context_config` (ADK's `ModelConsultContextConfig`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConsultContextConfig {
    #[serde(default)]
    pub(super) include_session: Option<bool>,
    #[serde(default)]
    pub(super) max_events: Option<usize>,
    /// Left out: ADK's 200000; `null`: no budget.
    #[serde(default, deserialize_with = "present")]
    pub(super) max_chars: Option<Option<usize>>,
    #[serde(default)]
    pub(super) max_part_chars: Option<usize>,
    #[serde(default)]
    pub(super) include_media: Option<bool>,
    #[serde(default)]
    pub(super) include_thoughts: Option<bool>,
}

/// A field that is there, even as `null` (Some(None)), apart from one left out (None).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl From<&GenerationConfig> for GenerateContentConfig {
    fn from(g: &GenerationConfig) -> Self {
        GenerateContentConfig {
            temperature: g.temperature,
            top_p: g.top_p,
            max_output_tokens: g.max_output_tokens,
            stop_sequences: g.stop_sequences.clone(),
            top_k: g.top_k,
            seed: g.seed,
            presence_penalty: g.presence_penalty,
            frequency_penalty: g.frequency_penalty,
            response_mime_type: g.response_mime_type.clone(),
            response_schema: None,
            response_schema_as_sent: None,
            safety_settings: g.safety_settings.clone(),
            thinking: g.thinking.clone(),
            candidate_count: g.candidate_count,
            response_logprobs: g.response_logprobs,
            logprobs: g.logprobs,
            media_resolution: g.media_resolution.clone(),
            cached_content: g.cached_content.clone(),
            response_modalities: g.response_modalities.clone(),
            enable_enhanced_civic_answers: g.enable_enhanced_civic_answers,
            tool_config: g.tool_config.clone(),
            image_config: g.image_config.clone(),
            speech_config: g.speech_config.as_ref().map(as_google_genai_sends),
            audio_transcription_config: g
                .audio_transcription_config
                .clone()
                .map(adk_grpc_core::with_snake_case_keys),
            service_tier: g.service_tier.clone(),
            store: g.store,
            // Named by the agent's tools (google_search, …), not by `generation`.
            builtin_tools: Vec::new(),
        }
    }
}

impl AppConfig {
    /// The models the app's agents, the advisors of the model_consult tools they list
    /// (declared in `tools`) and its summariser name, as written.
    pub(super) fn model_names<'a>(&'a self, tools: &'a BTreeMap<String, ToolConfig>) -> Vec<&'a str> {
        fn walk<'a>(agent: &'a AgentConfig, tools: &'a BTreeMap<String, ToolConfig>, names: &mut Vec<&'a str>) {
            names.extend(agent.model.as_deref());
            let advisors = agent.tools.iter().filter_map(|name| match tools.get(name) {
                Some(ToolConfig::ModelConsult(tool)) => tool.advisor.as_deref(),
                _ => None,
            });
            names.extend(advisors);
            agent.sub_agents.iter().for_each(|sub| walk(sub, tools, names));
        }
        let mut names = Vec::new();
        walk(&self.root_agent, tools, &mut names);
        names.extend(self.compaction.as_ref().and_then(|c| c.model.as_deref()));
        names
    }
}
