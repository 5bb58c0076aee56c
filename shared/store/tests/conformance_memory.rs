//! The SessionService conformance suite against the in-memory backend.

use adk_store::InMemorySessionService;
use adk_testkit::conformance::run_session_conformance;

#[tokio::test]
async fn memory_backend_conforms() {
    run_session_conformance(&InMemorySessionService::new()).await;
}
