//! Agents files, Run requests and streams, and metrics scrapes: what the runner and
//! fault tests all need, written once.

use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{ServiceProcess, free_port};
use std::io::Write;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

/// How long a Run stream may stay silent before a test fails.
pub const STREAM_STALL: Duration = Duration::from_secs(30);

/// `yaml` as an agents file in a temp file (removed when dropped).
pub fn agents_file(yaml: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new()
        .prefix("agents-")
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    file.write_all(yaml.as_bytes()).expect("write the agents file");
    file
}

/// A user's message of one text part.
pub fn user_text(text: &str) -> pb::Content {
    pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(text.into())),
            ..Default::default()
        }],
    }
}

/// The text parts of an event, joined.
pub fn text_of(event: &pb::Event) -> String {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter_map(|part| match &part.kind {
            Some(pb::part::Kind::Text(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A Run of `message` by `user` in `session` of `app`, creating the session if need be.
pub fn run_request(app: &str, user: &str, session: &str, message: pb::Content) -> pb::RunRequest {
    pb::RunRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        new_message: Some(message),
        create_session: true,
        ..Default::default()
    }
}

/// The next message of a stream: Some(event), None at its end, or its status; panics
/// when the stream stays silent for [`STREAM_STALL`].
pub async fn next(stream: &mut Streaming<pb::Event>) -> Result<Option<pb::Event>, Status> {
    tokio::time::timeout(STREAM_STALL, stream.message())
        .await
        .unwrap_or_else(|_| panic!("the stream stayed silent for {STREAM_STALL:?}"))
}

/// The rest of a stream: its events and the status it ended with.
pub async fn rest(stream: &mut Streaming<pb::Event>) -> (Vec<pb::Event>, Option<Status>) {
    let mut events = Vec::new();
    loop {
        match next(stream).await {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, None),
            Err(status) => return (events, Some(status)),
        }
    }
}

/// A Run read to its end: its events after the stored user message (see
/// [`crate::after_user_event`]) and the status it ended with, or the call's own status.
pub async fn run_to_end(
    client: &mut AgentRunnerClient<Channel>,
    request: pb::RunRequest,
) -> (Vec<pb::Event>, Option<Status>) {
    match client.run(request).await {
        Ok(response) => {
            let (events, status) = rest(&mut response.into_inner()).await;
            (crate::after_user_event(events), status)
        }
        Err(status) => (Vec::new(), Some(status)),
    }
}

/// The whole HTTP reply of `GET /metrics` on a metrics endpoint on the loopback.
pub async fn metrics_reply(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the metrics port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("send");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.expect("read");
    reply
}

/// Starts `bin` with `args` and its metrics endpoint on a port of its own; returns that port.
pub async fn spawn_with_metrics(bin: &str, args: &[String]) -> (ServiceProcess, u16) {
    let port = free_port();
    let mut args = args.to_vec();
    args.extend(["--metrics-listen".to_string(), format!("127.0.0.1:{port}")]);
    (ServiceProcess::spawn(bin, &args, &[]).await, port)
}

/// An agents file's YAML with one app, `chat`: a root agent on the OpenAI-compatible
/// provider at `provider_url`, each model call allowed `timeout_secs`.
pub fn chat_app(provider_url: &str, timeout_secs: u64) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider_url}', timeout_secs: {timeout_secs} }}
apps:
  chat:
    root_agent: {{ name: chatter, model: gpt }}
"
    )
}

/// Starts `adk-runner-server` on `store_url` with `agents` and `extra_args`.
pub async fn spawn_runner(store_url: &str, agents: &tempfile::NamedTempFile, extra_args: &[String]) -> ServiceProcess {
    let mut args = vec![
        "--store-url".to_string(),
        store_url.to_string(),
        "--agents".to_string(),
        agents.path().display().to_string(),
    ];
    args.extend(extra_args.iter().cloned());
    ServiceProcess::spawn("adk-runner-server", &args, &[]).await
}

/// `session` of `user` in `app`, read with GetSession over a new connection to `endpoint`.
pub async fn get_session(endpoint: String, app: &str, user: &str, session: &str) -> pb::Session {
    let mut client = SessionServiceClient::connect(endpoint).await.expect("connect");
    client
        .get_session(pb::GetSessionRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session.into(),
            ..Default::default()
        })
        .await
        .expect("GetSession")
        .into_inner()
}
