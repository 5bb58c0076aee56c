//! Servers shared by every test of one test binary.
//!
//! Each conformance case is its own `#[tokio::test]` (so one failure hides no other and a
//! case runs alone), yet starting a Redis Cluster or a service process per case would cost
//! seconds each. A [`Shared`] starts its server for the first test that asks and hands the
//! same one to the rest; every case uses names of its own, so they share a store safely.
//! Statics are never dropped, so the servers are stopped by an exit hook when the test
//! binary ends (and, as ever, killed with it by [`crate::ChildGuard`]'s drop in the hook).

use std::future::Future;
use std::sync::{Arc, Mutex};

/// A server started once per process by the first test that needs it.
pub struct Shared<T> {
    slot: tokio::sync::Mutex<Option<Arc<T>>>,
}

impl<T: Send + Sync + 'static> Shared<T> {
    pub const fn new() -> Shared<T> {
        Shared {
            slot: tokio::sync::Mutex::const_new(None),
        }
    }

    /// The shared server, started by `start` if no test started it yet. The caller's
    /// runtime may end with its test: `start` must leave nothing running on it (the
    /// testkit's servers are processes, so they do not).
    pub async fn get_or_start<F: Future<Output = T>>(&'static self, start: impl FnOnce() -> F) -> Arc<T> {
        let mut slot = self.slot.lock().await;
        if let Some(server) = slot.as_ref() {
            return server.clone();
        }
        let server = Arc::new(start().await);
        *slot = Some(server.clone());
        at_exit(Box::new(move || {
            // Every test has ended: this drops the last handle, which stops the server.
            if let Ok(mut slot) = self.slot.try_lock() {
                slot.take();
            }
        }));
        server
    }
}

impl<T: Send + Sync + 'static> Default for Shared<T> {
    fn default() -> Self {
        Shared::new()
    }
}

type ExitHook = Box<dyn FnOnce() + Send>;

static EXIT_HOOKS: Mutex<Vec<ExitHook>> = Mutex::new(Vec::new());

/// Runs `hook` when the process exits normally (the test harness ends with `exit`).
fn at_exit(hook: ExitHook) {
    let mut hooks = adk_grpc_core::sync::lock(&EXIT_HOOKS);
    if hooks.is_empty() {
        static REGISTER: std::sync::Once = std::sync::Once::new();
        REGISTER.call_once(|| {
            // SAFETY: atexit only records a function pointer; `run_exit_hooks` never unwinds
            // (it catches panics) and touches only this module's statics.
            #[allow(unsafe_code)]
            let registered = unsafe { libc::atexit(run_exit_hooks) };
            assert_eq!(registered, 0, "atexit refused the testkit's exit hook");
        });
    }
    hooks.push(hook);
}

extern "C" fn run_exit_hooks() {
    let hooks = std::mem::take(&mut *adk_grpc_core::sync::lock(&EXIT_HOOKS));
    for hook in hooks {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(hook));
    }
}

/// The plain `redis-server` the test binary's conformance cases share.
pub async fn redis() -> Arc<crate::RedisServer> {
    static SERVER: Shared<crate::RedisServer> = Shared::new();
    SERVER.get_or_start(crate::RedisServer::start).await
}

/// The 3-master Redis Cluster the test binary's conformance cases share.
pub async fn cluster() -> Arc<crate::RedisCluster> {
    static CLUSTER: Shared<crate::RedisCluster> = Shared::new();
    CLUSTER.get_or_start(|| crate::RedisCluster::start(3)).await
}

/// The 3-master Redis Cluster with a replica per master the conformance cases share.
pub async fn cluster_with_replicas() -> Arc<crate::RedisCluster> {
    static CLUSTER: Shared<crate::RedisCluster> = Shared::new();
    CLUSTER
        .get_or_start(|| crate::RedisCluster::start_with_replicas(3))
        .await
}

/// The primary with one replica the conformance cases share.
pub async fn primary_replica() -> Arc<crate::RedisPrimaryReplica> {
    static PAIR: Shared<crate::RedisPrimaryReplica> = Shared::new();
    PAIR.get_or_start(crate::RedisPrimaryReplica::start).await
}
