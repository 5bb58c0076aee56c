//! `adk-server`, the all-in-one binary: zero setup (embedded memory store) and
//! every implemented service on one port.

use adk_core::ArtifactService;
use adk_e2e::{connect, connect_artifacts};
use adk_testkit::artifact_conformance::{ArtifactLimits, run_artifact_conformance, run_session_delete_conformance};
use adk_testkit::conformance::run_session_conformance;
use adk_testkit::{RedisServer, ServiceProcess};

/// Small artifact limits keep the suite's oversized and multi-chunk cases quick over gRPC.
const ARTIFACT_LIMITS: ArtifactLimits = ArtifactLimits {
    max_artifact_bytes: 2 * 1024 * 1024,
    chunk_bytes: 64 * 1024,
};

fn artifact_args() -> Vec<String> {
    vec![
        "--max-artifact-bytes".into(),
        ARTIFACT_LIMITS.max_artifact_bytes.to_string(),
        "--artifact-chunk-bytes".into(),
        ARTIFACT_LIMITS.chunk_bytes.to_string(),
    ]
}

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

#[tokio::test]
async fn serves_artifacts_next_to_sessions_from_the_embedded_store() {
    let server = ServiceProcess::spawn("adk-server", &artifact_args(), &[]).await;
    let artifacts = connect_artifacts(&server).await;
    artifacts.ping().await.expect("the artifact service reports SERVING");
    run_artifact_conformance(&artifacts, ARTIFACT_LIMITS).await;
    run_session_conformance(&connect(&server).await).await;
}

#[tokio::test]
async fn serves_artifacts_from_redis_on_request() {
    let redis = RedisServer::start().await;
    let mut args = vec!["--store-url".into(), redis.url()];
    args.extend(artifact_args());
    let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
    run_artifact_conformance(&connect_artifacts(&server).await, ARTIFACT_LIMITS).await;
}

/// DeleteSession on adk-server deletes the session's artifacts, from the embedded store and from Redis.
#[tokio::test]
async fn delete_session_deletes_its_artifacts() {
    let redis = RedisServer::start().await;
    for store_url in ["memory://".to_string(), redis.url()] {
        let mut args = vec!["--store-url".into(), store_url];
        args.extend(artifact_args());
        let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
        run_session_delete_conformance(
            &connect(&server).await,
            &connect_artifacts(&server).await,
            ARTIFACT_LIMITS,
        )
        .await;
    }
}
