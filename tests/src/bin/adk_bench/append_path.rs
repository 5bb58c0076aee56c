//! `adk-bench append-path`: what an AppendEvent costs on top of its parts, with one
//! client against one `adk-session-server` on one `redis-server`, side by side in one run:
//!
//! - `grpc.health.v1.Health/Check` on the same server: a gRPC round trip that does no work;
//! - a raw `EVALSHA` of the store's own AppendEvent script (`adk_grpc_store::session::redis::APPEND_SCRIPT`)
//!   with the keys and arguments the server itself sent for a real AppendEvent (read off
//!   Redis's `MONITOR`), only the event id changed per call so every call appends;
//! - AppendEvent itself.
//!
//! AppendEvent p50 − (Health/Check p50 + EVALSHA p50) is the server's own cost per append
//! (decoding, conversions, validation, encoding, tracing, metrics). The phases alternate
//! in rounds, so a drift of the machine's speed during the run touches all three alike.

use super::monitor::{Monitor, monitor_arguments};
use super::{Phase, StoreSetup, append_request, measure, start_target};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::unique_prefix;
use anyhow::{Context, Result, bail};
use std::time::Duration;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[derive(clap::Args)]
pub struct AppendPathArgs {
    /// Measured calls per phase and round.
    #[arg(long, default_value_t = 2000)]
    ops: usize,
    /// Rounds of the three phases, one after the other.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// One phase's latencies over all rounds.
struct Totals {
    phase: Option<Phase>,
}

impl Totals {
    fn add(&mut self, round: Phase) {
        match &mut self.phase {
            None => self.phase = Some(round),
            Some(total) => {
                total.ops += round.ops;
                total.elapsed += round.elapsed;
                total.latency_us.add(&round.latency_us).expect("merge");
            }
        }
    }

    fn phase(&self) -> &Phase {
        self.phase.as_ref().expect("at least one round")
    }
}

pub async fn bench_append_path(args: AppendPathArgs) -> Result<()> {
    anyhow::ensure!(args.rounds > 0 && args.ops > 0, "--rounds and --ops must be at least 1");
    let target = start_target(None, "adk-session-server", StoreSetup::default()).await;
    let redis = &target.redis[0];
    let channel = tonic::transport::Endpoint::from_shared(target.endpoint.clone())?
        .connect()
        .await
        .context("connect")?;
    let mut sessions = SessionServiceClient::new(channel.clone());
    let health = HealthClient::new(channel);

    let app = unique_prefix("bench");
    let session = "append-path";
    sessions
        .create_session(pb::CreateSessionRequest {
            app_name: app.clone(),
            user_id: "bench".into(),
            session_id: session.into(),
            ..Default::default()
        })
        .await?;
    let script = captured_append_script(redis.port(), &mut sessions, &app, session).await?;
    let conn = redis.connection().await;

    println!(
        "endpoint {}, 1 client, {} rounds of {} calls per phase\n",
        target.endpoint, args.rounds, args.ops
    );
    let mut health_totals = Totals { phase: None };
    let mut script_totals = Totals { phase: None };
    let mut append_totals = Totals { phase: None };
    let mut appended = 1; // the captured append
    for round in 0..args.rounds {
        health_totals.add(
            measure(
                "Health/Check".into(),
                std::slice::from_ref(&health),
                args.ops,
                |mut client, _, _| async move {
                    client.check(HealthCheckRequest::default()).await?;
                    Ok(())
                },
            )
            .await?,
        );
        let raw = measure("EVALSHA append script".into(), std::slice::from_ref(&conn), args.ops, {
            let script = script.clone();
            move |mut conn, _, i| {
                let call = script.call(&format!("raw-{round}-{i}"));
                async move {
                    let reply: Vec<redis::Value> = call.query_async(&mut conn).await?;
                    let status: String = redis::from_redis_value(reply.into_iter().next().context("an empty reply")?)?;
                    anyhow::ensure!(status == "NEW", "the script answered {status}, not NEW");
                    Ok(())
                }
            }
        })
        .await?;
        script_totals.add(raw);
        let append = measure("AppendEvent".into(), std::slice::from_ref(&sessions), args.ops, {
            let app = app.clone();
            move |mut client, _, i| {
                let request = append_request(&app, session, appended + i);
                async move {
                    client.append_event(request).await?;
                    Ok(())
                }
            }
        })
        .await?;
        appended += args.ops;
        append_totals.add(append);
    }

    println!("| operation | ops/s | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|");
    let (health, raw, append) = (health_totals.phase(), script_totals.phase(), append_totals.phase());
    for phase in [health, raw, append] {
        println!("{}", phase.row());
    }
    let overhead = append.p50_ms() - health.p50_ms() - raw.p50_ms();
    println!(
        "\nAppendEvent p50 − (Health/Check p50 + EVALSHA p50) = {overhead:.3} ms (the server's own cost per append)"
    );
    Ok(())
}

/// The EVALSHA of the append script exactly as the server sent it, with ARGV[1] (the
/// event id) to change per call.
#[derive(Clone)]
struct CapturedScript {
    /// EVALSHA's arguments: sha, key count, keys, then ARGV.
    args: Vec<Vec<u8>>,
    /// Where ARGV[1] is in `args`.
    event_id_at: usize,
}

impl CapturedScript {
    fn call(&self, event_id: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        for (at, arg) in self.args.iter().enumerate() {
            if at == self.event_id_at {
                cmd.arg(event_id);
            } else {
                cmd.arg(arg.as_slice());
            }
        }
        cmd
    }
}

/// Runs one AppendEvent on `session` while `redis-cli MONITOR` listens, and returns the
/// EVALSHA of the store's append script that it sent.
async fn captured_append_script(
    redis_port: u16,
    sessions: &mut SessionServiceClient<tonic::transport::Channel>,
    app: &str,
    session: &str,
) -> Result<CapturedScript> {
    let sha = redis::Script::new(adk_grpc_store::session::redis::APPEND_SCRIPT)
        .get_hash()
        .to_string();
    let mut monitor = Monitor::start(redis_port).await?;
    sessions.append_event(append_request(app, session, 0)).await?;
    let wanted = format!("\"EVALSHA\" \"{sha}\" ");
    let captured = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = monitor.next_line().await? {
            if let Some(at) = line.find(&wanted) {
                return monitor_arguments(&line[at..]);
            }
        }
        bail!("redis-cli monitor ended before the append script ran")
    })
    .await
    .context("the server never ran the append script")??;
    let (_evalsha, args) = captured.split_first().context("an empty command")?;
    let keys: usize = std::str::from_utf8(&args[1])?.parse().context("EVALSHA's key count")?;
    Ok(CapturedScript {
        args: args.to_vec(),
        event_id_at: 2 + keys,
    })
}
