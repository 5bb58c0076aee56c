//! Backends of the core traits: in memory (one process, nothing to set up) and
//! Redis (standalone `redis://` / `rediss://`, or cluster `redis+cluster://h1:p1,h2:p2` /
//! `rediss+cluster://h1:p1,h2:p2`), one module per domain, each with its `memory` and
//! `redis` backend: sessions ([`session`]), artifacts ([`artifact`]), long-term memory
//! ([`memories`]) and session leases ([`lease`]); what the Redis backends share is in
//! [`redis`]. Session stores are [`SessionBackend`](adk_grpc_core::SessionBackend)s served
//! by the core's [`CoreSessionService`](adk_grpc_core::CoreSessionService), which owns every
//! session rule ([`session_service`]); artifact
//! stores are artifact backends served by the core's
//! [`CoreArtifactService`](adk_grpc_core::artifact::CoreArtifactService), which owns
//! every artifact rule ([`memory_artifacts`], [`redis_artifacts`]); memory stores are
//! memory backends served by the core's
//! [`CoreMemoryService`](adk_grpc_core::CoreMemoryService), which owns every long-term
//! memory rule. A deployment opens its stores from one URL with [`Stores`].

pub mod artifact;
mod config;
pub mod lease;
pub mod memories;
pub mod redis;
pub mod session;
mod stores;

pub use artifact::memory::InMemoryArtifactBackend;
pub use artifact::redis::RedisArtifactBackend;
pub use artifact::{memory_artifacts, redis_artifacts};
pub use config::{DEFAULT_MAX_ARTIFACT_BYTES, StoreConfig};
pub use lease::memory::InMemorySessionLease;
pub use lease::redis::RedisSessionLease;
pub use memories::memory::InMemoryMemoryBackend;
pub use memories::redis::RedisMemoryBackend;
pub use redis::durability::{self, MinReplicas, ReplicaAcks};
pub use session::memory::InMemorySessionBackend;
pub use session::redis::RedisSessionBackend;
pub use session::session_service;
pub use stores::Stores;
