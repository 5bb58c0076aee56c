//! What every runner needs besides its agents: the session store, the artifact
//! store, long-term memory and the session leases (one invocation per session at a time).

use adk_grpc_agents::RunnerConfig;
use adk_grpc_core::memory::Embedders;
use adk_grpc_core::{
    Agent, ArtifactService, CoreMemoryService, CoreSessionService, MemoryService, Result, SessionLease, SessionService,
};
use adk_grpc_store::{InMemoryArtifactBackend, InMemoryMemoryBackend, InMemorySessionBackend, StoreConfig, Stores};

/// The runner's session lease flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaseArgs {
    /// How long a session's lease lasts unrenewed (a live runner renews it every third of
    /// this), so how long after a runner died before another replica resumes its run; at
    /// least 300 ms [default: 5000]
    #[arg(long, env = "ADK_SESSION_LEASE_TTL_MS", value_name = "MILLIS",
          default_value_t = RunnerConfig::DEFAULT_LEASE_TTL.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(300..=3_600_000))]
    pub session_lease_ttl_ms: u64,
}

impl LeaseArgs {
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.session_lease_ttl_ms)
    }
}
use std::sync::Arc;
use std::time::Duration;

/// The stores the runners of one process share. Cloning shares them.
#[derive(Clone)]
pub struct RunnerServices {
    pub sessions: Arc<dyn SessionService>,
    /// For `{artifact.x}` in instructions, `load_artifacts` and tools that save
    /// artifacts; None: agents see no artifacts.
    pub artifacts: Option<Arc<dyn ArtifactService>>,
    pub lease: Arc<dyn SessionLease>,
    /// Long-term memory for `load_memory`, `preload_memory` and the agents file's
    /// `memory.add`; None: agents have no memory.
    pub memory: Option<Arc<dyn MemoryService>>,
    /// How long a session stays locked after a runner died mid-invocation.
    pub lease_ttl: Duration,
}

impl RunnerServices {
    pub fn new(
        sessions: Arc<dyn SessionService>,
        artifacts: Option<Arc<dyn ArtifactService>>,
        lease: Arc<dyn SessionLease>,
    ) -> Self {
        RunnerServices {
            sessions,
            artifacts,
            lease,
            memory: None,
            lease_ttl: RunnerConfig::DEFAULT_LEASE_TTL,
        }
    }

    /// Fresh in-memory stores: one process, nothing to set up (tests, demos). Deleting
    /// a session deletes its artifacts, as with Redis.
    pub fn in_memory() -> Self {
        let backend = InMemoryArtifactBackend::new();
        let artifacts = adk_grpc_store::memory_artifacts(backend.clone(), &StoreConfig::default());
        let sessions = InMemorySessionBackend::new().with_artifacts(backend);
        // The store's own leases, so that it fences the runners' appends.
        let lease = sessions.leases();
        let sessions = Arc::new(CoreSessionService::new(sessions));
        let mut services = Self::new(sessions, Some(Arc::new(artifacts)), Arc::new(lease));
        services.memory = Some(Arc::new(CoreMemoryService::new(InMemoryMemoryBackend::new())));
        services
    }

    /// With the session lease TTL `args` ask for.
    pub fn with_lease_args(mut self, args: &LeaseArgs) -> Self {
        self.lease_ttl = args.lease_ttl();
        self
    }

    /// Sessions, artifacts, memory and leases at one store URL (`memory://`, `redis://…`,
    /// …). With `memory://` each store is new and private to the caller: a process that
    /// also serves sessions must pass its own stores to [`RunnerServices::new`]
    /// instead, so that both see the same data.
    pub async fn open(url: &str, config: StoreConfig) -> Result<Self> {
        Self::open_with_embedders(url, config, Embedders::new()).await
    }

    /// [`RunnerServices::open`], the memory embedding with the models of the apps that configure one.
    pub async fn open_with_embedders(url: &str, config: StoreConfig, embedders: Embedders) -> Result<Self> {
        let stores = Stores::open(url, config)?.with_embedders(embedders);
        let mut services = Self::new(
            stores.sessions().await?,
            Some(stores.artifacts().await?),
            stores.leases().await?,
        );
        services.memory = Some(stores.memory().await?);
        Ok(services)
    }

    /// The library's runner configuration for one app over these stores.
    pub fn runner_config(&self, app_name: impl Into<String>, root_agent: Arc<dyn Agent>) -> RunnerConfig {
        let mut config = RunnerConfig::new(app_name, root_agent, self.sessions.clone(), self.lease.clone());
        config.artifact_service = self.artifacts.clone();
        config.lease_ttl = self.lease_ttl;
        config.memory_service = self.memory.clone();
        config
    }
}
