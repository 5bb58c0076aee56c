//! `RedisMemoryBackend`: memories and their keyword index in Redis, standalone or
//! Redis Cluster, under the core memory service (`adk_grpc_core::CoreMemoryService`), which
//! owns every rule; this file only stores and reads.
//!
//! Every key of one user's memories carries the user's hash tag `{<app>:<user>}`
//! (the session keys' tag; ids enter keys only through `id_key`), so on a cluster
//! they live on one node and one script changes an entry and its index together.
//!
//! | key | type | content |
//! |---|---|---|
//! | `adk:mem:{app:user}:<id>` | hash | `e`: the protobuf `adk.v1.MemoryEntry`; `len`: its length in terms; `t`: its terms, encoded, space-separated |
//! | `adk:memterm:{app:user}:<term>` | hash | postings of one term: entry id -> `<count>:<entry length>` |
//! | `adk:memstats:{app:user}` | hash | `n`: entries, `len`: their total length, `w`: entries stored and removed, ever (with `n` and `len`, the version a replica's cached vectors are checked against) |
//! | `adk:memvec:{app:user}` | hash | with an embedding model: entry id -> its vector (little-endian `f32`s) |
//! | `adk:memgen:{app:user}` | hash | generated memories: `v` the generation version, `e:<event id>` per event generated from |
//! | `adk:memrev:{app:user}:<id>` | list | a generated memory's revisions (protobuf `adk.v1.MemoryRevision`), oldest first |
//! | `adk:membuf:{app:user}` | hash | ingested events not generated from yet: event id -> protobuf `adk.v1.Event` |
//! | `adk:membufq:{app:user}` | sorted set | their order: event id, scored with its arrival number (`s` of `adk:memgen`) |
//! | `adk:memdue:{<app>:<n>}` | sorted set | shard `n` of the app's users with ingested events (16 shards on a cluster, a user's by its slot; 1 standalone): user id, scored with when due (or claimed until), ms since the epoch |
//! | `adk:memdue-apps` | set | the apps that ever ingested (added once per process and app) |
//!
//! `<id>` and `<term>` are encoded with `id_key` (no `:`, `{`, `}` or space). A search
//! reads the stats and the postings of its query's terms in one pipeline, then the
//! best entries in a second one: it costs what its terms' postings cost, whatever the
//! user's total. An add (any number of entries) and a delete are one script each:
//! an entry, its postings and the stats change together, and a replaced entry's old
//! postings go in the same step. Writes are acknowledged like every other store
//! write (see `durability.rs`). The stats read with the postings are also the user's
//! index version: the core keeps each user's vectors between searches and reads them
//! again (one `HGETALL`) only when it moved (see `adk_grpc_core::memory::VectorCache`).
//! A generation reads its state in one `HMGET` and commits in one script that first
//! compares the generation version (a compare-and-set: a concurrent generation that
//! committed first makes it read and decide again), and takes the ingested events it
//! consumed out of the buffer in the same script. The index of due users is sharded per
//! app, outside the users' hash tags, so an app's ingests spread over the cluster's nodes:
//! a user's entry is written before its events (see `adk_grpc_core::memory::ingest`), and
//! claimed and released by one script each on its shard alone.

use crate::config::StoreConfig;
use crate::redis::durability::key_slot;
use crate::redis::keys::{INGEST_APPS, INGEST_DUE_SHARDS, MemoryKeys, ingest_due_key, user_tag};
use crate::redis::script_args::ScriptArgs;
use crate::redis::store::RedisStore;
use adk_grpc_core::memory::{
    GenerationCommit, GenerationState, IndexedEntry, MemoryBackend, MemoryEntry, MemoryId, MemoryRevision, MemoryScope,
    Postings, QueryTerms,
};
use adk_grpc_core::sync;
use adk_grpc_core::validate::{id_from_key, id_key};
use adk_grpc_core::{AdkError, Event, Result};
use adk_grpc_proto::v1 as pb;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use prost::Message;
use script_args::{
    BufferArgs, ClaimArgs, CommitArgs, ReadBufferArgs, ReleaseArgs, RemoveArgs, Scripts, StoredEntry, UpsertArgs,
};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

mod lua;
mod script_args;

#[derive(Clone)]
pub struct RedisMemoryBackend {
    store: RedisStore,
    scripts: Arc<Scripts>,
    /// The apps this process has put in [`INGEST_APPS`]: one `SADD` per process and app.
    ingesting_apps: Arc<Mutex<HashSet<String>>>,
    /// Where the next claim starts among an app's shards, so that a busy shard does not
    /// keep the others waiting.
    next_shard: Arc<AtomicU16>,
}

impl std::fmt::Debug for RedisMemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisMemoryBackend")
            .field("cluster", &self.store.is_cluster())
            .finish()
    }
}

impl RedisMemoryBackend {
    /// Connects to `redis://…`, `rediss://…`, `redis+cluster://h1:p1,h2:p2` or
    /// `rediss+cluster://…` (the session store's URLs).
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Self> {
        Ok(RedisMemoryBackend {
            store: RedisStore::connect(url, config.replica_acks).await?,
            scripts: Arc::new(Scripts::new()),
            ingesting_apps: Arc::default(),
            next_shard: Arc::default(),
        })
    }

    /// How many shards each app's index of due users has (see [`ingest_due_key`]).
    fn due_shards(&self) -> u16 {
        if self.store.is_cluster() { INGEST_DUE_SHARDS } else { 1 }
    }

    /// The shard of the app's index of due users that holds `scope`'s user.
    fn due_key(&self, scope: &MemoryScope) -> String {
        let slot = key_slot(user_tag(scope.app_name(), scope.user_id()).as_bytes());
        ingest_due_key(scope.app_name(), slot % self.due_shards())
    }
}

/// A vector as stored: little-endian `f32`s.
fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector_from_bytes(bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(AdkError::Internal("malformed memory vector in redis".into()));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// A posting's `<count>:<entry length>`.
fn parse_posting(value: &str) -> Result<(u32, u32)> {
    let bad = || AdkError::Internal(format!("malformed memory posting {value:?} in redis"));
    let (count, length) = value.split_once(':').ok_or_else(bad)?;
    Ok((count.parse().map_err(|_| bad())?, length.parse().map_err(|_| bad())?))
}

#[async_trait]
impl MemoryBackend for RedisMemoryBackend {
    async fn upsert(&self, scope: &MemoryScope, entries: Vec<IndexedEntry>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let keys = MemoryKeys::new(scope);
        let invocation = UpsertArgs {
            keys: &keys,
            entries: entries.iter().map(StoredEntry::of).collect(),
        }
        .invocation(&self.scripts)?;
        let _: i64 = self
            .store
            .durable_eval("memory_upsert", &invocation, &keys.stats)
            .await?;
        Ok(())
    }

    async fn postings(&self, scope: &MemoryScope, terms: &QueryTerms) -> Result<Postings> {
        let keys = MemoryKeys::new(scope);
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(&keys.stats).arg("n").arg("len").arg("w");
        for term in terms.iter() {
            pipe.cmd("HGETALL").arg(format!("{}{}", keys.term_prefix, id_key(term)));
        }
        let (stats, postings): ((Option<u64>, Option<u64>, Option<u64>), Vec<HashMap<String, String>>) = {
            let mut replies: Vec<redis::Value> = self.store.pipeline(&pipe).await?;
            let rest = replies.split_off(1);
            let stats = crate::redis::error::decode_reply(replies.remove(0))?;
            let postings = rest
                .into_iter()
                .map(crate::redis::error::decode_reply)
                .collect::<Result<_>>()?;
            (stats, postings)
        };
        let terms = postings
            .into_iter()
            .map(|ids| {
                ids.into_iter()
                    .map(|(mid, value)| {
                        let id = id_from_key(&mid)
                            .ok_or_else(|| AdkError::Internal(format!("malformed memory id {mid:?} in redis")))?;
                        let (count, length) = parse_posting(&value)?;
                        Ok((id, count, length))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()?;
        Ok(Postings {
            entries: stats.0.unwrap_or(0),
            total_length: stats.1.unwrap_or(0),
            writes: stats.2.unwrap_or(0),
            terms,
        })
    }

    async fn vectors(&self, scope: &MemoryScope) -> Result<Vec<(String, Vec<f32>)>> {
        let keys = MemoryKeys::new(scope);
        let stored: HashMap<String, Vec<u8>> = self.store.query(redis::cmd("HGETALL").arg(&keys.vectors)).await?;
        stored
            .into_iter()
            .map(|(mid, bytes)| {
                let id = id_from_key(&mid)
                    .ok_or_else(|| AdkError::Internal(format!("malformed memory id {mid:?} in redis")))?;
                Ok((id, vector_from_bytes(&bytes)?))
            })
            .collect()
    }

    async fn fetch(&self, scope: &MemoryScope, ids: &[MemoryId]) -> Result<Vec<MemoryEntry>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys = MemoryKeys::new(scope);
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HGET")
                .arg(format!("{}{}", keys.entry_prefix, id_key(id)))
                .arg("e");
        }
        let payloads: Vec<Option<Vec<u8>>> = self.store.pipeline(&pipe).await?;
        payloads
            .into_iter()
            .flatten()
            .map(|bytes| {
                let stored = pb::MemoryEntry::decode(bytes.as_slice())
                    .map_err(|e| AdkError::Internal(format!("undecodable memory entry in redis: {e}")))?;
                MemoryEntry::from_proto("memory", &stored)
            })
            .collect()
    }

    async fn remove(&self, scope: &MemoryScope, id: &MemoryId) -> Result<bool> {
        let keys = MemoryKeys::new(scope);
        let invocation = RemoveArgs { keys: &keys, id }.invocation(&self.scripts)?;
        let deleted: i64 = self
            .store
            .durable_eval("memory_delete", &invocation, &keys.stats)
            .await?;
        Ok(deleted == 1)
    }

    async fn generation_state(&self, scope: &MemoryScope, event_ids: &[String]) -> Result<GenerationState> {
        let keys = MemoryKeys::new(scope);
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&keys.generation).arg("v");
        for id in event_ids {
            cmd.arg(format!("e:{}", id_key(id)));
        }
        let values: Vec<Option<String>> = self.store.query(&cmd).await?;
        let version = match values.first().cloned().flatten() {
            None => 0,
            Some(v) => v
                .parse()
                .map_err(|_| AdkError::Internal(format!("malformed memory generation version {v:?} in redis")))?,
        };
        let generated = event_ids
            .iter()
            .zip(values.iter().skip(1))
            .filter(|(_, seen)| seen.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        Ok(GenerationState { version, generated })
    }

    async fn commit_generation(&self, scope: &MemoryScope, commit: GenerationCommit) -> Result<bool> {
        let keys = MemoryKeys::new(scope);
        let invocation = CommitArgs::of(&keys, &commit).invocation(&self.scripts)?;
        let applied: i64 = self
            .store
            .durable_eval("memory_generation_commit", &invocation, &keys.stats)
            .await?;
        Ok(applied == 1)
    }

    async fn revisions(&self, scope: &MemoryScope, id: &MemoryId) -> Result<Vec<MemoryRevision>> {
        let keys = MemoryKeys::new(scope);
        let key = format!("{}{}", keys.revision_prefix, id_key(id));
        let stored: Vec<Vec<u8>> = self.store.query(redis::cmd("LRANGE").arg(&key).arg(0).arg(-1)).await?;
        stored
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let revision = pb::MemoryRevision::decode(bytes.as_slice())
                    .map_err(|e| AdkError::Internal(format!("undecodable memory revision in redis: {e}")))?;
                MemoryRevision::from_proto(format_args!("revisions[{i}]"), &revision)
            })
            .collect()
    }

    async fn schedule_ingest(&self, scope: &MemoryScope, due: DateTime<Utc>) -> Result<()> {
        let app = id_key(scope.app_name()).into_owned();
        if !sync::lock(&self.ingesting_apps).contains(&app) {
            // Before the index entry: an app in the index is always in the set.
            let mut apps = redis::pipe();
            apps.cmd("SADD").arg(INGEST_APPS).arg(&app).ignore();
            self.store.durable_pipeline::<()>(&apps, INGEST_APPS).await?;
            sync::lock(&self.ingesting_apps).insert(app);
        }
        let due_key = self.due_key(scope);
        let mut index = redis::pipe();
        index
            .cmd("ZADD")
            .arg(&due_key)
            .arg(due.timestamp_millis())
            .arg(id_key(scope.user_id()).as_ref())
            .ignore();
        self.store.durable_pipeline::<()>(&index, &due_key).await
    }

    async fn buffer_events(&self, scope: &MemoryScope, events: &[Event]) -> Result<u64> {
        let keys = MemoryKeys::new(scope);
        let invocation = BufferArgs {
            keys: &keys,
            events: events
                .iter()
                .map(|e| (e.id.as_str(), pb::Event::from(e).encode_to_vec()))
                .collect(),
        }
        .invocation(&self.scripts)?;
        self.store
            .durable_eval("memory_ingest_buffer", &invocation, &keys.generation)
            .await
    }

    async fn buffered_events(&self, scope: &MemoryScope, limit: usize) -> Result<Vec<Event>> {
        let keys = MemoryKeys::new(scope);
        let invocation = ReadBufferArgs { keys: &keys, limit }.invocation(&self.scripts)?;
        let payloads: Vec<Option<Vec<u8>>> = self.store.eval("memory_ingest_read", &invocation).await?;
        payloads
            .into_iter()
            .flatten()
            .map(|bytes| {
                let stored = pb::Event::decode(bytes.as_slice())
                    .map_err(|e| AdkError::Internal(format!("undecodable buffered event in redis: {e}")))?;
                Event::try_from(&stored)
            })
            .collect()
    }

    async fn ingesting_apps(&self) -> Result<Vec<String>> {
        let apps: Vec<String> = self.store.query(redis::cmd("SMEMBERS").arg(INGEST_APPS)).await?;
        apps.iter()
            .map(|app| id_from_key(app).ok_or_else(|| AdkError::Internal(format!("malformed app {app:?} in redis"))))
            .collect()
    }

    async fn claim_due(
        &self,
        app_name: &str,
        now: DateTime<Utc>,
        claimed_until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<String>> {
        let shards = self.due_shards();
        let first = self.next_shard.fetch_add(1, Ordering::Relaxed) % shards;
        let mut claimed = Vec::new();
        for shard in (0..shards).map(|i| (first + i) % shards) {
            if claimed.len() == limit {
                break;
            }
            let due = ingest_due_key(app_name, shard);
            let invocation = ClaimArgs {
                due: &due,
                now: now.timestamp_millis(),
                claimed_until: claimed_until.timestamp_millis(),
                limit: limit - claimed.len(),
            }
            .invocation(&self.scripts)?;
            let users: Vec<String> = self
                .store
                .durable_eval("memory_ingest_claim", &invocation, &due)
                .await?;
            for user in users {
                claimed.push(
                    id_from_key(&user)
                        .ok_or_else(|| AdkError::Internal(format!("malformed user {user:?} in redis")))?,
                );
            }
        }
        Ok(claimed)
    }

    async fn release_claim(
        &self,
        scope: &MemoryScope,
        claimed_until: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> Result<()> {
        let due = self.due_key(scope);
        let user = id_key(scope.user_id());
        let invocation = ReleaseArgs {
            due: &due,
            user: &user,
            claimed_until: claimed_until.timestamp_millis(),
            next: next.map(|next| next.timestamp_millis()),
        }
        .invocation(&self.scripts)?;
        let _: i64 = self
            .store
            .durable_eval("memory_ingest_release", &invocation, &due)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }
}
