//! Rich errors over real gRPC: every non-OK status of `adk-server` (in-process) carries
//! `google.rpc` details in `grpc-status-details-bin` (an ErrorInfo with a stable
//! reason and the domain "adk.dev"; a BadRequest naming the field for INVALID_ARGUMENT;
//! RetryInfo where a retry may succeed), including the statuses tonic makes itself.

use adk_grpc_e2e::InProcessServer;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::RedisServer;
use std::time::Duration;
use tonic::{Code, Status};
use tonic_types::StatusExt;

const APP: &str = "assistant";
const USER: &str = "u";

/// The all-in-one server with the runner on, in the test's process: these tests are
/// about the statuses it sends, not about the process.
async fn start_server(extra: &[&str]) -> InProcessServer {
    let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
    let args: Vec<&str> = ["--agents", agents].iter().chain(extra).copied().collect();
    InProcessServer::all_in_one(&args).await
}

/// The status of a refused call, checked to carry `code` and the ErrorInfo `reason` of
/// the suite's domain, read from `grpc-status-details-bin`.
fn refused<T: std::fmt::Debug>(got: Result<T, Status>, code: Code, reason: &str) -> Status {
    let status = got.expect_err(reason);
    assert_eq!(status.code(), code, "{reason}: {}", status.message());
    assert!(!status.details().is_empty(), "{reason}: no grpc-status-details-bin");
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("{reason}: no ErrorInfo in {:?}", status.get_error_details()));
    assert_eq!(info.reason, reason, "{}", status.message());
    assert_eq!(info.domain, "adk.dev");
    status
}

fn create(session_id: &str) -> pb::CreateSessionRequest {
    pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        ..Default::default()
    }
}

fn get(session_id: &str) -> pb::GetSessionRequest {
    pb::GetSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        ..Default::default()
    }
}

fn text_event(id: &str) -> pb::Event {
    pb::Event {
        id: id.into(),
        author: "user".into(),
        invocation_id: "i-1".into(),
        content: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text("hi".into())),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_refusal_carries_a_stable_reason_in_grpc_status_details() {
    let server = start_server(&["--max-message-bytes", "65536"]).await;
    let channel = server.channel().await;
    let mut sessions = SessionServiceClient::new(channel.clone());
    let mut runner = AgentRunnerClient::new(channel.clone());

    // NOT_FOUND, told apart by reason: a session, an app.
    let missing = sessions.get_session(get("nope")).await;
    let status = refused(missing, Code::NotFound, "SESSION_NOT_FOUND");
    assert!(
        status.get_details_retry_info().is_none(),
        "a missing session stays missing"
    );
    let app = runner
        .get_app(pb::GetAppRequest {
            app_name: "no-such-app".into(),
        })
        .await;
    refused(app, Code::NotFound, "APP_NOT_FOUND");

    // INVALID_ARGUMENT names the request field in a BadRequest field violation.
    let mut bad = create("s1");
    bad.app_name = String::new();
    let status = refused(
        sessions.create_session(bad).await,
        Code::InvalidArgument,
        "INVALID_ARGUMENT",
    );
    let violations = status.get_details_bad_request().expect("BadRequest").field_violations;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].field, "app_name");
    assert!(violations[0].description.contains("app_name"), "{violations:?}");

    // ALREADY_EXISTS, and nothing stored was touched by the refused create.
    sessions.create_session(create("s1")).await.expect("created");
    refused(
        sessions.create_session(create("s1")).await,
        Code::AlreadyExists,
        "SESSION_ALREADY_EXISTS",
    );

    // A stale append precondition is PRECONDITION_FAILED, not retryable as it is.
    let first = sessions
        .append_event(pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            event: Some(text_event("e-1")),
            ..Default::default()
        })
        .await
        .expect("appended");
    assert_eq!(first.into_inner().sequence, 1);
    let stale = sessions
        .append_event(pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "s1".into(),
            event: Some(text_event("e-2")),
            precondition: Some(pb::AppendPrecondition {
                expected: Some(pb::append_precondition::Expected::LastSequence(0)),
            }),
        })
        .await;
    let status = refused(stale, Code::Aborted, "PRECONDITION_FAILED");
    assert!(status.get_details_retry_info().is_none());

    // A request over --max-message-bytes names the limit and its value.
    let mut huge = create("s2");
    let big = adk_grpc_proto::ordered::Value {
        kind: Some(adk_grpc_proto::ordered::value::Kind::StringValue("x".repeat(70_000))),
    };
    huge.state = Some(adk_grpc_proto::ordered::Struct::from([("big".to_string(), big)]));
    let status = refused(
        sessions.create_session(huge).await,
        Code::ResourceExhausted,
        "LIMIT_EXCEEDED",
    );
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(
        info.metadata.get("limit").map(String::as_str),
        Some("max_message_bytes")
    );
    assert_eq!(info.metadata.get("value").map(String::as_str), Some("65536"));
    assert!(
        status.get_details_retry_info().is_none(),
        "the same request is too large again"
    );

    // The session is as it was: one event.
    let stored = sessions.get_session(get("s1")).await.expect("s1").into_inner();
    assert_eq!(stored.events.len(), 1);
}

/// A status tonic makes itself (a method the server does not have) gets details too.
#[tokio::test]
async fn statuses_tonic_makes_itself_carry_a_reason_too() {
    let server = start_server(&[]).await;
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.expect("ready");
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/adk.v1.SessionService/NoSuchMethod");
    let codec = tonic_prost::ProstCodec::<pb::GetSessionRequest, pb::Session>::default();
    let reply = grpc.unary(tonic::Request::new(get("s")), path, codec).await;
    refused(reply, Code::Unimplemented, "UNIMPLEMENTED");
}

/// The store going away is UNAVAILABLE with a RetryInfo: a client may retry a safe call.
#[tokio::test]
async fn a_store_outage_is_unavailable_with_retry_info() {
    let mut redis = RedisServer::start().await;
    let server = start_server(&["--store-url", &redis.url()]).await;
    let mut sessions = SessionServiceClient::new(server.channel().await);
    sessions.create_session(create("s1")).await.expect("created");
    redis.stop().await;
    let mut request = tonic::Request::new(get("s1"));
    request.set_timeout(Duration::from_secs(30));
    let status = refused(sessions.get_session(request).await, Code::Unavailable, "UNAVAILABLE");
    let retry = status.get_details_retry_info().expect("RetryInfo");
    assert!(retry.retry_delay.is_some_and(|d| !d.is_zero()), "{retry:?}");
}
