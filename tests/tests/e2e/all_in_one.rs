//! `adk-server`, the all-in-one binary: zero setup (embedded memory store) and
//! every implemented service on one port.

use adk_grpc_core::ArtifactService;
use adk_grpc_e2e::{connect, connect_artifacts};
use adk_grpc_testkit::artifact_conformance::ArtifactLimits;
use adk_grpc_testkit::{Fixture, ServiceProcess, Shared, shared};
use std::sync::Arc;

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

/// An `adk-server` started once for the cases of a module that share it.
async fn server(shared: &'static Shared<ServiceProcess>, args: Vec<String>) -> Arc<ServiceProcess> {
    shared
        .get_or_start(|| async move { ServiceProcess::spawn("adk-server", &args, &[]).await })
        .await
}

mod serves_sessions_from_the_embedded_store_with_no_setup {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::session_conformance_tests!({
        let server = server(&SERVER, Vec::new()).await;
        Fixture::sessions(connect(&server).await).keeping(server)
    });
}

mod serves_sessions_from_redis_on_request {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::session_conformance_tests!({
        let redis = shared::redis().await;
        let server = server(&SERVER, vec!["--store-url".into(), redis.url()]).await;
        Fixture::sessions(connect(&server).await).keeping(server).keeping(redis)
    });
}

mod serves_artifacts_next_to_sessions_from_the_embedded_store {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::artifact_conformance_tests!({
        let server = server(&SERVER, artifact_args()).await;
        let artifacts = connect_artifacts(&server).await;
        artifacts.ping().await.expect("the artifact service reports SERVING");
        Fixture::artifacts(artifacts, ARTIFACT_LIMITS).keeping(server)
    });
    mod and_its_sessions {
        use super::*;
        adk_grpc_testkit::session_conformance_tests!({
            let server = server(&SERVER, artifact_args()).await;
            Fixture::sessions(connect(&server).await).keeping(server)
        });
    }
}

mod serves_artifacts_from_redis_on_request {
    use super::*;
    static SERVER: Shared<ServiceProcess> = Shared::new();
    adk_grpc_testkit::artifact_conformance_tests!({
        let redis = shared::redis().await;
        let mut args = vec!["--store-url".into(), redis.url()];
        args.extend(artifact_args());
        let server = server(&SERVER, args).await;
        Fixture::artifacts(connect_artifacts(&server).await, ARTIFACT_LIMITS)
            .keeping(server)
            .keeping(redis)
    });
}

/// DeleteSession on adk-server deletes the session's artifacts, from the embedded store and from Redis.
mod delete_session_deletes_its_artifacts {
    use super::*;

    async fn fixture(store_url: String) -> Fixture {
        let mut args = vec!["--store-url".into(), store_url];
        args.extend(artifact_args());
        let server = ServiceProcess::spawn("adk-server", &args, &[]).await;
        Fixture::sessions(connect(&server).await)
            .with_artifacts(Arc::new(connect_artifacts(&server).await), ARTIFACT_LIMITS)
            .keeping(server)
    }

    mod from_the_embedded_store {
        use super::*;
        adk_grpc_testkit::session_delete_conformance_tests!(fixture("memory://".into()).await);
    }

    mod from_redis {
        use super::*;
        adk_grpc_testkit::session_delete_conformance_tests!({
            let redis = shared::redis().await;
            fixture(redis.url()).await.keeping(redis)
        });
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
        let binary = adk_grpc_testkit::workspace_bin(name);
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
