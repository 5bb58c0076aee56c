//! One subscription per process to a pub/sub channel, kept up across failures.

use super::client::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, client, cluster_node_urls};
use adk_grpc_core::Result;
use futures::StreamExt;
use std::time::Duration;

/// Clients for a subscriber: the Redis, or each node a cluster URL names (any one of
/// them hears every classic `PUBLISH`).
pub(crate) fn subscriber_clients(url: &str) -> Result<Vec<redis::Client>> {
    let urls = cluster_node_urls(url)?.unwrap_or_else(|| vec![url.to_string()]);
    urls.iter().map(|url| client(url)).collect()
}

/// What a listener is told: a message's payload, or `None` when it has (re)subscribed
/// (messages published while it was not subscribed are lost). It returns false to stop.
pub(crate) type Listener = Box<dyn FnMut(Option<String>) -> bool + Send>;

/// How often a subscription checks that its node still answers.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// Keeps one subscription to `channel` through one of `nodes` (tried in turn; any node
/// of a cluster hears every classic `PUBLISH`), handing each message to `listener`;
/// resubscribes after a failure, or when the node stops answering a `PING` within
/// [`RESPONSE_TIMEOUT`]: a node that is frozen or gone from the network neither sends
/// messages nor closes the connection, and the listener would wait on it for good.
/// Ends when `listener` returns false.
pub(crate) fn spawn_channel_listener(channel: &'static str, nodes: Vec<redis::Client>, mut listener: Listener) {
    const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(200);
    tokio::spawn(async move {
        for client in nodes.iter().cycle() {
            let subscribed = tokio::time::timeout(CONNECT_TIMEOUT, async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(channel).await?;
                redis::RedisResult::Ok(pubsub)
            })
            .await;
            if let Ok(Ok(pubsub)) = subscribed {
                if !listener(None) {
                    return;
                }
                let (mut sink, mut messages) = pubsub.split();
                let mut checks = tokio::time::interval(LIVENESS_CHECK);
                checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        message = messages.next() => {
                            let Some(message) = message else { break };
                            if let Ok(payload) = message.get_payload::<String>()
                                && !listener(Some(payload))
                            {
                                return;
                            }
                        }
                        _ = checks.tick() => {
                            let pong = tokio::time::timeout(RESPONSE_TIMEOUT, sink.ping::<redis::Value>()).await;
                            if !matches!(pong, Ok(Ok(_))) {
                                break;
                            }
                        }
                    }
                }
                tracing::debug!("lost the subscription to {channel}; resubscribing");
            }
            // Pacing between attempts (the listener is asked whether to go on first).
            if !listener(Some(String::new())) {
                return;
            }
            tokio::time::sleep(RESUBSCRIBE_DELAY).await;
        }
    });
}
