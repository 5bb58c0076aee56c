//! [`InMemorySessionLease`]: session leases in this process's memory.

use super::{cancel_channel, cancel_stream, claim_id, owner_matches};
use adk_grpc_core::sync;
use adk_grpc_core::{
    Acquire, ClaimedRun, Clock, LeaseKey, RUN_RECORD_GRACE, Renewal, Result, RunRecord, SessionLease, claim_owner,
};
use async_trait::async_trait;
use futures::stream::BoxStream;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

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
            cancels: cancel_channel(),
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
