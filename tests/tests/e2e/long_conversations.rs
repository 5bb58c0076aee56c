//! Long conversations end to end: `adk-server` on a real redis-server with an app
//! whose model is a fake OpenAI provider that refuses any request larger than its
//! context window, as a real one does. Compaction keeps every request within the
//! app's token budget; when the summariser fails, the oldest contents are left out
//! (log line + metric) instead of sending a request the provider refuses. Rewind
//! and ForkSession over gRPC.

use adk_grpc_e2e::runs::{agents_file, metrics_reply};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess, free_port};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tonic::Code;

const USER: &str = "alice";
const APP: &str = "chat";
/// The fake provider's context window, in request body bytes.
const WINDOW_BYTES: usize = 9_000;
/// The app's budget: about 4 characters a token, with room for the JSON framing.
const TOKEN_BUDGET: usize = 1_500;

/// A fake OpenAI provider: 400 `context_length_exceeded` for a body over
/// [`WINDOW_BYTES`]; the summariser's requests (recognised by its system prompt) get
/// "summary <n>" or, while `summariser_down`, a 500; others "reply <n>".
#[derive(Default)]
struct Provider {
    refused: AtomicUsize,
    replies: AtomicUsize,
    summaries: AtomicUsize,
    summariser_down: AtomicBool,
    largest: AtomicUsize,
    last_messages: Mutex<Vec<String>>,
}

async fn completions(State(provider): State<Arc<Provider>>, body: String) -> Response {
    provider.largest.fetch_max(body.len(), Ordering::SeqCst);
    if body.len() > WINDOW_BYTES {
        provider.refused.fetch_add(1, Ordering::SeqCst);
        let error = json!({"error": {"message": "maximum context length exceeded", "type": "invalid_request_error",
            "code": "context_length_exceeded"}});
        return json_reply(StatusCode::BAD_REQUEST, error);
    }
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let summarising = messages
        .iter()
        .any(|m| m["role"] == "system" && m["content"].as_str().is_some_and(|c| c.contains("You compact")));
    let text = if summarising {
        if provider.summariser_down.load(Ordering::SeqCst) {
            return (StatusCode::INTERNAL_SERVER_ERROR, "summariser down").into_response();
        }
        format!("summary {}", provider.summaries.fetch_add(1, Ordering::SeqCst) + 1)
    } else {
        // The conversation only: the system text (the agent's identity) is not history.
        *provider.last_messages.lock().unwrap() = messages
            .iter()
            .filter(|m| m["role"] != "system")
            .filter_map(|m| m["content"].as_str().map(|c| c.chars().take(12).collect()))
            .collect();
        format!("reply {}", provider.replies.fetch_add(1, Ordering::SeqCst) + 1)
    };
    let reply = json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000, "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    });
    json_reply(StatusCode::OK, reply)
}

fn json_reply(status: StatusCode, body: Value) -> Response {
    (status, [("content-type", "application/json")], body.to_string()).into_response()
}

async fn start_provider() -> (Arc<Provider>, String) {
    let provider = Arc::new(Provider::default());
    let app = axum::Router::new()
        .route("/chat/completions", axum::routing::post(completions))
        .with_state(provider.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (provider, url)
}

struct Stack {
    _redis: RedisServer,
    server: ServiceProcess,
    metrics_port: u16,
    _agents: tempfile::NamedTempFile,
}

async fn start(provider_url: &str, compaction: &str) -> Stack {
    let redis = RedisServer::start().await;
    let yaml = format!(
        "models:\n  gpt: {{ provider: openai, model: fake-model, base_url: '{provider_url}', timeout_secs: 30 }}\n\
         apps:\n  {APP}:\n    root_agent: {{ name: assistant, model: gpt }}\n    compaction: {compaction}\n"
    );
    let agents = agents_file(&yaml);
    let metrics_port = free_port();
    let args = [
        "--store-url".to_string(),
        redis.url(),
        "--agents".to_string(),
        agents.path().display().to_string(),
        "--metrics-listen".to_string(),
        format!("127.0.0.1:{metrics_port}"),
    ];
    let envs = [("OPENAI_API_KEY".to_string(), "test-key".to_string())];
    let server = ServiceProcess::spawn("adk-server", &args, &envs).await;
    Stack {
        _redis: redis,
        server,
        metrics_port,
        _agents: agents,
    }
}

impl Stack {
    async fn runner(&self) -> AgentRunnerClient<tonic::transport::Channel> {
        AgentRunnerClient::connect(self.server.endpoint()).await.unwrap()
    }

    async fn sessions(&self) -> SessionServiceClient<tonic::transport::Channel> {
        SessionServiceClient::connect(self.server.endpoint()).await.unwrap()
    }

    async fn session(&self, id: &str) -> pb::Session {
        let request = pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: id.into(),
            ..Default::default()
        };
        self.sessions().await.get_session(request).await.unwrap().into_inner()
    }

    /// One turn; every event it streamed (the stream must end OK).
    async fn say(&self, session: &str, text: &str) -> Vec<pb::Event> {
        let request = pb::RunRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: session.into(),
            new_message: Some(pb::Content {
                role: "user".into(),
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(text.into())),
                    ..Default::default()
                }],
            }),
            create_session: true,
            ..Default::default()
        };
        let mut stream = self
            .runner()
            .await
            .run(request)
            .await
            .unwrap_or_else(|e| panic!("run: {e}\n{}", self.server.tail_log(30)))
            .into_inner();
        let mut events = Vec::new();
        while let Some(event) = stream
            .message()
            .await
            .unwrap_or_else(|e| panic!("turn {text:.12} failed: {e}\n{}", self.server.tail_log(30)))
        {
            events.push(event);
        }
        adk_grpc_e2e::after_user_event(events)
    }

    /// The value of one metric sample (0 when absent).
    async fn metric(&self, sample: &str) -> f64 {
        let reply = metrics_reply(self.metrics_port).await;
        reply
            .lines()
            .find(|line| line.starts_with(sample))
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    }
}

fn message(i: usize) -> String {
    format!("turn {i:03} {}", "words ".repeat(150))
}

fn compactions(session: &pb::Session) -> usize {
    session
        .events
        .iter()
        .filter(|e| e.actions.as_ref().is_some_and(|a| a.compaction.is_some()))
        .count()
}

/// Many turns of ~900 characters against a provider whose window holds about ten of
/// them: with compaction (every 4 invocations, and before any request over the
/// 1,500-token budget) no request is ever refused and summaries are stored; with the
/// summariser down, the oldest contents are left out (log line, metric) and still no
/// request is refused.
#[tokio::test]
async fn a_long_conversation_never_exceeds_the_providers_window() {
    let (provider, url) = start_provider().await;
    let stack = start(
        &url,
        &format!("{{ interval: 4, overlap: 1, model: gpt, token_budget: {TOKEN_BUDGET} }}"),
    )
    .await;
    for i in 0..24 {
        stack.say("long", &message(i)).await;
    }
    assert_eq!(
        provider.refused.load(Ordering::SeqCst),
        0,
        "a request went over the window"
    );
    assert!(
        provider.largest.load(Ordering::SeqCst) > WINDOW_BYTES / 3,
        "the window was actually approached"
    );
    let session = stack.session("long").await;
    assert!(
        compactions(&session) >= 4,
        "summaries are stored: {}",
        compactions(&session)
    );
    assert!(provider.summaries.load(Ordering::SeqCst) >= 4);
    let history = provider.last_messages.lock().unwrap().clone();
    assert!(
        history.iter().any(|m| m.starts_with("summary ")),
        "the model sees the latest summary: {history:?}"
    );
    assert_eq!(history.last().map(String::as_str), Some("turn 023 wor"));

    // The summariser goes down: requests lose their oldest contents instead.
    provider.summariser_down.store(true, Ordering::SeqCst);
    let dropped = format!("adk_runner_history_contents_dropped_total{{app=\"{APP}\"}}");
    let before = stack.metric(&dropped).await;
    for i in 24..40 {
        stack.say("long", &message(i)).await;
    }
    assert_eq!(
        provider.refused.load(Ordering::SeqCst),
        0,
        "a request went over the window"
    );
    assert!(stack.metric(&dropped).await > before, "dropping is counted");
    let log = stack.server.tail_log(400);
    assert!(log.contains("oldest contents were left out"), "the log says so:\n{log}");
    assert_eq!(
        provider.last_messages.lock().unwrap().last().map(String::as_str),
        Some("turn 039 wor")
    );

    // The summariser is back: the next over-budget request is compacted again.
    provider.summariser_down.store(false, Ordering::SeqCst);
    let summaries = provider.summaries.load(Ordering::SeqCst);
    for i in 40..44 {
        stack.say("long", &message(i)).await;
    }
    assert!(
        provider.summaries.load(Ordering::SeqCst) > summaries,
        "compaction resumed"
    );
    assert_eq!(provider.refused.load(Ordering::SeqCst), 0);
}

/// Rewind over gRPC (AgentRunner.Rewind): the model's next request leaves the rewound
/// turns out, the log keeps them; a rewind of an unknown invocation is NOT_FOUND.
/// ForkSession copies the log up to an event into a session that runs on its own.
#[tokio::test]
async fn rewind_and_fork_over_grpc() {
    let (provider, url) = start_provider().await;
    let stack = start(&url, "{ interval: 100, model: gpt }").await;
    let first = stack.say("s", "first question").await;
    let second = stack.say("s", "second question").await;
    let rewound = stack
        .runner()
        .await
        .rewind(pb::RewindRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s".into(),
            rewind_before_invocation_id: second[0].invocation_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        rewound
            .actions
            .as_ref()
            .and_then(|a| a.rewind_before_invocation_id.clone()),
        Some(second[0].invocation_id.clone())
    );
    stack.say("s", "third question").await;
    assert_eq!(
        *provider.last_messages.lock().unwrap(),
        ["first questi", "reply 1", "third questi"],
        "the rewound turn is not in the model's history"
    );
    assert_eq!(
        stack.session("s").await.events.len(),
        2 + 2 + 1 + 2,
        "the log keeps everything"
    );
    let unknown = stack
        .runner()
        .await
        .rewind(pb::RewindRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s".into(),
            rewind_before_invocation_id: "e-unknown".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");

    // Fork right after the first answer, and ask something else there.
    let fork = stack
        .sessions()
        .await
        .fork_session(pb::ForkSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s".into(),
            up_to_event_id: first[0].id.clone(),
            new_session_id: "edited".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fork.events.len(), 2);
    stack.say("edited", "another second question").await;
    assert_eq!(
        *provider.last_messages.lock().unwrap(),
        ["first questi", "reply 1", "another seco"]
    );
    assert_eq!(stack.session("s").await.events.len(), 7, "the source is untouched");
    let missing = stack
        .sessions()
        .await
        .fork_session(pb::ForkSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s".into(),
            up_to_event_id: "no-such-event".into(),
            new_session_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
}
