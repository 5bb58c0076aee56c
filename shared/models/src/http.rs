//! What both HTTP providers share: the TLS client, authentication, deadlines,
//! the one mapping of HTTP failures to `AdkError`, and the driver that turns
//! an SSE body into an `LlmResponseStream`.

use crate::sse::{EventTooLong, SseEvent, SseParser};
use adk_grpc_core::{AdkError, Exhausted, LlmResponse, LlmResponseStream, Result, replies};
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;
use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, timeout, timeout_at};

/// How long a provider may take when none is configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Error bodies are read up to this size: enough for any provider's error JSON.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How much of a body an error message quotes.
const EXCERPT_CHARS: usize = 300;

/// An API key. Its `Debug` never shows the key, so a model printed with `{:?}`
/// or a traced struct cannot leak it.
#[derive(Clone)]
pub(crate) struct ApiKey {
    secret: String,
    /// The header carrying it, marked sensitive so hyper keeps it out of HPACK tables and logs.
    header: HeaderValue,
}

impl ApiKey {
    /// `scheme` is prepended in the header value ("Bearer " for OpenAI, "" for Gemini).
    pub(crate) fn new(provider: &str, key: impl Into<String>, scheme: &str) -> Result<Self> {
        let secret = key.into();
        let mut header = HeaderValue::from_str(&format!("{scheme}{secret}")).map_err(|_| {
            AdkError::Config(format!(
                "the {provider} API key contains characters not allowed in an HTTP header"
            ))
        })?;
        header.set_sensitive(true);
        Ok(ApiKey { secret, header })
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A provider's HTTP side: one connection pool, the key, the deadline.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    pub(crate) provider: &'static str,
    /// The model asked for, named in the errors that are the deployment's to fix.
    model: String,
    client: reqwest::Client,
    auth: Option<(HeaderName, ApiKey)>,
    pub(crate) timeout: Duration,
}

impl HttpClient {
    pub(crate) fn new(provider: &'static str, model: &str) -> Result<Self> {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .user_agent(concat!("adk-grpc-models/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| AdkError::Config(format!("cannot build the {provider} HTTP client: {}", chain(&e))))?;
        Ok(HttpClient {
            provider,
            model: model.to_string(),
            client,
            auth: None,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    pub(crate) fn set_auth(&mut self, header: HeaderName, key: ApiKey) {
        self.auth = Some((header, key));
    }

    fn request(&self, url: &str, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self.client.post(url).json(body);
        if let Some((name, key)) = &self.auth {
            request = request.header(name.clone(), key.header.clone());
        }
        // W3C traceparent/tracestate of the current span (the runner's model-call
        // span), so the provider, or a tracing gateway in front of it, continues the
        // client's trace. Adds nothing while traces are not exported.
        let mut trace_context = HeaderMap::new();
        adk_grpc_telemetry::inject_current_context(&mut trace_context);
        request.headers(trace_context)
    }

    /// Sends a request whose reply is one JSON document, and returns that document.
    /// The whole exchange (connect, headers, body) must finish within the timeout.
    pub(crate) async fn post_json(&self, url: &str, body: &Value) -> Result<Value> {
        let deadline = Instant::now() + self.timeout;
        let response = self.send(url, body, deadline).await?;
        let limit = replies::max_model_reply_bytes();
        let bytes = match timeout_at(deadline, read_capped(response, limit)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(ReadFailure::Transport(e))) => return Err(self.transport_error(&e)),
            Ok(Err(ReadFailure::TooLarge(size))) => return Err(self.too_large(&size, limit)),
            Err(_) => return Err(self.deadline_error()),
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            AdkError::Model(format!(
                "{} returned a body that is not JSON ({e}): {}",
                self.provider,
                self.excerpt(&bytes)
            ))
        })
    }

    /// Sends a request whose reply is an event stream. The status line and headers
    /// must arrive within the timeout; after that, each chunk must follow the
    /// previous one within it (a long generation may take minutes in total, but a
    /// provider silent for the whole timeout is treated as gone).
    pub(crate) async fn post_sse<D: SseDecoder>(
        &self,
        url: &str,
        body: &Value,
        decoder: D,
    ) -> Result<LlmResponseStream> {
        let response = self.send(url, body, Instant::now() + self.timeout).await?;
        Ok(sse_stream(self.clone(), response, decoder))
    }

    /// Sends the request and checks the status. Everything runs inside this
    /// future: dropping it (the caller gave up) drops the connection with it.
    async fn send(&self, url: &str, body: &Value, deadline: Instant) -> Result<reqwest::Response> {
        tracing::debug!(provider = self.provider, %url, "model request");
        let response = match timeout_at(deadline, self.request(url, body).send()).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(self.transport_error(&e)),
            Err(_) => return Err(self.deadline_error()),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // The error body is only decoration: a provider that will not send it in
        // time still gets its status reported.
        let body = timeout_at(deadline, read_prefix(response, MAX_ERROR_BODY))
            .await
            .unwrap_or_default();
        Err(self.status_error(status, &headers, &body))
    }

    /// The one mapping of an HTTP error status to the error a gRPC client sees.
    pub(crate) fn status_error(&self, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> AdkError {
        let provider = self.provider;
        let code = status.as_u16();
        let detail = self.error_detail(body);
        match status {
            StatusCode::TOO_MANY_REQUESTS => {
                let retry_after = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::trim);
                // Seconds become the RetryInfo delay; an HTTP date is only quoted.
                let seconds = retry_after.and_then(|v| v.parse::<u64>().ok());
                let retry = match (seconds, retry_after) {
                    (Some(secs), _) => format!(" (retry after {secs}s)"),
                    (None, Some(v)) => format!(" (retry after {v})"),
                    (None, None) => String::new(),
                };
                AdkError::ResourceExhausted(
                    Exhausted::RateLimited {
                        retry_after: seconds.map(Duration::from_secs),
                    },
                    format!("{provider} rate limit: {detail}{retry}"),
                )
            }
            // The provider refused the SERVER's API key (or its access to the model): not the
            // gRPC caller's credential, so not UNAUTHENTICATED / PERMISSION_DENIED, which a
            // client would read as its own token being refused. FAILED_PRECONDITION: the
            // deployment must be fixed, retrying unchanged will not help (UNAVAILABLE would
            // invite retries). The provider's own text stays in the server log: it may quote
            // part of the key.
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                let model = &self.model;
                tracing::error!(provider, model, status = code, %detail, "the model provider refused the server's API key");
                AdkError::FailedPrecondition(format!(
                    "model provider {provider} refused this server's credentials for model {model} (HTTP {code}); \
                     the server's operator must fix its API key or access (see the server log)"
                ))
            }
            // A missing model or endpoint is a deployment problem, not the caller's request.
            StatusCode::NOT_FOUND => AdkError::FailedPrecondition(format!(
                "{provider} returned {code} (wrong model or base URL?): {detail}"
            )),
            StatusCode::REQUEST_TIMEOUT => AdkError::DeadlineExceeded(format!("{provider} returned {code}: {detail}")),
            s if s.is_server_error() => AdkError::Unavailable(format!("{provider} returned {code}: {detail}")),
            _ => AdkError::Model(format!("{provider} returned {code}: {detail}")),
        }
    }

    /// The provider's own message when the body is the usual error JSON
    /// (`{"error": {"message": ...}}`, or Ollama's `{"error": "..."}`), else an excerpt.
    fn error_detail(&self, body: &[u8]) -> String {
        if body.is_empty() {
            return "(empty body)".to_string();
        }
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| match &v["error"] {
                Value::String(message) => Some(message.clone()),
                error => error["message"].as_str().map(str::to_string),
            });
        match message {
            Some(message) => self.redact(&truncate(&message, EXCERPT_CHARS)),
            None => self.excerpt(body),
        }
    }

    /// A short, key-free quote of a body for error messages.
    pub(crate) fn excerpt(&self, body: &[u8]) -> String {
        self.redact(&truncate(&String::from_utf8_lossy(body), EXCERPT_CHARS))
    }

    /// Providers mask keys in their messages, but a proxy in between may not:
    /// the key never goes into an error.
    fn redact(&self, text: &str) -> String {
        match &self.auth {
            Some((_, key)) if !key.secret.is_empty() => text.replace(&key.secret, "<redacted>"),
            _ => text.to_string(),
        }
    }

    pub(crate) fn deadline_error(&self) -> AdkError {
        AdkError::DeadlineExceeded(format!(
            "{} did not answer within {}",
            self.provider,
            secs(self.timeout)
        ))
    }

    /// A reply (or one streamed event) over `--max-model-reply-bytes`: the call fails,
    /// naming the model; retrying the same request would most likely fail the same way.
    fn too_large(&self, what: &str, limit: usize) -> AdkError {
        let who = format!("{} (model {}): {what}", self.provider, self.model);
        AdkError::limit(
            "max_model_reply_bytes",
            limit,
            replies::too_large(&who, limit, "--max-model-reply-bytes, ADK_MAX_MODEL_REPLY_BYTES"),
        )
    }

    fn transport_error(&self, e: &reqwest::Error) -> AdkError {
        if e.is_timeout() {
            return self.deadline_error();
        }
        // Connection refused, DNS, TLS, reset: the provider is unreachable right now.
        AdkError::Unavailable(format!("{} request failed: {}", self.provider, chain(e)))
    }
}

/// rustls with `ring` and the operating system's trust store. reqwest's own
/// default would bring aws-lc-rs; handing it a finished config keeps the tree
/// on the workspace's one ring-backed rustls, without touching the process-wide
/// default provider.
fn tls_config() -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
        .map_err(|e| AdkError::Config(format!("cannot load the system's TLS trust store: {e}")))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AdkError::Config(format!("TLS setup failed: {e}")))?
        // `dangerous` is only rustls' name for "custom verifier": this one verifies fully.
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Why a body was not read whole.
enum ReadFailure {
    Transport(reqwest::Error),
    /// Longer than the limit: the reply, with its size when declared.
    TooLarge(String),
}

/// The whole body, when it is at most `limit` bytes; reading stops at the limit.
async fn read_capped(mut response: reqwest::Response, limit: usize) -> std::result::Result<Vec<u8>, ReadFailure> {
    // A declared length over the limit is refused before a byte of it is read.
    if let Some(length) = response.content_length().filter(|&length| length > limit as u64) {
        return Err(ReadFailure::TooLarge(format!("the reply ({length} bytes)")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadFailure::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadFailure::TooLarge("the reply".into()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads at most `cap` bytes of a body, dropping the rest.
async fn read_prefix(mut response: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = cap - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= cap {
            break;
        }
    }
    body
}

/// An error with its causes: reqwest's top-level message alone ("error sending
/// request") does not say what went wrong.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

pub(crate) fn secs(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// What a provider's SSE data turns into.
pub(crate) enum Decoded {
    /// Keep reading; emit these (partial) responses.
    Partials(Vec<LlmResponse>),
    /// The provider said it is done: emit this complete response and stop.
    Final(Box<LlmResponse>),
}

/// A provider's streaming protocol on top of SSE.
pub(crate) trait SseDecoder: Send + 'static {
    /// Handles one event.
    fn event(&mut self, event: &SseEvent) -> Result<Decoded>;
    /// The body ended cleanly: the complete response, or an error when the
    /// provider's own end marker never came (the stream was cut short).
    fn end_of_body(&mut self) -> Result<LlmResponse>;
}

/// State of one streamed reply. The body lives inside the stream and nowhere
/// else (no spawned task), so dropping the stream closes the connection.
struct SseDriver<S, D> {
    http: HttpClient,
    body: Option<Pin<Box<S>>>,
    parser: SseParser,
    decoder: D,
    ready: VecDeque<Result<LlmResponse>>,
}

fn sse_stream<D: SseDecoder>(http: HttpClient, response: reqwest::Response, decoder: D) -> LlmResponseStream {
    let driver = SseDriver {
        http,
        body: Some(Box::pin(response.bytes_stream())),
        parser: SseParser::new(),
        decoder,
        ready: VecDeque::new(),
    };
    Box::pin(futures::stream::unfold(driver, |mut driver| async move {
        let item = driver.next_item().await?;
        Some((item, driver))
    }))
}

impl<S, B, D> SseDriver<S, D>
where
    S: Stream<Item = reqwest::Result<B>> + Send + 'static,
    B: AsRef<[u8]>,
    D: SseDecoder,
{
    async fn next_item(&mut self) -> Option<Result<LlmResponse>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(item);
            }
            let body = self.body.as_mut()?;
            match timeout(self.http.timeout, body.next()).await {
                Err(_) => self.fail(AdkError::DeadlineExceeded(format!(
                    "{} stream stalled: nothing received for {}",
                    self.http.provider,
                    secs(self.http.timeout)
                ))),
                Ok(Some(Err(e))) => self.fail(AdkError::Unavailable(format!(
                    "{} stream was cut before the reply was complete: {}",
                    self.http.provider,
                    chain(&e)
                ))),
                Ok(Some(Ok(chunk))) => match self.parser.feed(chunk.as_ref()) {
                    Ok(events) => self.decode(events),
                    Err(EventTooLong(limit)) => {
                        self.fail(self.http.too_large("one event of the streamed reply", limit))
                    }
                },
                Ok(None) => {
                    let events: Vec<SseEvent> = self.parser.finish().into_iter().collect();
                    self.decode(events);
                    if self.body.take().is_some() {
                        let last = self.decoder.end_of_body();
                        self.ready.push_back(last);
                    }
                }
            }
        }
    }

    fn decode(&mut self, events: Vec<SseEvent>) {
        for event in events {
            match self.decoder.event(&event) {
                Ok(Decoded::Partials(partials)) => self.ready.extend(partials.into_iter().map(Ok)),
                Ok(Decoded::Final(last)) => {
                    self.ready.push_back(Ok(*last));
                    self.body = None; // done: release the connection now
                    return;
                }
                Err(e) => return self.fail(e),
            }
        }
    }

    /// Queues the error as the stream's last item and lets go of the body.
    fn fail(&mut self, error: AdkError) {
        self.ready.push_back(Err(error));
        self.body = None;
    }
}

/// An `f32` setting (temperature, top_p, penalties) as the decimal it was written as:
/// `0.2`, not the nearest double `0.20000000298023224`, as ADK's client sends it.
pub(crate) fn decimal(value: f32) -> serde_json::Value {
    // f32's Display is the shortest text that reads back as the same f32.
    serde_json::json!(value.to_string().parse::<f64>().unwrap_or(f64::from(value)))
}

#[cfg(test)]
mod tests {
    use super::decimal;
    use serde_json::json;

    #[test]
    fn settings_go_out_as_the_decimals_they_were_written_as() {
        assert_eq!(decimal(0.2), json!(0.2));
        assert_eq!(decimal(0.9).to_string(), "0.9");
        assert_eq!(decimal(1.0), json!(1.0));
    }
}
