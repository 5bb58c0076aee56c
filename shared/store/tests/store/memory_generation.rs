//! GenerateMemories over every store (memory, Redis, a 3-node Redis Cluster): the core
//! pipeline (extract under the app's topics, consolidate with related memories, commit
//! by a per-user version check) against a scripted model that speaks the real
//! OpenAI-compatible wire (`adk_grpc_models::testing::FakeServer`), answering each
//! request by what it asks, so concurrent generations get consistent answers.

use adk_grpc_core::memory::{
    GenerateMemoriesRequest, GeneratedMemory, GenerationConfig, Generators, ListRevisionsRequest, MemoryAction,
    MemoryExample, MemoryTopic, SearchMemoryRequest,
};
use adk_grpc_core::{AdkError, Clock, Content, CoreMemoryService, Event, MemoryBackend, MemoryService};
use adk_grpc_models::OpenAiCompatible;
use adk_grpc_models::testing::{FakeReply, FakeServer, RecordedRequest, openai};
use adk_grpc_store::{InMemoryMemoryBackend, RedisMemoryBackend, StoreConfig};
use adk_grpc_testkit::{shared, unique_prefix};
use serde_json::{Value, json};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// What the scripted model extracts from a transcript line holding the key:
/// (fact, topics).
const EXTRACTIONS: &[(&str, &str, &[&str])] = &[
    ("I live in Paris", "The user lives in Paris", &["USER_PERSONAL_INFO"]),
    ("I moved to Berlin", "The user lives in Berlin", &["USER_PERSONAL_INFO"]),
    ("I like green tea", "The user likes green tea", &["USER_PREFERENCES"]),
    ("I quit tea", "The user does not drink tea", &["USER_PREFERENCES"]),
    (
        "my dog Rex",
        "The user has a dog named Rex",
        &["USER_PERSONAL_INFO", "PETS"],
    ),
    // Under no topic the app has: extraction must drop it.
    ("sunny today", "It was sunny", &["WEATHER"]),
];

/// The scripted model: extraction answers [`EXTRACTIONS`] of the transcript's lines
/// (each citing its line's event id), whatever topics were asked (the core filters);
/// consolidation updates a memory saying where the user lives with a new place,
/// deletes "likes green tea" for "does not drink tea", skips a fact already
/// remembered word for word, and creates the rest.
fn scripted_model(request: &RecordedRequest) -> FakeReply {
    let body = request.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let text_of = |role: &str| {
        messages
            .iter()
            .find(|m| m["role"] == role)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (system, user) = (text_of("system"), text_of("user"));
    if system.starts_with("You extract memories") {
        let mut facts = Vec::new();
        for line in user.lines() {
            let id = line.trim_start_matches('[').split(']').next().unwrap_or_default();
            for (key, fact, topics) in EXTRACTIONS {
                if line.contains(key) {
                    facts.push(json!({"fact": fact, "topics": topics, "source_event_ids": [id]}));
                }
            }
        }
        // Slow (so is consolidation) so that concurrent generations all read before any commits.
        return FakeReply::json(openai::json_reply(&json!({ "facts": facts }))).delayed(Duration::from_millis(300));
    }
    let (existing, new) = user
        .strip_prefix("Existing memories:\n")
        .and_then(|rest| rest.split_once("\n\nNew facts:\n"))
        .expect("a consolidation request");
    let existing: Vec<Value> = serde_json::from_str(existing).unwrap();
    let new: Vec<Value> = serde_json::from_str(new).unwrap();
    let mut actions = Vec::new();
    for fact in new {
        let text = fact["fact"].as_str().unwrap();
        let same = |m: &&Value| m["fact"] == text;
        let lives = |m: &&Value| text.contains("lives in") && m["fact"].as_str().unwrap().contains("lives in");
        let contradicted = |m: &&Value| text.contains("not drink tea") && m["fact"].as_str().unwrap().contains("tea");
        if existing.iter().any(|m| same(&m)) {
            continue;
        } else if let Some(old) = existing.iter().find(|m| lives(m)) {
            actions.push(json!({"action": "UPDATE", "id": old["id"], "fact": text, "topics": fact["topics"]}));
        } else if let Some(old) = existing.iter().find(|m| contradicted(m)) {
            actions.push(json!({"action": "DELETE", "id": old["id"]}));
        } else {
            actions.push(json!({"action": "CREATE", "fact": text, "topics": fact["topics"]}));
        }
    }
    FakeReply::json(openai::json_reply(&json!({ "actions": actions }))).delayed(Duration::from_millis(300))
}

/// A scripted model for `app` (ttl one hour), the service over the backend, and the
/// clock it reads.
struct Setup {
    model: FakeServer,
    memory: Arc<dyn MemoryService>,
    clock: Clock,
    app: String,
    _keep: Box<dyn Any + Send + Sync>,
}

async fn setup<B: MemoryBackend>(backend: B, keep: Box<dyn Any + Send + Sync>) -> Setup {
    let model = FakeServer::start().await;
    model.answer_with(scripted_model);
    let app = unique_prefix("memgen");
    let llm = OpenAiCompatible::new(format!("{}/v1", model.url()), "gpt-test").unwrap();
    let config = GenerationConfig {
        model: Arc::new(llm),
        topics: Vec::new(),
        examples: vec![MemoryExample {
            conversation: "user: I am allergic to peanuts".into(),
            facts: vec![adk_grpc_core::memory::ExtractedFact {
                fact: "The user is allergic to peanuts".into(),
                topics: vec!["USER_PERSONAL_INFO".into()],
                source_event_ids: Vec::new(),
            }],
        }],
        ttl: Some(Duration::from_secs(3600)),
    };
    config.validate("generation").unwrap();
    let clock = Clock::manual();
    let generators = Generators::from([(app.clone(), Arc::new(config))]);
    let memory = CoreMemoryService::new(backend)
        .with_generators(generators)
        .with_clock(clock.clone());
    Setup {
        model,
        memory: Arc::new(memory),
        clock,
        app,
        _keep: keep,
    }
}

fn said(id: &str, text: &str) -> Event {
    let mut event = Event::new("inv")
        .with_author("user")
        .with_content(Content::new("user").with_text(text));
    event.id = id.to_string();
    event
}

impl Setup {
    fn request(&self, user: &str, events: Vec<Event>) -> GenerateMemoriesRequest {
        GenerateMemoriesRequest {
            app_name: self.app.clone(),
            user_id: user.into(),
            events,
            ..Default::default()
        }
    }

    async fn generate(&self, user: &str, events: Vec<Event>) -> Vec<GeneratedMemory> {
        self.memory.generate(self.request(user, events)).await.unwrap()
    }

    async fn search(&self, user: &str, query: &str) -> Vec<String> {
        let found = self
            .memory
            .search(SearchMemoryRequest {
                app_name: self.app.clone(),
                user_id: user.into(),
                query: query.into(),
                limit: 10,
            })
            .await
            .unwrap();
        found.memories.iter().map(|m| m.text()).collect()
    }
}

fn texts(changes: &[GeneratedMemory]) -> Vec<(MemoryAction, String)> {
    changes.iter().map(|c| (c.action, c.memory.text())).collect()
}

async fn extraction_keeps_only_the_topics_facts(s: Setup) {
    let changes = s
        .generate(
            "u",
            vec![said("e1", "I live in Paris"), said("e2", "It is sunny today")],
        )
        .await;
    assert_eq!(
        texts(&changes),
        [(MemoryAction::Created, "The user lives in Paris".to_string())]
    );
    let fact = changes[0].memory.fact.clone().unwrap();
    assert_eq!(fact.topics, ["USER_PERSONAL_INFO"]);
    assert_eq!(fact.revision, 1);
    assert_eq!(fact.source_event_ids, ["e1"]);
    assert_eq!(
        fact.expire_time,
        fact.create_time.map(|t| t + chrono::Duration::hours(1))
    );
    let asked = s.model.requests()[0].json();
    let prompt = asked["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("USER_PREFERENCES: "),
        "the managed topics are described: {prompt}"
    );
    assert!(
        prompt.contains("The user is allergic to peanuts"),
        "the few-shot example is shown"
    );
    // SearchMemory returns the fact (and stored it under its topics and revision).
    let found = s
        .memory
        .search(SearchMemoryRequest {
            app_name: s.app.clone(),
            user_id: "u".into(),
            query: "where does the user live? Paris".into(),
            limit: 0,
        })
        .await
        .unwrap();
    assert_eq!(found.memories.len(), 1);
    assert_eq!(found.memories[0], changes[0].memory);
    // A call's own topics replace the app's: only the pet fact, under the custom topic.
    let mut req = s.request("u2", vec![said("p1", "I live in Paris with my dog Rex")]);
    req.topics = vec![MemoryTopic {
        label: "PETS".into(),
        description: "The user's pets".into(),
    }];
    let changes = s.memory.generate(req).await.unwrap();
    assert_eq!(
        texts(&changes),
        [(MemoryAction::Created, "The user has a dog named Rex".to_string())]
    );
    assert_eq!(changes[0].memory.fact.as_ref().unwrap().topics, ["PETS"]);
    let prompt = s.model.last_request().json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("PETS: The user's pets") && !prompt.contains("USER_PREFERENCES"));
}

async fn a_contradicting_fact_updates_and_keeps_the_old_text_as_a_revision(s: Setup) {
    let created = s.generate("u", vec![said("a1", "I live in Paris")]).await;
    let id = created[0].memory.id.clone();
    s.clock.advance(Duration::from_secs(60));
    let updated = s.generate("u", vec![said("a2", "I moved to Berlin last week")]).await;
    assert_eq!(
        texts(&updated),
        [(MemoryAction::Updated, "The user lives in Berlin".to_string())]
    );
    assert_eq!(updated[0].memory.id, id, "the same memory, updated");
    let fact = updated[0].memory.fact.clone().unwrap();
    assert_eq!(
        (fact.revision, fact.source_event_ids.clone()),
        (2, vec!["a2".to_string()])
    );
    assert!(fact.update_time > fact.create_time, "{fact:?}");
    assert_eq!(s.search("u", "lives").await, ["The user lives in Berlin"]);
    let revisions = s
        .memory
        .revisions(ListRevisionsRequest {
            app_name: s.app.clone(),
            user_id: "u".into(),
            memory_id: id,
        })
        .await
        .unwrap();
    let history: Vec<(i64, &str, MemoryAction)> = revisions
        .iter()
        .map(|r| (r.revision, r.fact.as_str(), r.action))
        .collect();
    assert_eq!(
        history,
        [
            (1, "The user lives in Paris", MemoryAction::Created),
            (2, "The user lives in Berlin", MemoryAction::Updated)
        ]
    );
    assert_eq!(revisions[0].source_event_ids, ["a1"]);
}

async fn a_fact_asked_deleted_is_deleted(s: Setup) {
    let created = s.generate("u", vec![said("t1", "I like green tea")]).await;
    let deleted = s
        .generate("u", vec![said("t2", "I quit tea, green tea included")])
        .await;
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0].action, MemoryAction::Deleted);
    assert_eq!(deleted[0].memory.id, created[0].memory.id);
    assert!(s.search("u", "green tea").await.is_empty());
    let revisions = s
        .memory
        .revisions(ListRevisionsRequest {
            app_name: s.app.clone(),
            user_id: "u".into(),
            memory_id: created[0].memory.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        revisions.last().map(|r| (r.revision, r.action)),
        Some((2, MemoryAction::Deleted))
    );
}

async fn a_retried_generation_changes_nothing(s: Setup) {
    let events = vec![said("r1", "I live in Paris"), said("r2", "I like green tea")];
    let first = s.generate("u", events.clone()).await;
    assert_eq!(first.len(), 2);
    let asked = s.model.requests().len();
    let again = s.generate("u", events).await;
    assert!(again.is_empty(), "a retry generates nothing: {again:?}");
    assert_eq!(s.model.requests().len(), asked, "nor asks the model again");
    assert_eq!(s.search("u", "Paris tea").await.len(), 2);
}

async fn concurrent_generations_lose_nothing_and_duplicate_nothing(s: Setup) {
    s.generate("u", vec![said("s0", "I live in Paris")]).await;
    // Two sessions say the same thing and a third moves the user, at once: each generation
    // reads version 1, asks the model to extract and then to consolidate with the Paris
    // memory (both slow), and decides to create or update; one commits first, the others'
    // commits are refused and they decide again against what it stored.
    let a = s.generate("u", vec![said("s1", "I like green tea")]);
    let b = s.generate("u", vec![said("s2", "I like green tea, really")]);
    let c = s.generate("u", vec![said("s3", "I moved to Berlin")]);
    let (a, b, c) = tokio::join!(a, b, c);
    let changes: Vec<_> = [a, b, c].concat();
    assert_eq!(
        texts(&changes)
            .into_iter()
            .filter(|(action, _)| *action == MemoryAction::Created)
            .count(),
        1,
        "the tea fact is created once: {changes:?}"
    );
    let mut found = s.search("u", "user green tea lives").await;
    found.sort();
    assert_eq!(found, ["The user likes green tea", "The user lives in Berlin"]);
}

async fn ttl_expiry_hides_a_memory_from_search(s: Setup) {
    s.generate("u", vec![said("x1", "I live in Paris")]).await;
    assert_eq!(s.search("u", "Paris").await.len(), 1);
    // A call's own ttl wins over the app's.
    let mut short = s.request("u", vec![said("x2", "I like green tea")]);
    short.ttl_seconds = 60;
    s.memory.generate(short).await.unwrap();
    s.clock.advance(Duration::from_secs(120));
    assert_eq!(s.search("u", "Paris tea").await, ["The user lives in Paris"]);
    s.clock.advance(Duration::from_secs(3600));
    assert!(s.search("u", "Paris tea").await.is_empty());
}

async fn bad_requests_name_their_field_and_an_app_without_a_model_is_refused(s: Setup) {
    let field_of = |err: AdkError| match err {
        AdkError::InvalidArgument { field, .. } => field,
        other => panic!("not INVALID_ARGUMENT: {other:?}"),
    };
    let bad = [
        ("user_id", s.request("", Vec::new())),
        ("events[0].id", s.request("u", vec![said("", "I live in Paris")])),
        ("events", {
            let mut r = s.request("u", vec![said("b1", "I live in Paris")]);
            r.source_session_id = "s".into();
            r
        }),
        ("topics[0].label", {
            let mut r = s.request("u", Vec::new());
            r.topics = vec![MemoryTopic {
                label: "no spaces".into(),
                description: "d".into(),
            }];
            r
        }),
        ("topics[0].description", {
            let mut r = s.request("u", Vec::new());
            r.topics = vec![MemoryTopic {
                label: "PETS".into(),
                description: String::new(),
            }];
            r
        }),
        ("ttl_seconds", {
            let mut r = s.request("u", Vec::new());
            r.ttl_seconds = -1;
            r
        }),
    ];
    for (field, req) in bad {
        assert_eq!(field_of(s.memory.generate(req).await.unwrap_err()), field);
    }
    let mut other = s.request("u", vec![said("o1", "I live in Paris")]);
    other.app_name = "no-model-app".into();
    match s.memory.generate(other).await.unwrap_err() {
        AdkError::FailedPrecondition(message) => assert!(message.contains("\"no-model-app\""), "{message}"),
        err => panic!("not FAILED_PRECONDITION: {err:?}"),
    }
    let missing = s
        .memory
        .revisions(ListRevisionsRequest {
            app_name: s.app.clone(),
            user_id: "u".into(),
            memory_id: "nothing".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(missing, AdkError::NotFound(..)), "{missing:?}");
    assert!(s.model.requests().is_empty(), "nothing invalid reaches the model");
}

macro_rules! generation_tests {
    ($setup:expr) => {
        #[tokio::test]
        async fn extraction_keeps_only_the_topics_facts() {
            super::extraction_keeps_only_the_topics_facts($setup).await;
        }
        #[tokio::test]
        async fn a_contradicting_fact_updates_and_keeps_the_old_text_as_a_revision() {
            super::a_contradicting_fact_updates_and_keeps_the_old_text_as_a_revision($setup).await;
        }
        #[tokio::test]
        async fn a_fact_asked_deleted_is_deleted() {
            super::a_fact_asked_deleted_is_deleted($setup).await;
        }
        #[tokio::test]
        async fn a_retried_generation_changes_nothing() {
            super::a_retried_generation_changes_nothing($setup).await;
        }
        #[tokio::test]
        async fn concurrent_generations_lose_nothing_and_duplicate_nothing() {
            super::concurrent_generations_lose_nothing_and_duplicate_nothing($setup).await;
        }
        #[tokio::test]
        async fn ttl_expiry_hides_a_memory_from_search() {
            super::ttl_expiry_hides_a_memory_from_search($setup).await;
        }
        #[tokio::test]
        async fn bad_requests_name_their_field_and_an_app_without_a_model_is_refused() {
            super::bad_requests_name_their_field_and_an_app_without_a_model_is_refused($setup).await;
        }
    };
}

async fn redis_backend(url: &str) -> RedisMemoryBackend {
    RedisMemoryBackend::connect(url, StoreConfig::default())
        .await
        .expect("connect to test redis")
}

mod on_the_memory_store {
    use super::*;
    generation_tests!(setup(InMemoryMemoryBackend::new(), Box::new(())).await);
}

mod on_redis {
    use super::*;
    generation_tests!({
        let server = shared::redis().await;
        setup(redis_backend(&server.url()).await, Box::new(server)).await
    });
}

mod on_a_redis_cluster {
    use super::*;
    generation_tests!({
        let cluster = shared::cluster().await;
        setup(redis_backend(&cluster.url()).await, Box::new(cluster)).await
    });
}
