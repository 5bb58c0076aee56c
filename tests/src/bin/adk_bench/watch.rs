//! `adk-bench watch`: WatchSession fan-out. For each number of watchers, on one
//! session and on as many distinct sessions, a fresh redis-server and
//! adk-session-server; the watchers subscribe, then rounds of appends are sent and
//! the time from sending each AppendEvent until each watcher of its session received
//! the event is recorded. Reported: delivery p50/p99, the server's RSS and CPU per
//! appended event, and the connections Redis sees.
//!
//! Each watcher is its own WatchSession call; calls share HTTP/2 connections (100
//! per connection). 10,000 calls need more open files than a shell's default 1024:
//! the bench raises its own limit (and so its servers') to the hard limit.

use super::cpu::cpu_time;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Numbers of watchers to measure at.
    #[arg(long, value_delimiter = ',', default_values_t = vec![10, 100, 1_000, 10_000])]
    watchers: Vec<usize>,
    /// Rounds of appends per measurement (after one warm-up round).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Distinct sessions: sessions appended to per round (round-robin over all).
    #[arg(long, default_value_t = 100)]
    appends_per_round: usize,
}

/// Watch calls per HTTP/2 connection (the server allows 200 streams per connection).
const CALLS_PER_CONNECTION: usize = 100;
const USER: &str = "bench";

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    OneSession,
    Distinct,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::OneSession => "one session",
            Layout::Distinct => "distinct sessions",
        }
    }
}

/// When each awaited event was sent, by (session index, sequence), and the deliveries so far.
#[derive(Default)]
struct Deliveries {
    sent: Mutex<HashMap<(usize, u64), Instant>>,
    latency_us: Mutex<Option<Histogram<u64>>>,
    delivered: AtomicUsize,
    progress: Notify,
}

/// Raises the open-files limit to the hard limit (the servers this bench starts inherit it).
fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    #[allow(unsafe_code)]
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

async fn redis_clients(redis: &RedisServer) -> u64 {
    let port = redis.port().to_string();
    let info = adk_grpc_testkit::redis_cli(&["-p", &port, "info", "clients"]).await;
    let clients: u64 = info
        .lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    // Less redis-cli's own connection.
    clients.saturating_sub(1)
}

fn event(text: String) -> pb::Event {
    pb::Event {
        author: "agent".into(),
        invocation_id: "e-bench".into(),
        content: Some(pb::Content {
            role: "model".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(text)),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

pub async fn bench_watch(args: WatchArgs) -> Result<()> {
    raise_open_files_limit();
    println!(
        "| watchers | layout | delivery p50 ms | p99 ms | max ms | server CPU ms per appended event | server RSS MiB | Redis connections |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &watchers in &args.watchers {
        for layout in [Layout::OneSession, Layout::Distinct] {
            let row = measure(&args, watchers, layout).await?;
            println!("{row}");
        }
    }
    Ok(())
}

async fn measure(args: &WatchArgs, watchers: usize, layout: Layout) -> Result<String> {
    let redis = RedisServer::start().await;
    let limit = (watchers + 64).to_string();
    let server_args = [
        "--store-url".to_string(),
        redis.url(),
        "--max-watches".to_string(),
        limit.clone(),
        "--max-streams-per-user".to_string(),
        limit,
    ];
    let server = ServiceProcess::spawn("adk-session-server", &server_args, &[]).await;
    let endpoint = server.endpoint();
    let mut channels = Vec::new();
    for _ in 0..watchers.div_ceil(CALLS_PER_CONNECTION) + 1 {
        channels.push(
            SessionServiceClient::connect(endpoint.clone())
                .await
                .context("connect")?,
        );
    }
    let sessions = match layout {
        Layout::OneSession => 1,
        Layout::Distinct => watchers,
    };
    let app = adk_grpc_testkit::unique_prefix("watchbench");
    let mut writer = channels[0].clone();
    for session in 0..sessions {
        writer
            .create_session(pb::CreateSessionRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: format!("s{session}"),
                ..Default::default()
            })
            .await?;
    }

    // The watchers: each counts and times what it receives.
    let deliveries = Arc::new(Deliveries::default());
    *deliveries.latency_us.lock().unwrap() = Some(Histogram::new(3).expect("histogram"));
    let mut tasks = Vec::new();
    for watcher in 0..watchers {
        let session = watcher % sessions;
        let mut client = channels[1 + watcher / CALLS_PER_CONNECTION].clone();
        let mut stream = client
            .watch_session(pb::WatchSessionRequest {
                app_name: app.clone(),
                user_id: USER.into(),
                session_id: format!("s{session}"),
                after_sequence: Some(0),
            })
            .await
            .with_context(|| format!("watcher {watcher}"))?
            .into_inner();
        let deliveries = deliveries.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(Some(event)) = stream.message().await {
                let sent = deliveries.sent.lock().unwrap().get(&(session, event.sequence)).copied();
                if let Some(sent) = sent {
                    let micros = sent.elapsed().as_micros() as u64;
                    if let Some(histogram) = deliveries.latency_us.lock().unwrap().as_mut() {
                        histogram.record(micros.max(1)).expect("record");
                    }
                }
                deliveries.delivered.fetch_add(1, Ordering::SeqCst);
                deliveries.progress.notify_one();
            }
        }));
    }

    // Rounds: round 0 warms up (every session gets one event, every watcher receives
    // it), then `rounds` measured ones.
    let appends_per_round = match layout {
        Layout::OneSession => 1,
        Layout::Distinct => args.appends_per_round.min(sessions),
    };
    let mut sequence = vec![0u64; sessions];
    let mut next_session = 0;
    let mut cpu_before = None;
    let mut appended = 0usize;
    for round in 0..=args.rounds {
        if round == 1 {
            *deliveries.latency_us.lock().unwrap() = Some(Histogram::new(3).expect("histogram"));
            cpu_before = cpu_time(server.pid());
        }
        let targets: Vec<usize> = if round == 0 {
            (0..sessions).collect()
        } else {
            (0..appends_per_round)
                .map(|_| {
                    let session = next_session;
                    next_session = (next_session + 1) % sessions;
                    session
                })
                .collect()
        };
        let expected = deliveries.delivered.load(Ordering::SeqCst)
            + targets.len()
                * match layout {
                    Layout::OneSession => watchers,
                    Layout::Distinct => 1,
                };
        for chunk in targets.chunks(64) {
            let mut sends = Vec::new();
            for &session in chunk {
                sequence[session] += 1;
                deliveries
                    .sent
                    .lock()
                    .unwrap()
                    .insert((session, sequence[session]), Instant::now());
                let mut client = writer.clone();
                let request = pb::AppendEventRequest {
                    app_name: app.clone(),
                    user_id: USER.into(),
                    session_id: format!("s{session}"),
                    event: Some(event(format!("round {round}"))),
                    precondition: None,
                };
                sends.push(async move { client.append_event(request).await });
            }
            for reply in futures::future::join_all(sends).await {
                reply?;
            }
        }
        if round > 0 {
            appended += targets.len();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while deliveries.delivered.load(Ordering::SeqCst) < expected {
            anyhow::ensure!(
                Instant::now() < deadline,
                "deliveries of round {round} missing after 120 s"
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), deliveries.progress.notified()).await;
        }
    }
    let cpu = match (cpu_before, cpu_time(server.pid())) {
        (Some(before), Some(after)) => format!("{:.2}", (after - before).as_secs_f64() * 1000.0 / appended as f64),
        _ => "n/a".into(),
    };
    let rss = server.rss_kib().unwrap_or(0) as f64 / 1024.0;
    let connections = redis_clients(&redis).await;
    let histogram = deliveries.latency_us.lock().unwrap().take().expect("histogram");
    let q = |p: f64| histogram.value_at_quantile(p) as f64 / 1000.0;
    for task in tasks {
        task.abort();
    }
    Ok(format!(
        "| {watchers} | {} | {:.2} | {:.2} | {:.2} | {cpu} | {rss:.1} | {connections} |",
        layout.name(),
        q(0.5),
        q(0.99),
        histogram.max() as f64 / 1000.0
    ))
}
