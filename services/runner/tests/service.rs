//! The gRPC handlers in process, over a real loopback connection: apps built in
//! Rust code, shutdown, Cancel, message limits and request validation. The
//! end-to-end tests in `tests/tests/e2e/runner_server.rs` run the real binaries.

use adk_grpc_agents::{FunctionTool, LlmAgentBuilder, Runner, SequentialAgent};
use adk_grpc_core::{Agent, Llm};
use adk_grpc_models::testing::{FakeServer, SseEnd, SseScript, openai};
use adk_grpc_models::{MockModel, OpenAiCompatible};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_runner_service::{AgentDescription, App, RunnerServices, ToolDescription, runner_service};
use adk_grpc_server_kit::{GrpcArgs, GrpcServer, Shutdown};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic::Code;
use tonic::transport::Channel;

struct Served {
    client: AgentRunnerClient<Channel>,
    shutdown: Shutdown,
    server: JoinHandle<()>,
}

async fn serve(apps: Vec<App>, grpc: GrpcArgs) -> Served {
    let shutdown = Shutdown::new();
    let service = runner_service(apps, &grpc, shutdown.clone()).expect("apps have distinct names");
    let bound = GrpcServer::new(&grpc, shutdown.clone())
        .add_service(service)
        .bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let endpoint = format!("http://{}", bound.local_addr());
    let server = tokio::spawn(async move {
        bound.serve().await.expect("serve");
    });
    let client = AgentRunnerClient::connect(endpoint).await.expect("connect");
    Served {
        client,
        shutdown,
        server,
    }
}

fn echo_app(services: &RunnerServices, name: &str) -> App {
    let agent = LlmAgentBuilder::new("echo")
        .model(Arc::new(MockModel::echo()))
        .build()
        .unwrap();
    App::new(Runner::new(services.runner_config(name, Arc::new(agent))).unwrap())
}

fn openai_app(services: &RunnerServices, provider: &FakeServer) -> App {
    let model: Arc<dyn Llm> = Arc::new(OpenAiCompatible::new(provider.url(), "fake-model").unwrap());
    let agent = LlmAgentBuilder::new("assistant").model(model).build().unwrap();
    App::new(Runner::new(services.runner_config("slow", Arc::new(agent))).unwrap())
}

fn run_request(app: &str, session: &str, text: &str, sse: bool) -> pb::RunRequest {
    pb::RunRequest {
        app_name: app.into(),
        user_id: "alice".into(),
        session_id: session.into(),
        new_message: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(text.into())),
                ..Default::default()
            }],
        }),
        run_config: Some(pb::RunConfig {
            streaming_mode: if sse {
                pb::StreamingMode::Sse as i32
            } else {
                pb::StreamingMode::None as i32
            },
            max_llm_calls: 0,
            ..Default::default()
        }),
        create_session: true,
        ..Default::default()
    }
}

/// A stream whose first partial event has arrived and whose provider then hangs.
async fn hanging_run(served: &mut Served, provider: &FakeServer) -> (tonic::Streaming<pb::Event>, pb::Event) {
    provider.push(SseScript::data([openai::role_chunk(), openai::text_chunk("Hel")]).ending(SseEnd::Hang));
    let mut stream = served
        .client
        .run(run_request("slow", "s1", "hi", true))
        .await
        .expect("run starts")
        .into_inner();
    // The stored user event comes first, before the model has answered anything.
    let user = stream.message().await.expect("first event").expect("an event");
    assert_eq!((user.author.as_str(), user.sequence), ("user", 1), "{user:?}");
    let first = stream.message().await.expect("second event").expect("an event");
    assert_eq!(first.partial, Some(true));
    assert_eq!(first.invocation_id, user.invocation_id);
    (stream, first)
}

#[tokio::test]
async fn shutdown_ends_running_streams_with_unavailable_and_stops_the_invocation() {
    let services = RunnerServices::in_memory();
    let provider = FakeServer::start().await;
    let mut served = serve(vec![openai_app(&services, &provider)], GrpcArgs::default()).await;
    let (mut stream, first) = hanging_run(&mut served, &provider).await;

    served.shutdown.trigger();
    let status = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("the stream ends at once")
        .expect_err("with an error, never a silent end");
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("shutting down") && status.message().contains(&first.invocation_id),
        "{}",
        status.message()
    );
    assert!(
        provider.wait_for_disconnects(1, Duration::from_secs(5)).await,
        "the model request was dropped"
    );
    tokio::time::timeout(Duration::from_secs(10), served.server)
        .await
        .expect("the server drains and stops")
        .unwrap();
}

#[tokio::test]
async fn cancel_stops_a_running_invocation() {
    let services = RunnerServices::in_memory();
    let provider = FakeServer::start().await;
    let mut served = serve(vec![openai_app(&services, &provider)], GrpcArgs::default()).await;
    let (mut stream, first) = hanging_run(&mut served, &provider).await;

    let cancel = |invocation_id: &str| pb::CancelRequest {
        app_name: "slow".into(),
        user_id: "alice".into(),
        session_id: "s1".into(),
        invocation_id: invocation_id.into(),
    };
    let reply = served.client.cancel(cancel(&first.invocation_id)).await.unwrap();
    assert!(reply.into_inner().cancelled);
    let status = stream.message().await.expect_err("cancelled");
    assert_eq!(status.code(), Code::Cancelled);
    assert!(provider.wait_for_disconnects(1, Duration::from_secs(5)).await);

    let again = served.client.cancel(cancel(&first.invocation_id)).await.unwrap();
    assert!(!again.into_inner().cancelled, "nothing runs any more");
    let missing = served.client.cancel(cancel("")).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument);
    assert!(missing.message().contains("invocation_id"), "{}", missing.message());
}

#[tokio::test]
async fn requests_are_checked_before_anything_runs() {
    let services = RunnerServices::in_memory();
    let mut served = serve(vec![echo_app(&services, "echo")], GrpcArgs::default()).await;

    let unknown = served
        .client
        .run(run_request("nope", "s", "hi", false))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert_eq!(unknown.message(), "app nope is not served here (served: echo)");

    for (request, field) in [
        (run_request("bad\napp", "s", "hi", false), "app_name"),
        (run_request("echo", "", "hi", false), "session_id"),
        (
            pb::RunRequest {
                new_message: None,
                ..run_request("echo", "s", "hi", false)
            },
            "new_message",
        ),
    ] {
        let status = served.client.run(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}");
        assert!(status.message().contains(field), "{}", status.message());
    }

    let missing_session = pb::RunRequest {
        create_session: false,
        ..run_request("echo", "never-created", "hi", false)
    };
    let status = served.client.run(missing_session).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);

    let status = served
        .client
        .get_app(pb::GetAppRequest {
            app_name: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}

#[tokio::test]
async fn an_event_over_the_message_limit_ends_the_stream_saying_so() {
    let services = RunnerServices::in_memory();
    let grpc = GrpcArgs {
        max_message_bytes: 1024,
        ..GrpcArgs::default()
    };
    let mut served = serve(vec![echo_app(&services, "echo")], grpc).await;
    // The request fits; the echo adds "You said: " and the event's own fields.
    let mut stream = served
        .client
        .run(run_request("echo", "s", &"x".repeat(950), false))
        .await
        .unwrap()
        .into_inner();
    let status = stream.message().await.expect_err("too large");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("1024-byte message limit") && status.message().contains("stored in the session"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn apps_built_in_code_are_described_from_the_agent_trait_or_as_told() {
    let services = RunnerServices::in_memory();
    let lookup = FunctionTool::new("lookup", "Looks up a word.", |_ctx, args| async move {
        Ok(json!({ "word": args["word"] }))
    })
    .with_parameters_schema(json!({"type": "object", "properties": {"word": {"type": "string"}}}));
    let worker: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("worker")
            .description("Does the work.")
            .model(Arc::new(MockModel::echo()))
            .tool(Arc::new(lookup.clone()))
            .build()
            .unwrap(),
    );
    let root: Arc<dyn Agent> = Arc::new(SequentialAgent::new("flow", vec![worker.clone()]));
    let plain = App::new(Runner::new(services.runner_config("plain", root.clone())).unwrap());
    let mut described = AgentDescription::of(&root);
    described.kind = "sequential".into();
    described.sub_agents[0].kind = "llm".into();
    described.sub_agents[0].model = "mock".into();
    described.sub_agents[0].tools = vec![ToolDescription::of(&lookup)];
    let told = App::with_description(Runner::new(services.runner_config("told", root)).unwrap(), described);
    let mut served = serve(vec![told, plain], GrpcArgs::default()).await;

    let apps = served
        .client
        .list_apps(pb::ListAppsRequest {})
        .await
        .unwrap()
        .into_inner()
        .apps;
    let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["plain", "told"], "sorted by name");
    let plain = apps[0].root_agent.as_ref().unwrap();
    assert_eq!((plain.name.as_str(), plain.kind.as_str()), ("flow", "custom"));
    assert_eq!(plain.sub_agents[0].description, "Does the work.");

    let told = served
        .client
        .get_app(pb::GetAppRequest {
            app_name: "told".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let worker = &told.root_agent.unwrap().sub_agents[0];
    assert_eq!((worker.kind.as_str(), worker.model.as_str()), ("llm", "mock"));
    let tool = &worker.tools[0];
    assert_eq!(tool.name, "lookup");
    assert!(!tool.long_running);
    let schema =
        adk_grpc_core::convert::json_from_proto("parameters_schema", tool.parameters_schema.as_ref().unwrap()).unwrap();
    assert_eq!(schema["properties"]["word"]["type"], "string");
}

#[tokio::test]
async fn two_apps_with_one_name_are_refused() {
    let services = RunnerServices::in_memory();
    let apps = vec![echo_app(&services, "same"), echo_app(&services, "same")];
    let err = runner_service(apps, &GrpcArgs::default(), Shutdown::new())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("two apps are named same"), "{err}");
}
