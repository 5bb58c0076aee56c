//! [`SessionLease`] backends: in memory (one process) and Redis (every replica
//! that shares the Redis sees the same leases).
//!
//! Redis keeps, per busy session, under the same hash tag as the session's own
//! keys (so on a cluster they live beside the session they guard):
//! - `adk:lease:{<app>:<user>}:<session>`: the owner token, expiring after the TTL;
//!   the append script reads it to fence a runner that lost its lease;
//! - `…:holder`: the owner too, without the short TTL, deleted on release: a
//!   holder record that outlives the lease means its runner died mid-invocation;
//! - `…:cancel`: the owner whose cancellation was requested, read by its renewal;
//! - `…:run`: a resumable run's record (hash: `invocation`, `owner`, `options`,
//!   `expires` in ms), kept by the renewals for [`RUN_RECORD_GRACE`] past the lease,
//!   so that once the lease lapses (or is handed over) another replica claims it.
//!
//! And one index of the running resumable runs, [`RUNS_INDEX`]: a sorted set of
//! `[app, user, session]` by lease expiry (ms, Redis's clock), which every replica
//! scans for lapsed runs. It is only an index: every claim is a script on the
//! session's own keys, fenced like an acquire, and a stale entry is dropped by the
//! first scan that finds no record behind it. On a cluster it is one key in one slot,
//! written once per renewal of a resumable run.
//!
//! Every change is one script, so a holder whose lease expired and was taken by
//! another can neither extend nor delete the new holder's lease. Cancel requests
//! are also published on [`CANCEL_CHANNEL`]; each process listens on one
//! connection (a classic `PUBLISH` reaches every node of a cluster).

use crate::ReplicaAcks;
use crate::redis::conn::{RedisStore, decode_reply};
use crate::redis::pubsub::spawn_channel_listener;
use crate::redis::script_args::ScriptArgs;
use crate::redis::{subscriber_clients, user_tag};
use adk_grpc_core::sync;
use adk_grpc_core::validate::id_key;
use adk_grpc_core::{
    Acquire, ClaimedRun, Clock, LeaseKey, RUN_RECORD_GRACE, Renewal, Result, RunRecord, SessionLease, claim_owner,
    owner_invocation,
};
use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use redis::{FromRedisValue, Script, ScriptInvocation};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

/// The channel cancel requests are published on (payload: the owner token).
pub const CANCEL_CHANNEL: &str = "adk:cancel";
/// How many cancel requests a slow listener may fall behind by before it misses
/// some (it then learns them from its next renewal).
const CANCEL_BACKLOG: usize = 1024;
/// How long a crashed holder's record is kept for the next holder to find.
const HOLDER_RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a cancel request waits for its holder's renewal.
const CANCEL_MARK_TTL: Duration = Duration::from_secs(60);
/// The index of running resumable runs (see the module doc).
pub const RUNS_INDEX: &str = "adk:runs";

/// Whether `token` is `owner` or one of its claims: a cancel naming an invocation
/// reaches it under whichever claim runs it now.
fn owner_matches(token: &str, owner: &str) -> bool {
    token == owner || owner_invocation(token) == owner
}

/// A fresh claim id for a resumed run's owner token.
fn claim_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

fn cancel_stream(sender: &broadcast::Sender<String>) -> BoxStream<'static, String> {
    // A listener that fell behind skips what it missed: renewals catch it up.
    BroadcastStream::new(sender.subscribe())
        .filter_map(|owner| async move { owner.ok() })
        .boxed()
}

/// Leases in this process only: enough for one runner replica (and for tests).
/// Clones share the leases. An [`InMemorySessionBackend`](crate::InMemorySessionBackend)
/// fences appends with the leases it was given (`with_leases`).
#[derive(Debug, Clone)]
pub struct InMemorySessionLease {
    holders: Arc<Mutex<HashMap<LeaseKey, Holder>>>,
    /// Per session, the owners waiting in turn (`acquire_in_turn`), first first, each
    /// with the time its place lapses unless it asks again.
    lines: Arc<Mutex<HashMap<LeaseKey, Line>>>,
    cancels: broadcast::Sender<String>,
    /// When leases expire (tests advance a manual one instead of waiting).
    clock: Clock,
    /// Resumable runs by session (locked after `holders` when both are needed).
    runs: Arc<Mutex<HashMap<LeaseKey, MemoryRun>>>,
}

/// A resumable run's record in memory.
#[derive(Debug)]
struct MemoryRun {
    invocation_id: String,
    owner: String,
    options: String,
    /// When its holder's lease ran out (or runs out), as last renewed.
    expires: Instant,
}

/// The owners waiting in turn for one session's lease, first first, each with the time
/// its place lapses.
type Line = VecDeque<(String, Instant)>;

impl Default for InMemorySessionLease {
    fn default() -> Self {
        InMemorySessionLease {
            holders: Arc::default(),
            lines: Arc::default(),
            cancels: broadcast::channel(CANCEL_BACKLOG).0,
            clock: Clock::system(),
            runs: Arc::default(),
        }
    }
}

/// A lease, kept after it expires (until released or taken): an expired entry
/// whose owner never released it is a crashed holder.
#[derive(Debug)]
struct Holder {
    owner: String,
    expires: Instant,
    cancel_requested: bool,
}

impl InMemorySessionLease {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same leases expiring by `clock`: tests pass a [`Clock::manual`] and advance
    /// it past a lease's TTL instead of sleeping.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    fn holders(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseKey, Holder>> {
        // A panic while holding this lock cannot leave the map half-updated
        // (every change is one insert or remove), so a poisoned lock is still usable.
        sync::lock(&self.holders)
    }

    /// The append fence: false when someone else holds the lease on `key`, or
    /// `owner`'s lease ran out. A session these leases know nothing of passes: its
    /// runner took its lease elsewhere (a lease not linked to the store, which then
    /// cannot fence).
    pub(crate) fn fence_allows(&self, key: &LeaseKey, owner: &str) -> bool {
        self.holders()
            .get(key)
            .is_none_or(|holder| holder.owner == owner && holder.expires > self.clock.instant())
    }
}

#[async_trait]
impl SessionLease for InMemorySessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let mut holders = self.holders();
        let now = self.clock.instant();
        if let Some(waiting) = self.awaiting_resumption(&holders, key, owner, now) {
            return Ok(Acquire::Held(waiting));
        }
        let interrupted = match holders.get(key) {
            Some(holder) if holder.owner != owner && holder.expires > now => {
                return Ok(Acquire::Held(holder.owner.clone()));
            }
            Some(holder) if holder.owner != owner => Some(holder.owner.clone()),
            _ => None,
        };
        let cancel_requested = holders.get(key).is_some_and(|h| h.owner == owner && h.cancel_requested);
        holders.insert(
            key.clone(),
            Holder {
                owner: owner.to_string(),
                expires: now + ttl,
                cancel_requested,
            },
        );
        Ok(Acquire::Acquired { interrupted })
    }

    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        let first = {
            let mut lines = sync::lock(&self.lines);
            let line = lines.entry(key.clone()).or_default();
            let now = self.clock.instant();
            match line.iter_mut().find(|(waiting, _)| waiting == owner) {
                Some((_, lapses)) => *lapses = now + patience,
                None => line.push_back((owner.to_string(), now + patience)),
            }
            line.retain(|(waiting, lapses)| waiting == owner || *lapses >= now);
            line.front().map(|(first, _)| first.clone())
        };
        if first.as_deref() != Some(owner) {
            let running = self.holders().get(key).map(|holder| holder.owner.clone());
            return Ok(Acquire::Held(running.or(first).unwrap_or_default()));
        }
        let acquired = self.acquire(key, owner, ttl).await?;
        if matches!(acquired, Acquire::Acquired { .. }) {
            let mut lines = sync::lock(&self.lines);
            if let Some(line) = lines.get_mut(key) {
                line.retain(|(waiting, _)| waiting != owner);
                if line.is_empty() {
                    lines.remove(key);
                }
            }
        }
        Ok(acquired)
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        let mut holders = self.holders();
        let now = self.clock.instant();
        match holders.get_mut(key) {
            Some(holder) if holder.owner == owner && holder.expires > now => {
                holder.expires = now + ttl;
                if let Some(run) = sync::lock(&self.runs).get_mut(key).filter(|run| run.owner == owner) {
                    run.expires = now + ttl;
                }
                Ok(if holder.cancel_requested {
                    Renewal::CancelRequested
                } else {
                    Renewal::Held
                })
            }
            _ => Ok(Renewal::Lost),
        }
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let mut holders = self.holders();
        if holders.get(key).is_some_and(|holder| holder.owner == owner) {
            holders.remove(key);
        }
        let mut runs = sync::lock(&self.runs);
        if runs.get(key).is_some_and(|run| run.owner == owner) {
            runs.remove(key);
        }
        Ok(())
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        let mut holders = self.holders();
        let now = self.clock.instant();
        match holders.get_mut(key) {
            Some(holder) if owner_matches(&holder.owner, owner) && holder.expires > now => {
                holder.cancel_requested = true;
                // No listener is fine: the holder's renewal sees the mark.
                let _ = self.cancels.send(holder.owner.clone());
                Ok(true)
            }
            _ => {
                // A run awaiting resumption is dropped instead: nobody resumes it.
                let mut runs = sync::lock(&self.runs);
                let waiting = runs.get(key).is_some_and(|run| owner_matches(&run.owner, owner));
                if waiting {
                    runs.remove(key);
                }
                Ok(waiting)
            }
        }
    }

    fn cancel_requests(&self) -> BoxStream<'static, String> {
        cancel_stream(&self.cancels)
    }

    async fn register_run(&self, record: &RunRecord, owner: &str, _ttl: Duration) -> Result<bool> {
        let holders = self.holders();
        let now = self.clock.instant();
        let Some(holder) = holders
            .get(&record.key)
            .filter(|holder| holder.owner == owner && holder.expires > now)
        else {
            return Ok(false);
        };
        let run = MemoryRun {
            invocation_id: record.invocation_id.clone(),
            owner: owner.to_string(),
            options: record.options.clone(),
            expires: holder.expires,
        };
        sync::lock(&self.runs).insert(record.key.clone(), run);
        Ok(true)
    }

    async fn claim_lapsed(&self, apps: &[String], ttl: Duration, limit: usize) -> Result<Vec<ClaimedRun>> {
        let mut holders = self.holders();
        let mut runs = sync::lock(&self.runs);
        let now = self.clock.instant();
        // Records nobody resumed within the grace are forgotten: the session's next run
        // closes their invocation as interrupted.
        runs.retain(|_, run| run.expires + RUN_RECORD_GRACE > now);
        let mut claimed = Vec::new();
        let mut cancelled = Vec::new();
        for (key, run) in runs.iter_mut() {
            if claimed.len() >= limit || !apps.contains(&key.app_name) {
                continue;
            }
            match holders.get(key) {
                Some(holder) if holder.expires > now => continue,
                // Cancelled before its runner died: dropped below, not resumed.
                Some(holder) if holder.owner == run.owner && holder.cancel_requested => {
                    cancelled.push(key.clone());
                    continue;
                }
                _ => {}
            }
            let owner = claim_owner(&run.invocation_id, &claim_id());
            holders.insert(
                key.clone(),
                Holder {
                    owner: owner.clone(),
                    expires: now + ttl,
                    cancel_requested: false,
                },
            );
            let lapsed_for = now.saturating_duration_since(run.expires);
            run.owner.clone_from(&owner);
            run.expires = now + ttl;
            claimed.push(ClaimedRun {
                record: RunRecord {
                    key: key.clone(),
                    invocation_id: run.invocation_id.clone(),
                    options: run.options.clone(),
                },
                owner,
                lapsed_for,
            });
        }
        for key in cancelled {
            runs.remove(&key);
        }
        Ok(claimed)
    }

    async fn hand_over(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let mut holders = self.holders();
        let mut runs = sync::lock(&self.runs);
        let now = self.clock.instant();
        let held = holders.get(key).is_some_and(|holder| holder.owner == owner);
        match runs.get_mut(key) {
            Some(run) if held && run.owner == owner => {
                // Lapsed at once: the next scan (on any replica) claims it.
                run.expires = now;
                if let Some(holder) = holders.get_mut(key) {
                    holder.expires = now;
                }
            }
            _ if held => {
                holders.remove(key);
            }
            _ => {}
        }
        Ok(())
    }
}

impl InMemorySessionLease {
    /// The owner of a recorded run on `key` whose lease lapsed and that waits (within
    /// the grace) for a replica to resume it; the session is busy with it meanwhile.
    fn awaiting_resumption(
        &self,
        holders: &HashMap<LeaseKey, Holder>,
        key: &LeaseKey,
        owner: &str,
        now: Instant,
    ) -> Option<String> {
        if holders.get(key).is_some_and(|holder| holder.expires > now) {
            return None;
        }
        let runs = sync::lock(&self.runs);
        let run = runs.get(key)?;
        (run.owner != owner && run.expires + RUN_RECORD_GRACE > now).then(|| run.owner.clone())
    }
}

/// Takes the lease, or extends it for the same owner; otherwise returns the holder.
/// A free lease whose holder record names another owner was never released: that
/// owner is returned as interrupted, unless its run record still waits for a replica
/// to resume it (the session is busy with it until then).
///
/// KEYS and ARGV: [`AcquireArgs`].
/// Returns `{1, interrupted owner or ''}` or `{0, holder}`.
const ACQUIRE: &str = r"
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {0, holder} end
if not holder then
  local waiting = redis.call('HGET', KEYS[3], 'owner')
  if waiting and waiting ~= ARGV[1] then return {0, waiting} end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder then return {1, ''} end
local previous = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if previous and previous ~= ARGV[1] then return {1, previous} end
return {1, ''}
";

/// ACQUIRE in turn: the owner joins the session's line (a sorted set by arrival ticket)
/// unless it is in it, and its place lapses after its patience unless it asks again;
/// lapsed places at the head are dropped; the lease is taken only when free and the
/// owner is first in line (it then leaves the line).
///
/// KEYS and ARGV: [`AcquireInTurnArgs`].
/// Returns as ACQUIRE; `{0, holder or first in line}` when it is not this owner's turn.
const ACQUIRE_IN_TURN: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[1])
end
redis.call('HSET', KEYS[5], ARGV[1], now + tonumber(ARGV[4]))
for _, key in ipairs({KEYS[3], KEYS[4], KEYS[5]}) do redis.call('PEXPIRE', key, ARGV[3]) end
local first
while true do
  first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not first or tonumber(redis.call('HGET', KEYS[5], first) or '0') >= now then break end
  redis.call('ZREM', KEYS[3], first)
  redis.call('HDEL', KEYS[5], first)
end
local holder = redis.call('GET', KEYS[1])
if first ~= ARGV[1] then return {0, holder or first} end
if holder and holder ~= ARGV[1] then return {0, holder} end
if not holder then
  local waiting = redis.call('HGET', KEYS[6], 'owner')
  if waiting and waiting ~= ARGV[1] then return {0, waiting} end
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder then return {1, ''} end
local previous = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if previous and previous ~= ARGV[1] then return {1, previous} end
return {1, ''}
";

/// Extends the lease only while the owner holds it, and the owner's run record with
/// it: `{0}` lost, `{1, expires}` held, `{2, expires}` held and cancel requested;
/// `expires` is the lease's new expiry in ms for a recorded run, else 0.
///
/// KEYS and ARGV: [`RenewArgs`].
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local expires = 0
if redis.call('HGET', KEYS[3], 'owner') == ARGV[1] then
  local time = redis.call('TIME')
  expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[2])
  redis.call('HSET', KEYS[3], 'expires', expires)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return {2, expires} end
return {1, expires}
";

/// Deletes the lease, the holder record and the cancel mark, each only while the owner
/// is named in it.
///
/// KEYS and ARGV: [`ReleaseArgs`]. Returns 1 when it deleted the owner's run record.
const RELEASE: &str = r"
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
if redis.call('HGET', KEYS[4], 'owner') == ARGV[1] then
  redis.call('DEL', KEYS[4])
  return 1
end
return 0
";

/// Marks the holder's cancellation and publishes it, only while the owner (or a claim
/// of it, `<owner>@…`) holds the lease; a recorded run of the owner awaiting
/// resumption is dropped instead, so no replica resumes it.
///
/// KEYS and ARGV: [`CancelArgs`]. Returns 1 (marked), 2 (dropped) or 0.
const CANCEL: &str = r"
local function mine(token)
  return token == ARGV[1] or string.sub(token, 1, #ARGV[1] + 1) == ARGV[1] .. '@'
end
local holder = redis.call('GET', KEYS[1])
if holder then
  if not mine(holder) then return 0 end
  redis.call('SET', KEYS[2], holder, 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], holder)
  return 1
end
local waiting = redis.call('HGET', KEYS[3], 'owner')
if waiting and mine(waiting) then
  redis.call('DEL', KEYS[3])
  return 2
end
return 0
";

/// Records a resumable run under its owner's lease (only while the owner holds it).
///
/// KEYS and ARGV: [`RegisterArgs`]. Returns the lease's expiry in ms, or 0.
const REGISTER: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local time = redis.call('TIME')
local expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + redis.call('PTTL', KEYS[1])
redis.call('HSET', KEYS[2], 'invocation', ARGV[2], 'owner', ARGV[1], 'options', ARGV[3], 'expires', expires)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return expires
";

/// Claims a recorded run whose lease lapsed: takes the lease under
/// `<invocation>@<claim>` (its holder record too) and names the new owner in the record.
/// A run whose cancel was requested before its holder died is dropped instead.
///
/// KEYS and ARGV: [`ClaimArgs`]. Returns `{1, invocation, owner, options, lapsed ms,
/// expires}`, `{0}` while the lease is held, `{-1}` when there is no run to claim.
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
local run = redis.call('HMGET', KEYS[4], 'invocation', 'owner', 'options', 'expires')
if not run[1] then return {-1} end
if redis.call('GET', KEYS[3]) == run[2] then
  redis.call('DEL', KEYS[4])
  return {-1}
end
local owner = run[1] .. '@' .. ARGV[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expires = now + tonumber(ARGV[2])
redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
redis.call('SET', KEYS[2], owner, 'PX', ARGV[3])
redis.call('HSET', KEYS[4], 'owner', owner, 'expires', expires)
redis.call('PEXPIRE', KEYS[4], ARGV[4])
return {1, run[1], owner, run[3], math.max(0, now - tonumber(run[4] or now)), expires}
";

/// Hands the owner's recorded run over: the lease is deleted and the record marked
/// lapsed now, so the next scan claims it; a run not recorded is released.
///
/// KEYS and ARGV: [`HandOverArgs`]. Returns 1 when handed over, else 0.
const HAND_OVER: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[4], 'owner') ~= ARGV[1] then
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
    if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
  end
  return 0
end
redis.call('DEL', KEYS[1])
local time = redis.call('TIME')
redis.call('HSET', KEYS[4], 'expires', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
return 1
";

/// Leases in Redis, shared by every runner replica that uses the same Redis
/// (standalone or cluster). Cheap to clone; clones share the connection and the
/// one subscriber connection that hears cancel requests.
#[derive(Clone)]
pub struct RedisSessionLease {
    store: RedisStore,
    scripts: Arc<Scripts>,
    cancels: Arc<broadcast::Sender<String>>,
}

impl std::fmt::Debug for RedisSessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessionLease")
            .field("cluster", &self.store.is_cluster())
            .finish()
    }
}

impl RedisSessionLease {
    /// Connects to the same URLs as the session store: `redis://…`, `rediss://…`,
    /// `redis+cluster://h1:p1,h2:p2`, `rediss+cluster://…`. A lease change is
    /// acknowledged once the replicas `acks` asks for have it.
    pub async fn connect(url: &str, acks: ReplicaAcks) -> Result<Self> {
        let cancels = Arc::new(broadcast::channel(CANCEL_BACKLOG).0);
        spawn_cancel_listener(&cancels, subscriber_clients(url)?);
        Ok(RedisSessionLease {
            store: RedisStore::connect(url, acks).await?,
            scripts: Arc::new(Scripts::new()),
            cancels,
        })
    }

    /// Runs one of the lease scripts on `lease`, durably (each may change the lease);
    /// `name` names it in spans and metrics.
    async fn eval<T: FromRedisValue>(
        &self,
        name: &str,
        args: &impl ScriptArgs<Scripts = Scripts>,
        lease: &str,
    ) -> Result<T> {
        let invocation = args.invocation(&self.scripts)?;
        self.store.durable_eval(name, &invocation, lease).await
    }
}

/// Hands cancel requests heard on [`CANCEL_CHANNEL`] to `cancels`, until the lease
/// (the sender) is dropped. A request published while the subscription is down is
/// not lost: the holder's renewal reads its mark.
fn spawn_cancel_listener(cancels: &Arc<broadcast::Sender<String>>, nodes: Vec<redis::Client>) {
    let cancels: Weak<broadcast::Sender<String>> = Arc::downgrade(cancels);
    spawn_channel_listener(
        CANCEL_CHANNEL,
        nodes,
        Box::new(move |message| {
            let Some(cancels) = cancels.upgrade() else { return false };
            if let Some(owner) = message.filter(|owner| !owner.is_empty()) {
                // No listener is fine: the holder's renewal sees the mark.
                let _ = cancels.send(owner);
            }
            true
        }),
    );
}

fn millis(ttl: Duration) -> String {
    ttl.as_millis().max(1).to_string()
}

/// `adk:lease:{app:user}:<session>`: the session's hash tag, so on a cluster the
/// lease lives beside the session it guards (and the append script can read it).
pub(crate) fn lease_key(key: &LeaseKey) -> String {
    format!(
        "adk:lease:{}:{}",
        user_tag(&key.app_name, &key.user_id),
        id_key(&key.session_id)
    )
}

/// `lease`'s holder record (`lease` is [`lease_key`]'s).
fn holder_key(lease: &str) -> String {
    format!("{lease}:holder")
}

/// `lease`'s cancel mark.
fn cancel_key(lease: &str) -> String {
    format!("{lease}:cancel")
}

/// `lease`'s line of owners waiting in turn.
fn line_key(lease: &str) -> String {
    format!("{lease}:line")
}

/// `lease`'s resumable run record.
fn run_key(lease: &str) -> String {
    format!("{lease}:run")
}

/// A session's member of [`RUNS_INDEX`]: `[app, user, session]` as JSON.
fn index_member(key: &LeaseKey) -> String {
    serde_json::json!([key.app_name, key.user_id, key.session_id]).to_string()
}

fn member_key(member: &str) -> Option<LeaseKey> {
    let (app_name, user_id, session_id): (String, String, String) = serde_json::from_str(member).ok()?;
    Some(LeaseKey {
        app_name,
        user_id,
        session_id,
    })
}

/// How long a run record lives past a renewal: the lease, then the grace.
fn record_ttl(ttl: Duration) -> Duration {
    ttl + RUN_RECORD_GRACE
}

// ---------- the scripts' inputs (see `crate::redis::script_args`) ----------

struct Scripts {
    acquire: Script,
    acquire_in_turn: Script,
    renew: Script,
    release: Script,
    cancel: Script,
    register: Script,
    claim: Script,
    hand_over: Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            acquire: Script::new(AcquireArgs::SOURCE),
            acquire_in_turn: Script::new(AcquireInTurnArgs::SOURCE),
            renew: Script::new(RenewArgs::SOURCE),
            release: Script::new(ReleaseArgs::SOURCE),
            cancel: Script::new(CancelArgs::SOURCE),
            register: Script::new(RegisterArgs::SOURCE),
            claim: Script::new(ClaimArgs::SOURCE),
            hand_over: Script::new(HandOverArgs::SOURCE),
        }
    }
}

/// `ACQUIRE`'s inputs.
struct AcquireArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
}

impl ScriptArgs for AcquireArgs<'_> {
    const SOURCE: &'static str = ACQUIRE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL));
        Ok(())
    }
}

/// `ACQUIRE_IN_TURN`'s inputs.
struct AcquireInTurnArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
    /// How long the owner's place in line lasts unless it asks again.
    patience: Duration,
}

impl ScriptArgs for AcquireInTurnArgs<'_> {
    const SOURCE: &'static str = ACQUIRE_IN_TURN;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire_in_turn
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let line = line_key(self.lease);
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(&line)
            // The ticket counter, and each place's lapse time (ms).
            .key(format!("{line}:ticket"))
            .key(format!("{line}:lapses"))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL))
            .arg(millis(self.patience));
        Ok(())
    }
}

/// `RENEW`'s inputs.
struct RenewArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    ttl: Duration,
}

impl ScriptArgs for RenewArgs<'_> {
    const SOURCE: &'static str = RENEW;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.renew
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(record_ttl(self.ttl)));
        Ok(())
    }
}

/// `RELEASE`'s inputs.
struct ReleaseArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
}

impl ScriptArgs for ReleaseArgs<'_> {
    const SOURCE: &'static str = RELEASE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.release
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner);
        Ok(())
    }
}

/// `CANCEL`'s inputs.
struct CancelArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
}

impl ScriptArgs for CancelArgs<'_> {
    const SOURCE: &'static str = CANCEL;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.cancel
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(CANCEL_MARK_TTL))
            .arg(CANCEL_CHANNEL);
        Ok(())
    }
}

/// `REGISTER`'s inputs.
struct RegisterArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
    invocation_id: &'a str,
    options: &'a str,
    ttl: Duration,
}

impl ScriptArgs for RegisterArgs<'_> {
    const SOURCE: &'static str = REGISTER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.register
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(self.invocation_id)
            .arg(self.options)
            .arg(millis(record_ttl(self.ttl)));
        Ok(())
    }
}

/// `CLAIM`'s inputs.
struct ClaimArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    /// The claim id the new owner token ends with.
    claim: &'a str,
    ttl: Duration,
}

impl ScriptArgs for ClaimArgs<'_> {
    const SOURCE: &'static str = CLAIM;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.claim
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.claim)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL))
            .arg(millis(record_ttl(self.ttl)));
        Ok(())
    }
}

/// `HAND_OVER`'s inputs.
struct HandOverArgs<'a> {
    /// [`lease_key`].
    lease: &'a str,
    owner: &'a str,
}

impl ScriptArgs for HandOverArgs<'_> {
    const SOURCE: &'static str = HAND_OVER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.hand_over
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner);
        Ok(())
    }
}

#[async_trait]
impl SessionLease for RedisSessionLease {
    async fn acquire(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Acquire> {
        let lease = lease_key(key);
        let args = AcquireArgs {
            lease: &lease,
            owner,
            ttl,
        };
        let (acquired, other): (i64, String) = self.eval("lease_acquire", &args, &lease).await?;
        Ok(if acquired == 1 {
            Acquire::Acquired {
                interrupted: Some(other).filter(|owner| !owner.is_empty()),
            }
        } else {
            Acquire::Held(other)
        })
    }

    async fn acquire_in_turn(&self, key: &LeaseKey, owner: &str, ttl: Duration, patience: Duration) -> Result<Acquire> {
        let lease = lease_key(key);
        let args = AcquireInTurnArgs {
            lease: &lease,
            owner,
            ttl,
            patience,
        };
        let (acquired, other): (i64, String) = self.eval("lease_acquire_in_turn", &args, &lease).await?;
        Ok(if acquired == 1 {
            Acquire::Acquired {
                interrupted: Some(other).filter(|owner| !owner.is_empty()),
            }
        } else {
            Acquire::Held(other)
        })
    }

    async fn renew(&self, key: &LeaseKey, owner: &str, ttl: Duration) -> Result<Renewal> {
        let lease = lease_key(key);
        let args = RenewArgs {
            lease: &lease,
            owner,
            ttl,
        };
        let (renewed, expires): (i64, i64) = self.eval("lease_renew", &args, &lease).await?;
        if expires > 0 {
            // Only an index: a failure here is repaired by the next renewal.
            self.index(key, expires).await;
        }
        Ok(match renewed {
            0 => Renewal::Lost,
            2 => Renewal::CancelRequested,
            _ => Renewal::Held,
        })
    }

    async fn release(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let lease = lease_key(key);
        let args = ReleaseArgs { lease: &lease, owner };
        let recorded: i64 = self.eval("lease_release", &args, &lease).await?;
        if recorded == 1 {
            self.unindex(key).await;
        }
        Ok(())
    }

    async fn request_cancel(&self, key: &LeaseKey, owner: &str) -> Result<bool> {
        let lease = lease_key(key);
        let args = CancelArgs { lease: &lease, owner };
        let marked: i64 = self.eval("lease_cancel", &args, &lease).await?;
        if marked == 2 {
            self.unindex(key).await;
        }
        Ok(marked != 0)
    }

    fn cancel_requests(&self) -> BoxStream<'static, String> {
        cancel_stream(&self.cancels)
    }

    async fn register_run(&self, record: &RunRecord, owner: &str, ttl: Duration) -> Result<bool> {
        let lease = lease_key(&record.key);
        let args = RegisterArgs {
            lease: &lease,
            owner,
            invocation_id: &record.invocation_id,
            options: &record.options,
            ttl,
        };
        let expires: i64 = self.eval("lease_register_run", &args, &lease).await?;
        if expires > 0 {
            self.index(&record.key, expires).await;
        }
        Ok(expires > 0)
    }

    async fn claim_lapsed(&self, apps: &[String], ttl: Duration, limit: usize) -> Result<Vec<ClaimedRun>> {
        let (secs, micros): (i64, i64) = self.store.query(&redis::cmd("TIME")).await?;
        let now = secs * 1000 + micros / 1000;
        // A few more than the limit: some belong to apps another replica serves.
        let due: Vec<String> = self
            .store
            .query(
                redis::cmd("ZRANGEBYSCORE")
                    .arg(RUNS_INDEX)
                    .arg("-inf")
                    .arg(now)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit.saturating_mul(4).max(16)),
            )
            .await?;
        let mut claimed = Vec::new();
        for member in due {
            if claimed.len() >= limit {
                break;
            }
            let Some(key) = member_key(&member) else {
                self.unindex_member(&member).await;
                continue;
            };
            if !apps.contains(&key.app_name) {
                continue;
            }
            let lease = lease_key(&key);
            let claim = claim_id();
            let args = ClaimArgs {
                lease: &lease,
                claim: &claim,
                ttl,
            };
            let reply: Vec<redis::Value> = self.eval("lease_claim_run", &args, &lease).await?;
            let outcome: i64 = reply.first().map_or(Ok(-1), |v| decode_reply(v.clone()))?;
            match outcome {
                1 => {
                    let (_, invocation_id, owner, options, lapsed_ms, expires): (
                        i64,
                        String,
                        String,
                        String,
                        u64,
                        i64,
                    ) = decode_reply(redis::Value::Array(reply))?;
                    self.index(&key, expires).await;
                    claimed.push(ClaimedRun {
                        record: RunRecord {
                            key,
                            invocation_id,
                            options,
                        },
                        owner,
                        lapsed_for: Duration::from_millis(lapsed_ms),
                    });
                }
                // Nothing behind the entry any more (finished, cancelled, forgotten).
                -1 => self.unindex_member(&member).await,
                // Held: by a live runner whose renewal will move the entry, or by a new run.
                _ => {}
            }
        }
        Ok(claimed)
    }

    async fn hand_over(&self, key: &LeaseKey, owner: &str) -> Result<()> {
        let lease = lease_key(key);
        let args = HandOverArgs { lease: &lease, owner };
        let handed: i64 = self.eval("lease_hand_over", &args, &lease).await?;
        if handed == 1 {
            // Due at once: the next scan of any replica claims it.
            self.index(key, 0).await;
        }
        Ok(())
    }
}

impl RedisSessionLease {
    /// Puts the session's run in [`RUNS_INDEX`] as due at `expires` (ms).
    async fn index(&self, key: &LeaseKey, expires: i64) {
        let add = redis::cmd("ZADD")
            .arg(RUNS_INDEX)
            .arg(expires)
            .arg(index_member(key))
            .clone();
        if let Err(e) = self.store.query::<i64>(&add).await {
            tracing::warn!(session_id = %key.session_id, error = %e, "could not index a resumable run; its next renewal will");
        }
    }

    async fn unindex(&self, key: &LeaseKey) {
        self.unindex_member(&index_member(key)).await;
    }

    async fn unindex_member(&self, member: &str) {
        let remove = redis::cmd("ZREM").arg(RUNS_INDEX).arg(member).clone();
        if let Err(e) = self.store.query::<i64>(&remove).await {
            tracing::warn!(error = %e, "could not drop a finished run from the index; the next scan will");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_testkit::RedisServer;

    fn key(session: &str) -> LeaseKey {
        LeaseKey {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: session.into(),
        }
    }

    fn acquired() -> Acquire {
        Acquire::Acquired { interrupted: None }
    }

    /// The contract every backend keeps.
    async fn lease_contract(lease: &dyn SessionLease) {
        let ttl = Duration::from_secs(30);
        let k = key("s1");
        assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), acquired());
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
        // Re-acquiring one's own lease extends it.
        assert_eq!(lease.acquire(&k, "a", ttl).await.unwrap(), acquired());
        // Other sessions are independent.
        assert_eq!(lease.acquire(&key("s2"), "b", ttl).await.unwrap(), acquired());
        // Only the holder renews or releases.
        assert_eq!(lease.renew(&k, "a", ttl).await.unwrap(), Renewal::Held);
        assert_eq!(lease.renew(&k, "b", ttl).await.unwrap(), Renewal::Lost);
        lease.release(&k, "b").await.unwrap();
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), Acquire::Held("a".into()));
        lease.release(&k, "a").await.unwrap();
        assert_eq!(lease.renew(&k, "a", ttl).await.unwrap(), Renewal::Lost);
        // Released: the next holder finds nothing interrupted.
        assert_eq!(lease.acquire(&k, "b", ttl).await.unwrap(), acquired());

        // A cancel request reaches only the named holder: on its next renewal and
        // on every process's cancel_requests.
        let mut requests = lease.cancel_requests();
        assert!(!lease.request_cancel(&k, "a").await.unwrap(), "a holds nothing");
        assert!(lease.request_cancel(&k, "b").await.unwrap());
        assert_eq!(lease.renew(&k, "b", ttl).await.unwrap(), Renewal::CancelRequested);
        let heard = tokio::time::timeout(Duration::from_secs(10), requests.next()).await;
        assert_eq!(heard.expect("the request is heard").as_deref(), Some("b"));
        assert_eq!(
            lease.renew(&key("s2"), "b", ttl).await.unwrap(),
            Renewal::Held,
            "per session"
        );

        // A holder that stops renewing loses the lease after its TTL, and then
        // cannot take back or delete the new holder's lease; the new holder learns
        // that the dead one never released it (it was interrupted).
        let k = key("s3");
        let short = Duration::from_millis(100);
        assert_eq!(lease.acquire(&k, "dead", short).await.unwrap(), acquired());
        // Held until the TTL lapses; then "next" takes it (asking changes nothing meanwhile).
        let next = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
            match lease.acquire(&k, "next", ttl).await.unwrap() {
                Acquire::Held(holder) => Err(format!("still held by {holder}")),
                acquired => Ok(acquired),
            }
        })
        .await;
        assert_eq!(
            next,
            Acquire::Acquired {
                interrupted: Some("dead".into())
            }
        );
        assert_eq!(lease.renew(&k, "dead", ttl).await.unwrap(), Renewal::Lost);
        assert!(!lease.request_cancel(&k, "dead").await.unwrap());
        lease.release(&k, "dead").await.unwrap();
        assert_eq!(
            lease.acquire(&k, "other", ttl).await.unwrap(),
            Acquire::Held("next".into())
        );
        // In turn: waiting owners take the lease in the order they first asked; one that
        // stops asking loses its place.
        let k4 = key("s4");
        let patience = Duration::from_millis(300);
        assert_eq!(lease.acquire(&k4, "running", ttl).await.unwrap(), acquired());
        for waiting in ["first", "gone", "second"] {
            let turn = lease.acquire_in_turn(&k4, waiting, ttl, patience).await.unwrap();
            assert_eq!(turn, Acquire::Held("running".into()), "{waiting} waits");
        }
        lease.release(&k4, "running").await.unwrap();
        let early = lease.acquire_in_turn(&k4, "second", ttl, patience).await.unwrap();
        assert_eq!(early, Acquire::Held("first".into()), "not second's turn yet");
        assert_eq!(
            lease.acquire_in_turn(&k4, "first", ttl, patience).await.unwrap(),
            acquired()
        );
        lease.release(&k4, "first").await.unwrap();
        // "gone" stopped asking: once its patience lapses, "second" (still asking) is next.
        let second = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
            match lease.acquire_in_turn(&k4, "second", ttl, patience).await.unwrap() {
                Acquire::Held(ahead) => Err(format!("still behind {ahead}")),
                acquired => Ok(acquired),
            }
        })
        .await;
        assert_eq!(second, acquired());

        // Reported once: after a release the next holder finds nothing interrupted.
        lease.release(&k, "next").await.unwrap();
        assert_eq!(lease.acquire(&k, "other", ttl).await.unwrap(), acquired());
    }

    #[tokio::test]
    async fn in_memory_lease_keeps_the_contract() {
        lease_contract(&InMemorySessionLease::new()).await;
    }

    /// The resumable-run contract every backend keeps: a recorded run whose lease
    /// lapses is claimed once, under a new owner token that fences the dead one off;
    /// the session is busy with it until then; a cancel drops it; a hand-over makes it
    /// due at once; a finished run leaves nothing to claim.
    async fn resumable_run_contract(lease: &dyn SessionLease) {
        let apps = vec!["app".to_string()];
        let short = Duration::from_millis(200);
        let ttl = Duration::from_secs(30);
        let record = |session: &str| RunRecord {
            key: key(session),
            invocation_id: format!("e-{session}"),
            options: format!("{{\"session\":\"{session}\"}}"),
        };
        // Recorded only under one's own lease.
        assert!(!lease.register_run(&record("r1"), "e-r1", short).await.unwrap());
        assert_eq!(lease.acquire(&key("r1"), "e-r1", short).await.unwrap(), acquired());
        assert!(lease.register_run(&record("r1"), "e-r1", short).await.unwrap());
        assert_eq!(
            lease.claim_lapsed(&apps, ttl, 10).await.unwrap(),
            vec![],
            "held: not due"
        );
        // The holder dies: once its lease lapses the session is busy with the run, not free.
        let claimed = adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
            let claimed = lease.claim_lapsed(&apps, ttl, 10).await.unwrap();
            if claimed.is_empty() {
                Err("not claimed yet".to_string())
            } else {
                Ok(claimed)
            }
        })
        .await;
        assert_eq!(claimed.len(), 1, "{claimed:?}");
        let run = &claimed[0];
        assert_eq!(run.record, record("r1"));
        assert!(run.owner.starts_with("e-r1@") && run.owner.len() > 5, "{}", run.owner);
        assert_eq!(owner_invocation(&run.owner), "e-r1");
        assert!(
            lease.claim_lapsed(&apps, ttl, 10).await.unwrap().is_empty(),
            "claimed once"
        );
        assert_eq!(
            lease.renew(&key("r1"), "e-r1", ttl).await.unwrap(),
            Renewal::Lost,
            "the dead owner is fenced off"
        );
        assert_eq!(lease.renew(&key("r1"), &run.owner, ttl).await.unwrap(), Renewal::Held);
        assert_eq!(
            lease.acquire(&key("r1"), "e-new", ttl).await.unwrap(),
            Acquire::Held(run.owner.clone())
        );
        // A cancel naming the invocation reaches its claim.
        assert!(lease.request_cancel(&key("r1"), "e-r1").await.unwrap());
        assert_eq!(
            lease.renew(&key("r1"), &run.owner, ttl).await.unwrap(),
            Renewal::CancelRequested
        );
        // Finished: released, nothing left to claim, the session free.
        lease.release(&key("r1"), &run.owner).await.unwrap();
        assert_eq!(lease.acquire(&key("r1"), "e-next", ttl).await.unwrap(), acquired());
        lease.release(&key("r1"), "e-next").await.unwrap();

        // Awaiting resumption (here handed over), the session is busy with the run; a
        // cancel drops it.
        assert_eq!(lease.acquire(&key("r2"), "e-r2", ttl).await.unwrap(), acquired());
        assert!(lease.register_run(&record("r2"), "e-r2", ttl).await.unwrap());
        lease.hand_over(&key("r2"), "e-r2").await.unwrap();
        let busy = match lease.acquire(&key("r2"), "e-new", ttl).await.unwrap() {
            Acquire::Held(holder) => holder,
            other => panic!("not busy: {other:?}"),
        };
        assert_eq!(busy, "e-r2", "busy with the run awaiting resumption");
        assert!(lease.request_cancel(&key("r2"), "e-r2").await.unwrap(), "dropped");
        assert!(
            lease.claim_lapsed(&apps, ttl, 10).await.unwrap().is_empty(),
            "nobody resumes it"
        );
        assert_eq!(
            lease.acquire(&key("r2"), "e-new", ttl).await.unwrap(),
            Acquire::Acquired {
                interrupted: Some("e-r2".into())
            },
            "the next run closes it"
        );

        // Handed over: due at once, for the apps of the claimant only.
        assert_eq!(lease.acquire(&key("r3"), "e-r3", ttl).await.unwrap(), acquired());
        assert!(lease.register_run(&record("r3"), "e-r3", ttl).await.unwrap());
        lease.hand_over(&key("r3"), "e-r3").await.unwrap();
        assert!(
            lease
                .claim_lapsed(&["other".to_string()], ttl, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let claimed = lease.claim_lapsed(&apps, ttl, 10).await.unwrap();
        assert_eq!(
            claimed.iter().map(|c| c.record.clone()).collect::<Vec<_>>(),
            vec![record("r3")]
        );
        assert!(
            claimed[0].lapsed_for < Duration::from_secs(5),
            "{:?}",
            claimed[0].lapsed_for
        );
        // A run not recorded is simply released by a hand-over.
        assert_eq!(lease.acquire(&key("r4"), "e-r4", ttl).await.unwrap(), acquired());
        lease.hand_over(&key("r4"), "e-r4").await.unwrap();
        assert_eq!(lease.acquire(&key("r4"), "e-x", ttl).await.unwrap(), acquired());
    }

    #[tokio::test]
    async fn in_memory_lease_keeps_the_resumable_run_contract() {
        resumable_run_contract(&InMemorySessionLease::new()).await;
    }

    #[tokio::test]
    async fn redis_lease_keeps_the_resumable_run_contract() {
        let server = RedisServer::start().await;
        let lease = RedisSessionLease::connect(&server.url(), ReplicaAcks::default())
            .await
            .unwrap();
        resumable_run_contract(&lease).await;
        let mut conn = server.connection().await;
        let indexed: Vec<String> = redis::cmd("ZRANGE")
            .arg(RUNS_INDEX)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            indexed,
            vec![r#"["app","u","r3"]"#.to_string()],
            "finished and dropped runs leave the index"
        );
    }

    #[tokio::test]
    async fn redis_cluster_lease_keeps_the_resumable_run_contract() {
        let cluster = adk_grpc_testkit::shared::cluster().await;
        let lease = RedisSessionLease::connect(&cluster.url(), ReplicaAcks::default())
            .await
            .unwrap();
        resumable_run_contract(&lease).await;
    }

    #[tokio::test]
    async fn redis_lease_keeps_the_contract() {
        let server = RedisServer::start().await;
        let lease = RedisSessionLease::connect(&server.url(), ReplicaAcks::default())
            .await
            .unwrap();
        lease_contract(&lease).await;
        // The key carries the session's hash tag and the owner token.
        let mut conn = server.connection().await;
        let holder: String = redis::cmd("GET")
            .arg("adk:lease:{app:u}:s1")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(holder, "b");
    }

    // ---------- each script reads what its builder sends, each input where it belongs ----------

    #[test]
    fn every_lease_script_reads_exactly_what_its_builder_sends() {
        use crate::redis::script_args::check::assert_reads_what_is_sent;
        let (lease, owner, ttl) = ("lease", "a", Duration::from_secs(1));
        let acquire = AcquireArgs { lease, owner, ttl };
        assert_reads_what_is_sent("acquire", &acquire, 0, &acquire);
        let patience = ttl;
        let in_turn = AcquireInTurnArgs {
            lease,
            owner,
            ttl,
            patience,
        };
        assert_reads_what_is_sent("acquire_in_turn", &in_turn, 0, &in_turn);
        let renew = RenewArgs { lease, owner, ttl };
        assert_reads_what_is_sent("renew", &renew, 0, &renew);
        let release = ReleaseArgs { lease, owner };
        assert_reads_what_is_sent("release", &release, 0, &release);
        let cancel = CancelArgs { lease, owner };
        assert_reads_what_is_sent("cancel", &cancel, 0, &cancel);
        let register = RegisterArgs {
            lease,
            owner,
            invocation_id: "e-1",
            options: "{}",
            ttl,
        };
        assert_reads_what_is_sent("register", &register, 0, &register);
        let claim = ClaimArgs {
            lease,
            claim: "c1",
            ttl,
        };
        assert_reads_what_is_sent("claim", &claim, 0, &claim);
        let hand_over = HandOverArgs { lease, owner };
        assert_reads_what_is_sent("hand_over", &hand_over, 0, &hand_over);
    }

    struct Scripted {
        server: RedisServer,
        conn: redis::aio::MultiplexedConnection,
        scripts: Scripts,
    }

    impl Scripted {
        async fn start() -> Scripted {
            let server = RedisServer::start().await;
            let conn = server.connection().await;
            Scripted {
                server,
                conn,
                scripts: Scripts::new(),
            }
        }

        async fn run<T: FromRedisValue>(&mut self, args: &impl ScriptArgs<Scripts = Scripts>) -> T {
            let invocation = args.invocation(&self.scripts).unwrap();
            invocation.invoke_async(&mut self.conn).await.unwrap()
        }

        async fn get(&mut self, key: &str) -> Option<String> {
            redis::cmd("GET").arg(key).query_async(&mut self.conn).await.unwrap()
        }

        async fn set(&mut self, key: &str, value: &str) {
            let () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query_async(&mut self.conn)
                .await
                .unwrap();
        }

        /// The key's remaining time to live, in whole seconds (rounded up).
        async fn ttl_secs(&mut self, key: &str) -> i64 {
            let ms: i64 = redis::cmd("PTTL").arg(key).query_async(&mut self.conn).await.unwrap();
            (ms + 999) / 1000
        }
    }

    const LEASE: &str = "adk:lease:{app:u}:s1";

    #[tokio::test]
    async fn acquire_scripts_write_each_input_where_it_belongs() {
        let mut redis = Scripted::start().await;
        let (ttl, patience) = (Duration::from_secs(30), Duration::from_secs(600));
        let record_secs = HOLDER_RECORD_TTL.as_secs() as i64;
        let reply: (i64, String) = redis
            .run(&AcquireArgs {
                lease: LEASE,
                owner: "a",
                ttl,
            })
            .await;
        assert_eq!(reply, (1, String::new()));
        assert_eq!(redis.get(LEASE).await.as_deref(), Some("a"));
        assert_eq!(redis.ttl_secs(LEASE).await, 30);
        let holder = holder_key(LEASE);
        assert_eq!(redis.get(&holder).await.as_deref(), Some("a"));
        assert_eq!(redis.ttl_secs(&holder).await, record_secs);

        // In turn, behind the holder: "b" waits in line with its patience, then takes it.
        let in_turn = |owner| AcquireInTurnArgs {
            lease: LEASE,
            owner,
            ttl: Duration::from_secs(40),
            patience,
        };
        let waiting: (i64, String) = redis.run(&in_turn("b")).await;
        assert_eq!(waiting, (0, "a".to_string()));
        let line = line_key(LEASE);
        let ticket: Option<f64> = redis::cmd("ZSCORE")
            .arg(&line)
            .arg("b")
            .query_async(&mut redis.conn)
            .await
            .unwrap();
        assert_eq!(ticket, Some(1.0), "the first ticket");
        assert_eq!(redis.get(&format!("{line}:ticket")).await.as_deref(), Some("1"));
        let lapses: Option<i64> = redis::cmd("HGET")
            .arg(format!("{line}:lapses"))
            .arg("b")
            .query_async(&mut redis.conn)
            .await
            .unwrap();
        let time: Vec<i64> = redis::cmd("TIME").query_async(&mut redis.conn).await.unwrap();
        let now_ms = time[0] * 1000 + time[1] / 1000;
        let lapse_in = lapses.expect("b has a place") - now_ms;
        assert!(
            (595_000..=600_000).contains(&lapse_in),
            "the place lapses after the patience: {lapse_in} ms"
        );
        assert_eq!(redis.ttl_secs(&line).await, record_secs);
        let () = redis::cmd("DEL").arg(LEASE).query_async(&mut redis.conn).await.unwrap();
        let taken: (i64, String) = redis.run(&in_turn("b")).await;
        assert_eq!(taken, (1, "a".to_string()), "a's record names it interrupted");
        assert_eq!(redis.get(LEASE).await.as_deref(), Some("b"));
        assert_eq!(redis.ttl_secs(LEASE).await, 40);
        assert_eq!(redis.get(&holder).await.as_deref(), Some("b"));
        assert_eq!(redis.ttl_secs(&holder).await, record_secs);
    }

    #[tokio::test]
    async fn renew_release_and_cancel_write_each_input_where_it_belongs() {
        let mut redis = Scripted::start().await;
        let (holder, cancel) = (holder_key(LEASE), cancel_key(LEASE));
        redis.set(LEASE, "a").await;
        let renew = |owner| RenewArgs {
            lease: LEASE,
            owner,
            ttl: Duration::from_secs(30),
        };
        assert_eq!(redis.run::<(i64, i64)>(&renew("b")).await, (0, 0));
        assert_eq!(
            redis.run::<(i64, i64)>(&renew("a")).await,
            (1, 0),
            "held, no run recorded"
        );
        assert_eq!(redis.ttl_secs(LEASE).await, 30);

        let mut cancels = redis.server.client().get_async_pubsub().await.unwrap();
        cancels.subscribe(CANCEL_CHANNEL).await.unwrap();
        let marked: i64 = redis
            .run(&CancelArgs {
                lease: LEASE,
                owner: "a",
            })
            .await;
        assert_eq!(marked, 1);
        assert_eq!(redis.get(&cancel).await.as_deref(), Some("a"));
        assert_eq!(redis.ttl_secs(&cancel).await, CANCEL_MARK_TTL.as_secs() as i64);
        let message = tokio::time::timeout(Duration::from_secs(10), cancels.on_message().next())
            .await
            .expect("no cancel message within 10 s")
            .expect("the subscription ended");
        assert_eq!(message.get_channel_name(), CANCEL_CHANNEL);
        assert_eq!(message.get_payload::<String>().unwrap(), "a");
        assert_eq!(
            redis.run::<(i64, i64)>(&renew("a")).await,
            (2, 0),
            "held, cancel requested"
        );

        redis.set(&holder, "a").await;
        let _: i64 = redis
            .run(&ReleaseArgs {
                lease: LEASE,
                owner: "b",
            })
            .await;
        assert_eq!(redis.get(LEASE).await.as_deref(), Some("a"), "only the owner releases");
        let _: i64 = redis
            .run(&ReleaseArgs {
                lease: LEASE,
                owner: "a",
            })
            .await;
        for key in [LEASE, holder.as_str(), cancel.as_str()] {
            assert_eq!(redis.get(key).await, None, "{key} released");
        }
    }
}
