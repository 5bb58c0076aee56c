//! Backends of the core traits: in memory (one process, nothing to set up) and
//! Redis (standalone `redis://` / `rediss://`, or cluster `redis+cluster://h1:p1,h2:p2` /
//! `rediss+cluster://h1:p1,h2:p2`).

pub mod memory;
pub mod redis;

use adk_core::{AdkError, Result, SessionService};
use std::sync::Arc;
use std::time::Duration;

pub use memory::InMemorySessionService;
pub use redis::RedisSessionService;

/// Settings shared by every backend.
#[derive(Debug, Clone, Default)]
pub struct StoreConfig {
    /// TTL for sessions created without one; None keeps them until deleted.
    pub default_session_ttl: Option<Duration>,
}

/// Opens the session store a URL names: `memory://`, `redis://…`, `rediss://…`,
/// `redis+cluster://h1:p1,h2:p2` or `rediss+cluster://h1:p1,h2:p2` (TLS; append
/// `#insecure` to a `rediss` URL to skip certificate verification).
pub async fn open_session_service(url: &str, config: StoreConfig) -> Result<Arc<dyn SessionService>> {
    if url == "memory://" || url == "memory" {
        return Ok(Arc::new(InMemorySessionService::with_config(config)));
    }
    let redis_schemes = ["redis://", "rediss://", "redis+cluster://", "rediss+cluster://"];
    if redis_schemes.iter().any(|scheme| url.starts_with(scheme)) {
        return Ok(Arc::new(RedisSessionService::connect(url, config).await?));
    }
    Err(AdkError::Config(format!(
        "unsupported store URL {url:?}: use memory://, redis://host:port, rediss://host:port, redis+cluster://h1:p1,h2:p2 \
         or rediss+cluster://h1:p1,h2:p2"
    )))
}
