//! The MemoryService conformance suite against every backend (memory, Redis, a
//! 3-node Redis Cluster, one with replicas), and what only Redis can get wrong:
//! index keys left behind by deletes and replacements, and where the keys live.

use adk_core::MemoryService;
use adk_core::memory::{AddMemoryRequest, DeleteMemoryRequest};
use adk_store::{InMemoryMemoryService, RedisMemoryService, StoreConfig};
use adk_testkit::memory_conformance::{ConceptEmbedder, run_memory_conformance, run_semantic_memory_conformance};
use adk_testkit::{RedisCluster, RedisServer, unique_prefix};
use redis::AsyncCommands;
use std::collections::HashMap;

async fn connect(url: &str) -> RedisMemoryService {
    RedisMemoryService::connect(url, StoreConfig::default())
        .await
        .expect("connect to test redis")
}

#[tokio::test]
async fn memory_backend_conforms() {
    run_memory_conformance(&InMemoryMemoryService::new()).await;
}

#[tokio::test]
async fn redis_backend_conforms() {
    let server = RedisServer::start().await;
    run_memory_conformance(&connect(&server.url()).await).await;
}

#[tokio::test]
async fn cluster_backend_conforms() {
    let cluster = RedisCluster::start(3).await;
    run_memory_conformance(&connect(&cluster.url()).await).await;
}

/// Every write waits for the replica (`auto`); the rules are the same.
#[tokio::test]
async fn cluster_with_replicas_conforms() {
    let cluster = RedisCluster::start_with_replicas(3).await;
    run_memory_conformance(&connect(&cluster.url()).await).await;
}

/// Replacing and deleting entries removes their postings: once a user's memories
/// are all gone, only the (zeroed) stats key of the user is left, and every key of
/// the user carries the user's hash tag.
#[tokio::test]
async fn redis_deletes_leave_no_index_behind() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url()).await;
    let app = unique_prefix("mem-keys");
    let entry = |id: &str, text: &str| adk_core::MemoryEntry {
        id: id.into(),
        content: adk_core::Content::new("user").with_text(text),
        ..Default::default()
    };
    let add = |memories| AddMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memories,
        custom_metadata: HashMap::new(),
    };
    svc.add_memory(add(vec![entry("a", "apples and pears"), entry("b", "pears only")]))
        .await
        .unwrap();
    svc.add_memory(add(vec![entry("a", "bananas")])).await.unwrap();
    let mut conn = server.connection().await;
    let pattern = format!("adk:*{{{app}:u}}*");
    let mut keys: Vec<String> = conn.keys(&pattern).await.unwrap();
    keys.sort();
    let expected = ["bananas", "pears"].map(|t| format!("adk:memterm:{{{app}:u}}:{t}"));
    assert!(keys.contains(&expected[0]) && keys.contains(&expected[1]), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.ends_with(":apples")),
        "a replaced entry's words are unindexed: {keys:?}"
    );
    for id in ["a", "b"] {
        let delete = DeleteMemoryRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            memory_id: id.into(),
        };
        assert!(svc.delete(delete).await.unwrap());
    }
    let keys: Vec<String> = conn.keys(&pattern).await.unwrap();
    assert_eq!(keys, [format!("adk:memstats:{{{app}:u}}")]);
    let stats: HashMap<String, i64> = conn.hgetall(&keys[0]).await.unwrap();
    assert_eq!(stats, HashMap::from([("n".to_string(), 0), ("len".to_string(), 0)]));
}

fn concept_embedders() -> adk_core::memory::Embedders {
    let embedder: std::sync::Arc<dyn adk_core::memory::Embedder> = std::sync::Arc::new(ConceptEmbedder);
    adk_core::memory::Embedders::from([("*".to_string(), embedder)])
}

#[tokio::test]
async fn memory_backend_searches_by_meaning() {
    run_semantic_memory_conformance(&InMemoryMemoryService::new().with_embedders(concept_embedders())).await;
}

#[tokio::test]
async fn redis_backend_searches_by_meaning() {
    let server = RedisServer::start().await;
    run_semantic_memory_conformance(&connect(&server.url()).await.with_embedders(concept_embedders())).await;
}

#[tokio::test]
async fn cluster_backend_searches_by_meaning() {
    let cluster = RedisCluster::start(3).await;
    run_semantic_memory_conformance(&connect(&cluster.url()).await.with_embedders(concept_embedders())).await;
}
