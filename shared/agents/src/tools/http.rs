//! `HttpTool`: a tool that is an HTTP endpoint.

use super::remote_context::{ContextGrant, RemotePart, ToolActions};
use adk_grpc_core::{AdkError, Result, Tool, ToolContext, ToolOutput};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How much of an error body a failure message quotes.
const EXCERPT_CHARS: usize = 300;

/// A tool executed by POSTing the call's JSON arguments to a URL; the JSON reply
/// is the result. A non-2xx status, a timeout or a reply that is not JSON is a
/// tool error, which the model sees as an `{"error": ...}` response.
///
/// With a [`ContextGrant`] ([`HttpTool::with_context`]) the exchange is an
/// envelope instead: the body is `{"args": …, "context": …}` and the reply
/// `{"result": …, "actions": …, "parts": […]}` (see `remote_context`), so the
/// endpoint reads and writes state, saves artifacts and sets actions as a Rust
/// tool does through its `ToolContext`.
#[derive(Debug, Clone)]
pub struct HttpTool {
    name: String,
    description: String,
    url: reqwest::Url,
    parameters: Option<Value>,
    headers: HeaderMap,
    timeout: Duration,
    client: reqwest::Client,
    /// Some: the envelope exchange.
    context: Option<ContextGrant>,
}

/// The reply of an endpoint that takes the envelope.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeReply {
    #[serde(default)]
    result: Value,
    #[serde(default)]
    actions: Value,
    #[serde(default)]
    parts: Vec<RemotePart>,
}

impl HttpTool {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Fails with `Config` for a URL that is not http(s).
    pub fn new(name: impl Into<String>, description: impl Into<String>, url: &str) -> Result<Self> {
        let name = name.into();
        let parsed = reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| AdkError::Config(format!("HTTP tool {name}: {url:?} is not an http(s) URL")))?;
        // reqwest is built without a default crypto provider; use ring, as the
        // rest of the suite does (a no-op when one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| AdkError::Config(format!("HTTP tool {name}: cannot build an HTTP client: {e}")))?;
        Ok(HttpTool {
            name,
            description: description.into(),
            url: parsed,
            parameters: None,
            headers: HeaderMap::new(),
            timeout: Self::DEFAULT_TIMEOUT,
            client,
            context: None,
        })
    }

    pub fn with_parameters_schema(mut self, schema: Value) -> Self {
        self.parameters = Some(schema);
        self
    }

    /// Exchanges the envelope, granting the endpoint this much of the tool context.
    pub fn with_context(mut self, grant: ContextGrant) -> Self {
        self.context = Some(grant);
        self
    }

    /// The whole exchange must finish within this time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A header sent with every call (e.g. an API key).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        let bad = || AdkError::Config(format!("HTTP tool {}: invalid header {name}", self.name));
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(value).map_err(|_| bad())?;
        value.set_sensitive(true);
        self.headers.insert(header, value);
        Ok(self)
    }

    fn failure(&self, what: impl std::fmt::Display) -> AdkError {
        AdkError::Tool(format!("HTTP tool {}: POST {} {what}", self.name, self.url))
    }

    fn transport_failure(&self, e: &reqwest::Error, during: &str) -> AdkError {
        if e.is_timeout() {
            self.failure(format!("timed out after {:?}{during}", self.timeout))
        } else {
            self.failure(format!("failed{during}: {e}"))
        }
    }
}

#[async_trait]
impl Tool for HttpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters_schema(&self) -> Option<Value> {
        self.parameters.clone()
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        Ok(self.execute_with_parts(ctx, args).await?.response)
    }

    async fn execute_with_parts(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<ToolOutput> {
        let Some(grant) = &self.context else {
            return Ok(ToolOutput::new(self.post(&args).await?));
        };
        let body = serde_json::json!({ "args": args, "context": grant.context_json(ctx.as_ref()) });
        let reply = self.post(&body).await?;
        let reply: EnvelopeReply = match reply {
            Value::Null => EnvelopeReply::default(),
            reply => serde_json::from_value(reply).map_err(|e| {
                self.failure(format!(
                    "answered with a body that is not the tool envelope {{\"result\", \"actions\", \"parts\"}}: {e}"
                ))
            })?,
        };
        let parts = reply
            .parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| part.into_part(&format!("parts[{i}]")))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| self.failure(e))?;
        // Applied last: a reply that is wrong anywhere changes nothing.
        let actions = ToolActions::from_json(reply.actions).map_err(|e| self.failure(e))?;
        actions.apply(ctx.as_ref()).await.map_err(|e| self.failure(e))?;
        Ok(ToolOutput {
            response: reply.result,
            parts,
        })
    }
}

impl HttpTool {
    /// POSTs `body`; the JSON reply, or `null` for an empty one.
    async fn post(&self, body: &Value) -> Result<Value> {
        // W3C traceparent/tracestate of the current span (the runner's tool-call span),
        // so the tool's own tracing continues the client's trace. Nothing while traces
        // are not exported.
        let mut headers = self.headers.clone();
        adk_grpc_telemetry::inject_current_context(&mut headers);
        let response = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| self.transport_failure(&e, ""))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_failure(&e, " reading the reply"))?;
        if !status.is_success() {
            let excerpt: String = String::from_utf8_lossy(&body).chars().take(EXCERPT_CHARS).collect();
            return Err(self.failure(format!("answered {status}: {excerpt}")));
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&body).map_err(|e| self.failure(format!("answered with a body that is not JSON: {e}")))
    }
}
