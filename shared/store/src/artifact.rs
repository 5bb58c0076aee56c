//! Artifact backends, in memory ([`memory`]) and in Redis ([`redis`]): they store and
//! read versions and nothing more. Every artifact rule (validation, scopes, version
//! numbering, the size limit, chunking, references, error wording) is
//! [`adk_grpc_core::artifact::CoreArtifactService`]'s, which the `open_*` functions of this
//! crate put in front of them.

pub mod memory;
pub mod redis;

use crate::StoreConfig;
use adk_grpc_core::artifact::UploadLimits;

pub use adk_grpc_core::artifact::MAX_VERSION;

impl StoreConfig {
    /// `max_artifact_bytes` and `artifact_chunk_bytes`, as the core artifact service takes them.
    pub fn artifact_limits(&self) -> UploadLimits {
        UploadLimits::new(self.max_artifact_bytes, self.artifact_chunk_bytes)
    }
}
