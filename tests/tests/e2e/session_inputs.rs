//! Session inputs that used to crash a handler or store garbage, sent as raw protobuf
//! messages to `adk-server` (runner on, served in the test's process), on the embedded
//! memory store and on a real redis-server: each gets `INVALID_ARGUMENT` naming the field, stores nothing,
//! and the server stays up.

use adk_grpc_core::session::EventCursor;
use adk_grpc_core::validate::{MAX_SESSION_TTL, MAX_TIMESTAMP_SECONDS};
use adk_grpc_e2e::InProcessServer;
use adk_grpc_proto::ordered::value::Kind;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::RedisServer;
use tonic::Code;
use tonic::transport::Channel;

const APP: &str = "assistant";
const USER: &str = "u";

/// The all-in-one server with the runner on, in the test's process, on the memory
/// store or on `store_url`: these tests are about what it answers, not the process.
async fn start_server(store_url: Option<String>) -> InProcessServer {
    let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
    let mut args = vec!["--agents", agents];
    if let Some(url) = &store_url {
        args.extend(["--store-url", url.as_str()]);
    }
    InProcessServer::all_in_one(&args).await
}

fn refused<T: std::fmt::Debug>(case: &str, field: &str, got: Result<T, tonic::Status>) {
    match got {
        Ok(reply) => panic!("{case}: expected INVALID_ARGUMENT, got a reply: {reply:?}"),
        Err(status) => {
            assert_eq!(status.code(), Code::InvalidArgument, "{case}: {}", status.message());
            assert!(
                status.message().contains(field),
                "{case}: {:?} should name {field}",
                status.message()
            );
        }
    }
}

fn no_kind() -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value { kind: None }
}

fn null() -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(Kind::NullValue(0)),
    }
}

fn list(values: Vec<adk_grpc_proto::ordered::Value>) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(Kind::ListValue(adk_grpc_proto::ordered::ListValue { values })),
    }
}

fn object(pairs: Vec<(&str, adk_grpc_proto::ordered::Value)>) -> adk_grpc_proto::ordered::Struct {
    adk_grpc_proto::ordered::Struct::from_iter(pairs.into_iter().map(|(k, v)| (k.to_string(), v)))
}

fn struct_value(pairs: Vec<(&str, adk_grpc_proto::ordered::Value)>) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(Kind::StructValue(object(pairs))),
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

fn create(
    session_id: &str,
    state: Option<adk_grpc_proto::ordered::Struct>,
    ttl: Option<prost_types::Duration>,
) -> pb::CreateSessionRequest {
    pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        state,
        ttl,
    }
}

fn append(session_id: &str, event: pb::Event) -> pb::AppendEventRequest {
    pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        event: Some(event),
        precondition: None,
    }
}

fn model_event(part: pb::part::Kind) -> pb::Event {
    pb::Event {
        author: "model".into(),
        content: Some(pb::Content {
            role: "model".into(),
            parts: vec![pb::Part {
                kind: Some(part),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

/// Values with no kind set (what a misspelled field produces in common client libraries)
/// in every place a request carries JSON.
async fn values_with_no_kind_are_refused_naming_the_key(channel: Channel) {
    let mut sessions = SessionServiceClient::new(channel.clone());
    for (state, named) in [
        (object(vec![("color", no_kind())]), r#"state["color"]"#),
        (
            object(vec![
                ("ok", null()),
                ("a", list(vec![null(), struct_value(vec![("b", no_kind())])])),
            ]),
            r#"state["a"][1]["b"]"#,
        ),
    ] {
        refused(
            "create with a kind-less state value",
            named,
            sessions.create_session(create("kindless", Some(state), None)).await,
        );
        let missing = sessions.get_session(get("kindless")).await.unwrap_err();
        assert_eq!(missing.code(), Code::NotFound, "a refused create stores nothing");
    }

    // An explicit null stays valid.
    let created = sessions
        .create_session(create("s", Some(object(vec![("k", null())])), None))
        .await
        .expect("null_value is a value")
        .into_inner();
    assert_eq!(created.state.unwrap()["k"], null());
    let before = sessions.get_session(get("s")).await.unwrap().into_inner();

    let mut delta = pb::Event {
        author: "user".into(),
        actions: Some(pb::EventActions::default()),
        ..Default::default()
    };
    delta
        .actions
        .as_mut()
        .unwrap()
        .state_delta
        .extend([("k".to_string(), no_kind()), ("fine".to_string(), null())]);
    refused(
        "append with a kind-less state_delta value",
        r#"event.actions.state_delta["k"]"#,
        sessions.append_event(append("s", delta)).await,
    );
    let call = model_event(pb::part::Kind::FunctionCall(pb::FunctionCall {
        name: "f".into(),
        args: Some(struct_value(vec![("x", list(vec![no_kind()]))])),
        id: None,
        ..Default::default()
    }));
    refused(
        "append with kind-less function args",
        r#"event.content.parts[0].function_call.args["x"][0]"#,
        sessions.append_event(append("s", call)).await,
    );
    let response = model_event(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
        name: "f".into(),
        response: Some(no_kind()),
        id: None,
        ..Default::default()
    }));
    refused(
        "append with a kind-less function response",
        "event.content.parts[0].function_response.response",
        sessions.append_event(append("s", response)).await,
    );
    assert_eq!(
        sessions.get_session(get("s")).await.unwrap().into_inner(),
        before,
        "refused appends changed nothing"
    );

    let mut runner = AgentRunnerClient::new(channel);
    let run = |state_delta, new_message| pb::RunRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "run".into(),
        new_message: Some(new_message),
        state_delta,
        run_config: None,
        create_session: true,
        ..Default::default()
    };
    let hello = pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text("hi".into())),
            ..Default::default()
        }],
    };
    refused(
        "run with a kind-less state_delta value",
        r#"state_delta["k"]"#,
        runner.run(run([("k".to_string(), no_kind())].into(), hello)).await,
    );
    let answer = pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                name: "f".into(),
                response: Some(struct_value(vec![("r", no_kind())])),
                id: Some("c1".into()),
                ..Default::default()
            })),
            ..Default::default()
        }],
    };
    refused(
        "run with a kind-less function response",
        r#"new_message.parts[0].function_response.response["r"]"#,
        runner.run(run(Default::default(), answer)).await,
    );
    let missing = sessions.get_session(get("run")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "a refused run creates no session");
}

/// The inputs of the issue that panicked the memory store or stored garbage.
async fn forged_tokens_huge_ttls_and_far_times_are_refused(channel: Channel) {
    let mut sessions = SessionServiceClient::new(channel);
    sessions
        .create_session(create("log", None, None))
        .await
        .expect("create");
    for _ in 0..3 {
        let event = pb::Event {
            author: "user".into(),
            ..Default::default()
        };
        sessions.append_event(append("log", event)).await.expect("append");
    }
    let list = |session_id: &str, page_token: String| pb::ListEventsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: session_id.into(),
        page_size: 2,
        page_token,
        newest_first: false,
    };
    // base64url of `events.v1.asc.18446744073709551615`: the memory store panicked on it.
    let issue = "ZXZlbnRzLnYxLmFzYy4xODQ0Njc0NDA3MzcwOTU1MTYxNQ".to_string();
    refused(
        "the issue's token",
        "page_token",
        sessions.list_events(list("log", issue)).await,
    );
    let listing = adk_grpc_core::ListEventsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "log".into(),
        ..Default::default()
    };
    let at = |sequence| {
        EventCursor {
            sequence,
            newest_first: false,
        }
        .encode(&listing)
    };
    refused(
        "a sequence no log holds",
        "page_token",
        sessions.list_events(list("log", at(u64::MAX))).await,
    );
    let past_end = sessions
        .list_events(list("log", at(1 << 40)))
        .await
        .expect("a position past the end")
        .into_inner();
    assert!(past_end.events.is_empty() && past_end.next_page_token.is_empty());
    let first = sessions
        .list_events(list("log", String::new()))
        .await
        .unwrap()
        .into_inner();
    sessions
        .create_session(create("other", None, None))
        .await
        .expect("create");
    refused(
        "a token of another session",
        "page_token",
        sessions.list_events(list("other", first.next_page_token)).await,
    );

    let seconds = |seconds| Some(prost_types::Duration { seconds, nanos: 0 });
    for ttl in [i64::MAX, 1_000_000_000_000, MAX_SESSION_TTL.as_secs() as i64 + 1] {
        refused(
            &format!("ttl {ttl} s"),
            "ttl",
            sessions.create_session(create("ttl", None, seconds(ttl))).await,
        );
    }
    let longest = sessions
        .create_session(create("ttl", None, seconds(MAX_SESSION_TTL.as_secs() as i64)))
        .await
        .expect("the maximum TTL")
        .into_inner();
    let expiry = longest.expire_time.expect("an expire_time");
    assert!(
        expiry.seconds <= MAX_TIMESTAMP_SECONDS && (0..1_000_000_000).contains(&expiry.nanos),
        "expire_time is a valid Timestamp: {expiry:?}"
    );

    let before = sessions.get_session(get("log")).await.unwrap().into_inner();
    for seconds in [-62_135_596_801, 253_402_300_800] {
        let event = pb::Event {
            author: "user".into(),
            timestamp: Some(prost_types::Timestamp { seconds, nanos: 0 }),
            ..Default::default()
        };
        refused(
            &format!("event timestamp {seconds} s"),
            "event.timestamp",
            sessions.append_event(append("log", event)).await,
        );
    }
    assert_eq!(sessions.get_session(get("log")).await.unwrap().into_inner(), before);
}

async fn check(store_url: Option<String>) {
    let server = start_server(store_url).await;
    let channel = server.channel().await;
    values_with_no_kind_are_refused_naming_the_key(channel.clone()).await;
    forged_tokens_huge_ttls_and_far_times_are_refused(channel).await;
    assert!(server.is_running(), "the server stopped");
}

#[tokio::test]
async fn bad_session_inputs_are_refused_on_the_memory_store() {
    check(None).await;
}

#[tokio::test]
async fn bad_session_inputs_are_refused_on_redis() {
    let redis = RedisServer::start().await;
    check(Some(redis.url())).await;
}
