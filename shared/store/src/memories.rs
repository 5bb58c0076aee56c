//! Long-term memory backends ([`adk_grpc_core::MemoryBackend`], served by
//! [`adk_grpc_core::CoreMemoryService`]): in this process ([`memory`]) and in Redis or Redis
//! Cluster ([`redis`]). Both keep an inverted index per (app, user), so a search reads
//! only the postings of its query's terms; the ranking itself (BM25) is the core's, the
//! same for both.

pub mod memory;
pub mod redis;
