//! The Prometheus endpoint end to end: the real binaries with
//! `--metrics-listen 127.0.0.1:<port>`, scraped over plain HTTP before and after
//! real traffic; the exposition text is parsed and the series compared.

use adk_grpc_e2e::runs::{metrics_reply, spawn_with_metrics, user_text};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, workspace_bin};
use std::path::PathBuf;
use std::time::Duration;
use tonic::Code;

/// A sample: metric name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// One scrape: every sample.
struct Scrape {
    samples: Vec<Sample>,
}

impl Scrape {
    /// Parses the text exposition format (the subset Prometheus clients write:
    /// `name{label="value",...} number`, comments skipped).
    fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad sample line {line:?}"));
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let body = rest
                        .strip_suffix('}')
                        .unwrap_or_else(|| panic!("bad labels in {line:?}"));
                    let labels = body
                        .split("\",")
                        .filter(|pair| !pair.is_empty())
                        .map(|pair| {
                            let (key, value) = pair
                                .split_once("=\"")
                                .unwrap_or_else(|| panic!("bad label in {line:?}"));
                            (key.to_string(), value.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name.to_string(), labels)
                }
                None => (series.to_string(), Vec::new()),
            };
            samples.push((name, labels, value));
        }
        Scrape { samples }
    }

    /// The sum of the samples of `name` having all of `labels` (0 when there are none).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v)))
            .map(|(_, _, v)| v)
            .sum()
    }
}

/// GET /metrics over a plain TCP connection (HTTP/1.1, closed after the reply).
async fn scrape(port: u16) -> Scrape {
    let reply = metrics_reply(port).await;
    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP reply");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Scrape::parse(body)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

const CREATE: &str = "/adk.v1.SessionService/CreateSession";
const GET: &str = "/adk.v1.SessionService/GetSession";
const WATCH: &str = "/adk.v1.SessionService/WatchSession";
const RUN: &str = "/adk.v1.AgentRunner/Run";

#[tokio::test]
async fn rpc_runner_model_and_tool_metrics_count_real_traffic() {
    let agents = repo_root().join("examples/agents.yaml");
    let (server, port) = spawn_with_metrics("adk-server", &["--agents".into(), agents.display().to_string()]).await;
    let before = scrape(port).await;

    let mut sessions = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    for id in ["m1", "m2"] {
        sessions
            .create_session(pb::CreateSessionRequest {
                app_name: "metrics_app".into(),
                user_id: "alice".into(),
                session_id: id.into(),
                ..Default::default()
            })
            .await
            .expect("CreateSession");
    }
    let get = |id: &str| pb::GetSessionRequest {
        app_name: "metrics_app".into(),
        user_id: "alice".into(),
        session_id: id.into(),
        ..Default::default()
    };
    sessions.get_session(get("m1")).await.expect("GetSession");
    let missing = sessions.get_session(get("nope")).await.expect_err("no such session");
    assert_eq!(missing.code(), Code::NotFound);

    // trip_planner: the receptionist (mock) answers, then the booker (a scripted mock)
    // calls the client tool confirm_booking, which pauses the run.
    let mut runner = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let mut stream = runner
        .run(pb::RunRequest {
            app_name: "trip_planner".into(),
            user_id: "alice".into(),
            session_id: "trip".into(),
            new_message: Some(user_text("Two nights in Kyoto, please")),
            create_session: true,
            ..Default::default()
        })
        .await
        .expect("Run")
        .into_inner();
    let mut paused_on = None;
    while let Some(event) = stream.message().await.expect("the run succeeds") {
        if !event.long_running_tool_ids.is_empty() {
            paused_on = Some(event.long_running_tool_ids.clone());
        }
    }
    assert!(paused_on.is_some(), "the booker asked the client to confirm");

    // A WatchSession in progress counts as an active stream until the client drops it.
    let watch = sessions
        .watch_session(pb::WatchSessionRequest {
            app_name: "metrics_app".into(),
            user_id: "alice".into(),
            session_id: "m1".into(),
            ..Default::default()
        })
        .await
        .expect("WatchSession")
        .into_inner();
    let during = scrape(port).await;
    assert_eq!(
        during.value("adk_grpc_server_active_streams", &[("method", WATCH)]),
        1.0
    );

    let after = scrape(port).await;
    let moved = |name: &str, labels: &[(&str, &str)]| after.value(name, labels) - before.value(name, labels);
    assert_eq!(
        moved("adk_grpc_server_requests_total", &[("method", CREATE), ("code", "OK")]),
        2.0
    );
    assert_eq!(
        moved("adk_grpc_server_requests_total", &[("method", GET), ("code", "OK")]),
        1.0
    );
    assert_eq!(
        moved(
            "adk_grpc_server_requests_total",
            &[("method", GET), ("code", "NOT_FOUND")]
        ),
        1.0
    );
    assert_eq!(
        moved("adk_grpc_server_requests_total", &[("method", RUN), ("code", "OK")]),
        1.0
    );
    assert_eq!(
        moved(
            "adk_grpc_server_request_duration_seconds_count",
            &[("method", CREATE), ("code", "OK")]
        ),
        2.0
    );
    assert_eq!(
        moved(
            "adk_grpc_server_request_duration_seconds_bucket",
            &[("method", CREATE), ("code", "OK"), ("le", "+Inf")]
        ),
        2.0
    );
    assert_eq!(
        moved("adk_runner_invocations_started_total", &[("app", "trip_planner")]),
        1.0
    );
    assert_eq!(
        moved(
            "adk_runner_invocations_finished_total",
            &[("app", "trip_planner"), ("outcome", "OK")]
        ),
        1.0
    );
    for model in ["mock", "mock-booking"] {
        assert_eq!(
            moved(
                "adk_model_calls_total",
                &[("provider", "mock"), ("model", model), ("outcome", "OK")]
            ),
            1.0,
            "{model}"
        );
        assert!(
            moved(
                "adk_model_tokens_total",
                &[("provider", "mock"), ("model", model), ("kind", "prompt")]
            ) > 0.0
        );
    }
    assert_eq!(
        moved(
            "adk_tool_calls_total",
            &[("tool", "confirm_booking"), ("outcome", "OK")]
        ),
        1.0
    );
    assert_eq!(
        moved("adk_tool_call_duration_seconds_count", &[("tool", "confirm_booking")]),
        1.0
    );
    // Not a stream: no active-streams series for unary methods.
    assert_eq!(after.value("adk_grpc_server_active_streams", &[("method", GET)]), 0.0);

    drop(watch);
    let ended = adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
        let now = scrape(port).await;
        match now.value("adk_grpc_server_active_streams", &[("method", WATCH)]) {
            0.0 => Ok(now),
            active => Err(format!("the watch never ended: {active} active")),
        }
    })
    .await;
    assert_eq!(
        ended.value(
            "adk_grpc_server_requests_total",
            &[("method", WATCH), ("code", "CANCELLED")]
        ),
        1.0,
        "a watch the client dropped ends CANCELLED"
    );
}

#[tokio::test]
async fn redis_latency_and_errors_are_counted_by_operation() {
    let mut redis = RedisServer::start().await;
    let (server, port) = spawn_with_metrics("adk-session-server", &["--store-url".into(), redis.url()]).await;
    let mut sessions = SessionServiceClient::connect(server.endpoint()).await.expect("connect");
    let get = pb::GetSessionRequest {
        app_name: "metrics_app".into(),
        user_id: "bob".into(),
        session_id: "r1".into(),
        ..Default::default()
    };
    sessions
        .create_session(pb::CreateSessionRequest {
            app_name: "metrics_app".into(),
            user_id: "bob".into(),
            session_id: "r1".into(),
            ..Default::default()
        })
        .await
        .expect("CreateSession");
    sessions.get_session(get.clone()).await.expect("GetSession");
    let up = scrape(port).await;
    assert!(
        up.value(
            "adk_redis_command_duration_seconds_count",
            &[("operation", "script:create")]
        ) >= 1.0
    );
    assert!(
        up.value(
            "adk_redis_command_duration_seconds_count",
            &[("operation", "script:read")]
        ) >= 1.0
    );
    assert_eq!(up.value("adk_redis_command_errors_total", &[]), 0.0);

    redis.kill9().await;
    let err = sessions.get_session(get).await.expect_err("redis is down");
    assert_eq!(err.code(), Code::Unavailable);
    let down = scrape(port).await;
    // GetSession reads the session (script:read) and the app state (HGETALL) at once;
    // whichever fails first ends the call.
    let failed = |operation| {
        down.value(
            "adk_redis_command_errors_total",
            &[("operation", operation), ("code", "UNAVAILABLE")],
        )
    };
    assert!(failed("script:read") + failed("HGETALL") >= 1.0);
    assert!(
        down.value(
            "adk_grpc_server_requests_total",
            &[("method", GET), ("code", "UNAVAILABLE")]
        ) >= 1.0
    );
}

#[tokio::test]
async fn a_metrics_port_in_use_stops_the_start_saying_so() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let run = tokio::process::Command::new(workspace_bin("adk-server"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
        ])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .expect("adk-server should exit at once when its metrics port is taken")
        .expect("run adk-server");
    drop(taken);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{log}");
    assert!(
        log.contains(&format!("cannot serve metrics on 127.0.0.1:{port}")) && log.contains("Address already in use"),
        "{log}"
    );
}
