//! Session backends ([`adk_grpc_core::SessionBackend`], served by
//! [`adk_grpc_core::CoreSessionService`], which owns every session rule): in this
//! process ([`memory`]) and in Redis or Redis Cluster ([`redis`]).

pub mod memory;
pub mod redis;

use crate::config::StoreConfig;
use adk_grpc_core::{CoreSessionService, SessionBackend};

/// The session service over `backend`: the core's rules, with `config`'s default TTL.
pub fn session_service<B: SessionBackend>(backend: B, config: &StoreConfig) -> CoreSessionService<B> {
    CoreSessionService::new(backend).with_default_ttl(config.default_session_ttl)
}
