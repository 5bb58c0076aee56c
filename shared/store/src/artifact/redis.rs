//! `RedisArtifactBackend`: artifact versions in Redis, standalone or Redis
//! Cluster, on the same connection layer and error mapping as the sessions
//! (`crate::redis::conn`). It stores and reads; the rules are the core service's
//! (`adk_grpc_core::artifact::CoreArtifactService`), except the checks that must be
//! atomic with a write, which the commit script makes and reports back.
//!
//! # Data model
//!
//! Every key of one user's artifacts carries the hash tag `{<app>:<user>}`, the
//! same as their sessions, so on a cluster they live on one node and one Lua
//! script can commit or delete a version atomically. `<scope>` is the session
//! id (encoded like every id in a key, see `crate::redis`) for session names and
//! `~user` for `user:` names (an encoded id never holds `~`, so the two never
//! collide). File names may contain `:`, `{`, `}` and any
//! UTF-8 but NUL, so a file name always comes **last** in a key, after the tag
//! and every fixed segment: each segment before it (ids, scope, version, chunk
//! index, upload id) is free of `:`, which keeps keys unambiguous, and the
//! key's hash tag is always the one at its start. File names keep their
//! `user:` prefix.
//!
//! | key | type | content |
//! |---|---|---|
//! | `adk:artnames:{app:user}:<scope>` | set | the scope's file names (List) |
//! | `adk:artseq:{app:user}:<scope>:<name>` | string | the highest version the name ever had; the next is one more |
//! | `adk:artvers:{app:user}:<scope>:<name>` | zset | the name's versions (member and score the version) |
//! | `adk:artmeta:{app:user}:<scope>:<version>:<name>` | hash | `mime`, `size`, `create_us` + `create_ns` (µs since the epoch, nanoseconds beyond), `custom` (JSON object), `text` (`1`/`0`), `file_uri` (`1` when the bytes are a `file_data` part's URI; absent before), `chunks` (count), `chunk_bytes` (storage chunk size when written) |
//! | `adk:artchunk:{app:user}:<scope>:<version>:<index>:<name>` | string | bytes `index * chunk_bytes ..` of the version, at most `chunk_bytes` |
//! | `adk:artup:{app:user}:<upload id>:<index>` | string | a pending chunk of an upload in progress (sliding TTL, 60 s by default) |
//!
//! # Writes
//!
//! An upload streams: each storage chunk is written as it fills to a pending
//! key under a random upload id, with a TTL (60 s by default) that slides while
//! the client keeps sending: every TTL / 6, when a piece arrived since the last
//! look, one pipeline renews the TTL of all of the upload's pending keys. A
//! server that dies mid-upload thus leaves its pending chunks for at most about
//! a minute after the last piece (TTL to TTL + 1/6), and an upload that pauses
//! longer than the TTL less one renewal period (50 s by default) may find its
//! chunks expired and fail with `DEADLINE_EXCEEDED`. At the end one script
//! (`lua::COMMIT`) picks the version, renames the pending keys into place (same
//! hash tag, so allowed on a cluster), and writes the metadata, counter, version
//! and name: a version appears whole or not at all, and concurrent saves of one
//! name get distinct, consecutive versions. A failed, oversized, mis-sized or
//! cancelled upload deletes its pending keys (a cancelled one from a background
//! task); the TTL only covers a crash.
//! A delete is one script too (`lua::DELETE`), removing every chunk.
//!
//! DeleteSession (in the session store, `crate::redis`) deletes the session's
//! scope — every name, version and chunk — in the same script that deletes the
//! session (`ScopeKeys`, `lua::artifact_delete_fns`): a session re-created
//! under that id never sees its predecessor's artifacts, even if the server dies
//! mid-call, and no artifact server takes part. That script costs about 7 µs per
//! artifact key of the session (10,000 small versions: 130 ms).
//!
//! # Reads
//!
//! Metadata (and which version "latest" is) comes from one script. A download
//! then reads one chunk per step (`GET`, or `GETRANGE` when the requested piece
//! size is not the stored one), so neither side holds a whole artifact. A
//! version deleted during a download ends its stream with `NOT_FOUND`.

pub(crate) mod lua;
mod script_args;

use crate::config::StoreConfig;
use crate::redis::keys::{NameKeys, ScopeKeys, upload_prefix};
use crate::redis::script_args::ScriptArgs;
use crate::redis::store::RedisStore;
use adk_grpc_core::artifact::{
    ArtifactBackend, ArtifactMetadata, ArtifactScope, NewVersion, StoredBytes, StoredName, UploadBody, WriteOutcome,
};
use adk_grpc_core::{AdkError, Result};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use script_args::{CommitArgs, DeleteArgs, ReadMetaArgs, Scripts};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// Default of how long an upload's pending chunks outlive the last piece that
/// arrived (see [`RedisArtifactBackend::with_pending_ttl`]).
pub const DEFAULT_PENDING_TTL: Duration = Duration::from_secs(60);
/// The shortest pending TTL a service takes; shorter ones are raised to it.
const MIN_PENDING_TTL: Duration = Duration::from_millis(100);
/// How many times per TTL a running upload looks whether to renew its pending chunks.
const RENEWALS_PER_TTL: u32 = 6;
/// How long after an abandoned upload's cleanup a second pass runs (see `PendingChunks`'s Drop).
const LATE_WRITE_GRACE: Duration = Duration::from_millis(500);

/// Artifacts in Redis (standalone or cluster). Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct RedisArtifactBackend {
    store: RedisStore,
    scripts: Arc<Scripts>,
    pending_ttl: Duration,
}

impl std::fmt::Debug for RedisArtifactBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisArtifactBackend")
            .field("cluster", &self.store.is_cluster())
            .field("pending_ttl", &self.pending_ttl)
            .finish()
    }
}

impl RedisArtifactBackend {
    /// Connects to `redis://…`, `rediss://…`, `redis+cluster://h1:p1,h2:p2` or
    /// `rediss+cluster://…`; uses `replica_acks` of the config. Fails with `Config`
    /// for a malformed URL and `Unavailable` when Redis cannot be reached now.
    pub async fn connect(url: &str, config: &StoreConfig) -> Result<Self> {
        let scripts = Scripts::new();
        Ok(RedisArtifactBackend {
            store: RedisStore::connect(url, config.replica_acks).await?,
            scripts: Arc::new(scripts),
            pending_ttl: DEFAULT_PENDING_TTL,
        })
    }

    /// How long the pending chunks of an upload outlive the last piece of it that
    /// arrived (default [`DEFAULT_PENDING_TTL`], at least 100 ms): the longest a
    /// crashed server's half-written upload stays in Redis, and about the longest
    /// (less one sixth) an upload may pause between pieces.
    pub fn with_pending_ttl(mut self, ttl: Duration) -> Self {
        self.pending_ttl = ttl.max(MIN_PENDING_TTL);
        self
    }

    fn pending_ttl_ms(&self) -> u64 {
        self.pending_ttl.as_millis() as u64
    }

    /// A version's metadata and storage layout (the latest when `version` is None); None
    /// when there is no such version.
    async fn read_meta(&self, keys: &NameKeys, version: Option<i64>) -> Result<Option<(ArtifactMetadata, Layout)>> {
        let invocation = ReadMetaArgs { keys, version }.invocation(&self.scripts)?;
        let reply: Option<(i64, HashMap<String, String>)> = self.store.eval("artifact_read_meta", &invocation).await?;
        reply
            .map(|(version, fields)| parse_meta(&keys.name, version, &fields))
            .transpose()
    }

    /// Writes the body to pending keys, chunk by chunk.
    async fn write_pending(&self, body: &mut UploadBody, pending: &PendingChunks) -> Result<()> {
        while let Some(chunk) = body.next_chunk().await? {
            // Counted before the write: should this future be dropped mid-write, the cleanup covers it.
            let key = pending.next_key();
            let set = redis::cmd("SET")
                .arg(&key)
                .arg(chunk)
                .arg("PX")
                .arg(self.pending_ttl_ms())
                .clone();
            self.store.query::<()>(&set).await?;
        }
        Ok(())
    }

    /// Slides the TTL of the upload's pending chunks while pieces keep arriving: every
    /// TTL / [`RENEWALS_PER_TTL`], when the client sent a piece since the last look
    /// (`pieces` counts them), one pipeline renews them all. Runs beside
    /// [`Self::write_pending`] until dropped. A failed renewal is only logged: the commit
    /// then finds any chunk that expired.
    async fn keep_pending_alive(&self, pending: &PendingChunks, pieces: &AtomicU64) -> Infallible {
        let mut looks = tokio::time::interval(self.pending_ttl / RENEWALS_PER_TTL);
        looks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut seen = 0;
        loop {
            looks.tick().await;
            let now = pieces.load(Ordering::Relaxed);
            if std::mem::replace(&mut seen, now) != now
                && let Err(err) = self.renew(pending).await
            {
                tracing::warn!("cannot renew the TTL of an upload's pending chunks: {err}");
            }
        }
    }

    /// Renews the TTL of every pending chunk of an upload.
    async fn renew(&self, pending: &PendingChunks) -> Result<()> {
        let keys = pending.keys();
        if keys.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("PEXPIRE").arg(key).arg(self.pending_ttl_ms()).ignore();
        }
        self.store.pipeline::<()>(&pipe).await
    }

    /// Makes the pending chunks the next (or the requested) version; see [`lua::COMMIT`]:
    /// `size` bytes in chunks of `chunk_bytes` (the last one shorter).
    async fn commit(
        &self,
        new: &NewVersion,
        keys: &NameKeys,
        pending: &PendingChunks,
        (size, chunk_bytes): (u64, usize),
    ) -> Result<WriteOutcome> {
        let invocation = CommitArgs {
            keys,
            new,
            pending,
            created: new.create_time(),
            size,
            chunk_bytes,
        }
        .invocation(&self.scripts)?;
        let (status, version): (String, String) = self
            .store
            .durable_eval("artifact_commit", &invocation, &keys.versions)
            .await?;
        let version = || parse_number::<i64>("version", &version);
        match status.as_str() {
            "OK" => Ok(WriteOutcome::Stored(version()?)),
            // Confirmed durable like any reply (see `durability.rs`): a retry whose first
            // attempt saved this version learns of it only once it cannot be lost.
            "EXISTS" => Ok(WriteOutcome::VersionTaken(version()?)),
            "FULL" => Ok(WriteOutcome::NoVersionLeft),
            "EXPIRED" => Err(AdkError::DeadlineExceeded(format!(
                "the upload paused too long between pieces and its pending chunks expired \
                 (they outlive the last piece by {} ms)",
                self.pending_ttl.as_millis()
            ))),
            other => Err(AdkError::Internal(format!(
                "unexpected script status from redis: {other:?}"
            ))),
        }
    }
}

#[async_trait]
impl ArtifactBackend for RedisArtifactBackend {
    async fn write(&self, name: &StoredName, new: NewVersion, mut body: UploadBody) -> Result<WriteOutcome> {
        let pieces = body.pieces_received();
        let keys = NameKeys::of(name);
        let pending = PendingChunks::new(self.store.clone(), &keys.tag);
        let result = async {
            tokio::select! {
                written = self.write_pending(&mut body, &pending) => written?,
                never = self.keep_pending_alive(&pending, &pieces) => match never {},
            }
            let written = (body.size(), body.chunk_bytes());
            self.commit(&new, &keys, &pending, written).await
        }
        .await;
        match result {
            Ok(WriteOutcome::Stored(version)) => {
                pending.committed();
                Ok(WriteOutcome::Stored(version))
            }
            refused_or_failed => {
                pending.discard().await;
                refused_or_failed
            }
        }
    }

    async fn metadata(&self, name: &StoredName, version: Option<i64>) -> Result<Option<ArtifactMetadata>> {
        let meta = self.read_meta(&NameKeys::of(name), version).await?;
        Ok(meta.map(|(metadata, _)| metadata))
    }

    async fn read(
        &self,
        name: &StoredName,
        version: Option<i64>,
        piece_bytes: usize,
    ) -> Result<Option<(ArtifactMetadata, StoredBytes)>> {
        let keys = NameKeys::of(name);
        let Some((metadata, layout)) = self.read_meta(&keys, version).await? else {
            return Ok(None);
        };
        let reader = ChunkReader {
            store: self.store.clone(),
            keys,
            version: metadata.version,
            layout,
            size: metadata.size_bytes,
            piece: piece_bytes as u64,
            offset: 0,
        };
        let pieces = futures::stream::try_unfold(reader, |mut reader| async move {
            Ok(reader.next_piece().await?.map(|piece| (piece, reader)))
        });
        Ok(Some((metadata, pieces.boxed())))
    }

    async fn delete(&self, name: &StoredName, version: Option<i64>) -> Result<()> {
        let keys = NameKeys::of(name);
        let invocation = DeleteArgs { keys: &keys, version }.invocation(&self.scripts)?;
        let _deleted: i64 = self
            .store
            .durable_eval("artifact_delete", &invocation, &keys.versions)
            .await?;
        Ok(())
    }

    /// One round trip for all the scopes (a listing asks for two: the session's and the user's).
    async fn names(&self, scopes: &[ArtifactScope]) -> Result<Vec<String>> {
        let mut pipe = redis::pipe();
        for scope in scopes {
            pipe.cmd("SMEMBERS").arg(ScopeKeys::of(scope).names);
        }
        let names: Vec<Vec<String>> = self.store.pipeline(&pipe).await?;
        Ok(names.concat())
    }

    async fn versions(&self, name: &StoredName) -> Result<Vec<i64>> {
        let keys = NameKeys::of(name);
        self.store
            .query(redis::cmd("ZRANGE").arg(&keys.versions).arg(0).arg(-1))
            .await
    }

    async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }
}

// ---------- uploads ----------

/// The pending chunk keys of one upload. Dropped before [`PendingChunks::committed`]
/// (the upload failed, or its future was cancelled mid-stream), it deletes them
/// from a background task; their TTL is the last resort when that cannot run.
struct PendingChunks {
    store: RedisStore,
    /// `adk:artup:{app:user}:<upload id>:`; a chunk's key adds its index.
    prefix: String,
    /// How many chunk keys may exist (the last one possibly still being written). Atomic,
    /// because the TTL renewal reads it while the writes go on (see `keep_pending_alive`).
    written: AtomicUsize,
    done: bool,
}

impl PendingChunks {
    fn new(store: RedisStore, tag: &str) -> PendingChunks {
        PendingChunks {
            store,
            prefix: upload_prefix(tag, &uuid::Uuid::new_v4().simple().to_string()),
            written: AtomicUsize::new(0),
            done: false,
        }
    }

    fn key(&self, index: usize) -> String {
        format!("{}{index}", self.prefix)
    }

    /// The key of the next chunk, counted from now on.
    fn next_key(&self) -> String {
        self.key(self.written.fetch_add(1, Ordering::Relaxed))
    }

    fn count(&self) -> usize {
        self.written.load(Ordering::Relaxed)
    }

    fn keys(&self) -> Vec<String> {
        (0..self.count()).map(|i| self.key(i)).collect()
    }

    /// The commit renamed the keys away: nothing left to clean up.
    fn committed(mut self) {
        self.done = true;
    }

    /// Deletes the pending keys now. Should that fail, the TTL removes them later;
    /// the caller reports the upload's own error, not this one.
    async fn discard(mut self) {
        if delete_keys(&self.store, self.keys()).await.is_ok() {
            self.done = true;
        }
    }
}

impl Drop for PendingChunks {
    fn drop(&mut self) {
        if self.done || self.count() == 0 {
            return;
        }
        // Outside a runtime nothing can be spawned; then the TTL cleans up.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, keys) = (self.store.clone(), self.keys());
            runtime.spawn(async move {
                let first = delete_keys(&store, keys.clone()).await;
                // The chunk write the cancelled upload had in flight may reach Redis after
                // that delete (a cluster connection does not keep requests in order): a
                // second pass a moment later removes it too.
                tokio::time::sleep(LATE_WRITE_GRACE).await;
                if let Err(err) = first.and(delete_keys(&store, keys).await) {
                    tracing::warn!("cannot delete the chunks of an abandoned upload (they expire by TTL): {err}");
                }
            });
        }
    }
}

async fn delete_keys(store: &RedisStore, keys: Vec<String>) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    store.query::<()>(redis::cmd("UNLINK").arg(keys)).await
}

// ---------- downloads ----------

/// How a version's bytes are cut into chunk keys.
#[derive(Debug, Clone, Copy)]
struct Layout {
    chunks: u64,
    chunk_bytes: u64,
}

/// Reads a version piece by piece, one chunk key per request.
struct ChunkReader {
    store: RedisStore,
    keys: NameKeys,
    version: i64,
    layout: Layout,
    size: u64,
    /// Requested piece size.
    piece: u64,
    offset: u64,
}

impl ChunkReader {
    /// The next piece of at most `piece` bytes (`Some(None)` when the version is gone);
    /// None at the end.
    async fn next_piece(&mut self) -> Result<Option<Option<Vec<u8>>>> {
        if self.offset >= self.size {
            return Ok(None);
        }
        let end = (self.offset + self.piece).min(self.size);
        let mut out: Vec<u8> = Vec::new();
        while self.offset < end {
            let Some(part) = self.read_part(end).await? else {
                // Ends the stream: nothing is read past a vanished version.
                self.offset = self.size;
                return Ok(Some(None));
            };
            self.offset += part.len() as u64;
            if out.is_empty() {
                out = part;
            } else {
                out.extend_from_slice(&part);
            }
        }
        Ok(Some(Some(out)))
    }

    /// The bytes from `offset` to `end` that lie in one chunk key: the whole
    /// key with `GET`, or a slice of it with `GETRANGE`; None when the key is gone.
    async fn read_part(&self, end: u64) -> Result<Option<Vec<u8>>> {
        let cb = self.layout.chunk_bytes;
        let index = self.offset / cb;
        let from = self.offset % cb;
        let chunk_len = cb.min(self.size - index * cb);
        let to = (end - index * cb).min(chunk_len);
        let key = self.keys.chunk(self.version, index);
        let part: Option<Vec<u8>> = if from == 0 && to == chunk_len {
            self.store.query(redis::cmd("GET").arg(&key)).await?
        } else {
            // GETRANGE's end is inclusive; a missing key gives "".
            let cmd = redis::cmd("GETRANGE").arg(&key).arg(from).arg(to - 1).clone();
            self.store.query(&cmd).await?
        };
        match part {
            Some(part) if part.len() as u64 == to - from => Ok(Some(part)),
            // The version was deleted (and perhaps saved again) since the download began.
            _ => Ok(None),
        }
    }
}

// ---------- stored values ----------

fn parse_meta(file_name: &str, version: i64, h: &HashMap<String, String>) -> Result<(ArtifactMetadata, Layout)> {
    let get = |field: &str| {
        h.get(field)
            .map(String::as_str)
            .ok_or_else(|| AdkError::Internal(format!("stored artifact metadata has no {field}")))
    };
    let create_us: i64 = parse_number("create_us", get("create_us")?)?;
    let create_ns: i64 = parse_number("create_ns", get("create_ns")?)?;
    let create_time = DateTime::<Utc>::from_timestamp_micros(create_us)
        .and_then(|t| t.checked_add_signed(chrono::Duration::nanoseconds(create_ns)))
        .ok_or_else(|| AdkError::Internal(format!("stored artifact create time {create_us}µs is out of range")))?;
    let custom_metadata: HashMap<String, Json> = serde_json::from_str(get("custom")?)
        .map_err(|e| AdkError::Internal(format!("stored artifact custom metadata is not a JSON object: {e}")))?;
    let layout = Layout {
        chunks: parse_number("chunks", get("chunks")?)?,
        chunk_bytes: parse_number("chunk_bytes", get("chunk_bytes")?)?,
    };
    let size_bytes: u64 = parse_number("size", get("size")?)?;
    if layout.chunk_bytes == 0 || layout.chunks != size_bytes.div_ceil(layout.chunk_bytes) {
        return Err(AdkError::Internal(format!(
            "stored artifact {file_name:?} version {version} has an inconsistent layout"
        )));
    }
    let metadata = ArtifactMetadata {
        file_name: file_name.to_string(),
        version,
        mime_type: get("mime")?.to_string(),
        size_bytes,
        create_time,
        custom_metadata,
        is_text: get("text")? == "1",
        // Absent from versions stored before file_data parts could be artifacts.
        is_file_uri: h.get("file_uri").is_some_and(|v| v == "1"),
        display_name: h.get("display_name").cloned(),
    };
    Ok((metadata, layout))
}

fn parse_number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| AdkError::Internal(format!("stored artifact {name} is not a number: {value:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_checks_its_layout() {
        let now = Utc::now();
        let mut h = HashMap::from([
            ("mime".to_string(), "image/png".to_string()),
            ("size".to_string(), "10".to_string()),
            ("create_us".to_string(), now.timestamp_micros().to_string()),
            (
                "create_ns".to_string(),
                (now.timestamp_subsec_nanos() % 1000).to_string(),
            ),
            ("custom".to_string(), r#"{"k":[1,"x"]}"#.to_string()),
            ("text".to_string(), "0".to_string()),
            ("chunks".to_string(), "3".to_string()),
            ("chunk_bytes".to_string(), "4".to_string()),
        ]);
        let (meta, layout) = parse_meta("f", 2, &h).unwrap();
        assert_eq!(meta.create_time, now);
        assert_eq!((meta.version, meta.size_bytes, meta.is_text), (2, 10, false));
        assert_eq!(meta.custom_metadata["k"], serde_json::json!([1, "x"]));
        assert_eq!((layout.chunks, layout.chunk_bytes), (3, 4));
        h.insert("chunks".into(), "2".into());
        assert!(parse_meta("f", 2, &h).is_err());
        h.remove("mime");
        assert!(parse_meta("f", 2, &h).is_err());
    }
}
