//! Session backends ([`adk_grpc_core::SessionBackend`], served by
//! [`adk_grpc_core::CoreSessionService`], which owns every session rule): in this
//! process ([`memory`]) and in Redis or Redis Cluster ([`redis`]).

pub mod memory;
pub mod redis;
