//! Each artifact script reads exactly what its builder sends and, against a real Redis,
//! every input lands where the script means it to.

use super::*;
use crate::redis::script_args::check::assert_reads_what_is_sent;
use crate::redis::store::RedisStore;
use adk_grpc_testkit::RedisServer;
use chrono::TimeZone;
use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, FromRedisValue};
use std::collections::HashMap;

fn new_version(requested: Option<i64>, display_name: Option<&str>) -> NewVersion {
    NewVersion {
        requested,
        mime_type: "text/plain".into(),
        custom_metadata: HashMap::from([("k".to_string(), serde_json::json!(1))]),
        is_text: true,
        is_file_uri: false,
        display_name: display_name.map(str::to_string),
    }
}

struct Scripted {
    // Stops the server when the test ends.
    _server: RedisServer,
    conn: MultiplexedConnection,
    scripts: Scripts,
}

impl Scripted {
    /// The server, and an upload's pending chunks on it.
    async fn start() -> (Scripted, PendingChunks) {
        let server = RedisServer::start().await;
        let conn = server.connection().await;
        let store = RedisStore::connect(&server.url(), Default::default()).await.unwrap();
        let scripted = Scripted {
            _server: server,
            conn,
            scripts: Scripts::new(),
        };
        (scripted, PendingChunks::new(store, "{app:u}"))
    }

    async fn run<T: FromRedisValue>(&mut self, args: &impl ScriptArgs<Scripts = Scripts>) -> T {
        let invocation = args.invocation(&self.scripts).unwrap();
        invocation.invoke_async(&mut self.conn).await.unwrap()
    }
}

#[tokio::test]
async fn every_artifact_script_reads_exactly_what_its_builder_sends() {
    let (_redis, pending) = Scripted::start().await;
    let keys = NameKeys::new("app", "u", Some("s1"), "f.txt");
    let (bare, paired) = (new_version(Some(1), None), new_version(Some(1), Some("F")));
    let commit = |new| CommitArgs {
        keys: &keys,
        new,
        pending: &pending,
        created: Utc::now(),
        size: 1,
        chunk_bytes: 1,
    };
    // Its metadata pairs always come: `bare` has the fewest (all but the display name).
    assert_reads_what_is_sent("artifact commit", &commit(&bare), 8, &commit(&paired));
    let read_meta = ReadMetaArgs {
        keys: &keys,
        version: Some(1),
    };
    assert_reads_what_is_sent("artifact read_meta", &read_meta, 0, &read_meta);
    let delete = DeleteArgs {
        keys: &keys,
        version: Some(1),
    };
    assert_reads_what_is_sent("artifact delete", &delete, 0, &delete);
}

#[tokio::test]
async fn artifact_scripts_write_each_input_where_it_belongs() {
    let (mut redis, pending) = Scripted::start().await;
    let keys = NameKeys::new("app", "u", Some("s1"), "f.txt");
    let chunks = [pending.next_key(), pending.next_key()];
    for (chunk, bytes) in chunks.iter().zip(["ab", "c"]) {
        let () = redis.conn.set_ex(chunk, bytes, 60).await.unwrap();
    }
    let created = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
    let new = new_version(None, Some("Shown"));
    let commit = CommitArgs {
        keys: &keys,
        new: &new,
        pending: &pending,
        created,
        size: 3,
        chunk_bytes: 2,
    };
    let committed: (String, String) = redis.run(&commit).await;
    assert_eq!(committed, ("OK".to_string(), "1".to_string()));
    // The pending chunks, renamed into place without their TTL.
    for (index, bytes) in ["ab", "c"].iter().enumerate() {
        let chunk = keys.chunk(1, index as u64);
        let stored: Option<String> = redis.conn.get(&chunk).await.unwrap();
        assert_eq!(stored.as_deref(), Some(*bytes), "{chunk}");
        assert_eq!(redis.conn.ttl::<_, i64>(&chunk).await.unwrap(), -1, "{chunk} persists");
    }
    let meta_key = format!("{}1:{}", keys.meta_prefix, keys.name);
    let meta: HashMap<String, String> = redis.conn.hgetall(&meta_key).await.unwrap();
    let expected: HashMap<String, String> = [
        ("chunks", "2"),
        ("mime", "text/plain"),
        ("size", "3"),
        ("create_us", "1700000000123456"),
        ("create_ns", "789"),
        ("custom", "{\"k\":1}"),
        ("text", "1"),
        ("file_uri", "0"),
        ("chunk_bytes", "2"),
        ("display_name", "Shown"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(meta, expected);
    let counter: Option<String> = redis.conn.get(&keys.seq).await.unwrap();
    assert_eq!(counter.as_deref(), Some("1"));
    let versions: Vec<String> = redis.conn.zrange(&keys.versions, 0, -1).await.unwrap();
    assert_eq!(versions, ["1"]);
    let names: Vec<String> = redis.conn.smembers(&keys.names).await.unwrap();
    assert_eq!(names, ["f.txt"]);
    // A requested version that exists is refused, by its number.
    let taken = new_version(Some(1), None);
    let refused: (String, String) = redis.run(&CommitArgs { new: &taken, ..commit }).await;
    assert_eq!(refused, ("EXISTS".to_string(), "1".to_string()));

    for version in [None, Some(1)] {
        let read: Option<(i64, HashMap<String, String>)> = redis.run(&ReadMetaArgs { keys: &keys, version }).await;
        assert_eq!(read, Some((1, expected.clone())), "version {version:?}");
    }
    let missing: Option<(i64, HashMap<String, String>)> = redis
        .run(&ReadMetaArgs {
            keys: &keys,
            version: Some(2),
        })
        .await;
    assert_eq!(missing, None);

    let deleted: i64 = redis
        .run(&DeleteArgs {
            keys: &keys,
            version: Some(1),
        })
        .await;
    assert_eq!(deleted, 1);
    for key in [
        keys.chunk(1, 0),
        keys.chunk(1, 1),
        meta_key,
        keys.seq.clone(),
        keys.versions.clone(),
    ] {
        assert!(!redis.conn.exists::<_, bool>(&key).await.unwrap(), "{key} is deleted");
    }
    let names: Vec<String> = redis.conn.smembers(&keys.names).await.unwrap();
    assert!(names.is_empty(), "the name has no version left");
}
