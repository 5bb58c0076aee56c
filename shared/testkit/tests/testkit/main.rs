//! The testkit crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test testkit <module>::`.

mod redis;
mod service_process;
