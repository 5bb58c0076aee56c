//! Backends of the core traits: in memory (one process, nothing to set up) and
//! Redis (standalone `redis://` / `rediss://`, or cluster `redis+cluster://h1:p1,h2:p2` /
//! `rediss+cluster://h1:p1,h2:p2`), for sessions ([`SessionService`]) and
//! artifacts ([`ArtifactService`]). Session stores are [`SessionBackend`]s served by the
//! core's [`CoreSessionService`], which owns every session rule ([`session_service`]);
//! artifact stores are artifact backends served by the core's [`CoreArtifactService`],
//! which owns every artifact rule ([`memory_artifacts`], [`redis_artifacts`]); memory
//! stores are memory backends served by the core's [`CoreMemoryService`], which owns
//! every long-term memory rule ([`open_memory_service`]).

pub mod artifact;
pub mod lease;
pub mod memories;
pub mod memory;
pub mod redis;

use adk_grpc_core::artifact::CoreArtifactService;
use adk_grpc_core::{
    AdkError, ArtifactService, CoreMemoryService, CoreSessionService, MemoryService, Result, SessionBackend,
    SessionService,
};
use std::sync::Arc;
use std::time::Duration;

pub use artifact::memory::InMemoryArtifactBackend;
pub use artifact::redis::RedisArtifactBackend;
pub use lease::{InMemorySessionLease, RedisSessionLease};
pub use memories::memory::InMemoryMemoryBackend;
pub use memories::redis::RedisMemoryBackend;
pub use memory::InMemorySessionBackend;
pub use redis::RedisSessionBackend;
pub use redis::durability::{self, MinReplicas, ReplicaAcks};

/// Default of [`StoreConfig::max_artifact_bytes`]: 256 MiB.
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 256 * 1024 * 1024;

/// Settings shared by every backend.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// TTL for sessions created without one; None keeps them until deleted.
    pub default_session_ttl: Option<Duration>,
    /// The largest artifact version an upload may store; a larger one fails with
    /// `RESOURCE_EXHAUSTED` and leaves nothing behind.
    pub max_artifact_bytes: u64,
    /// Size of the pieces artifact bytes are stored in (Redis: one key each). 0 means
    /// the default; values above `adk_grpc_core::artifact::MAX_CHUNK_BYTES` are capped to it.
    pub artifact_chunk_bytes: usize,
    /// Redis: how many replicas must have a write before it is acknowledged.
    pub replica_acks: ReplicaAcks,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            default_session_ttl: None,
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
            artifact_chunk_bytes: adk_grpc_core::artifact::DEFAULT_CHUNK_BYTES,
            replica_acks: ReplicaAcks::default(),
        }
    }
}

/// The session service over `backend`: the core's rules, with `config`'s default TTL.
pub fn session_service<B: SessionBackend>(backend: B, config: &StoreConfig) -> CoreSessionService<B> {
    CoreSessionService::new(backend).with_default_ttl(config.default_session_ttl)
}

/// The kinds of store a URL can name.
enum Backend {
    Memory,
    Redis,
}

impl Backend {
    fn of(url: &str) -> Result<Backend> {
        if url == "memory://" || url == "memory" {
            return Ok(Backend::Memory);
        }
        let redis_schemes = ["redis://", "rediss://", "redis+cluster://", "rediss+cluster://"];
        if redis_schemes.iter().any(|scheme| url.starts_with(scheme)) {
            return Ok(Backend::Redis);
        }
        Err(AdkError::Config(format!(
            "unsupported store URL {url:?}: use memory://, redis://host:port, rediss://host:port, \
             redis+cluster://h1:p1,h2:p2 or rediss+cluster://h1:p1,h2:p2"
        )))
    }
}

/// Opens the session store a URL names: `memory://`, `redis://…`, `rediss://…`,
/// `redis+cluster://h1:p1,h2:p2` or `rediss+cluster://h1:p1,h2:p2` (TLS; append
/// `#insecure` to a `rediss` URL to skip certificate verification).
pub async fn open_session_service(url: &str, config: StoreConfig) -> Result<Arc<dyn SessionService>> {
    Ok(match Backend::of(url)? {
        Backend::Memory => Arc::new(session_service(InMemorySessionBackend::new(), &config)),
        Backend::Redis => Arc::new(RedisSessionBackend::connect_service(url, config).await?),
    })
}

/// Opens the artifact store a URL names (the same URLs as [`open_session_service`]).
/// Each `memory://` store is a store of its own: use [`open_stores`] for the artifact
/// store of a process that also serves sessions from memory.
pub async fn open_artifact_service(url: &str, config: StoreConfig) -> Result<Arc<dyn ArtifactService>> {
    Ok(match Backend::of(url)? {
        Backend::Memory => Arc::new(memory_artifacts(InMemoryArtifactBackend::new(), &config)),
        Backend::Redis => Arc::new(redis_artifacts(url, &config).await?),
    })
}

/// Opens the session and the artifact store a URL names, as one deployment: DeleteSession
/// deletes the session's own artifacts. On Redis the two share the Redis (a session
/// store opened alone does the same); with `memory://` the session store is linked to
/// the new artifact store ([`InMemorySessionBackend::with_artifacts`]).
pub async fn open_stores(
    url: &str,
    config: StoreConfig,
) -> Result<(Arc<dyn SessionService>, Arc<dyn ArtifactService>)> {
    Ok(match Backend::of(url)? {
        Backend::Memory => {
            let backend = InMemoryArtifactBackend::new();
            let artifacts = memory_artifacts(backend.clone(), &config);
            let sessions = InMemorySessionBackend::new().with_artifacts(backend);
            (Arc::new(session_service(sessions, &config)), Arc::new(artifacts))
        }
        Backend::Redis => (
            Arc::new(RedisSessionBackend::connect_service(url, config.clone()).await?),
            Arc::new(redis_artifacts(url, &config).await?),
        ),
    })
}

/// The artifact service over an in-memory backend, with the config's limits. Share
/// `backend` with [`InMemorySessionBackend::with_artifacts`] so that DeleteSession
/// deletes the session's artifacts.
pub fn memory_artifacts(
    backend: InMemoryArtifactBackend,
    config: &StoreConfig,
) -> CoreArtifactService<InMemoryArtifactBackend> {
    CoreArtifactService::new(backend, config.artifact_limits())
}

/// The artifact service over Redis (standalone or cluster) at `url`, with the config's limits.
pub async fn redis_artifacts(url: &str, config: &StoreConfig) -> Result<CoreArtifactService<RedisArtifactBackend>> {
    Ok(CoreArtifactService::new(
        RedisArtifactBackend::connect(url, config).await?,
        config.artifact_limits(),
    ))
}

/// Opens the long-term memory store a URL names (the same URLs as
/// [`open_session_service`]); each `memory://` store is a store of its own.
pub async fn open_memory_service(url: &str, config: StoreConfig) -> Result<Arc<dyn MemoryService>> {
    open_memory_service_with(url, config, adk_grpc_core::memory::Embedders::new()).await
}

/// [`open_memory_service`] with the embedding models of the apps that configure one.
pub async fn open_memory_service_with(
    url: &str,
    config: StoreConfig,
    embedders: adk_grpc_core::memory::Embedders,
) -> Result<Arc<dyn MemoryService>> {
    Ok(match Backend::of(url)? {
        Backend::Memory => Arc::new(CoreMemoryService::new(InMemoryMemoryBackend::new()).with_embedders(embedders)),
        Backend::Redis => {
            Arc::new(CoreMemoryService::new(RedisMemoryBackend::connect(url, config).await?).with_embedders(embedders))
        }
    })
}
