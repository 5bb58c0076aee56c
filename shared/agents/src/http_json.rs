//! JSON over HTTP for the runner's remote parts (HTTP tools, OpenAPI operations, hooks): one endpoint
//! type, so all send the same headers and trace context, time out the same way and
//! describe a failure in the same words.

use crate::large_reply::LargeReply;
use adk_grpc_core::{AdkError, Result, replies};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::time::Duration;

/// How much of an error body a failure message quotes.
const EXCERPT_CHARS: usize = 300;

/// An http(s) URL POSTed JSON, with its headers, timeout and pooled client.
#[derive(Debug, Clone)]
pub(crate) struct JsonEndpoint {
    /// Who owns it, for configuration errors: "HTTP tool weather", "hook guard".
    owner: String,
    url: reqwest::Url,
    headers: HeaderMap,
    timeout: Duration,
    client: reqwest::Client,
    /// How far a reply is read: a tool's that saves large replies as artifacts reads further.
    large_reply: LargeReply,
}

/// Why a POST failed; each carries the whole message (`POST <url> …`).
#[derive(Debug)]
pub(crate) enum PostFailure {
    TimedOut(String),
    /// Refused, broken, or answered with a non-2xx status.
    Unreachable(String),
    NotJson(String),
    /// The reply was longer than `--max-tool-reply-bytes` (or, for a tool saving large
    /// replies as artifacts, `--max-artifact-bytes`); reading stopped there.
    TooLarge(String),
}

impl PostFailure {
    pub(crate) fn message(&self) -> &str {
        match self {
            PostFailure::TimedOut(m)
            | PostFailure::Unreachable(m)
            | PostFailure::NotJson(m)
            | PostFailure::TooLarge(m) => m,
        }
    }
}

impl JsonEndpoint {
    /// `Config` naming `owner` for a URL that is not http(s).
    pub(crate) fn new(owner: impl Into<String>, url: &str, timeout: Duration) -> Result<Self> {
        let owner = owner.into();
        let parsed = reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| AdkError::Config(format!("{owner}: {url:?} is not an http(s) URL")))?;
        // reqwest is built without a default crypto provider; use ring, as the
        // rest of the suite does (a no-op when one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| AdkError::Config(format!("{owner}: cannot build an HTTP client: {e}")))?;
        Ok(JsonEndpoint {
            owner,
            url: parsed,
            headers: HeaderMap::new(),
            timeout,
            client,
            large_reply: LargeReply::default(),
        })
    }

    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The whole exchange must finish within this time.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// What a reply longer than the limit of a tool reply is: an error, read no
    /// further (the default, and a hook's), or read on to be saved as an artifact.
    pub(crate) fn set_large_reply(&mut self, large_reply: LargeReply) {
        self.large_reply = large_reply;
    }

    pub(crate) fn large_reply(&self) -> LargeReply {
        self.large_reply
    }

    /// A header sent with every call (e.g. an API key), kept out of logs.
    pub(crate) fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        let bad = || AdkError::Config(format!("{}: invalid header {name}", self.owner));
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(value).map_err(|_| bad())?;
        value.set_sensitive(true);
        self.headers.insert(header, value);
        Ok(self)
    }

    /// POSTs `body`; the JSON reply, or `null` for an empty one.
    pub(crate) async fn post(&self, body: &Value) -> std::result::Result<Value, PostFailure> {
        let reply = self.post_for_body(body).await?;
        self.json_of(&reply)
    }

    /// POSTs `body`; the reply's body as it came (see [`JsonEndpoint::json_of`]).
    pub(crate) async fn post_for_body(&self, body: &Value) -> std::result::Result<Vec<u8>, PostFailure> {
        self.send(reqwest::Method::POST, self.url.clone(), HeaderMap::new(), Some(body))
            .await
    }

    /// A reply's body as JSON, `null` for an empty one.
    pub(crate) fn json_of(&self, reply: &[u8]) -> std::result::Result<Value, PostFailure> {
        if reply.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(reply).map_err(|e| self.not_json(e))
    }

    /// A reply that is not JSON, as the failure says it.
    pub(crate) fn not_json(&self, error: impl std::fmt::Display) -> PostFailure {
        PostFailure::NotJson(format!(
            "POST {} answered with a body that is not JSON: {error}",
            self.url
        ))
    }

    /// One exchange with the endpoint's client, headers and timeout: `method` at `url`
    /// (the endpoint's own, or one built from it, as an OpenAPI operation's), with
    /// `extra` headers and a JSON body if any; the body of a 2xx reply.
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        extra: HeaderMap,
        body: Option<&Value>,
    ) -> std::result::Result<Vec<u8>, PostFailure> {
        // W3C traceparent/tracestate of the current span (the tool call's or the hook
        // call's), so the endpoint's own tracing continues the client's trace. Nothing
        // while traces are not exported.
        let mut headers = self.headers.clone();
        headers.extend(extra);
        adk_grpc_telemetry::inject_current_context(&mut headers);
        let transport = |e: reqwest::Error, during: &str| {
            if e.is_timeout() {
                PostFailure::TimedOut(format!("{method} {url} timed out after {:?}{during}", self.timeout))
            } else {
                PostFailure::Unreachable(format!("{method} {url} failed{during}: {e}"))
            }
        };
        let mut request = self
            .client
            .request(method.clone(), url.clone())
            .headers(headers)
            .timeout(self.timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| transport(e, ""))?;
        let status = response.status();
        // Only a success is saved as an artifact: an error reply only needs its excerpt.
        let limit = if status.is_success() {
            self.large_reply.read_limit()
        } else {
            replies::max_tool_reply_bytes()
        };
        let too_large = |size: String| {
            PostFailure::TooLarge(
                self.large_reply
                    .too_large(&format!("the reply to {method} {url}{size}")),
            )
        };
        // A declared length over the limit is refused before a byte of it is read.
        if let Some(length) = response
            .content_length()
            .filter(|&length| status.is_success() && length > limit as u64)
        {
            return Err(too_large(format!(" ({length} bytes)")));
        }
        // A declared length is room made once, not a buffer doubled up to a large reply.
        let declared = response.content_length().map_or(0, |length| length as usize);
        let mut reply = Vec::with_capacity(declared.min(limit));
        while let Some(chunk) = response.chunk().await.map_err(|e| transport(e, " reading the reply"))? {
            if reply.len() + chunk.len() > limit {
                // An error reply only needs its excerpt: what was read is enough.
                if status.is_success() {
                    return Err(too_large(String::new()));
                }
                break;
            }
            reply.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let excerpt: String = String::from_utf8_lossy(&reply).chars().take(EXCERPT_CHARS).collect();
            return Err(PostFailure::Unreachable(format!(
                "{method} {url} answered {status}: {excerpt}"
            )));
        }
        Ok(reply)
    }
}
