//! `adk-server`, the all-in-one binary: zero setup (embedded memory store) and
//! every implemented service on one port.

use adk_e2e::connect;
use adk_testkit::conformance::run_session_conformance;
use adk_testkit::{RedisServer, ServiceProcess};

#[tokio::test]
async fn serves_sessions_from_the_embedded_store_with_no_setup() {
    let server = ServiceProcess::spawn("adk-server", &[], &[]).await;
    run_session_conformance(&connect(&server).await).await;
}

#[tokio::test]
async fn serves_sessions_from_redis_on_request() {
    let redis = RedisServer::start().await;
    let server = ServiceProcess::spawn("adk-server", &["--store-url".into(), redis.url()], &[]).await;
    run_session_conformance(&connect(&server).await).await;
}
