//! [`Stores`]: the store URL of a deployment, parsed once, and the sessions, artifacts,
//! long-term memory and session leases it serves.

use crate::artifact::memory::InMemoryArtifactBackend;
use crate::artifact::{memory_artifacts, redis_artifacts};
use crate::config::StoreConfig;
use crate::lease::redis::RedisSessionLease;
use crate::memories::memory::InMemoryMemoryBackend;
use crate::memories::redis::RedisMemoryBackend;
use crate::session::memory::InMemorySessionBackend;
use crate::session::redis::RedisSessionBackend;
use crate::session::session_service;
use adk_grpc_core::memory::{Embedders, Generators};
use adk_grpc_core::{
    AdkError, ArtifactService, CoreMemoryService, MemoryService, Result, SessionLease, SessionService,
};
use std::sync::Arc;

/// The stores of one deployment, at one store URL: `memory://`, `redis://…`,
/// `rediss://…`, `redis+cluster://h1:p1,h2:p2` or `rediss+cluster://h1:p1,h2:p2` (TLS;
/// append `#insecure` to a `rediss` URL to skip certificate verification).
///
/// [`Stores::open`] parses the URL; each store is opened when asked for, so a process
/// opens only the stores it serves. They are one deployment: DeleteSession deletes the
/// session's own artifacts, and the session store fences the appends of a runner that
/// lost its lease. On Redis the stores share the Redis (each asked for connects anew);
/// with `memory://` every store asked for of one `Stores` is the same store in this
/// process, and the session store is linked to its artifacts and its leases
/// ([`InMemorySessionBackend::with_artifacts`], [`InMemorySessionBackend::leases`]).
#[derive(Clone)]
pub struct Stores {
    backend: Backend,
    config: StoreConfig,
    /// The embedding models of the apps that configure one, for long-term memory.
    embedders: Embedders,
    /// How the apps that configure it generate memories from conversations.
    generators: Generators,
}

/// The kind of store a URL names.
#[derive(Clone)]
enum Backend {
    /// This process's stores, created once, shared by every store asked for.
    Memory {
        sessions: InMemorySessionBackend,
        artifacts: InMemoryArtifactBackend,
        memories: InMemoryMemoryBackend,
    },
    /// The Redis (standalone or cluster) at this URL.
    Redis(String),
}

impl Backend {
    fn parse(url: &str) -> Result<Backend> {
        if url == "memory://" || url == "memory" {
            let artifacts = InMemoryArtifactBackend::new();
            return Ok(Backend::Memory {
                sessions: InMemorySessionBackend::new().with_artifacts(artifacts.clone()),
                artifacts,
                memories: InMemoryMemoryBackend::new(),
            });
        }
        let redis_schemes = ["redis://", "rediss://", "redis+cluster://", "rediss+cluster://"];
        if redis_schemes.iter().any(|scheme| url.starts_with(scheme)) {
            return Ok(Backend::Redis(url.to_string()));
        }
        Err(AdkError::Config(format!(
            "unsupported store URL {url:?}: use memory://, redis://host:port, rediss://host:port, \
             redis+cluster://h1:p1,h2:p2 or rediss+cluster://h1:p1,h2:p2"
        )))
    }
}

impl Stores {
    /// The stores at `url` with `config`'s settings. Fails with `Config` for a URL of no
    /// supported kind; connects to nothing yet (each store connects when asked for).
    pub fn open(url: &str, config: StoreConfig) -> Result<Stores> {
        Ok(Stores {
            backend: Backend::parse(url)?,
            config,
            embedders: Embedders::new(),
            generators: Generators::new(),
        })
    }

    /// The same stores, long-term memory embedding with the models of the apps that configure one.
    pub fn with_embedders(mut self, embedders: Embedders) -> Self {
        self.embedders = embedders;
        self
    }

    /// The same stores, long-term memory generating memories for the apps that configure it.
    pub fn with_generators(mut self, generators: Generators) -> Self {
        self.generators = generators;
        self
    }

    /// The session store, with the config's default TTL. On Redis, fails with
    /// `Unavailable` when Redis cannot be reached now; once connected, it survives Redis
    /// restarts by itself (so do the others).
    pub async fn sessions(&self) -> Result<Arc<dyn SessionService>> {
        Ok(match &self.backend {
            Backend::Memory { sessions, .. } => Arc::new(session_service(sessions.clone(), &self.config)),
            Backend::Redis(url) => Arc::new(RedisSessionBackend::connect_service(url, self.config.clone()).await?),
        })
    }

    /// The artifact store, with the config's limits.
    pub async fn artifacts(&self) -> Result<Arc<dyn ArtifactService>> {
        Ok(match &self.backend {
            Backend::Memory { artifacts, .. } => Arc::new(memory_artifacts(artifacts.clone(), &self.config)),
            Backend::Redis(url) => Arc::new(redis_artifacts(url, &self.config).await?),
        })
    }

    /// The long-term memory store.
    pub async fn memory(&self) -> Result<Arc<dyn MemoryService>> {
        let (embedders, generators) = (self.embedders.clone(), self.generators.clone());
        Ok(match &self.backend {
            Backend::Memory { memories, .. } => Arc::new(
                CoreMemoryService::new(memories.clone())
                    .with_embedders(embedders)
                    .with_generators(generators),
            ),
            Backend::Redis(url) => Arc::new(
                CoreMemoryService::new(RedisMemoryBackend::connect(url, self.config.clone()).await?)
                    .with_embedders(embedders)
                    .with_generators(generators),
            ),
        })
    }

    /// The session leases runners take: one invocation per session at a time. In Redis
    /// every replica sharing it sees them; a lease change is acknowledged as the config's
    /// `replica_acks` says.
    pub async fn leases(&self) -> Result<Arc<dyn SessionLease>> {
        Ok(match &self.backend {
            Backend::Memory { sessions, .. } => Arc::new(sessions.leases()),
            Backend::Redis(url) => Arc::new(RedisSessionLease::connect(url, self.config.replica_acks).await?),
        })
    }
}
