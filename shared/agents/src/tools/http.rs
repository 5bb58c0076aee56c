//! `HttpTool`: a tool that is an HTTP endpoint.

use super::remote_context::{ContextGrant, ToolActions};
use super::remote_part::RemotePart;
use super::reply_limit::{JSON_MIME, check_json, is_large, save_large_reply};
use crate::http_json::{JsonEndpoint, PostFailure};
use crate::large_reply::LargeReply;
use adk_grpc_core::{AdkError, Result, Tool, ToolContext, ToolOutput};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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
    endpoint: JsonEndpoint,
    parameters: Option<Value>,
    /// Some: the envelope exchange.
    context: Option<ContextGrant>,
    /// Re-run when a resumed invocation finds the call unanswered (see [`Tool::safe_to_repeat`]).
    safe_to_repeat: bool,
    /// See [`Tool::is_long_running`]: a `null` result is no response yet.
    long_running: bool,
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
        let endpoint = JsonEndpoint::new(format!("HTTP tool {name}"), url, Self::DEFAULT_TIMEOUT)?;
        Ok(HttpTool {
            name,
            description: description.into(),
            endpoint,
            parameters: None,
            context: None,
            safe_to_repeat: false,
            long_running: false,
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

    /// Declares the endpoint safe to call again with the same arguments (a read, or a
    /// write keyed by the call id): a resumed invocation re-runs a call its dead runner
    /// left unanswered instead of telling the model it was interrupted.
    pub fn with_safe_to_repeat(mut self, safe: bool) -> Self {
        self.safe_to_repeat = safe;
        self
    }

    /// Marks the tool long-running (ADK's `LongRunningFunctionTool`, served over HTTP):
    /// see [`Tool::is_long_running`].
    pub fn with_long_running(mut self, long_running: bool) -> Self {
        self.long_running = long_running;
        self
    }

    /// What a reply longer than `--max-tool-reply-bytes` becomes: an error the model
    /// reads (the default), or an artifact the model gets a reference to.
    pub fn with_large_reply(mut self, large_reply: LargeReply) -> Self {
        self.endpoint.set_large_reply(large_reply);
        self
    }

    /// The whole exchange must finish within this time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.set_timeout(timeout);
        self
    }

    /// A header sent with every call (e.g. an API key).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        self.endpoint = self.endpoint.with_header(name, value)?;
        Ok(self)
    }

    fn failure(&self, what: impl std::fmt::Display) -> AdkError {
        AdkError::Tool(format!("HTTP tool {}: POST {} {what}", self.name, self.endpoint.url()))
    }

    /// A failed exchange as the tool error the model reads.
    fn failed(&self, failure: PostFailure) -> AdkError {
        AdkError::Tool(format!("HTTP tool {}: {}", self.name, failure.message()))
    }

    /// POSTs `body`; every failure is a tool error the model reads.
    async fn post(&self, body: &Value) -> Result<Value> {
        self.endpoint.post(body).await.map_err(|failure| self.failed(failure))
    }

    /// POSTs the arguments; the JSON reply, or, for a reply too large for the event
    /// (read only with `large_reply: artifact`), the reference to the artifact its
    /// bytes were saved as, exactly as they came.
    async fn post_args(&self, ctx: &dyn ToolContext, args: &Value) -> Result<Value> {
        let body = self.endpoint.post_for_body(args).await.map_err(|f| self.failed(f))?;
        if !is_large(body.len()) {
            return self.endpoint.json_of(&body).map_err(|f| self.failed(f));
        }
        check_json(&body).map_err(|e| self.failed(self.endpoint.not_json(e)))?;
        save_large_reply(&self.name, ctx, body, JSON_MIME).await
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
    fn safe_to_repeat(&self) -> bool {
        self.safe_to_repeat
    }
    fn is_long_running(&self) -> bool {
        self.long_running
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        Ok(self.execute_with_parts(ctx, args).await?.response)
    }

    async fn execute_with_parts(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<ToolOutput> {
        let Some(grant) = &self.context else {
            return Ok(ToolOutput::new(self.post_args(ctx.as_ref(), &args).await?));
        };
        let mut context = grant.context_json(ctx.as_ref());
        // Held until the call is answered: a read after it is refused.
        let _reads = grant.open_reads(ctx.as_ref(), &mut context)?;
        let body = serde_json::json!({ "args": args, "context": context });
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
        let actions = ToolActions::from_json(reply.actions).map_err(|e| self.failure(e))?;
        let output = ToolOutput {
            response: reply.result,
            parts,
        };
        let output = self
            .endpoint
            .large_reply()
            .fit(&self.name, ctx.as_ref(), output)
            .await?;
        // Applied last: a reply that is wrong anywhere changes nothing.
        actions.apply(ctx.as_ref()).await.map_err(|e| self.failure(e))?;
        Ok(output)
    }
}
