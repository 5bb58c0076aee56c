//! Long-term memory backends ([`adk_core::MemoryService`]): in this process
//! ([`memory`]) and in Redis or Redis Cluster ([`redis`]). Both keep an inverted
//! index per (app, user), so a search reads only the postings of its query's terms;
//! the ranking itself (BM25) is `adk_core::memory::rank`, the same for both.

pub mod memory;
pub mod redis;
