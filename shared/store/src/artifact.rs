//! Artifact backends, in memory ([`memory`]) and in Redis ([`redis`]): they store and
//! read versions and nothing more. Every artifact rule (validation, scopes, version
//! numbering, the size limit, chunking, references, error wording) is
//! [`adk_grpc_core::artifact::CoreArtifactService`]'s, which [`memory_artifacts`],
//! [`redis_artifacts`] and [`crate::Stores`] put in front of them.

pub mod memory;
pub mod redis;

use self::memory::InMemoryArtifactBackend;
use self::redis::RedisArtifactBackend;
use crate::config::StoreConfig;
use adk_grpc_core::Result;
use adk_grpc_core::artifact::CoreArtifactService;

pub use adk_grpc_core::artifact::MAX_VERSION;

/// The artifact service over an in-memory backend, with the config's limits. Share
/// `backend` with
/// [`InMemorySessionBackend::with_artifacts`](crate::InMemorySessionBackend::with_artifacts)
/// so that DeleteSession deletes the session's artifacts.
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
