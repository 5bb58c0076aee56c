//! Each session script reads exactly what its builder sends ([`check`]) and, against a
//! real Redis, every input lands where the script means it to (distinct values per
//! position, so a swapped pair shows).

use super::*;
use crate::redis::keys::{app_index_key, app_state_key};
use crate::redis::script_args::check::assert_reads_what_is_sent;
use adk_grpc_testkit::RedisServer;
use chrono::TimeZone;
use futures::StreamExt;
use redis::aio::{MultiplexedConnection, PubSub};
use redis::{AsyncCommands, FromRedisValue};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

// ---------- what each script reads ----------

fn fields(pairs: &[(&str, serde_json::Value)]) -> Fields {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn micros(us: i64, ns: u32) -> Micros {
    Micros {
        us: us.to_string(),
        ns: ns.to_string(),
    }
}

fn event(id: &str, micros: i64) -> Event {
    let mut event = Event::new("inv");
    event.id = id.to_string();
    event.timestamp = Utc.timestamp_micros(micros).unwrap();
    event
}

#[test]
fn every_script_reads_exactly_what_its_builder_sends() {
    let keys = SessionKeys::of("app", "alice", "s1");
    let fork = SessionKeys::of("app", "alice", "f1");
    let artifacts = ScopeKeys::of_session("app", "alice", "s1");
    let (none, some) = (Fields::new(), fields(&[("k", json!(1))]));
    let at = micros(1, 2);
    let events = [event("e1", 1)];
    let app = |fields| {
        Some(AppStateInScript {
            key: &keys.app_state,
            fields,
        })
    };
    let create = |pairs| CreateArgs {
        keys: &keys,
        app_index: "idx",
        app: app(pairs),
        created: &at,
        ttl_ms: 0,
        session_fields: pairs,
        user_fields: pairs,
    };
    assert_reads_what_is_sent("create", &create(&none), 0, &create(&some));
    let precondition = Precondition::LastSequence(0);
    let append = |pairs| AppendArgs {
        keys: &keys,
        app_index: "idx",
        lease: "lease",
        app: app(pairs),
        event_id: "e1",
        precondition: Some(&precondition),
        update: &at,
        event: b"event",
        event_micros: 1,
        window: &WindowUpdate::Keep,
        wake: true,
        session_fields: pairs,
        user_fields: pairs,
    };
    assert_reads_what_is_sent("append", &append(&none), 0, &append(&some));
    let read = ReadArgs {
        keys: &keys,
        recent: Some(1),
        after: None,
        window: false,
    };
    assert_reads_what_is_sent("read", &read, 0, &read);
    let drop_stale = DropStaleArgs {
        index: "idx",
        member: "m",
        score: 1.0,
    };
    assert_reads_what_is_sent("drop_stale", &drop_stale, 0, &drop_stale);
    let delete = DeleteArgs {
        keys: &keys,
        artifacts: &artifacts,
        app_index: "idx",
    };
    assert_reads_what_is_sent("delete", &delete, 0, &delete);
    let app_write = |fields| AppWriteArgs {
        key: &keys.app_state,
        app_name: "app",
        fields,
    };
    assert_reads_what_is_sent("app_write", &app_write(&none), 0, &app_write(&some));
    let fork_args = |events, state| ForkArgs {
        source: &keys,
        fork: &fork,
        app_index: "idx",
        up_to_sequence: 1,
        up_to_event_id: "e1",
        created: &at,
        updated: &at,
        window_start: 0,
        events,
        state,
    };
    assert_reads_what_is_sent("fork", &fork_args(&[], &none), 0, &fork_args(&events, &some));
    let wake = WakeArgs { events: &keys.events };
    assert_reads_what_is_sent("wake", &wake, 0, &wake);
    let run_mark = RunMarkArgs {
        keys: &keys,
        lease: "lease",
        owner: "e-1",
        event: b"bytes",
    };
    assert_reads_what_is_sent("run_mark", &run_mark, 0, &run_mark);
}

// ---------- each input lands where the script means it to ----------

struct Redis {
    // Stops the server when the test ends.
    server: RedisServer,
    conn: MultiplexedConnection,
    scripts: Scripts,
}

impl Redis {
    async fn start() -> Redis {
        let server = RedisServer::start().await;
        let conn = server.connection().await;
        Redis {
            server,
            conn,
            scripts: Scripts::new(),
        }
    }

    async fn run<T: FromRedisValue>(&mut self, args: &impl ScriptArgs<Scripts = Scripts>) -> T {
        let invocation = args.invocation(&self.scripts).unwrap();
        invocation.invoke_async(&mut self.conn).await.unwrap()
    }

    async fn hash(&mut self, key: &str) -> HashMap<String, String> {
        self.conn.hgetall(key).await.unwrap()
    }

    async fn score(&mut self, key: &str, member: &str) -> Option<f64> {
        self.conn.zscore(key, member).await.unwrap()
    }

    async fn exists(&mut self, key: &str) -> bool {
        self.conn.exists(key).await.unwrap()
    }

    async fn pttl(&mut self, key: &str) -> i64 {
        self.conn.pttl(key).await.unwrap()
    }

    /// Listens on `channel` (subscribed once this returns).
    async fn subscribe(&self, channel: &str) -> PubSub {
        let mut pubsub = self.server.client().get_async_pubsub().await.unwrap();
        pubsub.subscribe(channel).await.unwrap();
        pubsub
    }

    /// A session created by the create script as a standalone server would.
    async fn create(&mut self, keys: &SessionKeys, created_us: i64, ttl_ms: i64) {
        let (none, created) = (Fields::new(), micros(created_us, 0));
        let status: (String, String, HashMap<String, String>) = self
            .run(&CreateArgs {
                keys,
                app_index: &app_index_key(&keys.app_name),
                app: None,
                created: &created,
                ttl_ms,
                session_fields: &none,
                user_fields: &none,
            })
            .await;
        assert_eq!(status.0, "OK");
    }

    /// An event appended by the append script with no precondition; its sequence.
    async fn append(&mut self, keys: &SessionKeys, event: &Event, update_us: i64) -> u64 {
        let (none, update) = (Fields::new(), micros(update_us, 0));
        let (status, _, sequence): (String, Vec<u8>, u64) = self
            .run(&AppendArgs {
                keys,
                app_index: &app_index_key(&keys.app_name),
                lease: "adk:lease:unused",
                app: None,
                event_id: &event.id,
                precondition: None,
                update: &update,
                event: event.id.as_bytes(),
                event_micros: event.timestamp.timestamp_micros(),
                window: &WindowUpdate::Keep,
                wake: false,
                session_fields: &none,
                user_fields: &none,
            })
            .await;
        assert_eq!(status, "NEW");
        sequence
    }
}

/// The next message on `pubsub`: (channel, payload).
async fn next_message(pubsub: &mut PubSub) -> (String, String) {
    let message = tokio::time::timeout(Duration::from_secs(10), pubsub.on_message().next())
        .await
        .expect("no message within 10 s")
        .expect("the subscription ended");
    (message.get_channel_name().to_string(), message.get_payload().unwrap())
}

fn text_hash(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn create_writes_each_input_where_it_belongs() {
    let mut redis = Redis::start().await;
    let keys = SessionKeys::of("app", "alice", "s1");
    let app_index = app_index_key("app");
    // One, two and three pairs: a count in the wrong place misplaces pairs.
    let session = fields(&[("s", json!(1))]);
    let user = fields(&[("u1", json!("a")), ("u2", json!(2))]);
    let app = fields(&[("x1", json!(true)), ("x2", json!(null)), ("x3", json!(3))]);
    let args = CreateArgs {
        keys: &keys,
        app_index: &app_index,
        app: Some(AppStateInScript {
            key: &keys.app_state,
            fields: &app,
        }),
        created: &micros(1000, 7),
        ttl_ms: 60_000,
        session_fields: &session,
        user_fields: &user,
    };
    let mut app_changes = redis.subscribe(app_state::CHANNEL).await;
    let (status, expire, user_state): (String, String, HashMap<String, String>) = redis.run(&args).await;
    assert_eq!(status, "OK");
    assert!(!expire.is_empty(), "a TTL gives an expiry");
    let user_text = text_hash(&[("u1", "\"a\""), ("u2", "2")]);
    assert_eq!(user_state, user_text);
    let meta = redis.hash(&keys.meta).await;
    for (field, value) in [
        ("create_us", "1000"),
        ("create_ns", "7"),
        ("update_us", "1000"),
        ("update_ns", "7"),
        ("ttl_ms", "60000"),
        ("seq", "0"),
        ("expire_ms", expire.as_str()),
    ] {
        assert_eq!(meta.get(field).map(String::as_str), Some(value), "meta {field}");
    }
    assert_eq!(redis.hash(&keys.state).await, text_hash(&[("s", "1")]));
    assert_eq!(redis.hash(&keys.user_state).await, user_text);
    let app_text = text_hash(&[("x1", "true"), ("x2", "null"), ("x3", "3")]);
    assert_eq!(redis.hash(&keys.app_state).await, app_text);
    assert_eq!(redis.score(&keys.user_index, "s1").await, Some(1000.0));
    assert_eq!(redis.score(&app_index, "alice:s1").await, Some(1000.0));
    for key in [&keys.meta, &keys.state] {
        assert!(redis.pttl(key).await > 0, "{key} expires");
    }
    assert_eq!(redis.pttl(&keys.user_state).await, -1, "user state never expires");
    assert_eq!(
        next_message(&mut app_changes).await,
        (app_state::CHANNEL.into(), "app".into())
    );

    let again: (String, String, HashMap<String, String>) = redis.run(&args).await;
    assert_eq!(again.0, "EXISTS");
}

#[tokio::test]
async fn append_writes_each_input_where_it_belongs() {
    let mut redis = Redis::start().await;
    let keys = SessionKeys::of("app", "alice", "s1");
    let app_index = app_index_key("app");
    let lease = "adk:lease:{app:alice}:s1";
    redis.create(&keys, 1000, 60_000).await;
    let session = fields(&[("b", json!(5))]);
    let user = fields(&[("w1", json!(1)), ("w2", json!(2))]);
    let app = fields(&[("y1", json!(1)), ("y2", json!(2)), ("y3", json!(3))]);
    let update = micros(2000, 9);
    let first = Precondition::LastSequence(0);
    let args = |event_id: &'static str, precondition, window| AppendArgs {
        keys: &keys,
        app_index: &app_index,
        lease,
        app: Some(AppStateInScript {
            key: &keys.app_state,
            fields: &app,
        }),
        event_id,
        precondition,
        update: &update,
        event: b"EV",
        event_micros: 1500,
        window,
        wake: true,
        session_fields: &session,
        user_fields: &user,
    };
    let mut woken = redis.subscribe(watch_hub::APPENDED_CHANNEL).await;
    let mut app_changes = redis.subscribe(app_state::CHANNEL).await;
    let from = WindowUpdate::From { micros: 1500 };
    let reply: (String, Vec<u8>, u64) = redis.run(&args("e1", Some(&first), &from)).await;
    assert_eq!(reply, ("NEW".to_string(), Vec::new(), 1));

    let entries: redis::streams::StreamRangeReply = redis.conn.xrange_all(&keys.events).await.unwrap();
    assert_eq!(entries.ids.len(), 1);
    assert_eq!(entries.ids[0].id, "1-1");
    let stored: Vec<u8> = entries.ids[0].get("e").unwrap();
    assert_eq!(stored, b"EV\x80\x01\x01", "the event, then its sequence as field 16");
    assert_eq!(redis.hash(&keys.event_ids).await, text_hash(&[("e1", "1")]));
    assert_eq!(redis.score(&keys.event_times, "1").await, Some(1500.0));
    let meta = redis.hash(&keys.meta).await;
    for (field, value) in [
        ("seq", "1"),
        ("last_id", "e1"),
        ("update_us", "2000"),
        ("update_ns", "9"),
        ("window", "1"),
    ] {
        assert_eq!(meta.get(field).map(String::as_str), Some(value), "meta {field}");
    }
    assert_eq!(redis.hash(&keys.state).await, text_hash(&[("b", "5")]));
    assert_eq!(
        redis.hash(&keys.user_state).await,
        text_hash(&[("w1", "1"), ("w2", "2")])
    );
    let app_text = text_hash(&[("y1", "1"), ("y2", "2"), ("y3", "3")]);
    assert_eq!(redis.hash(&keys.app_state).await, app_text);
    assert_eq!(redis.score(&keys.user_index, "s1").await, Some(2000.0));
    assert_eq!(redis.score(&app_index, "alice:s1").await, Some(2000.0));
    assert!(
        redis.pttl(&keys.events).await > 0,
        "the TTL is renewed on the new stream"
    );
    assert_eq!(
        next_message(&mut woken).await,
        (watch_hub::APPENDED_CHANNEL.into(), keys.events.clone())
    );
    assert_eq!(
        next_message(&mut app_changes).await,
        (app_state::CHANNEL.into(), "app".into())
    );

    // Each precondition kind with its value; the lease is compared on the lease key.
    let keep = WindowUpdate::Keep;
    let stale: (String, Vec<u8>, u64) = redis.run(&args("e2", Some(&first), &keep)).await;
    assert_eq!(stale.0, "ABORTED");
    let after_e1 = Precondition::LastEventId("e1".into());
    let second: (String, Vec<u8>, u64) = redis.run(&args("e2", Some(&after_e1), &keep)).await;
    assert_eq!((second.0.as_str(), second.2), ("NEW", 2));
    let held = Precondition::LeaseHeldBy("owner".into());
    let () = redis.conn.set(lease, "other").await.unwrap();
    let lost: (String, Vec<u8>, u64) = redis.run(&args("e3", Some(&held), &keep)).await;
    assert_eq!(lost.0, "LEASE");
    let () = redis.conn.set(lease, "owner").await.unwrap();
    let third: (String, Vec<u8>, u64) = redis.run(&args("e3", Some(&held), &WindowUpdate::Reset)).await;
    assert_eq!((third.0.as_str(), third.2), ("NEW", 3));
    assert_eq!(redis.hash(&keys.meta).await["window"], "0", "a reset clears the window");

    let dup: (String, Vec<u8>, u64) = redis.run(&args("e1", None, &keep)).await;
    assert_eq!(dup, ("DUP".to_string(), b"EV\x80\x01\x01".to_vec(), 0));
}

#[tokio::test]
async fn read_applies_each_filter_it_is_given() {
    let mut redis = Redis::start().await;
    let keys = SessionKeys::of("app", "alice", "s1");
    redis.create(&keys, 1000, 0).await;
    let () = redis.conn.hset(&keys.state, "s", "1").await.unwrap();
    let () = redis.conn.hset(&keys.user_state, "u", "2").await.unwrap();
    let (e1, e2, e3) = (event("e1", 1500), event("e2", 1700), event("e3", 1900));
    for (event, update) in [(&e1, 2000), (&e2, 2100), (&e3, 2200)] {
        redis.append(&keys, event, update).await;
    }
    let () = redis.conn.hset(&keys.meta, "window", 3).await.unwrap();
    let read = |recent, after: Option<i64>, window| ReadArgs {
        keys: &keys,
        recent,
        after: after.map(|us| Utc.timestamp_micros(us).unwrap()),
        window,
    };
    // Each event's stored bytes start with its id (see `Redis::append`), and come with
    // the entry id of their sequence.
    let ids = |events: Vec<(String, Vec<u8>)>| -> Vec<String> {
        events
            .iter()
            .map(|(entry, bytes)| {
                let id = String::from_utf8_lossy(&bytes[..2]).into_owned();
                assert_eq!(format!("{}-1", &id[1..]), *entry, "the entry id of {id}");
                id
            })
            .collect()
    };

    let (meta, state, user, events): super::super::RawSnapshot = redis.run(&read(None, None, false)).await;
    assert_eq!(meta["seq"], "3");
    assert_eq!(state, text_hash(&[("s", "1")]));
    assert_eq!(user, text_hash(&[("u", "2")]));
    assert_eq!(ids(events), ["e1", "e2", "e3"]);
    let snapshot: super::super::RawSnapshot = redis.run(&read(Some(2), None, false)).await;
    assert_eq!(ids(snapshot.3), ["e2", "e3"], "the last N");
    let snapshot: super::super::RawSnapshot = redis.run(&read(None, Some(1600), false)).await;
    assert_eq!(ids(snapshot.3), ["e2", "e3"], "stamped at or after");
    let snapshot: super::super::RawSnapshot = redis.run(&read(Some(1), None, true)).await;
    assert_eq!(ids(snapshot.3), ["e3"], "the window, whatever N");

    let missing = SessionKeys::of("app", "alice", "nope");
    let none: Option<super::super::RawSnapshot> = redis
        .run(&ReadArgs {
            keys: &missing,
            recent: None,
            after: None,
            window: false,
        })
        .await;
    assert!(none.is_none());
}

#[tokio::test]
async fn drop_stale_removes_the_member_only_at_the_score_seen() {
    let mut redis = Redis::start().await;
    let () = redis.conn.zadd("idx", "m", 5).await.unwrap();
    let args = |score| DropStaleArgs {
        index: "idx",
        member: "m",
        score,
    };
    let kept: i64 = redis.run(&args(4.0)).await;
    assert_eq!((kept, redis.score("idx", "m").await), (0, Some(5.0)));
    let dropped: i64 = redis.run(&args(5.0)).await;
    assert_eq!((dropped, redis.score("idx", "m").await), (1, None));
}

#[tokio::test]
async fn a_run_mark_is_kept_after_the_last_sequence_under_the_lease_and_expires_with_the_session() {
    let mut redis = Redis::start().await;
    let keys = SessionKeys::of("app", "alice", "s1");
    let mark = |owner| RunMarkArgs {
        keys: &keys,
        lease: "adk:lease:s1",
        owner,
        event: b"position",
    };
    let missing: String = redis.run(&mark("e-1")).await;
    assert_eq!(missing, "NOTFOUND");
    redis.create(&keys, 1000, 60_000).await;
    redis.append(&keys, &event("e1", 1500), 2000).await;
    let () = redis.conn.set("adk:lease:s1", "e-1").await.unwrap();
    let refused: String = redis.run(&mark("e-other")).await;
    assert_eq!(refused, "LEASE");
    assert!(!redis.exists(&keys.run_marks).await, "a refused mark writes nothing");
    let kept: String = redis.run(&mark("e-1")).await;
    assert_eq!(kept, "OK");
    let marks: Vec<String> = redis.conn.lrange(&keys.run_marks, 0, -1).await.unwrap();
    assert_eq!(marks, ["1:position"], "after sequence 1, the log's last");
    let session_ttl = redis.pttl(&keys.meta).await;
    let marks_ttl = redis.pttl(&keys.run_marks).await;
    assert!(
        marks_ttl > 0 && (session_ttl - marks_ttl).abs() < 1000,
        "{marks_ttl} vs {session_ttl}"
    );
    let meta = redis.hash(&keys.meta).await;
    assert_eq!(meta["seq"], "1", "the log is unchanged");
}

#[tokio::test]
async fn delete_removes_the_session_its_entries_and_its_artifacts_only() {
    let mut redis = Redis::start().await;
    let (keys, other) = (
        SessionKeys::of("app", "alice", "s1"),
        SessionKeys::of("app", "alice", "s2"),
    );
    let app_index = app_index_key("app");
    redis.create(&keys, 1000, 0).await;
    redis.create(&other, 1000, 0).await;
    redis.append(&keys, &event("e1", 1500), 2000).await;
    let () = redis.conn.rpush(&keys.run_marks, "1:mark").await.unwrap();
    // One artifact `f` (version 1, one chunk) of each session, as `artifact::redis` stores it.
    let artifact_keys = |sid: &str| {
        let scope = format!("{{app:alice}}:{sid}");
        [
            format!("adk:artnames:{scope}"),
            format!("adk:artseq:{scope}:f"),
            format!("adk:artvers:{scope}:f"),
            format!("adk:artmeta:{scope}:1:f"),
            format!("adk:artchunk:{scope}:1:0:f"),
        ]
    };
    for sid in ["s1", "s2"] {
        let [names, seq, versions, meta, chunk] = artifact_keys(sid);
        let mut pipe = redis::pipe();
        pipe.sadd(&names, "f")
            .set(&seq, 1)
            .zadd(&versions, 1, 1)
            .hset(&meta, "chunks", 1)
            .set(&chunk, "bytes");
        let () = pipe.query_async(&mut redis.conn).await.unwrap();
    }
    let deleted: i64 = redis
        .run(&DeleteArgs {
            keys: &keys,
            artifacts: &ScopeKeys::of_session("app", "alice", "s1"),
            app_index: &app_index,
        })
        .await;
    assert_eq!(deleted, 1, "one artifact name");
    for key in [
        &keys.meta,
        &keys.events,
        &keys.event_ids,
        &keys.event_times,
        &keys.run_marks,
    ] {
        assert!(!redis.exists(key).await, "{key} is deleted");
    }
    for key in artifact_keys("s1") {
        assert!(!redis.exists(&key).await, "{key} is deleted");
    }
    assert_eq!(redis.score(&keys.user_index, "s1").await, None);
    assert_eq!(redis.score(&app_index, "alice:s1").await, None);
    assert!(redis.exists(&other.meta).await);
    for key in artifact_keys("s2") {
        assert!(redis.exists(&key).await, "{key} of the other session stays");
    }
    assert_eq!(redis.score(&keys.user_index, "s2").await, Some(1000.0));
    assert_eq!(redis.score(&app_index, "alice:s2").await, Some(1000.0));
}

#[tokio::test]
async fn app_write_writes_the_pairs_and_names_the_app() {
    let mut redis = Redis::start().await;
    let key = app_state_key("app");
    let values = fields(&[("a", json!(1)), ("b", json!("x"))]);
    let mut app_changes = redis.subscribe(app_state::CHANNEL).await;
    let status: String = redis
        .run(&AppWriteArgs {
            key: &key,
            app_name: "app",
            fields: &values,
        })
        .await;
    assert_eq!(status, "OK");
    assert_eq!(redis.hash(&key).await, text_hash(&[("a", "1"), ("b", "\"x\"")]));
    assert_eq!(
        next_message(&mut app_changes).await,
        (app_state::CHANNEL.into(), "app".into())
    );
}

#[tokio::test]
async fn fork_copies_the_prefix_and_writes_each_input_where_it_belongs() {
    let mut redis = Redis::start().await;
    let (source, fork) = (
        SessionKeys::of("app", "alice", "s1"),
        SessionKeys::of("app", "alice", "f1"),
    );
    let app_index = app_index_key("app");
    redis.create(&source, 1000, 60_000).await;
    let () = redis.conn.hset(&source.state, "src", "1").await.unwrap();
    let events = [event("e1", 1500), event("e2", 1700), event("e3", 1900)];
    for (event, update) in events.iter().zip([2000, 2100, 2200]) {
        redis.append(&source, event, update).await;
    }
    let state = fields(&[("k", json!(1))]);
    let (created, updated) = (micros(3000, 1), micros(2500, 2));
    let args = ForkArgs {
        source: &source,
        fork: &fork,
        app_index: &app_index,
        up_to_sequence: 2,
        up_to_event_id: "e2",
        created: &created,
        updated: &updated,
        window_start: 2,
        events: &events[..2],
        state: &state,
    };
    let (status, expire): (String, String) = redis.run(&args).await;
    assert_eq!(status, "OK");
    assert!(!expire.is_empty(), "the source's TTL");

    let copied: redis::streams::StreamRangeReply = redis.conn.xrange_all(&fork.events).await.unwrap();
    let copied: Vec<(String, Vec<u8>)> = copied
        .ids
        .iter()
        .map(|entry| (entry.id.clone(), entry.get("e").unwrap()))
        .collect();
    assert_eq!(
        copied,
        [
            ("1-1".to_string(), b"e1\x80\x01\x01".to_vec()),
            ("2-1".to_string(), b"e2\x80\x01\x02".to_vec())
        ]
    );
    assert_eq!(
        redis.hash(&fork.event_ids).await,
        text_hash(&[("e1", "1"), ("e2", "2")])
    );
    assert_eq!(redis.score(&fork.event_times, "1").await, Some(1500.0));
    assert_eq!(redis.score(&fork.event_times, "2").await, Some(1700.0));
    let meta = redis.hash(&fork.meta).await;
    for (field, value) in [
        ("create_us", "3000"),
        ("create_ns", "1"),
        ("update_us", "2500"),
        ("update_ns", "2"),
        ("seq", "2"),
        ("last_id", "e2"),
        ("ttl_ms", "60000"),
        ("window", "2"),
        ("expire_ms", expire.as_str()),
    ] {
        assert_eq!(meta.get(field).map(String::as_str), Some(value), "fork meta {field}");
    }
    assert_eq!(redis.hash(&fork.state).await, text_hash(&[("k", "1")]));
    assert_eq!(
        redis.hash(&source.state).await,
        text_hash(&[("src", "1")]),
        "the source stays"
    );
    assert_eq!(redis.score(&fork.user_index, "f1").await, Some(2500.0));
    assert_eq!(redis.score(&app_index, "alice:f1").await, Some(2500.0));
    assert!(redis.pttl(&fork.event_times).await > 0);

    let (taken, _): (String, String) = redis.run(&args).await;
    assert_eq!(taken, "EXISTS");
    let (missing, other_fork) = (
        SessionKeys::of("app", "alice", "nope"),
        SessionKeys::of("app", "alice", "f2"),
    );
    let from_missing = ForkArgs {
        source: &missing,
        fork: &other_fork,
        ..args
    };
    let (gone, _): (String, String) = redis.run(&from_missing).await;
    assert_eq!(gone, "NOTFOUND");
}

#[tokio::test]
async fn wake_publishes_the_events_key() {
    let mut redis = Redis::start().await;
    let keys = SessionKeys::of("app", "alice", "s1");
    let mut woken = redis.subscribe(watch_hub::APPENDED_CHANNEL).await;
    let receivers: i64 = redis.run(&WakeArgs { events: &keys.events }).await;
    assert_eq!(receivers, 1);
    assert_eq!(
        next_message(&mut woken).await,
        (watch_hub::APPENDED_CHANNEL.into(), keys.events.clone())
    );
}
