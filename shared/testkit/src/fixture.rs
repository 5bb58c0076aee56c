//! What a conformance case runs against: the services of one backend, the clock its store
//! reads, and whatever must stay alive while the case runs (a server, a process).

use crate::artifact_conformance::ArtifactLimits;
use adk_grpc_core::{ArtifactService, Clock, MemoryService, SessionService};
use std::any::Any;
use std::sync::Arc;

/// The backend a conformance case runs on; built by the expression given to
/// [`crate::session_conformance_tests`] and its siblings.
pub struct Fixture {
    sessions: Option<Arc<dyn SessionService>>,
    artifacts: Option<Arc<dyn ArtifactService>>,
    memory: Option<Arc<dyn MemoryService>>,
    clock: Clock,
    limits: ArtifactLimits,
    _kept: Vec<Box<dyn Any + Send + Sync>>,
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture {
            sessions: None,
            artifacts: None,
            memory: None,
            clock: Clock::system(),
            limits: ArtifactLimits::default(),
            _kept: Vec::new(),
        }
    }
}

impl Fixture {
    /// A session service on the system clock (a Redis store's TTLs run on Redis's own).
    pub fn sessions(service: impl SessionService + 'static) -> Fixture {
        Fixture::default().with_sessions(Arc::new(service))
    }

    pub fn artifacts(service: impl ArtifactService + 'static, limits: ArtifactLimits) -> Fixture {
        Fixture::default().with_artifacts(Arc::new(service), limits)
    }

    pub fn memory(service: impl MemoryService + 'static) -> Fixture {
        Fixture::default().with_memory(Arc::new(service))
    }

    pub fn with_sessions(mut self, service: Arc<dyn SessionService>) -> Fixture {
        self.sessions = Some(service);
        self
    }

    pub fn with_artifacts(mut self, service: Arc<dyn ArtifactService>, limits: ArtifactLimits) -> Fixture {
        self.artifacts = Some(service);
        self.limits = limits;
        self
    }

    pub fn with_memory(mut self, service: Arc<dyn MemoryService>) -> Fixture {
        self.memory = Some(service);
        self
    }

    /// The clock the store reads: with [`Clock::manual`] the TTL case moves it instead of
    /// waiting for real time to pass.
    pub fn with_clock(mut self, clock: Clock) -> Fixture {
        self.clock = clock;
        self
    }

    /// Keeps `guard` (a server, a process, a shared handle) alive as long as the case runs.
    pub fn keeping(mut self, guard: impl Any + Send + Sync) -> Fixture {
        self._kept.push(Box::new(guard));
        self
    }

    pub fn session_service(&self) -> &dyn SessionService {
        self.sessions.as_deref().expect("this fixture has no session service")
    }

    pub fn artifact_service(&self) -> &dyn ArtifactService {
        self.artifacts.as_deref().expect("this fixture has no artifact service")
    }

    pub fn memory_service(&self) -> &dyn MemoryService {
        self.memory.as_deref().expect("this fixture has no memory service")
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn limits(&self) -> ArtifactLimits {
        self.limits
    }
}

/// One `#[tokio::test]` per case: `$setup` (an expression that may `.await`) builds the
/// [`Fixture`] named `$fixture`, and `$args` are the case's arguments taken from it.
#[doc(hidden)]
#[macro_export]
macro_rules! conformance_cases {
    ($setup:expr; $suite:ident; |$fixture:ident| $args:tt; $($case:ident),+ $(,)?) => {$(
        #[tokio::test]
        async fn $case() {
            let $fixture: $crate::Fixture = $setup;
            $crate::$suite::$case $args.await;
        }
    )+};
}
