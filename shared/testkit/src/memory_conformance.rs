//! The `MemoryService` conformance suite: every rule of `docs/semantics.md` (Memory)
//! as a check, run against the core service over each backend (memory, Redis, Redis
//! Cluster, a minimal one) and against the gRPC client, so they cannot drift apart.
//!
//! Every case uses its own app name, so the suite can share a store with other tests.

use crate::unique_prefix;
use adk_grpc_core::memory::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, MAX_ENTRIES_PER_ADD, MAX_QUERY_BYTES,
    SESSION_ID_METADATA_KEY, SearchMemoryRequest,
};
use adk_grpc_core::{AdkError, Content, Event, MemoryEntry, MemoryService};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use std::collections::HashMap;
use tonic::Code;

/// One `#[tokio::test]` per case of the memory suite, each on the [`crate::Fixture`]
/// `$setup` builds (an expression that may `.await`).
#[macro_export]
macro_rules! memory_conformance_tests {
    ($setup:expr) => {
        $crate::conformance_cases!($setup; memory_conformance; |fixture| (fixture.memory_service());
            search_ranks_matching_memories_best_first,
            search_limit_bounds_the_results,
            memories_never_cross_users_or_apps,
            entries_round_trip_and_get_ids,
            adding_an_id_again_replaces_the_memory,
            an_id_given_twice_in_one_add_is_stored_once,
            events_become_memories_once,
            words_are_found_in_their_other_forms,
            a_reply_is_found_by_what_it_answers,
            delete_removes_a_memory_from_search,
            queries_without_words_find_nothing,
            bad_input_is_rejected_and_changes_nothing,
            hostile_ids_and_unicode_words_stay_apart,
            concurrent_adds_are_all_found,
        );
    };
}

fn text_entry(id: &str, text: &str) -> MemoryEntry {
    MemoryEntry {
        id: id.to_string(),
        content: Content::new("user").with_text(text),
        ..Default::default()
    }
}

async fn add(svc: &dyn MemoryService, app: &str, user: &str, entries: Vec<MemoryEntry>) -> Vec<String> {
    let req = AddMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        memories: entries,
        custom_metadata: HashMap::new(),
    };
    svc.add_memory(req).await.expect("add memories")
}

fn search_request(app: &str, user: &str, query: &str) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: app.into(),
        user_id: user.into(),
        query: query.into(),
        limit: 0,
    }
}

/// The ids a search returns, best first.
async fn search_ids(svc: &dyn MemoryService, app: &str, user: &str, query: &str) -> Vec<String> {
    let found = svc.search(search_request(app, user, query)).await.expect("search");
    found.memories.into_iter().map(|m| m.id).collect()
}

pub async fn search_ranks_matching_memories_best_first(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-rank");
    add(
        svc,
        &app,
        "u",
        vec![
            text_entry("weather", "It rained all day in Lisbon"),
            text_entry("dog", "My dog Rex loves long walks; Rex is a beagle"),
            text_entry("cat", "The neighbour has a cat who hates my dog"),
            text_entry("food", "I had pasta for dinner"),
        ],
    )
    .await;
    // "rex" occurs twice in `dog` and nowhere else; "dog" in two entries.
    assert_eq!(
        search_ids(svc, &app, "u", "What is my dog Rex like?").await,
        ["dog", "cat"]
    );
    assert_eq!(search_ids(svc, &app, "u", "DINNER").await, ["food"], "case-insensitive");
    assert!(search_ids(svc, &app, "u", "spaceship").await.is_empty());
}

pub async fn search_limit_bounds_the_results(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-limit");
    let entries = (0..15).map(|i| text_entry(&format!("m{i:02}"), "tea time")).collect();
    add(svc, &app, "u", entries).await;
    assert_eq!(
        search_ids(svc, &app, "u", "tea").await.len(),
        10,
        "the default limit is 10"
    );
    let mut req = search_request(&app, "u", "tea");
    req.limit = 3;
    let found = svc.search(req).await.unwrap().memories;
    // Equal scores are ordered by id.
    let ids: Vec<_> = found.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["m00", "m01", "m02"]);
}

pub async fn memories_never_cross_users_or_apps(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-scope");
    let other_app = unique_prefix("mem-scope");
    add(
        svc,
        &app,
        "alice",
        vec![text_entry("secret", "alice's locker code is 4711")],
    )
    .await;
    assert_eq!(search_ids(svc, &app, "alice", "locker code").await, ["secret"]);
    assert!(search_ids(svc, &app, "bob", "locker code").await.is_empty());
    assert!(search_ids(svc, &other_app, "alice", "locker code").await.is_empty());
    // Bob deleting Alice's id deletes nothing of hers.
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: "bob".into(),
        memory_id: "secret".into(),
    };
    assert!(!svc.delete(delete).await.unwrap());
    assert_eq!(search_ids(svc, &app, "alice", "locker").await, ["secret"]);
}

pub async fn entries_round_trip_and_get_ids(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-trip");
    let timestamp = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
    let entry = MemoryEntry {
        id: String::new(),
        content: Content::new("model")
            .with_text("The meeting moved to Thursday")
            .with_inline_data("image/png", vec![1, 2, 3]),
        author: "planner".into(),
        timestamp: Some(timestamp),
        custom_metadata: HashMap::from([("source".to_string(), json!({"kind": "note", "n": 2}))]),
        fact: None,
    };
    let req = AddMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memories: vec![entry.clone()],
        custom_metadata: HashMap::from([
            ("source".to_string(), json!("request")),
            ("batch".to_string(), json!(7)),
        ]),
    };
    let ids = svc.add_memory(req).await.unwrap();
    assert_eq!(ids.len(), 1);
    assert!(!ids[0].is_empty(), "an entry without an id gets one");
    let found = svc
        .search(search_request(&app, "u", "thursday"))
        .await
        .unwrap()
        .memories;
    let mut expected = entry;
    expected.id = ids[0].clone();
    // The request's metadata is merged in; the entry's own keys win.
    expected.custom_metadata.insert("batch".into(), json!(7));
    assert_eq!(found, [expected]);
}

pub async fn adding_an_id_again_replaces_the_memory(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-replace");
    add(svc, &app, "u", vec![text_entry("m", "favourite colour is green")]).await;
    add(svc, &app, "u", vec![text_entry("m", "favourite colour is purple")]).await;
    assert!(
        search_ids(svc, &app, "u", "green").await.is_empty(),
        "old words are unindexed"
    );
    let found = svc
        .search(search_request(&app, "u", "favourite colour"))
        .await
        .unwrap()
        .memories;
    assert_eq!(found.len(), 1, "one memory per id");
    assert_eq!(found[0].content.text().as_deref(), Some("favourite colour is purple"));
}

pub async fn an_id_given_twice_in_one_add_is_stored_once(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-twice");
    let entries = vec![
        text_entry("m", "kayak trip"),
        text_entry("other", "kayak rental"),
        text_entry("m", "sailing trip"),
    ];
    assert_eq!(
        add(svc, &app, "u", entries).await,
        ["m", "other", "m"],
        "one id per entry, in request order"
    );
    let found = svc.search(search_request(&app, "u", "trip")).await.unwrap().memories;
    assert_eq!(found.len(), 1, "one memory per id: {found:?}");
    assert_eq!(
        found[0].content.text().as_deref(),
        Some("sailing trip"),
        "the last entry wins"
    );
    assert_eq!(
        search_ids(svc, &app, "u", "kayak").await,
        ["other"],
        "the first entry's words are unindexed"
    );

    let mut event = Event::new("inv").with_content(Content::new("user").with_text("canoe club"));
    event.id = "e".into();
    let req = AddEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: String::new(),
        events: vec![event.clone(), event],
        custom_metadata: HashMap::new(),
    };
    assert_eq!(svc.add_events(req).await.unwrap(), ["e", "e"]);
    let found = svc.search(search_request(&app, "u", "canoe")).await.unwrap().memories;
    assert_eq!(found.len(), 1, "an event given twice is one memory: {found:?}");
}

pub async fn events_become_memories_once(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-events");
    let timestamp = Utc.timestamp_opt(1_700_000_100, 0).unwrap();
    let mut told = Event::new("inv-1")
        .with_author("user")
        .with_content(Content::new("user").with_text("My sister lives in Oslo"));
    told.id = "e1".into();
    told.timestamp = timestamp;
    let mut answered = Event::new("inv-1")
        .with_author("assistant")
        .with_content(Content::new("model").with_text("Noted: Oslo"));
    answered.id = "e2".into();
    let mut no_content = Event::new("inv-1").with_author("assistant");
    no_content.id = "e3".into();
    let req = AddEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s1".into(),
        events: vec![told, answered, no_content],
        custom_metadata: HashMap::from([("topic".to_string(), json!("family"))]),
    };
    assert_eq!(svc.add_events(req.clone()).await.unwrap(), ["e1", "e2"]);
    assert_eq!(
        svc.add_events(req).await.unwrap(),
        ["e1", "e2"],
        "adding again is idempotent"
    );
    let found = svc
        .search(search_request(&app, "u", "sister oslo"))
        .await
        .unwrap()
        .memories;
    assert_eq!(found.len(), 2, "each event once: {found:?}");
    let first = &found[0];
    assert_eq!((first.id.as_str(), first.author.as_str()), ("e1", "user"));
    assert_eq!(first.timestamp, Some(timestamp));
    assert_eq!(
        first.custom_metadata,
        HashMap::from([
            (SESSION_ID_METADATA_KEY.to_string(), json!("s1")),
            ("topic".to_string(), json!("family")),
        ])
    );
}

pub async fn words_are_found_in_their_other_forms(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-stems");
    add(
        svc,
        &app,
        "u",
        vec![
            text_entry("adoption", "The adoption agency called back about the puppies"),
            text_entry("run", "I ran five miles"),
        ],
    )
    .await;
    assert_eq!(
        search_ids(svc, &app, "u", "When was the puppy adopted?").await,
        ["adoption"]
    );
    assert_eq!(
        search_ids(svc, &app, "u", "running").await,
        Vec::<String>::new(),
        "ran is not run"
    );
}

pub async fn a_reply_is_found_by_what_it_answers(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-context");
    let event = |id: &str, author: &str, text: &str| {
        let mut event = Event::new("inv-1")
            .with_author(author)
            .with_content(Content::new("user").with_text(text));
        event.id = id.into();
        event
    };
    let req = AddEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: "s1".into(),
        events: vec![
            event("asked", "Melanie", "Did you finish the pottery class?"),
            event("answered", "Caroline", "Yes, last week! I made a bowl."),
            event("later", "Melanie", "Lovely. See you Sunday."),
        ],
        custom_metadata: HashMap::new(),
    };
    svc.add_events(req).await.expect("add events");
    // The answer names the bowl, not the class: the question before it does.
    assert_eq!(
        search_ids(svc, &app, "u", "a bowl from the pottery class").await,
        ["answered", "asked", "later"],
        "the answer has the bowl and the question's words, the reply to it the bowl"
    );
    // On the words they share, the message that said them comes first, and what the reply
    // was found by is not in what is returned.
    let found = svc
        .search(search_request(&app, "u", "pottery class"))
        .await
        .unwrap()
        .memories;
    let ids: Vec<&str> = found.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["asked", "answered"]);
    assert_eq!(found[1].content.parts.len(), 1);
    assert_eq!(found[1].content.parts[0].text(), Some("Yes, last week! I made a bowl."));
}

pub async fn delete_removes_a_memory_from_search(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-delete");
    add(
        svc,
        &app,
        "u",
        vec![
            text_entry("a", "piano lessons on monday"),
            text_entry("b", "guitar lessons"),
        ],
    )
    .await;
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memory_id: "a".into(),
    };
    assert!(svc.delete(delete.clone()).await.unwrap());
    assert!(
        !svc.delete(delete).await.unwrap(),
        "deleting a missing memory succeeds with false"
    );
    assert!(search_ids(svc, &app, "u", "piano").await.is_empty());
    assert_eq!(search_ids(svc, &app, "u", "lessons").await, ["b"]);
}

pub async fn queries_without_words_find_nothing(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-empty");
    add(svc, &app, "u", vec![text_entry("a", "the and of it")]).await;
    for query in ["", "   ", "?!…", "the and of"] {
        assert!(search_ids(svc, &app, "u", query).await.is_empty(), "{query:?}");
    }
}

/// Expects `INVALID_ARGUMENT` naming `field`.
fn expect_invalid<T: std::fmt::Debug>(result: Result<T, AdkError>, field: &str) {
    match result {
        Err(e) => {
            assert_eq!(e.code(), Code::InvalidArgument, "{field}: {e}");
            assert!(e.to_string().contains(field), "message should name {field}: {e}");
        }
        Ok(v) => panic!("{field}: expected INVALID_ARGUMENT, got {v:?}"),
    }
}

pub async fn bad_input_is_rejected_and_changes_nothing(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-bad");
    add(svc, &app, "u", vec![text_entry("keep", "the keeper remembers")]).await;
    let adding = |memories: Vec<MemoryEntry>| AddMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memories,
        custom_metadata: HashMap::new(),
    };
    let mut bad_ids = adding(vec![text_entry("x", "keeper")]);
    bad_ids.app_name = String::new();
    expect_invalid(svc.add_memory(bad_ids).await, "app_name");
    let mut bad_user = adding(vec![text_entry("x", "keeper")]);
    bad_user.user_id = "a\nb".into();
    expect_invalid(svc.add_memory(bad_user).await, "user_id");
    // A bad entry anywhere in the request stores none of them.
    let mut no_parts = text_entry("y", "");
    no_parts.content.parts.clear();
    expect_invalid(
        svc.add_memory(adding(vec![text_entry("x", "keeper"), no_parts])).await,
        "memories[1].content",
    );
    expect_invalid(
        svc.add_memory(adding(vec![text_entry("bad\u{0}id", "keeper")])).await,
        "memories[0].id",
    );
    let mut long_author = text_entry("x", "keeper");
    long_author.author = "a".repeat(300);
    expect_invalid(svc.add_memory(adding(vec![long_author])).await, "memories[0].author");
    let mut empty_key = text_entry("x", "keeper");
    empty_key.custom_metadata.insert(String::new(), Value::Null);
    expect_invalid(
        svc.add_memory(adding(vec![empty_key])).await,
        "memories[0].custom_metadata",
    );
    let too_many = (0..=MAX_ENTRIES_PER_ADD)
        .map(|i| text_entry(&i.to_string(), "keeper"))
        .collect();
    expect_invalid(svc.add_memory(adding(too_many)).await, "memories");

    let mut no_id = Event::new("inv").with_content(Content::new("user").with_text("keeper"));
    no_id.id = String::new();
    let events = AddEventsRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        session_id: String::new(),
        events: vec![no_id],
        custom_metadata: HashMap::new(),
    };
    expect_invalid(svc.add_events(events.clone()).await, "events[0].id");
    let mut bad_session = events;
    bad_session.events.clear();
    bad_session.session_id = " ".into();
    expect_invalid(svc.add_events(bad_session).await, "session_id");

    let mut long_query = search_request(&app, "u", &"keeper ".repeat(MAX_QUERY_BYTES / 7 + 1));
    expect_invalid(svc.search(long_query.clone()).await, "query");
    long_query.query = "keeper".into();
    long_query.limit = 101;
    expect_invalid(svc.search(long_query).await, "limit");
    expect_invalid(svc.search(search_request(&app, "", "keeper")).await, "user_id");
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memory_id: String::new(),
    };
    expect_invalid(svc.delete(delete).await, "memory_id");

    assert_eq!(
        search_ids(svc, &app, "u", "keeper").await,
        ["keep"],
        "nothing stored changed"
    );
}

pub async fn hostile_ids_and_unicode_words_stay_apart(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-hostile");
    // Ids that would forge another user's hash tag or key if put into keys raw.
    let (user_a, user_b) = ("x}:{y", "x");
    add(svc, &app, user_a, vec![text_entry("m:1 {x}", "Café crème in Zürich")]).await;
    add(svc, &app, user_b, vec![text_entry("m", "tea in Zürich")]).await;
    assert_eq!(search_ids(svc, &app, user_a, "zürich café").await, ["m:1 {x}"]);
    assert_eq!(search_ids(svc, &app, user_b, "ZÜRICH").await, ["m"]);
    assert!(search_ids(svc, &app, user_b, "café").await.is_empty());
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: user_a.into(),
        memory_id: "m:1 {x}".into(),
    };
    assert!(svc.delete(delete).await.unwrap());
    assert_eq!(search_ids(svc, &app, user_b, "zürich").await, ["m"]);
}

pub async fn concurrent_adds_are_all_found(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-concurrent");
    let adds = (0..20).map(|i| {
        let app = app.clone();
        async move {
            add(
                svc,
                &app,
                "u",
                vec![text_entry(&format!("m{i:02}"), &format!("river number{i}"))],
            )
            .await;
        }
    });
    futures::future::join_all(adds).await;
    let mut req = search_request(&app, "u", "river");
    req.limit = 100;
    assert_eq!(svc.search(req).await.unwrap().memories.len(), 20);
    assert_eq!(search_ids(svc, &app, "u", "number7").await, ["m07"]);
}

// ---------- semantic search ----------

/// Two service instances over one store (two replicas): each keeps the users' vectors
/// between searches, yet what the other stores, replaces or deletes is searched at once.
/// Both must embed with [`ConceptEmbedder`].
pub async fn another_instances_writes_are_searched_by_meaning_at_once(
    reader: &dyn MemoryService,
    writer: &dyn MemoryService,
) {
    let app = unique_prefix("mem-replicas");
    add(writer, &app, "u", vec![text_entry("pet", "Rex is a beagle")]).await;
    assert_eq!(search_ids(reader, &app, "u", "my puppy").await, ["pet"]);
    add(
        writer,
        &app,
        "u",
        vec![text_entry("garage", "The automobile needs tyres")],
    )
    .await;
    assert_eq!(search_ids(reader, &app, "u", "car trouble").await, ["garage"], "added");
    add(writer, &app, "u", vec![text_entry("pet", "The umbrella is red")]).await;
    assert!(search_ids(reader, &app, "u", "my puppy").await.is_empty(), "replaced");
    assert_eq!(search_ids(reader, &app, "u", "storm").await, ["pet"], "replaced");
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memory_id: "pet".into(),
    };
    assert!(writer.delete(delete).await.unwrap());
    assert!(search_ids(reader, &app, "u", "storm").await.is_empty(), "deleted");
    assert_eq!(search_ids(reader, &app, "u", "vehicle").await, ["garage"]);
}

/// A deterministic embedding model for the semantic cases: one dimension per concept,
/// a text's vector counts the words of each concept it holds. Words of different
/// concepts never share a dimension, so a match by meaning is one without shared words.
pub struct ConceptEmbedder;

const CONCEPTS: [&[&str]; 3] = [
    &["dog", "puppy", "canine", "hound", "beagle"],
    &["car", "automobile", "vehicle", "tyres", "engine"],
    &["rain", "weather", "storm", "umbrella"],
];

#[async_trait::async_trait]
impl adk_grpc_core::memory::Embedder for ConceptEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, AdkError> {
        Ok(texts
            .iter()
            .map(|text| {
                // Whole words: the index's stems ("puppi") are not the concepts' words.
                let words: Vec<String> = text
                    .split(|c: char| !c.is_alphanumeric())
                    .map(str::to_lowercase)
                    .collect();
                CONCEPTS
                    .iter()
                    .map(|concept| words.iter().filter(|w| concept.contains(&w.as_str())).count() as f32)
                    .collect()
            })
            .collect())
    }
}

/// The semantic cases, one `#[tokio::test]` each, for a store whose apps (`*`) embed
/// with [`ConceptEmbedder`].
#[macro_export]
macro_rules! semantic_memory_conformance_tests {
    ($setup:expr) => {
        $crate::conformance_cases!($setup; memory_conformance; |fixture| (fixture.memory_service());
            memories_are_found_by_meaning_without_shared_words,
            keyword_and_meaning_matches_come_first,
            replaced_and_deleted_memories_leave_the_vector_search,
        );
    };
}

pub async fn memories_are_found_by_meaning_without_shared_words(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-meaning");
    add(
        svc,
        &app,
        "alice",
        vec![
            text_entry("pet", "Rex is a beagle who loves long walks"),
            text_entry("garage", "The automobile needs new tyres"),
            text_entry("other", "Dinner was pasta"),
        ],
    )
    .await;
    assert_eq!(search_ids(svc, &app, "alice", "my puppy").await, ["pet"]);
    assert_eq!(search_ids(svc, &app, "alice", "car trouble").await, ["garage"]);
    assert!(
        search_ids(svc, &app, "bob", "my puppy").await.is_empty(),
        "never another user's"
    );
}

pub async fn keyword_and_meaning_matches_come_first(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-fuse");
    add(
        svc,
        &app,
        "u",
        vec![
            text_entry("both", "my dog sleeps"),
            text_entry("meaning", "the puppy plays"),
            text_entry("word", "my keys are lost"),
        ],
    )
    .await;
    // "dog" shares a word with `both` only; by meaning it matches `both` and `meaning`.
    assert_eq!(search_ids(svc, &app, "u", "dog").await, ["both", "meaning"]);
}

pub async fn replaced_and_deleted_memories_leave_the_vector_search(svc: &dyn MemoryService) {
    let app = unique_prefix("mem-vectors");
    add(svc, &app, "u", vec![text_entry("m", "a beagle")]).await;
    assert_eq!(search_ids(svc, &app, "u", "puppy").await, ["m"]);
    add(svc, &app, "u", vec![text_entry("m", "an engine")]).await;
    assert!(
        search_ids(svc, &app, "u", "puppy").await.is_empty(),
        "the old vector is gone"
    );
    assert_eq!(search_ids(svc, &app, "u", "vehicle").await, ["m"]);
    let delete = DeleteMemoryRequest {
        app_name: app.clone(),
        user_id: "u".into(),
        memory_id: "m".into(),
    };
    assert!(svc.delete(delete).await.unwrap());
    assert!(search_ids(svc, &app, "u", "vehicle").await.is_empty());
}
