//! The store crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test store <module>::`.

mod artifact_conformance;
mod conformance_memory;
mod lease_fencing;
mod memory_conformance;
mod memory_generation;
mod redis_failover;
mod redis_hot_keys;
mod redis_smoke;
mod redis_stored_events;
mod redis_tls;
mod redis_watch_fanout;
