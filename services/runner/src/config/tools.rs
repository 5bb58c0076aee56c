//! The declared tools: each read into its kind's struct (file.rs: a field of another
//! kind is refused there), checked field by field, then built once with the runner
//! library's constructors and shared by every agent that lists them (HTTP tools
//! hold a connection pool, MCP toolsets a connection or child process).

use super::file::{
    AgentsFile, GenerationConfig, HttpToolConfig, McpToolConfig, McpTransportKind, ModelConsultToolConfig,
    OpenApiToolConfig, ToolConfig, ToolContextConfig,
};
use super::problems::{Problems, library_message, names};
use adk_grpc_agents::{
    BUILTIN_TOOLS, ClientTool, ConsultContext, ContextGrant, HttpTool, McpToolset, OpenApiToolset, TRANSFER_TOOL_NAME,
};
use adk_grpc_core::{GenerateContentConfig, ThinkingConfig, ThinkingEffort, Tool};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A declared tool: one tool, a toolset (an MCP server's tools), or the tools of
/// an OpenAPI spec's operations (read at load, so known and fixed).
#[derive(Clone)]
pub(super) enum Declared {
    Tool(Arc<dyn Tool>),
    /// A model_consult tool: built per app, with the app's instance of its advisor.
    ModelConsult(Box<ModelConsultSpec>),
    Toolset(Arc<McpToolset>),
    Tools(Vec<Arc<dyn Tool>>),
}

/// A checked model_consult tool, waiting for its advisor model.
#[derive(Clone)]
pub(super) struct ModelConsultSpec {
    pub(super) advisor: String,
    pub(super) description: String,
    pub(super) max_uses: Option<u32>,
    pub(super) session_max_uses: Option<u32>,
    pub(super) timeout: Option<Duration>,
    /// `generate_content_config` as written, checked against the advisor's provider
    /// once the app's instance of it is built.
    pub(super) generation: Option<GenerationConfig>,
    /// The advisor request's settings: `generate_content_config` with
    /// `thinking_level` and `max_output_tokens` applied.
    pub(super) config: GenerateContentConfig,
    pub(super) advisor_instruction: Option<String>,
    pub(super) executor_instruction: Option<String>,
    pub(super) include_agent_instruction: bool,
    pub(super) include_tool_inventory: bool,
    pub(super) context: ConsultContext,
}

pub(super) fn build_tools(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, Declared> {
    let mut tools = BTreeMap::new();
    for (name, config) in &spec.tools {
        if let ToolConfig::ModelConsult(ModelConsultToolConfig {
            advisor: Some(advisor), ..
        }) = config
            && !spec.models.contains_key(advisor)
        {
            problems.add(
                &format!("tool {name:?}"),
                Some("advisor"),
                format!("unknown model {advisor:?} (declared: {})", names(spec.models.keys())),
            );
            continue;
        }
        if let Some(tool) = build_tool(name, config, problems) {
            tools.insert(name.clone(), tool);
        }
    }
    tools
}

fn build_tool(name: &str, config: &ToolConfig, problems: &mut Problems) -> Option<Declared> {
    let place = format!("tool {name:?}");
    let before = problems.0.len();
    // Declared under a key of its app: the model calls each tool by its own name.
    if let ToolConfig::Python(served) = config {
        return python_tools(&place, served, problems, before);
    }
    if let Err(e) = adk_grpc_agents::validate_tool_name(name) {
        problems.add(&place, None, library_message(&e));
    }
    if BUILTIN_TOOLS.contains(&name) || name == TRANSFER_TOOL_NAME {
        problems.add(
            &place,
            None,
            format!("{name} is a built-in tool: list it in an agent's tools without declaring it"),
        );
    }
    let place = place.as_str();
    match config {
        ToolConfig::Http(http) => {
            let tool = http_tool(name, place, http, problems, before)?;
            Some(Declared::Tool(Arc::new(tool)))
        }
        ToolConfig::Client(client) => {
            described(place, &client.description, problems);
            check_parameters(place, client.parameters.as_ref(), problems);
            if problems.0.len() > before {
                return None;
            }
            let mut tool = ClientTool::new(name, &client.description);
            if let Some(schema) = &client.parameters {
                tool = tool.with_parameters_schema(schema.clone());
            }
            Some(Declared::Tool(Arc::new(tool)))
        }
        ToolConfig::Mcp(mcp) => build_mcp_toolset(name, place, mcp, problems, before),
        ToolConfig::Openapi(openapi) => build_openapi_toolset(name, place, openapi, problems, before),
        ToolConfig::ModelConsult(consult) => model_consult(place, consult, problems, before),
        ToolConfig::Python(served) => python_tools(place, served, problems, before),
    }
}

/// The http tools a Python worker serves for one `tools:` entry, each checked under its
/// own name (the one the model calls).
fn python_tools(
    place: &str,
    served: &[(String, HttpToolConfig)],
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    let tools: Vec<Arc<dyn Tool>> = served
        .iter()
        .filter_map(|(name, config)| {
            let place = format!("{place}, tool {name:?}");
            if let Err(e) = adk_grpc_agents::validate_tool_name(name) {
                problems.add(&place, None, library_message(&e));
            }
            let tool = http_tool(name, &place, config, problems, problems.0.len())?;
            Some(Arc::new(tool) as Arc<dyn Tool>)
        })
        .collect();
    (problems.0.len() == before).then_some(Declared::Tools(tools))
}

/// An http or client tool needs a description (a toolset's tools are described by their
/// server or their spec; model_consult has ADK's).
fn described(place: &str, description: &str, problems: &mut Problems) {
    if description.trim().is_empty() {
        problems.add(
            place,
            Some("description"),
            "a tool needs a description: the model reads it to decide when to call the tool",
        );
    }
}

fn check_parameters(place: &str, parameters: Option<&serde_json::Value>, problems: &mut Problems) {
    if parameters.is_some_and(|schema| !schema.is_object()) {
        problems.add(
            place,
            Some("parameters"),
            "must be a JSON Schema object, e.g. {type: object, properties: {city: {type: string}}}",
        );
    }
}

fn http_tool(
    name: &str,
    place: &str,
    config: &HttpToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<HttpTool> {
    described(place, &config.description, problems);
    check_parameters(place, config.parameters.as_ref(), problems);
    let grant = context_grant(place, config.context.as_ref(), problems);
    if config.url.is_none() {
        problems.add(place, Some("url"), "an http tool needs the url its calls are POSTed to");
    }
    check_timeouts(place, [("timeout_secs", config.timeout_secs)], problems);
    let headers = header_values(place, &config.headers_from_env, problems);
    if problems.0.len() > before {
        return None;
    }
    let url = config.url.as_deref().unwrap_or_default();
    HttpTool::new(name, &config.description, url)
        .and_then(|mut tool| {
            if let Some(schema) = &config.parameters {
                tool = tool.with_parameters_schema(schema.clone());
            }
            if let Some(secs) = config.timeout_secs {
                tool = tool.with_timeout(Duration::from_secs(secs));
            }
            for (header, value) in &headers {
                tool = tool.with_header(header, value)?;
            }
            if let Some(grant) = grant {
                tool = tool.with_context(grant);
            }
            Ok(tool
                .with_long_running(config.long_running)
                .with_safe_to_repeat(config.safe_to_repeat == Some(true))
                .with_large_reply(config.large_reply))
        })
        .inspect_err(|e| problems.add(place, None, library_message(e)))
        .ok()
}

/// A model_consult tool's settings, checked: an advisor (declared: checked by
/// [`build_tools`]) and budgets of at least 1.
fn model_consult(
    place: &str,
    config: &ModelConsultToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    if config.advisor.is_none() {
        problems.add(
            place,
            Some("advisor"),
            "a model_consult tool needs the model that advises: one of `models`",
        );
    }
    for (field, max) in [
        ("max_uses", config.max_uses),
        ("session_max_uses", config.session_max_uses),
    ] {
        if max == Some(0) {
            problems.add(place, Some(field), "must be at least 1 (leave it out for no limit)");
        }
    }
    check_timeouts(place, [("timeout_secs", config.timeout_secs)], problems);
    let effort = match config
        .thinking_level
        .as_deref()
        .map(|l| l.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("" | "off" | "none") => None,
        Some("minimal") => Some(ThinkingEffort::Minimal),
        Some("low") => Some(ThinkingEffort::Low),
        Some("medium") => Some(ThinkingEffort::Medium),
        Some("high") => Some(ThinkingEffort::High),
        Some(other) => {
            problems.add(
                place,
                Some("thinking_level"),
                format!("{other:?} is not one of minimal, low, medium, high, off"),
            );
            None
        }
    };
    let generation = config.generate_content_config.as_deref();
    let capped = generation.and_then(|g| g.max_output_tokens);
    if config.max_output_tokens.is_some_and(|n| n < 1) {
        problems.add(place, Some("max_output_tokens"), "must be at least 1");
    }
    if let (Some(ours), Some(theirs)) = (config.max_output_tokens, capped)
        && ours != theirs
    {
        problems.add(
            place,
            Some("max_output_tokens"),
            format!("{ours} and generate_content_config.max_output_tokens {theirs} disagree: set one (as ADK refuses)"),
        );
    }
    let context = consult_context(place, config, problems);
    if problems.0.len() > before {
        return None;
    }
    let mut request: GenerateContentConfig = generation.map(Into::into).unwrap_or_default();
    request.max_output_tokens = config.max_output_tokens.or(request.max_output_tokens);
    // As ADK: a level replaces the thinking settings, keeping only include_thoughts.
    if let Some(effort) = effort {
        request.thinking = Some(ThinkingConfig {
            budget_tokens: None,
            include_thoughts: request.thinking.and_then(|t| t.include_thoughts),
            effort: Some(effort),
        });
    }
    Some(Declared::ModelConsult(Box::new(ModelConsultSpec {
        advisor: config.advisor.clone().unwrap_or_default(),
        description: config.description.clone(),
        max_uses: config.max_uses,
        session_max_uses: config.session_max_uses,
        timeout: config.timeout_secs.map(Duration::from_secs),
        generation: config.generate_content_config.as_deref().cloned(),
        config: request,
        advisor_instruction: config.advisor_instruction.clone(),
        executor_instruction: config.executor_instruction.clone(),
        include_agent_instruction: config.include_agent_instruction.unwrap_or(true),
        include_tool_inventory: config.include_tool_inventory.unwrap_or(true),
        context,
    })))
}

/// `context_config` over ADK's defaults; its limits at least 1.
fn consult_context(place: &str, config: &ModelConsultToolConfig, problems: &mut Problems) -> ConsultContext {
    let mut context = ConsultContext::default();
    let Some(written) = &config.context_config else {
        return context;
    };
    for (field, value) in [
        ("context_config.max_events", written.max_events),
        ("context_config.max_chars", written.max_chars.flatten()),
        ("context_config.max_part_chars", written.max_part_chars),
    ] {
        if value == Some(0) {
            problems.add(place, Some(field), "must be at least 1");
        }
    }
    context.include_session = written.include_session.unwrap_or(context.include_session);
    context.max_events = written.max_events;
    context.max_chars = written.max_chars.unwrap_or(context.max_chars);
    context.max_part_chars = written.max_part_chars.unwrap_or(context.max_part_chars);
    context.include_media = written.include_media.unwrap_or(context.include_media);
    context.include_thoughts = written.include_thoughts.unwrap_or(context.include_thoughts);
    context
}

/// The fields of an mcp tool that only one transport has are errors under the other,
/// not silently ignored settings. Without a transport (itself a problem) only `command`
/// and `url`, which say which one was meant, are taken.
fn check_transport_fields(place: &str, config: &McpToolConfig, problems: &mut Problems) {
    use McpTransportKind::{Http, Stdio};
    // (field, set, the transport that has it, who has it)
    let fields = [
        ("command", config.command.is_some(), Stdio, "mcp tools over stdio"),
        ("args", !config.args.is_empty(), Stdio, "mcp tools over stdio"),
        (
            "working_dir",
            config.working_dir.is_some(),
            Stdio,
            "mcp tools over stdio",
        ),
        ("env", !config.env.is_empty(), Stdio, "mcp tools over stdio"),
        (
            "env_from_env",
            !config.env_from_env.is_empty(),
            Stdio,
            "mcp tools over stdio",
        ),
        ("url", config.url.is_some(), Http, "http tools and mcp tools over http"),
        (
            "headers_from_env",
            !config.headers_from_env.is_empty(),
            Http,
            "http tools, openapi tools and mcp tools over http",
        ),
        (
            "bearer_token_env",
            config.bearer_token_env.is_some(),
            Http,
            "mcp tools over http",
        ),
    ];
    let this = match config.transport {
        Some(Stdio) => "an mcp tool over stdio",
        Some(Http) => "an mcp tool over http",
        None => "an mcp tool",
    };
    for (field, set, transport, owners) in fields {
        let fits = match config.transport {
            Some(written) => written == transport,
            None => field == "command" || field == "url",
        };
        if set && !fits {
            problems.add(place, Some(field), format!("only {owners} have it; this is {this}"));
        }
    }
}

/// The tool context an http or mcp tool declares it reads, checked by the library's rules.
fn context_grant(place: &str, declared: Option<&ToolContextConfig>, problems: &mut Problems) -> Option<ContextGrant> {
    let declared = declared?;
    ContextGrant::new(declared.state.iter().cloned())
        .map(|grant| grant.with_session_reads(declared.session_reads))
        .inspect_err(|e| problems.add(place, Some("context.state"), library_message(e)))
        .ok()
}

/// Timeouts are at least 1 second (left out: the default).
fn check_timeouts<const N: usize>(place: &str, timeouts: [(&str, Option<u64>); N], problems: &mut Problems) {
    for (field, value) in timeouts {
        if value == Some(0) {
            problems.add(place, Some(field), "must be at least 1");
        }
    }
}

/// The values of `headers_from_env`, each variable required to be set.
fn header_values(
    place: &str,
    headers_from_env: &BTreeMap<String, String>,
    problems: &mut Problems,
) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for (header, var) in headers_from_env {
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
    config: &McpToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    check_transport_fields(place, config, problems);
    let grant = context_grant(place, config.context.as_ref(), problems);
    check_timeouts(
        place,
        [
            ("timeout_secs", config.timeout_secs),
            ("connect_timeout_secs", config.connect_timeout_secs),
        ],
        problems,
    );
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
    check_filter_and_prefix(
        place,
        config.tool_filter.as_deref(),
        config.tool_prefix.as_deref(),
        problems,
    );
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
    if let Some(grant) = grant {
        toolset = toolset.with_context(grant);
    }
    let toolset = toolset
        .with_safe_to_repeat(config.safe_to_repeat == Some(true))
        .with_large_reply(config.large_reply)
        .with_resources(config.use_mcp_resources == Some(true))
        .with_adk_forms(config.adk_forms);
    Some(Declared::Toolset(Arc::new(toolset)))
}

fn stdio_toolset(name: &str, place: &str, config: &McpToolConfig, problems: &mut Problems) -> Option<McpToolset> {
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

fn http_toolset(name: &str, place: &str, config: &McpToolConfig, problems: &mut Problems) -> Option<McpToolset> {
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
    let headers = header_values(place, &config.headers_from_env, problems);
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

/// `tool_filter` and `tool_prefix` of a toolset (mcp, openapi).
fn check_filter_and_prefix(place: &str, filter: Option<&[String]>, prefix: Option<&str>, problems: &mut Problems) {
    if let Some(filter) = filter
        && (filter.is_empty() || filter.iter().any(|tool| tool.trim().is_empty()))
    {
        problems.add(
            place,
            Some("tool_filter"),
            "list the server's tools to offer by name (leave the field out to offer them all)",
        );
    }
    if let Some(prefix) = prefix
        && !adk_grpc_agents::is_identifier(prefix)
    {
        problems.add(
            place,
            Some("tool_prefix"),
            "must be an identifier ([A-Za-z_][A-Za-z0-9_]*): it starts the tools' function names",
        );
    }
}

/// An `openapi` tool: its spec is read now (a file, or fetched from its URL) and
/// each operation becomes a tool, so a spec that cannot be read, or an offered
/// operation that cannot be called, stops the load naming the spec and its field.
fn build_openapi_toolset(
    name: &str,
    place: &str,
    config: &OpenApiToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    check_timeouts(place, [("timeout_secs", config.timeout_secs)], problems);
    check_filter_and_prefix(
        place,
        config.tool_filter.as_deref(),
        config.tool_prefix.as_deref(),
        problems,
    );
    let headers = header_values(place, &config.headers_from_env, problems);
    let Some(spec) = config.spec.as_deref().filter(|spec| !spec.trim().is_empty()) else {
        problems.add(
            place,
            Some("spec"),
            "an openapi tool needs its spec: the path or http(s) URL of an OpenAPI 3.x document (JSON or YAML)",
        );
        return None;
    };
    let timeout = config
        .timeout_secs
        .filter(|secs| *secs > 0)
        .map_or(OpenApiToolset::DEFAULT_TIMEOUT, Duration::from_secs);
    let mut toolset = OpenApiToolset::load(name, spec, timeout)
        .inspect_err(|e| problems.add(place, Some("spec"), library_message(e)))
        .ok()?;
    // Each setting checked on its own, so a problem names its field.
    let mut set =
        |field: &str, result: adk_grpc_core::Result<OpenApiToolset>, toolset: &mut OpenApiToolset| match result {
            Ok(next) => *toolset = next,
            Err(e) => problems.add(place, Some(field), library_message(&e)),
        };
    if let Some(url) = &config.base_url {
        set("base_url", toolset.clone().with_base_url(url), &mut toolset);
    }
    if let Some(filter) = &config.tool_filter {
        set(
            "tool_filter",
            toolset.clone().with_tool_filter(filter.iter().cloned()),
            &mut toolset,
        );
    }
    for (header, value) in &headers {
        set(
            "headers_from_env",
            toolset.clone().with_header(header, value),
            &mut toolset,
        );
    }
    if problems.0.len() > before {
        return None;
    }
    if let Some(prefix) = &config.tool_prefix {
        toolset = toolset.with_prefix(prefix);
    }
    let toolset = toolset
        .with_timeout(timeout)
        .with_safe_to_repeat(config.safe_to_repeat)
        .with_large_reply(config.large_reply);
    toolset
        .tools()
        .inspect_err(|e| problems.add(place, Some("spec"), library_message(e)))
        .ok()
        .map(Declared::Tools)
}
