//! `adk-session-server`: the SessionService and the MemoryService (long-term memory,
//! which adds sessions from this very store), over the shared store (Redis by default).

use adk_grpc_server_kit::{
    GrpcArgs, GrpcServer, LogArgs, MemoryArgs, MemoryGenerationArgs, MetricsArgs, RedisByDefault, ServiceInfo,
    SessionArgs, Shutdown, StoreArgs, run_binary,
};
use adk_grpc_session_service::{generate_due_ingests, memory_service, session_service};
use adk_grpc_store::Stores;
use anyhow::Context;
use clap::Parser;
use std::process::ExitCode;

/// Serves adk.v1.SessionService and adk.v1.MemoryService (plus grpc.health.v1 and server reflection) over a shared session store.
#[derive(Debug, Parser)]
#[command(name = "adk-session-server", version)]
struct Cli {
    /// Address to listen on (host:port)
    #[arg(long, env = "ADK_LISTEN", value_name = "ADDR", default_value = "0.0.0.0:50051")]
    listen: String,
    #[command(flatten)]
    store: StoreArgs<RedisByDefault>,
    #[command(flatten)]
    sessions: SessionArgs,
    #[command(flatten)]
    memory: MemoryArgs,
    #[command(flatten)]
    generation: MemoryGenerationArgs,
    #[command(flatten)]
    grpc: GrpcArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    log: LogArgs,
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
    let shutdown = Shutdown::on_signals().context("cannot install the SIGTERM/SIGINT handlers")?;
    let config = cli.sessions.apply(cli.store.store_config());
    let cannot_open = |what: &str| format!("cannot open the {what} store {}", cli.store.redacted_url());
    let embedders = match &cli.memory.memory_embeddings {
        Some(path) => adk_grpc_models::load_embedders(path).context("the memory embeddings file is not valid")?,
        None => Default::default(),
    };
    let generators = match &cli.generation.memory_generation {
        Some(path) => adk_grpc_models::load_generators(path).context("the memory generation file is not valid")?,
        None => Default::default(),
    };
    let stores = Stores::open(&cli.store.store_url, config)
        .with_context(|| cannot_open("session"))?
        .with_embedders(embedders)
        .with_generators(generators);
    let store = stores.sessions().await.with_context(|| cannot_open("session"))?;
    let memory = stores.memory().await.with_context(|| cannot_open("memory"))?;
    tracing::info!(store = %cli.store.redacted_url(), "session store open");
    // Ingested events are generated from by whichever replica finds them due.
    tokio::spawn(generate_due_ingests(memory.clone(), shutdown.triggered()));

    GrpcServer::new(&cli.grpc, shutdown.clone())
        .metrics(&cli.metrics)
        .add_service(session_service(store.clone(), &cli.grpc, shutdown))
        .add_service(memory_service(memory.clone(), store.clone(), &cli.grpc))
        .health_check("session store", store)
        .health_check("memory store", memory)
        .serve(&cli.listen)
        .await?;
    Ok(())
}
