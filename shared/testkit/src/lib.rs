//! Test support for end-to-end tests that start real processes.
//!
//! Nothing here is a mock: [`RedisServer`] and [`RedisCluster`] run the real
//! `redis-server` binary, and [`ServiceProcess`] runs a built workspace binary.
//! Every process is owned by a [`ChildGuard`], which SIGKILLs it on drop, and
//! writes its stdout/stderr to a log file so failures can be diagnosed.
//!
//! Helpers panic with a descriptive message instead of returning errors: a
//! test that cannot set up its environment should fail loudly, never skip.

pub mod adk_events;
pub mod artifact_conformance;
pub mod conformance;
mod fixture;
pub mod memory_conformance;
mod net;
mod process;
mod python;
mod redis_server;
mod service;
pub mod shared;
mod wait;

pub use fixture::Fixture;
pub use net::{free_port, wait_for_port};
pub use process::{ChildGuard, DEFAULT_TERMINATE_GRACE};
pub use python::venv_python;
pub use redis_server::{
    FAILOVER_NODE_TIMEOUT_MS, RedisCluster, RedisPrimaryReplica, RedisServer, patient_connection, redis_cli,
};
pub use service::{ServiceProcess, use_binaries_beside_this_executable, workspace_bin};
pub use shared::Shared;
pub use wait::{eventually, try_eventually};

use std::sync::atomic::{AtomicU64, Ordering};

/// Returns a name that is unique within this test run, e.g. `tsessionx3x41234`.
///
/// Tests that share one Redis use it as an app name / key prefix so they never
/// see each other's data. The result only contains `[A-Za-z0-9._@-]`; any other
/// character in `tag` is replaced by `-`.
pub fn unique_prefix(tag: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '@' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("t{tag}x{counter}x{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_prefix_is_unique_and_uses_allowed_chars() {
        let a = unique_prefix("my tag/ü_1");
        let b = unique_prefix("my tag/ü_1");
        assert_ne!(a, b);
        for prefix in [&a, &b] {
            assert!(
                prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '@' | '-')),
                "unexpected character in {prefix}"
            );
            assert!(prefix.starts_with("tmy-tag--"), "{prefix}");
            assert!(prefix.ends_with(&format!("x{}", std::process::id())), "{prefix}");
        }
    }
}
