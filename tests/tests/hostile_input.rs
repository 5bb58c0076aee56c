//! Hostile input against the real all-in-one binary (`adk-server` with the runner on,
//! a real redis-server behind it): a corpus of bad requests for every RPC of
//! SessionService, ArtifactService and AgentRunner. Each must get its exact status
//! code, the server must stay up (health and a good request after every batch), and
//! the stored data must be byte for byte what it was (a DUMP of every Redis key).

use adk_proto::v1 as pb;
use adk_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_proto::v1::session_service_client::SessionServiceClient;
use adk_proto::v1::upload_artifact_request::Message as UploadMessage;
use adk_testkit::{RedisServer, ServiceProcess};
use futures::StreamExt;
use prost_types::value::Kind;
use std::collections::BTreeMap;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const APP: &str = "assistant";
const USER: &str = "u";
const SESSION: &str = "s1";
const FILE: &str = "notes.txt";
const MIB: usize = 1024 * 1024;

/// Ids no store may ever see: control characters (NUL, newline, DEL, C1), only
/// whitespace, empty and too long. (Key separators, glob and hash-tag characters, paths
/// and non-ASCII are ids like any other: see the conformance suites' hostile-id cases.)
fn bad_ids() -> Vec<String> {
    ["a\0b", "a\nb", "\u{7f}", "c1\u{85}", "   ", ""]
        .iter()
        .map(|s| s.to_string())
        .chain([&"x".repeat(129), &"y".repeat(100_000)].map(String::clone))
        .collect()
}

/// File names the artifact rules refuse.
fn bad_file_names() -> Vec<String> {
    ["", "/etc/passwd", "../x", "a/../b", "a\0b", ".."]
        .iter()
        .map(|s| s.to_string())
        .chain([&"f".repeat(1025)].map(String::clone))
        .collect()
}

fn string_value(s: String) -> prost_types::Value {
    prost_types::Value {
        kind: Some(Kind::StringValue(s)),
    }
}

/// A JSON value `depth` lists deep.
fn nested(depth: usize) -> prost_types::Value {
    let mut value = prost_types::Value {
        kind: Some(Kind::NumberValue(1.0)),
    };
    for _ in 1..depth {
        value = prost_types::Value {
            kind: Some(Kind::ListValue(prost_types::ListValue { values: vec![value] })),
        };
    }
    value
}

fn state(pairs: Vec<(String, prost_types::Value)>) -> Option<prost_types::Struct> {
    Some(prost_types::Struct {
        fields: pairs.into_iter().collect(),
    })
}

fn text_part(text: &str) -> Option<pb::Part> {
    Some(pb::Part {
        kind: Some(pb::part::Kind::Text(text.into())),
        ..Default::default()
    })
}

fn user_event(text: &str) -> pb::Event {
    pb::Event {
        author: "user".into(),
        content: Some(pb::Content {
            role: "user".into(),
            parts: vec![text_part(text).unwrap()],
        }),
        ..Default::default()
    }
}

fn at(app: &str, user: &str, session: &str, file: &str) -> Option<pb::ArtifactRef> {
    Some(pb::ArtifactRef {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        file_name: file.into(),
    })
}

fn good_ref() -> Option<pb::ArtifactRef> {
    at(APP, USER, SESSION, FILE)
}

/// Unpadded base64url, as the page tokens are written.
fn b64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Asserts the code of one hostile call, naming the case on failure.
fn expect<T: std::fmt::Debug>(case: &str, want: Code, got: Result<T, tonic::Status>) {
    match got {
        Ok(reply) => panic!("{case}: expected {want:?}, got a reply: {reply:?}"),
        Err(status) => assert_eq!(status.code(), want, "{case}: {}", status.message()),
    }
}

/// Asserts the code of one hostile call and that its message names `field` (the field
/// of the request the client sent) and says nothing of `foreign` (another request's
/// field or advice).
fn expect_naming<T: std::fmt::Debug>(
    case: &str,
    want: Code,
    field: &str,
    foreign: &[&str],
    got: Result<T, tonic::Status>,
) {
    match got {
        Ok(reply) => panic!("{case}: expected {want:?}, got a reply: {reply:?}"),
        Err(status) => {
            assert_eq!(status.code(), want, "{case}: {}", status.message());
            assert!(
                status.message().contains(field),
                "{case}: {field:?} not in {:?}",
                status.message()
            );
            for foreign in foreign {
                assert!(
                    !status.message().contains(foreign),
                    "{case}: {foreign:?} in {:?}",
                    status.message()
                );
            }
        }
    }
}

/// The first status of a server stream: the call's or its first item's.
async fn stream_status<T: std::fmt::Debug>(
    call: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
) -> Result<T, tonic::Status> {
    let mut stream = call?.into_inner();
    match stream.next().await {
        Some(item) => item,
        None => Err(tonic::Status::ok("the stream ended without an item or a status")),
    }
}

struct Stack {
    redis: RedisServer,
    server: ServiceProcess,
    channel: Channel,
}

impl Stack {
    async fn start() -> Stack {
        let redis = RedisServer::start().await;
        let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
        let args = [
            "--store-url",
            &redis.url(),
            "--agents",
            agents,
            "--metrics-listen",
            "off",
        ]
        .map(String::from);
        let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
        let channel = Channel::from_shared(server.endpoint())
            .unwrap()
            .connect()
            .await
            .expect("connect");
        Stack { redis, server, channel }
    }

    fn sessions(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::new(self.channel.clone()).max_decoding_message_size(64 * MIB)
    }

    fn artifacts(&self) -> ArtifactServiceClient<Channel> {
        ArtifactServiceClient::new(self.channel.clone())
            .max_decoding_message_size(64 * MIB)
            .max_encoding_message_size(64 * MIB)
    }

    fn runner(&self) -> AgentRunnerClient<Channel> {
        AgentRunnerClient::new(self.channel.clone())
    }

    /// Every key with its type and DUMP, sorted: the whole stored state.
    async fn snapshot(&self) -> BTreeMap<String, (String, Vec<u8>)> {
        let mut connection = self.redis.connection().await;
        let mut keys: Vec<String> = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut connection)
                .await
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        let mut snapshot = BTreeMap::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut connection).await.unwrap();
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query_async(&mut connection).await.unwrap();
            snapshot.insert(key, (kind, dump));
        }
        snapshot
    }

    /// The server answers health and a good read after a batch, and stored nothing.
    async fn still_serving(&mut self, before: &BTreeMap<String, (String, Vec<u8>)>, batch: &str) {
        assert!(
            self.server.is_running(),
            "{batch}: the server died\n{}",
            self.server.tail_log(40)
        );
        let health = HealthClient::new(self.channel.clone())
            .check(HealthCheckRequest { service: String::new() })
            .await
            .unwrap_or_else(|e| panic!("{batch}: health failed: {e}"));
        assert_eq!(health.into_inner().status, ServingStatus::Serving as i32, "{batch}");
        let session = self
            .sessions()
            .get_session(pb::GetSessionRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{batch}: a good request failed: {e}"))
            .into_inner();
        assert_eq!(session.events.len(), 1, "{batch}");
        let after = self.snapshot().await;
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{batch}: keys changed"
        );
        assert!(before == &after, "{batch}: stored values changed");
    }
}

/// One session with one event and one artifact version: what the hostile calls must not touch.
async fn seed(stack: &Stack) {
    let mut sessions = stack.sessions();
    sessions
        .create_session(pb::CreateSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            state: state(vec![("k".into(), string_value("v".into()))]),
            ttl: None,
        })
        .await
        .expect("create");
    sessions
        .append_event(pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            event: Some(user_event("hello")),
            precondition: None,
        })
        .await
        .expect("append");
    stack
        .artifacts()
        .save_artifact(pb::SaveArtifactRequest {
            r#ref: good_ref(),
            part: text_part("v1"),
            version: None,
            custom_metadata: None,
        })
        .await
        .expect("save");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_exact_codes_and_change_nothing() {
    let mut stack = Stack::start().await;
    seed(&stack).await;
    let before = stack.snapshot().await;
    assert!(!before.is_empty());

    session_ids(&stack).await;
    stack.still_serving(&before, "session ids").await;
    session_values(&stack).await;
    stack.still_serving(&before, "session values").await;
    session_numbers_and_tokens(&stack).await;
    stack.still_serving(&before, "session numbers and tokens").await;
    artifact_requests(&stack).await;
    stack.still_serving(&before, "artifact requests").await;
    upload_and_download_misuse(&stack).await;
    stack.still_serving(&before, "upload and download").await;
    runner_requests(&stack).await;
    stack.still_serving(&before, "runner requests").await;
    transport_abuse(&stack).await;
    stack.still_serving(&before, "transport abuse").await;
}

/// A hostile call whose reply does not matter, only its status.
type Call = futures::future::BoxFuture<'static, Result<(), tonic::Status>>;

/// Every SessionService call that names one session, as (RPC, call) rows, for the ids
/// given. Create is left out for an empty session id, which means "generate one".
fn calls_naming_a_session(
    c: &SessionServiceClient<Channel>,
    app: &str,
    user: &str,
    session: &str,
) -> Vec<(&'static str, Call)> {
    let (app, user, session) = (app.to_string(), user.to_string(), session.to_string());
    let mut rows: Vec<(&'static str, Call)> = Vec::new();
    if !session.is_empty() {
        let (mut c, request) = (
            c.clone(),
            pb::CreateSessionRequest {
                app_name: app.clone(),
                user_id: user.clone(),
                session_id: session.clone(),
                ..Default::default()
            },
        );
        rows.push((
            "create",
            Box::pin(async move { c.create_session(request).await.map(drop) }),
        ));
    }
    let (mut c1, get) = (
        c.clone(),
        pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: session.clone(),
            ..Default::default()
        },
    );
    rows.push(("get", Box::pin(async move { c1.get_session(get).await.map(drop) })));
    let (mut c2, delete) = (
        c.clone(),
        pb::DeleteSessionRequest {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: session.clone(),
        },
    );
    rows.push((
        "delete",
        Box::pin(async move { c2.delete_session(delete).await.map(drop) }),
    ));
    let (mut c3, append) = (
        c.clone(),
        pb::AppendEventRequest {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: session.clone(),
            event: Some(user_event("x")),
            precondition: None,
        },
    );
    rows.push((
        "append",
        Box::pin(async move { c3.append_event(append).await.map(drop) }),
    ));
    let (mut c4, list_events) = (
        c.clone(),
        pb::ListEventsRequest {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: session.clone(),
            ..Default::default()
        },
    );
    rows.push((
        "list events",
        Box::pin(async move { c4.list_events(list_events).await.map(drop) }),
    ));
    let (mut c5, watch) = (
        c.clone(),
        pb::WatchSessionRequest {
            app_name: app,
            user_id: user,
            session_id: session,
            after_sequence: None,
        },
    );
    rows.push((
        "watch",
        Box::pin(async move { stream_status(c5.watch_session(watch).await).await.map(drop) }),
    ));
    rows
}

async fn session_ids(stack: &Stack) {
    let c = stack.sessions();
    for bad in bad_ids() {
        let case = format!("id {:?}", adk_core::validate::quoted(&bad));
        let ids = [
            (bad.as_str(), USER, SESSION),
            (APP, bad.as_str(), SESSION),
            (APP, USER, bad.as_str()),
        ];
        for (i, (app, user, session)) in ids.into_iter().enumerate() {
            for (rpc, call) in calls_naming_a_session(&c, app, user, session) {
                expect(&format!("{rpc} {case} at {i}"), Code::InvalidArgument, call.await);
            }
        }
        let mut c = c.clone();
        let list = pb::ListSessionsRequest {
            app_name: bad.clone(),
            user_id: USER.into(),
            ..Default::default()
        };
        expect(
            &format!("list {case}"),
            Code::InvalidArgument,
            c.list_sessions(list).await,
        );
        // An event id and a precondition id are ids too.
        let mut event = user_event("x");
        event.id = bad.clone();
        if !bad.is_empty() {
            let append = pb::AppendEventRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                event: Some(event),
                precondition: Some(pb::AppendPrecondition {
                    expected: Some(pb::append_precondition::Expected::LastEventId(bad.clone())),
                }),
            };
            expect(
                &format!("append event.id {case}"),
                Code::InvalidArgument,
                c.append_event(append).await,
            );
        }
    }
}

async fn session_values(stack: &Stack) {
    let mut c = stack.sessions();
    let oversized = string_value("x".repeat(MIB + 1));
    let too_deep_for_protobuf = nested(200);
    let many_keys: Vec<_> = (0..1001)
        .map(|i| (format!("k{i}"), string_value(String::new())))
        .collect();
    type Pairs = Vec<(String, prost_types::Value)>;
    let values: Vec<(&str, Code, Pairs)> = vec![
        (
            "1 MiB + 1 value",
            Code::ResourceExhausted,
            vec![("big".into(), oversized.clone())],
        ),
        ("1001 keys", Code::ResourceExhausted, many_keys),
        // Protobuf decoding stops at 100 levels of messages (two per list level, so about
        // 48 JSON levels): deeper values never reach the core's 64-level rule over gRPC.
        (
            "200 levels",
            Code::InvalidArgument,
            vec![("deep".into(), too_deep_for_protobuf)],
        ),
        (
            "empty key",
            Code::InvalidArgument,
            vec![(String::new(), string_value("v".into()))],
        ),
        (
            "scope with no name",
            Code::InvalidArgument,
            vec![("user:".into(), string_value("v".into()))],
        ),
    ];
    for (case, want, pairs) in values {
        let create = pb::CreateSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "fresh".into(),
            state: state(pairs.clone()),
            ttl: None,
        };
        expect(&format!("create state {case}"), want, c.create_session(create).await);
        let mut event = user_event("x");
        event.actions = Some(pb::EventActions {
            state_delta: pairs.into_iter().collect(),
            ..Default::default()
        });
        let append = pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            event: Some(event),
            precondition: None,
        };
        expect(&format!("append delta {case}"), want, c.append_event(append).await);
    }
    // An event over 1 MiB encoded, though within the 4 MiB message limit.
    let append = pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        event: Some(user_event(&"x".repeat(MIB + 10))),
        precondition: None,
    };
    expect(
        "append 1 MiB event",
        Code::ResourceExhausted,
        c.append_event(append).await,
    );

    // A part with no kind; a bad timestamp; a ttl of zero.
    let mut event = user_event("x");
    event.content.as_mut().unwrap().parts.push(pb::Part {
        kind: None,
        ..Default::default()
    });
    let append = |event| pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        event: Some(event),
        precondition: None,
    };
    expect(
        "append part with no kind",
        Code::InvalidArgument,
        c.append_event(append(event)).await,
    );
    for (seconds, nanos) in [
        (0, -1),
        (0, 1_000_000_000),
        (253_402_300_800 * 1000, 0),
        (i64::MIN, 0),
        (i64::MAX, 0),
    ] {
        let mut event = user_event("x");
        event.timestamp = Some(prost_types::Timestamp { seconds, nanos });
        expect(
            &format!("append timestamp {seconds}s {nanos}ns"),
            Code::InvalidArgument,
            c.append_event(append(event)).await,
        );
        let get = pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            num_recent_events: None,
            after: Some(prost_types::Timestamp { seconds, nanos }),
            since_compaction: false,
        };
        expect(
            &format!("get after {seconds}s {nanos}ns"),
            Code::InvalidArgument,
            c.get_session(get).await,
        );
    }
    let create = pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "fresh".into(),
        state: None,
        ttl: Some(prost_types::Duration { seconds: -1, nanos: 0 }),
    };
    expect("create ttl -1s", Code::InvalidArgument, c.create_session(create).await);
}

async fn session_numbers_and_tokens(stack: &Stack) {
    let mut c = stack.sessions();
    // A real event token, valid base64 of other content, garbage, a huge string.
    let event_token = {
        let page = c
            .list_events(pb::ListEventsRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                page_size: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        // One event, one page: forge the token of the same kind the server writes.
        assert!(page.next_page_token.is_empty());
        let log = adk_core::ListEventsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            ..Default::default()
        };
        adk_core::session::EventCursor {
            sequence: 1,
            newest_first: false,
        }
        .encode(&log)
    };
    let listing = adk_core::ListRequest {
        app_name: APP.into(),
        user_id: Some(USER.into()),
        ..Default::default()
    };
    let session_token = adk_core::session::SessionCursor {
        update_micros: 0,
        member: SESSION.into(),
    }
    .encode(&listing);
    let forged = [
        b64("hello world"),
        b64("sessions.v1.notatime.s1"),
        b64("sessions.v1.0.a:b:c"),
        b64("sessions.v1.0.{x}"),
        b64("events.v1.sideways.1"),
        b64("events.v1.asc.-1"),
        b64("events.v1.asc.99999999999999999999999"),
        "!!!not base64!!!".to_string(),
        "x".repeat(100_000),
    ];
    for token in forged.iter().chain([&event_token]) {
        let list = pb::ListSessionsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            page_size: 10,
            page_token: token.clone(),
        };
        expect(
            &format!("list sessions token {}", &token[..token.len().min(40)]),
            Code::InvalidArgument,
            c.list_sessions(list).await,
        );
    }
    for token in forged.iter().chain([&session_token]) {
        let list = pb::ListEventsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            page_size: 10,
            page_token: token.clone(),
            newest_first: false,
        };
        expect(
            &format!("list events token {}", &token[..token.len().min(40)]),
            Code::InvalidArgument,
            c.list_events(list).await,
        );
    }
    // A token of the other direction.
    let list = pb::ListEventsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        page_size: 10,
        page_token: event_token.clone(),
        newest_first: true,
    };
    expect(
        "list events token of the other order",
        Code::InvalidArgument,
        c.list_events(list).await,
    );
    for size in [-1, i32::MIN] {
        let list = pb::ListSessionsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            page_size: size,
            page_token: String::new(),
        };
        expect(
            &format!("list sessions page_size {size}"),
            Code::InvalidArgument,
            c.list_sessions(list).await,
        );
        let list = pb::ListEventsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            page_size: size,
            ..Default::default()
        };
        expect(
            &format!("list events page_size {size}"),
            Code::InvalidArgument,
            c.list_events(list).await,
        );
        let get = pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            num_recent_events: Some(size),
            after: None,
            since_compaction: false,
        };
        expect(
            &format!("get num_recent_events {size}"),
            Code::InvalidArgument,
            c.get_session(get).await,
        );
    }
    // Absurd but valid sizes are capped, not refused.
    let list = pb::ListSessionsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        page_size: i32::MAX,
        page_token: String::new(),
    };
    assert_eq!(
        c.list_sessions(list)
            .await
            .expect("i32::MAX page")
            .into_inner()
            .sessions
            .len(),
        1
    );
    // A precondition far in the future of the log.
    let append = pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        event: Some(user_event("x")),
        precondition: Some(pb::AppendPrecondition {
            expected: Some(pb::append_precondition::Expected::LastSequence(u64::MAX)),
        }),
    };
    expect(
        "append precondition u64::MAX",
        Code::Aborted,
        c.append_event(append).await,
    );
    // Missing sessions.
    let append = pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "missing".into(),
        event: Some(user_event("x")),
        precondition: None,
    };
    expect(
        "append to a missing session",
        Code::NotFound,
        c.append_event(append).await,
    );
    let append = pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        event: None,
        precondition: None,
    };
    expect(
        "append without an event",
        Code::InvalidArgument,
        c.append_event(append).await,
    );
}

async fn artifact_requests(stack: &Stack) {
    let mut c = stack.artifacts();
    let mut refs: Vec<(String, Option<pb::ArtifactRef>)> = Vec::new();
    for bad in bad_ids() {
        let q = adk_core::validate::quoted(&bad);
        refs.push((format!("app {q}"), at(&bad, USER, SESSION, FILE)));
        refs.push((format!("user {q}"), at(APP, &bad, SESSION, FILE)));
        refs.push((format!("session {q}"), at(APP, USER, &bad, FILE)));
    }
    for bad in bad_file_names() {
        refs.push((
            format!("file {}", adk_core::validate::quoted(&bad)),
            at(APP, USER, SESSION, &bad),
        ));
    }
    refs.push(("no ref".into(), None));
    for (case, r) in &refs {
        let save = pb::SaveArtifactRequest {
            r#ref: r.clone(),
            part: text_part("x"),
            version: None,
            custom_metadata: None,
        };
        expect(
            &format!("save {case}"),
            Code::InvalidArgument,
            c.save_artifact(save).await,
        );
        let load = pb::LoadArtifactRequest {
            r#ref: r.clone(),
            version: None,
        };
        expect(
            &format!("load {case}"),
            Code::InvalidArgument,
            c.load_artifact(load).await,
        );
        let meta = pb::GetArtifactMetadataRequest {
            r#ref: r.clone(),
            version: None,
        };
        expect(
            &format!("metadata {case}"),
            Code::InvalidArgument,
            c.get_artifact_metadata(meta).await,
        );
        let delete = pb::DeleteArtifactRequest {
            r#ref: r.clone(),
            version: None,
        };
        expect(
            &format!("delete {case}"),
            Code::InvalidArgument,
            c.delete_artifact(delete).await,
        );
        let versions = pb::ListVersionsRequest { r#ref: r.clone() };
        expect(
            &format!("versions {case}"),
            Code::InvalidArgument,
            c.list_versions(versions).await,
        );
        let download = pb::DownloadArtifactRequest {
            r#ref: r.clone(),
            version: None,
            chunk_size: 0,
        };
        expect(
            &format!("download {case}"),
            Code::InvalidArgument,
            stream_status(c.download_artifact(download).await).await,
        );
        let header = pb::UploadHeader {
            r#ref: r.clone(),
            mime_type: "text/plain".into(),
            ..Default::default()
        };
        expect(
            &format!("upload {case}"),
            Code::InvalidArgument,
            upload(&mut c, vec![header_msg(header), chunk_msg(b"x")]).await,
        );
    }
    // An empty session id lists the user's "user:" names: not an error.
    for bad in bad_ids().into_iter().filter(|bad| !bad.is_empty()) {
        let list = pb::ListArtifactsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: bad.clone(),
        };
        expect(
            &format!("list session {bad:?}"),
            Code::InvalidArgument,
            c.list_artifacts(list).await,
        );
    }
    // Versions: 0, negative and absurd.
    for version in [0, -1, i64::MIN] {
        let case = format!("version {version}");
        let load = pb::LoadArtifactRequest {
            r#ref: good_ref(),
            version: Some(version),
        };
        expect(
            &format!("load {case}"),
            Code::InvalidArgument,
            c.load_artifact(load).await,
        );
        let save = pb::SaveArtifactRequest {
            r#ref: good_ref(),
            part: text_part("x"),
            version: Some(version),
            custom_metadata: None,
        };
        expect(
            &format!("save {case}"),
            Code::InvalidArgument,
            c.save_artifact(save).await,
        );
        let delete = pb::DeleteArtifactRequest {
            r#ref: good_ref(),
            version: Some(version),
        };
        expect(
            &format!("delete {case}"),
            Code::InvalidArgument,
            c.delete_artifact(delete).await,
        );
    }
    let load = pb::LoadArtifactRequest {
        r#ref: good_ref(),
        version: Some(i64::MAX),
    };
    expect("load version i64::MAX", Code::NotFound, c.load_artifact(load).await);
    let meta = pb::GetArtifactMetadataRequest {
        r#ref: good_ref(),
        version: Some(i64::MAX),
    };
    expect(
        "metadata version i64::MAX",
        Code::NotFound,
        c.get_artifact_metadata(meta).await,
    );
    let save = pb::SaveArtifactRequest {
        r#ref: good_ref(),
        part: text_part("x"),
        version: Some(1),
        custom_metadata: None,
    };
    expect(
        "save an existing version",
        Code::AlreadyExists,
        c.save_artifact(save).await,
    );
    // Parts the artifact store cannot hold.
    for (case, part) in [
        ("no part", None),
        (
            "part with no kind",
            Some(pb::Part {
                kind: None,
                ..Default::default()
            }),
        ),
        (
            "function call part",
            Some(pb::Part {
                kind: Some(pb::part::Kind::FunctionCall(pb::FunctionCall {
                    name: "f".into(),
                    ..Default::default()
                })),
                ..Default::default()
            }),
        ),
    ] {
        let save = pb::SaveArtifactRequest {
            r#ref: good_ref(),
            part,
            version: None,
            custom_metadata: None,
        };
        expect(
            &format!("save {case}"),
            Code::InvalidArgument,
            c.save_artifact(save).await,
        );
    }
    // A unary save over the message limit.
    let save = pb::SaveArtifactRequest {
        r#ref: good_ref(),
        part: text_part(&"x".repeat(5 * MIB)),
        version: None,
        custom_metadata: None,
    };
    expect("save 5 MiB unary", Code::ResourceExhausted, c.save_artifact(save).await);
    let download = pb::DownloadArtifactRequest {
        r#ref: good_ref(),
        version: Some(i64::MAX),
        chunk_size: 0,
    };
    expect(
        "download version i64::MAX",
        Code::NotFound,
        stream_status(c.download_artifact(download).await).await,
    );
}

fn header_msg(header: pb::UploadHeader) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Header(header)),
    }
}

fn chunk_msg(bytes: &[u8]) -> pb::UploadArtifactRequest {
    pb::UploadArtifactRequest {
        message: Some(UploadMessage::Chunk(bytes.to_vec())),
    }
}

async fn upload(
    c: &mut ArtifactServiceClient<Channel>,
    messages: Vec<pb::UploadArtifactRequest>,
) -> Result<pb::SaveArtifactResponse, tonic::Status> {
    c.upload_artifact(futures::stream::iter(messages))
        .await
        .map(|r| r.into_inner())
}

async fn upload_and_download_misuse(stack: &Stack) {
    let mut c = stack.artifacts();
    let header = || pb::UploadHeader {
        r#ref: good_ref(),
        mime_type: "text/plain".into(),
        ..Default::default()
    };
    expect(
        "upload chunk first",
        Code::InvalidArgument,
        upload(&mut c, vec![chunk_msg(b"x"), header_msg(header())]).await,
    );
    expect(
        "upload two headers",
        Code::InvalidArgument,
        upload(&mut c, vec![header_msg(header()), header_msg(header())]).await,
    );
    expect("upload nothing", Code::InvalidArgument, upload(&mut c, vec![]).await);
    expect(
        "upload empty oneof",
        Code::InvalidArgument,
        upload(&mut c, vec![pb::UploadArtifactRequest { message: None }]).await,
    );
    let mut no_mime = header();
    no_mime.mime_type = String::new();
    expect(
        "upload without a MIME type",
        Code::InvalidArgument,
        upload(&mut c, vec![header_msg(no_mime)]).await,
    );
    let mut huge = header();
    huge.size_bytes = Some(u64::MAX);
    expect(
        "upload declaring u64::MAX bytes",
        Code::ResourceExhausted,
        upload(&mut c, vec![header_msg(huge)]).await,
    );
    for version in [0, -1] {
        let mut h = header();
        h.version = Some(version);
        expect(
            &format!("upload version {version}"),
            Code::InvalidArgument,
            upload(&mut c, vec![header_msg(h), chunk_msg(b"x")]).await,
        );
    }
    // A chunk message over --max-message-bytes.
    let big = vec![b'x'; 5 * MIB];
    expect(
        "upload 5 MiB chunk message",
        Code::ResourceExhausted,
        upload(&mut c, vec![header_msg(header()), chunk_msg(&big)]).await,
    );
    let mut exists = header();
    exists.version = Some(1);
    expect(
        "upload existing version",
        Code::AlreadyExists,
        upload(&mut c, vec![header_msg(exists), chunk_msg(b"x")]).await,
    );
    // Chunk sizes the download refuses.
    let download = pb::DownloadArtifactRequest {
        r#ref: good_ref(),
        version: None,
        chunk_size: u32::MAX,
    };
    let got = stream_status(c.download_artifact(download).await).await;
    // A chunk size over the maximum is capped or refused; either way nothing breaks.
    if let Err(status) = got {
        assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
    }
}

async fn runner_requests(stack: &Stack) {
    let mut c = stack.runner();
    let run = |app: &str, user: &str, session: &str, message: Option<pb::Content>| pb::RunRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        new_message: message,
        state_delta: Default::default(),
        run_config: None,
        create_session: true,
        ..Default::default()
    };
    let hello = || {
        Some(pb::Content {
            role: "user".into(),
            parts: vec![text_part("hi").unwrap()],
        })
    };
    for bad in bad_ids() {
        let q = adk_core::validate::quoted(&bad);
        for (i, (app, user, session)) in [
            (bad.as_str(), USER, SESSION),
            (APP, bad.as_str(), SESSION),
            (APP, USER, bad.as_str()),
        ]
        .into_iter()
        .enumerate()
        {
            // An unknown (or invalid) app is NOT_FOUND or INVALID_ARGUMENT; ids are INVALID_ARGUMENT.
            let got = stream_status(c.run(run(app, user, session, hello())).await).await;
            let want = if i == 0 && !bad.is_empty() && adk_core::validate::id("a", &bad).is_ok() {
                Code::NotFound
            } else {
                Code::InvalidArgument
            };
            expect(&format!("run {q} at {i}"), want, got);
            let cancel = pb::CancelRequest {
                app_name: app.into(),
                user_id: user.into(),
                session_id: session.into(),
                invocation_id: "e-1".into(),
            };
            expect(
                &format!("cancel {q} at {i}"),
                Code::InvalidArgument,
                c.cancel(cancel).await,
            );
        }
        expect(
            &format!("get app {q}"),
            Code::InvalidArgument,
            c.get_app(pb::GetAppRequest { app_name: bad.clone() }).await,
        );
    }
    expect(
        "get unknown app",
        Code::NotFound,
        c.get_app(pb::GetAppRequest {
            app_name: "nope".into(),
        })
        .await,
    );
    expect(
        "run unknown app",
        Code::NotFound,
        stream_status(c.run(run("nope", USER, SESSION, hello())).await).await,
    );
    expect(
        "run without a message",
        Code::InvalidArgument,
        stream_status(c.run(run(APP, USER, SESSION, None)).await).await,
    );
    let no_kind = Some(pb::Content {
        role: "user".into(),
        parts: vec![
            text_part("hi").unwrap(),
            pb::Part {
                kind: None,
                ..Default::default()
            },
        ],
    });
    expect_naming(
        "run part with no kind",
        Code::InvalidArgument,
        "new_message.parts[1]",
        &["event."],
        stream_status(c.run(run(APP, USER, SESSION, no_kind)).await).await,
    );
    // Every message names the RunRequest's own fields, not those of the event the runner
    // would store; and a refused run creates no session (create_session is set).
    for session in [SESSION, "fresh-run"] {
        let mut oversized = run(APP, USER, session, hello());
        oversized
            .state_delta
            .insert("big".into(), string_value("x".repeat(MIB + 1)));
        expect_naming(
            "run state_delta 1 MiB + 1",
            Code::ResourceExhausted,
            "state_delta value of key \"big\"",
            &["event."],
            stream_status(c.run(oversized).await).await,
        );
        let mut bad_key = run(APP, USER, session, hello());
        bad_key.state_delta.insert("user:".into(), string_value("x".into()));
        expect_naming(
            "run state_delta key without a name",
            Code::InvalidArgument,
            "state_delta key \"user:\"",
            &["event."],
            stream_status(c.run(bad_key).await).await,
        );
        let huge = Some(pb::Content {
            role: "user".into(),
            parts: vec![text_part(&"x".repeat(MIB + 1)).unwrap()],
        });
        expect_naming(
            "run new_message over the event limit",
            Code::ResourceExhausted,
            "new_message is",
            &["event "],
            stream_status(c.run(run(APP, USER, session, huge)).await).await,
        );
    }
    let mut deep = run(APP, USER, SESSION, hello());
    deep.state_delta.insert("deep".into(), nested(200));
    expect(
        "run state_delta 200 levels",
        Code::InvalidArgument,
        stream_status(c.run(deep).await).await,
    );
    let mut bad_max = run(APP, USER, SESSION, hello());
    bad_max.run_config = Some(pb::RunConfig {
        streaming_mode: 77,
        max_llm_calls: -1,
    });
    expect(
        "run bad run_config",
        Code::InvalidArgument,
        stream_status(c.run(bad_max).await).await,
    );
    // ListApps has no input; it must still answer.
    assert!(
        !c.list_apps(pb::ListAppsRequest {})
            .await
            .expect("list apps")
            .into_inner()
            .apps
            .is_empty()
    );
}

/// Transport-level abuse: garbage bytes as a message, a forged traceparent, a
/// request over the message limit, and a deadline that passes mid-call.
async fn transport_abuse(stack: &Stack) {
    // A forged traceparent is ignored (a new trace starts), not an error.
    let mut c = stack.sessions();
    for forged in [
        "00-zzzz-yyyy-01",
        "ff-00000000000000000000000000000000-0000000000000000-ff",
        &"0".repeat(4000),
    ] {
        let mut request = Request::new(pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            ..Default::default()
        });
        request.metadata_mut().insert("traceparent", forged.parse().unwrap());
        request.metadata_mut().insert("tracestate", "@@@,===".parse().unwrap());
        c.get_session(request)
            .await
            .unwrap_or_else(|e| panic!("traceparent {forged:?}: {e}"));
    }
    // A request over --max-message-bytes (4 MiB): RESOURCE_EXHAUSTED naming the flag.
    let create = pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "fresh".into(),
        state: state(vec![("big".into(), string_value("x".repeat(5 * MIB)))]),
        ttl: None,
    };
    // Each says what to send instead for its own method: only SaveArtifact is told about
    // UploadArtifact.
    let status = c.create_session(create).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{}", status.message());
    assert!(status.message().contains("--max-message-bytes"), "{}", status.message());
    expect_naming(
        "CreateSession over the message limit",
        Code::ResourceExhausted,
        "CreateSession request",
        &["rtifact"],
        Err::<(), _>(status),
    );
    let mut big_event = user_event("big");
    big_event.content = Some(pb::Content {
        role: "user".into(),
        parts: vec![text_part(&"x".repeat(5 * MIB)).unwrap()],
    });
    expect_naming(
        "AppendEvent over the message limit",
        Code::ResourceExhausted,
        "AppendEvent request",
        &["rtifact"],
        c.append_event(pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            event: Some(big_event),
            precondition: None,
        })
        .await,
    );
    let mut big_run = pb::RunRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "fresh".into(),
        create_session: true,
        ..Default::default()
    };
    big_run
        .state_delta
        .insert("big".into(), string_value("x".repeat(5 * MIB)));
    expect_naming(
        "Run over the message limit",
        Code::ResourceExhausted,
        "Run request",
        &["rtifact"],
        stream_status(
            AgentRunnerClient::new(stack.channel.clone())
                .max_encoding_message_size(64 * MIB)
                .run(big_run)
                .await,
        )
        .await,
    );
    expect_naming(
        "SaveArtifact over the message limit",
        Code::ResourceExhausted,
        "UploadArtifact",
        &[],
        stack
            .artifacts()
            .save_artifact(pb::SaveArtifactRequest {
                r#ref: at(APP, USER, SESSION, "big.bin"),
                part: Some(pb::Part {
                    kind: Some(pb::part::Kind::InlineData(pb::Blob {
                        mime_type: "application/octet-stream".into(),
                        data: vec![7; 5 * MIB],
                        ..Default::default()
                    })),
                    ..Default::default()
                }),
                version: None,
                custom_metadata: None,
            })
            .await,
    );
    // Bytes that are no protobuf message: INVALID_ARGUMENT, not INTERNAL.
    let status = raw_unary(stack, "/adk.v1.SessionService/GetSession", vec![0xff; 64]).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
    let status = raw_unary(
        stack,
        "/adk.v1.ArtifactService/LoadArtifact",
        vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
    )
    .await;
    assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
}

/// Sends `body` as the encoded request message of `path` and returns the call's status.
async fn raw_unary(stack: &Stack, path: &'static str, body: Vec<u8>) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(stack.channel.clone());
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    let result: Result<tonic::Response<Vec<u8>>, tonic::Status> = grpc.unary(Request::new(body), path, RawCodec).await;
    result.expect_err("garbage bytes must be refused")
}

/// Passes bytes through unchanged, so a test can send what no generated client would.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        use prost::bytes::Buf;
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

/// A unary call whose client deadline passes while the store is stalled gets
/// DEADLINE_EXCEEDED (not CANCELLED, not a late success), promptly, and the server
/// answers normally once the store is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_is_deadline_exceeded() {
    let mut stack = Stack::start().await;
    seed(&stack).await;
    let before = stack.snapshot().await;
    // Stall every Redis client for 1.5 s, as a slow store would.
    let mut admin = stack.redis.connection().await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut c = stack.sessions();
    let mut request = Request::new(pb::GetSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let status = c.get_session(request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{}", status.message());
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    // The same through the artifact service.
    let mut request = Request::new(pb::ListVersionsRequest { r#ref: good_ref() });
    request.set_timeout(Duration::from_millis(200));
    let status = stack.artifacts().list_versions(request).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{}", status.message());
    // Once the pause ends, reads are answered again.
    adk_testkit::eventually(Duration::from_secs(10), || {
        let mut c = stack.sessions();
        async move {
            let mut request = Request::new(pb::GetSessionRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                ..Default::default()
            });
            request.set_timeout(Duration::from_millis(500));
            c.get_session(request)
                .await
                .map(drop)
                .map_err(|status| status.to_string())
        }
    })
    .await;
    stack.still_serving(&before, "after the deadline").await;
}
