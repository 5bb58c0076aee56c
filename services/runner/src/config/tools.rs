//! The declared tools: checked field by field, then built once with the runner
//! library's constructors and shared by every agent that lists them (HTTP tools
//! hold a connection pool, MCP toolsets a connection or child process).

use super::file::{AgentsFile, McpTransportKind, ToolConfig, ToolKind};
use super::problems::{Problems, library_message};
use adk_grpc_agents::{BUILTIN_TOOLS, ClientTool, ContextGrant, HttpTool, McpToolset, TRANSFER_TOOL_NAME};
use adk_grpc_core::Tool;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A declared tool: one tool, or a toolset (an MCP server's tools).
#[derive(Clone)]
pub(super) enum Declared {
    Tool(Arc<dyn Tool>),
    Toolset(Arc<McpToolset>),
}

pub(super) fn build_tools(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, Declared> {
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
            "safe_to_repeat",
            config.safe_to_repeat.is_some(),
            http || config.kind == ToolKind::Mcp,
            "http and mcp tools",
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
        (
            "context",
            config.context.is_some(),
            config.kind != ToolKind::Client,
            "http and mcp tools (a client tool gets the call and the session from the run it resumes)",
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

/// The tool context an http or mcp tool declares it reads, checked by the library's rules.
fn context_grant(place: &str, config: &ToolConfig, problems: &mut Problems) -> Option<ContextGrant> {
    let declared = config.context.as_ref().filter(|_| config.kind != ToolKind::Client)?;
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
    let toolset = toolset.with_safe_to_repeat(config.safe_to_repeat == Some(true));
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
