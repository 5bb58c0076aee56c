//! `adk-server`: every ADK service in one process on one port. The store defaults
//! to `memory://`, so it runs with zero setup; point `--store-url` at Redis to share
//! state with other processes.

use adk_server_kit::{GrpcArgs, GrpcServer, LogArgs, MemoryByDefault, Shutdown, StoreArgs, init_tracing};
use anyhow::Context;
use clap::Parser;
use std::process::ExitCode;

/// Serves every ADK gRPC service (now: adk.v1.SessionService), grpc.health.v1 and server reflection on one port.
#[derive(Debug, Parser)]
#[command(name = "adk-server", version)]
struct Cli {
    /// Address to listen on (host:port)
    #[arg(long, env = "ADK_LISTEN", value_name = "ADDR", default_value = "0.0.0.0:50051")]
    listen: String,
    #[command(flatten)]
    store: StoreArgs<MemoryByDefault>,
    #[command(flatten)]
    grpc: GrpcArgs,
    #[command(flatten)]
    log: LogArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli.log);
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("cannot install the SIGTERM/SIGINT handlers")?;
    let sessions = adk_store::open_session_service(&cli.store.store_url, cli.store.store_config())
        .await
        .with_context(|| format!("cannot open the session store {}", cli.store.redacted_url()))?;
    tracing::info!(store = %cli.store.redacted_url(), "session store open");

    // One line per service; each store it uses gets a health check.
    GrpcServer::new(&cli.grpc, shutdown.clone())
        .add_service(adk_session_service::session_service(
            sessions.clone(),
            &cli.grpc,
            shutdown,
        ))
        .health_check("session store", sessions)
        .serve(&cli.listen)
        .await?;
    Ok(())
}
