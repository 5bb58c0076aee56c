//! `adk-artifact-server`: the ArtifactService alone, over the shared store (Redis by default).

use adk_grpc_artifact_service::artifact_service;
use adk_grpc_server_kit::{
    ArtifactArgs, GrpcArgs, GrpcServer, LogArgs, MetricsArgs, RedisByDefault, ServiceInfo, Shutdown, StoreArgs,
    run_binary,
};
use adk_grpc_store::Stores;
use anyhow::Context;
use clap::Parser;
use std::process::ExitCode;

/// Serves adk.v1.ArtifactService (plus grpc.health.v1 and server reflection) over a shared artifact store.
/// Artifacts larger than one gRPC message stream in chunks (UploadArtifact, DownloadArtifact).
#[derive(Debug, Parser)]
#[command(name = "adk-artifact-server", version)]
struct Cli {
    /// Address to listen on (host:port)
    #[arg(long, env = "ADK_LISTEN", value_name = "ADDR", default_value = "0.0.0.0:50052")]
    listen: String,
    #[command(flatten)]
    store: StoreArgs<RedisByDefault>,
    #[command(flatten)]
    artifacts: ArtifactArgs,
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
    let config = cli.artifacts.apply(cli.store.store_config());
    let cannot_open = || format!("cannot open the artifact store {}", cli.store.redacted_url());
    let stores = Stores::open(&cli.store.store_url, config).with_context(cannot_open)?;
    let store = stores.artifacts().await.with_context(cannot_open)?;
    tracing::info!(
        store = %cli.store.redacted_url(),
        max_artifact_bytes = cli.artifacts.max_artifact_bytes,
        "artifact store open"
    );

    GrpcServer::new(&cli.grpc, shutdown)
        .metrics(&cli.metrics)
        .add_service(artifact_service(store.clone(), &cli.grpc))
        .health_check("artifact store", store)
        .serve(&cli.listen)
        .await?;
    Ok(())
}
