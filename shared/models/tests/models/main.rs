//! The models crate's integration tests, in one binary (one link); run one module with
//! `cargo test --test models <module>::`.

mod common;
mod embeddings;
mod gemini;
mod mock_and_config;
mod openai;
mod structured;
mod tls;
