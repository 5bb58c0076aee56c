//! How deep a JSON value can be over gRPC, measured against `adk-server` (its own
//! assembly, served in the test's process).
//!
//! The core refuses values deeper than `MAX_JSON_DEPTH` (64) with
//! `RESOURCE_EXHAUSTED`, but over gRPC protobuf decoding stops first: prost refuses a
//! message nested more than 100 levels deep, and every JSON level costs protobuf
//! levels (a list two: `Value` and `ListValue`; an object three: `Value`, `Struct`
//! and its map entry), on top of the levels of the request around the value. So the
//! deepest value a client can send depends on its shape and on where it sits. This
//! test finds the exact limits, so the Limits table of docs/security-and-limits.md and docs/semantics.md
//! can state them, and fails if they move: lists up to 49 levels and objects up to 33
//! in state and state deltas (48 and 32 as function call arguments); one level more is
//! `INVALID_ARGUMENT` and stores nothing.
//!
//! Depth counts as the core counts it: a scalar is 1, `[1]` and `{"k": 1}` are 2.

use adk_grpc_e2e::InProcessServer;
use adk_grpc_proto::ordered::value::Kind;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::unique_prefix;
use tonic::Code;
use tonic::transport::Channel;

/// The depths tried, from 1 up: well past the last one any place accepts.
const TRIED_DEPTHS: usize = 70;

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// `[[[…1…]]]`
    List,
    /// `{"k": {"k": …1…}}`
    Object,
}

/// A JSON value `depth` levels deep, of one shape.
fn nested(shape: Shape, depth: usize) -> adk_grpc_proto::ordered::Value {
    let mut value = adk_grpc_proto::ordered::Value {
        kind: Some(Kind::NumberValue(1.0)),
    };
    for _ in 1..depth {
        let kind = match shape {
            Shape::List => Kind::ListValue(adk_grpc_proto::ordered::ListValue { values: vec![value] }),
            Shape::Object => Kind::StructValue(adk_grpc_proto::ordered::Struct::from([("k".to_string(), value)])),
        };
        value = adk_grpc_proto::ordered::Value { kind: Some(kind) };
    }
    value
}

/// Where in a request the value goes.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// A value of CreateSession's `state`.
    CreateSessionState,
    /// A value of an appended event's `actions.state_delta`.
    AppendEventStateDelta,
    /// The `args` of a function call in an appended event's content.
    AppendEventFunctionCallArgs,
}

/// Sends `value` at `place` in a session of its own; Ok when the server stored it.
async fn send(
    client: &mut SessionServiceClient<Channel>,
    app: &str,
    session: &str,
    place: Place,
    value: adk_grpc_proto::ordered::Value,
) -> Result<(), tonic::Status> {
    let create = |state| pb::CreateSessionRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: session.into(),
        state,
        ..Default::default()
    };
    if let Place::CreateSessionState = place {
        let state = adk_grpc_proto::ordered::Struct::from([("deep".to_string(), value)]);
        return client.create_session(create(Some(state))).await.map(drop);
    }
    client.create_session(create(None)).await.expect("create a session");
    let mut event = pb::Event {
        author: "user".into(),
        ..Default::default()
    };
    match place {
        Place::AppendEventStateDelta => {
            event.actions = Some(pb::EventActions {
                state_delta: [("deep".to_string(), value)].into(),
                ..Default::default()
            });
        }
        Place::AppendEventFunctionCallArgs => {
            event.content = Some(pb::Content {
                role: "model".into(),
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::FunctionCall(pb::FunctionCall {
                        name: "f".into(),
                        args: Some(value),
                        id: Some("c".into()),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
            });
        }
        Place::CreateSessionState => unreachable!(),
    }
    client
        .append_event(pb::AppendEventRequest {
            app_name: app.into(),
            user_id: "u".into(),
            session_id: session.into(),
            event: Some(event),
            precondition: None,
        })
        .await
        .map(drop)
}

/// The deepest value of `shape` the server accepts at `place`. Checks on the way that
/// every deeper value is `INVALID_ARGUMENT` (not `INTERNAL`, not a dropped connection)
/// and stores nothing.
async fn deepest_accepted(client: &mut SessionServiceClient<Channel>, place: Place, shape: Shape) -> usize {
    let app = unique_prefix("nesting");
    let mut deepest = 0;
    for depth in 1..=TRIED_DEPTHS {
        let session = format!("d{depth}");
        match send(client, &app, &session, place, nested(shape, depth)).await {
            Ok(()) => {
                assert_eq!(
                    deepest,
                    depth - 1,
                    "{place:?} {shape:?}: {depth} levels accepted after a refusal"
                );
                deepest = depth;
            }
            Err(status) => {
                assert_eq!(
                    status.code(),
                    Code::InvalidArgument,
                    "{place:?} {shape:?} {depth} levels: {status:?}"
                );
                let stored = client
                    .get_session(pb::GetSessionRequest {
                        app_name: app.clone(),
                        user_id: "u".into(),
                        session_id: session.clone(),
                        ..Default::default()
                    })
                    .await;
                match place {
                    Place::CreateSessionState => {
                        let err = stored.expect_err("a refused create stores no session");
                        assert_eq!(err.code(), Code::NotFound, "{err:?}");
                    }
                    _ => {
                        let stored = stored.expect("the session").into_inner();
                        assert!(stored.events.is_empty(), "a refused append stores no event");
                    }
                }
            }
        }
    }
    assert!(deepest > 0, "{place:?} {shape:?}: nothing accepted");
    deepest
}

#[tokio::test]
async fn json_nesting_limits_over_grpc_are_exact() {
    let server = InProcessServer::all_in_one(&[]).await;
    let mut client = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    let mut measured = Vec::new();
    for place in [
        Place::CreateSessionState,
        Place::AppendEventStateDelta,
        Place::AppendEventFunctionCallArgs,
    ] {
        for shape in [Shape::List, Shape::Object] {
            let deepest = deepest_accepted(&mut client, place, shape).await;
            println!("{place:?} {shape:?}: deepest accepted {deepest} levels");
            measured.push((place, shape, deepest));
        }
    }
    // The Limits table of docs/security-and-limits.md and docs/semantics.md quote these numbers.
    let expected = [
        (Place::CreateSessionState, Shape::List, 49),
        (Place::CreateSessionState, Shape::Object, 33),
        (Place::AppendEventStateDelta, Shape::List, 49),
        (Place::AppendEventStateDelta, Shape::Object, 33),
        (Place::AppendEventFunctionCallArgs, Shape::List, 48),
        (Place::AppendEventFunctionCallArgs, Shape::Object, 32),
    ];
    let got: Vec<_> = measured.iter().map(|(p, s, d)| format!("{p:?} {s:?} {d}")).collect();
    let want: Vec<_> = expected.iter().map(|(p, s, d)| format!("{p:?} {s:?} {d}")).collect();
    assert_eq!(got, want);
}
