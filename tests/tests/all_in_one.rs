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

/// The binaries the tests spawn are built from the current sources: `workspace_bin`
/// brings them up to date first, so none is older than a file cargo's dep-info says it
/// was built from.
#[test]
fn spawned_binaries_are_never_older_than_their_sources() {
    for name in [
        "adk-server",
        "adk-session-server",
        "adk-artifact-server",
        "adk-runner-server",
    ] {
        let binary = adk_testkit::workspace_bin(name);
        let built = std::fs::metadata(&binary)
            .and_then(|m| m.modified())
            .expect("the binary's mtime");
        let dep_info = std::fs::read_to_string(binary.with_extension("d")).expect("cargo's dep-info of the binary");
        let (_, sources) = dep_info.split_once(": ").expect("`binary: sources`");
        let sources: Vec<&str> = sources.split_whitespace().collect();
        assert!(sources.iter().any(|s| s.ends_with("main.rs")), "{name}: {sources:?}");
        for source in sources {
            let Ok(changed) = std::fs::metadata(source).and_then(|m| m.modified()) else {
                continue; // gone since the build: cargo rebuilds then, and so did workspace_bin
            };
            assert!(changed <= built, "{name} is older than {source}");
        }
    }
}
