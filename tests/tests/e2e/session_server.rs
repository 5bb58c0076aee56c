//! `adk-session-server` end to end: the real binary, a real redis-server (and a
//! real 3-node Redis Cluster), real gRPC clients.

use adk_grpc_core::{AppendEventRequest, Content, CreateRequest, Event, GetRequest, SessionService, WatchRequest};
use adk_grpc_e2e::{SessionStack, connect, connect_artifacts, spawn_artifact_server, spawn_session_server};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::artifact_conformance::ArtifactLimits;
use adk_grpc_testkit::{Fixture, RedisCluster, ServiceProcess, Shared, eventually, shared, unique_prefix};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn create_req(app: &str, id: &str) -> CreateRequest {
    CreateRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: Some(id.into()),
        state: [
            ("user:name".to_string(), json!("Ada")),
            ("topic".to_string(), json!("e2e")),
        ]
        .into(),
        ttl: None,
    }
}

fn get_req(app: &str, id: &str) -> GetRequest {
    GetRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: id.into(),
        ..Default::default()
    }
}

fn append_req(app: &str, id: &str, text: &str) -> AppendEventRequest {
    AppendEventRequest {
        timestamp_missing: false,
        app_name: app.into(),
        user_id: "u".into(),
        session_id: id.into(),
        event: Event::new("e-test")
            .with_author("user")
            .with_content(Content::new("user").with_text(text)),
        precondition: None,
    }
}

async fn health(endpoint: &str) -> Option<ServingStatus> {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut client = HealthClient::new(channel);
    let reply = client.check(HealthCheckRequest { service: String::new() }).await.ok()?;
    ServingStatus::try_from(reply.into_inner().status).ok()
}

async fn wait_for_health(endpoint: &str, want: ServingStatus) {
    eventually(Duration::from_secs(20), || async {
        match health(endpoint).await {
            Some(status) if status == want => Ok(()),
            other => Err(format!("health is {other:?}, not {want:?}")),
        }
    })
    .await;
}

mod grpc_client_conforms_against_the_real_server_on_redis {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::session_conformance_tests!({
        let redis = shared::redis().await;
        let server = SERVER
            .get_or_start({
                let url = redis.url();
                || async move { spawn_session_server(&url, &[]).await }
            })
            .await;
        Fixture::sessions(connect(&server).await).keeping(server).keeping(redis)
    });
}

mod grpc_client_conforms_against_the_real_server_on_redis_cluster {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::session_conformance_tests!({
        let cluster = shared::cluster().await;
        let server = SERVER
            .get_or_start({
                let url = cluster.url();
                || async move { spawn_session_server(&url, &[]).await }
            })
            .await;
        Fixture::sessions(connect(&server).await)
            .keeping(server)
            .keeping(cluster)
    });
}

/// The session server deletes a session's artifacts in the Redis it shares with a
/// separate artifact server, without that server being involved; on a cluster too.
mod delete_session_deletes_its_artifacts_stored_by_a_separate_artifact_server {
    use super::*;

    /// A session server and an artifact server sharing the store at `store_url`.
    async fn servers(store_url: &str) -> Fixture {
        let sessions = spawn_session_server(store_url, &[]).await;
        let artifacts = spawn_artifact_server(store_url, &[]).await;
        Fixture::sessions(connect(&sessions).await)
            .with_artifacts(Arc::new(connect_artifacts(&artifacts).await), ArtifactLimits::default())
            .keeping(sessions)
            .keeping(artifacts)
    }

    mod on_redis {
        use super::*;
        adk_grpc_testkit::session_delete_conformance_tests!({
            let redis = shared::redis().await;
            servers(&redis.url()).await.keeping(redis)
        });
    }

    mod on_redis_cluster {
        use super::*;
        adk_grpc_testkit::session_delete_conformance_tests!({
            let cluster = shared::cluster().await;
            servers(&cluster.url()).await.keeping(cluster)
        });
    }
}

#[tokio::test]
async fn data_survives_a_session_server_restart() {
    let mut stack = SessionStack::start(&[]).await;
    let app = unique_prefix("restart");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    let stored = client
        .append_event(append_req(&app, "s", "before restart"))
        .await
        .expect("append");

    stack.server.restart().await;
    let client = stack.client().await;
    let session = client.get(get_req(&app, "s")).await.expect("get after restart");
    assert_eq!(session.events.as_slice(), &[stored]);
    assert_eq!(session.state.as_map().get("user:name"), Some(&json!("Ada")));
}

#[tokio::test]
async fn server_recovers_by_itself_when_redis_restarts() {
    let mut stack = SessionStack::start(&["--health-interval-ms", "200"]).await;
    let app = unique_prefix("redis-restart");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    let before = client
        .append_event(append_req(&app, "s", "acknowledged"))
        .await
        .expect("append");
    wait_for_health(&stack.server.endpoint(), ServingStatus::Serving).await;

    stack.redis.kill9().await;
    let err = client.get(get_req(&app, "s")).await.expect_err("redis is down");
    assert_eq!(
        err.code(),
        Code::Unavailable,
        "a store outage is retryable UNAVAILABLE, got {err}"
    );
    let err = client
        .append_event(append_req(&app, "s", "lost"))
        .await
        .expect_err("redis is down");
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    wait_for_health(&stack.server.endpoint(), ServingStatus::NotServing).await;

    stack.redis.restart().await;
    wait_for_health(&stack.server.endpoint(), ServingStatus::Serving).await;
    let session = eventually(Duration::from_secs(10), || async {
        match client.get(get_req(&app, "s")).await {
            Ok(session) => Ok(session),
            Err(err) => {
                assert!(err.is_retryable(), "only retryable errors while reconnecting: {err}");
                Err(format!("the server has not reconnected without a restart: {err}"))
            }
        }
    })
    .await;
    assert_eq!(
        session.events.as_slice(),
        &[before],
        "the acknowledged append survived; the failed one left nothing"
    );
    client
        .append_event(append_req(&app, "s", "after"))
        .await
        .expect("appends work again");
    assert!(stack.server.is_running(), "the same server process served throughout");
}

#[tokio::test]
async fn watchers_get_every_event_once_and_resume_exactly() {
    let mut stack = SessionStack::start(&[]).await;
    // Appends go through a second server process: watchers follow Redis, not their own process.
    let writer_server = spawn_session_server(&stack.redis.url(), &[]).await;
    let writer = connect(&writer_server).await;
    let app = unique_prefix("watch");
    writer.create(create_req(&app, "s")).await.expect("create");
    let watch = |after_sequence| WatchRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence,
    };

    let mut live = stack.client().await.watch(watch(None)).await.expect("watch");
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(
            writer
                .append_event(append_req(&app, "s", &format!("m{i}")))
                .await
                .expect("append"),
        );
    }
    for want in &sent {
        let got = tokio::time::timeout(Duration::from_secs(10), live.next()).await;
        assert_eq!(
            &got.expect("in time").expect("open").expect("event"),
            want,
            "each event once, in order"
        );
    }
    let last_seen = sent.last().expect("sent").sequence;

    // The watched server dies; the writer carries on; the watcher resumes where it stopped.
    stack.server.kill9().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), live.next())
        .await
        .expect("the stream ends");
    assert!(
        matches!(ended, None | Some(Err(_))),
        "a lost server ends the stream: {ended:?}"
    );
    let mut missed = Vec::new();
    for i in 5..8 {
        missed.push(
            writer
                .append_event(append_req(&app, "s", &format!("m{i}")))
                .await
                .expect("append"),
        );
    }
    stack.server.restart().await;
    let mut resumed = stack
        .client()
        .await
        .watch(watch(Some(last_seen)))
        .await
        .expect("resume");
    let later = writer.append_event(append_req(&app, "s", "m8")).await.expect("append");
    missed.push(later);
    for want in &missed {
        let got = tokio::time::timeout(Duration::from_secs(10), resumed.next()).await;
        assert_eq!(
            &got.expect("in time").expect("open").expect("event"),
            want,
            "exactly the rest, in order"
        );
    }
    let extra = tokio::time::timeout(Duration::from_millis(500), resumed.next()).await;
    assert!(extra.is_err(), "nothing repeated or invented: {extra:?}");
}

#[tokio::test]
async fn sigterm_ends_watch_streams_and_exits_cleanly() {
    let mut stack = SessionStack::start(&[]).await;
    let app = unique_prefix("sigterm");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    let watch = WatchRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        after_sequence: None,
    };
    let mut stream = client.watch(watch).await.expect("watch");
    let status = stack.server.terminate().await;
    assert!(
        status.success(),
        "graceful shutdown exits 0, got {status:?}\n{}",
        stack.server.tail_log(20)
    );
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the watch ended");
    assert!(
        end.is_none() || matches!(&end, Some(Err(e)) if e.code() == Code::Unavailable),
        "{end:?}"
    );
}

/// Raw protobuf requests that no typed Rust client would send: each gets a clear
/// status naming the problem, and the stored session is unchanged afterwards.
#[tokio::test]
async fn malformed_requests_get_clear_statuses_and_change_nothing() {
    let stack = SessionStack::start(&["--max-message-bytes", "65536"]).await;
    let app = unique_prefix("bad");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    client
        .append_event(append_req(&app, "s", "kept"))
        .await
        .expect("append");
    let before = client.get(get_req(&app, "s")).await.expect("get");
    let mut raw = SessionServiceClient::connect(stack.server.endpoint())
        .await
        .expect("raw client");

    let append = |event: Option<pb::Event>| pb::AppendEventRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        event,
        precondition: None,
    };
    let valid = pb::Event::from(&append_req(&app, "s", "x").event);
    let cases: Vec<(&str, pb::AppendEventRequest, Code, &str)> = vec![
        ("no event", append(None), Code::InvalidArgument, "event is required"),
        (
            "part without kind",
            append(Some(pb::Event {
                content: Some(pb::Content {
                    role: "user".into(),
                    parts: vec![pb::Part {
                        kind: None,
                        ..Default::default()
                    }],
                }),
                ..valid.clone()
            })),
            Code::InvalidArgument,
            "event.content.parts[0] has no kind",
        ),
        (
            "timestamp out of range",
            append(Some(pb::Event {
                timestamp: Some(prost_types::Timestamp { seconds: 1, nanos: -5 }),
                ..valid.clone()
            })),
            Code::InvalidArgument,
            "event.timestamp",
        ),
        (
            "unknown finish reason",
            append(Some(pb::Event {
                finish_reason: 42,
                ..valid.clone()
            })),
            Code::InvalidArgument,
            "finish_reason",
        ),
        (
            "event id with a newline",
            append(Some(pb::Event {
                id: "a\nb".into(),
                ..valid.clone()
            })),
            Code::InvalidArgument,
            "event.id",
        ),
        (
            "bad state key",
            append(Some(pb::Event {
                actions: Some(pb::EventActions {
                    // A null value: a value with no kind would be refused first, for that.
                    state_delta: [(
                        "user:".to_string(),
                        adk_grpc_proto::ordered::Value {
                            kind: Some(adk_grpc_proto::ordered::value::Kind::NullValue(0)),
                        },
                    )]
                    .into(),
                    ..Default::default()
                }),
                ..valid.clone()
            })),
            Code::InvalidArgument,
            "state_delta",
        ),
        (
            "stale precondition",
            pb::AppendEventRequest {
                precondition: Some(pb::AppendPrecondition {
                    expected: Some(pb::append_precondition::Expected::LastSequence(0)),
                }),
                ..append(Some(valid.clone()))
            },
            Code::Aborted,
            "modified in storage",
        ),
    ];
    for (name, request, code, needle) in cases {
        let err = raw.append_event(request).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        assert!(
            err.message().contains(needle),
            "{name}: {:?} should mention {needle:?}",
            err.message()
        );
    }

    let err = raw
        .get_session(pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events: Some(-1),
            after: None,
            since_compaction: false,
        })
        .await
        .expect_err("negative num_recent_events");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("num_recent_events"), "{}", err.message());

    let err = raw
        .list_sessions(pb::ListSessionsRequest {
            app_name: app.clone(),
            page_size: -1,
            ..Default::default()
        })
        .await
        .expect_err("negative page size");
    assert!(err.message().contains("page_size"), "{}", err.message());
    let err = raw
        .list_sessions(pb::ListSessionsRequest {
            app_name: app.clone(),
            page_token: "forged".into(),
            ..Default::default()
        })
        .await
        .expect_err("forged token");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("page_token"), "{}", err.message());
    let err = raw
        .list_events(pb::ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            page_token: "AAAA".into(),
            ..Default::default()
        })
        .await
        .expect_err("forged event token");
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = raw
        .create_session(pb::CreateSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "ttl".into(),
            ttl: Some(prost_types::Duration { seconds: -3, nanos: 0 }),
            ..Default::default()
        })
        .await
        .expect_err("negative ttl");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("ttl"), "{}", err.message());
    let err = raw
        .create_session(pb::CreateSessionRequest {
            app_name: app.clone(),
            user_id: "u\r\nv".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad user id");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("user_id"), "{}", err.message());

    assert_eq!(
        client.get(get_req(&app, "s")).await.expect("get"),
        before,
        "nothing stored changed"
    );

    // A session too big for one message: a clear status instead of a decoder failure in the client.
    for i in 0..10 {
        client
            .append_event(append_req(&app, "s", &format!("{i}{}", "x".repeat(10_000))))
            .await
            .expect("append");
    }
    let err = raw
        .get_session(pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect_err("too large for one message");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(
        err.message().contains("ListEvents") && err.message().contains("num_recent_events"),
        "{}",
        err.message()
    );
    let recent = raw
        .get_session(pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events: Some(2),
            after: None,
            since_compaction: false,
        })
        .await
        .expect("filtered get fits");
    assert_eq!(recent.into_inner().events.len(), 2);
}

/// docs/semantics.md, Events 3: an event sent with no id and no timestamp is stored with a
/// server-assigned UUIDv4 and the time of the append.
#[tokio::test]
async fn missing_event_id_and_timestamp_are_filled_in() {
    let stack = SessionStack::start(&[]).await;
    let app = unique_prefix("fill");
    stack
        .client()
        .await
        .create(create_req(&app, "s"))
        .await
        .expect("create");
    let mut raw = SessionServiceClient::connect(stack.server.endpoint())
        .await
        .expect("raw client");
    let before = chrono::Utc::now();
    let bare = pb::Event {
        author: "user".into(),
        ..Default::default()
    };
    let stored = raw
        .append_event(pb::AppendEventRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            event: Some(bare),
            precondition: None,
        })
        .await
        .expect("append")
        .into_inner();
    let id = uuid_v4(&stored.id);
    assert_eq!(id, 4, "the server assigns a UUIDv4, got {:?}", stored.id);
    let at = stored.timestamp.expect("the server assigns a timestamp");
    let at = chrono::DateTime::from_timestamp(at.seconds, at.nanos as u32).expect("valid time");
    assert!(
        at >= before - chrono::Duration::seconds(1) && at <= chrono::Utc::now(),
        "timestamp {at} is the append's time"
    );
    let session = stack.client().await.get(get_req(&app, "s")).await.expect("get");
    assert_eq!(
        session.events.at(0).expect("stored").id,
        stored.id,
        "the stored event carries the assigned id"
    );
}

/// The version of a UUID string, or 0 when it is not one.
fn uuid_v4(text: &str) -> usize {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    let shaped = text.len() == 36 && hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit());
    if shaped { hex[12..13].parse().unwrap_or(0) } else { 0 }
}

/// A Redis failure that is not an outage (here WRONGTYPE: user state planted as a string
/// where a hash belongs) reaches the client as INTERNAL with an error id and a plain
/// message, never Redis's own text; the server log has the id with the detail. On a
/// standalone Redis and on a cluster.
#[tokio::test]
async fn redis_errors_reach_the_client_as_an_id_and_the_log_as_the_detail() {
    let stack = SessionStack::start(&[]).await;
    let mut redis = stack.redis.connection().await;
    let cluster = RedisCluster::start(3).await;
    let on_cluster = spawn_session_server(&cluster.url(), &[]).await;
    for (store, server) in [("redis", &stack.server), ("cluster", &on_cluster)] {
        let app = unique_prefix("wrongtype");
        let client = connect(server).await;
        client.create(create_req(&app, "s1")).await.expect("create");
        // User state, read by every GetSession (app state would come from the server's cache).
        let user_state = format!("adk:user:{{{app}:u}}");
        match store {
            "redis" => {
                let () = redis::cmd("SET")
                    .arg(&user_state)
                    .arg("not a hash")
                    .query_async(&mut redis)
                    .await
                    .unwrap();
            }
            _ => {
                cluster.cli(&["SET", &user_state, "not a hash"]).await;
            }
        }
        let mut grpc = SessionServiceClient::connect(server.endpoint()).await.unwrap();
        let status = grpc
            .get_session(pb::GetSessionRequest {
                app_name: app.clone(),
                user_id: "u".into(),
                session_id: "s1".into(),
                ..Default::default()
            })
            .await
            .expect_err("the planted key breaks the read");
        assert_eq!(status.code(), Code::Internal, "{store}: {}", status.message());
        let id = status
            .message()
            .strip_prefix("internal error (id ")
            .and_then(|rest| rest.strip_suffix("); see the server log"))
            .unwrap_or_else(|| panic!("{store}: {}", status.message()))
            .to_string();
        assert!(!status.message().contains("WRONGTYPE"), "{store}: {}", status.message());
        let logged = |log: &str| log.lines().any(|line| line.contains(&id) && line.contains("WRONGTYPE"));
        adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
            if logged(&server.tail_log(200)) {
                Ok(())
            } else {
                Err(format!(
                    "{store}: no log line with id {id} and the detail:\n{}",
                    server.tail_log(30)
                ))
            }
        })
        .await;
    }
}

/// An `XRANGE` entry: its id and its field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// A GetSession reply read with its events left encoded.
#[derive(Clone, PartialEq, prost::Message)]
struct RawSession {
    /// `adk.v1.Session.events`.
    #[prost(bytes = "vec", repeated, tag = "5")]
    events: Vec<Vec<u8>>,
}

/// A ListEvents reply read with its events left encoded.
#[derive(Clone, PartialEq, prost::Message)]
struct RawEventPage {
    /// `adk.v1.ListEventsResponse.events`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    events: Vec<Vec<u8>>,
}

/// GetSession and ListEvents hand on the events' bytes as Redis holds them, without
/// decoding and re-encoding them (BENCHMARKS.md, "What a call costs the server"), and so
/// does WatchSession: a field this server does not know, as a newer server sharing the
/// store would write, reaches the client, and the events decode to what was appended on
/// all three paths, with every filter.
#[tokio::test]
async fn get_session_replies_with_the_stored_event_bytes() {
    let stack = SessionStack::start(&[]).await;
    let app = unique_prefix("stored-bytes");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    let mut appended = Vec::new();
    for text in ["one", "two", "three"] {
        appended.push(client.append_event(append_req(&app, "s", text)).await.expect("append"));
    }

    // The log rewritten with field 1000 (a varint, 7) after each event's bytes.
    let mut redis = stack.redis.connection().await;
    let key = format!("adk:events:{{{app}:u}}:s");
    let entries: Vec<StreamEntry> = redis::cmd("XRANGE")
        .arg(&key)
        .arg("-")
        .arg("+")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(entries.len(), 3);
    let () = redis::cmd("DEL").arg(&key).query_async(&mut redis).await.unwrap();
    let mut stored = Vec::new();
    for (id, fields) in entries {
        let (_, mut bytes) = fields
            .into_iter()
            .find(|(name, _)| name == "e")
            .expect("the event field");
        bytes.extend([0xc0, 0x3e, 0x07]);
        let _: String = redis::cmd("XADD")
            .arg(&key)
            .arg(&id)
            .arg("e")
            .arg(&bytes)
            .query_async(&mut redis)
            .await
            .unwrap();
        stored.push(bytes);
    }

    let channel = tonic::transport::Endpoint::from_shared(stack.server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    let mut raw_get = async |num_recent_events| {
        grpc.ready().await.unwrap();
        let request = pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            num_recent_events,
            ..Default::default()
        };
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/adk.v1.SessionService/GetSession");
        let reply: tonic::Response<RawSession> = grpc
            .unary(tonic::Request::new(request), path, tonic_prost::ProstCodec::default())
            .await
            .expect("GetSession");
        reply.into_inner().events
    };
    assert_eq!(raw_get(None).await, stored, "the stored bytes, field 1000 included");
    assert_eq!(raw_get(Some(2)).await, stored[1..]);
    grpc.ready().await.unwrap();
    let request = pb::ListEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        newest_first: true,
        ..Default::default()
    };
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/adk.v1.SessionService/ListEvents");
    let page: tonic::Response<RawEventPage> = grpc
        .unary(tonic::Request::new(request), path, tonic_prost::ProstCodec::default())
        .await
        .expect("ListEvents");
    let newest_first: Vec<_> = stored.iter().rev().cloned().collect();
    assert_eq!(page.into_inner().events, newest_first, "ListEvents: the stored bytes");

    // Decoded (the unknown field skipped), they are the appended events, filtered as asked.
    let session = client.get(get_req(&app, "s")).await.expect("get");
    assert_eq!(session.events.as_slice(), appended.as_slice());
    let after = client
        .get(GetRequest {
            after: Some(appended[1].timestamp),
            ..get_req(&app, "s")
        })
        .await
        .expect("get after");
    assert_eq!(after.events.as_slice(), &appended[1..]);
    let page = client
        .list_events(adk_grpc_core::ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect("list events");
    assert_eq!(page.events, appended);
    let mut watch = client
        .watch(WatchRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence: Some(0),
        })
        .await
        .expect("watch");
    for want in &appended {
        let got = tokio::time::timeout(Duration::from_secs(10), watch.next()).await;
        assert_eq!(&got.expect("in time").expect("an item").expect("an event"), want);
    }
}

/// A stored event whose bytes are broken is the same `INTERNAL` on GetSession, ListEvents
/// and WatchSession (the events before it still stream), and the server log names the
/// session and the event's sequence, in one wording (docs/semantics.md, Event log and
/// watches 6).
#[tokio::test]
async fn a_broken_stored_event_is_the_same_internal_error_on_every_read_path() {
    let stack = SessionStack::start(&[]).await;
    let app = unique_prefix("broken-event");
    let client = stack.client().await;
    client.create(create_req(&app, "s")).await.expect("create");
    client.append_event(append_req(&app, "s", "one")).await.expect("append");
    // Event 2 planted as a length-delimited field cut short, as damage would leave it.
    let mut redis = stack.redis.connection().await;
    let _: String = redis::cmd("XADD")
        .arg(format!("adk:events:{{{app}:u}}:s"))
        .arg("2-1")
        .arg("e")
        .arg(&[0x0a_u8, 0x05, 0x01][..])
        .query_async(&mut redis)
        .await
        .unwrap();
    let () = redis::cmd("HSET")
        .arg(format!("adk:sess:{{{app}:u}}:s"))
        .arg("seq")
        .arg(2)
        .query_async(&mut redis)
        .await
        .unwrap();

    let mut grpc = SessionServiceClient::connect(stack.server.endpoint()).await.unwrap();
    let get = grpc
        .get_session(pb::GetSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect_err("GetSession");
    let list = grpc
        .list_events(pb::ListEventsRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect_err("ListEvents");
    let mut watch = grpc
        .watch_session(pb::WatchSessionRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            after_sequence: Some(0),
        })
        .await
        .expect("WatchSession opens")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), watch.message()).await;
    assert_eq!(first.expect("in time").expect("event 1").expect("an event").sequence, 1);
    let watched = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("in time")
        .expect_err("WatchSession ends with the broken event");

    let detail = format!("stored event 2 of session s in app {app} for user u is broken: it does not decode");
    for (path, status) in [("GetSession", get), ("ListEvents", list), ("WatchSession", watched)] {
        assert_eq!(status.code(), Code::Internal, "{path}: {}", status.message());
        let id = status
            .message()
            .strip_prefix("internal error (id ")
            .and_then(|rest| rest.strip_suffix("); see the server log"))
            .unwrap_or_else(|| panic!("{path}: {}", status.message()))
            .to_string();
        eventually(Duration::from_secs(10), || async {
            let log = stack.server.tail_log(200);
            match log.lines().any(|line| line.contains(&id) && line.contains(&detail)) {
                true => Ok(()),
                false => Err(format!(
                    "{path}: no log line with id {id} and {detail:?}:\n{}",
                    stack.server.tail_log(30)
                )),
            }
        })
        .await;
    }
}
