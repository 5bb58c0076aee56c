//! Fake provider servers over real loopback HTTP, for tests (feature `testing`).
//!
//! A [`FakeServer`] listens on `127.0.0.1:<random port>`, answers each request
//! with the next reply from its script (a JSON body, an SSE stream, an error
//! status, a stall…), records every request it received, and counts the
//! clients that went away before their reply was over — so tests can check
//! what a provider was sent, every failure path, and that a dropped stream
//! really closes its connection. [`openai`] and [`gemini`] build replies in
//! each provider's wire format. A reply may be addressed to an agent
//! ([`FakeServer::push_for`]): it answers that agent's next request, read from
//! the request's identity line, for agents that ask in no set order (the
//! branches of a parallel agent).
//!
//! ```no_run
//! # async fn demo() {
//! use adk_grpc_models::testing::{FakeServer, openai};
//! let server = FakeServer::start().await;
//! server.push(openai::stream_text(&["Hel", "lo"]));
//! // point an OpenAiCompatible at server.url() ...
//! # }
//! ```

use adk_grpc_core::sync;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum FakeReply {
    /// `200 OK` with this JSON body.
    Json(Value),
    /// Any status with a body and extra headers (errors, rate limits).
    Status {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// `200 OK` with `text/event-stream` played step by step.
    Sse(SseScript),
    /// Reads the request and never answers (the connection stays open).
    Stall,
    /// Waits, then answers.
    Delayed(Duration, Box<FakeReply>),
}

impl FakeReply {
    pub fn json(body: Value) -> Self {
        FakeReply::Json(body)
    }

    pub fn status(status: u16, body: impl Into<String>) -> Self {
        FakeReply::Status {
            status,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// Adds a response header (only to a `Status` reply; others are left as they are).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let FakeReply::Status { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// An event stream of these `data:` payloads that then ends cleanly.
    pub fn sse<S: Into<String>>(data: impl IntoIterator<Item = S>) -> Self {
        FakeReply::Sse(SseScript::data(data))
    }

    pub fn delayed(self, delay: Duration) -> Self {
        FakeReply::Delayed(delay, Box::new(self))
    }
}

/// An SSE body: steps, then how it ends.
#[derive(Debug, Clone, Default)]
pub struct SseScript {
    pub steps: Vec<SseStep>,
    pub end: SseEnd,
}

#[derive(Debug, Clone)]
pub enum SseStep {
    /// One event: `data: <payload>\n\n`.
    Data(String),
    /// Bytes sent as they are (to split an event, even a UTF-8 character,
    /// across writes; to send comments…).
    Raw(Vec<u8>),
    /// Waits before the next step.
    Pause(Duration),
}

/// How an SSE body ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SseEnd {
    /// The body ends normally.
    #[default]
    Close,
    /// The connection is aborted mid-body (no terminating chunk): a network cut.
    Cut,
    /// Nothing more is sent and the body stays open until the client leaves.
    Hang,
}

impl SseScript {
    pub fn data<S: Into<String>>(data: impl IntoIterator<Item = S>) -> Self {
        SseScript {
            steps: data.into_iter().map(|d| SseStep::Data(d.into())).collect(),
            end: SseEnd::Close,
        }
    }

    pub fn then(mut self, step: SseStep) -> Self {
        self.steps.push(step);
        self
    }

    pub fn ending(mut self, end: SseEnd) -> Self {
        self.end = end;
        self
    }
}

impl From<SseScript> for FakeReply {
    fn from(script: SseScript) -> Self {
        FakeReply::Sse(script)
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

/// The agent a model request is from, on either wire: the name in ADK's identity line
/// (`Your internal name is "<name>".`), which every LLM agent's system instruction
/// carries (Gemini's `systemInstruction`, an OpenAI-compatible request's system
/// message). `None` for a request without one (an advisor's, a summariser's).
pub fn requesting_agent(body: &Value) -> Option<String> {
    const IDENTITY: &str = "Your internal name is \"";
    let texts = |parts: &Value| -> String {
        match parts {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            _ => String::new(),
        }
    };
    let mut system = texts(&body["systemInstruction"]["parts"]);
    for message in body["messages"].as_array().into_iter().flatten() {
        if message["role"] == "system" {
            system.push_str(&texts(&message["content"]));
        }
    }
    let name = &system[system.find(IDENTITY)? + IDENTITY.len()..];
    Some(name[..name.find('"')?].to_string())
}

/// A queued reply, and the agent it answers (`None`: whichever request comes).
struct Queued {
    agent: Option<String>,
    reply: FakeReply,
}

/// Answers a request no queued reply is left for (see [`FakeServer::answer_with`]).
type Responder = Arc<dyn Fn(&RecordedRequest) -> FakeReply + Send + Sync>;

struct Shared {
    script: Mutex<VecDeque<Queued>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// How many clients left before their reply was complete.
    disconnects: watch::Sender<usize>,
}

/// A scriptable fake provider. Stops when dropped.
pub struct FakeServer {
    url: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeServer {
    /// Starts a server on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound: a test can go no further anyway.
    pub async fn start() -> FakeServer {
        let shared = Arc::new(Shared {
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            disconnects: watch::channel(0).0,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port for the fake provider");
        let addr = listener.local_addr().expect("local address of the fake provider");
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeServer {
            url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Queues the reply to the next request not yet answered.
    pub fn push(&self, reply: impl Into<FakeReply>) -> &Self {
        sync::lock(&self.shared.script).push_back(Queued {
            agent: None,
            reply: reply.into(),
        });
        self
    }

    /// Queues the reply to `agent`'s next request not yet answered ([`requesting_agent`]).
    /// A request takes the first reply queued for its agent, else the first queued for
    /// no agent: so agents running at once (a parallel agent's branches) each get their
    /// own replies whatever order they ask in.
    pub fn push_for(&self, agent: &str, reply: impl Into<FakeReply>) -> &Self {
        sync::lock(&self.shared.script).push_back(Queued {
            agent: Some(agent.to_string()),
            reply: reply.into(),
        });
        self
    }

    /// Answers every request the queue has no reply left for with what `responder`
    /// makes of it: for clients whose requests arrive in no set order (several runs, or
    /// replicas, sharing the server), each answered by what it asks.
    pub fn answer_with(&self, responder: impl Fn(&RecordedRequest) -> FakeReply + Send + Sync + 'static) -> &Self {
        *sync::lock(&self.shared.responder) = Some(Arc::new(responder));
        self
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        sync::lock(&self.shared.requests).clone()
    }

    /// The most recent request.
    ///
    /// # Panics
    /// When none has arrived.
    pub fn last_request(&self) -> RecordedRequest {
        self.requests().pop().expect("the fake provider received no request")
    }

    /// Clients that went away before their reply was complete.
    pub fn disconnects(&self) -> usize {
        *self.shared.disconnects.borrow()
    }

    /// Waits until at least `count` clients went away early; false on timeout.
    pub async fn wait_for_disconnects(&self, count: usize, within: Duration) -> bool {
        let mut watcher = self.shared.disconnects.subscribe();
        tokio::time::timeout(within, watcher.wait_for(|n| *n >= count))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl From<Value> for FakeReply {
    fn from(body: Value) -> Self {
        FakeReply::Json(body)
    }
}

/// Counts a disconnect when dropped before being disarmed.
struct DisconnectGuard {
    shared: Arc<Shared>,
    armed: bool,
}

impl DisconnectGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        DisconnectGuard {
            shared: shared.clone(),
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.armed {
            self.shared.disconnects.send_modify(|n| *n += 1);
        }
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, 64 * 1024 * 1024).await.unwrap_or_default().to_vec();
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let what = format!("{} {}", recorded.method, recorded.path);
    let queued = next_queued(&mut sync::lock(&shared.script), &recorded);
    let responder = sync::lock(&shared.responder).clone();
    let next = queued.or_else(|| responder.map(|respond| respond(&recorded)));
    sync::lock(&shared.requests).push(recorded);
    match next {
        Some(reply) => answer(shared, reply).await,
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("fake provider: no scripted reply left for {what}"),
        )
            .into_response(),
    }
}

/// The queued reply for `request`: the first addressed to its agent, else the first
/// addressed to none.
fn next_queued(script: &mut VecDeque<Queued>, request: &RecordedRequest) -> Option<FakeReply> {
    let addressed = script.iter().any(|queued| queued.agent.is_some());
    let agent = addressed.then(|| requesting_agent(&request.json())).flatten();
    let position = agent
        .and_then(|agent| script.iter().position(|queued| queued.agent.as_ref() == Some(&agent)))
        .or_else(|| script.iter().position(|queued| queued.agent.is_none()))?;
    script.remove(position).map(|queued| queued.reply)
}

async fn answer(shared: Arc<Shared>, mut reply: FakeReply) -> Response {
    // While the handler waits, a client that leaves drops this future (and the guard).
    let guard = DisconnectGuard::new(&shared);
    while let FakeReply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    let response = match reply {
        FakeReply::Json(body) => ([("content-type", "application/json")], body.to_string()).into_response(),
        FakeReply::Status { status, body, headers } => {
            let mut response = (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                body,
            )
                .into_response();
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
                    response.headers_mut().insert(name, value);
                }
            }
            response
        }
        FakeReply::Sse(script) => sse_response(shared, script),
        FakeReply::Stall => std::future::pending::<Response>().await,
        FakeReply::Delayed(..) => unreachable!("delays were unwrapped above"),
    };
    guard.disarm();
    response
}

/// Plays the script from a task of its own, so the body stays open as long as
/// the script says, and notices the client leaving when a send fails (hyper
/// drops the body of a closed connection).
fn sse_response(shared: Arc<Shared>, script: SseScript) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Vec<u8>, std::io::Error>>(16);
    tokio::spawn(async move {
        let guard = DisconnectGuard::new(&shared);
        for step in script.steps {
            let bytes = match step {
                SseStep::Data(data) => format!("data: {data}\n\n").into_bytes(),
                SseStep::Raw(raw) => raw,
                SseStep::Pause(pause) => {
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => continue,
                        _ = tx.closed() => return, // the guard counts the disconnect
                    }
                }
            };
            if tx.send(Ok(bytes)).await.is_err() {
                return;
            }
        }
        match script.end {
            SseEnd::Close => guard.disarm(),
            SseEnd::Cut => {
                guard.disarm();
                // Let hyper flush what was sent: a body error discards unflushed writes.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = tx
                    .send(Err(std::io::Error::other("fake provider cut the stream")))
                    .await;
            }
            SseEnd::Hang => tx.closed().await,
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Replies in the OpenAI chat-completions wire format.
pub mod openai {
    use super::{FakeReply, SseScript, SseStep};
    use serde_json::{Value, json};

    /// The usage every canned reply reports.
    pub const PROMPT_TOKENS: u64 = 12;
    pub const COMPLETION_TOKENS: u64 = 7;

    fn usage() -> Value {
        json!({
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        })
    }

    fn completion(message: Value, finish_reason: &str) -> Value {
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
            "usage": usage(),
        })
    }

    /// A non-streamed text reply.
    pub fn text(content: &str) -> Value {
        completion(json!({"role": "assistant", "content": content}), "stop")
    }

    /// A non-streamed reply carrying reasoning as DeepSeek and vLLM send it
    /// (`reasoning_content` beside `content`).
    pub fn reasoning(reasoning: &str, content: &str) -> Value {
        completion(
            json!({"role": "assistant", "content": content, "reasoning_content": reasoning}),
            "stop",
        )
    }

    /// A non-streamed structured reply: the value as the JSON text of `content`, as
    /// OpenAI answers a request with `response_format: json_schema`.
    pub fn json_reply(value: &Value) -> Value {
        text(&value.to_string())
    }

    /// An `/embeddings` reply with these vectors, in input order.
    pub fn embeddings(vectors: &[Vec<f32>]) -> Value {
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
            .collect();
        json!({"object": "list", "data": data, "model": "fake-embedding", "usage": {"prompt_tokens": 1, "total_tokens": 1}})
    }

    /// A non-streamed reply asking for tool calls: `(id, name, arguments)`.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Value {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
            })
            .collect();
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": calls}),
            "tool_calls",
        )
    }

    fn chunk(delta: Value, finish_reason: Option<&str>) -> String {
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            "usage": null,
        })
        .to_string()
    }

    /// The first chunk, carrying only the role.
    pub fn role_chunk() -> String {
        chunk(json!({"role": "assistant", "content": ""}), None)
    }

    pub fn text_chunk(text: &str) -> String {
        chunk(json!({"content": text}), None)
    }

    /// A streamed piece of reasoning (`delta.reasoning_content`, content null).
    pub fn reasoning_chunk(text: &str) -> String {
        chunk(json!({"content": null, "reasoning_content": text}), None)
    }

    /// One piece of a streamed tool call; `id` and `name` come in the first piece only.
    pub fn tool_call_chunk(index: usize, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
        let mut call = json!({"index": index, "function": {"arguments": arguments}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        chunk(json!({"tool_calls": [call]}), None)
    }

    pub fn finish_chunk(reason: &str) -> String {
        chunk(json!({}), Some(reason))
    }

    /// The last chunk with `stream_options.include_usage`: no choices, the usage.
    pub fn usage_chunk() -> String {
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [],
            "usage": usage(),
        })
        .to_string()
    }

    pub const DONE: &str = "[DONE]";

    /// A whole streamed text reply: role, the text pieces, finish, usage, `[DONE]`.
    pub fn stream_text(pieces: &[&str]) -> FakeReply {
        stream(pieces.iter().map(|p| text_chunk(p)).collect(), "stop")
    }

    /// A whole stream around these chunks.
    pub fn stream(chunks: Vec<String>, finish_reason: &str) -> FakeReply {
        let mut script = SseScript::data([role_chunk()]);
        script.steps.extend(chunks.into_iter().map(SseStep::Data));
        FakeReply::Sse(
            script
                .then(SseStep::Data(finish_chunk(finish_reason)))
                .then(SseStep::Data(usage_chunk()))
                .then(SseStep::Data(DONE.into())),
        )
    }

    /// OpenAI's error body.
    pub fn error(message: &str, kind: &str) -> String {
        json!({"error": {"message": message, "type": kind, "param": null, "code": null}}).to_string()
    }
}

/// Replies in the Gemini `generateContent` wire format.
pub mod gemini {
    use super::{FakeReply, SseEnd, SseScript, SseStep};
    use serde_json::{Value, json};

    pub const PROMPT_TOKENS: i64 = 9;
    pub const CANDIDATES_TOKENS: i64 = 4;

    fn usage() -> Value {
        json!({
            "promptTokenCount": PROMPT_TOKENS,
            "candidatesTokenCount": CANDIDATES_TOKENS,
            "totalTokenCount": PROMPT_TOKENS + CANDIDATES_TOKENS,
        })
    }

    /// A response with these parts; `finish_reason` on the final one only.
    pub fn response(parts: Vec<Value>, finish_reason: Option<&str>) -> Value {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(reason) = finish_reason {
            candidate["finishReason"] = json!(reason);
        }
        json!({"candidates": [candidate], "usageMetadata": usage(), "modelVersion": "fake-gemini"})
    }

    pub fn text(text: &str) -> Value {
        response(vec![json!({"text": text})], Some("STOP"))
    }

    /// A thought-summary part, as Gemini sends it with `includeThoughts`.
    pub fn thought_part(text: &str) -> Value {
        json!({"text": text, "thought": true})
    }

    /// A reply with a thought summary and then the answer.
    pub fn thinking(thought: &str, text: &str) -> Value {
        response(vec![thought_part(thought), json!({"text": text})], Some("STOP"))
    }

    /// A structured reply: the value as JSON text, as Gemini answers a request with
    /// `responseMimeType: application/json`.
    pub fn json_reply(value: &Value) -> Value {
        text(&value.to_string())
    }

    /// An `embedContent` reply with this vector.
    pub fn embedding(values: &[f32]) -> Value {
        json!({"embedding": {"values": values}})
    }

    /// A reply asking for calls `(name, args)`, without ids as Gemini sends them.
    pub fn function_calls(calls: &[(&str, Value)]) -> Value {
        let parts = calls
            .iter()
            .map(|(name, args)| json!({"functionCall": {"name": name, "args": args}}))
            .collect();
        response(parts, Some("STOP"))
    }

    /// A streamed reply: one chunk per piece, the last one with `finishReason: STOP`.
    pub fn stream_text(pieces: &[&str]) -> FakeReply {
        let last = pieces.len().saturating_sub(1);
        stream(
            pieces
                .iter()
                .enumerate()
                .map(|(i, piece)| response(vec![json!({"text": piece})], (i == last).then_some("STOP")))
                .collect(),
        )
    }

    /// These chunks as Gemini streams them: `data: <json>` events separated by
    /// `\r\n\r\n`, the body ending after the last one.
    pub fn stream(chunks: Vec<Value>) -> FakeReply {
        FakeReply::Sse(SseScript {
            steps: chunks
                .into_iter()
                .map(|chunk| SseStep::Raw(format!("data: {chunk}\r\n\r\n").into_bytes()))
                .collect(),
            end: SseEnd::Close,
        })
    }

    /// Google's error body.
    pub fn error(code: u16, message: &str, status: &str) -> String {
        json!({"error": {"code": code, "message": message, "status": status}}).to_string()
    }
}
