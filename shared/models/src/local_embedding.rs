//! [`LocalEmbeddings`]: a BERT sentence-embedding model (all-MiniLM-L6-v2 and its kind) run
//! inside the server with candle, from a local model directory, so semantic memory search needs
//! nothing to call. Built only with the `local-embeddings` feature: candle adds minutes to a cold
//! build (docs/design/local-embeddings.md has the measurements).
//!
//! The directory is a sentence-transformers export: `config.json`, `tokenizer.json` and
//! `model.safetensors`. The vector is sentence-transformers' own: mean of the last hidden states
//! over the real tokens (padding masked out), L2-normalised.

use adk_grpc_core::memory::Embedder;
use adk_grpc_core::{AdkError, Result};
use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::path::Path;
use std::sync::Arc;
use tokenizers::{Encoding, PaddingParams, Tokenizer, TruncationParams};

/// all-MiniLM-L6-v2 was trained on at most 256 word pieces (its `sentence_bert_config.json`);
/// longer texts are cut there, as sentence-transformers does.
const MAX_TOKENS: usize = 256;

/// A BERT embedding model loaded from a directory; cheap to clone (the weights are shared).
#[derive(Clone)]
pub struct LocalEmbeddings {
    inner: Arc<Loaded>,
}

struct Loaded {
    model: BertModel,
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
        // The exported tokenizer pads every text to 128 pieces; pad a batch only to its longest text.
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| config_error(dir, "tokenizer.json", e))?;
        let weights =
            std::fs::read(dir.join("model.safetensors")).map_err(|e| config_error(dir, "model.safetensors", e))?;
        let weights = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| config_error(dir, "model.safetensors", e))?;
        let model = BertModel::load(weights, &config).map_err(|e| config_error(dir, "model.safetensors", e))?;
        Ok(LocalEmbeddings {
            inner: Arc::new(Loaded { model, tokenizer }),
        })
    }
}

impl Loaded {
    fn embed(&self, texts: &[String]) -> candle_core::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(candle_core::Error::wrap)?;
        let ids = stack(&encodings, Encoding::get_ids)?;
        let type_ids = stack(&encodings, Encoding::get_type_ids)?;
        let mask = stack(&encodings, Encoding::get_attention_mask)?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (texts, tokens, dims)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let mean = hidden.broadcast_mul(&mask)?.sum(1)?.broadcast_div(&mask.sum(1)?)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        mean.broadcast_div(&norm)?.to_vec2()
    }
}

/// One row per encoding of the field `field` reads, as a (texts, tokens) tensor.
fn stack(encodings: &[Encoding], field: fn(&Encoding) -> &[u32]) -> candle_core::Result<Tensor> {
    let rows = encodings
        .iter()
        .map(|encoding| Tensor::new(field(encoding), &Device::Cpu))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Tensor::stack(&rows, 0)
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
            .map_err(inference_error)
    }
}
