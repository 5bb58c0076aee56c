//! The ArtifactService conformance suite: the core service (`CoreArtifactService`, every
//! rule) over every backend (memory, Redis, a 3-node Redis Cluster, one with replicas, and
//! a minimal backend written here to show a new one needs no rule), and what only Redis can
//! get wrong: keys left behind by deletes and by failed, oversized or abandoned uploads,
//! and chunk sizes.

use adk_grpc_core::CoreSessionService;
use adk_grpc_core::artifact::{
    ArtifactBackend, ArtifactMetadata, ArtifactScope, CoreArtifactService, DeleteRequest, LoadRequest, NewVersion,
    StoredBytes, StoredName, UploadBody, UploadRequest, WriteOutcome, choose_version,
};
use adk_grpc_core::{AdkError, ArtifactService, ByteStream, SessionService};
use adk_grpc_store::{
    InMemoryArtifactBackend, InMemorySessionBackend, RedisArtifactBackend, RedisSessionBackend, StoreConfig, Stores,
};
use adk_grpc_testkit::artifact_conformance::ArtifactLimits;
use adk_grpc_testkit::{Fixture, RedisCluster, RedisServer, eventually, shared, unique_prefix};
use futures::{StreamExt, TryStreamExt, stream};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{sleep, timeout};

/// Small limits, so the multi-chunk and oversized cases stay cheap.
const LIMITS: ArtifactLimits = ArtifactLimits {
    max_artifact_bytes: 1024 * 1024,
    chunk_bytes: 64 * 1024,
};

fn config() -> StoreConfig {
    StoreConfig {
        max_artifact_bytes: LIMITS.max_artifact_bytes,
        artifact_chunk_bytes: LIMITS.chunk_bytes,
        ..Default::default()
    }
}

type RedisArtifacts = CoreArtifactService<RedisArtifactBackend>;

async fn connect(url: &str, config: StoreConfig) -> RedisArtifacts {
    adk_grpc_store::redis_artifacts(url, &config)
        .await
        .expect("connect to test redis")
}

/// The core service over Redis, with pending chunks that expire after `ttl`.
async fn connect_with_pending_ttl(url: &str, ttl: Duration) -> RedisArtifacts {
    let backend = RedisArtifactBackend::connect(url, &config())
        .await
        .expect("connect to test redis");
    CoreArtifactService::new(backend.with_pending_ttl(ttl), config().artifact_limits())
}

mod memory_backend_conforms {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!(Fixture::artifacts(
        adk_grpc_store::memory_artifacts(InMemoryArtifactBackend::new(), &config()),
        LIMITS
    ));
}

mod redis_backend_conforms {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!({
        let server = shared::redis().await;
        Fixture::artifacts(connect(&server.url(), config()).await, LIMITS).keeping(server)
    });
}

mod cluster_backend_conforms {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!({
        let cluster = shared::cluster().await;
        Fixture::artifacts(connect(&cluster.url(), config()).await, LIMITS).keeping(cluster)
    });
}

/// Every commit waits for the replica (`auto`); the rules are the same.
mod cluster_with_replicas_conforms {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!({
        let cluster = shared::cluster_with_replicas().await;
        Fixture::artifacts(connect(&cluster.url(), config()).await, LIMITS).keeping(cluster)
    });
}

/// In memory, DeleteSession reaches the artifact store it is linked to.
mod memory_session_delete {
    use super::*;
    adk_grpc_testkit::session_delete_conformance_tests!({
        let backend = InMemoryArtifactBackend::new();
        let artifacts = adk_grpc_store::memory_artifacts(backend.clone(), &config());
        Fixture::sessions(CoreSessionService::new(
            InMemorySessionBackend::new().with_artifacts(backend),
        ))
        .with_artifacts(Arc::new(artifacts), LIMITS)
    });
}

/// `Stores` gives a session and an artifact store that belong together, for every URL.
mod stores_in_memory {
    use super::*;
    adk_grpc_testkit::session_delete_conformance_tests!({
        let stores = Stores::open("memory://", config()).unwrap();
        Fixture::default()
            .with_sessions(stores.sessions().await.unwrap())
            .with_artifacts(stores.artifacts().await.unwrap(), LIMITS)
    });
}

mod stores_on_redis {
    use super::*;
    adk_grpc_testkit::session_delete_conformance_tests!({
        let server = shared::redis().await;
        let stores = Stores::open(&server.url(), config()).unwrap();
        Fixture::default()
            .with_sessions(stores.sessions().await.unwrap())
            .with_artifacts(stores.artifacts().await.unwrap(), LIMITS)
            .keeping(server)
    });
}

/// DeleteSession on Redis deletes the session's artifacts by itself: the session
/// store needs no artifact service, as when the two servers are separate processes.
mod redis_session_delete {
    use super::*;
    adk_grpc_testkit::session_delete_conformance_tests!({
        let server = shared::redis().await;
        let sessions = RedisSessionBackend::connect_service(&server.url(), config())
            .await
            .unwrap();
        Fixture::sessions(sessions)
            .with_artifacts(Arc::new(connect(&server.url(), config()).await), LIMITS)
            .keeping(server)
    });
}

mod cluster_session_delete {
    use super::*;
    adk_grpc_testkit::session_delete_conformance_tests!({
        let cluster = shared::cluster().await;
        let sessions = RedisSessionBackend::connect_service(&cluster.url(), config())
            .await
            .unwrap();
        Fixture::sessions(sessions)
            .with_artifacts(Arc::new(connect(&cluster.url(), config()).await), LIMITS)
            .keeping(cluster)
    });
}

/// DeleteSession leaves none of the session's artifact keys in Redis, the moment it returns.
async fn session_delete_leaves_no_artifact_keys(url: &str, node_urls: &[String]) {
    let sessions = RedisSessionBackend::connect_service(url, config()).await.unwrap();
    let artifacts = connect(url, config()).await;
    let app = unique_prefix("art-session-keys");
    let create = adk_grpc_core::CreateRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: Some("s".into()),
        ..Default::default()
    };
    sessions.create(create).await.unwrap();
    for name in ["a.bin", "dir/b:{x}.bin"] {
        for _ in 0..3 {
            artifacts
                .upload(upload_req(&app, "s", name), pieces(LIMITS.chunk_bytes * 5 / 2, 1000))
                .await
                .unwrap();
        }
    }
    assert!(
        keys_of_app(node_urls, &app).await.len() > 20,
        "the artifacts are stored"
    );
    let delete = adk_grpc_core::DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
    };
    sessions.delete(delete).await.unwrap();
    let keys = keys_of_app(node_urls, &app).await;
    assert!(keys.is_empty(), "keys left after DeleteSession: {keys:#?}");
}

#[tokio::test]
async fn redis_session_delete_leaves_no_artifact_keys() {
    let server = RedisServer::start().await;
    session_delete_leaves_no_artifact_keys(&server.url(), &[server.url()]).await;
}

#[tokio::test]
async fn cluster_session_delete_leaves_no_artifact_keys() {
    let cluster = RedisCluster::start(3).await;
    session_delete_leaves_no_artifact_keys(&cluster.url(), &cluster.node_urls()).await;
}

#[tokio::test]
async fn stores_open_the_store_urls() {
    let memory = Stores::open("memory://", config()).unwrap().artifacts().await.unwrap();
    memory.ping().await.unwrap();
    let server = RedisServer::start().await;
    let redis = Stores::open(&server.url(), config())
        .unwrap()
        .artifacts()
        .await
        .unwrap();
    redis.ping().await.unwrap();
    let err = Stores::open("mysql://x", config()).err().unwrap();
    assert!(matches!(err, AdkError::Config(_)), "{err:?}");
}

// ---------- helpers ----------

/// Every key of `app`, on every node, with its length in bytes for strings.
async fn keys_of_app(node_urls: &[String], app: &str) -> Vec<(String, Option<u64>)> {
    let mut found = Vec::new();
    for url in node_urls {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = adk_grpc_testkit::patient_connection(&client).await.unwrap();
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("adk:*{{{app}:*"))
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .unwrap();
            for key in keys {
                let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await.unwrap();
                let len = if kind == "string" {
                    Some(redis::cmd("STRLEN").arg(&key).query_async(&mut conn).await.unwrap())
                } else {
                    None
                };
                found.push((key, len));
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    found.sort();
    found
}

/// Waits up to 5 s for `app` to have no keys left (abandoned uploads are cleaned up by a background task).
async fn assert_no_keys_left(node_urls: &[String], app: &str, context: &str) {
    eventually(Duration::from_secs(5), || async {
        let keys = keys_of_app(node_urls, app).await;
        if keys.is_empty() {
            Ok(())
        } else {
            Err(format!("{context}: keys left behind: {keys:#?}"))
        }
    })
    .await
}

fn upload_req(app: &str, session: &str, name: &str) -> UploadRequest {
    UploadRequest {
        app_name: app.into(),
        user_id: "u".into(),
        session_id: session.into(),
        file_name: name.into(),
        mime_type: "application/octet-stream".into(),
        ..Default::default()
    }
}

fn pieces(total: usize, piece: usize) -> ByteStream {
    let bytes: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
    let pieces: Vec<Result<Vec<u8>, AdkError>> = bytes.chunks(piece).map(|p| Ok(p.to_vec())).collect();
    stream::iter(pieces).boxed()
}

/// Pieces, then an endless wait: an upload whose client stalls.
fn stalling(total: usize, piece: usize) -> ByteStream {
    pieces(total, piece).chain(stream::pending()).boxed()
}

// ---------- Redis-specific ----------

/// Saves, deletes and every kind of failed upload, then checks that nothing of the app is left in Redis.
async fn nothing_is_left_behind(svc: &RedisArtifacts, node_urls: &[String]) {
    let app = unique_prefix("art-leftovers");
    let chunk = LIMITS.chunk_bytes;
    // Versions of several chunks, in a session and in the user scope, with awkward names.
    let names = ["a.bin", "dir/b:{x}.bin", "user:c.bin"];
    for name in names {
        for _ in 0..3 {
            svc.upload(upload_req(&app, "s", name), pieces(chunk * 5 / 2, 1000))
                .await
                .unwrap();
        }
    }
    assert!(!keys_of_app(node_urls, &app).await.is_empty(), "the uploads are stored");

    // Failed uploads of existing and new names: a stream error, too many bytes,
    // a taken explicit version, text that is not UTF-8, a stalled client that gives up.
    for name in ["a.bin", "new.bin"] {
        let failing = pieces(chunk * 2, 1000).chain(stream::once(async { Err(AdkError::Cancelled("gone".into())) }));
        assert!(svc.upload(upload_req(&app, "s", name), failing.boxed()).await.is_err());
        let oversized = pieces(LIMITS.max_artifact_bytes as usize + 1, 4096);
        let err = svc.upload(upload_req(&app, "s", name), oversized).await.unwrap_err();
        assert!(matches!(err, AdkError::ResourceExhausted(..)), "{err:?}");
        let mut not_text = upload_req(&app, "s", name);
        not_text.is_text = true;
        let body = stream::iter([Ok(vec![b'a'; chunk * 2]), Ok(vec![0xff])]).boxed();
        assert!(matches!(
            svc.upload(not_text, body).await,
            Err(AdkError::InvalidArgument { .. })
        ));
        let stalled = timeout(
            Duration::from_millis(300),
            svc.upload(upload_req(&app, "s", name), stalling(chunk * 2, 1000)),
        );
        assert!(stalled.await.is_err(), "the stalled upload is abandoned");
    }
    let mut taken = upload_req(&app, "s", "a.bin");
    taken.version = Some(2);
    let err = svc.upload(taken, pieces(chunk * 2, 1000)).await.unwrap_err();
    assert!(matches!(err, AdkError::AlreadyExists(..)), "{err:?}");

    // One version at a time (latest, middle, first) for one name, all at once for the others.
    for version in [3, 2, 1] {
        let req = DeleteRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: "a.bin".into(),
            version: Some(version),
        };
        svc.delete(req).await.unwrap();
    }
    for name in &names[1..] {
        let req = DeleteRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: name.to_string(),
            version: None,
        };
        svc.delete(req).await.unwrap();
    }
    assert_no_keys_left(node_urls, &app, "after deleting everything and failed uploads").await;
}

#[tokio::test]
async fn redis_leaves_no_keys_behind() {
    let server = RedisServer::start().await;
    nothing_is_left_behind(&connect(&server.url(), config()).await, &[server.url()]).await;
}

#[tokio::test]
async fn cluster_leaves_no_keys_behind() {
    let cluster = RedisCluster::start(3).await;
    nothing_is_left_behind(&connect(&cluster.url(), config()).await, &cluster.node_urls()).await;
}

/// An upload whose body does not match its declared size fails and, by the time it
/// has failed, has deleted every pending chunk it wrote (no waiting for a background task).
async fn mismatched_sizes_leave_no_pending_chunks(svc: &RedisArtifacts, node_urls: &[String]) {
    let app = unique_prefix("art-declared");
    let chunk = LIMITS.chunk_bytes as u64;
    // Truncated after three full chunks were written, and overlong after two.
    for (declared, sent) in [(chunk * 4, chunk * 3 + 10), (chunk * 2 + 10, chunk * 3)] {
        let mut req = upload_req(&app, "s", "f.bin");
        req.size_hint = Some(declared);
        let err = svc.upload(req, pieces(sent as usize, 1000)).await.unwrap_err();
        assert!(matches!(err, AdkError::InvalidArgument { .. }), "{err:?}");
        assert!(err.to_string().contains(&declared.to_string()), "{err}");
        let keys = keys_of_app(node_urls, &app).await;
        assert!(
            keys.is_empty(),
            "declared {declared}, sent {sent}: keys left behind: {keys:#?}"
        );
    }
}

#[tokio::test]
async fn redis_mismatched_sizes_leave_no_pending_chunks() {
    let server = RedisServer::start().await;
    mismatched_sizes_leave_no_pending_chunks(&connect(&server.url(), config()).await, &[server.url()]).await;
}

#[tokio::test]
async fn cluster_mismatched_sizes_leave_no_pending_chunks() {
    let cluster = RedisCluster::start(3).await;
    mismatched_sizes_leave_no_pending_chunks(&connect(&cluster.url(), config()).await, &cluster.node_urls()).await;
}

/// An upload whose future is dropped mid-stream: its pending chunks exist while
/// it runs and are gone shortly after, long before their TTL.
#[tokio::test]
async fn a_dropped_upload_deletes_its_pending_chunks() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url(), config()).await;
    let app = unique_prefix("art-dropped");
    let nodes = [server.url()];
    let upload = svc.upload(upload_req(&app, "s", "f.bin"), stalling(LIMITS.chunk_bytes * 3, 1000));
    let watch = async {
        // While the upload waits for more bytes, its three full chunks are pending.
        let keys = eventually(Duration::from_secs(5), || async {
            let keys = keys_of_app(&nodes, &app).await;
            if keys.len() == 3 {
                Ok(keys)
            } else {
                Err(format!("pending chunks never appeared: {keys:?}"))
            }
        })
        .await;
        for (key, _) in &keys {
            assert!(key.starts_with("adk:artup:"), "{keys:?}");
            let ttl_ms: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut server.connection().await)
                .await
                .unwrap();
            // A crashed server's pending chunks go about a minute after the last piece, not an hour.
            assert!(
                (1..=60_000).contains(&ttl_ms),
                "{key} has the pending TTL of at most 60 s, got {ttl_ms} ms"
            );
        }
    };
    tokio::select! {
        result = upload => panic!("the stalled upload ended: {result:?}"),
        () = watch => {}
    }
    // The upload future is dropped here, mid-stream.
    assert_no_keys_left(&nodes, &app, "after dropping the upload").await;
}

/// A short pending TTL, so that the sliding-expiry tests take seconds: the renewal
/// looks every 1/6 of it, so an upload may pause about 830 ms between pieces.
const SHORT_PENDING_TTL: Duration = Duration::from_secs(1);

/// The pending chunk keys (`adk:artup:`) of `app`.
async fn pending_keys(node_urls: &[String], app: &str) -> Vec<String> {
    let keys = keys_of_app(node_urls, app).await.into_iter().map(|(key, _)| key);
    keys.filter(|key| key.starts_with("adk:artup:")).collect()
}

/// Waits up to `limit` for the pending keys of `app` to number `count`.
async fn wait_for_pending(node_urls: &[String], app: &str, count: usize, limit: Duration) {
    eventually(limit, || async {
        let keys = pending_keys(node_urls, app).await;
        if keys.len() == count {
            Ok(())
        } else {
            Err(format!("expected {count} pending keys, have {keys:?}"))
        }
    })
    .await
}

/// A client that sends slowly — small pieces, 50 ms apart, for 4 s: a storage chunk
/// fills only every 1.6 s, longer than the 1 s pending TTL — keeps its earlier chunks,
/// because every arriving piece slides the TTL, and its upload stores the whole body.
#[tokio::test]
async fn a_slow_upload_keeps_its_pending_chunks_alive() {
    let server = RedisServer::start().await;
    let svc = connect_with_pending_ttl(&server.url(), SHORT_PENDING_TTL).await;
    let app = unique_prefix("art-slow");
    const PIECE: usize = 2 * 1024;
    const PIECES: usize = 80;
    let body: Vec<u8> = (0..PIECE * PIECES).map(|i| (i % 241) as u8).collect();
    let slow = stream::iter(body.chunks(PIECE).map(<[u8]>::to_vec).collect::<Vec<_>>()).then(|piece| async move {
        // The client's pace, not a synchronisation.
        sleep(Duration::from_millis(50)).await;
        Ok(piece)
    });
    let saved = svc.upload(upload_req(&app, "s", "slow.bin"), slow.boxed()).await;
    assert_eq!(saved.expect("a slow but steady upload is stored").version, 1);
    let load = LoadRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: "slow.bin".into(),
        version: None,
    };
    let (_, stored) = svc.download(load, 0).await.unwrap();
    let stored: Vec<Vec<u8>> = stored.try_collect().await.unwrap();
    assert!(stored.concat() == body, "the whole body is stored");
}

/// An upload whose client stops sending (its server alive, the stream open) has its
/// pending chunks expire one TTL after the last piece; when the client resumes, the
/// upload fails with DEADLINE_EXCEEDED and stores nothing.
#[tokio::test]
async fn an_idle_upload_loses_its_pending_chunks_and_fails() {
    let server = RedisServer::start().await;
    let nodes = [server.url()];
    let svc = connect_with_pending_ttl(&server.url(), SHORT_PENDING_TTL).await;
    let app = unique_prefix("art-idle");
    let (resume, resumed) = tokio::sync::oneshot::channel::<()>();
    let rest = stream::once(async move {
        resumed.await.expect("the test resumes the client");
        Ok(vec![1u8; 10])
    });
    let body = pieces(LIMITS.chunk_bytes * 3, 1000).chain(rest).boxed();
    let upload = tokio::spawn({
        let (svc, req) = (svc.clone(), upload_req(&app, "s", "idle.bin"));
        async move { svc.upload(req, body).await }
    });
    wait_for_pending(&nodes, &app, 3, Duration::from_secs(5)).await;
    // The TTL is 1 s after the last piece (at most 1/6 more): well inside 5 s.
    wait_for_pending(&nodes, &app, 0, Duration::from_secs(5)).await;
    resume.send(()).unwrap();
    let err = upload
        .await
        .unwrap()
        .expect_err("the chunks sent before the pause are gone");
    assert!(matches!(err, AdkError::DeadlineExceeded(_)), "{err:?}");
    assert!(err.to_string().contains("paused"), "{err}");
    assert_no_keys_left(&nodes, &app, "after the idle upload failed").await;
}

/// A 20 MiB artifact with the default 1 MiB chunks is 20 keys of at most 1 MiB, and reads back whole.
#[tokio::test]
async fn large_artifacts_are_stored_in_bounded_chunks() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url(), StoreConfig::default()).await;
    let app = unique_prefix("art-large");
    const SIZE: usize = 20 * 1024 * 1024;
    let chunk = StoreConfig::default().artifact_chunk_bytes;
    svc.upload(upload_req(&app, "s", "big.bin"), pieces(SIZE, 100_000))
        .await
        .unwrap();

    let keys = keys_of_app(&[server.url()], &app).await;
    let chunks: Vec<&(String, Option<u64>)> = keys.iter().filter(|(k, _)| k.starts_with("adk:artchunk:")).collect();
    assert_eq!(chunks.len(), SIZE / chunk, "{keys:#?}");
    assert!(chunks.iter().all(|(_, len)| *len == Some(chunk as u64)), "{chunks:?}");
    let mut conn = server.connection().await;
    for (key, _) in &keys {
        let usage: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        // The allocator rounds a 1 MiB value up to its next size class (1.25 MiB with jemalloc).
        assert!(usage < 2 * chunk as u64, "{key} uses {usage} bytes");
    }

    let req = LoadRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: "big.bin".into(),
        version: None,
    };
    let (meta, body) = svc.download(req, 300_000).await.unwrap();
    assert_eq!(meta.size_bytes, SIZE as u64);
    let mut at = 0usize;
    let mut body = body;
    while let Some(piece) = body.try_next().await.unwrap() {
        assert!(piece.len() <= 300_000);
        assert!(
            piece.iter().enumerate().all(|(i, b)| *b == ((at + i) % 251) as u8),
            "bytes at {at}"
        );
        at += piece.len();
    }
    assert_eq!(at, SIZE);
}

/// A download whose version is deleted midway ends with NOT_FOUND rather than short or mixed bytes.
#[tokio::test]
async fn a_version_deleted_mid_download_ends_the_stream_with_not_found() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url(), config()).await;
    let app = unique_prefix("art-mid-delete");
    svc.upload(upload_req(&app, "s", "f.bin"), pieces(LIMITS.chunk_bytes * 4, 10_000))
        .await
        .unwrap();
    let load = LoadRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: "f.bin".into(),
        version: None,
    };
    let (_, mut body) = svc.download(load, LIMITS.chunk_bytes).await.unwrap();
    assert!(body.try_next().await.unwrap().is_some());
    let delete = DeleteRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s".into(),
        file_name: "f.bin".into(),
        version: None,
    };
    svc.delete(delete).await.unwrap();
    let err = body.try_next().await.unwrap_err();
    assert!(matches!(err, AdkError::NotFound(..)), "{err:?}");
}

// ---------- a new backend needs no rule ----------

/// A backend as small as one can be: a map behind a lock, storing what it is given. It
/// knows no rule — no validation, no scope, no limit, no error wording, no reference —
/// yet the core service over it passes the whole conformance suite.
#[derive(Default)]
struct MapBackend {
    names: std::sync::Mutex<std::collections::HashMap<StoredName, MapName>>,
}

#[derive(Default)]
struct MapName {
    /// The highest version the name ever had.
    last: i64,
    versions: std::collections::BTreeMap<i64, (ArtifactMetadata, Vec<u8>)>,
}

impl MapBackend {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<StoredName, MapName>> {
        self.names.lock().unwrap()
    }

    fn version(&self, name: &StoredName, version: Option<i64>) -> Option<(ArtifactMetadata, Vec<u8>)> {
        let names = self.lock();
        let versions = &names.get(name)?.versions;
        match version {
            Some(v) => versions.get(&v).cloned(),
            None => versions.values().next_back().cloned(),
        }
    }
}

#[async_trait::async_trait]
impl ArtifactBackend for MapBackend {
    async fn write(
        &self,
        name: &StoredName,
        new: NewVersion,
        mut body: UploadBody,
    ) -> adk_grpc_core::Result<WriteOutcome> {
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next_chunk().await? {
            bytes.extend(chunk);
        }
        let mut names = self.lock();
        let entry = names.entry(name.clone()).or_default();
        let outcome = choose_version(new.requested, entry.last, |v| entry.versions.contains_key(&v));
        if let WriteOutcome::Stored(v) = outcome {
            entry.last = entry.last.max(v);
            let metadata = new.metadata(name.file_name(), v, body.size());
            entry.versions.insert(v, (metadata, bytes));
        }
        Ok(outcome)
    }

    async fn metadata(
        &self,
        name: &StoredName,
        version: Option<i64>,
    ) -> adk_grpc_core::Result<Option<ArtifactMetadata>> {
        Ok(self.version(name, version).map(|(metadata, _)| metadata))
    }

    async fn read(
        &self,
        name: &StoredName,
        version: Option<i64>,
        piece_bytes: usize,
    ) -> adk_grpc_core::Result<Option<(ArtifactMetadata, StoredBytes)>> {
        Ok(self.version(name, version).map(|(metadata, bytes)| {
            let pieces: Vec<_> = bytes
                .chunks(piece_bytes)
                .map(|piece| Ok(Some(piece.to_vec())))
                .collect();
            (metadata, stream::iter(pieces).boxed())
        }))
    }

    async fn delete(&self, name: &StoredName, version: Option<i64>) -> adk_grpc_core::Result<()> {
        let mut names = self.lock();
        if let (Some(v), Some(entry)) = (version, names.get_mut(name)) {
            entry.versions.remove(&v);
            if !entry.versions.is_empty() {
                return Ok(());
            }
        }
        names.remove(name);
        Ok(())
    }

    async fn names(&self, scopes: &[ArtifactScope]) -> adk_grpc_core::Result<Vec<String>> {
        let names = self.lock();
        let stored = names
            .iter()
            .filter(|(name, entry)| !entry.versions.is_empty() && scopes.contains(name.scope()));
        Ok(stored.map(|(name, _)| name.file_name().to_string()).collect())
    }

    async fn versions(&self, name: &StoredName) -> adk_grpc_core::Result<Vec<i64>> {
        Ok(self
            .lock()
            .get(name)
            .map(|entry| entry.versions.keys().copied().collect())
            .unwrap_or_default())
    }
}

mod a_backend_that_only_stores_conforms {
    use super::*;
    adk_grpc_testkit::artifact_conformance_tests!(Fixture::artifacts(
        CoreArtifactService::new(MapBackend::default(), config().artifact_limits()),
        LIMITS
    ));
}
