//! What every Redis backend (sessions, artifacts, memories, leases) stands on: `RedisStore`
//! (`store.rs`), one deployment as a backend uses it, over the connection to standalone
//! Redis or Redis Cluster (`client.rs`, `cluster.rs`, `conn.rs`), with the one mapping of
//! its failures (`error.rs`) and durable acknowledgements ([`durability`]); pub/sub
//! listeners (`pubsub.rs`), the key schema of every store (`keys.rs`) and the typed script
//! inputs (`script_args.rs`). Nothing here knows a backend: the backends import from here,
//! never the other way.

pub(crate) mod client;
mod cluster;
mod conn;
pub mod durability;
pub(crate) mod error;
pub(crate) mod keys;
pub(crate) mod pubsub;
pub(crate) mod script_args;
pub(crate) mod store;
