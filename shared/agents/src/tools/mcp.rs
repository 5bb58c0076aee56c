//! `McpToolset`: the tools of a Model Context Protocol server, through `rmcp`,
//! the official Rust SDK.
//!
//! One connection (for stdio: one child process) per toolset, shared by every
//! invocation. It is opened on first use, by a supervisor task that reopens it
//! with capped exponential backoff whenever it closes (the child died, the HTTP
//! server went away), until the toolset is dropped; a call that needs the server
//! while it is down cuts the backoff short and waits for the connection within the
//! call's timeout, as ADK's MCP session manager reconnects on the next call. The
//! tool list is read on connect and again after the server's
//! `notifications/tools/list_changed`; while the server is down the last list stays
//! offered and a call that cannot reach it in time fails as a tool error the model
//! reads, so a server that went away never fails a run.
//! A toolset whose tools were never listed (its server never answered) fails the
//! agent's step with `Unavailable` naming the toolset, its server and the cause,
//! as ADK's `McpToolset.get_tools` raises `ConnectionError`: the model cannot be
//! offered tools nobody knows, and the client must learn why.

use super::mcp_stdio::StdioServer;
use super::remote_context::{ContextGrant, ToolActions};
use super::untrusted;
use crate::large_reply::LargeReply;
use adk_grpc_core::sync;
use adk_grpc_core::{
    AdkError, CallbackContext, Content, LlmRequest, Part, PartKind, ReadonlyContext, Result, Tool, ToolContext,
    ToolOutput, Toolset,
};
use async_trait::async_trait;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, MetaObject, ReadResourceRequestParams, RequestMetaObject, ResourceContents};
use rmcp::service::{
    ClientInitializeError, NotificationContext, Peer, RoleClient, RunningService, ServiceError, ServiceExt,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The environment variables a stdio server inherits from the runner (the MCP
/// Python SDK's default set): enough to find programs and a home directory,
/// none of the runner's secrets (API keys, Redis passwords).
const INHERITED_ENV: [&str; 8] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR"];
/// A connection that lived this long was healthy: the next failure starts the
/// backoff from its shortest delay again.
const HEALTHY_CONNECTION: Duration = Duration::from_secs(60);
/// The last lines a stdio server wrote to stderr, kept to say why it failed
/// (a traceback's last lines, "command not found").
const STDERR_TAIL_LINES: usize = 4;
const STDERR_TAIL_LINE_CHARS: usize = 300;
/// The most of a stderr line read at once.
const STDERR_READ_BYTES: u64 = 64 * 1024;
/// How long a failed stdio server's stderr is read for its last words.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// How the runner reaches the MCP server.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A child process the runner starts, speaking MCP on its stdin/stdout (its
    /// stderr goes to the runner's).
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the few variables inherited from the runner (see [`McpToolset::stdio`]).
        env: BTreeMap<String, String>,
        working_dir: Option<PathBuf>,
    },
    /// A server speaking MCP's streamable HTTP transport at `url`.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        bearer_token: Option<String>,
    },
}

impl McpTransport {
    fn describe(&self) -> String {
        match self {
            McpTransport::Stdio { command, .. } => format!("stdio `{command}`"),
            McpTransport::Http { url, .. } => format!("streamable HTTP {url}"),
        }
    }
}

/// The tools of one MCP server as a [`Toolset`].
///
/// ```no_run
/// # use adk_grpc_agents::{LlmAgentBuilder, McpToolset};
/// # use std::sync::Arc;
/// # fn demo(model: Arc<dyn adk_grpc_core::Llm>) -> adk_grpc_core::Result<()> {
/// let everything = McpToolset::stdio("everything", "npx")
///     .with_args(["-y", "@modelcontextprotocol/server-everything"])
///     .with_tool_filter(["echo", "get-sum"])
///     .with_prefix("demo");
/// let agent = LlmAgentBuilder::new("assistant")
///     .model(model)
///     .toolsets([Arc::new(everything) as Arc<dyn adk_grpc_core::Toolset>])
///     .build()?;
/// # Ok(()) }
/// ```
pub struct McpToolset {
    shared: Arc<Shared>,
    /// Stops the supervisor (and so the connection and child process) when the
    /// toolset is dropped.
    _stop: DropGuard,
}

struct Shared {
    name: String,
    transport: McpTransport,
    /// Only these server tools are offered (by their names on the server).
    filter: Option<HashSet<String>>,
    /// Put before every tool's name, with `_`, so two servers' tools cannot clash.
    prefix: Option<String>,
    call_timeout: Duration,
    connect_timeout: Duration,
    /// Some: every call carries the tool context in `_meta` and the result's
    /// `_meta` may carry actions (see `remote_context`).
    context: Option<ContextGrant>,
    /// Every tool of the server may run again when a resumed invocation finds its call
    /// unanswered (see [`Tool::safe_to_repeat`]).
    safe_to_repeat: bool,
    /// What a result too large for the event becomes; also how far a message is read.
    large_reply: LargeReply,
    /// ADK's `use_mcp_resources`: the toolset also offers `load_mcp_resource`.
    resources: bool,
    /// Declared and answered as ADK's `McpTool` (see [`McpToolset::with_adk_forms`]).
    adk_forms: bool,
    connection: watch::Sender<Connection>,
    /// The tools last listed, offered while the server is away; None until the
    /// first listing succeeds.
    tools: Mutex<Option<Vec<Arc<dyn Tool>>>>,
    /// Set by the server's `tools/list_changed`: list again before the next use.
    tools_changed: Arc<AtomicBool>,
    /// How many messages of a stdio server were longer than a tool reply may be (dropped
    /// unread): a call that times out after one says so, naming the limit.
    oversized: Arc<AtomicU64>,
    supervisor: Once,
    /// A call (or a step listing tools) needs the server while it is down: the
    /// supervisor cuts its backoff delay short and reconnects now, as ADK's MCP
    /// session manager reconnects when the next call needs the session.
    wanted: tokio::sync::Notify,
    stop: CancellationToken,
}

#[derive(Clone)]
enum Connection {
    /// No attempt has finished yet.
    Starting,
    Up {
        peer: Peer<RoleClient>,
        /// Cancelled by a call that found the transport broken (an HTTP server
        /// that went away does not end the session by itself): the supervisor
        /// then drops the connection and opens a new one.
        broken: CancellationToken,
    },
    /// Why the last attempt failed or the connection closed.
    Down(String),
}

impl Connection {
    /// The peer to call and its broken-token, while it is up and no call found it broken.
    fn live(&self) -> Option<(&Peer<RoleClient>, &CancellationToken)> {
        match self {
            Connection::Up { peer, broken } if !broken.is_cancelled() => Some((peer, broken)),
            _ => None,
        }
    }
}

impl McpToolset {
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

    /// A server the runner starts as a child process. It inherits only `HOME`,
    /// `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, `LANG` and `TMPDIR` from the
    /// runner, plus what [`McpToolset::with_env`] adds.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self::new(
            name.into(),
            McpTransport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
                working_dir: None,
            },
        )
    }

    /// A server reached over MCP's streamable HTTP transport. Fails with
    /// `Config` for a URL that is not http(s).
    pub fn http(name: impl Into<String>, url: &str) -> Result<Self> {
        let name = name.into();
        reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| AdkError::Config(format!("MCP toolset {name}: {url:?} is not an http(s) URL")))?;
        Ok(Self::new(
            name,
            McpTransport::Http {
                url: url.to_string(),
                headers: Vec::new(),
                bearer_token: None,
            },
        ))
    }

    fn new(name: String, transport: McpTransport) -> Self {
        let stop = CancellationToken::new();
        McpToolset {
            shared: Arc::new(Shared {
                name,
                transport,
                filter: None,
                prefix: None,
                call_timeout: Self::DEFAULT_CALL_TIMEOUT,
                connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
                context: None,
                safe_to_repeat: false,
                large_reply: LargeReply::default(),
                resources: false,
                adk_forms: false,
                connection: watch::Sender::new(Connection::Starting),
                tools: Mutex::new(None),
                tools_changed: Arc::new(AtomicBool::new(false)),
                oversized: Arc::new(AtomicU64::new(0)),
                supervisor: Once::new(),
                wanted: tokio::sync::Notify::new(),
                stop: stop.clone(),
            }),
            _stop: stop.drop_guard(),
        }
    }

    /// Settings are made before first use, while the toolset is not shared yet.
    fn configure(mut self, change: impl FnOnce(&mut Shared)) -> Self {
        let shared = Arc::get_mut(&mut self.shared).expect("an McpToolset is configured before it is shared");
        change(shared);
        self
    }

    /// stdio: the command's arguments.
    pub fn with_args<S: Into<String>>(self, args: impl IntoIterator<Item = S>) -> Self {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        self.configure(|shared| {
            if let McpTransport::Stdio { args: current, .. } = &mut shared.transport {
                current.extend(args);
            }
        })
    }

    /// stdio: an environment variable of the child process.
    pub fn with_env(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        self.configure(|shared| {
            if let McpTransport::Stdio { env, .. } = &mut shared.transport {
                env.insert(name, value);
            }
        })
    }

    /// stdio: the child's working directory (the runner's by default).
    pub fn with_working_dir(self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.configure(|shared| {
            if let McpTransport::Stdio { working_dir, .. } = &mut shared.transport {
                *working_dir = Some(dir);
            }
        })
    }

    /// http: a header sent with every request (e.g. an API key).
    pub fn with_header(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let header = (name.into(), value.into());
        self.configure(|shared| {
            if let McpTransport::Http { headers, .. } = &mut shared.transport {
                headers.push(header);
            }
        })
    }

    /// http: sent as `Authorization: Bearer <token>`.
    pub fn with_bearer_token(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.configure(|shared| {
            if let McpTransport::Http { bearer_token, .. } = &mut shared.transport {
                *bearer_token = Some(token);
            }
        })
    }

    /// Offers only these tools of the server (names as the server gives them).
    pub fn with_tool_filter<S: Into<String>>(self, names: impl IntoIterator<Item = S>) -> Self {
        let names = names.into_iter().map(Into::into).collect();
        self.configure(|shared| shared.filter = Some(names))
    }

    /// The model sees the server's tool `echo` as `<prefix>_echo`.
    pub fn with_prefix(self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.configure(|shared| shared.prefix = Some(prefix))
    }

    /// How long one tool call may take; then it is cancelled on the server too.
    pub fn with_call_timeout(self, timeout: Duration) -> Self {
        self.configure(|shared| shared.call_timeout = timeout)
    }

    /// Sends every call the tool context under `_meta["adk-grpc/context"]` and
    /// applies the actions a result carries under `_meta["adk-grpc/actions"]`.
    pub fn with_context(self, grant: ContextGrant) -> Self {
        self.configure(|shared| shared.context = Some(grant))
    }

    /// Declares every tool of the server (after the filter) safe to run again when a
    /// resumed invocation finds a call of it stored without its response: the server's
    /// tools are idempotent, or a repeat does no harm. Off by default: such a call is
    /// answered as interrupted instead.
    pub fn with_safe_to_repeat(self, safe: bool) -> Self {
        self.configure(|shared| shared.safe_to_repeat = safe)
    }

    /// What a tool result longer than `--max-tool-reply-bytes` becomes: an error the
    /// model reads (the default), or an artifact the model gets a reference to; with
    /// the latter, the server's messages are read up to the artifact limit.
    pub fn with_large_reply(self, large_reply: LargeReply) -> Self {
        self.configure(|shared| shared.large_reply = large_reply)
    }

    /// ADK's `use_mcp_resources`: also offers the tool `load_mcp_resource` (with the
    /// prefix, if any). Each model request of the agent then lists the server's
    /// resources (`resources/list`) in its system instruction; after the model called
    /// the tool, the next request carries the named resources' contents
    /// (`resources/read`: text as text parts, blobs as inline data) after the call's
    /// response. The contents are put in that one request only, as ADK does, never in
    /// the session: the stored response names the resources, and the model calls
    /// again to see them again. A server that does not declare the resources
    /// capability gets no such tool (a warning is logged).
    pub fn with_resources(self, on: bool) -> Self {
        self.configure(|shared| shared.resources = on)
    }

    /// Declares the tools and answers their calls as ADK's `McpTool` does, for an ADK
    /// agent-config directory's `McpToolset`: the server's descriptions (the tool's and
    /// its parameters') fenced as untrusted data, with ADK's paragraph saying so in the
    /// instruction, and a call's response MCP's `CallToolResult` as the server sent it
    /// (`content`, `structuredContent`, `isError`; media stays in `content`, and a result
    /// with `isError` is the model's to read, not a tool error).
    pub fn with_adk_forms(self, on: bool) -> Self {
        self.configure(|shared| shared.adk_forms = on)
    }

    /// How long starting the server and the MCP handshake may take.
    pub fn with_connect_timeout(self, timeout: Duration) -> Self {
        self.configure(|shared| shared.connect_timeout = timeout)
    }

    /// The transport, as the toolset was configured.
    pub fn transport(&self) -> &McpTransport {
        &self.shared.transport
    }

    /// Where the connection stands and the tools as last listed, without
    /// connecting (what `GetApp` shows).
    pub fn status(&self) -> McpToolsetStatus {
        let shared = &self.shared;
        let connection = shared.connection.borrow().clone();
        let (state, error) = match connection {
            Connection::Starting if !shared.supervisor.is_completed() => (McpConnectionState::NotStarted, None),
            Connection::Starting => (McpConnectionState::Connecting, None),
            Connection::Up { .. } => (McpConnectionState::Connected, None),
            Connection::Down(reason) => (McpConnectionState::Failing, Some(shared.unavailable(&reason))),
        };
        McpToolsetStatus {
            state,
            error,
            tools: sync::lock(&shared.tools).clone(),
        }
    }
}

/// What an [`McpToolset`] knows of its server right now.
#[derive(Clone)]
pub struct McpToolsetStatus {
    pub state: McpConnectionState,
    /// Why the toolset is not connected (state `Failing`), naming the toolset,
    /// its server and the cause.
    pub error: Option<String>,
    /// The tools as last listed (filter and prefix applied); None until the
    /// server's tools were listed once.
    pub tools: Option<Vec<Arc<dyn Tool>>>,
}

/// The connection of an [`McpToolset`] to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpConnectionState {
    /// Never used: nothing has tried to connect.
    NotStarted,
    /// The first attempt is under way.
    Connecting,
    Connected,
    /// The last attempt failed or the connection closed; the supervisor tries
    /// again with backoff.
    Failing,
}

#[async_trait]
impl Toolset for McpToolset {
    fn name(&self) -> &str {
        &self.shared.name
    }

    /// The server's tools. When the server cannot be reached the last list is
    /// offered and the calls say what is wrong; before any list is known, fails
    /// with `Unavailable` naming the toolset, its server and the cause.
    async fn tools(&self, _ctx: Arc<dyn ReadonlyContext>) -> Result<Vec<Arc<dyn Tool>>> {
        let shared = &self.shared;
        shared
            .supervisor
            .call_once(|| drop(tokio::spawn(supervise(shared.clone()))));
        let mut connection = shared.connection.subscribe();
        // The first use waits for the first attempt (bounded by its own timeout).
        let first_attempt = connection.wait_for(|c| !matches!(c, Connection::Starting));
        let _ = tokio::time::timeout(shared.connect_timeout + Duration::from_secs(1), first_attempt).await;
        let current = connection.borrow().clone();
        if matches!(current, Connection::Down(_)) {
            // The model may call one of the last listed tools: reconnect while it thinks.
            shared.wanted.notify_one();
        }
        let mut list_failure = None;
        if let Connection::Up { peer, .. } = &current
            && shared.tools_changed.swap(false, Ordering::SeqCst)
            && let Err(e) = shared.list_tools(peer).await
        {
            shared.tools_changed.store(true, Ordering::SeqCst);
            tracing::warn!(toolset = %shared.name, error = %e, "MCP server: listing its tools failed; offering the previous list");
            list_failure = Some(e);
        }
        if let Some(tools) = sync::lock(&shared.tools).clone() {
            return Ok(tools);
        }
        let cause = match (current, list_failure) {
            (_, Some(e)) => format!("it connected, but listing its tools failed: {e}"),
            (Connection::Down(reason), None) => reason,
            (Connection::Starting, None) => format!(
                "it has not answered yet (connecting, {:?} allowed)",
                shared.connect_timeout
            ),
            (Connection::Up { .. }, None) => "its tools are not listed yet".to_string(),
        };
        Err(AdkError::Unavailable(shared.unavailable(&cause)))
    }
}

impl Shared {
    /// The connection to call on, waiting until `deadline` when the server is down or
    /// still starting (the supervisor is woken to reconnect at once); the reason it is
    /// down when it is not back by then.
    async fn connected(
        &self,
        deadline: tokio::time::Instant,
    ) -> std::result::Result<(Peer<RoleClient>, CancellationToken), String> {
        let mut connection = self.connection.subscribe();
        if connection.borrow().live().is_none() {
            self.wanted.notify_one();
            let _ = tokio::time::timeout_at(deadline, connection.wait_for(|c| c.live().is_some())).await;
        }
        let current = connection.borrow();
        if let Some((peer, broken)) = current.live() {
            return Ok((peer.clone(), broken.clone()));
        }
        match &*current {
            Connection::Up { .. } => Err("the connection broke and the runner is reconnecting".to_string()),
            Connection::Starting => Err("the MCP server is still starting".to_string()),
            Connection::Down(reason) => Err(reason.clone()),
        }
    }

    /// Why the toolset's tools cannot be used now, for the client: the toolset,
    /// its server and the cause.
    fn unavailable(&self, cause: &str) -> String {
        format!(
            "MCP toolset {} ({}) is not connected: {cause}; the runner retries with backoff",
            self.name,
            self.transport.describe()
        )
    }

    /// Opens the connection and does the MCP handshake. For stdio, also what the
    /// child writes to stderr (passed on to the runner's), whose last lines say
    /// why it failed or exited.
    async fn connect(
        &self,
    ) -> std::result::Result<(RunningService<RoleClient, Notifications>, Option<StderrTail>), String> {
        let handler = Notifications {
            tools_changed: self.tools_changed.clone(),
        };
        match &self.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                working_dir,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).env_clear();
                for name in INHERITED_ENV {
                    if let Some(value) = std::env::var_os(name) {
                        cmd.env(name, value);
                    }
                }
                cmd.envs(env);
                if let Some(dir) = working_dir {
                    cmd.current_dir(dir);
                }
                let limit = self.large_reply.read_limit();
                let (child, stderr) = StdioServer::spawn(cmd, limit, self.oversized.clone())
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                let stderr = stderr.map(StderrTail::follow);
                match handler.serve(child).await {
                    Ok(service) => Ok((service, stderr)),
                    Err(e) => {
                        let last_words = match stderr {
                            Some(stderr) => stderr.last_words().await,
                            None => String::new(),
                        };
                        Err(format!("the MCP handshake failed: {}{last_words}", error_chain(&e)))
                    }
                }
            }
            McpTransport::Http {
                url,
                headers,
                bearer_token,
            } => {
                // reqwest is built without a default crypto provider; use ring, as the
                // rest of the suite does (a no-op when one is installed already).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let client = reqwest::Client::builder()
                    .build()
                    .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let bad = || format!("invalid header {name}");
                    let mut value = HeaderValue::from_str(value).map_err(|_| bad())?;
                    value.set_sensitive(true);
                    custom.insert(HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?, value);
                }
                // A reply (a JSON body, or one event of a streamed one) is read up to the
                // server's limit of a tool reply (or of a reply saved as an artifact) and no further.
                let limit = self.large_reply.read_limit();
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .reinit_on_expired_session(true)
                    .max_sse_event_size(limit);
                config.max_json_response_size = limit;
                if let Some(token) = bearer_token {
                    config = config.auth_header(token.clone());
                }
                let transport = StreamableHttpClientTransport::with_client(client, config);
                match handler.serve(transport).await {
                    Ok(service) => Ok((service, None)),
                    Err(e) => Err(format!("the MCP handshake failed: {}", error_chain(&e))),
                }
            }
        }
    }

    /// Lists the server's tools and keeps those the filter lets through, renamed
    /// with the prefix.
    async fn list_tools(self: &Arc<Self>, peer: &Peer<RoleClient>) -> std::result::Result<(), String> {
        let listed = tokio::time::timeout(self.connect_timeout, peer.list_all_tools())
            .await
            .map_err(|_| format!("tools/list timed out after {:?}", self.connect_timeout))?
            .map_err(|e| e.to_string())?;
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for listed in listed {
            let remote = listed.name.to_string();
            if self.filter.as_ref().is_some_and(|allowed| !allowed.contains(&remote)) {
                continue;
            }
            let name = match &self.prefix {
                Some(prefix) => format!("{prefix}_{remote}"),
                None => remote.clone(),
            };
            if !crate::rules::is_tool_name(&name) {
                tracing::warn!(toolset = %self.name, tool = %name, "MCP tool left out: a model can only call 1-64 characters of [A-Za-z0-9_-]");
                continue;
            }
            let schema = Value::Object((*listed.input_schema).clone());
            let validator = match jsonschema::validator_for(&schema) {
                Ok(validator) => Some(Arc::new(validator)),
                Err(e) => {
                    tracing::warn!(toolset = %self.name, tool = %name, error = %e, "MCP tool's input schema cannot be compiled; its arguments go unchecked");
                    None
                }
            };
            let description = listed.description.map(|d| d.to_string()).unwrap_or_default();
            let (description, schema, result_schema) = if self.adk_forms {
                // ADK's McpTool declares the server's output schema as the result's
                // (`response_json_schema`), fenced as its input schema is. The runner's own
                // form does not: its response is not the structured content alone.
                let result_schema = listed
                    .output_schema
                    .map(|schema| untrusted::fence_schema(&Value::Object((*schema).clone())));
                (
                    untrusted::fence_description(&description),
                    untrusted::fence_schema(&schema),
                    result_schema,
                )
            } else {
                (description, schema, None)
            };
            tools.push(Arc::new(McpTool {
                shared: self.clone(),
                name,
                remote,
                description,
                schema,
                result_schema,
                validator,
            }));
        }
        // By name, as ADK's McpToolset sorts them: a server's listing order is not
        // contractual, and a request that changes with it defeats the provider's cache.
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        if self.resources {
            let declared = peer
                .peer_info()
                .is_some_and(|info| info.capabilities.resources.is_some());
            if declared {
                let name = match &self.prefix {
                    Some(prefix) => format!("{prefix}_{LOAD_MCP_RESOURCE}"),
                    None => LOAD_MCP_RESOURCE.to_string(),
                };
                tools.push(Arc::new(LoadMcpResource {
                    shared: self.clone(),
                    name,
                }));
            } else {
                tracing::warn!(toolset = %self.name, "use_mcp_resources: the MCP server declares no resources capability; {LOAD_MCP_RESOURCE} is not offered");
            }
        }
        tracing::info!(toolset = %self.name, tools = tools.len(), "MCP server's tools listed");
        *sync::lock(&self.tools) = Some(tools);
        Ok(())
    }
}

/// Keeps the connection open until the toolset is dropped: connects, lists the
/// tools, waits for the connection to close, waits a backoff delay, again.
async fn supervise(shared: Arc<Shared>) {
    let backoff = || -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(30))
            .with_jitter()
            .without_max_times()
            .build()
    };
    let mut delays = backoff();
    let stop = shared.stop.clone();
    loop {
        let attempt = tokio::select! {
            attempt = tokio::time::timeout(shared.connect_timeout, shared.connect()) => attempt,
            () = stop.cancelled() => return,
        };
        match attempt {
            Ok(Ok((service, stderr))) => {
                adk_grpc_telemetry::metrics::mcp_connection_attempt(&shared.name, "OK");
                let connected = Instant::now();
                let peer = service.peer().clone();
                shared.tools_changed.store(false, Ordering::SeqCst);
                if let Err(e) = shared.list_tools(&peer).await {
                    // Connected all the same: the list is read again on the next use.
                    shared.tools_changed.store(true, Ordering::SeqCst);
                    tracing::warn!(toolset = %shared.name, error = %e, "MCP server connected but listing its tools failed");
                }
                tracing::info!(toolset = %shared.name, server = %shared.transport.describe(), "MCP server connected");
                let broken = CancellationToken::new();
                shared.connection.send_replace(Connection::Up {
                    peer,
                    broken: broken.clone(),
                });
                // Dropping the service (a branch other than `waiting` wins) closes it.
                let reason = tokio::select! {
                    reason = service.waiting() => match reason {
                        Ok(reason) => format!("{reason:?}"),
                        Err(e) => e.to_string(),
                    },
                    () = broken.cancelled() => "a call found the transport broken".to_string(),
                    () = stop.cancelled() => return,
                };
                let last_words = match stderr {
                    Some(stderr) => stderr.last_words().await,
                    None => String::new(),
                };
                tracing::warn!(toolset = %shared.name, reason = %reason, "MCP server connection closed; reconnecting");
                adk_grpc_telemetry::metrics::mcp_disconnected(&shared.name);
                shared
                    .connection
                    .send_replace(Connection::Down(format!("the connection closed: {reason}{last_words}")));
                if connected.elapsed() >= HEALTHY_CONNECTION {
                    delays = backoff();
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(toolset = %shared.name, server = %shared.transport.describe(), error = %e, "MCP server: cannot connect");
                adk_grpc_telemetry::metrics::mcp_connection_attempt(&shared.name, "UNAVAILABLE");
                shared.connection.send_replace(Connection::Down(e));
            }
            Err(_) => {
                let reason = format!("connecting timed out after {:?}", shared.connect_timeout);
                tracing::warn!(toolset = %shared.name, server = %shared.transport.describe(), "MCP server: {reason}");
                adk_grpc_telemetry::metrics::mcp_connection_attempt(&shared.name, "DEADLINE_EXCEEDED");
                shared.connection.send_replace(Connection::Down(reason));
            }
        }
        let delay = delays.next().unwrap_or(Duration::from_secs(30));
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shared.wanted.notified() => {}
            () = stop.cancelled() => return,
        }
    }
}

/// The last lines a stdio server wrote to stderr, each also passed on to the
/// runner's stderr as before (servers log there).
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl StderrTail {
    fn follow(stderr: tokio::process::ChildStderr) -> StderrTail {
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let kept = lines.clone();
        let reader = tokio::spawn(async move {
            let mut stderr = BufReader::new(stderr);
            let mut line = Vec::new();
            // Read a line at a time, a long one in pieces: a server writing a line without
            // end must not grow the runner's memory.
            while matches!((&mut stderr).take(STDERR_READ_BYTES).read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
                // As the runner's own log lines are written: a short blocking write.
                let _ = std::io::stderr().lock().write_all(&line);
                let text: String = String::from_utf8_lossy(&line)
                    .trim_end()
                    .chars()
                    .take(STDERR_TAIL_LINE_CHARS)
                    .collect();
                if !text.is_empty() {
                    let mut kept = sync::lock(&kept);
                    if kept.len() == STDERR_TAIL_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(text);
                }
                line.clear();
            }
        });
        StderrTail { lines, reader }
    }

    /// `; its stderr ended with: …` (or that it wrote nothing), once the server
    /// closed its stderr or after a short wait: a dying process's last lines are
    /// often still in the pipe when the handshake fails.
    async fn last_words(mut self) -> String {
        if tokio::time::timeout(STDERR_DRAIN, &mut self.reader).await.is_err() {
            self.reader.abort();
        }
        let lines = sync::lock(&self.lines);
        if lines.is_empty() {
            "; it wrote nothing to stderr".to_string()
        } else {
            format!("; its stderr ended with: {}", Vec::from(lines.clone()).join(" | "))
        }
    }
}

/// An error with its causes (`a: b: c`), each said once: rmcp's and reqwest's
/// messages leave the cause that matters ("Connection refused") to their sources.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    // The handshake's transport error keeps its cause in fields, not as its
    // source: what was being done, then the HTTP client's error with its causes.
    if let Some(ClientInitializeError::TransportError { error, context }) = error.downcast_ref() {
        let cause: &(dyn std::error::Error + 'static) =
            match error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(e)) => e,
                _ => error.error.as_ref(),
            };
        return format!("{context}: {}", error_chain(cause));
    }
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}

/// What the runner does with the server's notifications: a changed tool list is
/// read again before its next use.
struct Notifications {
    tools_changed: Arc<AtomicBool>,
}

impl rmcp::ClientHandler for Notifications {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

/// The `_meta` key of a call's tool context, and of a result's actions: a
/// documented convention any MCP server can follow (`docs/tools.md`, "The tool context of HTTP and MCP tools").
pub const CONTEXT_META_KEY: &str = "adk-grpc/context";
pub const ACTIONS_META_KEY: &str = "adk-grpc/actions";

/// One tool of an MCP server.
struct McpTool {
    shared: Arc<Shared>,
    /// As the model calls it (with the prefix).
    name: String,
    /// As the server knows it.
    remote: String,
    /// As the model reads it (fenced for ADK's forms).
    description: String,
    /// As the model reads it (fenced for ADK's forms); the validator has the server's.
    schema: Value,
    /// The server's output schema as the model reads it (ADK's forms only, fenced).
    result_schema: Option<Value>,
    validator: Option<Arc<jsonschema::Validator>>,
}

impl McpTool {
    fn failure(&self, what: impl std::fmt::Display) -> AdkError {
        AdkError::Tool(format!("MCP tool {} ({}): {what}", self.name, self.shared.name))
    }

    /// The arguments as an object that fits the tool's schema, or the first reasons it does not.
    fn checked_arguments(&self, args: Value) -> Result<Map<String, Value>> {
        let args = match args {
            Value::Null => Value::Object(Map::new()),
            other => other,
        };
        if let Some(validator) = &self.validator {
            let problems = crate::json_schema::problems(validator, &args);
            if !problems.is_empty() {
                return Err(self.failure(format!(
                    "the arguments do not fit the tool's schema: {}",
                    problems.join("; ")
                )));
            }
        }
        match args {
            Value::Object(map) => Ok(map),
            other => Err(self.failure(format!("the arguments must be a JSON object, not {other}"))),
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters_schema(&self) -> Option<Value> {
        Some(self.schema.clone())
    }
    fn response_schema(&self) -> Option<Value> {
        self.result_schema.clone()
    }
    fn safe_to_repeat(&self) -> bool {
        self.shared.safe_to_repeat
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        Ok(self.execute_with_parts(ctx, args).await?.response)
    }

    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        if self.shared.adk_forms {
            untrusted::add_preamble(request);
        }
        Ok(())
    }

    /// Dropping this future (the invocation was cancelled) or its timeout drops
    /// the request, and rmcp then sends the server `notifications/cancelled`.
    async fn execute_with_parts(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<ToolOutput> {
        let arguments = self.checked_arguments(args)?;
        // One budget for waiting for the connection and for the call itself.
        let deadline = tokio::time::Instant::now() + self.shared.call_timeout;
        let mut request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        if let Some(grant) = &self.shared.context {
            let mut meta = Map::new();
            meta.insert(CONTEXT_META_KEY.into(), grant.context_json(ctx.as_ref()));
            request.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let oversized_before = self.shared.oversized.load(Ordering::Relaxed);
        let timed_out = || {
            if self.shared.oversized.load(Ordering::Relaxed) > oversized_before {
                return self.failure(format!(
                    "{}: the call timed out after {:?} (cancelled on the server)",
                    self.shared.large_reply.too_large("a message the server sent"),
                    self.shared.call_timeout
                ));
            }
            self.failure(format!(
                "timed out after {:?} (cancelled on the server)",
                self.shared.call_timeout
            ))
        };
        let result = loop {
            let (peer, broken) = self.shared.connected(deadline).await.map_err(|reason| {
                self.failure(format!(
                    "the MCP server is not connected ({reason}); it did not come back within the call's {:?}",
                    self.shared.call_timeout
                ))
            })?;
            let called = tokio::time::timeout_at(deadline, peer.call_tool(request.clone()))
                .await
                .map_err(|_| timed_out())?;
            match called {
                Ok(result) => break result,
                // The request never left: the transport broke before the supervisor saw it.
                // Once it reconnects the call is made, within the same deadline.
                Err(ServiceError::TransportSend(_)) => broken.cancel(),
                Err(e) => {
                    if matches!(e, ServiceError::TransportClosed) {
                        broken.cancel();
                    }
                    return Err(self.failure(e));
                }
            }
        };
        let result = serde_json::to_value(&result).map_err(|e| self.failure(e))?;
        let output = if self.shared.adk_forms {
            ToolOutput::new(adk_call_tool_result(&result))
        } else {
            tool_output(&result)
        };
        if result["isError"].as_bool() == Some(true) && !self.shared.adk_forms {
            let message = output.response["text"]
                .as_str()
                .unwrap_or("the tool reported an error")
                .to_string();
            return Err(self.failure(message));
        }
        let output = self.shared.large_reply.fit(&self.name, ctx.as_ref(), output).await?;
        if self.shared.context.is_some() {
            let actions =
                ToolActions::from_json(result["_meta"][ACTIONS_META_KEY].clone()).map_err(|e| self.failure(e))?;
            actions.apply(ctx.as_ref()).await.map_err(|e| self.failure(e))?;
        }
        Ok(output)
    }
}

/// ADK's name for the tool that shows the model an MCP server's resources.
const LOAD_MCP_RESOURCE: &str = "load_mcp_resource";

/// ADK's `LoadMcpResourceTool`: the model names resources; their contents reach the
/// model in its next request only (see [`McpToolset::with_resources`]).
struct LoadMcpResource {
    shared: Arc<Shared>,
    name: String,
}

impl LoadMcpResource {
    /// The connection as it is: building a request does not wait for a server that is
    /// down (it only wakes the supervisor, so the next request finds it back).
    fn peer(&self) -> Option<Peer<RoleClient>> {
        let peer = self.shared.connection.borrow().live().map(|(peer, _)| peer.clone());
        if peer.is_none() {
            self.shared.wanted.notify_one();
        }
        peer
    }

    /// The server's resources, name -> URI, in the server's order.
    async fn list(&self, peer: &Peer<RoleClient>) -> std::result::Result<Vec<(String, String)>, String> {
        let listed = tokio::time::timeout(self.shared.call_timeout, peer.list_all_resources())
            .await
            .map_err(|_| format!("resources/list timed out after {:?}", self.shared.call_timeout))?
            .map_err(|e| e.to_string())?;
        Ok(listed.into_iter().map(|r| (r.name, r.uri)).collect())
    }

    /// One resource's contents as parts: text as text, blobs as inline data.
    async fn read(&self, peer: &Peer<RoleClient>, name: &str, uri: &str) -> std::result::Result<Vec<Part>, String> {
        let read = tokio::time::timeout(
            self.shared.call_timeout,
            peer.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .map_err(|_| format!("resources/read timed out after {:?}", self.shared.call_timeout))?
        .map_err(|e| e.to_string())?;
        Ok(read
            .contents
            .into_iter()
            .map(|content| match content {
                ResourceContents::TextResourceContents { text, .. } => Part::text_part(text),
                ResourceContents::BlobResourceContents { mime_type, blob, .. } => match BASE64.decode(&blob) {
                    Ok(data) => Part::from(PartKind::InlineData {
                        mime_type: mime_type.unwrap_or_else(|| "application/octet-stream".to_string()),
                        data,
                    }),
                    Err(_) => Part::text_part(format!("[Binary content for {name} could not be decoded]")),
                },
                _ => Part::text_part(format!("[Unknown content type for {name}]")),
            })
            .collect())
    }
}

#[async_trait]
impl Tool for LoadMcpResource {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        // ADK's LoadMcpResourceTool's description.
        "Loads resources from the MCP server.\n\nNOTE: Call when you need access to resources."
    }
    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {"resource_names": {"type": "array", "items": {"type": "string"}}},
        }))
    }
    /// Reads nothing: the contents are read when the next request is built.
    fn safe_to_repeat(&self) -> bool {
        true
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let names = match &args["resource_names"] {
            Value::Null => Vec::new(),
            Value::Array(names) if names.iter().all(Value::is_string) => names.clone(),
            other => {
                return Err(AdkError::Tool(format!(
                    "{}: resource_names must be a list of resource names, not {other}",
                    self.name
                )));
            }
        };
        Ok(json!({
            "resource_names": names,
            // ADK's words (its tool's name: see process_llm_request).
            "status": format!(
                "resource contents temporarily inserted and removed. to access these resources, call {} tool again.",
                self.name
            ),
        }))
    }

    /// Lists the resources in the system instruction; after a call of this tool, adds
    /// the named resources' contents to this request (and to no stored event). A
    /// server that cannot answer costs the model the list, never the run.
    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        let Some(peer) = self.peer() else {
            tracing::warn!(toolset = %self.shared.name, "{}: the MCP server is not connected; no resources listed", self.name);
            return Ok(());
        };
        let resources = match self.list(&peer).await {
            Ok(resources) => resources,
            Err(e) => {
                tracing::warn!(toolset = %self.shared.name, error = %e, "{}: listing the MCP resources failed", self.name);
                return Ok(());
            }
        };
        if !resources.is_empty() {
            let names: Vec<&str> = resources.iter().map(|(name, _)| name.as_str()).collect();
            // ADK's paragraph, with the names as Python's json.dumps writes them. ADK writes
            // `load_mcp_resource` even when the toolset's prefix renames the tool; the runner
            // names the tool the model can call (the same text without a prefix).
            let listing = format!(
                "You have a list of MCP resources:\n{}\n\nWhen the user asks questions about any of the resources, \
                 you should call the\n`{name}` function to load the resource. Always call {name}\nbefore answering \
                 questions related to the resources.\n",
                adk_grpc_core::python_json(&json!(names)),
                name = self.name
            );
            // After every tool's own text, as ADK adds its dynamic instructions.
            request.dynamic_instructions.push(listing);
        }
        // As ADK: only right after the model's call, i.e. when the newest turn is its response.
        let requested: Vec<String> = request
            .contents
            .last()
            .into_iter()
            .flat_map(Content::function_responses)
            .filter(|response| response.name == self.name)
            .filter_map(|response| response.response["resource_names"].as_array().cloned())
            .flatten()
            .filter_map(|name| name.as_str().map(str::to_string))
            .collect();
        for name in requested {
            let parts = match resources.iter().find(|(listed, _)| *listed == name) {
                Some((_, uri)) => self.read(&peer, &name, uri).await,
                None => Err("the server has no resource of that name".to_string()),
            };
            match parts {
                Ok(parts) => {
                    for part in parts {
                        request.contents.push(
                            Content::new("user")
                                .with_text(format!("Resource {name} is:"))
                                .with_part(part),
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(toolset = %self.shared.name, resource = %name, error = %e, "{}: reading an MCP resource failed", self.name);
                    // Unlike ADK, which only logs it: the model learns why nothing came.
                    request
                        .contents
                        .push(Content::new("user").with_text(format!("Resource {name} cannot be read: {e}")));
                }
            }
        }
        Ok(())
    }
}

/// A `tools/call` result (as MCP's JSON) as ADK's `McpTool` returns it: the result as
/// the server sent it, its `_meta` keys named `meta` (as ADK dumps MCP's models) but
/// in what the server wrote (`structuredContent`).
fn adk_call_tool_result(result: &Value) -> Value {
    match result {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| match key.as_str() {
                    "_meta" => ("meta".to_string(), value.clone()),
                    "structuredContent" => (key.clone(), value.clone()),
                    _ => (key.clone(), adk_call_tool_result(value)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(adk_call_tool_result).collect()),
        other => other.clone(),
    }
}

/// A `tools/call` result (as MCP's JSON) as the model gets it: the text blocks
/// joined under `text`, `structured_content`, embedded text resources and
/// resource links under `resources`; images, audio and binary resources become
/// inline-data parts after the response, which lists them under `attachments`.
fn tool_output(result: &Value) -> ToolOutput {
    let mut texts = Vec::new();
    let mut resources = Vec::new();
    let mut attachments = Vec::new();
    let mut parts = Vec::new();
    // Media becomes a part of its own; the response says it is attached.
    let mut attach = |mime_type: &str, data: &str, what: Value| match BASE64.decode(data) {
        Ok(bytes) => {
            parts.push(Part::inline_data(mime_type, bytes));
            attachments.push(what);
            None
        }
        Err(e) => Some(format!("[{mime_type} content that is not valid base64: {e}]")),
    };
    for block in result["content"].as_array().into_iter().flatten() {
        let mime_type = block["mimeType"].as_str().unwrap_or("application/octet-stream");
        match block["type"].as_str().unwrap_or_default() {
            "text" => texts.push(block["text"].as_str().unwrap_or_default().to_string()),
            "image" | "audio" => texts.extend(attach(
                mime_type,
                block["data"].as_str().unwrap_or_default(),
                json!({ "mime_type": mime_type }),
            )),
            "resource" => {
                let resource = &block["resource"];
                let uri = resource["uri"].clone();
                let mime_type = resource["mimeType"].as_str().unwrap_or("application/octet-stream");
                match (resource["text"].as_str(), resource["blob"].as_str()) {
                    (Some(text), _) => {
                        resources.push(json!({ "uri": uri, "mime_type": resource["mimeType"], "text": text }))
                    }
                    (None, Some(blob)) => {
                        texts.extend(attach(mime_type, blob, json!({ "mime_type": mime_type, "uri": uri })))
                    }
                    (None, None) => resources.push(json!({ "uri": uri })),
                }
            }
            "resource_link" => resources.push(json!({
                "uri": block["uri"], "name": block["name"], "description": block["description"], "mime_type": block["mimeType"],
            })),
            other => texts.push(format!("[unsupported MCP content of type {other:?}]")),
        }
    }
    let mut response = Map::new();
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    // Servers repeat structured content as JSON text for older clients: say it once.
    let repeats_structured =
        |text: &String| structured.is_some() && serde_json::from_str::<Value>(text).ok().as_ref() == structured;
    texts.retain(|text| !repeats_structured(text));
    if !texts.is_empty() {
        response.insert("text".into(), Value::String(texts.join("\n")));
    }
    if let Some(structured) = structured {
        response.insert("structured_content".into(), structured.clone());
    }
    if !resources.is_empty() {
        response.insert("resources".into(), Value::Array(resources));
    }
    if !attachments.is_empty() {
        response.insert("attachments".into(), Value::Array(attachments));
    }
    ToolOutput {
        response: Value::Object(response),
        parts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toolsets_tools_are_safe_to_repeat_only_when_declared() {
        let tool = |toolset: &McpToolset| McpTool {
            shared: toolset.shared.clone(),
            name: "echo".into(),
            remote: "echo".into(),
            description: String::new(),
            schema: json!({"type": "object"}),
            result_schema: None,
            validator: None,
        };
        assert!(!tool(&McpToolset::stdio("m", "sh")).safe_to_repeat());
        assert!(tool(&McpToolset::stdio("m", "sh").with_safe_to_repeat(true)).safe_to_repeat());
    }

    #[test]
    fn images_become_inline_parts_and_text_is_joined() {
        let result = json!({
            "content": [
                { "type": "text", "text": "one" },
                { "type": "image", "data": BASE64.encode(b"png!"), "mimeType": "image/png" },
                { "type": "text", "text": "two" },
                { "type": "resource", "resource": { "uri": "test://a", "mimeType": "text/plain", "text": "body" } }
            ],
            "structuredContent": { "sum": 3 }
        });
        let output = tool_output(&result);
        assert_eq!(output.parts, vec![Part::inline_data("image/png", b"png!".to_vec())]);
        assert_eq!(output.response["text"], "one\ntwo");
        assert_eq!(output.response["structured_content"], json!({ "sum": 3 }));
        assert_eq!(output.response["resources"][0]["text"], "body");
        assert_eq!(output.response["attachments"], json!([{ "mime_type": "image/png" }]));
    }

    #[test]
    fn structured_content_repeated_as_text_is_said_once() {
        let result = json!({
            "content": [{ "type": "text", "text": "{\"temp_c\": 21}" }],
            "structuredContent": { "temp_c": 21 }
        });
        assert_eq!(
            tool_output(&result).response,
            json!({ "structured_content": { "temp_c": 21 } })
        );
        let plain = json!({ "content": [{ "type": "text", "text": "not JSON" }] });
        assert_eq!(tool_output(&plain).response, json!({ "text": "not JSON" }));
    }
}
