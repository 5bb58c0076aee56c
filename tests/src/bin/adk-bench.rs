//! adk-bench: drives a running session server over gRPC with concurrent clients
//! and reports throughput and latency percentiles.
//!
//! Without `--endpoint` it starts its own redis-server (AOF, `appendfsync everysec`,
//! Redis's recommended policy) and `adk-session-server` from the same target directory.
//!
//!   cargo build --release --bins && target/release/adk-bench sessions

use adk_proto::v1 as pb;
use adk_proto::v1::session_service_client::SessionServiceClient;
use adk_testkit::{RedisServer, ServiceProcess, unique_prefix};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

#[derive(Parser)]
#[command(about = "Load generator for the ADK gRPC services")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// AppendEvent and GetSession(num_recent_events=20) at several session lengths.
    Sessions(SessionArgs),
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
            }],
        }),
        actions: Some(pb::EventActions {
            state_delta: [("turn".to_string(), prost_types_value(i as f64))].into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn prost_types_value(n: f64) -> adk_proto::prost_types::Value {
    adk_proto::prost_types::Value {
        kind: Some(adk_proto::prost_types::value::Kind::NumberValue(n)),
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
async fn measure<F, Fut>(name: String, clients: &[SessionServiceClient<Channel>], ops: usize, op: F) -> Result<Phase>
where
    F: Fn(SessionServiceClient<Channel>, usize, usize) -> Fut + Clone + Send + 'static,
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
    let mut latency_us = Histogram::<u64>::new(3).expect("histogram");
    for worker in workers {
        latency_us.add(worker.await??).expect("merge");
    }
    Ok(Phase {
        name,
        ops: (ops * clients.len()) as u64,
        elapsed: started.elapsed(),
        latency_us,
    })
}

async fn bench_sessions(args: SessionArgs) -> Result<()> {
    let (_redis, _server, endpoint) = match args.endpoint.clone() {
        Some(endpoint) => (None, None, endpoint),
        None => {
            let redis = RedisServer::start().await;
            adk_testkit::redis_cli(&[
                "-p",
                &redis.port().to_string(),
                "config",
                "set",
                "appendfsync",
                "everysec",
            ])
            .await;
            let server = ServiceProcess::spawn("adk-session-server", &["--store-url".into(), redis.url()], &[]).await;
            let endpoint = server.endpoint();
            (Some(redis), Some(server), endpoint)
        }
    };
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
    println!("| operation | ops/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|");
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
        println!("{}\n{}", append.row(), get.row());
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

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().bench {
        Bench::Sessions(args) => bench_sessions(args).await,
    }
}
