//! Waiting for a condition with a deadline, the one way tests synchronise with
//! something that happens in another process or task.

use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// How often [`eventually`] checks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Calls `attempt` until it returns `Ok`, and returns that value; panics with the last
/// `Err` reason once `limit` has passed. A check that is true at once costs no wait.
pub async fn eventually<T, F, Fut>(limit: Duration, attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    match try_eventually(limit, attempt).await {
        Ok(value) => value,
        Err(reason) => panic!("not within {limit:?}: {reason}"),
    }
}

/// [`eventually`] for a test that has more to do before it fails (stop its load, show
/// a server's log): the last `Err` reason once `limit` has passed, instead of a panic.
pub async fn try_eventually<T, F, Fut>(limit: Duration, mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(reason) if Instant::now() >= deadline => return Err(reason),
            Err(_) => sleep(POLL_INTERVAL).await,
        }
    }
}
