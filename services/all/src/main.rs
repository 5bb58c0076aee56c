//! `adk-server`: every ADK service in one process on one port (see the library).

use adk_grpc_all_in_one::{Cli, server};
use adk_grpc_server_kit::{ServiceInfo, Shutdown, run_binary};
use anyhow::Context;
use clap::Parser;
use std::process::ExitCode;

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
    server(&cli, shutdown).await?.serve(&cli.listen).await?;
    Ok(())
}
