//! The declared tools: checked field by field, then built once with the runner
//! library's constructors and shared by every agent that lists them (HTTP tools
//! hold a connection pool, MCP toolsets a connection or child process).

use super::file::{AgentsFile, GenerationConfig, McpTransportKind, ToolConfig, ToolKind};
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
        if let Some(advisor) = config
            .advisor
            .as_ref()
            .filter(|_| config.kind == ToolKind::ModelConsult)
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
    // A toolset's tools are described by their server or their spec; model_consult has ADK's.
    if config.description.trim().is_empty()
        && !matches!(config.kind, ToolKind::Mcp | ToolKind::Openapi | ToolKind::ModelConsult)
    {
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
    let grant = context_grant(&place, config, problems);
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
        ToolKind::Mcp => return build_mcp_toolset(name, &place, config, problems, before, grant),
        ToolKind::Openapi => return build_openapi_toolset(name, &place, config, problems, before),
        ToolKind::ModelConsult => return model_consult(&place, config, problems, before),
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
                if let Some(grant) = grant {
                    tool = tool.with_context(grant);
                }
                Ok(tool.with_safe_to_repeat(config.safe_to_repeat == Some(true)))
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
        ToolKind::Mcp | ToolKind::Openapi | ToolKind::ModelConsult => {
            unreachable!("toolsets and model_consult tools are built by their own functions")
        }
    };
    Some(Declared::Tool(tool))
}

/// A model_consult tool's settings, checked: an advisor (declared: checked by
/// [`build_tools`]) and budgets of at least 1.
fn model_consult(place: &str, config: &ToolConfig, problems: &mut Problems, before: usize) -> Option<Declared> {
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
    check_timeouts(place, config, problems);
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
    let generation = config.generate_content_config.as_ref();
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
        generation: config.generate_content_config.clone(),
        config: request,
        advisor_instruction: config.advisor_instruction.clone(),
        executor_instruction: config.executor_instruction.clone(),
        include_agent_instruction: config.include_agent_instruction.unwrap_or(true),
        include_tool_inventory: config.include_tool_inventory.unwrap_or(true),
        context,
    })))
}

/// `context_config` over ADK's defaults; its limits at least 1.
fn consult_context(place: &str, config: &ToolConfig, problems: &mut Problems) -> ConsultContext {
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

/// Fields that mean nothing for the tool's kind (or transport) are errors, not
/// silently ignored settings.
fn check_kind_fields(place: &str, config: &ToolConfig, problems: &mut Problems) {
    let transport = config.transport;
    let stdio = config.kind == ToolKind::Mcp && transport == Some(McpTransportKind::Stdio);
    let mcp_http = config.kind == ToolKind::Mcp && transport == Some(McpTransportKind::Http);
    let http = config.kind == ToolKind::Http;
    let openapi = config.kind == ToolKind::Openapi;
    let consult = config.kind == ToolKind::ModelConsult;
    // (field, set, allowed for this kind, who has it)
    let fields = [
        (
            "safe_to_repeat",
            config.safe_to_repeat.is_some(),
            http || config.kind == ToolKind::Mcp || openapi,
            "http, mcp and openapi tools",
        ),
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
            "http, mcp, openapi and model_consult tools",
        ),
        (
            "headers_from_env",
            !config.headers_from_env.is_empty(),
            http || mcp_http || openapi,
            "http tools, openapi tools and mcp tools over http",
        ),
        (
            "parameters",
            config.parameters.is_some(),
            http || config.kind == ToolKind::Client,
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
            config.kind == ToolKind::Mcp || openapi,
            "mcp and openapi tools",
        ),
        (
            "tool_prefix",
            config.tool_prefix.is_some(),
            config.kind == ToolKind::Mcp || openapi,
            "mcp and openapi tools",
        ),
        (
            "connect_timeout_secs",
            config.connect_timeout_secs.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
        (
            "use_mcp_resources",
            config.use_mcp_resources.is_some(),
            config.kind == ToolKind::Mcp,
            "mcp tools",
        ),
        (
            "context",
            config.context.is_some(),
            http || config.kind == ToolKind::Mcp,
            "http and mcp tools (a client tool gets the call and the session from the run it resumes)",
        ),
        ("spec", config.spec.is_some(), openapi, "openapi tools"),
        ("base_url", config.base_url.is_some(), openapi, "openapi tools"),
    ];
    let kind = match (config.kind, transport) {
        (ToolKind::Mcp, Some(McpTransportKind::Stdio)) => "an mcp tool over stdio".to_string(),
        (ToolKind::Mcp, Some(McpTransportKind::Http)) => "an mcp tool over http".to_string(),
        (ToolKind::Client, _) => "a client tool".to_string(),
        (ToolKind::ModelConsult, _) => "a model_consult tool".to_string(),
        (kind, _) => format!("an {} tool", kind.as_str()),
    };
    // ADK's ModelConsultTool arguments.
    let consult_fields = [
        ("advisor", config.advisor.is_some()),
        ("max_uses", config.max_uses.is_some()),
        ("session_max_uses", config.session_max_uses.is_some()),
        ("thinking_level", config.thinking_level.is_some()),
        ("max_output_tokens", config.max_output_tokens.is_some()),
        ("executor_instruction", config.executor_instruction.is_some()),
        ("advisor_instruction", config.advisor_instruction.is_some()),
        ("include_agent_instruction", config.include_agent_instruction.is_some()),
        ("include_tool_inventory", config.include_tool_inventory.is_some()),
        ("context_config", config.context_config.is_some()),
        ("generate_content_config", config.generate_content_config.is_some()),
    ]
    .map(|(field, set)| (field, set, consult, "model_consult tools"));
    for (field, set, allowed, owners) in consult_fields.into_iter().chain(fields) {
        if set && !allowed {
            problems.add(place, Some(field), format!("only {owners} have it; this is {kind}"));
        }
    }
}

/// The tool context an http or mcp tool declares it reads, checked by the library's rules.
fn context_grant(place: &str, config: &ToolConfig, problems: &mut Problems) -> Option<ContextGrant> {
    let declared = config
        .context
        .as_ref()
        .filter(|_| matches!(config.kind, ToolKind::Http | ToolKind::Mcp))?;
    ContextGrant::new(declared.state.iter().cloned())
        .inspect_err(|e| problems.add(place, Some("context.state"), library_message(e)))
        .ok()
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
    grant: Option<ContextGrant>,
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
    check_filter_and_prefix(place, config, problems);
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
        .with_resources(config.use_mcp_resources == Some(true));
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

/// `tool_filter` and `tool_prefix` of a toolset (mcp, openapi).
fn check_filter_and_prefix(place: &str, config: &ToolConfig, problems: &mut Problems) {
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
    config: &ToolConfig,
    problems: &mut Problems,
    before: usize,
) -> Option<Declared> {
    check_timeouts(place, config, problems);
    check_filter_and_prefix(place, config, problems);
    let headers = header_values(place, config, problems);
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
    let toolset = toolset.with_timeout(timeout).with_safe_to_repeat(config.safe_to_repeat);
    toolset
        .tools()
        .inspect_err(|e| problems.add(place, Some("spec"), library_message(e)))
        .ok()
        .map(Declared::Tools)
}
