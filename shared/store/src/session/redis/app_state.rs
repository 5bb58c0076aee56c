//! `app:` state as one process reads it: a cache per process, kept fresh by pub/sub,
//! so that GetSession, CreateSession's reply and ListSessions do not send every
//! request of an app to the one node that holds `adk:app:{app}`.
//!
//! Every writer of `app:` state publishes the app's name on [`CHANNEL`] in the same
//! script (standalone) or pipeline (cluster) as the write. Each process holds one
//! subscriber connection; a classic `PUBLISH` reaches every node of a cluster, so a
//! connection to any one node hears every app's changes. A message drops the app's
//! entry, and the next read loads it again (`HGETALL`).
//!
//! Freshness:
//! - the writing process drops its own entry right after its write, before the call
//!   returns: it reads its own writes;
//! - other processes, while their subscription is up, within the pub/sub delivery
//!   time (milliseconds);
//! - while the subscription is down or reconnecting the cache is bypassed (every read
//!   loads), and it is emptied when the subscription is back (messages may have been
//!   missed meanwhile);
//! - whatever happens unseen (a subscriber link that hangs without closing, a message
//!   lost between cluster nodes), an entry is never used after [`MAX_AGE`]; the
//!   subscriber also pings every [`PING_EVERY`] and reconnects when no answer comes.
//!
//! Races: every entry has a generation, moved by each invalidation; a load stores its
//! result only if the generation did not move while its `HGETALL` was in flight, so
//! a value read before a write can never be stored after the write's message.
//!
//! Keyspace notifications would spare the writers their `PUBLISH`, but need
//! `CONFIG SET notify-keyspace-events`, which managed Redis services often forbid.

use super::Fields;
use crate::redis::client::CONNECT_TIMEOUT;
use adk_grpc_core::sync;
use futures::StreamExt;
use redis::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The channel writers of `app:` state publish the app's name on.
pub(crate) const CHANNEL: &str = "adk:app-state";
/// The oldest a cached `app:` state may be when it is used.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(1);
/// How often the subscriber checks its connection (and whether the cache is still in use).
const PING_EVERY: Duration = Duration::from_secs(1);
/// How long a subscriber waits between two attempts to (re)subscribe.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// One process's `app:` state per app; see the module docs.
#[derive(Default)]
pub(super) struct AppStateCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// True while the subscription is live: only then are entries used or stored.
    subscribed: bool,
    entries: HashMap<String, Entry>,
}

#[derive(Default)]
struct Entry {
    generation: u64,
    value: Option<(Instant, Arc<Fields>)>,
}

/// What a load must show to store its result: the entry's generation when it began.
pub(super) struct Ticket(Option<u64>);

impl AppStateCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere cannot leave the map inconsistent: every change is one step.
        sync::lock(&self.inner)
    }

    /// The cached state of `app`, if it may be used now.
    pub(super) fn get(&self, app: &str) -> Option<Arc<Fields>> {
        let inner = self.lock();
        if !inner.subscribed {
            return None;
        }
        let (loaded, value) = inner.entries.get(app)?.value.as_ref()?;
        (loaded.elapsed() < MAX_AGE).then(|| value.clone())
    }

    /// Call before reading `app`'s state from Redis; hand the ticket to [`Self::finish_load`].
    pub(super) fn begin_load(&self, app: &str) -> Ticket {
        let mut inner = self.lock();
        if !inner.subscribed {
            return Ticket(None);
        }
        Ticket(Some(inner.entries.entry(app.to_string()).or_default().generation))
    }

    /// Stores what a load read, unless `app` was invalidated (or the subscription
    /// lost) since the load began.
    pub(super) fn finish_load(&self, app: &str, ticket: Ticket, value: Arc<Fields>) {
        let Ticket(Some(generation)) = ticket else {
            return;
        };
        let mut inner = self.lock();
        if !inner.subscribed {
            return;
        }
        if let Some(entry) = inner.entries.get_mut(app)
            && entry.generation == generation
        {
            entry.value = Some((Instant::now(), value));
        }
    }

    /// Drops `app`'s entry: its state was (or may have been) written.
    pub(super) fn invalidate(&self, app: &str) {
        if let Some(entry) = self.lock().entries.get_mut(app) {
            entry.generation += 1;
            entry.value = None;
        }
    }

    /// Drops every entry and says whether the subscription is live from now on.
    fn reset(&self, subscribed: bool) {
        let mut inner = self.lock();
        inner.subscribed = subscribed;
        for entry in inner.entries.values_mut() {
            entry.generation += 1;
            entry.value = None;
        }
    }
}

/// Starts the task that keeps `cache` subscribed through one of `nodes` (any node
/// of a cluster will do; they are tried in turn). The task ends once `cache` is dropped.
pub(super) fn spawn_subscriber(cache: &Arc<AppStateCache>, nodes: Vec<Client>) {
    let cache = Arc::downgrade(cache);
    tokio::spawn(async move {
        for client in nodes.iter().cycle() {
            match tokio::time::timeout(CONNECT_TIMEOUT, subscribe(client)).await {
                Ok(Ok(pubsub)) => {
                    let Some(live) = cache.upgrade() else { return };
                    live.reset(true);
                    drop(live);
                    tracing::debug!("subscribed to {CHANNEL}");
                    listen(&cache, pubsub).await;
                    let Some(live) = cache.upgrade() else { return };
                    live.reset(false);
                    tracing::warn!(
                        "lost the subscription to {CHANNEL}; reading app: state from redis until it is back"
                    );
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "cannot subscribe to {CHANNEL}"),
                Err(_) => tracing::debug!("subscribing to {CHANNEL} timed out"),
            }
            if cache.strong_count() == 0 {
                return;
            }
            tokio::time::sleep(RESUBSCRIBE_DELAY).await;
        }
    });
}

async fn subscribe(client: &Client) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(CHANNEL).await?;
    Ok(pubsub)
}

/// Applies messages until the connection breaks, a ping goes unanswered or the cache is dropped.
async fn listen(cache: &Weak<AppStateCache>, pubsub: redis::aio::PubSub) {
    let (mut sink, mut messages) = pubsub.split();
    let mut pings = tokio::time::interval(PING_EVERY);
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else { return };
                let Some(live) = cache.upgrade() else { return };
                match message.get_payload::<String>() {
                    Ok(app) => live.invalidate(&app),
                    // Not ours to understand: play safe.
                    Err(_) => live.reset(true),
                }
            }
            _ = pings.tick() => {
                if cache.strong_count() == 0 {
                    return;
                }
                let pong = tokio::time::timeout(PING_EVERY, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return;
                }
            }
        }
    }
}
