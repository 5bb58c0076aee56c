//! The models crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test models <module>::`.

mod common;
mod embeddings;
mod gemini;
#[cfg(feature = "local-embeddings")]
mod local_embeddings;
mod mock_and_config;
mod openai;
mod structured;
mod tls;
