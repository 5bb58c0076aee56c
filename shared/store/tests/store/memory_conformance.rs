//! The MemoryService conformance suite: the core service (`CoreMemoryService`, every
//! rule) over every backend (memory, Redis, a 3-node Redis Cluster, one with replicas,
//! and a minimal backend written here to show a new one needs no rule), and what only
//! Redis can get wrong: index keys left behind by deletes and replacements, and where
//! the keys live.

use adk_grpc_core::memory::{
    AddMemoryRequest, DeleteMemoryRequest, IndexedEntry, MemoryBackend, MemoryId, MemoryScope, Postings, QueryTerms,
};
use adk_grpc_core::{CoreMemoryService, MemoryEntry, MemoryService};
use adk_grpc_store::{InMemoryMemoryBackend, RedisMemoryBackend, StoreConfig};
use adk_grpc_testkit::memory_conformance::ConceptEmbedder;
use adk_grpc_testkit::{Fixture, shared};
use adk_grpc_testkit::{RedisServer, unique_prefix};
use redis::AsyncCommands;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

async fn connect(url: &str) -> CoreMemoryService<RedisMemoryBackend> {
    let backend = RedisMemoryBackend::connect(url, StoreConfig::default())
        .await
        .expect("connect to test redis");
    CoreMemoryService::new(backend)
}

mod memory_backend_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!(Fixture::memory(CoreMemoryService::new(InMemoryMemoryBackend::new())));
    adk_grpc_testkit::semantic_memory_conformance_tests!(Fixture::memory(
        CoreMemoryService::new(InMemoryMemoryBackend::new()).with_embedders(concept_embedders())
    ));
}

mod redis_backend_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!({
        let server = shared::redis().await;
        Fixture::memory(connect(&server.url()).await).keeping(server)
    });
    adk_grpc_testkit::semantic_memory_conformance_tests!({
        let server = shared::redis().await;
        Fixture::memory(connect(&server.url()).await.with_embedders(concept_embedders())).keeping(server)
    });
}

mod cluster_backend_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!({
        let cluster = shared::cluster().await;
        Fixture::memory(connect(&cluster.url()).await).keeping(cluster)
    });
    adk_grpc_testkit::semantic_memory_conformance_tests!({
        let cluster = shared::cluster().await;
        Fixture::memory(connect(&cluster.url()).await.with_embedders(concept_embedders())).keeping(cluster)
    });
}

mod replicas_search_what_the_other_wrote {
    use super::*;
    use adk_grpc_testkit::memory_conformance::another_instances_writes_are_searched_by_meaning_at_once as case;

    #[tokio::test]
    async fn memory() {
        let backend = InMemoryMemoryBackend::new();
        let replica = || CoreMemoryService::new(backend.clone()).with_embedders(concept_embedders());
        case(&replica(), &replica()).await;
    }

    #[tokio::test]
    async fn redis() {
        let server = shared::redis().await;
        let replica = || async { connect(&server.url()).await.with_embedders(concept_embedders()) };
        case(&replica().await, &replica().await).await;
    }

    #[tokio::test]
    async fn cluster() {
        let cluster = shared::cluster().await;
        let replica = || async { connect(&cluster.url()).await.with_embedders(concept_embedders()) };
        case(&replica().await, &replica().await).await;
    }
}

/// Every write waits for the replica (`auto`); the rules are the same.
mod cluster_with_replicas_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!({
        let cluster = shared::cluster_with_replicas().await;
        Fixture::memory(connect(&cluster.url()).await).keeping(cluster)
    });
}

/// Replacing and deleting entries removes their postings: once a user's memories
/// are all gone, only the (zeroed) stats key of the user is left, and every key of
/// the user carries the user's hash tag.
#[tokio::test]
async fn redis_deletes_leave_no_index_behind() {
    let server = RedisServer::start().await;
    let svc = connect(&server.url()).await;
    let app = unique_prefix("mem-keys");
    let entry = |id: &str, text: &str| adk_grpc_core::MemoryEntry {
        id: id.into(),
        content: adk_grpc_core::Content::new("user").with_text(text),
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
    // The index keeps stems ("pears" is "pear").
    let expected = ["banana", "pear"].map(|t| format!("adk:memterm:{{{app}:u}}:{t}"));
    assert!(keys.contains(&expected[0]) && keys.contains(&expected[1]), "{keys:?}");
    assert!(
        !keys.iter().any(|k| k.ends_with(":appl")),
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
    let written = [("n", 0), ("len", 0), ("w", 6)].map(|(field, value)| (field.to_string(), value));
    assert_eq!(
        stats,
        HashMap::from(written),
        "2 added, 1 replaced (removed and added), 2 deleted"
    );
}

fn concept_embedders() -> adk_grpc_core::memory::Embedders {
    let embedder: std::sync::Arc<dyn adk_grpc_core::memory::Embedder> = std::sync::Arc::new(ConceptEmbedder);
    adk_grpc_core::memory::Embedders::from([("*".to_string(), embedder)])
}

// ---------- a new backend needs no rule ----------

/// A backend as small as one can be: each user's entries in a map behind a lock,
/// stored as given. It keeps no inverted index (postings and vectors are read by
/// scanning the user's entries) and knows no rule - no validation, no scope check, no
/// id, no metadata, no tokenizing, no ranking, no embedding - yet the core service over
/// it passes the whole conformance suite, the semantic cases too.
#[derive(Default)]
struct MapBackend {
    users: Mutex<HashMap<MemoryScope, BTreeMap<String, IndexedEntry>>>,
    /// Writes of any user: a version that moves more often than one user's own would
    /// only make the core read vectors again more often.
    writes: AtomicU64,
}

impl MapBackend {
    fn lock(&self) -> MutexGuard<'_, HashMap<MemoryScope, BTreeMap<String, IndexedEntry>>> {
        self.users.lock().unwrap()
    }
}

#[async_trait::async_trait]
impl MemoryBackend for MapBackend {
    async fn upsert(&self, scope: &MemoryScope, entries: Vec<IndexedEntry>) -> adk_grpc_core::Result<()> {
        let mut users = self.lock();
        // Raised under the lock, with the write: a version read before it pairs with
        // the entries before it.
        self.writes.fetch_add(1, Ordering::SeqCst);
        let user = users.entry(scope.clone()).or_default();
        for indexed in entries {
            user.insert(indexed.entry.id.clone(), indexed);
        }
        Ok(())
    }

    async fn postings(&self, scope: &MemoryScope, terms: &QueryTerms) -> adk_grpc_core::Result<Postings> {
        let users = self.lock();
        let Some(user) = users.get(scope) else {
            return Ok(Postings::default());
        };
        let postings = terms.iter().map(|term| {
            let holding = user
                .values()
                .filter_map(|e| Some((e.entry.id.clone(), *e.term_counts.get(term)?, e.length)));
            holding.collect()
        });
        Ok(Postings {
            entries: user.len() as u64,
            total_length: user.values().map(|e| u64::from(e.length)).sum(),
            writes: self.writes.load(Ordering::SeqCst),
            terms: postings.collect(),
        })
    }

    async fn vectors(&self, scope: &MemoryScope) -> adk_grpc_core::Result<Vec<(String, Vec<f32>)>> {
        let users = self.lock();
        let entries = users.get(scope).into_iter().flat_map(|user| user.values());
        Ok(entries
            .filter_map(|e| Some((e.entry.id.clone(), e.embedding.clone()?)))
            .collect())
    }

    async fn fetch(&self, scope: &MemoryScope, ids: &[MemoryId]) -> adk_grpc_core::Result<Vec<MemoryEntry>> {
        let users = self.lock();
        let Some(user) = users.get(scope) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| Some(user.get(id.as_str())?.entry.clone()))
            .collect())
    }

    async fn remove(&self, scope: &MemoryScope, id: &MemoryId) -> adk_grpc_core::Result<bool> {
        let mut users = self.lock();
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(users
            .get_mut(scope)
            .is_some_and(|user| user.remove(id.as_str()).is_some()))
    }
}

mod a_backend_that_only_stores_conforms {
    use super::*;
    adk_grpc_testkit::memory_conformance_tests!(Fixture::memory(CoreMemoryService::new(MapBackend::default())));
    adk_grpc_testkit::semantic_memory_conformance_tests!(Fixture::memory(
        CoreMemoryService::new(MapBackend::default()).with_embedders(concept_embedders())
    ));
}

/// The core stores an id given twice in one add once, as its last entry: the embedding
/// model is asked for that entry's text only.
#[tokio::test]
async fn an_id_given_twice_is_embedded_once() {
    #[derive(Default)]
    struct Recording(Mutex<Vec<String>>);
    #[async_trait::async_trait]
    impl adk_grpc_core::memory::Embedder for Recording {
        async fn embed(&self, texts: &[String]) -> adk_grpc_core::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().extend_from_slice(texts);
            Ok(texts.iter().map(|_| vec![1.0]).collect())
        }
    }
    let recording = std::sync::Arc::new(Recording::default());
    let embedder: std::sync::Arc<dyn adk_grpc_core::memory::Embedder> = recording.clone();
    let memories = CoreMemoryService::new(InMemoryMemoryBackend::new())
        .with_embedders(adk_grpc_core::memory::Embedders::from([("*".to_string(), embedder)]));
    let entry = |text: &str| MemoryEntry {
        id: "m".into(),
        content: adk_grpc_core::Content::new("user").with_text(text),
        ..Default::default()
    };
    let add = AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![entry("first draft"), entry("final text")],
        custom_metadata: HashMap::new(),
    };
    assert_eq!(memories.add_memory(add).await.unwrap(), ["m", "m"]);
    assert_eq!(*recording.0.lock().unwrap(), ["final text"]);
}

/// A backend without the generation and ingest methods (their defaults) answers
/// GenerateMemories and IngestEvents UNIMPLEMENTED, before any model is asked.
#[tokio::test]
async fn a_backend_without_generation_answers_unimplemented() {
    use adk_grpc_core::memory::{GenerateMemoriesRequest, GenerationConfig, IngestEventsRequest};
    use adk_grpc_core::{AdkError, Content, Event};
    let model = adk_grpc_models::OpenAiCompatible::new("http://127.0.0.1:9/v1", "unreachable").unwrap();
    let config = GenerationConfig {
        model: std::sync::Arc::new(model),
        topics: Vec::new(),
        examples: Vec::new(),
        ttl: None,
        ingest: Default::default(),
    };
    let memory = CoreMemoryService::new(MapBackend::default())
        .with_generators(HashMap::from([("*".to_string(), std::sync::Arc::new(config))]));
    let mut said = Event::new("inv").with_content(Content::new("user").with_text("I live in Paris"));
    said.id = "e1".into();
    let ingested = memory
        .ingest(IngestEventsRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            events: vec![said.clone()],
            ..Default::default()
        })
        .await;
    assert!(matches!(ingested, Err(AdkError::Unimplemented(_))), "{ingested:?}");
    let generated = memory
        .generate(GenerateMemoriesRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            events: vec![said],
            ..Default::default()
        })
        .await;
    assert!(matches!(generated, Err(AdkError::Unimplemented(_))), "{generated:?}");
}
