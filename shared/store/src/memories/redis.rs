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
//!
//! `<id>` and `<term>` are encoded with `id_key` (no `:`, `{`, `}` or space). A search
//! reads the stats and the postings of its query's terms in one pipeline, then the
//! best entries in a second one: it costs what its terms' postings cost, whatever the
//! user's total. An add (any number of entries) and a delete are one script each:
//! an entry, its postings and the stats change together, and a replaced entry's old
//! postings go in the same step. Writes are acknowledged like every other store
//! write (see `durability.rs`). A semantic search reads the stats' version; the core
//! keeps each user's vectors between searches and reads them again (one `HGETALL`) only
//! when the version moved (see `adk_grpc_core::memory::VectorCache`).
//! A generation reads its state in one `HMGET` and commits in one script that first
//! compares the generation version (a compare-and-set: a concurrent generation that
//! committed first makes it read and decide again).

use crate::config::StoreConfig;
use crate::redis::keys::MemoryKeys;
use crate::redis::script_args::ScriptArgs;
use crate::redis::store::RedisStore;
use adk_grpc_core::memory::{
    GenerationCommit, GenerationState, IndexVersion, IndexedEntry, MemoryBackend, MemoryEntry, MemoryId, MemoryRevision, MemoryScope,
    Postings, QueryTerms,
};
use adk_grpc_core::validate::{id_from_key, id_key};
use adk_grpc_core::{AdkError, Result};
use adk_grpc_proto::v1 as pb;
use async_trait::async_trait;
use prost::Message;
use script_args::{CommitArgs, RemoveArgs, Scripts, StoredEntry, UpsertArgs};
use std::collections::HashMap;
use std::sync::Arc;

mod lua;
mod script_args;

#[derive(Clone)]
pub struct RedisMemoryBackend {
    store: RedisStore,
    scripts: Arc<Scripts>,
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
        })
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
        pipe.cmd("HMGET").arg(&keys.stats).arg("n").arg("len");
        for term in terms.iter() {
            pipe.cmd("HGETALL").arg(format!("{}{}", keys.term_prefix, id_key(term)));
        }
        let (stats, postings): ((Option<u64>, Option<u64>), Vec<HashMap<String, String>>) = {
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

    async fn index_version(&self, scope: &MemoryScope) -> Result<IndexVersion> {
        let keys = MemoryKeys::new(scope);
        let (writes, entries, total_length): (Option<u64>, Option<u64>, Option<u64>) = self
            .store
            .query(redis::cmd("HMGET").arg(&keys.stats).arg("w").arg("n").arg("len"))
            .await?;
        Ok(IndexVersion {
            writes: writes.unwrap_or(0),
            entries: entries.unwrap_or(0),
            total_length: total_length.unwrap_or(0),
        })
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

    async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }
}
