//! What every Redis backend (sessions, artifacts, memories, leases) stands on: the
//! connection to standalone Redis or Redis Cluster and the one mapping of its failures
//! ([`conn`], `cluster.rs`), durable acknowledgements ([`durability`]), pub/sub listeners
//! ([`pubsub`]), the key schema ([`keys`]) and the typed script inputs
//! ([`script_args`]). Nothing here knows a backend: the backends import from here,
//! never the other way.

mod cluster;
pub(crate) mod conn;
pub mod durability;
pub(crate) mod keys;
pub(crate) mod pubsub;
pub(crate) mod script_args;
