//! `adk-server`: every ADK service in one process on one port. The store defaults
//! to `memory://`, so it runs with zero setup; point `--store-url` at Redis to share
//! state with other processes. The flags and the server they assemble live here, so
//! tests start the very server the binary runs without spawning a process.

use adk_grpc_artifact_service::artifact_service;
use adk_grpc_runner_service::a2a::{A2aArgs, a2a_service, card_routes};
use adk_grpc_runner_service::{AgentsConfig, LeaseArgs, ReplyArgs, RunnerServices, runner_service};
use adk_grpc_server_kit::{
    ArtifactArgs, GrpcArgs, GrpcServer, LogArgs, MemoryArgs, MemoryByDefault, MemoryGenerationArgs, MetricsArgs,
    SessionArgs, Shutdown, StoreArgs,
};
use adk_grpc_session_service::{generate_due_ingests, memory_service, session_service};
use adk_grpc_store::Stores;
use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;

/// Serves every ADK gRPC service (adk.v1.SessionService, adk.v1.ArtifactService, adk.v1.MemoryService and, with --agents,
/// adk.v1.AgentRunner and A2A's lf.a2a.v1.A2AService), grpc.health.v1 and server reflection on one port.
#[derive(Debug, Parser)]
#[command(name = "adk-server", version)]
pub struct Cli {
    /// Address to listen on (host:port)
    #[arg(long, env = "ADK_LISTEN", value_name = "ADDR", default_value = "0.0.0.0:50051")]
    pub listen: String,
    /// The agents file (YAML) to run with adk.v1.AgentRunner; see examples/agents.yaml. Or an ADK
    /// agent-config directory (root_agent.yaml), or a directory of them [default: no runner]
    #[arg(long, env = "ADK_AGENTS", value_name = "FILE")]
    pub agents: Option<PathBuf>,
    /// The Python interpreter (with the adk-grpc-worker package installed) of the worker serving the Python
    /// functions an ADK agent-config directory names as tools and callbacks
    #[arg(long, env = "ADK_PYTHON", value_name = "PATH", default_value = "python3")]
    pub python: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs<MemoryByDefault>,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub artifacts: ArtifactArgs,
    #[command(flatten)]
    pub lease: LeaseArgs,
    #[command(flatten)]
    pub replies: ReplyArgs,
    #[command(flatten)]
    pub memory: MemoryArgs,
    #[command(flatten)]
    pub generation: MemoryGenerationArgs,
    #[command(flatten)]
    pub a2a: A2aArgs,
    #[command(flatten)]
    pub grpc: GrpcArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

/// The server `cli` describes, every service added and not yet listening: the binary
/// serves it on `--listen`, a test binds it to an ephemeral port in its own process.
/// Streams end and the server stops when `shutdown` fires.
pub async fn server(cli: &Cli, shutdown: Shutdown) -> anyhow::Result<GrpcServer> {
    // Checked before any store is opened, so a bad file fails the start at once.
    cli.replies.apply(cli.artifacts.max_artifact_bytes);
    let agents = match &cli.agents {
        Some(path) => Some(AgentsConfig::load_with_python(path, &cli.python).context("the agents file is not valid")?),
        None => None,
    };
    // Every service uses the same store URL, opened as one deployment: DeleteSession
    // deletes the session's artifacts (with memory://, in this process's artifact store).
    let config = cli.artifacts.apply(cli.sessions.apply(cli.store.store_config()));
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
        .with_context(|| format!("cannot open the store {}", cli.store.redacted_url()))?
        .with_embedders(embedders)
        .with_generators(generators);
    let sessions = stores.sessions().await.with_context(|| cannot_open("session"))?;
    let artifacts = stores.artifacts().await.with_context(|| cannot_open("artifact"))?;
    // Long-term memory at the same URL; the runner's agents recall from the very instance served.
    let memory = stores.memory().await.with_context(|| cannot_open("memory"))?;
    tracing::info!(store = %cli.store.redacted_url(), "session, artifact and memory stores open");
    // Ingested events are generated from by whichever replica finds them due.
    tokio::spawn(generate_due_ingests(memory.clone(), shutdown.triggered()));

    // The runner uses the very store instances the session and artifact services
    // serve (with memory:// a second open would be a second, empty store), so a
    // Run's events show in GetSession on the same port.
    let runner = match &agents {
        Some(agents) => {
            let lease = stores.leases().await.with_context(|| cannot_open("session lease"))?;
            let mut services =
                RunnerServices::new(sessions.clone(), Some(artifacts.clone()), lease).with_lease_args(&cli.lease);
            services.memory = Some(memory.clone());
            let apps = agents.build(&services).context("cannot build the agents")?;
            tracing::info!(apps = ?agents.app_names(), "agents loaded");
            // Every app is also an A2A agent, on the same port; its card is on the HTTP (metrics) port too.
            let cards = cli.a2a.card_args(&cli.listen, &cli.grpc);
            let a2a = a2a_service(
                apps.clone(),
                Some(artifacts.clone()),
                cards.clone(),
                &cli.grpc,
                shutdown.clone(),
            )?;
            let routes = card_routes(&apps, &cards);
            Some((runner_service(apps, &cli.grpc, shutdown.clone())?, a2a, routes))
        }
        None => None,
    };

    // One line per service; each store it uses gets a health check.
    let mut server = GrpcServer::new(&cli.grpc, shutdown.clone())
        .metrics(&cli.metrics)
        .add_service(session_service(sessions.clone(), &cli.grpc, shutdown))
        .add_service(artifact_service(artifacts.clone(), &cli.grpc))
        .add_service(memory_service(memory.clone(), sessions.clone(), &cli.grpc))
        .health_check("session store", sessions)
        .health_check("artifact store", artifacts)
        .health_check("memory store", memory);
    if let Some((runner, a2a, card_routes)) = runner {
        server = server.add_service(runner).add_service(a2a).http_routes(card_routes);
    }
    Ok(server)
}
