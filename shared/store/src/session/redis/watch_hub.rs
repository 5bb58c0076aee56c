//! WatchSession fan-out: one reader per process for every watched session.
//!
//! Every append, once acknowledged, publishes the session's events key on
//! [`APPENDED_CHANNEL`]. Each process that watches holds one subscriber connection (a
//! classic `PUBLISH` reaches every node of a cluster, so any node will do), opened by its
//! first watch: a process that never watches (a runner, a replica no watcher reaches)
//! is not told of every append of every session. Per watched
//! session, one *feed*: a task that, when told of an append (or every
//! [`FEED_POLL`], in case a message was missed), reads the new entries once on the
//! shared connection, confirms them durable once (`RedisStore::durable_read`, when
//! writes wait for replicas) and broadcasts them to the process's watchers of that
//! session. So the Redis connections of a process do not grow with its watchers,
//! each event is read and confirmed once per process, and an idle session costs one
//! `HGET` per [`FEED_POLL`], whatever the number of its watchers.
//!
//! Each watcher has a bounded buffer of [`WATCHER_BUFFER`] events; the feed never
//! waits for a watcher. A watcher that falls further behind (its client reads
//! slowly) continues from the last sequence it sent with reads of its own until it
//! has caught up, then listens to the feed again: it never misses nor repeats an
//! event, and slows no other watcher.

use super::stream_entries;
use crate::redis::pubsub::spawn_channel_listener;
use crate::redis::store::RedisStore;
use adk_grpc_core::sync;
use adk_grpc_core::{AdkError, EncodedEvent, Result};
use redis::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, broadcast};

/// The channel every append publishes its session's events key on.
pub(super) const APPENDED_CHANNEL: &str = "adk:appended";
/// How often a feed looks for new events and checks its session still exists
/// without being told (a missed message, a deleted or expired session).
const FEED_POLL: Duration = Duration::from_secs(2);
/// How many events a watcher may be behind the feed before it reads on its own.
pub(super) const WATCHER_BUFFER: usize = 256;
/// Entries read per round trip.
pub(super) const READ_BATCH: usize = 100;
/// First pause before reading again entries not yet confirmed on the replicas.
const UNCONFIRMED_RETRY: Duration = Duration::from_millis(50);

/// What a feed tells its watchers.
#[derive(Clone)]
pub(super) enum FeedItem {
    /// The event with this sequence, as stored (watchers pass it on undecoded), confirmed durable.
    Event(u64, Arc<EncodedEvent>),
    /// The session was deleted, expired or replaced by a new one under its id.
    Gone,
    /// Reading failed; the feed has stopped (the next watch starts a new one).
    Failed(Arc<str>),
}

/// One session's keys as a feed reads them.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct FeedKey {
    pub(super) meta: String,
    pub(super) events: String,
    /// Tells the watched session from a new one created later under the same id.
    pub(super) create_us: String,
}

struct Feed {
    key: FeedKey,
    sender: broadcast::Sender<FeedItem>,
    wake: Notify,
}

/// The feeds of one process, by events key; see the module docs.
pub(super) struct WatchHub {
    store: RedisStore,
    feeds: Mutex<HashMap<String, Vec<Arc<Feed>>>>,
    /// The nodes to hear wake-ups from, until the first watch starts listening.
    unheard: Mutex<Option<Vec<redis::Client>>>,
}

impl WatchHub {
    /// The hub; its subscriber listens through one of `nodes` from the first watch on.
    pub(super) fn start(store: RedisStore, nodes: Vec<redis::Client>) -> Arc<WatchHub> {
        Arc::new(WatchHub {
            store,
            feeds: Mutex::default(),
            unheard: Mutex::new(Some(nodes)),
        })
    }

    /// Starts listening for wake-ups, once. A feed started before the subscription is
    /// up misses nothing: subscribing wakes every feed to read (and feeds poll anyway).
    fn listen(self: &Arc<Self>) {
        let Some(nodes) = sync::lock(&self.unheard).take() else {
            return;
        };
        let weak = Arc::downgrade(self);
        spawn_channel_listener(
            APPENDED_CHANNEL,
            nodes,
            Box::new(move |message| {
                let Some(hub) = weak.upgrade() else { return false };
                match message.as_deref() {
                    // A pulse between attempts to subscribe: nothing to do.
                    Some("") => {}
                    Some(events_key) => hub.wake(Some(events_key)),
                    // (Re)subscribed: messages may have been missed meanwhile.
                    None => hub.wake(None),
                }
                true
            }),
        );
    }

    /// The watchers' own connection (see `RedisSessionBackend::connect`).
    pub(super) fn store(&self) -> &RedisStore {
        &self.store
    }

    fn feeds(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Feed>>>> {
        // Every change is one insert or remove: a poisoned map is still consistent.
        sync::lock(&self.feeds)
    }

    /// Wakes the feeds of `events_key`, or all of them.
    fn wake(&self, events_key: Option<&str>) {
        let feeds = self.feeds();
        let woken: Box<dyn Iterator<Item = &Arc<Feed>>> = match events_key {
            Some(key) => Box::new(feeds.get(key).into_iter().flatten()),
            None => Box::new(feeds.values().flatten()),
        };
        for feed in woken {
            feed.wake.notify_one();
        }
    }

    /// Listens to the session's feed, starting one (which reads after `last`, the
    /// session's current sequence) when it has none.
    pub(super) fn subscribe(self: &Arc<Self>, key: &FeedKey, last: u64) -> broadcast::Receiver<FeedItem> {
        self.listen();
        let mut feeds = self.feeds();
        let same_key = feeds.entry(key.events.clone()).or_default();
        if let Some(feed) = same_key.iter().find(|feed| feed.key == *key) {
            return feed.sender.subscribe();
        }
        let (sender, receiver) = broadcast::channel(WATCHER_BUFFER);
        let feed = Arc::new(Feed {
            key: key.clone(),
            sender,
            wake: Notify::new(),
        });
        same_key.push(feed.clone());
        tokio::spawn(run_feed(Arc::downgrade(self), feed, last));
        receiver
    }

    /// Removes `feed` unless a watcher subscribed meanwhile; true when removed.
    fn retire(&self, feed: &Arc<Feed>, force: bool) -> bool {
        let mut feeds = self.feeds();
        if !force && feed.sender.receiver_count() > 0 {
            return false;
        }
        if let Some(same_key) = feeds.get_mut(&feed.key.events) {
            same_key.retain(|other| !Arc::ptr_eq(other, feed));
            if same_key.is_empty() {
                feeds.remove(&feed.key.events);
            }
        }
        true
    }

    /// How many sessions this process reads for its watchers (for tests).
    #[cfg(test)]
    pub(super) fn feed_count(&self) -> usize {
        self.feeds().values().map(Vec::len).sum()
    }
}

/// One session's feed: reads what was appended after `last` whenever woken (or
/// every [`FEED_POLL`]) and broadcasts it; ends when no watcher is left, or with
/// [`FeedItem::Gone`] / [`FeedItem::Failed`].
async fn run_feed(hub: Weak<WatchHub>, feed: Arc<Feed>, mut last: u64) {
    let mut unconfirmed = 0u32;
    loop {
        let pause = if unconfirmed > 0 {
            UNCONFIRMED_RETRY.saturating_mul(1 << unconfirmed.min(4))
        } else {
            FEED_POLL
        };
        // Waiting for a wake-up or the poll period: this is the feed's idle state.
        let _ = tokio::time::timeout(pause, feed.wake.notified()).await;
        let Some(live) = hub.upgrade() else { return };
        if feed.sender.receiver_count() == 0 && live.retire(&feed, false) {
            return;
        }
        let store = live.store.clone();
        drop(live);
        loop {
            match read_after(&store, &feed.key, last).await {
                Ok(Read::Entries(entries)) => {
                    unconfirmed = 0;
                    let full = entries.len() == READ_BATCH;
                    for event in entries {
                        let seq = event.sequence();
                        // No watcher right now is fine: the next round retires the feed.
                        let _ = feed.sender.send(FeedItem::Event(seq, Arc::new(event)));
                        last = seq;
                    }
                    if !full {
                        break;
                    }
                }
                Ok(Read::Unconfirmed) => {
                    unconfirmed += 1;
                    break;
                }
                Ok(Read::Gone) | Err(_) => {
                    let item = match read_after(&store, &feed.key, last).await {
                        Ok(Read::Gone) => FeedItem::Gone,
                        Err(e) => FeedItem::Failed(e.to_string().into()),
                        // Back meanwhile (a transient error): carry on.
                        Ok(_) => break,
                    };
                    if let Some(live) = hub.upgrade() {
                        live.retire(&feed, true);
                    }
                    let _ = feed.sender.send(item);
                    return;
                }
            }
        }
    }
}

/// What one read after a sequence found.
pub(super) enum Read {
    /// Up to [`READ_BATCH`] entries after it, as stored, confirmed durable.
    Entries(Vec<EncodedEvent>),
    /// There are new entries, not yet confirmed on the replicas writes wait for.
    Unconfirmed,
    /// The session is gone (or is another one now).
    Gone,
}

/// The session's entries after `last` (one batch), once durable. The session's
/// identity is checked first, so entries of a new session under the same id are never read.
pub(super) async fn read_after(store: &RedisStore, key: &FeedKey, last: u64) -> Result<Read> {
    let create_us: Option<String> = store.query(redis::cmd("HGET").arg(&key.meta).arg("create_us")).await?;
    if create_us.as_deref() != Some(key.create_us.as_str()) {
        return Ok(Read::Gone);
    }
    let mut range = redis::cmd("XRANGE");
    range
        .arg(&key.events)
        .arg(format!("({last}-1"))
        .arg("+")
        .arg("COUNT")
        .arg(READ_BATCH);
    let replicas = store.replicas_required(&key.events).await?;
    let reply: Option<Value> = store.durable_read(&range, &key.events, replicas).await?;
    let Some(reply) = reply else {
        return Ok(Read::Unconfirmed);
    };
    Ok(Read::Entries(stream_entries(reply)?))
}

/// A watcher's stream: the events after `start`, then live ones from `receiver`,
/// each once and in order; reads on its own while behind (see the module docs).
pub(super) fn watcher_stream(
    hub: Arc<WatchHub>,
    key: FeedKey,
    start: u64,
    mut receiver: broadcast::Receiver<FeedItem>,
    not_found: String,
) -> adk_grpc_core::EncodedEventStream {
    Box::pin(async_stream::try_stream! {
        let mut last = start;
        // Behind the feed: read from the store until caught up.
        let mut behind = true;
        let mut unconfirmed = 0u32;
        loop {
            if behind {
                match read_after(&hub.store, &key, last).await? {
                    Read::Entries(entries) => {
                        unconfirmed = 0;
                        behind = entries.len() == READ_BATCH;
                        for event in entries {
                            last = event.sequence();
                            yield event;
                        }
                    }
                    Read::Unconfirmed => {
                        // Pacing: the replicas have not confirmed these entries yet.
                        tokio::time::sleep(UNCONFIRMED_RETRY.saturating_mul(1 << unconfirmed.min(4))).await;
                        unconfirmed += 1;
                    }
                    Read::Gone => Err(AdkError::NotFound(adk_grpc_core::Missing::Session, not_found.clone()))?,
                }
                continue;
            }
            match receiver.recv().await {
                Ok(FeedItem::Event(seq, event)) => {
                    if seq == last + 1 {
                        last = seq;
                        yield event.as_ref().clone();
                    } else if seq > last + 1 {
                        // The feed is ahead of this watcher (it started before the
                        // watcher subscribed): fill the gap from the store.
                        behind = true;
                    }
                }
                Ok(FeedItem::Gone) => Err(AdkError::NotFound(adk_grpc_core::Missing::Session, not_found.clone()))?,
                Ok(FeedItem::Failed(message)) => Err(AdkError::Unavailable(message.to_string()))?,
                // Overflow: more than WATCHER_BUFFER events behind; resume from `last`.
                Err(broadcast::error::RecvError::Lagged(_)) => behind = true,
                // The feed stopped without a last word (it cannot, while this receiver
                // lives, but a new one is cheap): listen to a new feed.
                Err(broadcast::error::RecvError::Closed) => {
                    receiver = hub.subscribe(&key, last);
                    behind = true;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::pubsub::subscriber_clients;
    use adk_grpc_testkit::{RedisServer, eventually};

    /// A process is told of appends only once it watches: one that never does (a
    /// runner) is not sent a message per append of every session.
    #[tokio::test]
    async fn a_process_listens_for_appends_from_its_first_watch_on() {
        let server = RedisServer::start().await;
        let hub = async || {
            let store = RedisStore::connect(&server.url(), Default::default()).await.unwrap();
            WatchHub::start(store, subscriber_clients(&server.url()).unwrap())
        };
        // Started first: were hubs to listen from the start, this one would be heard first.
        let _idle = hub().await;
        let watching = hub().await;
        let key = FeedKey {
            meta: "adk:sess:{a:u}:s1".into(),
            events: "adk:events:{a:u}:s1".into(),
            create_us: "1".into(),
        };
        let _watcher = watching.subscribe(&key, 0);
        eventually(Duration::from_secs(10), || async {
            match listeners(&server).await {
                0 => Err("the watching process is not subscribed yet".to_string()),
                n => Ok(n),
            }
        })
        .await;
        let _second = watching.subscribe(&key, 0);
        assert_eq!(
            listeners(&server).await,
            1,
            "one subscription, the watching process's: none for the process that never watched"
        );
    }

    /// How many connections listen for appends on `server`.
    async fn listeners(server: &RedisServer) -> i64 {
        let counts: (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(APPENDED_CHANNEL)
            .query_async(&mut server.connection().await)
            .await
            .unwrap();
        counts.1
    }

    /// A feed lives while someone watches: one per session, however many watchers,
    /// retired once its last watcher is gone.
    #[tokio::test]
    async fn one_feed_per_watched_session_retired_with_its_last_watcher() {
        let server = RedisServer::start().await;
        let store = RedisStore::connect(&server.url(), Default::default()).await.unwrap();
        let hub = WatchHub::start(store, subscriber_clients(&server.url()).unwrap());
        let key = |session: &str| FeedKey {
            meta: format!("adk:sess:{{a:u}}:{session}"),
            events: format!("adk:events:{{a:u}}:{session}"),
            create_us: "1".into(),
        };
        let watchers: Vec<_> = (0..50).map(|_| hub.subscribe(&key("s1"), 0)).collect();
        let other = hub.subscribe(&key("s2"), 0);
        assert_eq!(hub.feed_count(), 2, "one feed per session");
        drop(watchers);
        drop(other);
        eventually(Duration::from_secs(10), || async {
            match hub.feed_count() {
                0 => Ok(()),
                n => Err(format!("{n} feeds left")),
            }
        })
        .await;
    }
}
