//! Model providers for ADK agents, behind adk-grpc-core's [`Llm`](adk_grpc_core::Llm) trait:
//!
//! - [`OpenAiCompatible`]: chat completions at any OpenAI-compatible base URL
//!   (OpenAI, Ollama, vLLM, LM Studio, llama.cpp's server…);
//! - [`Gemini`]: Google's Gemini API;
//! - [`MockModel`]: deterministic echo or scripted replies, no network.
//!
//! and embedding models for semantic memory search ([`OpenAiEmbeddings`],
//! [`GeminiEmbeddings`], [`build_embedder`]; with the `local-embeddings` feature,
//! `LocalEmbeddings`, a model run inside the server).
//!
//! [`build_model`] turns a [`ProviderConfig`] (deserializable from the runner's
//! YAML) into a model.
//!
//! Every failure is an [`AdkError`](adk_grpc_core::AdkError) whose gRPC code says
//! what happened: a rate limit is `RESOURCE_EXHAUSTED`, a provider outage or a
//! stream cut short `UNAVAILABLE`, silence past the timeout `DEADLINE_EXCEEDED`,
//! a rejected key `UNAUTHENTICATED`. A streamed reply is a series of partial
//! text responses and then one complete response (all text, every function
//! call, usage, finish reason), or an error item: never a silent end. Dropping
//! the stream or the call's future closes the HTTP connection.
//!
//! With the `testing` feature, [`testing`] has fake provider servers on
//! loopback HTTP for tests.

mod config;
mod embedding;
mod gemini;
mod http;
mod inline_files;
#[cfg(feature = "local-embeddings")]
mod local_embedding;
mod memory_generation;
mod mock;
mod openai;
mod response;
mod sse;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{ProviderConfig, ProviderKind, build_model};
pub use embedding::{GeminiEmbeddings, OpenAiEmbeddings, build_embedder, load_embedders};
pub use gemini::{GEMINI_BASE_URL, Gemini};
pub use http::DEFAULT_TIMEOUT;
#[cfg(feature = "local-embeddings")]
pub use local_embedding::LocalEmbeddings;
pub use memory_generation::load_generators;
pub use mock::{MockConfig, MockFunctionCall, MockModel, MockTurn, WhenExhausted};
pub use openai::{OPENAI_BASE_URL, OpenAiCompatible};
