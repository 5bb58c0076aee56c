//! Each memory script reads exactly what its builder sends and, against a real Redis,
//! every input lands where the script means it to.

use super::*;
use crate::redis::script_args::check::assert_reads_what_is_sent;
use adk_grpc_testkit::RedisServer;
use redis::AsyncCommands;
use std::collections::HashMap;

fn user_keys() -> MemoryKeys {
    MemoryKeys {
        stats: "adk:memstats:{app:u}".into(),
        vectors: "adk:memvec:{app:u}".into(),
        entry_prefix: "adk:mem:{app:u}:".into(),
        term_prefix: "adk:memterm:{app:u}:".into(),
        generation: "adk:memgen:{app:u}".into(),
        revision_prefix: "adk:memrev:{app:u}:".into(),
        buffer: "adk:membuf:{app:u}".into(),
        buffer_order: "adk:membufq:{app:u}".into(),
    }
}

fn entry<'a>(id: &'a str, embedding: Option<&'a [f32]>, terms: &'a BTreeMap<String, u32>) -> StoredEntry<'a> {
    StoredEntry {
        id,
        payload: format!("payload of {id}").into_bytes(),
        embedding,
        length: terms.values().sum(),
        term_counts: terms,
    }
}

#[test]
fn every_memory_script_reads_exactly_what_its_builder_sends() {
    let keys = user_keys();
    let terms = BTreeMap::from([("a".to_string(), 1)]);
    let upsert = |entries| UpsertArgs { keys: &keys, entries };
    assert_reads_what_is_sent(
        "memory upsert",
        &upsert(Vec::new()),
        0,
        &upsert(vec![entry("e1", None, &terms)]),
    );
    let remove = RemoveArgs { keys: &keys, id: "e1" };
    assert_reads_what_is_sent("memory remove", &remove, 0, &remove);
    let events = ["ev1".to_string()];
    let commit = |entries, removals, revisions, event_ids| CommitArgs {
        keys: &keys,
        expected_version: 3,
        entries,
        removals,
        revisions,
        event_ids,
        unbuffered: event_ids,
    };
    assert_reads_what_is_sent(
        "memory generation commit",
        &commit(Vec::new(), Vec::new(), Vec::new(), &[]),
        0,
        &commit(
            vec![entry("e1", None, &terms)],
            vec!["e2"],
            vec![("e1", b"revision".to_vec())],
            &events,
        ),
    );
    let buffer = |events| BufferArgs { keys: &keys, events };
    assert_reads_what_is_sent(
        "memory ingest buffer",
        &buffer(Vec::new()),
        0,
        &buffer(vec![("ev1", b"event".to_vec())]),
    );
    let read = ReadBufferArgs { keys: &keys, limit: 5 };
    assert_reads_what_is_sent("memory ingest read", &read, 0, &read);
    let due = "adk:memdue:{app:0}";
    let claim = ClaimArgs {
        due,
        now: 1,
        claimed_until: 2,
        limit: 3,
    };
    assert_reads_what_is_sent("memory ingest claim", &claim, 0, &claim);
    let release = ReleaseArgs {
        due,
        user: "u",
        claimed_until: 2,
        next: None,
    };
    assert_reads_what_is_sent("memory ingest release", &release, 0, &release);
}

#[tokio::test]
async fn memory_scripts_write_each_input_where_it_belongs() {
    let server = RedisServer::start().await;
    let mut conn = server.connection().await;
    let scripts = Scripts::new();
    let keys = user_keys();
    // Lengths 3 and 1, two terms and one: a count in the wrong place shows.
    let (e1_terms, e2_terms) = (
        BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]),
        BTreeMap::from([("c".to_string(), 1)]),
    );
    let vector = [1.0f32, 2.0];
    let upsert = UpsertArgs {
        keys: &keys,
        entries: vec![entry("e1", Some(&vector), &e1_terms), entry("e2", None, &e2_terms)],
    };
    let stored: i64 = upsert
        .invocation(&scripts)
        .unwrap()
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    let e1: HashMap<String, Vec<u8>> = conn.hgetall("adk:mem:{app:u}:e1").await.unwrap();
    assert_eq!(e1["e"], b"payload of e1");
    assert_eq!(e1["len"], b"3");
    assert_eq!(e1["t"], b"a b");
    let vectors: HashMap<String, Vec<u8>> = conn.hgetall(&keys.vectors).await.unwrap();
    assert_eq!(vectors, HashMap::from([("e1".to_string(), vector_bytes(&vector))]));
    for (term, id, posting) in [("a", "e1", "2:3"), ("b", "e1", "1:3"), ("c", "e2", "1:1")] {
        let stored: Option<String> = conn.hget(format!("adk:memterm:{{app:u}}:{term}"), id).await.unwrap();
        assert_eq!(stored.as_deref(), Some(posting), "posting of {term} in {id}");
    }
    let stats: HashMap<String, String> = conn.hgetall(&keys.stats).await.unwrap();
    assert_eq!((stats["n"].as_str(), stats["len"].as_str()), ("2", "4"));

    let remove = RemoveArgs { keys: &keys, id: "e1" };
    let removed: i64 = remove
        .invocation(&scripts)
        .unwrap()
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert!(!conn.exists::<_, bool>("adk:mem:{app:u}:e1").await.unwrap());
    assert!(!conn.exists::<_, bool>("adk:memterm:{app:u}:a").await.unwrap());
    let vectors: HashMap<String, Vec<u8>> = conn.hgetall(&keys.vectors).await.unwrap();
    assert!(vectors.is_empty());
    let stats: HashMap<String, String> = conn.hgetall(&keys.stats).await.unwrap();
    assert_eq!((stats["n"].as_str(), stats["len"].as_str()), ("1", "1"));
    let again: i64 = remove
        .invocation(&scripts)
        .unwrap()
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(again, 0);
}
