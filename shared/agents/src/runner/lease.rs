//! The lease client: an invocation's hold on its session's [`SessionLease`].
//!
//! A [`LeaseGuard`] takes the lease (refusing, waiting in line or interrupting the
//! holder as the run's [`OnBusy`] says), keeps it with a heartbeat task, turns what
//! the heartbeat hears into [`LeaseSignals`] (a cancel requested from any replica,
//! the lease lost), fences the invocation's appends, and gives the lease back when
//! the invocation ends or its stream is dropped.

use super::OnBusy;
use adk_grpc_core::{
    Acquire, AdkError, LeaseKey, Precondition, Renewal, Result, RunRecord, SessionLease, owner_invocation,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::{CancellationToken, DropGuard};

/// How long a run that waits for a busy session (enqueue, interrupt) waits at most,
/// beyond two lease TTLs.
const MAX_BUSY_WAIT: Duration = Duration::from_secs(600);
/// An enqueued run asks again at least every 200 ms; one that has not asked for this
/// long (its replica died) loses its place in the line.
const PLACE_IN_LINE_PATIENCE: Duration = Duration::from_secs(2);

/// The session's lease while this invocation holds it, with the heartbeat that
/// renews it (a task of its own, so the lease lives exactly as long as the runner
/// process does, however slowly the client reads the stream).
pub(super) struct LeaseGuard {
    lease: Arc<dyn SessionLease>,
    key: LeaseKey,
    owner: String,
    ttl: Duration,
    held: bool,
    /// The previous holder, when it died without releasing the lease.
    pub(super) interrupted: Option<String>,
    /// The invocation this one asked to stop to take the session (`interrupt`,
    /// `rollback`).
    pub(super) displaced: Option<String>,
    pub(super) signals: LeaseSignals,
    /// Stops the heartbeat when the guard goes.
    _heartbeat: DropGuard,
}

/// What the heartbeat tells the invocation.
#[derive(Clone, Default)]
pub(super) struct LeaseSignals {
    /// Stop: a cancel was requested (here, or from another replica through the lease).
    pub(super) cancel: CancellationToken,
    /// Stop: the lease was lost (not renewed in time; it may be another's now).
    pub(super) lost: CancellationToken,
}

impl LeaseGuard {
    /// Takes the session's lease for `owner`, applying `on_busy` when it is held, and
    /// with it records the run `owner` starts as resumable when given its `record`ed
    /// options (see [`SessionLease::acquire_run`]).
    pub(super) async fn take(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        on_busy: OnBusy,
        record: Option<String>,
    ) -> Result<Self> {
        let record = record.as_deref();
        match on_busy {
            OnBusy::Reject => Self::acquire_recording(lease, key, owner, ttl, record).await,
            OnBusy::Interrupt | OnBusy::Enqueue | OnBusy::Rollback => {
                Self::acquire_when_free(lease, key, owner, ttl, on_busy, record).await
            }
        }
    }

    /// Takes the lease, or fails with `ABORTED` naming its holder.
    pub(super) async fn acquire(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Self> {
        Self::acquire_recording(lease, key, owner, ttl, None).await
    }

    /// [`acquire`](Self::acquire), recording `owner`'s run with the lease when given its options.
    async fn acquire_recording(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        record: Option<&str>,
    ) -> Result<Self> {
        match Self::try_acquire(lease, key, owner, ttl, false, record).await? {
            Ok(guard) => Ok(guard),
            Err((key, holder)) => Err(busy(&key, &holder)),
        }
    }

    /// Takes the lease (`in_turn`: when it is `owner`'s turn among those waiting), and
    /// records `owner`'s run with it when given its options; or returns the key and the
    /// holder's owner token.
    async fn try_acquire(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        in_turn: bool,
        record: Option<&str>,
    ) -> Result<std::result::Result<Self, (LeaseKey, String)>> {
        // Listening before the lease is taken: a cancel sent as soon as the
        // invocation id is known cannot be missed.
        let requests = lease.cancel_requests();
        let patience = in_turn.then_some(PLACE_IN_LINE_PATIENCE);
        let acquired = match (record, patience) {
            // A first run's owner token is its invocation id, or `<invocation id>@<run>`
            // for a task's later turn, which goes on with the task's invocation.
            (Some(options), _) => {
                let run = RunRecord {
                    key: key.clone(),
                    invocation_id: owner_invocation(owner).to_string(),
                    options: options.to_string(),
                };
                lease.acquire_run(&run, owner, ttl, patience).await?
            }
            (None, Some(patience)) => lease.acquire_in_turn(&key, owner, ttl, patience).await?,
            (None, None) => lease.acquire(&key, owner, ttl).await?,
        };
        let interrupted = match acquired {
            // A claim's owner token names its invocation: that is what the log knows.
            Acquire::Acquired { interrupted } => interrupted.map(|owner| owner_invocation(&owner).to_string()),
            Acquire::Held(holder) => return Ok(Err((key, holder))),
        };
        Ok(Ok(Self::hold(lease, key, owner, ttl, requests, interrupted)))
    }

    /// The lease of a run this replica claimed to resume (held already, under `owner`).
    pub(super) fn claimed(lease: Arc<dyn SessionLease>, key: LeaseKey, owner: &str, ttl: Duration) -> Self {
        let requests = lease.cancel_requests();
        Self::hold(lease, key, owner, ttl, requests, None)
    }

    /// The token the lease is held under.
    pub(super) fn owner(&self) -> &str {
        &self.owner
    }

    /// The guard of a lease just taken, with its heartbeat started.
    fn hold(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        requests: BoxStream<'static, String>,
        interrupted: Option<String>,
    ) -> Self {
        let signals = LeaseSignals::default();
        let stop = CancellationToken::new();
        tokio::spawn(heartbeat(
            lease.clone(),
            key.clone(),
            owner.to_string(),
            ttl,
            requests,
            signals.clone(),
            stop.clone(),
        ));
        LeaseGuard {
            lease,
            key,
            owner: owner.to_string(),
            ttl,
            held: true,
            interrupted,
            displaced: None,
            signals,
            _heartbeat: stop.drop_guard(),
        }
    }

    /// Waits for a busy session's lease: `Interrupt` first asks the holder to stop
    /// (wherever it runs), `Enqueue` lets it finish. Gives up with `ABORTED` when the
    /// session stays busy for [`MAX_BUSY_WAIT`].
    async fn acquire_when_free(
        lease: Arc<dyn SessionLease>,
        key: LeaseKey,
        owner: &str,
        ttl: Duration,
        on_busy: OnBusy,
        record: Option<&str>,
    ) -> Result<Self> {
        let deadline = Instant::now() + MAX_BUSY_WAIT.max(ttl * 2);
        let mut pause = Duration::from_millis(10);
        let mut key = key;
        let mut cancelled = None::<String>;
        loop {
            let in_turn = on_busy == OnBusy::Enqueue;
            let holder = match Self::try_acquire(lease.clone(), key, owner, ttl, in_turn, record).await? {
                Ok(mut guard) => {
                    guard.displaced = cancelled.map(|owner| owner_invocation(&owner).to_string());
                    return Ok(guard);
                }
                Err((returned, holder)) => {
                    key = returned;
                    holder
                }
            };
            let interrupts = matches!(on_busy, OnBusy::Interrupt | OnBusy::Rollback);
            if interrupts && cancelled.as_deref() != Some(holder.as_str()) {
                lease.request_cancel(&key, &holder).await?;
                tracing::debug!(interrupted = %holder, invocation_id = %owner, "interrupting the running invocation");
                cancelled = Some(holder.clone());
            }
            if Instant::now() >= deadline {
                return Err(busy(&key, &holder));
            }
            // Pacing between attempts: the holder releases the lease when it stops,
            // and a dead one's lease expires within one TTL.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// The precondition that fences this invocation's appends.
    pub(super) fn fence(&self) -> Precondition {
        Precondition::LeaseHeldBy(self.owner.clone())
    }

    /// The error an invocation stops with once [`LeaseSignals::lost`] fires.
    pub(super) fn lost(&self) -> AdkError {
        AdkError::Aborted(
            adk_grpc_core::Conflict::LeaseLost,
            format!(
                "invocation {} lost its lease on session {} (not renewed within {:?}); it stops so that two \
             invocations never run on one session",
                self.owner, self.key.session_id, self.ttl
            ),
        )
    }

    /// Gives the lease up for another replica to resume the invocation at once (this
    /// replica is shutting down); a run that is not resumable is released.
    pub(super) async fn hand_over(mut self) {
        if let Err(e) = self.lease.hand_over(&self.key, &self.owner).await {
            tracing::warn!(invocation_id = %self.owner, error = %e, "could not hand the session lease over; it expires and is resumed then");
        }
        self.held = false;
    }

    pub(super) async fn release(mut self) {
        if let Err(e) = self.lease.release(&self.key, &self.owner).await {
            tracing::warn!(invocation_id = %self.owner, error = %e, "could not release the session lease; it expires");
        }
        // Only now: a stream dropped while the release is in flight (a client
        // cancelling as the run ends) must still release from `Drop`. Releasing is
        // compare-and-delete, so a second release is harmless.
        self.held = false;
    }
}

impl Drop for LeaseGuard {
    /// A stream dropped mid-run cannot await: the release runs as a short task
    /// of its own (one store call). Without a runtime the lease simply expires.
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (lease, key, owner) = (self.lease.clone(), self.key.clone(), self.owner.clone());
            runtime.spawn(async move {
                if let Err(e) = lease.release(&key, &owner).await {
                    tracing::warn!(invocation_id = %owner, error = %e, "could not release the session lease; it expires");
                }
            });
        }
    }
}

fn busy(key: &LeaseKey, holder: &str) -> AdkError {
    let holder = owner_invocation(holder);
    AdkError::Aborted(
        adk_grpc_core::Conflict::SessionBusy,
        format!(
            "session {} is busy with invocation {holder}: one invocation per session at a time",
            key.session_id
        ),
    )
}

fn renew_interval(ttl: Duration) -> Interval {
    let period = (ttl / 3).max(Duration::from_millis(1));
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// Renews `owner`'s lease every third of its TTL until `stop`, and turns what it
/// learns into `signals`: a cancel requested (through the lease or on
/// `requests`), or the lease lost. A store hiccup is not a loss: the next tick
/// tries again.
async fn heartbeat(
    lease: Arc<dyn SessionLease>,
    key: LeaseKey,
    owner: String,
    ttl: Duration,
    mut requests: BoxStream<'static, String>,
    signals: LeaseSignals,
    stop: CancellationToken,
) {
    let mut renew = renew_interval(ttl);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            Some(cancelled) = requests.next() => {
                if cancelled == owner {
                    signals.cancel.cancel();
                }
            }
            _ = renew.tick() => match lease.renew(&key, &owner, ttl).await {
                Ok(Renewal::Held) => {}
                Ok(Renewal::CancelRequested) => signals.cancel.cancel(),
                Ok(Renewal::Lost) => {
                    signals.lost.cancel();
                    return;
                }
                Err(e) => tracing::warn!(invocation_id = %owner, error = %e, "could not renew the session lease; retrying"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{Clock, Conflict};
    use adk_grpc_store::InMemorySessionLease;
    use adk_grpc_testkit::eventually;
    use tonic::Code;

    const TTL: Duration = Duration::from_secs(5);

    fn key() -> LeaseKey {
        LeaseKey {
            app_name: "app".into(),
            user_id: "u".into(),
            session_id: "s".into(),
        }
    }

    /// In-memory leases expiring by a clock the test moves.
    fn leases() -> (Arc<InMemorySessionLease>, Clock) {
        let clock = Clock::manual();
        (Arc::new(InMemorySessionLease::new().with_clock(clock.clone())), clock)
    }

    /// Whether a probe can take the free lease, given back rather than expired (an
    /// expired one names its holder as interrupted).
    async fn given_back(lease: &InMemorySessionLease) -> std::result::Result<(), String> {
        match lease.acquire(&key(), "probe", TTL).await {
            Ok(Acquire::Acquired { interrupted: None }) => {
                lease.release(&key(), "probe").await.unwrap();
                Ok(())
            }
            other => Err(format!("not given back: {other:?}")),
        }
    }

    #[tokio::test]
    async fn a_held_session_is_refused_as_busy_naming_its_holder() {
        let (lease, _) = leases();
        lease.acquire(&key(), "e-a", TTL).await.unwrap();
        let refused = LeaseGuard::take(lease.clone(), key(), "e-b", TTL, OnBusy::Reject, None).await;
        let error = refused.err().expect("busy");
        assert_eq!(error.code(), Code::Aborted);
        assert!(matches!(error, AdkError::Aborted(Conflict::SessionBusy, _)), "{error}");
        assert_eq!(
            error.to_string(),
            "session s is busy with invocation e-a: one invocation per session at a time"
        );
    }

    #[tokio::test]
    async fn a_lease_its_holder_never_gave_back_is_taken_and_names_that_holder() {
        let (lease, clock) = leases();
        lease.acquire(&key(), "e-crashed", TTL).await.unwrap();
        clock.advance(TTL + Duration::from_millis(1));
        let guard = LeaseGuard::acquire(lease.clone(), key(), "e-b", TTL).await.unwrap();
        assert_eq!(guard.interrupted.as_deref(), Some("e-crashed"));
        assert_eq!(guard.displaced, None);
        assert_eq!(guard.fence(), Precondition::LeaseHeldBy("e-b".into()));
    }

    #[tokio::test]
    async fn release_gives_the_session_back_at_once() {
        let (lease, _) = leases();
        let guard = LeaseGuard::acquire(lease.clone(), key(), "e-a", TTL).await.unwrap();
        assert!(given_back(&lease).await.is_err(), "held while the guard lives");
        guard.release().await;
        given_back(&lease).await.unwrap();
    }

    #[tokio::test]
    async fn a_dropped_guard_gives_the_session_back() {
        let (lease, _) = leases();
        let guard = LeaseGuard::acquire(lease.clone(), key(), "e-a", TTL).await.unwrap();
        drop(guard);
        eventually(Duration::from_secs(10), || given_back(&lease)).await;
    }

    #[tokio::test]
    async fn a_cancel_requested_anywhere_reaches_the_holder_at_once() {
        let (lease, _) = leases();
        // Its first renewal is 100 s away: only the cancel stream can tell it in time.
        let ttl = Duration::from_secs(300);
        let guard = LeaseGuard::acquire(lease.clone(), key(), "e-a", ttl).await.unwrap();
        assert!(!guard.signals.cancel.is_cancelled());
        // Another replica's request, through the lease.
        assert!(lease.request_cancel(&key(), "e-a").await.unwrap());
        tokio::time::timeout(Duration::from_secs(10), guard.signals.cancel.cancelled())
            .await
            .expect("the cancel arrives before the next renewal");
        assert!(!guard.signals.lost.is_cancelled());
    }

    #[tokio::test]
    async fn the_heartbeat_renews_and_hears_a_cancel_from_its_renewal() {
        let (lease, _) = leases();
        let ttl = Duration::from_millis(60);
        lease.acquire(&key(), "e-a", ttl).await.unwrap();
        lease.request_cancel(&key(), "e-a").await.unwrap();
        // No cancel stream: only a renewal can tell it.
        let signals = LeaseSignals::default();
        let stop = CancellationToken::new();
        let beating = tokio::spawn(heartbeat(
            lease.clone(),
            key(),
            "e-a".into(),
            ttl,
            futures::stream::pending().boxed(),
            signals.clone(),
            stop.clone(),
        ));
        tokio::time::timeout(Duration::from_secs(10), signals.cancel.cancelled())
            .await
            .expect("the renewal reports the cancel");
        stop.cancel();
        beating.await.unwrap();
    }

    #[tokio::test]
    async fn the_heartbeat_signals_a_lost_lease_and_the_error_says_why() {
        let (lease, clock) = leases();
        let ttl = Duration::from_millis(60);
        let guard = LeaseGuard::acquire(lease.clone(), key(), "e-a", ttl).await.unwrap();
        // The runner stalled past its TTL: the lease ran out, and a renewal cannot revive it.
        clock.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(10), guard.signals.lost.cancelled())
            .await
            .expect("the heartbeat reports the loss");
        let error = guard.lost();
        assert!(matches!(error, AdkError::Aborted(Conflict::LeaseLost, _)), "{error}");
        let message = error.to_string();
        assert!(
            message.contains("invocation e-a lost its lease on session s"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn interrupt_asks_the_holder_to_stop_and_takes_the_session_once_it_does() {
        let (lease, _) = leases();
        lease.acquire(&key(), "e-a", TTL).await.unwrap();
        let mut requests = lease.cancel_requests();
        let mut taking = Box::pin(LeaseGuard::take(
            lease.clone(),
            key(),
            "e-b",
            TTL,
            OnBusy::Interrupt,
            None,
        ));
        // One attempt: refused, so it asks e-a to stop and waits.
        assert!(futures::poll!(&mut taking).is_pending());
        assert_eq!(requests.next().await.as_deref(), Some("e-a"));
        assert_eq!(lease.renew(&key(), "e-a", TTL).await.unwrap(), Renewal::CancelRequested);
        lease.release(&key(), "e-a").await.unwrap();
        let guard = tokio::time::timeout(Duration::from_secs(10), taking)
            .await
            .expect("taken once free")
            .unwrap();
        assert_eq!(guard.displaced.as_deref(), Some("e-a"));
        assert_eq!(guard.interrupted, None);
    }

    #[tokio::test]
    async fn enqueue_waits_for_the_holder_without_stopping_it() {
        let (lease, _) = leases();
        lease.acquire(&key(), "e-a", TTL).await.unwrap();
        let mut requests = lease.cancel_requests();
        let mut taking = Box::pin(LeaseGuard::take(
            lease.clone(),
            key(),
            "e-b",
            TTL,
            OnBusy::Enqueue,
            None,
        ));
        assert!(futures::poll!(&mut taking).is_pending());
        assert_eq!(lease.renew(&key(), "e-a", TTL).await.unwrap(), Renewal::Held);
        lease.release(&key(), "e-a").await.unwrap();
        let guard = tokio::time::timeout(Duration::from_secs(10), taking)
            .await
            .expect("taken once free")
            .unwrap();
        assert_eq!(guard.displaced, None);
        assert!(
            futures::FutureExt::now_or_never(requests.next()).is_none(),
            "no cancel was requested"
        );
    }
}
