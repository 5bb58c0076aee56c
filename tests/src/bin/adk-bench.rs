//! adk-bench: drives a running server over gRPC and reports throughput and
//! latency percentiles.
//!
//! Without `--endpoint` it starts its own redis-server (AOF, `appendfsync everysec`,
//! Redis's recommended policy) and the server binaries (`adk-session-server`,
//! `adk-artifact-server`, …) that sit beside it; it never builds them (see `main`).
//!
//!   cargo build --release --bins && target/release/adk-bench sessions
//!   target/release/adk-bench artifacts
//!   target/release/adk-bench runner      (also starts adk-runner-server; see adk_bench/runner.rs)
//!   target/release/adk-bench watch       (WatchSession fan-out; see adk_bench/watch.rs)
//!   target/release/adk-bench memory      (see adk_bench/memory.rs)
//!   target/release/adk-bench append-path (one client: Health/Check, EVALSHA, AppendEvent; see adk_bench/append_path.rs)
//!   target/release/adk-bench resume      (kill -9 of a runner to the resumed run's first event; see adk_bench/resume.rs)

use adk_grpc_client::RemoteArtifactService;
use adk_grpc_core::ArtifactService;
use adk_grpc_core::artifact::{DEFAULT_CHUNK_BYTES, LoadRequest, UploadRequest};
use adk_grpc_e2e::{Noise, noise_stream, sha256_of};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisPrimaryReplica, RedisServer, ServiceProcess, unique_prefix};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cpu::CpuSample;
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

#[path = "adk_bench/append_path.rs"]
mod append_path;
#[path = "adk_bench/cpu.rs"]
mod cpu;
#[path = "adk_bench/locomo.rs"]
mod locomo;
#[path = "adk_bench/memory.rs"]
mod memory;
#[path = "adk_bench/monitor.rs"]
mod monitor;
#[path = "adk_bench/resume.rs"]
mod resume;
#[path = "adk_bench/runner.rs"]
mod runner;
#[path = "adk_bench/watch.rs"]
mod watch;

#[derive(Parser)]
// A flag given twice takes its last value, so scripts/bench-smoke.sh can shrink a
// documented command by appending smaller sizes to it.
#[command(about = "Load generator for the ADK gRPC services", args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

impl Bench {
    /// The servers this bench starts: none when it measures a given --endpoint.
    fn servers(&self) -> &'static [&'static str] {
        match self {
            Bench::Sessions(SessionArgs { endpoint: None, .. })
            | Bench::Watch(_)
            | Bench::AppendPath(_)
            | Bench::Memory(memory::MemoryArgs { endpoint: None, .. })
            | Bench::MemoryLocomo(locomo::LocomoArgs { endpoint: None, .. }) => &["adk-session-server"],
            Bench::Artifacts(ArtifactBenchArgs { endpoint: None, .. }) => &["adk-artifact-server"],
            Bench::Runner(runner::RunnerArgs { endpoint: None, .. }) | Bench::Resume(_) => {
                &["adk-session-server", "adk-runner-server"]
            }
            _ => &[],
        }
    }
}

#[derive(Subcommand)]
enum Bench {
    /// AppendEvent and GetSession(num_recent_events=20) at several session lengths (with
    /// --reads, ListEvents and WatchSession of the same events too).
    Sessions(SessionArgs),
    /// Save and load of 4 KiB and 1 MiB artifacts (unary) and 64 MiB ones (streamed), with the server's peak RSS.
    Artifacts(ArtifactBenchArgs),
    /// Agent turns per second and time to first event with the mock model, and the runner's overhead per turn.
    Runner(runner::RunnerArgs),
    /// WatchSession fan-out: delivery latency, server RSS and CPU, Redis connections for many watchers.
    Watch(watch::WatchArgs),
    /// AddMemory and SearchMemory (a rare word and typical words) at 1,000 and 10,000 memories per user.
    Memory(memory::MemoryArgs),
    /// SearchMemory's recall on LoCoMo's questions (turn and session level, @1/5/10), with search latency;
    /// with an answer and a judge model, answer accuracy (the J score).
    MemoryLocomo(locomo::LocomoArgs),
    /// One client: Health/Check, a raw EVALSHA of the append script and AppendEvent side by side.
    AppendPath(append_path::AppendPathArgs),
    /// Time from kill -9 of a runner mid-run to the run's first event resumed by another replica.
    Resume(resume::ResumeArgs),
}

#[derive(clap::Args)]
struct SessionArgs {
    /// A running SessionService (http://host:port); default: start redis-server and adk-session-server.
    #[arg(long)]
    endpoint: Option<String>,
    /// Concurrent clients, each with its own connection and session.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured operations per client and phase.
    #[arg(long, default_value_t = 1000)]
    ops: usize,
    /// Session lengths (events already stored) to measure at.
    #[arg(long, value_delimiter = ',', default_values_t = vec![10, 20, 10_000])]
    lengths: Vec<usize>,
    /// Start the Redis with one replica (`replicaof`), so writes wait for it (`WAIT`).
    #[arg(long)]
    replica: bool,
    /// The server's `--redis-min-replicas-ack` (`auto` or a number); default: the server's own.
    #[arg(long)]
    redis_min_replicas_ack: Option<String>,
    /// Also measure how long an appended event takes to reach a watcher of its session
    /// (each client watches the session it appends to).
    #[arg(long)]
    watch: bool,
    /// Also read the events GetSession reads (the last 20) with ListEvents and WatchSession,
    /// so the three read paths' costs per event compare.
    #[arg(long)]
    reads: bool,
}

#[derive(clap::Args)]
struct ArtifactBenchArgs {
    /// A running ArtifactService (http://host:port); default: start redis-server and adk-artifact-server.
    #[arg(long)]
    endpoint: Option<String>,
    /// Concurrent clients, each with its own connection and artifact names.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Saves and loads per client of the 4 KiB artifact (unary).
    #[arg(long, default_value_t = 1000)]
    small_ops: usize,
    /// Saves and loads per client of the 1 MiB artifact (unary).
    #[arg(long, default_value_t = 100)]
    medium_ops: usize,
    /// Uploads and downloads per client of the 64 MiB artifact (streamed).
    #[arg(long, default_value_t = 5)]
    large_ops: usize,
}

struct Phase {
    name: String,
    ops: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
}

impl Phase {
    fn row(&self) -> String {
        let q = |p: f64| self.latency_us.value_at_quantile(p) as f64 / 1000.0;
        format!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} |",
            self.name,
            self.ops as f64 / self.elapsed.as_secs_f64(),
            q(0.5),
            q(0.99),
            self.latency_us.max() as f64 / 1000.0
        )
    }

    /// A row with the bytes moved per second too (MB = 10^6 bytes).
    fn artifact_row(&self, bytes_per_op: u64) -> String {
        let q = |p: f64| self.latency_us.value_at_quantile(p) as f64 / 1000.0;
        let seconds = self.elapsed.as_secs_f64();
        format!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
            self.name,
            (self.ops * bytes_per_op) as f64 / seconds / 1e6,
            self.ops as f64 / seconds,
            q(0.5),
            q(0.99),
            self.latency_us.max() as f64 / 1000.0
        )
    }

    /// The phase of `workers` (each returning its latency histogram) started at `started`.
    async fn of_workers(
        name: String,
        ops: usize,
        started: Instant,
        workers: Vec<tokio::task::JoinHandle<Result<Histogram<u64>>>>,
    ) -> Result<Phase> {
        let mut latency_us = Histogram::<u64>::new(3).expect("histogram");
        for worker in workers {
            latency_us.add(worker.await??).expect("merge");
        }
        Ok(Phase {
            name,
            ops: ops as u64,
            elapsed: started.elapsed(),
            latency_us,
        })
    }

    /// [`Self::row`] with the CPU per operation of the server and of Redis (µs, from
    /// /proc) during the phase, and their ratio.
    fn row_with_cpu(&self, cpu: &[Option<f64>]) -> String {
        let (server, redis) = (cpu.first().copied().flatten(), cpu.get(1).copied().flatten());
        let ratio = server.zip(redis).filter(|(_, r)| *r > 0.0).map(|(s, r)| s / r);
        format!(
            "{} {} | {} | {} |",
            self.row(),
            cpu::cell(server, 0),
            cpu::cell(redis, 0),
            cpu::cell(ratio, 2)
        )
    }

    fn p50_ms(&self) -> f64 {
        self.latency_us.value_at_quantile(0.5) as f64 / 1000.0
    }
}

fn event(i: usize) -> pb::Event {
    let text = format!("message {i}: what is the weather like in Tokyo tomorrow afternoon?");
    pb::Event {
        author: "user".into(),
        invocation_id: "e-bench".into(),
        content: Some(pb::Content {
            role: "user".into(),
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(text)),
                ..Default::default()
            }],
        }),
        actions: Some(pb::EventActions {
            state_delta: [("turn".to_string(), prost_types_value(i as f64))].into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn prost_types_value(n: f64) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(adk_grpc_proto::ordered::value::Kind::NumberValue(n)),
    }
}

fn append_session(worker: usize) -> String {
    format!("append-{worker}")
}

fn read_session(worker: usize) -> String {
    format!("read-{worker}")
}

fn append_request(app: &str, session: &str, i: usize) -> pb::AppendEventRequest {
    pb::AppendEventRequest {
        app_name: app.into(),
        user_id: "bench".into(),
        session_id: session.into(),
        event: Some(event(i)),
        precondition: None,
    }
}

/// Runs `op` `ops` times on each client concurrently; one latency histogram for all.
async fn measure<C, F, Fut>(name: String, clients: &[C], ops: usize, op: F) -> Result<Phase>
where
    C: Clone + Send + 'static,
    F: Fn(C, usize, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let started = Instant::now();
    let mut workers = Vec::new();
    for (worker, client) in clients.iter().cloned().enumerate() {
        let op = op.clone();
        workers.push(tokio::spawn(async move {
            let mut latency = Histogram::<u64>::new(3).expect("histogram");
            for i in 0..ops {
                let t = Instant::now();
                op(client.clone(), worker, i).await?;
                latency.record(t.elapsed().as_micros() as u64).expect("record");
            }
            anyhow::Ok(latency)
        }));
    }
    Phase::of_workers(name, ops * clients.len(), started, workers).await
}

/// Each client watches its append session (which holds `stored` events) and appends
/// `ops` more: the latency of one op is from sending AppendEvent until the watcher
/// receives that event.
async fn measure_watch_delivery(
    name: String,
    clients: &[SessionServiceClient<Channel>],
    app: &str,
    stored: usize,
    ops: usize,
) -> Result<Phase> {
    let started = Instant::now();
    let mut workers = Vec::new();
    for (worker, mut client) in clients.iter().cloned().enumerate() {
        let app = app.to_string();
        workers.push(tokio::spawn(async move {
            let session = append_session(worker);
            let mut watch = client
                .watch_session(pb::WatchSessionRequest {
                    app_name: app.clone(),
                    user_id: "bench".into(),
                    session_id: session.clone(),
                    after_sequence: Some(stored as u64),
                })
                .await?
                .into_inner();
            let mut latency = Histogram::<u64>::new(3).expect("histogram");
            for i in 0..ops {
                let t = Instant::now();
                let appended = client
                    .append_event(append_request(&app, &session, stored + i))
                    .await?
                    .into_inner();
                loop {
                    let event = watch.message().await?.context("the watch ended")?;
                    if event.id == appended.id {
                        break;
                    }
                }
                latency.record(t.elapsed().as_micros() as u64).expect("record");
            }
            anyhow::Ok(latency)
        }));
    }
    Phase::of_workers(name, ops * clients.len(), started, workers).await
}

/// ListEvents and WatchSession reading the events GetSession(num_recent_events=20) reads
/// (each client's read session holds `length`): the table rows, with CPU per call.
async fn read_paths(
    clients: &[SessionServiceClient<Channel>],
    app: &str,
    length: usize,
    ops: usize,
    pids: &[Option<u32>],
) -> Result<Vec<String>> {
    let events = length.min(20);
    let before_list = CpuSample::take(pids);
    let list = measure(
        format!("ListEvents(page_size=20, newest_first) @ {length} events"),
        clients,
        ops,
        {
            let app = app.to_string();
            move |mut client, worker, _| {
                let request = pb::ListEventsRequest {
                    app_name: app.clone(),
                    user_id: "bench".into(),
                    session_id: read_session(worker),
                    page_size: 20,
                    newest_first: true,
                    ..Default::default()
                };
                async move {
                    let got = client.list_events(request).await?.into_inner().events.len();
                    anyhow::ensure!(got == events, "expected {events} events, got {got}");
                    Ok(())
                }
            }
        },
    )
    .await?;
    let before_watch = CpuSample::take(pids);
    let watch = measure(
        format!("WatchSession(the last 20 events) @ {length} events"),
        clients,
        ops,
        {
            let app = app.to_string();
            move |mut client, worker, _| {
                let request = pb::WatchSessionRequest {
                    app_name: app.clone(),
                    user_id: "bench".into(),
                    session_id: read_session(worker),
                    after_sequence: Some((length - events) as u64),
                };
                async move {
                    let mut stream = client.watch_session(request).await?.into_inner();
                    for _ in 0..events {
                        stream.message().await?.context("the watch ended")?;
                    }
                    // Dropping the stream ends the call.
                    Ok(())
                }
            }
        },
    )
    .await?;
    let after_watch = CpuSample::take(pids);
    Ok(vec![
        list.row_with_cpu(&before_list.per_op_us(&before_watch, list.ops)),
        watch.row_with_cpu(&before_watch.per_op_us(&after_watch, watch.ops)),
    ])
}

/// What a bench runs against: a given endpoint, or its own redis-server and `bin`.
struct Target {
    endpoint: String,
    server: Option<ServiceProcess>,
    redis: Vec<RedisServer>,
}

/// The store a bench starts: one redis-server, or a primary with one replica, and the
/// server's extra flags.
#[derive(Default)]
struct StoreSetup {
    replica: bool,
    server_args: Vec<String>,
}

async fn start_target(endpoint: Option<String>, bin: &str, setup: StoreSetup) -> Target {
    if let Some(endpoint) = endpoint {
        return Target {
            endpoint,
            server: None,
            redis: Vec::new(),
        };
    }
    let redis = if setup.replica {
        let pair = RedisPrimaryReplica::start().await;
        vec![pair.primary, pair.replica]
    } else {
        vec![RedisServer::start().await]
    };
    for node in &redis {
        let port = node.port().to_string();
        adk_grpc_testkit::redis_cli(&["-p", &port, "config", "set", "appendfsync", "everysec"]).await;
    }
    let mut args = vec!["--store-url".to_string(), redis[0].url()];
    args.extend(setup.server_args);
    let server = ServiceProcess::spawn(bin, &args, &[]).await;
    Target {
        endpoint: server.endpoint(),
        server: Some(server),
        redis,
    }
}

async fn bench_sessions(args: SessionArgs) -> Result<()> {
    let setup = StoreSetup {
        replica: args.replica,
        server_args: args
            .redis_min_replicas_ack
            .iter()
            .flat_map(|acks| ["--redis-min-replicas-ack".to_string(), acks.clone()])
            .collect(),
    };
    let target = start_target(args.endpoint.clone(), "adk-session-server", setup).await;
    let endpoint = target.endpoint.clone();
    let mut clients = Vec::new();
    for _ in 0..args.concurrency {
        clients.push(
            SessionServiceClient::connect(endpoint.clone())
                .await
                .context("connect")?,
        );
    }
    println!(
        "endpoint {endpoint}, {} clients, {} ops per client and phase\n",
        args.concurrency, args.ops
    );
    println!(
        "| operation | ops/s | p50 ms | p99 ms | max ms | server CPU µs/op | Redis CPU µs/op | server ÷ Redis |\n\
         |---|---|---|---|---|---|---|---|"
    );
    // The CPU each phase costs the server and Redis (the primary): only for processes
    // this bench started.
    let pids = [
        target.server.as_ref().map(ServiceProcess::pid),
        target.redis.first().map(RedisServer::pid),
    ];
    let mut p50 = Vec::new();
    for &length in &args.lengths {
        let app = unique_prefix("bench");
        // Each client gets two sessions filled to `length` events: one that the append phase
        // grows (to `length + ops`), and one that the read phase reads at exactly `length`.
        let fill = measure(format!("fill to {length}"), &clients, 1, {
            let app = app.clone();
            move |mut client, worker, _| {
                let app = app.clone();
                async move {
                    for session in [append_session(worker), read_session(worker)] {
                        client
                            .create_session(pb::CreateSessionRequest {
                                app_name: app.clone(),
                                user_id: "bench".into(),
                                session_id: session.clone(),
                                ..Default::default()
                            })
                            .await?;
                        for i in 0..length {
                            client.append_event(append_request(&app, &session, i)).await?;
                        }
                    }
                    Ok(())
                }
            }
        })
        .await?;
        eprintln!(
            "filled {} sessions to {length} events in {:.1}s",
            2 * clients.len(),
            fill.elapsed.as_secs_f64()
        );

        let before_append = CpuSample::take(&pids);
        let append = measure(format!("AppendEvent @ {length} events"), &clients, args.ops, {
            let app = app.clone();
            move |mut client, worker, i| {
                let request = append_request(&app, &append_session(worker), length + i);
                async move {
                    client.append_event(request).await?;
                    Ok(())
                }
            }
        })
        .await?;
        let before_get = CpuSample::take(&pids);
        let get = measure(
            format!("GetSession(num_recent_events=20) @ {length} events"),
            &clients,
            args.ops,
            {
                let app = app.clone();
                move |mut client, worker, _| {
                    let request = pb::GetSessionRequest {
                        app_name: app.clone(),
                        user_id: "bench".into(),
                        session_id: read_session(worker),
                        num_recent_events: Some(20),
                        after: None,
                        since_compaction: false,
                    };
                    async move {
                        let session = client.get_session(request).await?.into_inner();
                        // Sessions shorter than 20 events come back whole.
                        let expected = length.min(20);
                        let got = session.events.len();
                        anyhow::ensure!(got == expected, "expected {expected} events, got {got}");
                        Ok(())
                    }
                }
            },
        )
        .await?;
        let after_get = CpuSample::take(&pids);
        let ops = append.ops;
        println!(
            "{}\n{}",
            append.row_with_cpu(&before_append.per_op_us(&before_get, ops)),
            get.row_with_cpu(&before_get.per_op_us(&after_get, get.ops))
        );
        if args.reads {
            for phase in read_paths(&clients, &app, length, args.ops, &pids).await? {
                println!("{phase}");
            }
        }
        if args.watch {
            let name = format!("AppendEvent → WatchSession delivery @ {length} events");
            let before = CpuSample::take(&pids);
            let delivery = measure_watch_delivery(name, &clients, &app, length + args.ops, args.ops).await?;
            let cpu = before.per_op_us(&CpuSample::take(&pids), delivery.ops);
            println!("{}", delivery.row_with_cpu(&cpu));
        }
        p50.push((length, append.p50_ms(), get.p50_ms()));
    }
    // Flatness: the longest session's p50 against each shorter one. GetSession returns
    // min(length, 20) events, so only lengths >= 20 compare equal replies.
    if let Some((longest, append_p50, get_p50)) = p50.last() {
        println!();
        for (length, append_base, get_base) in &p50[..p50.len() - 1] {
            println!(
                "p50 ratio {longest} vs {length} events: AppendEvent {:.2}, GetSession {:.2}",
                append_p50 / append_base,
                get_p50 / get_base
            );
        }
    }
    Ok(())
}

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

fn artifact_ref(app: &str, worker: usize, file_name: &str) -> Option<pb::ArtifactRef> {
    Some(pb::ArtifactRef {
        app_name: app.into(),
        user_id: format!("bench-{worker}"),
        session_id: "s".into(),
        file_name: file_name.into(),
    })
}

/// Resets the process's peak RSS (VmHWM) to its current RSS (Linux `clear_refs` 5),
/// so the peak read afterwards belongs to what runs in between.
fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Unary SaveArtifact and LoadArtifact of one size: every client saves `ops` versions
/// of its own file, then loads them back (each load checks the size).
async fn unary_phases(
    app: &str,
    clients: &[ArtifactServiceClient<Channel>],
    size: usize,
    label: &str,
    ops: usize,
) -> Result<()> {
    let payload = std::sync::Arc::new(Noise::new(size as u64).bytes(size));
    let file = format!("unary-{label}.bin");
    let save = measure(format!("SaveArtifact {label}"), clients, ops, {
        let (app, file, payload) = (app.to_string(), file.clone(), payload.clone());
        move |mut client, worker, _| {
            let request = pb::SaveArtifactRequest {
                r#ref: artifact_ref(&app, worker, &file),
                part: Some(pb::Part {
                    kind: Some(pb::part::Kind::InlineData(pb::Blob {
                        mime_type: "application/octet-stream".into(),
                        data: payload.as_ref().clone(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }),
                version: None,
                custom_metadata: None,
            };
            async move {
                client.save_artifact(request).await?;
                Ok(())
            }
        }
    })
    .await?;
    let load = measure(format!("LoadArtifact {label}"), clients, ops, {
        let (app, file) = (app.to_string(), file.clone());
        move |mut client, worker, i| {
            let request = pb::LoadArtifactRequest {
                r#ref: artifact_ref(&app, worker, &file),
                version: Some(i as i64 + 1),
            };
            async move {
                let reply = client.load_artifact(request).await?.into_inner();
                let got = reply.metadata.map_or(0, |m| m.size_bytes);
                anyhow::ensure!(got == size as u64, "loaded {got} bytes, expected {size}");
                Ok(())
            }
        }
    })
    .await?;
    println!("{}\n{}", save.artifact_row(size as u64), load.artifact_row(size as u64));
    Ok(())
}

async fn bench_artifacts(args: ArtifactBenchArgs) -> Result<()> {
    let target = start_target(args.endpoint.clone(), "adk-artifact-server", StoreSetup::default()).await;
    let endpoint = target.endpoint.clone();
    let mut raw = Vec::new();
    let mut remote = Vec::new();
    for _ in 0..args.concurrency {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())?
            .connect()
            .await
            .context("connect")?;
        raw.push(ArtifactServiceClient::new(channel.clone()));
        remote.push(RemoteArtifactService::from_channel(channel));
    }
    println!(
        "endpoint {endpoint}, {} clients; per client: {} x 4 KiB, {} x 1 MiB (unary), {} x 64 MiB (streamed)\n",
        args.concurrency, args.small_ops, args.medium_ops, args.large_ops
    );
    println!("| operation | MB/s | ops/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|");
    let app = unique_prefix("bench");
    unary_phases(&app, &raw, 4 * KIB, "4 KiB", args.small_ops).await?;
    unary_phases(&app, &raw, MIB, "1 MiB", args.medium_ops).await?;

    const LARGE: u64 = 64 * MIB as u64;
    let peak_reset = target
        .server
        .as_ref()
        .is_some_and(|server| reset_peak_rss(server.pid()));
    let upload = measure("UploadArtifact 64 MiB (stream)".to_string(), &remote, args.large_ops, {
        let app = app.clone();
        move |client: RemoteArtifactService, worker, i| {
            let request = UploadRequest {
                app_name: app.clone(),
                user_id: format!("bench-{worker}"),
                session_id: "s".into(),
                file_name: "large.bin".into(),
                mime_type: "application/octet-stream".into(),
                size_hint: Some(LARGE),
                ..Default::default()
            };
            async move {
                // Generated as it is sent, so the bench holds one 1 MiB chunk at a time.
                let chunks = noise_stream(LARGE, MIB, (worker * 1000 + i) as u64);
                client.upload(request, chunks).await?;
                Ok(())
            }
        }
    })
    .await?;
    let download = measure(
        "DownloadArtifact 64 MiB (stream)".to_string(),
        &remote,
        args.large_ops,
        {
            let app = app.clone();
            move |client: RemoteArtifactService, worker, i| {
                let request = LoadRequest {
                    app_name: app.clone(),
                    user_id: format!("bench-{worker}"),
                    session_id: "s".into(),
                    file_name: "large.bin".into(),
                    version: Some(i as i64 + 1),
                };
                async move {
                    let (_, chunks) = client.download(request, DEFAULT_CHUNK_BYTES).await?;
                    // Hashing stands in for a consumer that reads every byte.
                    let (len, _) = sha256_of(chunks).await?;
                    anyhow::ensure!(len == LARGE, "downloaded {len} bytes, expected {LARGE}");
                    Ok(())
                }
            }
        },
    )
    .await?;
    println!("{}\n{}", upload.artifact_row(LARGE), download.artifact_row(LARGE));

    if let Some(server) = &target.server {
        let peak = server.peak_rss_kib().unwrap_or(0) as f64 / 1024.0;
        let now = server.rss_kib().unwrap_or(0) as f64 / 1024.0;
        let since = if peak_reset {
            "during the 64 MiB phase"
        } else {
            "since start (could not reset VmHWM)"
        };
        println!("\nadk-artifact-server peak RSS (VmHWM) {since}: {peak:.1} MiB; RSS now {now:.1} MiB");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    // Started beside the servers (a release, another machine) or in the build tree, the
    // bench runs the binaries next to it and never builds: a missing one is named before
    // anything starts, so nothing is left running.
    let servers = cli.bench.servers();
    if let Err(missing) = adk_grpc_testkit::use_binaries_beside_this_executable(servers, !servers.is_empty()) {
        eprintln!("adk-bench: {missing}");
        std::process::exit(2);
    }
    match cli.bench {
        Bench::Sessions(args) => bench_sessions(args).await,
        Bench::Artifacts(args) => bench_artifacts(args).await,
        Bench::Runner(args) => runner::bench_runner(args).await,
        Bench::Watch(args) => watch::bench_watch(args).await,
        Bench::Memory(args) => memory::bench_memory(args).await,
        Bench::MemoryLocomo(args) => locomo::bench_locomo(args).await,
        Bench::AppendPath(args) => append_path::bench_append_path(args).await,
        Bench::Resume(args) => resume::bench_resume(args).await,
    }
}
