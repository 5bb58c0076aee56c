//! The server crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test server <module>::`.

mod connections;
mod quotas;
mod serve;
