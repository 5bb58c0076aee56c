//! [`SessionLease`](adk_grpc_core::SessionLease) backends: in memory ([`memory`], one
//! process) and in Redis ([`redis`], every replica that shares the Redis sees the same
//! leases). What both share is here: how a cancel request names its run, claim ids, and
//! the stream of cancel requests each process hears.

pub mod memory;
pub mod redis;

use adk_grpc_core::owner_invocation;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

/// How many cancel requests a slow listener may fall behind by before it misses
/// some (it then learns them from its next renewal).
const CANCEL_BACKLOG: usize = 1024;

/// Whether `token` is `owner` or one of its claims: a cancel naming an invocation
/// reaches it under whichever claim runs it now.
fn owner_matches(token: &str, owner: &str) -> bool {
    token == owner || owner_invocation(token) == owner
}

/// A fresh claim id for a resumed run's owner token.
fn claim_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// A new cancel channel, as both backends keep one.
fn cancel_channel() -> broadcast::Sender<String> {
    broadcast::channel(CANCEL_BACKLOG).0
}

fn cancel_stream(sender: &broadcast::Sender<String>) -> BoxStream<'static, String> {
    // A listener that fell behind skips what it missed: renewals catch it up.
    BroadcastStream::new(sender.subscribe())
        .filter_map(|owner| async move { owner.ok() })
        .boxed()
}

#[cfg(test)]
mod tests;
