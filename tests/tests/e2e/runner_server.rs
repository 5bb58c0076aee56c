//! `adk-runner-server` end to end: the real binary beside the real
//! `adk-session-server` and `adk-artifact-server`, all on one real redis-server;
//! models are the mock or a fake OpenAI server on loopback HTTP, tools a tiny
//! HTTP server of the test's own. The runner writes sessions to Redis directly,
//! so what the session server shows is what the runner stored.

use super::tool_context::state_of;
use adk_grpc_core::convert::{json_from_proto, json_to_proto};
use adk_grpc_e2e::runs::{self, agents_file, chat_app, text_of as texts, user_text as text};
use adk_grpc_e2e::{InProcessServer, spawn_artifact_server, spawn_session_server};
use adk_grpc_models::testing::{FakeReply, FakeServer, SseEnd, SseScript, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess, workspace_bin};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::StatusExt;

const USER: &str = "alice";

/// redis-server, adk-session-server and adk-runner-server (with `agents` as its
/// agents file) sharing it.
struct Stack {
    redis: RedisServer,
    sessions: ServiceProcess,
    runner: ServiceProcess,
    _agents: tempfile::NamedTempFile,
}

impl Stack {
    async fn start(agents: &str) -> Stack {
        Self::start_with_env(agents, &[]).await
    }

    async fn start_with_env(agents: &str, envs: &[(&str, &str)]) -> Stack {
        let redis = RedisServer::start().await;
        let file = agents_file(agents);
        let sessions = spawn_session_server(&redis.url(), &[]).await;
        let args = [
            "--store-url".to_string(),
            redis.url(),
            "--agents".to_string(),
            file.path().display().to_string(),
        ];
        let envs: Vec<(String, String)> = envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let runner = ServiceProcess::spawn("adk-runner-server", &args, &envs).await;
        Stack {
            redis,
            sessions,
            runner,
            _agents: file,
        }
    }

    async fn runner(&self) -> AgentRunnerClient<Channel> {
        AgentRunnerClient::connect(self.runner.endpoint())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\n{}", self.runner.tail_log(30)))
    }

    async fn get_session(&self, app: &str, session: &str) -> pb::Session {
        runs::get_session(self.sessions.endpoint(), app, USER, session).await
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run_request(app: &str, session: &str, message: pb::Content) -> pb::RunRequest {
    runs::run_request(app, USER, session, message)
}

fn sse(mut request: pb::RunRequest) -> pb::RunRequest {
    request.run_config = Some(pb::RunConfig {
        streaming_mode: pb::StreamingMode::Sse as i32,
        max_llm_calls: 0,
        ..Default::default()
    });
    request
}

/// What one Run streamed, and how the stream ended.
struct Run {
    events: Vec<pb::Event>,
    error: Option<Status>,
}

impl Run {
    fn complete(&self) -> Vec<&pb::Event> {
        self.events.iter().filter(|e| e.partial != Some(true)).collect()
    }

    fn partial(&self) -> Vec<&pb::Event> {
        self.events.iter().filter(|e| e.partial == Some(true)).collect()
    }

    #[track_caller]
    fn ok(self) -> Self {
        if let Some(status) = &self.error {
            panic!("the run failed: {status:?}");
        }
        self
    }
}

async fn run(client: &mut AgentRunnerClient<Channel>, request: pb::RunRequest) -> Run {
    let (events, error) = runs::run_to_end(client, request).await;
    Run { events, error }
}

fn function_calls(event: &pb::Event) -> Vec<&pb::FunctionCall> {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::FunctionCall(call)) => Some(call),
            _ => None,
        })
        .collect()
}

fn function_responses(event: &pb::Event) -> Vec<&pb::FunctionResponse> {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::FunctionResponse(response)) => Some(response),
            _ => None,
        })
        .collect()
}

fn ids<'a>(events: impl IntoIterator<Item = &'a pb::Event>) -> Vec<String> {
    events.into_iter().map(|e| e.id.clone()).collect()
}

const MOCK_APP: &str = "
models:
  echo: { provider: mock }
apps:
  helper:
    root_agent:
      name: helper
      model: echo
      instruction: You help {user:name}.
      output_key: last_reply
";

#[tokio::test]
async fn run_streams_events_and_the_session_server_shows_exactly_the_stored_ones() {
    let stack = Stack::start(MOCK_APP).await;
    let mut runner = stack.runner().await;

    let mut request = run_request("helper", "s1", text("Hello"));
    request.state_delta = [("user:name".to_string(), json_to_proto(&json!("Alice")))].into();
    let first = run(&mut runner, request).await.ok();
    assert_eq!(first.events.len(), 1, "one reply, no partial events without SSE");
    let reply = &first.events[0];
    assert_eq!(
        (reply.author.as_str(), texts(reply).as_str()),
        ("helper", "You said: Hello")
    );
    assert!(reply.invocation_id.starts_with("e-"), "{}", reply.invocation_id);
    assert!(reply.sequence > 0, "streamed after it was stored");

    // SSE: token chunks are streamed, only the whole reply is stored.
    let second = run(&mut runner, sse(run_request("helper", "s1", text("Second turn"))))
        .await
        .ok();
    let partial: Vec<String> = second.partial().iter().map(|e| texts(e)).collect();
    assert_eq!(partial, ["You ", "said: ", "Second ", "turn"]);
    assert_eq!(second.complete().len(), 1);
    assert_eq!(texts(second.complete()[0]), "You said: Second turn");

    // Another process reads what the runner stored in Redis: the user's messages
    // and exactly the complete events streamed, in order, with their deltas applied.
    let session = stack.get_session("helper", "s1").await;
    let stored: Vec<(&str, String)> = session.events.iter().map(|e| (e.author.as_str(), texts(e))).collect();
    assert_eq!(
        stored,
        [
            ("user", "Hello".to_string()),
            ("helper", "You said: Hello".to_string()),
            ("user", "Second turn".to_string()),
            ("helper", "You said: Second turn".to_string()),
        ]
    );
    assert_eq!(
        ids([&session.events[1], &session.events[3]]),
        ids(first.events.iter().chain(second.complete())),
        "the stored events are the streamed ones"
    );
    assert!(session.events.iter().all(|e| e.partial != Some(true)));
    let sequences: Vec<u64> = session.events.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, [1, 2, 3, 4]);
    assert_eq!(state_of(&session)["last_reply"], "You said: Second turn");
    assert_eq!(state_of(&session)["user:name"], "Alice");
}

/// Run is a read path of ADK's model too: the message a client sends keeps every
/// field of its parts (thought, signature, metadata, extensions) in the stored event.
#[tokio::test]
async fn a_runs_message_keeps_every_adk_part_field() {
    let stack = Stack::start(MOCK_APP).await;
    let mut runner = stack.runner().await;
    let rich = adk_grpc_testkit::adk_events::rich_event();
    let message = pb::Content::from(rich.content().expect("the rich event has content"));
    let mut message = pb::Content {
        role: "user".into(),
        ..message
    };
    // A function response would resume a paused run: keep the other kinds of part,
    // after a text the mock model answers.
    message.parts.retain(|part| {
        !matches!(
            part.kind,
            Some(pb::part::Kind::FunctionCall(_) | pb::part::Kind::FunctionResponse(_))
        )
    });
    message.parts.insert(0, text("Hello").parts.remove(0));
    let mut request = run_request("helper", "rich", message.clone());
    request.state_delta = [("user:name".to_string(), json_to_proto(&json!("Alice")))].into();
    run(&mut runner, request).await.ok();
    let session = stack.get_session("helper", "rich").await;
    let stored = session.events.first().expect("the user's message is stored");
    assert_eq!(stored.author, "user");
    assert_eq!(
        stored.content.as_ref(),
        Some(&message),
        "the message is stored field for field"
    );
}

#[tokio::test]
async fn unknown_apps_are_not_found_and_the_example_apps_are_listed_with_their_tree() {
    let example = std::fs::read_to_string(repo_root().join("examples/agents.yaml")).expect("examples/agents.yaml");
    let stack = Stack::start(&example).await;
    let mut runner = stack.runner().await;

    let missing = run(&mut runner, run_request("weather", "s1", text("hi"))).await;
    let status = missing.error.expect("NOT_FOUND");
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("app weather is not served here"),
        "{}",
        status.message()
    );

    let apps = runner
        .list_apps(pb::ListAppsRequest {})
        .await
        .unwrap()
        .into_inner()
        .apps;
    let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["assistant", "trip_planner"]);

    let app = runner
        .get_app(pb::GetAppRequest {
            app_name: "trip_planner".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let root = app.root_agent.expect("a root agent");
    assert_eq!((root.name.as_str(), root.kind.as_str()), ("planner", "sequential"));
    let agents: Vec<(&str, &str, &str)> = root
        .sub_agents
        .iter()
        .map(|a| (a.name.as_str(), a.kind.as_str(), a.model.as_str()))
        .collect();
    assert_eq!(
        agents,
        [("receptionist", "llm", "mock"), ("booker", "llm", "mock-booking")]
    );
    let tools: Vec<(&str, bool)> = root.sub_agents[1]
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.long_running))
        .collect();
    assert_eq!(tools, [("confirm_booking", true), ("get_weather", false)]);
    let schema = json_from_proto(
        "parameters_schema",
        root.sub_agents[1].tools[1]
            .parameters_schema
            .as_ref()
            .expect("a schema"),
    )
    .unwrap();
    assert_eq!(schema["required"], json!(["city"]));
}

/// What the tool server was sent: the arguments and the `x-api-key` header.
type ToolCalls = Arc<Mutex<Vec<(Value, Option<String>)>>>;

/// A tool server: answers the weather of the city it is asked about, and
/// records what it was sent.
async fn weather_tool_server() -> (String, ToolCalls) {
    use axum::body::Bytes;
    use axum::http::HeaderMap;
    let calls = ToolCalls::default();
    let recorded = calls.clone();
    let app = axum::Router::new().route(
        "/weather",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let recorded = recorded.clone();
            async move {
                let args: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let key = headers
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                recorded.lock().expect("lock").push((args.clone(), key));
                let reply = json!({"city": args["city"], "temp_c": 21});
                ([("content-type", "application/json")], reply.to_string())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/weather", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, calls)
}

#[tokio::test]
async fn an_openai_model_calls_an_http_tool_and_answers_with_its_result() {
    let provider = FakeServer::start().await;
    let (tool_url, tool_calls) = weather_tool_server().await;
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}', api_key_env: E2E_OPENAI_KEY }}
tools:
  get_weather:
    kind: http
    url: '{tool_url}'
    description: Current weather of a city.
    parameters: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}
    headers_from_env: {{ x-api-key: E2E_WEATHER_KEY }}
apps:
  weather:
    root_agent: {{ name: forecaster, model: gpt, tools: [get_weather] }}
",
        provider.url()
    );
    let stack = Stack::start_with_env(
        &agents,
        &[("E2E_OPENAI_KEY", "sk-e2e"), ("E2E_WEATHER_KEY", "weather-secret")],
    )
    .await;
    let mut runner = stack.runner().await;

    provider.push(openai::tool_calls(&[(
        "call_1",
        "get_weather",
        json!({"city": "Paris"}),
    )]));
    provider.push(openai::text("It is 21 degrees in Paris."));
    let result = run(&mut runner, run_request("weather", "s1", text("Weather in Paris?")))
        .await
        .ok();

    let authors: Vec<&str> = result.events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(authors, ["forecaster", "forecaster", "forecaster"]);
    let call = function_calls(&result.events[0])[0];
    assert_eq!(
        (call.name.as_str(), call.id.as_deref()),
        ("get_weather", Some("call_1"))
    );
    let response = function_responses(&result.events[1])[0];
    assert_eq!(response.id.as_deref(), Some("call_1"));
    assert_eq!(
        json_from_proto("response", response.response.as_ref().expect("a response")).unwrap(),
        json!({"city": "Paris", "temp_c": 21})
    );
    assert_eq!(texts(&result.events[2]), "It is 21 degrees in Paris.");

    // The tool got the model's arguments and its key; the provider got the tool's result.
    assert_eq!(
        tool_calls.lock().expect("lock").clone(),
        [(json!({"city": "Paris"}), Some("weather-secret".to_string()))]
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-e2e"));
    assert_eq!(requests[0].json()["tools"][0]["function"]["name"], "get_weather");
    let tool_message = requests[1].json()["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool").cloned())
        .expect("the tool's result went back to the model");
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert!(tool_message["content"].as_str().unwrap_or_default().contains("21"));

    let session = stack.get_session("weather", "s1").await;
    assert_eq!(ids(&session.events[1..]), ids(&result.events));
}

#[tokio::test]
async fn a_client_tool_pauses_the_run_and_a_function_response_resumes_it() {
    let agents = "
models:
  script:
    provider: mock
    mock:
      turns:
        - function_calls: [{ name: confirm, args: { hotel: Sakura } }]
        - text: Booked.
tools:
  confirm: { kind: client, description: Asks the user to confirm. }
apps:
  booking:
    root_agent: { name: booker, model: script, tools: [confirm] }
";
    let stack = Stack::start(agents).await;
    let mut runner = stack.runner().await;

    let paused = run(&mut runner, run_request("booking", "s1", text("Book Sakura")))
        .await
        .ok();
    let call_event = paused
        .events
        .iter()
        .find(|e| !function_calls(e).is_empty())
        .expect("the model's call is streamed");
    let call = function_calls(call_event)[0];
    assert_eq!(call.name, "confirm");
    assert_eq!(
        json_from_proto("args", call.args.as_ref().expect("args")).unwrap(),
        json!({"hotel": "Sakura"})
    );
    let call_id = call.id.clone().expect("the runner gives every call an id");
    assert_eq!(call_event.long_running_tool_ids, std::slice::from_ref(&call_id));
    assert!(
        paused.events.iter().all(|e| texts(e).is_empty()),
        "the turn ended at the call"
    );

    let answer = pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                name: "confirm".into(),
                response: Some(json_to_proto(&json!({"confirmed": true}))),
                id: Some(call_id),
                ..Default::default()
            })),
            ..Default::default()
        }],
    };
    let resumed = run(&mut runner, run_request("booking", "s1", answer)).await.ok();
    assert_eq!(resumed.events.len(), 1);
    assert_eq!(texts(&resumed.events[0]), "Booked.");
    assert_eq!(resumed.events[0].author, "booker");

    let session = stack.get_session("booking", "s1").await;
    let responses: Vec<&pb::FunctionResponse> = session.events.iter().flat_map(function_responses).collect();
    assert_eq!(responses.len(), 1, "the client's answer is stored as the user's event");
    assert_eq!(texts(session.events.last().expect("events")), "Booked.");
}

/// A config whose model is the fake OpenAI server at `url`.
fn openai_app(url: &str) -> String {
    chat_app(url, 30)
}

/// Starts a run whose provider streams one chunk and then hangs; returns it
/// once the chunk has arrived.
async fn hanging_run(
    runner: &mut AgentRunnerClient<Channel>,
    provider: &FakeServer,
) -> (tonic::Streaming<pb::Event>, pb::Event) {
    provider.push(SseScript::data([openai::role_chunk(), openai::text_chunk("Thinking")]).ending(SseEnd::Hang));
    let mut stream = runner
        .run(sse(run_request("chat", "s1", text("Think hard"))))
        .await
        .expect("the run starts")
        .into_inner();
    let user = stream.message().await.expect("a first event").expect("not the end");
    assert_eq!(user.author, "user", "the stored user event comes first");
    let first = stream.message().await.expect("a second event").expect("not the end");
    assert_eq!(first.partial, Some(true));
    (stream, first)
}

#[tokio::test]
async fn a_second_run_on_a_busy_session_is_aborted() {
    let provider = FakeServer::start().await;
    let stack = Stack::start(&openai_app(provider.url())).await;
    let mut runner = stack.runner().await;
    let (_running, first) = hanging_run(&mut runner, &provider).await;

    let second = run(&mut runner, run_request("chat", "s1", text("Me too"))).await;
    let status = second.error.expect("refused");
    assert_eq!(status.code(), Code::Aborted);
    assert!(
        status.message().contains("busy") && status.message().contains(&first.invocation_id),
        "{}",
        status.message()
    );
    // A program tells busy from a stale precondition by reason, and learns when to retry.
    let info = status
        .get_details_error_info()
        .expect("ErrorInfo in grpc-status-details-bin");
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("SESSION_BUSY", "adk.dev")
    );
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(retry.retry_delay.is_some_and(|d| !d.is_zero()), "{retry:?}");
    // Another session of the same app is not affected.
    provider.push(openai::text("Hi"));
    let other = run(&mut runner, run_request("chat", "s2", text("Hi"))).await.ok();
    assert_eq!(texts(other.events.last().expect("a reply")), "Hi");
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_provider_request_and_frees_the_session() {
    let provider = FakeServer::start().await;
    let stack = Stack::start(&openai_app(provider.url())).await;
    let mut runner = stack.runner().await;
    let (running, _) = hanging_run(&mut runner, &provider).await;

    drop(running);
    assert!(
        provider.wait_for_disconnects(1, Duration::from_secs(10)).await,
        "the provider saw its request dropped"
    );
    // The lease is released as the invocation stops; the session takes a new run.
    provider.push(openai::text("Back"));
    let next = adk_grpc_testkit::eventually(Duration::from_secs(5), || {
        let mut runner = runner.clone();
        async move {
            let next = run(&mut runner, run_request("chat", "s1", text("Again"))).await;
            match &next.error {
                Some(status) if status.code() == Code::Aborted => Err(format!("still busy: {status:?}")),
                _ => Ok(next.ok()),
            }
        }
    })
    .await;
    assert_eq!(texts(next.events.last().expect("a reply")), "Back");
    // Nothing of the cancelled reply was stored: it never completed.
    let session = stack.get_session("chat", "s1").await;
    let stored: Vec<String> = session.events.iter().map(texts).collect();
    assert_eq!(stored, ["Think hard", "Again", "Back"]);
}

#[tokio::test]
async fn a_provider_rate_limit_ends_the_stream_saying_so() {
    let provider = FakeServer::start().await;
    let stack = Stack::start(&openai_app(provider.url())).await;
    let mut runner = stack.runner().await;

    provider.push(
        FakeReply::status(429, openai::error("Rate limit reached for requests", "requests"))
            .with_header("retry-after", "7"),
    );
    let limited = run(&mut runner, run_request("chat", "s1", text("Hi"))).await;
    let status = limited.error.expect("the stream ends with an error");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("rate limit") && status.message().contains("retry after 7s"),
        "{}",
        status.message()
    );
    let info = status
        .get_details_error_info()
        .expect("ErrorInfo in the stream's trailers");
    assert_eq!(info.reason, "RATE_LIMITED");
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert_eq!(
        retry.retry_delay,
        Some(Duration::from_secs(7)),
        "the provider's Retry-After"
    );
}

/// The provider refusing the SERVER's API key is not the caller's credential being
/// refused: FAILED_PRECONDITION (not UNAUTHENTICATED or PERMISSION_DENIED) naming the
/// provider and the model, without the provider's text.
#[tokio::test]
async fn a_provider_refusing_the_servers_key_is_failed_precondition_naming_provider_and_model() {
    let provider = FakeServer::start().await;
    let stack = Stack::start(&openai_app(provider.url())).await;
    let mut runner = stack.runner().await;
    for status in [401, 403] {
        provider.push(FakeReply::status(
            status,
            openai::error("Incorrect API key provided: sk-pr****wxyz", "invalid_request_error"),
        ));
        let refused = run(&mut runner, run_request("chat", &format!("s{status}"), text("Hi"))).await;
        let error = refused.error.expect("the stream ends with an error");
        assert_eq!(error.code(), Code::FailedPrecondition, "{status}: {}", error.message());
        let message = error.message();
        assert!(
            message.contains("openai") && message.contains("fake-model") && message.contains(&status.to_string()),
            "{message}"
        );
        assert!(!message.contains("sk-pr"), "{message}");
    }
}

#[tokio::test]
async fn agents_load_artifacts_saved_through_the_artifact_server() {
    let provider = FakeServer::start().await;
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
apps:
  notes:
    root_agent: {{ name: reader, model: gpt, tools: [load_artifacts] }}
",
        provider.url()
    );
    let stack = Stack::start(&agents).await;
    let artifacts = spawn_artifact_server(&stack.redis.url(), &[]).await;
    let mut runner = stack.runner().await;

    // The session exists before the artifact is saved into it.
    provider.push(openai::text("Ready."));
    run(&mut runner, run_request("notes", "s1", text("Hi"))).await.ok();
    let mut client = ArtifactServiceClient::connect(artifacts.endpoint())
        .await
        .expect("connect");
    client
        .save_artifact(pb::SaveArtifactRequest {
            r#ref: Some(pb::ArtifactRef {
                app_name: "notes".into(),
                user_id: USER.into(),
                session_id: "s1".into(),
                file_name: "notes.txt".into(),
            }),
            part: Some(pb::Part {
                kind: Some(pb::part::Kind::Text("Pack the blue umbrella.".into())),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("SaveArtifact");

    provider.push(openai::tool_calls(&[(
        "call_1",
        "load_artifacts",
        json!({"artifact_names": ["notes.txt"]}),
    )]));
    provider.push(openai::text("Pack the blue umbrella."));
    let result = run(&mut runner, run_request("notes", "s1", text("What do my notes say?")))
        .await
        .ok();
    assert_eq!(texts(result.events.last().expect("a reply")), "Pack the blue umbrella.");
    let requests = provider.requests();
    let first = requests[1].json().to_string();
    assert!(
        first.contains("notes.txt"),
        "the model is told which artifacts exist: {first}"
    );
    let last = requests[2].json().to_string();
    assert!(
        last.contains("Pack the blue umbrella."),
        "the artifact reached the model: {last}"
    );
}

#[tokio::test]
async fn an_invalid_agents_file_stops_the_server_naming_file_agent_and_field() {
    let file = agents_file(
        "
models:
  fast: { provider: mock }
  smart: { provider: mock }
apps:
  weather:
    root_agent: { name: planner, model: gpt5 }
",
    );
    let output = Command::new(workspace_bin("adk-runner-server"))
        .args(["--listen", "127.0.0.1:0", "--store-url", "redis://127.0.0.1:1"])
        .arg("--agents")
        .arg(file.path())
        .output()
        .expect("run adk-runner-server");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    let expected = format!(
        "{}: app \"weather\", agent \"planner\": field \"model\": unknown model \"gpt5\" (declared: fast, smart)",
        file.path().display()
    );
    assert!(log.contains(&expected), "{log}");

    let output = Command::new(workspace_bin("adk-runner-server"))
        .env_remove("ADK_AGENTS")
        .output()
        .expect("run adk-runner-server");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--agents <FILE>"));
}

#[tokio::test]
async fn adk_server_runs_agents_on_the_stores_it_serves() {
    // In the test's process: the test is about the stores the server shares, not the process.
    let agents = repo_root().join("examples/agents.yaml");
    let server = InProcessServer::all_in_one(&["--agents", &agents.display().to_string()]).await;
    let endpoint = server.endpoint();
    let mut runner = AgentRunnerClient::connect(endpoint.clone()).await.expect("connect");
    let result = run(&mut runner, run_request("assistant", "s1", text("Hello")))
        .await
        .ok();

    // memory:// is one store shared by the runner and the session service.
    let mut sessions = SessionServiceClient::connect(endpoint).await.expect("connect");
    let session = sessions
        .get_session(pb::GetSessionRequest {
            app_name: "assistant".into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .expect("the runner's session is served on the same port")
        .into_inner();
    assert_eq!(ids(&session.events[1..]), ids(&result.events));
    assert_eq!(state_of(&session)["last_reply"], "You said: Hello");
}
