//! Hostile input against the all-in-one server (`adk-server`'s own assembly with the
//! runner on, served in the test's process over real gRPC, a real redis-server behind
//! it): a corpus of bad requests for every RPC of SessionService, ArtifactService and
//! AgentRunner, written as tables of rows (name, call, expected code, texts the message
//! must and must not hold) that one loop runs, naming every row that fails. The server
//! must stay up (health and a good request after every batch), and the stored data must
//! be byte for byte what it was (a DUMP of every Redis key).

use adk_grpc_e2e::InProcessServer;
use adk_grpc_e2e::cases::{Call, Case, check, on, row, stream_status};
use adk_grpc_proto::ordered::value::Kind;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_proto::v1::upload_artifact_request::Message as UploadMessage;
use adk_grpc_testkit::RedisServer;
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

fn string_value(s: String) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(Kind::StringValue(s)),
    }
}

/// A JSON value `depth` lists deep.
fn nested(depth: usize) -> adk_grpc_proto::ordered::Value {
    let mut value = adk_grpc_proto::ordered::Value {
        kind: Some(Kind::NumberValue(1.0)),
    };
    for _ in 1..depth {
        value = adk_grpc_proto::ordered::Value {
            kind: Some(Kind::ListValue(adk_grpc_proto::ordered::ListValue {
                values: vec![value],
            })),
        };
    }
    value
}

fn state(pairs: Vec<(String, adk_grpc_proto::ordered::Value)>) -> Option<adk_grpc_proto::ordered::Struct> {
    Some(adk_grpc_proto::ordered::Struct::from_iter(pairs))
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

struct Stack {
    redis: RedisServer,
    server: InProcessServer,
    channel: Channel,
}

impl Stack {
    async fn start() -> Stack {
        let redis = RedisServer::start().await;
        let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
        let server = InProcessServer::all_in_one(&["--store-url", &redis.url(), "--agents", agents]).await;
        let channel = server.channel().await;
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
    async fn still_serving(&self, before: &BTreeMap<String, (String, Vec<u8>)>, batch: &str) {
        assert!(self.server.is_running(), "{batch}: the server stopped");
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
    let stack = Stack::start().await;
    seed(&stack).await;
    let before = stack.snapshot().await;
    assert!(!before.is_empty());

    let batches = [
        ("session ids", session_ids(&stack)),
        ("session values", session_values(&stack)),
        ("session numbers and tokens", session_numbers_and_tokens(&stack).await),
        ("artifact requests", artifact_requests(&stack)),
        ("upload and download", upload_and_download_misuse(&stack)),
        ("runner requests", runner_requests(&stack)),
        ("transport abuse", transport_abuse(&stack)),
    ];
    let mut rows = 0;
    for (batch, cases) in batches {
        rows += check(batch, cases).await;
        stack.still_serving(&before, batch).await;
    }
    // The corpus only grows: fewer rows means a case was lost in an edit.
    assert!(rows >= HOSTILE_ROWS, "{rows} rows, fewer than {HOSTILE_ROWS}");

    // A chunk size over the maximum is capped or refused; either way nothing breaks.
    let download = pb::DownloadArtifactRequest {
        r#ref: good_ref(),
        version: None,
        chunk_size: u32::MAX,
    };
    if let Err(status) = stream_status(stack.artifacts().download_artifact(download).await).await {
        assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
    }
    stack.still_serving(&before, "chunk size").await;
}

/// How many rows the corpus had when it became tables (the calls of the hand-written
/// version, one row each).
const HOSTILE_ROWS: usize = 548;

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
        let create = pb::CreateSessionRequest {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: session.clone(),
            ..Default::default()
        };
        rows.push(("create", on(c, |mut c| async move { c.create_session(create).await })));
    }
    let get = pb::GetSessionRequest {
        app_name: app.clone(),
        user_id: user.clone(),
        session_id: session.clone(),
        ..Default::default()
    };
    rows.push(("get", on(c, |mut c| async move { c.get_session(get).await })));
    let delete = pb::DeleteSessionRequest {
        app_name: app.clone(),
        user_id: user.clone(),
        session_id: session.clone(),
    };
    rows.push(("delete", on(c, |mut c| async move { c.delete_session(delete).await })));
    let append = pb::AppendEventRequest {
        app_name: app.clone(),
        user_id: user.clone(),
        session_id: session.clone(),
        event: Some(user_event("x")),
        precondition: None,
    };
    rows.push(("append", on(c, |mut c| async move { c.append_event(append).await })));
    let list_events = pb::ListEventsRequest {
        app_name: app.clone(),
        user_id: user.clone(),
        session_id: session.clone(),
        ..Default::default()
    };
    rows.push((
        "list events",
        on(c, |mut c| async move { c.list_events(list_events).await }),
    ));
    let watch = pb::WatchSessionRequest {
        app_name: app,
        user_id: user,
        session_id: session,
        after_sequence: None,
    };
    rows.push((
        "watch",
        on(
            c,
            |mut c| async move { stream_status(c.watch_session(watch).await).await },
        ),
    ));
    rows
}

fn session_ids(stack: &Stack) -> Vec<Case> {
    let c = stack.sessions();
    let mut rows = Vec::new();
    for bad in bad_ids() {
        let case = format!("id {:?}", adk_grpc_core::validate::quoted(&bad));
        let ids = [
            (bad.as_str(), USER, SESSION),
            (APP, bad.as_str(), SESSION),
            (APP, USER, bad.as_str()),
        ];
        for (i, (app, user, session)) in ids.into_iter().enumerate() {
            for (rpc, call) in calls_naming_a_session(&c, app, user, session) {
                rows.push(row(format!("{rpc} {case} at {i}"), Code::InvalidArgument, call));
            }
        }
        let list = pb::ListSessionsRequest {
            app_name: bad.clone(),
            user_id: USER.into(),
            ..Default::default()
        };
        rows.push(row(
            format!("list {case}"),
            Code::InvalidArgument,
            on(&c, |mut c| async move { c.list_sessions(list).await }),
        ));
        // An event id and a precondition id are ids too.
        if !bad.is_empty() {
            let mut event = user_event("x");
            event.id = bad.clone();
            let append = pb::AppendEventRequest {
                app_name: APP.into(),
                user_id: USER.into(),
                session_id: SESSION.into(),
                event: Some(event),
                precondition: Some(pb::AppendPrecondition {
                    expected: Some(pb::append_precondition::Expected::LastEventId(bad.clone())),
                }),
            };
            rows.push(row(
                format!("append event.id {case}"),
                Code::InvalidArgument,
                on(&c, |mut c| async move { c.append_event(append).await }),
            ));
        }
    }
    rows
}

/// An AppendEvent of `event` to the seeded session.
fn append_to_seeded(event: pb::Event) -> pb::AppendEventRequest {
    pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        event: Some(event),
        precondition: None,
    }
}

fn session_values(stack: &Stack) -> Vec<Case> {
    let c = stack.sessions();
    let append = |event: pb::Event| {
        let request = append_to_seeded(event);
        on(&c, |mut c| async move { c.append_event(request).await })
    };
    let create = |state: Option<adk_grpc_proto::ordered::Struct>, ttl: Option<prost_types::Duration>| {
        let request = pb::CreateSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: "fresh".into(),
            state,
            ttl,
        };
        on(&c, |mut c| async move { c.create_session(request).await })
    };
    let mut rows = Vec::new();
    let many_keys: Vec<_> = (0..1001)
        .map(|i| (format!("k{i}"), string_value(String::new())))
        .collect();
    type Pairs = Vec<(String, adk_grpc_proto::ordered::Value)>;
    let values: Vec<(&str, Code, Pairs)> = vec![
        (
            "1 MiB + 1 value",
            Code::ResourceExhausted,
            vec![("big".into(), string_value("x".repeat(MIB + 1)))],
        ),
        ("1001 keys", Code::ResourceExhausted, many_keys),
        // Protobuf decoding stops at 100 levels of messages (two per list level, so about
        // 48 JSON levels): deeper values never reach the core's 64-level rule over gRPC.
        ("200 levels", Code::InvalidArgument, vec![("deep".into(), nested(200))]),
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
        rows.push(row(
            format!("create state {case}"),
            want,
            create(state(pairs.clone()), None),
        ));
        let mut event = user_event("x");
        event.actions = Some(pb::EventActions {
            state_delta: pairs.into_iter().collect(),
            ..Default::default()
        });
        rows.push(row(format!("append delta {case}"), want, append(event)));
    }
    // An event over 1 MiB encoded, though within the 4 MiB message limit.
    rows.push(row(
        "append 1 MiB event",
        Code::ResourceExhausted,
        append(user_event(&"x".repeat(MIB + 10))),
    ));
    let mut no_kind = user_event("x");
    no_kind.content.as_mut().unwrap().parts.push(pb::Part {
        kind: None,
        ..Default::default()
    });
    rows.push(row("append part with no kind", Code::InvalidArgument, append(no_kind)));
    for (seconds, nanos) in [
        (0, -1),
        (0, 1_000_000_000),
        (253_402_300_800 * 1000, 0),
        (i64::MIN, 0),
        (i64::MAX, 0),
    ] {
        let mut event = user_event("x");
        event.timestamp = Some(prost_types::Timestamp { seconds, nanos });
        rows.push(row(
            format!("append timestamp {seconds}s {nanos}ns"),
            Code::InvalidArgument,
            append(event),
        ));
        let get = pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            num_recent_events: None,
            after: Some(prost_types::Timestamp { seconds, nanos }),
            since_compaction: false,
        };
        rows.push(row(
            format!("get after {seconds}s {nanos}ns"),
            Code::InvalidArgument,
            on(&c, |mut c| async move { c.get_session(get).await }),
        ));
    }
    let ttl = prost_types::Duration { seconds: -1, nanos: 0 };
    rows.push(row("create ttl -1s", Code::InvalidArgument, create(None, Some(ttl))));
    rows
}

async fn session_numbers_and_tokens(stack: &Stack) -> Vec<Case> {
    let c = stack.sessions();
    // One event, one page: forge a token of the same kind the server writes.
    let page = c
        .clone()
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
    assert!(page.next_page_token.is_empty());
    let log = adk_grpc_core::ListEventsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: SESSION.into(),
        ..Default::default()
    };
    let event_token = adk_grpc_core::session::EventCursor {
        sequence: 1,
        newest_first: false,
    }
    .encode(&log);
    let listing = adk_grpc_core::ListRequest {
        app_name: APP.into(),
        user_id: Some(USER.into()),
        ..Default::default()
    };
    let session_token = adk_grpc_core::session::SessionCursor {
        update_micros: 0,
        member: SESSION.into(),
    }
    .encode(&listing);
    // Valid base64 of other content, garbage, a huge string.
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
    let list_sessions = |page_token: String, page_size: i32| {
        let request = pb::ListSessionsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            page_size,
            page_token,
        };
        on(&c, |mut c| async move { c.list_sessions(request).await })
    };
    let list_events = |page_token: String, page_size: i32, newest_first: bool| {
        let request = pb::ListEventsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            page_size,
            page_token,
            newest_first,
        };
        on(&c, |mut c| async move { c.list_events(request).await })
    };
    let append = |session: &str, event: Option<pb::Event>, precondition: Option<pb::AppendPrecondition>| {
        let request = pb::AppendEventRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: session.into(),
            event,
            precondition,
        };
        on(&c, |mut c| async move { c.append_event(request).await })
    };
    let short = |token: &str| token[..token.len().min(40)].to_string();
    let mut rows = Vec::new();
    for token in forged.iter().chain([&event_token]) {
        rows.push(row(
            format!("list sessions token {}", short(token)),
            Code::InvalidArgument,
            list_sessions(token.clone(), 10),
        ));
    }
    for token in forged.iter().chain([&session_token]) {
        rows.push(row(
            format!("list events token {}", short(token)),
            Code::InvalidArgument,
            list_events(token.clone(), 10, false),
        ));
    }
    rows.push(row(
        "list events token of the other order",
        Code::InvalidArgument,
        list_events(event_token.clone(), 10, true),
    ));
    for size in [-1, i32::MIN] {
        rows.push(row(
            format!("list sessions page_size {size}"),
            Code::InvalidArgument,
            list_sessions(String::new(), size),
        ));
        rows.push(row(
            format!("list events page_size {size}"),
            Code::InvalidArgument,
            list_events(String::new(), size, false),
        ));
        let get = pb::GetSessionRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            num_recent_events: Some(size),
            after: None,
            since_compaction: false,
        };
        rows.push(row(
            format!("get num_recent_events {size}"),
            Code::InvalidArgument,
            on(&c, |mut c| async move { c.get_session(get).await }),
        ));
    }
    // Absurd but valid sizes are capped, not refused: the one session comes back.
    let whole = pb::ListSessionsRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        page_size: i32::MAX,
        page_token: String::new(),
    };
    rows.push(row(
        "list sessions page_size i32::MAX",
        Code::Ok,
        on(&c, |mut c| async move {
            let page = c.list_sessions(whole).await?.into_inner();
            match page.sessions.len() {
                1 => Ok(()),
                n => Err(tonic::Status::unknown(format!("{n} sessions, not 1"))),
            }
        }),
    ));
    let far_ahead = pb::AppendPrecondition {
        expected: Some(pb::append_precondition::Expected::LastSequence(u64::MAX)),
    };
    rows.push(row(
        "append precondition u64::MAX",
        Code::Aborted,
        append(SESSION, Some(user_event("x")), Some(far_ahead)),
    ));
    rows.push(row(
        "append to a missing session",
        Code::NotFound,
        append("missing", Some(user_event("x")), None),
    ));
    rows.push(row(
        "append without an event",
        Code::InvalidArgument,
        append(SESSION, None, None),
    ));
    rows
}

fn artifact_requests(stack: &Stack) -> Vec<Case> {
    let c = stack.artifacts();
    let mut refs: Vec<(String, Option<pb::ArtifactRef>)> = Vec::new();
    for bad in bad_ids() {
        let q = adk_grpc_core::validate::quoted(&bad);
        refs.push((format!("app {q}"), at(&bad, USER, SESSION, FILE)));
        refs.push((format!("user {q}"), at(APP, &bad, SESSION, FILE)));
        refs.push((format!("session {q}"), at(APP, USER, &bad, FILE)));
    }
    for bad in bad_file_names() {
        refs.push((
            format!("file {}", adk_grpc_core::validate::quoted(&bad)),
            at(APP, USER, SESSION, &bad),
        ));
    }
    refs.push(("no ref".into(), None));
    let save = |r#ref: Option<pb::ArtifactRef>, part: Option<pb::Part>, version: Option<i64>| {
        let request = pb::SaveArtifactRequest {
            r#ref,
            part,
            version,
            custom_metadata: None,
        };
        on(&c, |mut c| async move { c.save_artifact(request).await })
    };
    let load = |r#ref: Option<pb::ArtifactRef>, version: Option<i64>| {
        let request = pb::LoadArtifactRequest { r#ref, version };
        on(&c, |mut c| async move { c.load_artifact(request).await })
    };
    let metadata = |r#ref: Option<pb::ArtifactRef>, version: Option<i64>| {
        let request = pb::GetArtifactMetadataRequest { r#ref, version };
        on(&c, |mut c| async move { c.get_artifact_metadata(request).await })
    };
    let delete = |r#ref: Option<pb::ArtifactRef>, version: Option<i64>| {
        let request = pb::DeleteArtifactRequest { r#ref, version };
        on(&c, |mut c| async move { c.delete_artifact(request).await })
    };
    let download = |r#ref: Option<pb::ArtifactRef>, version: Option<i64>| {
        let request = pb::DownloadArtifactRequest {
            r#ref,
            version,
            chunk_size: 0,
        };
        on(&c, |mut c| async move {
            stream_status(c.download_artifact(request).await).await
        })
    };
    let invalid = Code::InvalidArgument;
    let mut rows = Vec::new();
    for (case, r) in refs {
        rows.push(row(
            format!("save {case}"),
            invalid,
            save(r.clone(), text_part("x"), None),
        ));
        rows.push(row(format!("load {case}"), invalid, load(r.clone(), None)));
        rows.push(row(format!("metadata {case}"), invalid, metadata(r.clone(), None)));
        rows.push(row(format!("delete {case}"), invalid, delete(r.clone(), None)));
        let versions = pb::ListVersionsRequest { r#ref: r.clone() };
        rows.push(row(
            format!("versions {case}"),
            invalid,
            on(&c, |mut c| async move { c.list_versions(versions).await }),
        ));
        rows.push(row(format!("download {case}"), invalid, download(r.clone(), None)));
        let header = pb::UploadHeader {
            r#ref: r,
            mime_type: "text/plain".into(),
            ..Default::default()
        };
        rows.push(row(
            format!("upload {case}"),
            invalid,
            upload(&c, vec![header_msg(header), chunk_msg(b"x")]),
        ));
    }
    // An empty session id lists the user's "user:" names: not an error.
    for bad in bad_ids().into_iter().filter(|bad| !bad.is_empty()) {
        let list = pb::ListArtifactsRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: bad.clone(),
        };
        rows.push(row(
            format!("list session {bad:?}"),
            invalid,
            on(&c, |mut c| async move { c.list_artifacts(list).await }),
        ));
    }
    // Versions: 0, negative and absurd.
    for version in [0, -1, i64::MIN] {
        rows.push(row(
            format!("load version {version}"),
            invalid,
            load(good_ref(), Some(version)),
        ));
        rows.push(row(
            format!("save version {version}"),
            invalid,
            save(good_ref(), text_part("x"), Some(version)),
        ));
        rows.push(row(
            format!("delete version {version}"),
            invalid,
            delete(good_ref(), Some(version)),
        ));
    }
    rows.push(row(
        "load version i64::MAX",
        Code::NotFound,
        load(good_ref(), Some(i64::MAX)),
    ));
    rows.push(row(
        "metadata version i64::MAX",
        Code::NotFound,
        metadata(good_ref(), Some(i64::MAX)),
    ));
    rows.push(row(
        "save an existing version",
        Code::AlreadyExists,
        save(good_ref(), text_part("x"), Some(1)),
    ));
    // Parts the artifact store cannot hold.
    let function_call = pb::Part {
        kind: Some(pb::part::Kind::FunctionCall(pb::FunctionCall {
            name: "f".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    for (case, part) in [
        ("no part", None),
        ("part with no kind", Some(pb::Part::default())),
        ("function call part", Some(function_call)),
    ] {
        rows.push(row(format!("save {case}"), invalid, save(good_ref(), part, None)));
    }
    // A unary save over the message limit.
    rows.push(row(
        "save 5 MiB unary",
        Code::ResourceExhausted,
        save(good_ref(), text_part(&"x".repeat(5 * MIB)), None),
    ));
    rows.push(row(
        "download version i64::MAX",
        Code::NotFound,
        download(good_ref(), Some(i64::MAX)),
    ));
    rows
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

/// An UploadArtifact of `messages`, as a [`Call`].
fn upload(c: &ArtifactServiceClient<Channel>, messages: Vec<pb::UploadArtifactRequest>) -> Call {
    on(c, |mut c| async move {
        c.upload_artifact(futures::stream::iter(messages)).await
    })
}

fn upload_and_download_misuse(stack: &Stack) -> Vec<Case> {
    let c = stack.artifacts();
    let header = || pb::UploadHeader {
        r#ref: good_ref(),
        mime_type: "text/plain".into(),
        ..Default::default()
    };
    let with = |change: &dyn Fn(&mut pb::UploadHeader)| {
        let mut header = header();
        change(&mut header);
        header_msg(header)
    };
    let invalid = Code::InvalidArgument;
    let mut rows = vec![
        row(
            "upload chunk first",
            invalid,
            upload(&c, vec![chunk_msg(b"x"), header_msg(header())]),
        ),
        row(
            "upload two headers",
            invalid,
            upload(&c, vec![header_msg(header()), header_msg(header())]),
        ),
        row("upload nothing", invalid, upload(&c, vec![])),
        row(
            "upload empty oneof",
            invalid,
            upload(&c, vec![pb::UploadArtifactRequest { message: None }]),
        ),
        row(
            "upload without a MIME type",
            invalid,
            upload(&c, vec![with(&|h| h.mime_type = String::new())]),
        ),
        row(
            "upload declaring u64::MAX bytes",
            Code::ResourceExhausted,
            upload(&c, vec![with(&|h| h.size_bytes = Some(u64::MAX))]),
        ),
    ];
    for version in [0, -1] {
        rows.push(row(
            format!("upload version {version}"),
            invalid,
            upload(&c, vec![with(&|h| h.version = Some(version)), chunk_msg(b"x")]),
        ));
    }
    // A chunk message over --max-message-bytes.
    rows.push(row(
        "upload 5 MiB chunk message",
        Code::ResourceExhausted,
        upload(&c, vec![header_msg(header()), chunk_msg(&vec![b'x'; 5 * MIB])]),
    ));
    rows.push(row(
        "upload existing version",
        Code::AlreadyExists,
        upload(&c, vec![with(&|h| h.version = Some(1)), chunk_msg(b"x")]),
    ));
    rows
}

fn runner_requests(stack: &Stack) -> Vec<Case> {
    let c = stack.runner();
    let request = |app: &str, user: &str, session: &str, message: Option<pb::Content>| pb::RunRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        new_message: message,
        create_session: true,
        ..Default::default()
    };
    let run = |request: pb::RunRequest| on(&c, |mut c| async move { stream_status(c.run(request).await).await });
    let hello = || {
        Some(pb::Content {
            role: "user".into(),
            parts: vec![text_part("hi").unwrap()],
        })
    };
    let invalid = Code::InvalidArgument;
    let mut rows = Vec::new();
    for bad in bad_ids() {
        let q = adk_grpc_core::validate::quoted(&bad);
        for (i, (app, user, session)) in [
            (bad.as_str(), USER, SESSION),
            (APP, bad.as_str(), SESSION),
            (APP, USER, bad.as_str()),
        ]
        .into_iter()
        .enumerate()
        {
            // An unknown (or invalid) app is NOT_FOUND or INVALID_ARGUMENT; ids are INVALID_ARGUMENT.
            let want = if i == 0 && !bad.is_empty() && adk_grpc_core::validate::id("a", &bad).is_ok() {
                Code::NotFound
            } else {
                invalid
            };
            rows.push(row(
                format!("run {q} at {i}"),
                want,
                run(request(app, user, session, hello())),
            ));
            let cancel = pb::CancelRequest {
                app_name: app.into(),
                user_id: user.into(),
                session_id: session.into(),
                invocation_id: "e-1".into(),
            };
            rows.push(row(
                format!("cancel {q} at {i}"),
                invalid,
                on(&c, |mut c| async move { c.cancel(cancel).await }),
            ));
        }
        let get_app = pb::GetAppRequest { app_name: bad.clone() };
        rows.push(row(
            format!("get app {q}"),
            invalid,
            on(&c, |mut c| async move { c.get_app(get_app).await }),
        ));
    }
    let unknown = pb::GetAppRequest {
        app_name: "nope".into(),
    };
    rows.push(row(
        "get unknown app",
        Code::NotFound,
        on(&c, |mut c| async move { c.get_app(unknown).await }),
    ));
    rows.push(row(
        "run unknown app",
        Code::NotFound,
        run(request("nope", USER, SESSION, hello())),
    ));
    rows.push(row(
        "run without a message",
        invalid,
        run(request(APP, USER, SESSION, None)),
    ));
    let no_kind = Some(pb::Content {
        role: "user".into(),
        parts: vec![text_part("hi").unwrap(), pb::Part::default()],
    });
    rows.push(
        row(
            "run part with no kind",
            invalid,
            run(request(APP, USER, SESSION, no_kind)),
        )
        .naming(&["new_message.parts[1]"], &["event."]),
    );
    // Every message names the RunRequest's own fields, not those of the event the runner
    // would store; and a refused run creates no session (create_session is set).
    for session in [SESSION, "fresh-run"] {
        let mut oversized = request(APP, USER, session, hello());
        oversized
            .state_delta
            .insert("big".into(), string_value("x".repeat(MIB + 1)));
        rows.push(
            row(
                format!("run state_delta 1 MiB + 1 in {session}"),
                Code::ResourceExhausted,
                run(oversized),
            )
            .naming(&["state_delta value of key \"big\""], &["event."]),
        );
        let mut bad_key = request(APP, USER, session, hello());
        bad_key.state_delta.insert("user:".into(), string_value("x".into()));
        rows.push(
            row(
                format!("run state_delta key without a name in {session}"),
                invalid,
                run(bad_key),
            )
            .naming(&["state_delta key \"user:\""], &["event."]),
        );
        let huge = Some(pb::Content {
            role: "user".into(),
            parts: vec![text_part(&"x".repeat(MIB + 1)).unwrap()],
        });
        rows.push(
            row(
                format!("run new_message over the event limit in {session}"),
                Code::ResourceExhausted,
                run(request(APP, USER, session, huge)),
            )
            .naming(&["new_message is"], &["event "]),
        );
    }
    let mut deep = request(APP, USER, SESSION, hello());
    deep.state_delta.insert("deep".into(), nested(200));
    rows.push(row("run state_delta 200 levels", invalid, run(deep)));
    let mut bad_config = request(APP, USER, SESSION, hello());
    bad_config.run_config = Some(pb::RunConfig {
        streaming_mode: 77,
        max_llm_calls: -1,
        ..Default::default()
    });
    rows.push(row("run bad run_config", invalid, run(bad_config)));
    // ListApps has no input; it must still answer, with the apps.
    rows.push(row(
        "list apps",
        Code::Ok,
        on(&c, |mut c| async move {
            let apps = c.list_apps(pb::ListAppsRequest {}).await?.into_inner().apps;
            match apps.is_empty() {
                false => Ok(()),
                true => Err(tonic::Status::unknown("no apps listed")),
            }
        }),
    ));
    rows
}

/// Transport-level abuse: garbage bytes as a message, a forged traceparent, requests
/// over the message limit.
fn transport_abuse(stack: &Stack) -> Vec<Case> {
    let c = stack.sessions();
    let mut rows = Vec::new();
    // A forged traceparent is ignored (a new trace starts), not an error.
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
        rows.push(row(
            format!("traceparent {}", &forged[..forged.len().min(60)]),
            Code::Ok,
            on(&c, |mut c| async move { c.get_session(request).await }),
        ));
    }
    // Requests over --max-message-bytes (4 MiB): RESOURCE_EXHAUSTED naming the flag and
    // the request; each says what to send instead for its own method: only SaveArtifact
    // is told about UploadArtifact.
    let create = pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: USER.into(),
        session_id: "fresh".into(),
        state: state(vec![("big".into(), string_value("x".repeat(5 * MIB)))]),
        ttl: None,
    };
    rows.push(
        row(
            "CreateSession over the message limit",
            Code::ResourceExhausted,
            on(&c, |mut c| async move { c.create_session(create).await }),
        )
        .naming(&["--max-message-bytes", "CreateSession request"], &["rtifact"]),
    );
    let mut big_event = user_event("big");
    big_event.content = Some(pb::Content {
        role: "user".into(),
        parts: vec![text_part(&"x".repeat(5 * MIB)).unwrap()],
    });
    let append = append_to_seeded(big_event);
    rows.push(
        row(
            "AppendEvent over the message limit",
            Code::ResourceExhausted,
            on(&c, |mut c| async move { c.append_event(append).await }),
        )
        .naming(&["AppendEvent request"], &["rtifact"]),
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
    let runner = AgentRunnerClient::new(stack.channel.clone()).max_encoding_message_size(64 * MIB);
    rows.push(
        row(
            "Run over the message limit",
            Code::ResourceExhausted,
            on(
                &runner,
                |mut c| async move { stream_status(c.run(big_run).await).await },
            ),
        )
        .naming(&["Run request"], &["rtifact"]),
    );
    let save = pb::SaveArtifactRequest {
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
    };
    rows.push(
        row(
            "SaveArtifact over the message limit",
            Code::ResourceExhausted,
            on(&stack.artifacts(), |mut c| async move { c.save_artifact(save).await }),
        )
        .naming(&["UploadArtifact"], &[]),
    );
    // Bytes that are no protobuf message: INVALID_ARGUMENT, not INTERNAL.
    for (path, body) in [
        ("/adk.v1.SessionService/GetSession", vec![0xff; 64]),
        (
            "/adk.v1.ArtifactService/LoadArtifact",
            vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
    ] {
        let channel = stack.channel.clone();
        rows.push(row(
            format!("garbage bytes to {path}"),
            Code::InvalidArgument,
            Box::pin(async move { Err(raw_unary(channel, path, body).await) }),
        ));
    }
    rows
}

/// Sends `body` as the encoded request message of `path` and returns the call's status.
async fn raw_unary(channel: Channel, path: &'static str, body: Vec<u8>) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel);
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
    let stack = Stack::start().await;
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
    adk_grpc_testkit::eventually(Duration::from_secs(10), || {
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

/// 1 GiB of zeros as one compressed gzip member (about 1 MB).
fn gzip_bomb() -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; MIB];
    for _ in 0..1024 {
        encoder.write_all(&zeros).unwrap();
    }
    encoder.finish().unwrap()
}

/// 1 GiB of zeros as one zlib stream (gRPC's `deflate`, about 1 MB).
fn deflate_bomb() -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; MIB];
    for _ in 0..1024 {
        encoder.write_all(&zeros).unwrap();
    }
    encoder.finish().unwrap()
}

/// 1 GiB of zeros as one zstd frame of 8192 RLE blocks of 128 KiB (32 KiB on the wire),
/// with a 128 KiB window: nothing a decoder may refuse but its size.
fn zstd_bomb() -> Vec<u8> {
    const BLOCK: u32 = 128 * 1024;
    // Magic number; frame header: no content size, not single-segment; window 2^17.
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
    let blocks = (1u32 << 30) / BLOCK;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        // Block header (3 bytes, little-endian): last flag, type 1 (RLE), size; then the byte.
        let header = (BLOCK << 3) | (1 << 1) | last;
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(0);
    }
    frame
}

/// A decompression bomb (1 GiB of zeros: gzip and deflate about 1 MB each, zstd 32 KiB)
/// as the one request message of a unary call, a client-streaming upload and a
/// server-streaming run (whose first message the server reads before the handler, to
/// count the user's streams), sent to a real adk-server process: each is refused with
/// RESOURCE_EXHAUSTED naming --max-message-bytes within a fraction of a second, having
/// decompressed no more than the 4 MiB limit: the server's peak RSS (VmHWM, from /proc)
/// grows by a few MiB, not by a GiB, and does not grow from one round of bombs to the
/// next. Nothing reaches the store, and the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decompression_bombs_are_refused_at_once_without_memory() {
    use adk_grpc_e2e::raw::{frame, raw_call};
    let bombs = [
        ("gzip", frame(1, &gzip_bomb())),
        ("deflate", frame(1, &deflate_bomb())),
        ("zstd", frame(1, &zstd_bomb())),
    ];
    for (encoding, bomb) in &bombs {
        println!("{encoding} bomb: {} bytes on the wire for 1 GiB", bomb.len());
        assert!(bomb.len() < 2 * MIB, "{encoding}");
    }
    let redis = RedisServer::start().await;
    let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
    let args = ["--store-url".to_string(), redis.url(), "--agents".into(), agents.into()];
    let server = adk_grpc_testkit::ServiceProcess::spawn("adk-server", &args, &[]).await;
    let channel = Channel::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let health = || async {
        HealthClient::new(channel.clone())
            .check(HealthCheckRequest { service: String::new() })
            .await
            .expect("health")
            .into_inner()
            .status
    };
    // The first calls warm up what any call allocates once (connection, tables).
    assert_eq!(health().await, ServingStatus::Serving as i32);
    let pid = server.pid();
    let rss_before = server.rss_kib().expect("running");
    // VmHWM from here on (Linux clear_refs 5 resets the peak to the current RSS).
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
    // Three rounds of the 12 bombs: what the first round leaves with the allocator for
    // reuse, the later ones reuse; a leak would grow with every round.
    let mut slowest = Duration::ZERO;
    let mut rss_after_rounds = Vec::new();
    for round in 1..=3 {
        for (encoding, bomb) in &bombs {
            for path in [
                "/adk.v1.SessionService/CreateSession",
                "/adk.v1.SessionService/AppendEvent",
                "/adk.v1.ArtifactService/UploadArtifact",
                "/adk.v1.AgentRunner/Run",
            ] {
                let started = std::time::Instant::now();
                let reply = raw_call(&channel, path, &[("grpc-encoding", encoding)], bomb.clone()).await;
                let took = started.elapsed();
                if round == 1 {
                    println!("{encoding} bomb to {path}: refused in {took:?}");
                }
                slowest = slowest.max(took);
                let status = &reply.status;
                assert_eq!(status.code(), Code::ResourceExhausted, "{encoding} {path}: {status:?}");
                assert!(
                    status.message().contains("decompresses to more than")
                        && status.message().contains("--max-message-bytes")
                        && status.message().contains(encoding),
                    "{encoding} {path}: {}",
                    status.message()
                );
                assert!(
                    took < Duration::from_secs(1),
                    "{encoding} {path}: refused after {took:?}"
                );
            }
        }
        rss_after_rounds.push(server.rss_kib().expect("running"));
    }
    assert_eq!(health().await, ServingStatus::Serving as i32);
    let peak = server.peak_rss_kib().expect("running");
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!(
        "adk-server RSS around 3 x 12 bombs of 1 GiB: before {}, peak {}, after each round {:?}; slowest refusal {slowest:?}",
        mib(rss_before),
        mib(peak),
        rss_after_rounds.iter().map(|kib| mib(*kib)).collect::<Vec<_>>()
    );
    // Unbounded, one bomb alone would take 1 GiB.
    assert!(
        peak < rss_before + 64 * 1024,
        "the peak RSS grew from {rss_before} KiB to {peak} KiB"
    );
    // The allocator keeps freed buffers per thread, so a later round may settle a few MiB
    // higher; a bomb's 4 MiB leaking would add 48 MiB a round.
    assert!(
        rss_after_rounds[2] < rss_after_rounds[0] + 24 * 1024,
        "the RSS grew from round to round: {rss_after_rounds:?} KiB"
    );
    let keys: u64 = redis::cmd("DBSIZE")
        .query_async(&mut redis.connection().await)
        .await
        .unwrap();
    assert_eq!(keys, 0, "a refused request stored nothing");
}
