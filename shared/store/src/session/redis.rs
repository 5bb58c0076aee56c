//! `RedisSessionBackend`: sessions, scoped state and event logs in Redis, standalone
//! (`redis://`, `rediss://`) or Redis Cluster (`redis+cluster://h1:p1,h2:p2`,
//! `rediss+cluster://…` for TLS). Needs Redis 6.2 or later.
//!
//! # Data model
//!
//! Every key of one user's sessions carries the hash tag `{<app>:<user>}`, so on a
//! cluster they all live on one node and one Lua script can change them atomically.
//! App-wide keys carry the tag `{<app>}`, except the app index on a cluster, which is
//! sharded by slot (see `app_index.rs`). All keys start with `adk:`.
//!
//! Ids are any UTF-8 (see `adk_grpc_core::validate::id`) but enter keys (all built in
//! `crate::redis::keys`), and index members, only through
//! [`id_key`](adk_grpc_core::validate::id_key): every byte outside `[A-Za-z0-9._@-]` is
//! percent-encoded, so an id's segment never holds `:`, `{`, `}` or `/`, the tags
//! and separators below stay unambiguous (app `a:b` user `c` and app `a` user `b:c`
//! get `{a%3Ab:c}` and `{a:b%3Ac}`), and ids of that alphabet, the only ones accepted
//! before, keep the keys they always had. `<app>`, `<user>` and `<sid>` below are
//! encoded ids.
//!
//! | key | type | content |
//! |---|---|---|
//! | `adk:sess:{app:user}:<sid>` | hash | meta: `create_us`, `update_us` (µs since the epoch; `update` is the last event's timestamp, at most `MAX_CLOCK_SKEW` ahead of the append), `create_ns`, `update_ns` (the nanoseconds beyond the microsecond, so times come back exact), `seq` (last sequence), `last_id` (last event id), `ttl_ms` (0 = none), `expire_ms` (when the session expires, with a TTL) |
//! | `adk:state:{app:user}:<sid>` | hash | session-scoped state: key -> JSON text |
//! | `adk:events:{app:user}:<sid>` | stream | the log: entry id `<seq>-1`, so the sequence is the id's first part and order never depends on clocks; field `e` = the protobuf `adk.v1.Event`, `sequence` included |
//! | `adk:eids:{app:user}:<sid>` | hash | event id -> sequence (idempotent re-appends) |
//! | `adk:ets:{app:user}:<sid>` | zset | member sequence, score event timestamp µs (GetSession `after` without a scan) |
//! | `adk:user:{app:user}` | hash | user-scoped state: key without `user:` -> JSON text |
//! | `adk:idx:{app:user}` | zset | member session id, score last update µs (ListSessions for one user) |
//! | `adk:app:{app}` | hash | app-scoped state: key without `app:` -> JSON text |
//! | `adk:appidx:{app}` | zset | standalone: member `<user>:<sid>`, score last update µs (ListSessions for the app) |
//! | `adk:appidx:{<slot tag>}:<app>` | zset | cluster: the same, one shard per slot, on the slot of the users it lists (`<slot tag>` hashes to that slot) |
//! | `adk:appslots:{app}` | set | cluster: the slots that hold a shard of the app's index |
//!
//! State values are stored as exact JSON text. Events are stored as protobuf, as
//! they travel over gRPC, so numbers in an event's `state_delta` or function
//! arguments come back as the wire gives them (whole numbers as integers, others
//! as doubles; integers beyond 2^53 lose precision). GetSession, ListEvents and
//! WatchSession hand the stored bytes on as they are
//! ([`SessionBackend::read_encoded`], `events_encoded`, `watch_encoded`): their
//! replies are built around them, no event is decoded or encoded again.
//!
//! With a TTL, the five session keys expire together (`PEXPIREAT`, renewed by
//! every append); user and app state never expire. A listing that meets an index
//! member whose session has expired removes the member, so nothing dangles.
//!
//! # Atomicity
//!
//! CreateSession and AppendEvent are one Lua script each (see `lua.rs`): the
//! existence check, idempotency check (an event id already in the session
//! returns the stored event and changes nothing), precondition, sequence, log
//! entry, session- and user-scoped state, meta, user index and TTL happen all
//! together or not at all. GetSession reads meta, session and user state and the
//! requested events in one script, so they are one consistent snapshot.
//! DeleteSession deletes the session's keys, its index entries and its
//! session-scoped artifacts in one script (see `crate::artifact::redis`).
//!
//! The app-wide listing index is written by the same scripts, on standalone Redis
//! and on a cluster alike (there, the shard on the user's own slot).
//!
//! `app:` state lives on the app tag:
//! - standalone Redis: its key is passed to the same script, so the whole
//!   create or append is atomic;
//! - Redis Cluster: it may live on another node, which a script cannot reach,
//!   so it is written right after the script reports a new session or event
//!   (second step, only when there are `app:` values), not atomically with it.
//!   Another reader can see the new session or event before its `app:` values,
//!   and if Redis fails between the two steps the call returns `UNAVAILABLE`
//!   with the session or event stored but its `app:` values not applied; a
//!   retry then finds the session (`ALREADY_EXISTS`) or the event id (returns
//!   the stored event) and does not apply them either. Everything on the user
//!   tag stays atomic.
//!
//! # Requests of one user stay on the user's node
//!
//! On a cluster, creates, appends, reads and deletes send nothing to another
//! node but: the `app:` write above (only for `app:` values); a create's
//! registration of its slot in `adk:appslots:{app}` (once per process, app and
//! slot; see `app_index.rs`); and a load of the app's state when the process has
//! none cached (at most once a second per app, and after each `app:` write):
//! reads (Get, Create's reply, List) take `app:` state from a cache per process,
//! kept fresh by pub/sub (see `app_state.rs`: the writer reads its own writes,
//! other processes within the pub/sub delivery time, never older than 1 s).
//!
//! # Costs
//!
//! Append, Get with `num_recent_events`/`after`, ListEvents pages and Watch
//! pages cost O(events touched + log(n)); only Get without filters reads the
//! whole log. ListSessions reads one index page and one small script per
//! session listed; on a cluster an app-wide ListSessions also reads the shard
//! registry and, per page, a few members of every shard (one `ZRANGE` each, 128
//! in flight, more for a shard that supplies much of the page): O(shards +
//! page) commands, and an app has at most one shard per slot (16,384).
//!
//! # Connections
//!
//! Standalone: one `ConnectionManager` (multiplexed; reconnects after a Redis
//! restart). Cluster: one `ClusterConnection` (follows slot moves, reconnects),
//! replaced when the cluster's view changes under it, so that a failed master that
//! went silent pins nothing (`cluster.rs`). Commands time out after 2 s. Watchers
//! share one reader per process and session, on a connection of their own, woken by
//! pub/sub (`watch_hub.rs`); a deleted or expired session ends its watches with
//! `NOT_FOUND` within about 2 s (the reader's poll), a watcher whose reads fail ends
//! with `UNAVAILABLE`, and the client resumes with `after_sequence`.
//! Redis failures map to `UNAVAILABLE` (retryable) or `INTERNAL` in one place,
//! `store_error`.

mod app_index;
mod app_state;
mod lua;
mod script_args;
mod watch_hub;

use self::app_index::ShardRegistry;
use self::app_state::AppStateCache;
use self::script_args::{
    AppStateInScript, AppWriteArgs, AppendArgs, CreateArgs, DeleteArgs, DropStaleArgs, ForkArgs, ReadArgs, RunMarkArgs,
    Scripts, WakeArgs,
};
use self::watch_hub::{FeedKey, WatchHub};
use crate::config::StoreConfig;
use crate::redis::error::decode_reply;
use crate::redis::keys::{
    ScopeKeys, SessionKeys, app_index_key, app_state_key, lease_key, user_index_key, user_state_key, user_tag,
};
use crate::redis::pubsub::subscriber_clients;
use crate::redis::script_args::ScriptArgs;
use crate::redis::store::RedisStore;
use adk_grpc_core::session::SessionCursor;
use adk_grpc_core::session::backend::{
    AppStateWrite, Appended, Created, EventPage, EventRead, EventsRead, ForkPlan, Forked, ListedSession, NewEvent,
    NewSession, Refusal, SessionBackend, SessionKey, SessionListing, Valid,
};
use adk_grpc_core::state::merge_state;
use adk_grpc_core::{
    AdkError, CoreSessionService, EncodedEvent, EncodedEventStream, EncodedSession, Event, EventStream, Events,
    Precondition, Result, RunMark, Session,
};
use adk_grpc_core::{AppStateRequest, ScopeState, UserStateRequest};
use adk_grpc_proto::v1 as pb;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use redis::{Cmd, FromRedisValue, ScriptInvocation, Value};
use serde_json::Value as Json;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How many index members one ListSessions step reads concurrently.
const LIST_CONCURRENCY: usize = 32;
/// The most members one read of a listing index asks for.
const MAX_INDEX_BATCH: usize = 1024;
/// How many app index shards an app-wide ListSessions reads concurrently (one
/// command each; the cluster connection pipelines them per node).
const SHARD_CONCURRENCY: usize = 128;

/// The AppendEvent script's source (see `lua::APPEND`): `adk-bench append-path` times a raw
/// `EVALSHA` of it next to the AppendEvent call that runs it.
pub const APPEND_SCRIPT: &str = lua::APPEND;

type Fields = HashMap<String, Json>;
/// `lua::READ`'s reply: meta, session state and user state as HGETALL, and the stored
/// events (entry id, bytes).
type RawSnapshot = (
    HashMap<String, String>,
    HashMap<String, String>,
    HashMap<String, String>,
    Vec<(String, Vec<u8>)>,
);

/// Sessions in Redis (standalone or cluster). Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct RedisSessionBackend {
    store: RedisStore,
    scripts: Arc<Scripts>,
    config: StoreConfig,
    /// This process's `app:` state per app (see `app_state.rs`).
    app_states: Arc<AppStateCache>,
    /// Cluster: the app index shards this process has registered (see `app_index.rs`).
    shards: Arc<ShardRegistry>,
    /// This process's one reader for all its watchers (see `watch_hub.rs`).
    watches: Arc<WatchHub>,
}

impl std::fmt::Debug for RedisSessionBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessionBackend")
            .field("cluster", &self.store.is_cluster())
            .field("config", &self.config)
            .finish()
    }
}

impl RedisSessionBackend {
    /// Connects to `redis://…`, `rediss://…`, `redis+cluster://h1:p1,h2:p2` or
    /// `rediss+cluster://…`. Fails with `Config` for a malformed URL and with
    /// `Unavailable` when Redis cannot be reached now; once connected, the service
    /// survives Redis restarts by itself.
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Self> {
        let store = RedisStore::connect(url, config.replica_acks).await?;
        let scripts = Scripts::new();
        let app_states = Arc::new(AppStateCache::default());
        app_state::spawn_subscriber(&app_states, subscriber_clients(url)?);
        // The watchers' reads (and their durability confirmations) and the wake-up
        // messages go through a connection of their own, apart from the one appends are
        // acknowledged on: sharing it let a frozen-master failover on a cluster take back
        // an acknowledged append (`redis_failover.rs::cluster_frozen_master_loses_no_acknowledged_append`).
        // Still one per process, whatever the number of watchers.
        let watch_store = RedisStore::connect(url, config.replica_acks).await?;
        let watches = WatchHub::start(watch_store, subscriber_clients(url)?);
        Ok(RedisSessionBackend {
            store,
            scripts: Arc::new(scripts),
            config,
            app_states,
            shards: Arc::default(),
            watches,
        })
    }

    /// The session service over a new backend at `url` ([`Self::connect`]), with
    /// `config`'s default TTL ([`crate::session_service`]).
    pub async fn connect_service(url: &str, config: StoreConfig) -> Result<CoreSessionService<Self>> {
        let backend = Self::connect(url, config.clone()).await?;
        Ok(super::session_service(backend, &config))
    }

    /// The app index key a session's scripts write: on a cluster the shard on the
    /// user's slot, on standalone Redis the app's one index.
    fn app_index(&self, keys: &SessionKeys) -> String {
        if self.store.is_cluster() {
            app_index::shard_key(&keys.app_name, &user_tag(&keys.app_name, &keys.user_id))
        } else {
            app_index_key(&keys.app_name)
        }
    }

    /// Every key an app-wide listing reads (see `app_index.rs`).
    async fn app_index_shards(&self, app: &str) -> Result<Vec<String>> {
        if self.store.is_cluster() {
            ShardRegistry::shards(&self.store, app).await
        } else {
            Ok(vec![app_index_key(app)])
        }
    }

    async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        self.store.query(cmd).await
    }

    /// Runs a session script; `script` is its name in spans and metrics.
    async fn eval<T: FromRedisValue>(&self, script: &str, invocation: &ScriptInvocation<'_>) -> Result<T> {
        self.store.eval(script, invocation).await
    }

    /// The `app:` half of a create or append on a cluster (see the module docs): the
    /// values, published to every process's cache. On standalone Redis the script did
    /// it already. Either way this process's cache forgets the app's state, so its
    /// next read sees the write (even one that failed half-way).
    async fn apply_app_writes(&self, keys: &SessionKeys, app_delta: &Fields) -> Result<()> {
        if app_delta.is_empty() {
            return Ok(());
        }
        let written = if self.store.is_cluster() {
            self.write_app_state(&keys.app_name, app_delta).await
        } else {
            Ok(())
        };
        self.app_states.invalidate(&keys.app_name);
        written
    }

    /// Writes `app:` values (keys without the prefix) in one script that publishes the
    /// change to every process's cache (`lua::APP_WRITE`; see `app_state.rs`).
    async fn write_app_state(&self, app: &str, fields: &Fields) -> Result<()> {
        let key = app_state_key(app);
        let invocation = AppWriteArgs {
            key: &key,
            app_name: app,
            fields,
        }
        .invocation(&self.scripts)?;
        self.store
            .durable_eval::<String>("app_write", &invocation, &key)
            .await
            .map(drop)
    }

    /// `app`'s state: from this process's cache, else from Redis (see `app_state.rs`).
    async fn cached_app_state(&self, app: &str) -> Result<Arc<Fields>> {
        if let Some(fields) = self.app_states.get(app) {
            return Ok(fields);
        }
        let ticket = self.app_states.begin_load(app);
        let raw: HashMap<String, String> = self.query(redis::cmd("HGETALL").arg(app_state_key(app))).await?;
        let fields = Arc::new(json_fields(raw)?);
        self.app_states.finish_load(app, ticket, fields.clone());
        Ok(fields)
    }

    /// A Get's snapshot of the session and its app's `app:` state, read concurrently;
    /// None when the session does not exist.
    async fn read_with_app_state(
        &self,
        keys: &SessionKeys,
        read: &EventRead,
    ) -> Result<Option<(Snapshot, Arc<Fields>)>> {
        let (snapshot, app_state) = tokio::try_join!(
            self.read_session(keys, read.num_recent_events, read.after, read.since_compaction),
            self.cached_app_state(&keys.app_name)
        )?;
        Ok(snapshot.map(|snapshot| (snapshot, app_state)))
    }

    /// One session's snapshot (see `lua::READ`); None when it does not exist.
    async fn read_session(
        &self,
        keys: &SessionKeys,
        recent: Option<usize>,
        after: Option<DateTime<Utc>>,
        window: bool,
    ) -> Result<Option<Snapshot>> {
        let invocation = ReadArgs {
            keys,
            recent,
            after,
            window,
        }
        .invocation(&self.scripts)?;
        let reply: Option<RawSnapshot> = self.eval("read", &invocation).await?;
        let Some((meta, state, user, events)) = reply else {
            return Ok(None);
        };
        Ok(Some(Snapshot {
            meta: Meta::parse(&meta)?,
            state: json_fields(state)?,
            user: json_fields(user)?,
            events: events
                .into_iter()
                .map(|(id, bytes)| Ok(EncodedEvent::from_stored(entry_sequence(&id)?, bytes)))
                .collect::<Result<_>>()?,
        }))
    }

    /// Cluster: puts the slot of `keys`' user in the app's shard registry, off the
    /// request path, unless this process did already. Creates register before their
    /// script; this covers sessions indexed before shards existed (listed app-wide
    /// again after their next append). A failure is retried by a later append.
    /// Tells the watchers of the session, in every process, that it has a new event
    /// (`watch_hub.rs`), once an append that waited for replicas is acknowledged
    /// (durable), never in that append's durable request. (An append with no replica to
    /// wait for has its script do it.) In the background: a lost message only delays
    /// the watchers until their next poll.
    fn wake_watchers_in_background(&self, keys: &SessionKeys) {
        let (store, scripts) = (self.watches.store().clone(), self.scripts.clone());
        let events_key = keys.events.clone();
        tokio::spawn(async move {
            // A script keyed by the session, so the message leaves from the session's
            // node: a plain PUBLISH would go to the node of the channel's name, one node
            // for every append of every app.
            let woken = match (WakeArgs { events: &events_key }).invocation(&scripts) {
                Ok(invocation) => store.eval::<i64>("wake", &invocation).await,
                Err(e) => Err(e),
            };
            if let Err(e) = woken {
                tracing::debug!(error = %e, "watchers not woken; they poll");
            }
        });
    }

    fn register_in_background(&self, keys: &SessionKeys) {
        let (store, shards) = (self.store.clone(), self.shards.clone());
        let (app, tag) = (keys.app_name.clone(), user_tag(&keys.app_name, &keys.user_id));
        tokio::spawn(async move {
            if let Err(e) = shards.register(&store, &app, &tag).await {
                tracing::debug!(error = %e, "app index shard not registered; a later append retries");
            }
        });
    }

    /// Up to `listing.limit` sessions after its cursor in (update time, member) order,
    /// merged over the listing's index keys (one per-user index, or every app index
    /// shard). Members whose session has expired are removed from their index and skipped.
    async fn list_index(&self, listing: &SessionListing) -> Result<Vec<ListedSession>> {
        let (req, cursor) = (&listing.request, &listing.after);
        let app = req.app_name.as_str();
        let indexes = match &req.user_id {
            Some(user) => vec![user_index_key(&user_tag(app, user))],
            None => self.app_index_shards(app).await?,
        };
        let limit = listing.limit.max(1);
        let min = cursor
            .as_ref()
            .map_or("-inf".to_string(), |c| c.update_micros.to_string());
        // Enough of every index for its share of the page, and at least two positions,
        // so that one taken position rarely leaves an index's next one unknown.
        let first_batch = (limit.div_ceil(indexes.len().max(1)) + 1).clamp(2, limit.max(2));
        let mut walks: Vec<IndexWalk> = indexes
            .into_iter()
            .map(|key| IndexWalk::new(key, first_batch))
            .collect();
        let app_state = self.cached_app_state(app).await?;
        let mut found: Vec<(SessionCursor, Snapshot, SessionKeys)> = Vec::new();
        let mut stale: Vec<(usize, String, f64)> = Vec::new();
        while found.len() < limit {
            let refills: Vec<usize> = (0..walks.len()).filter(|&i| walks[i].needs_read()).collect();
            let ranges: Vec<_> = refills
                .iter()
                .map(|&i| {
                    let walk = &walks[i];
                    let mut range = redis::cmd("ZRANGE");
                    range
                        .arg(&walk.key)
                        .arg(&min)
                        .arg("+inf")
                        .arg("BYSCORE")
                        .arg("LIMIT")
                        .arg(walk.offset)
                        .arg(walk.batch)
                        .arg("WITHSCORES");
                    async move { self.query::<Vec<(String, f64)>>(&range).await }
                })
                .collect();
            let batches: Vec<Vec<(String, f64)>> = futures::stream::iter(ranges)
                .buffered(SHARD_CONCURRENCY)
                .try_collect()
                .await?;
            for (i, batch) in refills.into_iter().zip(batches) {
                walks[i].take(batch, cursor.as_ref());
            }
            // Take positions in order as long as every index's next one is known.
            let mut picks: Vec<(usize, SessionCursor, f64)> = Vec::new();
            while picks.len() < limit - found.len() && !walks.iter().any(IndexWalk::needs_read) {
                let next = walks
                    .iter()
                    .enumerate()
                    .filter_map(|(i, walk)| walk.ahead.front().map(|(position, _)| (i, position)))
                    .min_by(|(_, a), (_, b)| (a.update_micros, &a.member).cmp(&(b.update_micros, &b.member)));
                let Some((i, _)) = next else { break };
                let (position, score) = walks[i].ahead.pop_front().expect("the walk has a next position");
                picks.push((i, position, score));
            }
            let exhausted = walks.iter().all(|walk| walk.exhausted && walk.ahead.is_empty());
            let picks: Vec<(usize, SessionCursor, f64, SessionKeys)> = picks
                .into_iter()
                .filter_map(|(i, position, score)| {
                    let (user, session) = SessionCursor::ids_of_member(req, &position.member)?;
                    let keys = SessionKeys::of(app, &user, &session);
                    Some((i, position, score, keys))
                })
                .collect();
            let reads: Vec<_> = picks
                .iter()
                .map(|(_, _, _, keys)| self.read_session(keys, Some(0), None, false))
                .collect();
            let snapshots: Vec<Option<Snapshot>> = futures::stream::iter(reads)
                .buffered(LIST_CONCURRENCY)
                .try_collect()
                .await?;
            for ((i, position, score, keys), snapshot) in picks.into_iter().zip(snapshots) {
                match snapshot {
                    Some(snapshot) => found.push((position, snapshot, keys)),
                    None => stale.push((i, position.member, score)),
                }
            }
            if exhausted {
                break;
            }
        }
        // Removed only now, so the offsets above stay valid while paging through the indexes.
        for (i, member, score) in stale {
            let invocation = DropStaleArgs {
                index: &walks[i].key,
                member: &member,
                score,
            }
            .invocation(&self.scripts)?;
            let _: i64 = self.eval("drop_stale", &invocation).await?;
        }
        Ok(found
            .into_iter()
            .map(|(position, snapshot, keys)| ListedSession {
                position,
                session: snapshot.into_session(&keys, &app_state, Vec::new()),
            })
            .collect())
    }
}

/// One index (a per-user index or an app index shard) as a listing walks it.
struct IndexWalk {
    key: String,
    /// Members read so far: the next `ZRANGE` offset.
    offset: usize,
    /// How many members the next read asks for; doubles with every read, so an index
    /// that supplies much of a page costs few round trips.
    batch: usize,
    /// The last read returned fewer than asked: nothing follows.
    exhausted: bool,
    /// Positions read, after the cursor, not taken yet; oldest first.
    ahead: VecDeque<(SessionCursor, f64)>,
}

impl IndexWalk {
    fn new(key: String, batch: usize) -> IndexWalk {
        IndexWalk {
            key,
            offset: 0,
            batch,
            exhausted: false,
            ahead: VecDeque::new(),
        }
    }

    /// True when the index's next position is unknown and it may have one.
    fn needs_read(&self) -> bool {
        self.ahead.is_empty() && !self.exhausted
    }

    /// Takes in a `ZRANGE … BYSCORE` reply (members from the cursor's time on): keeps
    /// the positions after the cursor (ties at its time may precede it).
    fn take(&mut self, batch: Vec<(String, f64)>, cursor: Option<&SessionCursor>) {
        self.offset += batch.len();
        self.exhausted = batch.len() < self.batch;
        self.batch = (self.batch * 2).min(MAX_INDEX_BATCH);
        for (member, score) in batch {
            let position = SessionCursor {
                update_micros: score as i64,
                member,
            };
            if cursor.is_none_or(|c| c.is_before(position.update_micros, &position.member)) {
                self.ahead.push_back((position, score));
            }
        }
    }
}

#[async_trait]
impl SessionBackend for RedisSessionBackend {
    async fn create(&self, new: NewSession) -> Result<Created> {
        let NewSession {
            key,
            state: delta,
            ttl,
            now,
            ..
        } = new;
        let keys = SessionKeys::new(&key);
        let ttl_ms = ttl.map_or(0, ttl_millis);
        let created = Micros::of(now);
        let app_in_script = !self.store.is_cluster();
        if !app_in_script {
            // Before the session exists, so that an app-wide listing can always find it.
            let tag = user_tag(&keys.app_name, &keys.user_id);
            self.shards.register(&self.store, &keys.app_name, &tag).await?;
        }

        let app_index = self.app_index(&keys);
        let invocation = CreateArgs {
            keys: &keys,
            app_index: &app_index,
            app: app_in_script.then_some(AppStateInScript {
                key: &keys.app_state,
                fields: &delta.app,
            }),
            created: &created,
            ttl_ms,
            session_fields: &delta.session,
            user_fields: &delta.user,
        }
        .invocation(&self.scripts)?;
        let (status, expire_ms, user): (String, String, HashMap<String, String>) =
            self.store.durable_eval("create", &invocation, &keys.meta).await?;
        if status == "EXISTS" {
            return Ok(Created::Exists);
        }
        expect_status(&status, &["OK"])?;
        self.apply_app_writes(&keys, &delta.app).await?;
        let app_state = self.cached_app_state(&keys.app_name).await?;
        let snapshot = Snapshot {
            meta: Meta {
                create_time: now,
                update_time: now,
                seq: 0,
                expire_time: parse_expire(&expire_ms)?,
            },
            state: delta.session,
            user: json_fields(user)?,
            events: Vec::new(),
        };
        Ok(Created::Stored(snapshot.into_session(&keys, &app_state, Vec::new())))
    }

    async fn read(&self, key: &SessionKey, read: &EventRead) -> Result<Option<Session>> {
        let keys = SessionKeys::new(key);
        self.read_with_app_state(&keys, read)
            .await?
            .map(|(mut snapshot, app_state)| {
                let events = snapshot.decode_events()?;
                Ok(snapshot.into_session(&keys, &app_state, events))
            })
            .transpose()
    }

    async fn read_encoded(&self, key: &SessionKey, read: &EventRead) -> Result<Option<EncodedSession>> {
        let keys = SessionKeys::new(key);
        let read = self.read_with_app_state(&keys, read).await?;
        Ok(read.map(|(mut snapshot, app_state)| {
            let events = std::mem::take(&mut snapshot.events);
            EncodedSession {
                session: snapshot.into_session(&keys, &app_state, Vec::new()),
                events,
            }
        }))
    }

    async fn list(&self, listing: &SessionListing) -> Result<Vec<ListedSession>> {
        self.list_index(listing).await
    }

    async fn delete(&self, key: &SessionKey) -> Result<()> {
        let keys = SessionKeys::new(key);
        // One script (`lua::DELETE`) on the user's slot: the session, its index entries
        // (the app index shard shares the slot) and its artifacts, whichever server
        // stored them.
        let invocation = DeleteArgs {
            keys: &keys,
            artifacts: &ScopeKeys::of_session(&key.app_name, &key.user_id, &key.session_id),
            app_index: &self.app_index(&keys),
        }
        .invocation(&self.scripts)?;
        let _names: i64 = self.store.durable_eval("delete", &invocation, &keys.meta).await?;
        Ok(())
    }

    async fn append(&self, new: NewEvent) -> Result<Appended> {
        let NewEvent {
            key,
            mut event,
            delta,
            window,
            update_time,
            precondition,
            ..
        } = new;
        let keys = SessionKeys::new(&key);
        let update = Micros::of(update_time);
        let app_in_script = !self.store.is_cluster();
        // Watchers are woken once the append is acknowledged. Without replicas to wait
        // for, that is when the script has run: the script itself wakes them then, which
        // spares a request of its own per append. Otherwise they are woken below, once
        // the replicas have confirmed the write.
        let replicas = self.store.replicas_required(&keys.meta).await?;
        let wake_in_script = replicas == 0;

        let app_index = self.app_index(&keys);
        // The script checks the precondition atomically with the write, as
        // `NewEvent::refusal` words it, and reports a refusal by status.
        let invocation = AppendArgs {
            keys: &keys,
            app_index: &app_index,
            lease: &lease_key(&key.lease_key()),
            app: app_in_script.then_some(AppStateInScript {
                key: &keys.app_state,
                fields: &delta.app,
            }),
            event_id: &event.id,
            precondition: precondition.as_ref(),
            update: &update,
            // Without a sequence (it is 0 here): the script appends it (see `lua::APPEND`).
            event: EncodedEvent::encode(&event).as_bytes(),
            event_micros: event.timestamp.timestamp_micros(),
            window: &window,
            wake: wake_in_script,
            session_fields: &delta.session,
            user_fields: &delta.user,
        }
        .invocation(&self.scripts)?;
        let (status, stored, sequence): (String, Vec<u8>, u64) = self
            .store
            .durable_eval_with(replicas, "append", &invocation, &keys.meta)
            .await?;
        match status.as_str() {
            "NOTFOUND" => Ok(Appended::NotFound),
            "ABORTED" => Ok(Appended::Refused(Refusal::Modified)),
            "LEASE" => Ok(Appended::Refused(Refusal::LeaseLost)),
            // A retry: its first attempt may have failed waiting for the replicas; the
            // reply is confirmed durable like any (see `durability.rs`).
            "DUP" => {
                if !wake_in_script {
                    self.wake_watchers_in_background(&keys);
                }
                decode_event(&stored).map(Appended::Duplicate)
            }
            _ => {
                expect_status(&status, &["NEW"])?;
                if !app_in_script {
                    self.register_in_background(&keys);
                }
                if !wake_in_script {
                    self.wake_watchers_in_background(&keys);
                }
                self.apply_app_writes(&keys, &delta.app).await?;
                // What the script stored is this event's encoding plus its sequence, so the
                // reply is the event itself: no bytes back from Redis, no second decode.
                event.sequence = sequence;
                Ok(Appended::New(event))
            }
        }
    }

    async fn append_run_mark(&self, new: NewEvent) -> Result<Appended> {
        // The core sends a run mark only under a lease precondition.
        let Some(Precondition::LeaseHeldBy(owner)) = &new.precondition else {
            return Err(AdkError::Internal("a run mark without a lease precondition".into()));
        };
        let keys = SessionKeys::new(&new.key);
        let invocation = RunMarkArgs {
            keys: &keys,
            lease: &lease_key(&new.key.lease_key()),
            owner,
            event: EncodedEvent::encode(&new.event).as_bytes(),
        }
        .invocation(&self.scripts)?;
        let status: String = self.store.durable_eval("run_mark", &invocation, &keys.meta).await?;
        match status.as_str() {
            "NOTFOUND" => Ok(Appended::NotFound),
            "LEASE" => Ok(Appended::Refused(Refusal::LeaseLost)),
            _ => {
                expect_status(&status, &["OK"])?;
                Ok(Appended::New(new.event))
            }
        }
    }

    async fn run_marks(&self, key: &SessionKey) -> Result<Vec<RunMark>> {
        let keys = SessionKeys::new(key);
        let entries: Vec<Vec<u8>> = self
            .query(redis::cmd("LRANGE").arg(&keys.run_marks).arg(0).arg(-1))
            .await?;
        entries.iter().map(|entry| decode_run_mark(entry)).collect()
    }

    async fn user_state(&self, req: &Valid<UserStateRequest>) -> Result<ScopeState> {
        let key = user_state_key(&user_tag(&req.app_name, &req.user_id));
        let raw: HashMap<String, String> = self.query(redis::cmd("HGETALL").arg(key)).await?;
        json_fields(raw)
    }

    async fn app_state(&self, req: &Valid<AppStateRequest>) -> Result<ScopeState> {
        Ok(self.cached_app_state(&req.app_name).await?.as_ref().clone())
    }

    async fn update_app_state(&self, write: AppStateWrite) -> Result<ScopeState> {
        if !write.fields.is_empty() {
            let written = self.write_app_state(&write.app_name, &write.fields).await;
            // As every app: writer: this process reads its own write at once.
            self.app_states.invalidate(&write.app_name);
            written?;
        }
        Ok(self.cached_app_state(&write.app_name).await?.as_ref().clone())
    }

    async fn fork(&self, plan: ForkPlan) -> Result<Forked> {
        let source = SessionKeys::new(&plan.source);
        let fork = SessionKeys::new(&plan.fork);
        let seq: Option<u64> = self
            .query(redis::cmd("HGET").arg(&source.event_ids).arg(&plan.up_to_event_id))
            .await?;
        let exists: bool = self.query(redis::cmd("EXISTS").arg(&source.meta)).await?;
        if !exists {
            return Ok(Forked::SourceNotFound);
        }
        let Some(last) = seq else {
            return Ok(Forked::EventNotFound);
        };
        let reply: Value = self
            .query(
                redis::cmd("XRANGE")
                    .arg(&source.events)
                    .arg("1-1")
                    .arg(format!("{last}-1")),
            )
            .await?;
        let events = stream_entries(reply)?
            .iter()
            .map(|event| decode_event(event.as_bytes()))
            .collect::<Result<Vec<_>>>()?;
        let contents = plan.contents(&events);
        let (created, updated) = (Micros::of(plan.now), Micros::of(contents.update_time));
        let invocation = ForkArgs {
            source: &source,
            fork: &fork,
            app_index: &self.app_index(&fork),
            up_to_sequence: last,
            up_to_event_id: &plan.up_to_event_id,
            created: &created,
            updated: &updated,
            window_start: contents.window_start,
            events: &events,
            state: &contents.session_state,
        }
        .invocation(&self.scripts)?;
        let (status, _expire): (String, String) = self.store.durable_eval("fork", &invocation, &fork.meta).await?;
        match status.as_str() {
            "NOTFOUND" => return Ok(Forked::SourceNotFound),
            "EXISTS" => return Ok(Forked::Exists),
            _ => expect_status(&status, &["OK"])?,
        }
        if self.store.is_cluster() {
            self.register_in_background(&fork);
        }
        let (snapshot, app_state) = tokio::try_join!(
            self.read_session(&fork, None, None, false),
            self.cached_app_state(&plan.fork.app_name)
        )?;
        // Deleted (or expired) right after the fork: reported as a Get would find it.
        let Some(mut snapshot) = snapshot else {
            return Ok(Forked::SourceNotFound);
        };
        let events = snapshot.decode_events()?;
        Ok(Forked::Stored(snapshot.into_session(&fork, &app_state, events)))
    }

    async fn events(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead>> {
        let Some(read) = self.events_encoded(key, page).await? else {
            return Ok(None);
        };
        Ok(Some(EventsRead {
            events: read
                .events
                .iter()
                .map(|event| decode_event(event.as_bytes()))
                .collect::<Result<_>>()?,
            last_sequence: read.last_sequence,
        }))
    }

    async fn events_encoded(&self, key: &SessionKey, page: &EventPage) -> Result<Option<EventsRead<EncodedEvent>>> {
        let keys = SessionKeys::new(key);
        let seq: Option<String> = self.query(redis::cmd("HGET").arg(&keys.meta).arg("seq")).await?;
        let Some(seq) = seq else {
            return Ok(None);
        };
        let last_sequence = parse_field::<u64>("seq", &seq)?;
        let events = match page.range(last_sequence) {
            None => Vec::new(),
            Some((from, to)) => {
                let range = redis::cmd("XRANGE")
                    .arg(&keys.events)
                    .arg(format!("{from}-1"))
                    .arg(format!("{to}-1"))
                    .clone();
                let reply: Value = self.query(&range).await?;
                stream_entries(reply)?
            }
        };
        Ok(Some(EventsRead { events, last_sequence }))
    }

    async fn watch(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EventStream>> {
        let events = self.watch_encoded(key, after_sequence).await?;
        Ok(events.map(|events| -> EventStream { Box::pin(events.map(|event| decode_event(event?.as_bytes()))) }))
    }

    async fn watch_encoded(&self, key: &SessionKey, after_sequence: Option<u64>) -> Result<Option<EncodedEventStream>> {
        let keys = SessionKeys::new(key);
        let (create_us, seq): (Option<String>, Option<String>) = self
            .query(redis::cmd("HMGET").arg(&keys.meta).arg("create_us").arg("seq"))
            .await?;
        let (Some(create_us), Some(seq)) = (create_us, seq) else {
            return Ok(None);
        };
        let current: u64 = parse_field("seq", &seq)?;
        let start = after_sequence.unwrap_or(current);
        let feed = FeedKey {
            meta: keys.meta.clone(),
            events: keys.events.clone(),
            create_us,
        };
        // Listening before the catch-up read, so no event falls between the two.
        let receiver = self.watches.subscribe(&feed, current);
        let not_found = key.not_found().to_string();
        Ok(Some(watch_hub::watcher_stream(
            self.watches.clone(),
            feed,
            start,
            receiver,
            not_found,
        )))
    }

    async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }
}

// ---------- stored values ----------

/// A time as stored: microseconds since the epoch (index scores) plus the nanoseconds beyond them.
struct Micros {
    us: String,
    ns: String,
}

impl Micros {
    fn of(t: DateTime<Utc>) -> Micros {
        Micros {
            us: t.timestamp_micros().to_string(),
            ns: (t.timestamp_subsec_nanos() % 1000).to_string(),
        }
    }
}

/// The session meta hash, decoded.
struct Meta {
    create_time: DateTime<Utc>,
    update_time: DateTime<Utc>,
    seq: u64,
    expire_time: Option<DateTime<Utc>>,
}

impl Meta {
    fn parse(h: &HashMap<String, String>) -> Result<Meta> {
        let get = |name: &str| {
            h.get(name)
                .map(String::as_str)
                .ok_or_else(|| AdkError::Internal(format!("stored session meta has no {name}")))
        };
        let time = |us: &str, ns: &str| -> Result<DateTime<Utc>> {
            let us: i64 = parse_field(us, get(us)?)?;
            let ns: i64 = h.get(ns).map_or(Ok(0), |v| parse_field(ns, v))?;
            DateTime::from_timestamp_micros(us)
                .and_then(|t| t.checked_add_signed(chrono::Duration::nanoseconds(ns)))
                .ok_or_else(|| AdkError::Internal(format!("stored session time {us}µs is out of range")))
        };
        Ok(Meta {
            create_time: time("create_us", "create_ns")?,
            update_time: time("update_us", "update_ns")?,
            seq: parse_field("seq", get("seq")?)?,
            expire_time: parse_expire(h.get("expire_ms").map_or("", String::as_str))?,
        })
    }
}

/// What one read of a session returns.
struct Snapshot {
    meta: Meta,
    state: Fields,
    user: Fields,
    /// The events as stored (an `adk.v1.Event` encoding each), decoded only by a reader
    /// that needs them: GetSession's reply carries them as they are.
    events: Vec<EncodedEvent>,
}

impl Snapshot {
    fn decode_events(&mut self) -> Result<Vec<Event>> {
        std::mem::take(&mut self.events)
            .iter()
            .map(|event| decode_event(event.as_bytes()))
            .collect()
    }
}

impl Snapshot {
    fn into_session(self, keys: &SessionKeys, app_state: &Fields, events: Vec<Event>) -> Session {
        Session {
            id: keys.session_id.clone(),
            app_name: keys.app_name.clone(),
            user_id: keys.user_id.clone(),
            state: merge_state(app_state.clone(), self.user, self.state),
            events: Events::new(events),
            create_time: self.meta.create_time,
            last_update_time: self.meta.update_time,
            event_count: self.meta.seq,
            expire_time: self.meta.expire_time,
        }
    }
}

/// A validated TTL (at most `MAX_SESSION_TTL`, so "now + ttl" stays an exact, valid
/// Redis expire time) in milliseconds.
fn ttl_millis(ttl: Duration) -> i64 {
    // A positive TTL below 1 ms still expires (Redis expiry has millisecond resolution).
    i64::try_from(ttl.as_millis().max(1)).unwrap_or(i64::MAX)
}

fn parse_expire(expire_ms: &str) -> Result<Option<DateTime<Utc>>> {
    if expire_ms.is_empty() {
        return Ok(None);
    }
    let ms: i64 = parse_field("expire_ms", expire_ms)?;
    DateTime::from_timestamp_millis(ms)
        .map(Some)
        .ok_or_else(|| AdkError::Internal(format!("stored expire time {ms}ms is out of range")))
}

fn parse_field<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| AdkError::Internal(format!("stored session {name} is not a number: {value:?}")))
}

fn json_fields(raw: HashMap<String, String>) -> Result<Fields> {
    raw.into_iter()
        .map(|(key, text)| {
            let value = serde_json::from_str(&text)
                .map_err(|e| AdkError::Internal(format!("stored state value of {key:?} is not JSON: {e}")))?;
            Ok((key, value))
        })
        .collect()
}

fn decode_event(bytes: &[u8]) -> Result<Event> {
    let proto =
        pb::Event::decode(bytes).map_err(|e| AdkError::Internal(format!("stored event does not decode: {e}")))?;
    Event::try_from(proto).map_err(|e| AdkError::Internal(format!("stored event is invalid: {e}")))
}

/// A run mark as `lua::RUN_MARK` stores it: `<after sequence>:<event bytes>`.
fn decode_run_mark(entry: &[u8]) -> Result<RunMark> {
    let broken = || AdkError::Internal("a stored run mark is not `<sequence>:<event>`".into());
    let colon = entry.iter().position(|&b| b == b':').ok_or_else(broken)?;
    let after_sequence = std::str::from_utf8(&entry[..colon])
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(broken)?;
    Ok(RunMark {
        after_sequence,
        event: decode_event(&entry[colon + 1..])?,
    })
}

fn expect_status(status: &str, expected: &[&str]) -> Result<()> {
    if expected.contains(&status) {
        Ok(())
    } else {
        Err(AdkError::Internal(format!(
            "unexpected script status from redis: {status:?}"
        )))
    }
}

// ---------- stream replies ----------

/// `XRANGE` / `XREVRANGE` entries as the stored events, each with the sequence of its entry id.
fn stream_entries(reply: Value) -> Result<Vec<EncodedEvent>> {
    let entries = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(entries) => entries,
        _ => return Err(bad_stream_reply("not an array")),
    };
    entries
        .into_iter()
        .map(|entry| {
            let (id, fields): (String, Vec<Vec<u8>>) = decode_reply(entry)?;
            let sequence = entry_sequence(&id)?;
            let mut fields = fields.into_iter();
            while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
                if name == b"e" {
                    return Ok(EncodedEvent::from_stored(sequence, value));
                }
            }
            Err(bad_stream_reply("entry has no event"))
        })
        .collect()
}

/// The sequence of a log entry's id, `<seq>-1`.
fn entry_sequence(id: &str) -> Result<u64> {
    id.split_once('-')
        .and_then(|(seq, _)| seq.parse().ok())
        .ok_or_else(|| bad_stream_reply("entry id is not <seq>-1"))
}

fn bad_stream_reply(what: &str) -> AdkError {
    AdkError::Internal(format!("unexpected stream reply from redis: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_round_trip_to_the_nanosecond() {
        for t in [
            Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap(),
            Utc.timestamp_opt(-5, 999_999_999).unwrap(),
            Utc.timestamp_opt(0, 0).unwrap(),
        ] {
            let m = Micros::of(t);
            let h = HashMap::from([
                ("create_us".to_string(), m.us.clone()),
                ("create_ns".to_string(), m.ns.clone()),
                ("update_us".to_string(), m.us.clone()),
                ("update_ns".to_string(), m.ns.clone()),
                ("seq".to_string(), "3".to_string()),
            ]);
            let meta = Meta::parse(&h).unwrap();
            assert_eq!(meta.create_time, t);
            assert_eq!(meta.update_time, t);
            assert_eq!(meta.seq, 3);
            assert_eq!(meta.expire_time, None);
        }
    }

    #[test]
    fn a_sequence_appended_to_the_encoding_decodes() {
        // What lua::APPEND does: field 16 (key bytes 0x80 0x01) and a varint after the event.
        let event = Event::new("inv").with_author("a");
        let mut bytes = pb::Event::from(&event).encode_to_vec();
        bytes.extend([0x80, 0x01, 0xac, 0x02]); // 300
        let decoded = decode_event(&bytes).unwrap();
        assert_eq!(decoded.sequence, 300);
        assert_eq!(Event { sequence: 0, ..decoded }, event);
    }

    #[test]
    fn stream_replies_decode() {
        let entry = |id: &str, bytes: &[u8]| {
            Value::Array(vec![
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Array(vec![
                    Value::BulkString(b"e".to_vec()),
                    Value::BulkString(bytes.to_vec()),
                ]),
            ])
        };
        let reply = Value::Array(vec![entry("1-1", b"x"), entry("2-1", b"y")]);
        assert_eq!(
            stream_entries(reply.clone()).unwrap(),
            [
                EncodedEvent::from_stored(1, b"x".to_vec()),
                EncodedEvent::from_stored(2, b"y".to_vec())
            ]
        );
        assert!(stream_entries(Value::Int(3)).is_err());
    }
}
