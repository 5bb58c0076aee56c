//! Faults end to end (issue "Trustworthy under attack and failure", item 5): real
//! processes crashed with SIGKILL and clients that walk away mid-stream.
//!
//! - Redis is killed and restarted (AOF, `appendfsync always`) while clients append
//!   events and save artifacts: every acknowledged write survives exactly once, every
//!   failed call is `UNAVAILABLE` (or `DEADLINE_EXCEEDED`), and retrying a failed
//!   append with its event id never duplicates it.
//! - The runner is killed mid-invocation: the session holds only whole events and the
//!   state their deltas imply; once the dead run's lease expires a new run succeeds.
//! - Clients drop runs, uploads and watches mid-stream many times: nothing
//!   half-written becomes visible, and no stream, Redis connection or thread leaks.

use adk_grpc_core::artifact::{ListRequest, LoadRequest, SaveRequest, VersionsRequest};
use adk_grpc_core::convert::{json_from_proto, json_to_proto};
use adk_grpc_core::{
    AppendEventRequest, ArtifactService, Content, CreateRequest, Event, GetRequest, ListEventsRequest, Part, PartKind,
    SessionService,
};
use adk_grpc_e2e::runs::{
    self, agents_file, chat_app, run_to_end, spawn_runner, spawn_with_metrics, text_of as texts, user_text,
};
use adk_grpc_e2e::{connect, connect_artifacts, spawn_artifact_server, spawn_session_server};
use adk_grpc_models::testing::{FakeReply, FakeServer, SseEnd, SseScript, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess, unique_prefix};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

const USER: &str = "u";

// ---------- helpers ----------

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Deterministic bytes for one save.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    adk_grpc_e2e::Noise::new(seed).bytes(len)
}

fn has_function_response(event: &pb::Event) -> bool {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .any(|p| matches!(p.kind, Some(pb::part::Kind::FunctionResponse(_))))
}

fn run_request(app: &str, session: &str, text: &str) -> pb::RunRequest {
    runs::run_request(app, USER, session, user_text(text))
}

async fn get_pb_session(endpoint: &str, app: &str, session: &str) -> pb::Session {
    runs::get_session(endpoint.to_string(), app, USER, session).await
}

fn pb_state(session: &pb::Session) -> Map<String, Value> {
    session
        .state
        .iter()
        .flat_map(|s| s.iter())
        .map(|(k, v)| (k.to_string(), json_from_proto(k, v).expect("a value with a kind")))
        .collect()
}

/// The state the stored events' deltas imply, applied in sequence order.
fn folded_state(events: &[pb::Event]) -> Map<String, Value> {
    let mut state = Map::new();
    for event in events {
        if let Some(actions) = &event.actions {
            for (key, value) in &actions.state_delta {
                state.insert(key.clone(), json_from_proto(key, value).expect("a value with a kind"));
            }
        }
    }
    state
}

/// Stored events are whole: each has an id, no `partial` flag, ids are unique and
/// sequences run 1..=n.
#[track_caller]
fn assert_whole_and_contiguous(events: &[pb::Event], context: &str) {
    let sequences: Vec<u64> = events.iter().map(|e| e.sequence).collect();
    let want: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(sequences, want, "{context}: sequences are contiguous from 1");
    let ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "{context}: event ids are unique");
    for event in events {
        assert!(!event.id.is_empty(), "{context}: a stored event has an id: {event:?}");
        assert!(
            event.partial != Some(true),
            "{context}: partial events are never stored: {event:?}"
        );
        assert!(event.timestamp.is_some(), "{context}: a stored event has a timestamp");
    }
}

/// GET /metrics over plain HTTP/1.1; the sum of the samples of `name`.
async fn metric_sum(port: u16, name: &str) -> f64 {
    let reply = runs::metrics_reply(port).await;
    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP reply");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// `Threads:` of /proc/PID/status.
fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process is alive");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Threads line")
}

async fn connected_clients(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(redis)
        .await
        .expect("INFO clients");
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("connected_clients")
}

/// How many SET commands Redis has run (`INFO commandstats`).
async fn set_calls(redis: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn keys(redis: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(pattern).query_async(redis).await.expect("KEYS")
}

/// Whether `check` holds within `within`: the test kit's wait, for checks whose
/// failure message is written after the test stopped its load.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let attempt = || {
        let held = check();
        async move { if held.await { Ok(()) } else { Err(String::new()) } }
    };
    adk_grpc_testkit::try_eventually(within, attempt).await.is_ok()
}

// ---------- 1. Redis crashes under concurrent writes ----------

/// What one append call returned.
enum AppendOutcome {
    Acked(Event),
    Failed(Event, Code),
}

/// What one artifact save returned: the name, the bytes' SHA-256, and the version or failure.
enum SaveOutcome {
    Acked(String, i64, String),
    Failed(String, String, Code),
}

const APPEND_TASKS: usize = 8;
const SAVE_TASKS: usize = 4;
/// A call that takes longer than this is recorded as a client-side deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn acknowledged_writes_survive_a_redis_crash_and_failed_ones_are_unavailable_and_idempotent() {
    let mut redis = RedisServer::start().await;
    let sessions_server = spawn_session_server(&redis.url(), &["--health-interval-ms", "200"]).await;
    let artifacts_server = spawn_artifact_server(&redis.url(), &["--health-interval-ms", "200"]).await;
    let sessions = connect(&sessions_server).await;
    let artifacts = connect_artifacts(&artifacts_server).await;
    let app = unique_prefix("faults-redis");
    for task in 0..APPEND_TASKS {
        sessions
            .create(CreateRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: Some(format!("s{task}")),
                state: Default::default(),
                ttl: None,
            })
            .await
            .expect("create");
    }

    // Writers run until told to stop; each counts its successes after the restart.
    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let per_writer =
        || -> Arc<Vec<AtomicUsize>> { Arc::new((0..APPEND_TASKS + SAVE_TASKS).map(|_| AtomicUsize::new(0)).collect()) };
    let ok_after_restart = per_writer();
    // Every writer's acknowledged and failed calls, whenever they happened.
    let (acked, failed) = (per_writer(), per_writer());

    let mut appenders = Vec::new();
    for task in 0..APPEND_TASKS {
        let (sessions, app, stop) = (sessions.clone(), app.clone(), stop.clone());
        let (restarted, ok_after_restart) = (restarted.clone(), ok_after_restart.clone());
        let (acked, failed) = (acked.clone(), failed.clone());
        appenders.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let event = Event::new("e-faults")
                    .with_author("user")
                    .with_content(Content::new("user").with_text(format!("task {task} write {i}")))
                    .with_state_delta(format!("last_{task}"), json!(i));
                let req = AppendEventRequest {
                    timestamp_missing: false,
                    app_name: app.clone(),
                    user_id: USER.into(),
                    session_id: format!("s{task}"),
                    event: event.clone(),
                    precondition: None,
                };
                let after_restart = restarted.load(Ordering::SeqCst);
                let outcome = tokio::time::timeout(CALL_TIMEOUT, sessions.append_event(req)).await;
                let counts = if matches!(outcome, Ok(Ok(_))) { &acked } else { &failed };
                counts[task].fetch_add(1, Ordering::SeqCst);
                match outcome {
                    Ok(Ok(stored)) => {
                        if after_restart {
                            ok_after_restart[task].fetch_add(1, Ordering::SeqCst);
                        }
                        outcomes.push(AppendOutcome::Acked(stored));
                    }
                    Ok(Err(err)) => outcomes.push(AppendOutcome::Failed(event, err.code())),
                    Err(_) => outcomes.push(AppendOutcome::Failed(event, Code::DeadlineExceeded)),
                }
                i += 1;
                // Pacing, not a wait: it bounds each writer's rate so the outcome logs
                // the test verifies stay small; nothing waits for a condition here.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            outcomes
        }));
    }
    let mut savers = Vec::new();
    for task in 0..SAVE_TASKS {
        let (artifacts, app, stop) = (artifacts.clone(), app.clone(), stop.clone());
        let (restarted, ok_after_restart) = (restarted.clone(), ok_after_restart.clone());
        let (acked, failed) = (acked.clone(), failed.clone());
        savers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("t{task}.bin");
                let bytes = noise(4096 + (i as usize % 7) * 1000, (task as u64) << 32 | i);
                let sha = sha256_hex(&bytes);
                let req = SaveRequest {
                    app_name: app.clone(),
                    user_id: USER.into(),
                    session_id: "s0".into(),
                    file_name: name.clone(),
                    part: Part::inline_data("application/octet-stream", bytes),
                    version: None,
                };
                let after_restart = restarted.load(Ordering::SeqCst);
                let outcome = tokio::time::timeout(CALL_TIMEOUT, artifacts.save(req)).await;
                let counts = if matches!(outcome, Ok(Ok(_))) { &acked } else { &failed };
                counts[APPEND_TASKS + task].fetch_add(1, Ordering::SeqCst);
                match outcome {
                    Ok(Ok(saved)) => {
                        if after_restart {
                            ok_after_restart[APPEND_TASKS + task].fetch_add(1, Ordering::SeqCst);
                        }
                        outcomes.push(SaveOutcome::Acked(name, saved.version, sha));
                    }
                    Ok(Err(err)) => outcomes.push(SaveOutcome::Failed(name, sha, err.code())),
                    Err(_) => outcomes.push(SaveOutcome::Failed(name, sha, Code::DeadlineExceeded)),
                }
                i += 1;
                // Pacing, not a wait: it bounds each writer's rate so the outcome logs
                // the test verifies stay small; nothing waits for a condition here.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            outcomes
        }));
    }

    // Writes flow (every writer has had some acknowledged), Redis crashes mid-flight,
    // stays down until every writer has seen a call fail, and comes back from its AOF.
    let every_writer = |counts: Arc<Vec<AtomicUsize>>, at_least: usize| async move {
        counts.iter().all(|n| n.load(Ordering::SeqCst) >= at_least)
    };
    assert!(
        eventually(Duration::from_secs(30), || every_writer(acked.clone(), 3)).await,
        "writes flow before the crash"
    );
    // Failures from here on are the outage's.
    failed.iter().for_each(|n| n.store(0, Ordering::SeqCst));
    redis.kill9().await;
    assert!(
        eventually(CALL_TIMEOUT * 2, || every_writer(failed.clone(), 1)).await,
        "every writer sees Redis down"
    );
    redis.restart().await;
    restarted.store(true, Ordering::SeqCst);
    // The same server processes recover by themselves: every writer succeeds again.
    let recovered = eventually(Duration::from_secs(40), || {
        let ok_after_restart = ok_after_restart.clone();
        async move { ok_after_restart.iter().all(|n| n.load(Ordering::SeqCst) >= 3) }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut appends = Vec::new();
    for handle in appenders {
        appends.push(handle.await.expect("appender"));
    }
    let mut saves = Vec::new();
    for handle in savers {
        saves.push(handle.await.expect("saver"));
    }
    assert!(
        recovered,
        "every writer succeeds again after Redis is back, without a server restart\nsession server:\n{}\nartifact server:\n{}",
        sessions_server.tail_log(20),
        artifacts_server.tail_log(20)
    );

    // Every failure is retryable UNAVAILABLE (a call cut off by our deadline counts as DEADLINE_EXCEEDED).
    let mut codes: HashMap<String, usize> = HashMap::new();
    let failure_codes = appends
        .iter()
        .flatten()
        .filter_map(|o| match o {
            AppendOutcome::Failed(_, code) => Some(*code),
            AppendOutcome::Acked(_) => None,
        })
        .chain(saves.iter().flatten().filter_map(|o| match o {
            SaveOutcome::Failed(_, _, code) => Some(*code),
            SaveOutcome::Acked(..) => None,
        }));
    for code in failure_codes {
        assert!(
            matches!(code, Code::Unavailable | Code::DeadlineExceeded),
            "a Redis outage fails calls with UNAVAILABLE (or DEADLINE_EXCEEDED), got {code:?}"
        );
        *codes.entry(format!("{code:?}")).or_default() += 1;
    }

    // Appends: every acknowledged one exactly once, where it was acknowledged, in order;
    // a failed one at most once; retrying a failed one returns the stored event or
    // appends it once.
    let (mut acked_total, mut failed_total, mut failed_but_stored, mut retried_new) = (0, 0, 0, 0);
    for (task, outcomes) in appends.iter().enumerate() {
        let session_id = format!("s{task}");
        let stored = sessions
            .get(GetRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: session_id.clone(),
                ..Default::default()
            })
            .await
            .expect("get after recovery")
            .events
            .as_slice()
            .to_vec();
        let listed = list_all_events(&sessions, &app, &session_id).await;
        assert_eq!(listed, stored, "ListEvents and GetSession agree");
        let sequences: Vec<u64> = stored.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=stored.len() as u64).collect::<Vec<_>>(), "{session_id}");
        let by_id: HashMap<&str, &Event> = stored.iter().map(|e| (e.id.as_str(), e)).collect();
        assert_eq!(by_id.len(), stored.len(), "{session_id}: no event stored twice");

        let mut last_acked_sequence = 0;
        for outcome in outcomes {
            match outcome {
                AppendOutcome::Acked(event) => {
                    acked_total += 1;
                    let found = by_id
                        .get(event.id.as_str())
                        .unwrap_or_else(|| panic!("{session_id}: acknowledged event {} lost", event.sequence));
                    assert_eq!(*found, event, "{session_id}: stored as acknowledged");
                    assert!(event.sequence > last_acked_sequence, "{session_id}: in call order");
                    last_acked_sequence = event.sequence;
                }
                AppendOutcome::Failed(event, _) => {
                    failed_total += 1;
                    let was_stored = by_id.get(event.id.as_str()).copied().cloned();
                    if was_stored.is_some() {
                        failed_but_stored += 1;
                    }
                    let retry = sessions
                        .append_event(AppendEventRequest {
                            timestamp_missing: false,
                            app_name: app.clone(),
                            user_id: USER.into(),
                            session_id: session_id.clone(),
                            event: event.clone(),
                            precondition: None,
                        })
                        .await
                        .expect("retrying a failed append after recovery");
                    assert_eq!(retry.id, event.id, "the retry keeps the event id");
                    match was_stored {
                        Some(stored) => assert_eq!(retry, stored, "a retry returns the stored event"),
                        None => retried_new += 1,
                    }
                }
            }
        }
        // After the retries: every event of this task exactly once, nothing else.
        let after = list_all_events(&sessions, &app, &session_id).await;
        let sequences: Vec<u64> = after.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (1..=after.len() as u64).collect::<Vec<_>>(), "{session_id}");
        let mut ids: Vec<&str> = after.iter().map(|e| e.id.as_str()).collect();
        ids.sort_unstable();
        let mut want: Vec<&str> = outcomes
            .iter()
            .map(|o| match o {
                AppendOutcome::Acked(e) | AppendOutcome::Failed(e, _) => e.id.as_str(),
            })
            .collect();
        want.sort_unstable();
        assert_eq!(
            ids, want,
            "{session_id}: every call's event exactly once after the retries"
        );
    }

    // Artifacts: every acknowledged version loads with its bytes; a version no call
    // acknowledged (a failed save whose commit landed) holds whole bytes of a failed save.
    let (mut saves_acked, mut saves_failed, mut saves_failed_but_stored) = (0, 0, 0);
    for outcomes in &saves {
        let mut acked: HashMap<i64, &str> = HashMap::new();
        let mut failed_hashes: HashSet<&str> = HashSet::new();
        let mut name = None;
        for outcome in outcomes {
            match outcome {
                SaveOutcome::Acked(n, version, sha) => {
                    saves_acked += 1;
                    name = Some(n.clone());
                    assert!(
                        acked.insert(*version, sha).is_none(),
                        "{n}: version {version} given twice"
                    );
                }
                SaveOutcome::Failed(n, sha, _) => {
                    saves_failed += 1;
                    name = Some(n.clone());
                    failed_hashes.insert(sha);
                }
            }
        }
        let name = name.expect("each saver made calls");
        let versions = artifacts
            .versions(VersionsRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: "s0".into(),
                file_name: name.clone(),
            })
            .await
            .expect("versions")
            .versions;
        for version in acked.keys() {
            assert!(
                versions.contains(version),
                "{name}: acknowledged version {version} lost"
            );
        }
        for version in versions {
            let loaded = artifacts
                .load(LoadRequest {
                    app_name: app.clone(),
                    user_id: USER.into(),
                    session_id: "s0".into(),
                    file_name: name.clone(),
                    version: Some(version),
                })
                .await
                .unwrap_or_else(|e| panic!("{name} v{version} loads: {e}"));
            let PartKind::InlineData { data, .. } = &loaded.part.kind else {
                panic!("{name} v{version}: inline data");
            };
            let sha = sha256_hex(data);
            match acked.get(&version) {
                Some(want) => assert_eq!(&sha, want, "{name} v{version}: the acknowledged bytes"),
                None => {
                    saves_failed_but_stored += 1;
                    assert!(
                        failed_hashes.contains(sha.as_str()),
                        "{name} v{version}: an unacknowledged version holds a failed save's whole bytes"
                    );
                }
            }
        }
    }
    println!(
        "redis crash: appends acknowledged {acked_total}, failed {failed_total} \
         (stored anyway {failed_but_stored}, appended by retry {retried_new}); \
         saves acknowledged {saves_acked}, failed {saves_failed} (stored anyway {saves_failed_but_stored}); \
         failure codes {codes:?}"
    );
    assert!(failed_total + saves_failed > 0, "the outage was seen by the writers");
    assert!(acked_total > 0 && saves_acked > 0);
}

async fn list_all_events(sessions: &adk_grpc_client::RemoteSessionService, app: &str, session_id: &str) -> Vec<Event> {
    let mut events = Vec::new();
    let mut page_token = None;
    loop {
        let page = sessions
            .list_events(ListEventsRequest {
                app_name: app.into(),
                user_id: USER.into(),
                session_id: session_id.into(),
                page_size: 50,
                page_token,
                newest_first: false,
            })
            .await
            .expect("ListEvents");
        events.extend(page.events);
        match page.next_page_token {
            Some(token) if !token.is_empty() => page_token = Some(token),
            _ => return events,
        }
    }
}

// ---------- 2. The runner crashes mid-invocation ----------

/// A tool server that answers every call with `{"ok": true}`.
async fn tool_server() -> String {
    let app = axum::Router::new().route(
        "/tool",
        axum::routing::post(|| async { ([("content-type", "application/json")], r#"{"ok":true}"#) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/tool", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

fn tool_app(provider_url: &str, tool_url: &str) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider_url}', timeout_secs: 120 }}
tools:
  lookup:
    kind: http
    url: '{tool_url}'
    description: Looks something up.
    parameters: {{ type: object, properties: {{ q: {{ type: string }} }}, required: [q] }}
apps:
  tooly:
    root_agent: {{ name: worker, model: gpt, tools: [lookup], output_key: last_reply }}
"
    )
}

#[tokio::test]
async fn a_runner_killed_mid_invocation_leaves_whole_events_and_the_session_runs_again_within_the_short_lease() {
    let provider = FakeServer::start().await;
    let tool_url = tool_server().await;
    let redis = RedisServer::start().await;
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let agents = agents_file(&tool_app(provider.url(), &tool_url));
    // A lease of 2 s (renewed every ~0.7 s while the runner lives).
    let mut runner = spawn_runner(&redis.url(), &agents, &["--session-lease-ttl-ms".into(), "2000".into()]).await;
    let mut client = AgentRunnerClient::connect(runner.endpoint()).await.expect("connect");

    // A whole first turn: the user's message with its delta, a tool call, its result, a reply.
    provider.push(openai::tool_calls(&[("call_1", "lookup", json!({"q": "one"}))]));
    provider.push(openai::text("Done one."));
    let mut first = run_request("tooly", "s1", "Turn one");
    first.state_delta = [
        ("user:name".to_string(), json_to_proto(&json!("Ada"))),
        ("phase".to_string(), json_to_proto(&json!("one"))),
    ]
    .into();
    let (events, error) = run_to_end(&mut client, first).await;
    assert!(error.is_none(), "the first run succeeds: {error:?}");
    assert_eq!(events.len(), 3, "call, result, reply");

    // The second turn stores the call and its result, then the model stalls: the runner dies.
    provider.push(openai::tool_calls(&[("call_2", "lookup", json!({"q": "two"}))]));
    provider.push(FakeReply::Stall);
    let mut second = run_request("tooly", "s1", "Turn two");
    second.state_delta = [("phase".to_string(), json_to_proto(&json!("two")))].into();
    let mut stream = client.run(second).await.expect("the run starts").into_inner();
    let mut streamed = Vec::new();
    while !streamed.iter().any(has_function_response) {
        let event = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("events in time")
            .expect("the stream is open")
            .expect("not the end");
        streamed.push(event);
    }
    assert!(
        eventually(Duration::from_secs(20), || {
            let n = provider.requests().len();
            async move { n == 4 }
        })
        .await,
        "the runner is waiting on the stalled model request"
    );
    let invocation = streamed[0].invocation_id.clone();
    runner.kill9().await;
    drop(stream);

    let session = get_pb_session(&sessions.endpoint(), "tooly", "s1").await;
    assert_whole_and_contiguous(&session.events, "after the runner crash");
    let stored: Vec<String> = session.events.iter().map(texts).collect();
    assert_eq!(
        stored,
        ["Turn one", "", "", "Done one.", "Turn two", "", ""],
        "turn one whole; of turn two the message, the call and its result"
    );
    let streamed_ids: Vec<&str> = streamed.iter().map(|e| e.id.as_str()).collect();
    let stored_ids: Vec<&str> = session.events[4..].iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        streamed_ids, stored_ids,
        "what was streamed (the user's event first) is what was stored"
    );
    let state = pb_state(&session);
    assert_eq!(
        state,
        folded_state(&session.events),
        "the state is exactly what the stored deltas imply"
    );
    assert_eq!(
        Value::Object(state),
        json!({"user:name": "Ada", "phase": "two", "last_reply": "Done one."})
    );

    // A restarted runner resumes the dead invocation once its short lease lapsed
    // (semantics 7.26): its model call after the stored tool result is made again, and
    // the session is busy until it is done; then the next run goes through.
    runner.restart().await;
    let client = AgentRunnerClient::connect(runner.endpoint()).await.expect("connect");
    provider.push(openai::text("Done two."));
    provider.push(openai::text("Back."));
    let refused = Arc::new(AtomicUsize::new(0));
    let third = Arc::new(std::sync::Mutex::new(None));
    let freed = eventually(Duration::from_secs(15), || {
        let (mut client, refused, third, invocation) =
            (client.clone(), refused.clone(), third.clone(), invocation.clone());
        async move {
            let (events, error) = run_to_end(&mut client, run_request("tooly", "s1", "Turn three")).await;
            match error {
                Some(status) if status.code() == Code::Aborted => {
                    assert!(
                        status.message().contains(&invocation),
                        "busy with the dead invocation: {}",
                        status.message()
                    );
                    refused.fetch_add(1, Ordering::SeqCst);
                    false
                }
                error => {
                    *third.lock().unwrap() = Some((events, error));
                    true
                }
            }
        }
    })
    .await;
    assert!(freed, "the session is free once the resumed invocation finished");
    let (events, error) = third.lock().unwrap().take().expect("the run's outcome");
    assert!(error.is_none(), "the run after the lease expired succeeds: {error:?}");
    assert_eq!(texts(events.last().expect("a reply")), "Back.");
    println!(
        "runner crash: {} runs refused (ABORTED) until the resumed invocation finished",
        refused.load(Ordering::SeqCst)
    );

    // The crashed invocation was finished by its agent, before the new message, and the
    // model saw a well-formed history.
    let session = get_pb_session(&sessions.endpoint(), "tooly", "s1").await;
    assert_whole_and_contiguous(&session.events, "after the new run");
    assert_eq!(session.events.len(), 10);
    let resumed = &session.events[7];
    assert_eq!(resumed.invocation_id, invocation, "it finishes the crashed invocation");
    assert_eq!(texts(resumed), "Done two.");
    assert_eq!(resumed.interrupted, None);
    assert_eq!(
        resumed.author, session.events[5].author,
        "by the agent that was answering"
    );
    assert_eq!(provider.requests().len(), 6, "the stored tool call was not made again");
    assert_eq!(texts(&session.events[8]), "Turn three");
    assert_eq!(pb_state(&session), folded_state(&session.events));
    let last_request = provider.requests().last().expect("the model was asked").json();
    let roles: Vec<&str> = last_request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert!(
        !roles.windows(2).any(|pair| pair == ["user", "user"]),
        "no two user messages in a row: {roles:?}"
    );
    assert_eq!(roles.last(), Some(&"user"));
    assert_eq!(
        roles[roles.len() - 2],
        "assistant",
        "the interrupted turn is closed: {roles:?}"
    );
}

// ---------- 3. Clients that walk away mid-stream ----------

const DROPS: usize = 50;

fn hanging_app(provider_url: &str) -> String {
    chat_app(provider_url, 120)
}

/// One server's leak indicators.
#[derive(Debug, Clone, Copy)]
struct Indicators {
    threads: u64,
    rss_kib: u64,
}

fn indicators(server: &ServiceProcess) -> Indicators {
    Indicators {
        threads: threads(server.pid()),
        rss_kib: server.rss_kib().expect("alive"),
    }
}

#[tokio::test]
async fn dropped_runs_uploads_and_watches_leave_nothing_half_written_and_leak_nothing() {
    let provider = FakeServer::start().await;
    let redis = RedisServer::start().await;
    let store = || vec!["--store-url".to_string(), redis.url()];
    let (sessions, sessions_metrics) = spawn_with_metrics("adk-session-server", &store()).await;
    let mut artifact_args = store();
    artifact_args.extend(["--artifact-chunk-bytes".to_string(), "4096".to_string()]);
    let (artifacts, artifacts_metrics) = spawn_with_metrics("adk-artifact-server", &artifact_args).await;
    let agents = agents_file(&hanging_app(provider.url()));
    let mut runner_args = store();
    runner_args.extend(["--agents".to_string(), agents.path().display().to_string()]);
    let (runner, runner_metrics) = spawn_with_metrics("adk-runner-server", &runner_args).await;
    let mut redis_conn = redis.connection().await;

    let app = unique_prefix("faults-drop");
    let mut run_client = AgentRunnerClient::connect(runner.endpoint()).await.expect("connect");
    let mut session_client = SessionServiceClient::connect(sessions.endpoint())
        .await
        .expect("connect");
    let mut artifact_client = ArtifactServiceClient::connect(artifacts.endpoint())
        .await
        .expect("connect");
    let writer = connect(&sessions).await;
    let artifact_reader = connect_artifacts(&artifacts).await;
    writer
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: USER.into(),
            session_id: Some("w".into()),
            state: Default::default(),
            ttl: None,
        })
        .await
        .expect("create");

    // Warm up every path once, whole, so lazily opened connections exist before the baseline.
    provider.push(openai::text("Warm."));
    let (_, error) = run_to_end(&mut run_client, run_request("chat", "warm", "Hi")).await;
    assert!(error.is_none(), "{error:?}");
    upload(&mut artifact_client, artifacts_metrics, &app, "warm.bin", 3, true)
        .await
        .expect("a whole upload");
    let mut watching = open_watch(&mut session_client, &app).await;
    let appended = append_text(&writer, &app, "warm").await;
    let got = next_event(&mut watching).await;
    assert_eq!(got.id, appended.id);
    drop(watching);
    let streams_zero = |port: u16| async move { metric_sum(port, "adk_grpc_server_active_streams").await == 0.0 };
    for port in [sessions_metrics, artifacts_metrics, runner_metrics] {
        assert!(eventually(Duration::from_secs(10), || streams_zero(port)).await);
    }
    // The baseline once the warm-up's Redis connections have settled: the same count on
    // two reads in a row.
    let last_count = Arc::new(AtomicU64::new(u64::MAX));
    let redis_before = adk_grpc_testkit::eventually(Duration::from_secs(10), || {
        let (mut conn, last_count) = (redis_conn.clone(), last_count.clone());
        async move {
            let now = connected_clients(&mut conn).await;
            match last_count.swap(now, Ordering::SeqCst) {
                last if last == now => Ok(now),
                last => Err(format!("Redis connected_clients still moving ({last} then {now})")),
            }
        }
    })
    .await;
    let before = [indicators(&sessions), indicators(&artifacts), indicators(&runner)];

    // Runs dropped once the model has started answering (each on its own session).
    for i in 0..DROPS {
        provider.push(SseScript::data([openai::role_chunk(), openai::text_chunk("Thinking")]).ending(SseEnd::Hang));
        let mut stream = run_client
            .run(pb::RunRequest {
                run_config: Some(pb::RunConfig {
                    streaming_mode: pb::StreamingMode::Sse as i32,
                    max_llm_calls: 0,
                    ..Default::default()
                }),
                ..run_request("chat", &format!("d{i}"), "Think hard")
            })
            .await
            .expect("the run starts")
            .into_inner();
        assert_eq!(next_event(&mut stream).await.author, "user", "the stored user event");
        assert_eq!(
            next_event(&mut stream).await.partial,
            Some(true),
            "the model's first token"
        );
        drop(stream);
    }
    assert!(
        provider.wait_for_disconnects(DROPS, Duration::from_secs(20)).await,
        "every dropped run cancelled its model request ({} of {DROPS})",
        provider.disconnects()
    );

    // Uploads dropped after some chunks were sent: Redis counts the pending chunk
    // writes, so the drops really happened mid-write.
    let sets_before = set_calls(&mut redis_conn).await;
    for i in 0..DROPS {
        let result = upload(
            &mut artifact_client,
            artifacts_metrics,
            &app,
            &format!("drop{i}.bin"),
            2 + i % 4,
            false,
        )
        .await;
        assert!(result.is_none(), "a dropped upload returns nothing");
    }
    let pending_writes = set_calls(&mut redis_conn).await - sets_before;
    assert!(
        pending_writes >= DROPS as u64,
        "the dropped uploads had written pending chunks ({pending_writes} SETs)"
    );

    // Watches dropped after one live event; first a few held at once, to see what
    // an open watch costs in Redis connections.
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(open_watch(&mut session_client, &app).await);
    }
    let appended = append_text(&writer, &app, "to the held watches").await;
    for watching in &mut held {
        assert_eq!(next_event(watching).await.id, appended.id);
    }
    let redis_while_watching = connected_clients(&mut redis_conn).await;
    drop(held);
    for i in 0..DROPS {
        let mut watching = open_watch(&mut session_client, &app).await;
        let appended = append_text(&writer, &app, &format!("live {i}")).await;
        let got = next_event(&mut watching).await;
        assert_eq!(got.id, appended.id, "the watch saw the live event");
        drop(watching);
    }

    // Nothing leaks: streams end, Redis connections and threads return, memory stays put.
    for (name, port) in [
        ("session", sessions_metrics),
        ("artifact", artifacts_metrics),
        ("runner", runner_metrics),
    ] {
        assert!(
            eventually(Duration::from_secs(15), || streams_zero(port)).await,
            "{name} server: active streams back to 0 (now {})",
            metric_sum(port, "adk_grpc_server_active_streams").await
        );
    }
    let redis_after = adk_grpc_testkit::eventually(Duration::from_secs(15), || {
        let mut redis_conn = redis_conn.clone();
        async move {
            match connected_clients(&mut redis_conn).await {
                now if now <= redis_before => Ok(now),
                now => Err(format!("Redis connected_clients back to {redis_before} (now {now})")),
            }
        }
    })
    .await;
    adk_grpc_testkit::eventually(Duration::from_secs(15), || {
        let mut redis_conn = redis_conn.clone();
        async move {
            match keys(&mut redis_conn, "adk:artup:*").await {
                pending if pending.is_empty() => Ok(()),
                pending => Err(format!(
                    "the pending chunks of dropped uploads are deleted, left: {pending:?}"
                )),
            }
        }
    })
    .await;
    let after = [indicators(&sessions), indicators(&artifacts), indicators(&runner)];
    for ((name, before), after) in ["session", "artifact", "runner"].iter().zip(before).zip(after) {
        println!(
            "{name} server: threads {} -> {}, RSS {} KiB -> {} KiB",
            before.threads, after.threads, before.rss_kib, after.rss_kib
        );
        assert!(
            after.threads <= before.threads + 4,
            "{name} server: threads stable ({before:?} -> {after:?})"
        );
        assert!(
            after.rss_kib <= before.rss_kib + 64 * 1024,
            "{name} server: memory stable ({before:?} -> {after:?})"
        );
    }
    println!(
        "drops: {DROPS} runs, {DROPS} uploads ({pending_writes} pending chunk writes), {DROPS} watches; \
         Redis connected_clients {redis_before} before, {redis_while_watching} with 5 watches open, {redis_after} after"
    );

    // Nothing half-written is visible: no version of a dropped upload, only the user's
    // message in each dropped run's session.
    let names = artifact_reader
        .list(ListRequest {
            app_name: app.clone(),
            user_id: USER.into(),
            session_id: "s".into(),
        })
        .await
        .expect("list")
        .file_names;
    assert_eq!(names, ["warm.bin"], "no dropped upload left a version");
    for i in 0..DROPS {
        let versions = artifact_reader
            .versions(VersionsRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: "s".into(),
                file_name: format!("drop{i}.bin"),
            })
            .await
            .expect("versions")
            .versions;
        assert!(versions.is_empty(), "drop{i}.bin: no version");
    }
    for i in 0..DROPS {
        let session = get_pb_session(&sessions.endpoint(), "chat", &format!("d{i}")).await;
        assert_whole_and_contiguous(&session.events, "a dropped run's session");
        let stored: Vec<String> = session.events.iter().map(texts).collect();
        assert_eq!(
            stored,
            ["Think hard"],
            "d{i}: only the user's message; the reply never completed"
        );
    }
    // The servers still serve.
    provider.push(openai::text("Still here."));
    let (events, error) = run_to_end(&mut run_client, run_request("chat", "after", "Hi")).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(texts(events.last().expect("a reply")), "Still here.");
}

/// Uploads `chunks` chunks of 5000 bytes to `name`. With `finish` the stream ends
/// and the version is returned; without, the call is dropped while the stream is
/// still open (the channel holds one message, so all but the last chunk were already
/// taken by the transport; the server's pending-chunk SETs are counted by the caller)
/// and `None` returned.
async fn upload(
    client: &mut ArtifactServiceClient<Channel>,
    metrics_port: u16,
    app: &str,
    name: &str,
    chunks: usize,
    finish: bool,
) -> Option<i64> {
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::UploadArtifactRequest>(1);
    let header = pb::UploadArtifactRequest {
        message: Some(pb::upload_artifact_request::Message::Header(pb::UploadHeader {
            r#ref: Some(pb::ArtifactRef {
                app_name: app.into(),
                user_id: USER.into(),
                session_id: "s".into(),
                file_name: name.into(),
            }),
            mime_type: "application/octet-stream".into(),
            ..Default::default()
        })),
    };
    let mut client = client.clone();
    let call = tokio::spawn(async move {
        client
            .upload_artifact(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    tx.send(header).await.expect("send the header");
    for i in 0..chunks {
        let chunk = pb::UploadArtifactRequest {
            message: Some(pb::upload_artifact_request::Message::Chunk(noise(5000, i as u64))),
        };
        tx.send(chunk).await.expect("send a chunk");
    }
    if finish {
        drop(tx);
        let saved = call.await.expect("the upload task").expect("UploadArtifact");
        return Some(saved.into_inner().version);
    }
    // Walk away mid-stream once the server is in the upload (its handler holds the open
    // stream: the UploadArtifact gauge counts it).
    let in_upload = || async move { metric_sum(metrics_port, "adk_grpc_server_active_streams").await >= 1.0 };
    assert!(
        eventually(Duration::from_secs(10), in_upload).await,
        "the server never took the upload in"
    );
    call.abort();
    let _ = call.await;
    drop(tx);
    None
}

async fn open_watch(client: &mut SessionServiceClient<Channel>, app: &str) -> tonic::Streaming<pb::Event> {
    client
        .watch_session(pb::WatchSessionRequest {
            app_name: app.into(),
            user_id: USER.into(),
            session_id: "w".into(),
            after_sequence: None,
        })
        .await
        .expect("WatchSession")
        .into_inner()
}

async fn next_event(stream: &mut tonic::Streaming<pb::Event>) -> pb::Event {
    tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .expect("an event in time")
        .expect("the stream is open")
        .expect("not the end")
}

async fn append_text(writer: &adk_grpc_client::RemoteSessionService, app: &str, text: &str) -> Event {
    writer
        .append_event(AppendEventRequest {
            timestamp_missing: false,
            app_name: app.into(),
            user_id: USER.into(),
            session_id: "w".into(),
            event: Event::new("e-faults")
                .with_author("user")
                .with_content(Content::new("user").with_text(text)),
            precondition: None,
        })
        .await
        .expect("append")
}
