//! `adk-runner-server`: the AgentRunner alone, running the agents of an agents
//! file over the shared store (Redis by default), where it reads and writes
//! sessions, artifacts and session leases directly.

use adk_grpc_agents::{Resumer, Runner};
use adk_grpc_runner_service::a2a::{A2aArgs, a2a_service, card_routes};
use adk_grpc_runner_service::{AgentsConfig, LeaseArgs, ReplyArgs, RunnerServices, runner_service};
use adk_grpc_server_kit::{
    ArtifactArgs, GrpcArgs, GrpcServer, LogArgs, MemoryArgs, MetricsArgs, RedisByDefault, ServiceInfo, SessionArgs,
    Shutdown, StoreArgs, run_binary,
};
use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Serves adk.v1.AgentRunner and A2A (lf.a2a.v1.A2AService; plus grpc.health.v1 and server reflection): runs
/// the agents of an agents file and streams their events, storing sessions and artifacts in the shared store.
#[derive(Debug, Parser)]
#[command(name = "adk-runner-server", version)]
struct Cli {
    /// Address to listen on (host:port)
    #[arg(long, env = "ADK_LISTEN", value_name = "ADDR", default_value = "0.0.0.0:50053")]
    listen: String,
    /// The agents file (YAML): models, tools and apps; see examples/agents.yaml. Or an ADK agent-config
    /// directory (root_agent.yaml, as `adk create --type=config` writes), or a directory of them
    #[arg(long, env = "ADK_AGENTS", value_name = "FILE")]
    agents: PathBuf,
    /// The Python interpreter (with the adk-grpc-worker package installed) of the worker serving the Python
    /// functions an ADK agent-config directory names as tools and callbacks
    #[arg(long, env = "ADK_PYTHON", value_name = "PATH", default_value = "python3")]
    python: PathBuf,
    #[command(flatten)]
    store: StoreArgs<RedisByDefault>,
    #[command(flatten)]
    sessions: SessionArgs,
    #[command(flatten)]
    artifacts: ArtifactArgs,
    #[command(flatten)]
    lease: LeaseArgs,
    #[command(flatten)]
    replies: ReplyArgs,
    #[command(flatten)]
    memory: MemoryArgs,
    #[command(flatten)]
    a2a: A2aArgs,
    #[command(flatten)]
    grpc: GrpcArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// On SIGTERM: stop taking runs and resuming others'; each resumable run finishes its
/// step in flight and is handed over at that boundary (see `Runner::stop_taking_runs`),
/// the others run on; once `grace` is over, whatever still runs is cut and handed over
/// to another replica, then the server shuts down.
async fn hand_over_on_signal(signal: Shutdown, runners: Vec<Arc<Runner>>, grace: Duration, shutdown: Shutdown) {
    signal.triggered().await;
    for runner in &runners {
        runner.stop_taking_runs();
    }
    let running = || runners.iter().map(|runner| runner.running()).sum::<usize>();
    tracing::info!(
        running = running(),
        ?grace,
        "shutting down: running invocations finish their step in flight and are handed over"
    );
    let deadline = tokio::time::Instant::now() + grace;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while running() > 0 && tokio::time::Instant::now() < deadline {
        tick.tick().await;
    }
    let handed: usize = runners.iter().map(|runner| runner.hand_over_all()).sum();
    if handed > 0 {
        tracing::info!(handed, "handing the invocations still running over to another replica");
        // Each hands its lease over as it stops (one store call each).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while running() > 0 && tokio::time::Instant::now() < deadline {
            tick.tick().await;
        }
    }
    shutdown.trigger();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let service = ServiceInfo {
        name: env!("CARGO_BIN_NAME"),
        version: env!("CARGO_PKG_VERSION"),
    };
    let log = cli.log.clone();
    run_binary(&log, service, run(cli)).await
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let signal = Shutdown::on_signals().context("cannot install the SIGTERM/SIGINT handlers")?;
    // Fires after the grace period, once the runs still going were handed over.
    let shutdown = Shutdown::new();
    // The agents file is checked before the store is opened: a typo or a missing
    // API key is reported at once, whether or not Redis is up.
    cli.replies.apply(cli.artifacts.max_artifact_bytes);
    let agents = AgentsConfig::load_with_python(&cli.agents, &cli.python).context("the agents file is not valid")?;
    let config = cli.artifacts.apply(cli.sessions.apply(cli.store.store_config()));
    let embedders = match &cli.memory.memory_embeddings {
        Some(path) => adk_grpc_models::load_embedders(path).context("the memory embeddings file is not valid")?,
        None => Default::default(),
    };
    let services = RunnerServices::open_with_embedders(&cli.store.store_url, config, embedders)
        .await
        .with_context(|| format!("cannot open the store {}", cli.store.redacted_url()))?
        .with_lease_args(&cli.lease);
    let apps = agents.build(&services).context("cannot build the agents")?;
    tracing::info!(store = %cli.store.redacted_url(), apps = ?agents.app_names(), "agents loaded");
    let runners: Vec<Arc<Runner>> = apps.iter().map(|app| app.runner().clone()).collect();
    if let Some(resumer) = Resumer::new(runners.clone()) {
        tokio::spawn(resumer.run(signal.triggered()));
    }
    // On SIGTERM the runs get the whole grace to finish here; then those still running
    // are handed over, and the server's own drain has little left to wait for.
    let grace = cli.grpc.shutdown_grace();
    tokio::spawn(hand_over_on_signal(signal, runners, grace, shutdown.clone()));

    // Every app is also an A2A agent, on the same port; its card is on the HTTP (metrics) port too.
    let cards = cli.a2a.card_args(&cli.listen, &cli.grpc);
    let a2a = a2a_service(
        apps.clone(),
        services.artifacts.clone(),
        cards.clone(),
        &cli.grpc,
        shutdown.clone(),
    )?;
    let mut server = GrpcServer::new(&cli.grpc, shutdown.clone())
        .metrics(&cli.metrics)
        .http_routes(card_routes(&apps, &cards))
        .add_service(runner_service(apps, &cli.grpc, shutdown)?)
        .add_service(a2a)
        .health_check("session store", services.sessions.clone());
    if let Some(artifacts) = services.artifacts.clone() {
        server = server.health_check("artifact store", artifacts);
    }
    if let Some(memory) = services.memory.clone() {
        server = server.health_check("memory store", memory);
    }
    server.serve(&cli.listen).await?;
    Ok(())
}
