//! Backends of the core traits: in memory (one process, nothing to set up) and
//! Redis (standalone `redis://` / `rediss://`, or cluster `redis+cluster://h1:p1,h2:p2` /
//! `rediss+cluster://h1:p1,h2:p2`), one module per domain, each with its `memory` and
//! `redis` backend: sessions ([`session`]), artifacts ([`artifact`]), long-term memory
//! ([`memories`]) and session leases ([`lease`]); what the Redis backends share is in
//! [`redis`]. Session stores are [`SessionBackend`]s served by the core's
//! [`CoreSessionService`], which owns every session rule ([`session_service`]); artifact
//! stores are artifact backends served by the core's [`CoreArtifactService`], which owns
//! every artifact rule ([`memory_artifacts`], [`redis_artifacts`]); memory stores are
//! memory backends served by the core's
//! [`CoreMemoryService`](adk_grpc_core::CoreMemoryService), which owns every long-term
//! memory rule. A deployment opens its stores from one URL with [`Stores`].

pub mod artifact;
pub mod lease;
pub mod memories;
pub mod redis;
pub mod session;
mod stores;

use adk_grpc_core::artifact::CoreArtifactService;
use adk_grpc_core::{CoreSessionService, Result, SessionBackend};
use std::time::Duration;

pub use artifact::memory::InMemoryArtifactBackend;
pub use artifact::redis::RedisArtifactBackend;
pub use lease::memory::InMemorySessionLease;
pub use lease::redis::RedisSessionLease;
pub use memories::memory::InMemoryMemoryBackend;
pub use memories::redis::RedisMemoryBackend;
pub use redis::durability::{self, MinReplicas, ReplicaAcks};
pub use session::memory::InMemorySessionBackend;
pub use session::redis::RedisSessionBackend;
pub use stores::Stores;

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
