//! A2A over gRPC end to end, with real processes:
//! - the client side: a remote agent built on the official a2a-sdk (Python, its gRPC
//!   transport; clients/python/tests/a2a_remote_server.py) is a `kind: a2a` sub-agent of
//!   an app of a real `adk-server` on a real redis-server; a gRPC `Run` transfers to it,
//!   its streamed updates are stored as events, and its `input-required` state is
//!   answered like a client tool;
//! - replicas: a task started through one `adk-runner-server` is read (GetTask, ListTasks),
//!   re-attached (SubscribeToTask) and canceled through another on the same Redis;
//! - cost: GetTask and ListTasks read from Redis about what they return, however long the
//!   context, and ListTasks pages with opaque tokens bound to their listing.

use adk_grpc_core::convert::{json_from_proto, json_to_proto};
use adk_grpc_e2e::runs::{self, agents_file, chat_app, spawn_runner, text_of};
use adk_grpc_e2e::venv_python;
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use adk_grpc_proto::a2a;
use adk_grpc_proto::a2a::a2a_service_client::A2aServiceClient;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess, eventually};
use serde_json::json;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tonic::Streaming;
use tonic::transport::Channel;

const USER: &str = "alice";
const WAIT: Duration = Duration::from_secs(30);

/// The a2a-sdk gRPC server of clients/python/tests/a2a_remote_server.py, killed on drop.
struct PythonA2aServer {
    _child: tokio::process::Child,
    port: u16,
}

impl PythonA2aServer {
    async fn start() -> PythonA2aServer {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../clients/python/tests/a2a_remote_server.py");
        let mut child = tokio::process::Command::new(venv_python())
            .arg(script)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the a2a-sdk server");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.expect("read its stdout") {
                if let Some(port) = line.strip_prefix("LISTENING ") {
                    return port.trim().parse::<u16>().expect("a port");
                }
            }
            panic!("the a2a-sdk server exited before it listened")
        })
        .await
        .expect("the a2a-sdk server listens within 30 s");
        PythonA2aServer { _child: child, port }
    }
}

fn user_message(part: pb::part::Kind) -> pb::Content {
    pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(part),
            ..Default::default()
        }],
    }
}

fn run_request(session: &str, message: pb::Content) -> pb::RunRequest {
    runs::run_request("frontdesk", USER, session, message)
}

/// Every event of a Run (after the user's message); panics on an error status.
async fn run(client: &mut AgentRunnerClient<Channel>, request: pb::RunRequest) -> Vec<pb::Event> {
    let (events, status) = runs::run_to_end(client, request).await;
    assert!(status.is_none(), "the run fails: {status:?}");
    events
}

fn metadata(event: &pb::Event, key: &str) -> String {
    let value = event
        .custom_metadata
        .as_ref()
        .and_then(|m| m.get(key))
        .and_then(|v| v.kind.clone());
    match value {
        Some(adk_grpc_proto::ordered::value::Kind::StringValue(s)) => s,
        _ => String::new(),
    }
}

fn input_call(event: &pb::Event) -> Option<&pb::FunctionCall> {
    event.content.as_ref()?.parts.iter().find_map(|part| match &part.kind {
        Some(pb::part::Kind::FunctionCall(call)) if call.name == "a2a_input_required" => Some(call),
        _ => None,
    })
}

/// A real `adk-server` on a real redis-server whose apps reach the a2a-sdk server:
/// `frontdesk` transfers to it, `helpdesk` calls it as a tool.
struct FrontDesk {
    _remote: PythonA2aServer,
    _redis: RedisServer,
    server: ServiceProcess,
    _agents: tempfile::NamedTempFile,
}

impl FrontDesk {
    async fn start() -> FrontDesk {
        Self::start_with(&[]).await
    }

    async fn start_with(extra_args: &[&str]) -> FrontDesk {
        let remote = PythonA2aServer::start().await;
        let agents = agents_file(&format!(
            "
models:
  router:
    provider: mock
    model: mock-router
    mock:
      turns:
        - function_calls:
            - name: transfer_to_agent
              args: {{ agent_name: echo }}
      when_exhausted: echo
      per_conversation: true
  caller:
    provider: mock
    model: mock-caller
    mock:
      turns:
        - function_calls:
            - name: echo_tool
              args: {{ request: ping }}
            - name: echo_tool
              args: {{ request: please confirm }}
        - text: relayed
      per_conversation: true
  bulk:
    provider: mock
    model: mock-bulk
    mock:
      turns:
        - function_calls:
            - name: echo_tool
              args: {{ request: huge 8 }}
        - text: gave up
      per_conversation: true
apps:
  frontdesk:
    root_agent:
      name: receptionist
      model: router
      sub_agents:
        - name: echo
          kind: a2a
          description: Echoes what it is told.
          endpoint: http://127.0.0.1:{port}
  bulkdesk:
    root_agent:
      name: helper
      model: bulk
      sub_agents:
        - name: echo_tool
          kind: a2a
          as_tool: true
          description: Echoes what it is told.
          endpoint: http://127.0.0.1:{port}
  helpdesk:
    root_agent:
      name: helper
      model: caller
      sub_agents:
        - name: echo_tool
          kind: a2a
          as_tool: true
          description: Echoes what it is told.
          endpoint: http://127.0.0.1:{port}
",
            port = remote.port
        ));
        let redis = RedisServer::start().await;
        let mut args = vec![
            "--store-url".to_string(),
            redis.url(),
            "--agents".into(),
            agents.path().display().to_string(),
        ];
        args.extend(extra_args.iter().map(|arg| arg.to_string()));
        let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
        FrontDesk {
            _remote: remote,
            _redis: redis,
            server,
            _agents: agents,
        }
    }
}

#[tokio::test]
async fn an_a2a_sdk_agent_is_a_sub_agent_whose_updates_are_events_and_whose_question_is_answered_like_a_client_tool() {
    let stack = FrontDesk::start().await;
    let server = &stack.server;
    let mut runner = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");

    // A transfer: the remote's status messages and artifact are events authored by it.
    let events = run(
        &mut runner,
        run_request("s1", user_message(pb::part::Kind::Text("hello there".into()))),
    )
    .await;
    let from_echo: Vec<&pb::Event> = events.iter().filter(|e| e.author == "echo").collect();
    let texts: Vec<String> = from_echo.iter().map(|e| text_of(e)).collect();
    assert_eq!(
        texts,
        [
            "working on: hello there",
            "echo artifact: hello there",
            "echo: hello there"
        ],
        "{events:#?}"
    );
    let remote_task = metadata(from_echo[0], "a2a_remote_task_id");
    assert!(!remote_task.is_empty());
    assert_eq!(metadata(from_echo[2], "a2a_remote_state"), "TASK_STATE_COMPLETED");
    // ... and stored in the session, as streamed.
    let mut sessions = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    let stored = sessions
        .get_session(pb::GetSessionRequest {
            app_name: "frontdesk".into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .expect("GetSession")
        .into_inner();
    let stored_ids: Vec<&str> = stored.events.iter().map(|e| e.id.as_str()).collect();
    for event in &from_echo {
        assert!(stored_ids.contains(&event.id.as_str()), "{} not stored", event.id);
    }

    // Input required: the run ends with a pending call, as a client tool's would ...
    let events = run(
        &mut runner,
        run_request("s2", user_message(pb::part::Kind::Text("please confirm".into()))),
    )
    .await;
    let asking = events.last().expect("events");
    let call = input_call(asking).unwrap_or_else(|| panic!("no pending call: {events:#?}"));
    let call_id = call.id.clone().expect("an id");
    assert_eq!(asking.author, "echo");
    assert_eq!(asking.long_running_tool_ids, std::slice::from_ref(&call_id));
    assert!(text_of(asking).contains("Shall I go ahead?"), "{asking:#?}");
    let args = json_from_proto("args", call.args.as_ref().expect("args")).unwrap();
    let asked_task = args["task_id"].as_str().expect("task_id").to_string();

    // ... and the answer resumes the same remote task.
    let answer = pb::FunctionResponse {
        name: call.name.clone(),
        response: Some(json_to_proto(&json!({"result": "yes"}))),
        id: Some(call_id),
        ..Default::default()
    };
    let events = run(
        &mut runner,
        run_request("s2", user_message(pb::part::Kind::FunctionResponse(answer))),
    )
    .await;
    let last = events.last().expect("events");
    assert_eq!(
        (last.author.as_str(), text_of(last).as_str()),
        ("echo", "confirmed: yes")
    );
    assert_eq!(metadata(last, "a2a_remote_task_id"), asked_task);
    assert_eq!(metadata(last, "a2a_remote_state"), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn an_a2a_sdk_agent_called_as_a_tool_answers_or_asks_for_input() {
    let stack = FrontDesk::start().await;
    let mut runner = AgentRunnerClient::connect(stack.server.endpoint())
        .await
        .expect("connect");
    let mut request = run_request("s1", user_message(pb::part::Kind::Text("ask the echo".into())));
    request.app_name = "helpdesk".into();
    let events = run(&mut runner, request).await;
    let responses: Vec<serde_json::Value> = events
        .iter()
        .flat_map(|e| e.content.iter().flat_map(|c| &c.parts))
        .filter_map(|part| match &part.kind {
            Some(pb::part::Kind::FunctionResponse(r)) if r.name == "echo_tool" => {
                Some(json_from_proto("response", r.response.as_ref().expect("response")).unwrap())
            }
            _ => None,
        })
        .collect();
    assert_eq!(responses.len(), 2, "{events:#?}");
    assert_eq!(responses[0]["state"], "completed");
    assert_eq!(
        responses[0]["result"],
        "working on: ping\necho artifact: ping\necho: ping"
    );
    assert_eq!(responses[1]["state"], "input_required");
    assert_eq!(responses[1]["question"], "Shall I go ahead?");
    assert!(responses[1]["task_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(events.last().map(text_of).as_deref(), Some("relayed"));
}

/// A remote's message longer than `--max-tool-reply-bytes` is not decoded: ten calls at
/// once of an A2A agent offered as a tool, each answered with 8 MiB, are errors the model
/// reads, naming the limit; the server's memory stays within a bound over its idle size and
/// it keeps serving.
#[tokio::test]
async fn an_a2a_reply_over_the_limit_is_an_error_the_model_reads_ten_at_once() {
    const LIMIT: usize = 256 * 1024;
    const PEAK_BOUND_KIB: u64 = 32 * 1024;
    let stack = FrontDesk::start_with(&["--max-tool-reply-bytes", &LIMIT.to_string()]).await;
    let mut runner = AgentRunnerClient::connect(stack.server.endpoint())
        .await
        .expect("connect");
    let idle = stack.server.rss_kib().expect("the server runs");
    let runs = (0..10).map(|i| {
        let mut runner = runner.clone();
        async move {
            let mut request = run_request(&format!("bulk-{i}"), user_message(pb::part::Kind::Text("go".into())));
            request.app_name = "bulkdesk".into();
            run(&mut runner, request).await
        }
    });
    for events in futures::future::join_all(runs).await {
        let error = events
            .iter()
            .flat_map(|e| e.content.iter().flat_map(|c| &c.parts))
            .find_map(|part| match &part.kind {
                Some(pb::part::Kind::FunctionResponse(r)) if r.name == "echo_tool" => {
                    Some(json_from_proto("response", r.response.as_ref().expect("response")).unwrap())
                }
                _ => None,
            })
            .expect("the call is answered");
        let error = error["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains("echo_tool"), "{error}");
        assert!(
            error.contains(&format!("{LIMIT} bytes")) && error.contains("--max-tool-reply-bytes"),
            "{error}"
        );
        assert_eq!(events.last().map(text_of).as_deref(), Some("gave up"));
    }
    let peak = stack.server.peak_rss_kib().expect("the server runs");
    eprintln!(
        "a2a reply limit: idle VmRSS {idle} KiB, peak VmHWM {peak} KiB over 10 replies of 8 MiB (+{} KiB)",
        peak.saturating_sub(idle)
    );
    assert!(
        peak < idle + PEAK_BOUND_KIB,
        "peak {peak} KiB is more than {PEAK_BOUND_KIB} KiB over the idle {idle} KiB"
    );
    // It keeps serving.
    let mut request = run_request("after", user_message(pb::part::Kind::Text("ask the echo".into())));
    request.app_name = "helpdesk".into();
    let events = run(&mut runner, request).await;
    assert_eq!(events.last().map(text_of).as_deref(), Some("relayed"));
}

// ---------- replicas ----------

fn a2a_message(message_id: &str, context_id: &str, text: &str) -> a2a::SendMessageRequest {
    a2a::SendMessageRequest {
        tenant: "chat".into(),
        message: Some(a2a::Message {
            message_id: message_id.into(),
            context_id: context_id.into(),
            role: a2a::Role::User as i32,
            parts: vec![a2a::Part {
                content: Some(a2a::part::Content::Text(text.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn a2a_client(server: &ServiceProcess) -> A2aServiceClient<Channel> {
    A2aServiceClient::connect(server.endpoint()).await.expect("connect")
}

async fn next_update(stream: &mut Streaming<a2a::StreamResponse>) -> Option<a2a::StreamResponse> {
    tokio::time::timeout(WAIT, stream.message())
        .await
        .expect("the stream answers within 30 s")
        .expect("the stream goes on")
}

async fn get_task(client: &mut A2aServiceClient<Channel>, id: &str) -> a2a::Task {
    client
        .get_task(a2a::GetTaskRequest {
            tenant: "chat".into(),
            id: id.into(),
            history_length: None,
        })
        .await
        .expect("GetTask")
        .into_inner()
}

#[tokio::test]
async fn a_task_started_on_one_replica_is_read_subscribed_to_and_canceled_through_another() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    let agents = agents_file(&chat_app(provider.url(), 120));
    let url = redis.url();
    let (first, second) = tokio::join!(spawn_runner(&url, &agents, &[]), spawn_runner(&url, &agents, &[]));
    let (mut on_first, mut on_second) = (a2a_client(&first).await, a2a_client(&second).await);

    // A run that waits on its model, started through the first replica.
    provider.push(FakeReply::Stall);
    let mut started = on_first
        .send_streaming_message(a2a_message("m-1", "", "Take your time."))
        .await
        .expect("SendStreamingMessage")
        .into_inner();
    let Some(a2a::StreamResponse {
        payload: Some(a2a::stream_response::Payload::Task(task)),
    }) = next_update(&mut started).await
    else {
        panic!("the stream starts with the task")
    };
    drop(started);

    // The second replica reads it from the store ...
    let working = get_task(&mut on_second, &task.id).await;
    assert_eq!(working.context_id, task.context_id);
    assert_eq!(working.status.expect("status").state(), a2a::TaskState::Working);
    let listed = on_second
        .list_tasks(a2a::ListTasksRequest {
            tenant: "chat".into(),
            context_id: task.context_id.clone(),
            ..Default::default()
        })
        .await
        .expect("ListTasks")
        .into_inner();
    assert_eq!(
        listed.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [task.id.as_str()]
    );

    // Only once the run waits on its model: canceled before it asks, it would leave the
    // stall queued for the next message's run.
    eventually(WAIT, || {
        let asked = provider.requests().len();
        async move {
            match asked {
                1 => Ok(()),
                n => Err(format!("the model was asked {n} times")),
            }
        }
    })
    .await;

    // ... re-attaches to it, and cancels it there: the subscriber sees it end canceled.
    let mut subscribed = on_second
        .subscribe_to_task(a2a::SubscribeToTaskRequest {
            tenant: "chat".into(),
            id: task.id.clone(),
        })
        .await
        .expect("SubscribeToTask")
        .into_inner();
    let first_update = next_update(&mut subscribed).await.expect("an update");
    assert!(
        matches!(&first_update.payload, Some(a2a::stream_response::Payload::Task(t)) if t.id == task.id),
        "{first_update:?}"
    );
    let canceled = on_second
        .cancel_task(a2a::CancelTaskRequest {
            tenant: "chat".into(),
            id: task.id.clone(),
            metadata: None,
        })
        .await
        .expect("CancelTask")
        .into_inner();
    assert_eq!(canceled.status.expect("status").state(), a2a::TaskState::Canceled);
    let mut last_state = a2a::TaskState::Unspecified;
    while let Some(update) = next_update(&mut subscribed).await {
        if let Some(a2a::stream_response::Payload::StatusUpdate(status)) = update.payload {
            last_state = status.status.expect("status").state();
        }
    }
    assert_eq!(last_state, a2a::TaskState::Canceled);
    eventually(WAIT, || {
        let mut on_first = on_first.clone();
        let id = task.id.clone();
        async move {
            let state = get_task(&mut on_first, &id).await.status.expect("status").state();
            match state {
                a2a::TaskState::Canceled => Ok(()),
                other => Err(format!("the first replica reads {other:?}")),
            }
        }
    })
    .await;

    // A next message in the same context completes on the second replica; the first reads it.
    provider.push(openai::text("Done now."));
    let reply = on_second
        .send_message(a2a_message("m-2", &task.context_id, "Again, quickly."))
        .await
        .expect("SendMessage")
        .into_inner();
    let Some(a2a::send_message_response::Payload::Task(second_task)) = reply.payload else {
        panic!("a task: {reply:?}")
    };
    let read = get_task(&mut on_first, &second_task.id).await;
    let status = read.status.expect("status");
    assert_eq!(status.state(), a2a::TaskState::Completed);
    let said: Vec<String> = status
        .message
        .expect("the agent's last words")
        .parts
        .into_iter()
        .filter_map(|p| match p.content {
            Some(a2a::part::Content::Text(text)) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(said, ["Done now."]);
}

#[tokio::test]
async fn send_message_waits_at_most_a2a_wait_secs_then_the_task_goes_on() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    let agents = agents_file(&chat_app(provider.url(), 120));
    let server = spawn_runner(&redis.url(), &agents, &["--a2a-wait-secs".into(), "1".into()]).await;
    let mut client = a2a_client(&server).await;
    provider.push(FakeReply::Stall);
    let status = client
        .send_message(a2a_message("m-1", "", "Take your time."))
        .await
        .expect_err("the model never answers");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("--a2a-wait-secs"), "{status:?}");
    let listed = client
        .list_tasks(a2a::ListTasksRequest {
            tenant: "chat".into(),
            ..Default::default()
        })
        .await
        .expect("ListTasks")
        .into_inner();
    assert_eq!(listed.tasks.len(), 1);
    assert_eq!(
        listed.tasks[0].status.clone().expect("status").state(),
        a2a::TaskState::Working,
        "the run goes on"
    );
}

// ---------- what reads cost ----------

/// The bytes redis-server has sent its clients so far (`INFO stats`).
async fn redis_output_bytes(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(redis)
        .await
        .expect("INFO stats");
    info.lines()
        .find_map(|line| line.strip_prefix("total_net_output_bytes:"))
        .and_then(|bytes| bytes.trim().parse().ok())
        .expect("total_net_output_bytes")
}

/// The task of a SendMessage answer.
fn task_of(reply: a2a::SendMessageResponse) -> a2a::Task {
    match reply.payload {
        Some(a2a::send_message_response::Payload::Task(task)) => task,
        other => panic!("a task: {other:?}"),
    }
}

fn list_request(context_id: &str, page_size: i32, page_token: &str) -> a2a::ListTasksRequest {
    a2a::ListTasksRequest {
        tenant: "chat".into(),
        context_id: context_id.into(),
        page_size: Some(page_size),
        page_token: page_token.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn get_task_and_list_tasks_read_from_redis_about_what_they_return_however_long_the_context() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    let agents = agents_file(&chat_app(provider.url(), 120));
    let server = spawn_runner(&redis.url(), &agents, &[]).await;
    let mut client = a2a_client(&server).await;

    // A long context: 300 earlier turns of about 4 KB each, written through the store.
    let stores = adk_grpc_store::Stores::open(&redis.url(), Default::default()).expect("a store URL");
    let sessions = stores.sessions().await.expect("open the store");
    let (app, user, context) = ("chat", "a2a", "long");
    sessions
        .create(adk_grpc_core::CreateRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: Some(context.into()),
            ..Default::default()
        })
        .await
        .expect("create");
    let words = "lorem ipsum ".repeat(340);
    for i in 0..300 {
        let (author, role) = if i % 2 == 0 {
            ("user", "user")
        } else {
            ("chatter", "model")
        };
        let event = adk_grpc_core::Event::new(format!("e-old-{}", i / 2))
            .with_author(author)
            .with_content(adk_grpc_core::Content::new(role).with_text(format!("{i}: {words}")));
        sessions
            .append_event(adk_grpc_core::AppendEventRequest {
                app_name: app.into(),
                user_id: user.into(),
                session_id: context.into(),
                event,
                timestamp_missing: false,
                precondition: None,
            })
            .await
            .expect("append");
    }
    // Then a short task in it.
    provider.push(openai::text("Short answer."));
    let task = task_of(
        client
            .send_message(a2a_message("m-1", context, "A short question."))
            .await
            .expect("SendMessage")
            .into_inner(),
    );
    assert_eq!(task.status.clone().expect("status").state(), a2a::TaskState::Completed);

    let mut conn = redis::Client::open(redis.url())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis");
    // What reading the whole context costs, for comparison.
    let before = redis_output_bytes(&mut conn).await;
    let whole = sessions
        .get(adk_grpc_core::GetRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: context.into(),
            ..Default::default()
        })
        .await
        .expect("GetSession");
    let whole_bytes = redis_output_bytes(&mut conn).await - before;
    assert_eq!(whole.events.len(), 303);

    let before = redis_output_bytes(&mut conn).await;
    let read = get_task(&mut client, &task.id).await;
    let get_bytes = redis_output_bytes(&mut conn).await - before;
    assert_eq!(read.history.len(), 2, "{read:?}");

    let before = redis_output_bytes(&mut conn).await;
    let listed = client
        .list_tasks(list_request(context, 1, ""))
        .await
        .expect("ListTasks")
        .into_inner();
    let list_bytes = redis_output_bytes(&mut conn).await - before;
    assert_eq!(
        listed.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [task.id.as_str()]
    );

    eprintln!(
        "redis bytes sent: whole context {whole_bytes}, GetTask {get_bytes}, ListTasks(page_size 1) {list_bytes}"
    );
    assert!(
        get_bytes * 10 < whole_bytes,
        "GetTask of a 3-event task read {get_bytes} bytes from redis; the whole context is {whole_bytes}"
    );
    assert!(
        list_bytes * 10 < whole_bytes,
        "a ListTasks page of one task read {list_bytes} bytes from redis; the whole context is {whole_bytes}"
    );
}

#[tokio::test]
async fn list_tasks_pages_with_opaque_tokens_bound_to_their_listing() {
    let redis = RedisServer::start().await;
    let provider = FakeServer::start().await;
    let agents = agents_file(&chat_app(provider.url(), 120));
    let server = spawn_runner(&redis.url(), &agents, &[]).await;
    let mut client = a2a_client(&server).await;
    let mut started = Vec::new();
    for (i, context) in ["ctx", "ctx", "ctx", "other"].into_iter().enumerate() {
        provider.push(openai::text("Noted."));
        let reply = client
            .send_message(a2a_message(&format!("m-{i}"), context, "Note this."))
            .await
            .expect("SendMessage");
        started.push(task_of(reply.into_inner()).id);
    }

    // One task a page, newest first, each once; the tokens are no bare offsets.
    let mut listed = Vec::new();
    let mut tokens = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_tasks(list_request("ctx", 1, &token))
            .await
            .expect("ListTasks")
            .into_inner();
        assert_eq!(page.tasks.len(), 1, "{page:?}");
        listed.push(page.tasks[0].id.clone());
        if page.next_page_token.is_empty() {
            assert_eq!(page.total_size, 3);
            break;
        }
        assert!(
            page.next_page_token.parse::<u64>().is_err(),
            "an opaque token, not an offset: {}",
            page.next_page_token
        );
        token = page.next_page_token;
        tokens.push(token.clone());
        assert!(tokens.len() < 10, "the listing does not end");
    }
    assert_eq!(listed, [started[2].clone(), started[1].clone(), started[0].clone()]);

    // A token this listing did not issue is INVALID_ARGUMENT naming page_token: garbage,
    // a bare offset, or a token of another context's listing.
    for (bad, context) in [("garbage!", "ctx"), ("1", "ctx"), (tokens[0].as_str(), "other")] {
        let status = client
            .list_tasks(list_request(context, 1, bad))
            .await
            .expect_err("a token this listing did not issue");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bad}: {status:?}");
        assert!(status.message().contains("page_token"), "{bad}: {status:?}");
    }
}
