//! [`LocalEmbeddings`]: a BERT sentence-embedding model (all-MiniLM-L6-v2 and its kind) run
//! inside the server by the encoder in `bert.rs`, from a local model directory, so semantic memory
//! search needs nothing to call. Built only with the `local-embeddings` feature: the tokenizer and
//! the encoder add to a cold build (docs/design/local-embeddings.md has the measurements).
//!
//! The directory is a sentence-transformers export: `config.json`, `tokenizer.json` and
//! `model.safetensors`. The vector is sentence-transformers' own: mean of the last hidden states
//! over the real tokens (padding masked out), L2-normalised.

use adk_grpc_core::memory::Embedder;
use adk_grpc_core::{AdkError, Result};
use async_trait::async_trait;
use bert::{Bert, Config, Pieces};
use std::path::Path;
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationParams};

mod bert;
mod linear;

/// all-MiniLM-L6-v2 was trained on at most 256 word pieces (its `sentence_bert_config.json`);
/// longer texts are cut there, as sentence-transformers does.
const MAX_TOKENS: usize = 256;

/// A BERT embedding model loaded from a directory; cheap to clone (the weights are shared).
#[derive(Clone)]
pub struct LocalEmbeddings {
    inner: Arc<Loaded>,
}

struct Loaded {
    model: Bert,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for LocalEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbeddings").finish_non_exhaustive()
    }
}

fn config_error(dir: &Path, what: &str, error: impl std::fmt::Display) -> AdkError {
    AdkError::Config(format!("local embedding model {}: {what}: {error}", dir.display()))
}

fn inference_error(error: impl std::fmt::Display) -> AdkError {
    AdkError::Model(format!("local embedding model: {error}"))
}

impl LocalEmbeddings {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let config =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| config_error(dir, "config.json", e))?;
        let config: Config = serde_json::from_str(&config).map_err(|e| config_error(dir, "config.json", e))?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| config_error(dir, "tokenizer.json", e))?;
        // The exported tokenizer pads every text to 128 pieces; the encoder needs no padding at all
        // (each text attends to its own pieces only).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| config_error(dir, "tokenizer.json", e))?;
        let weights =
            std::fs::read(dir.join("model.safetensors")).map_err(|e| config_error(dir, "model.safetensors", e))?;
        let model = Bert::load(&config, &weights).map_err(|e| config_error(dir, "model.safetensors", e))?;
        Ok(LocalEmbeddings {
            inner: Arc::new(Loaded { model, tokenizer }),
        })
    }
}

impl Loaded {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(inference_error)?;
        let pieces: Vec<Pieces<'_>> = encodings
            .iter()
            .map(|encoding| Pieces {
                ids: encoding.get_ids(),
                type_ids: encoding.get_type_ids(),
            })
            .collect();
        self.model.embed(&pieces).map_err(inference_error)
    }
}

#[async_trait]
impl Embedder for LocalEmbeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Milliseconds of CPU per text: off the async workers, so other RPCs keep being served.
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed(&texts))
            .await
            .map_err(inference_error)?
    }
}
