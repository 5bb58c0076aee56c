//! [`StoreConfig`]: the settings every backend shares.

use crate::redis::durability::ReplicaAcks;
use adk_grpc_core::artifact::UploadLimits;
use std::time::Duration;

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

impl StoreConfig {
    /// `max_artifact_bytes` and `artifact_chunk_bytes`, as the core artifact service takes them.
    pub fn artifact_limits(&self) -> UploadLimits {
        UploadLimits::new(self.max_artifact_bytes, self.artifact_chunk_bytes)
    }
}
