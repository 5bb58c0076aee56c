//! Embedding models for semantic memory search, behind adk-grpc-core's
//! [`Embedder`](adk_grpc_core::memory::Embedder):
//!
//! - [`OpenAiEmbeddings`]: `POST {base_url}/embeddings` (OpenAI and compatible servers:
//!   Ollama, vLLM, LM Studio…), every text of a call in one request;
//! - [`GeminiEmbeddings`]: Gemini's `POST /v1beta/models/{model}:embedContent`, one
//!   request per text;
//! - `LocalEmbeddings` (feature `local-embeddings`): a model run inside the server from a
//!   directory (`provider: local, model: /path/to/all-MiniLM-L6-v2`).
//!
//! [`build_embedder`] turns a [`ProviderConfig`] into one; [`load_embedders`] reads the
//! servers' `--memory-embeddings` file (app name, or `*`, -> provider config).

use crate::config::{ProviderConfig, ProviderKind};
use crate::gemini::GEMINI_BASE_URL;
use crate::http::{ApiKey, HttpClient};
use crate::openai::OPENAI_BASE_URL;
use adk_grpc_core::memory::{Embedder, Embedders};
use adk_grpc_core::{AdkError, Result};
use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderName};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The vectors of a reply's `embedding`-like array, as `f32`s.
fn floats(provider: &str, value: &Value) -> Result<Vec<f32>> {
    let values = value
        .as_array()
        .ok_or_else(|| AdkError::Model(format!("{provider} returned an embedding that is not an array")))?;
    values
        .iter()
        .map(|v| {
            v.as_f64()
                .map(|x| x as f32)
                .ok_or_else(|| AdkError::Model(format!("{provider} returned an embedding with a non-number")))
        })
        .collect()
}

/// OpenAI-compatible `/embeddings`.
#[derive(Debug, Clone)]
pub struct OpenAiEmbeddings {
    http: HttpClient,
    url: String,
    model: String,
}

impl OpenAiEmbeddings {
    /// `base_url` is the API root `/embeddings` is appended to, e.g. `https://api.openai.com/v1`.
    pub fn new(base_url: impl AsRef<str>, model: impl Into<String>) -> Result<Self> {
        let model = model.into();
        Ok(OpenAiEmbeddings {
            http: HttpClient::new("openai", &model)?,
            url: format!("{}/embeddings", base_url.as_ref().trim_end_matches('/')),
            model,
        })
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.http
            .set_auth(AUTHORIZATION, ApiKey::new("openai", key, "Bearer ")?);
        Ok(self)
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }
}

#[async_trait]
impl Embedder for OpenAiEmbeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let reply = self
            .http
            .post_json(&self.url, &json!({"model": self.model, "input": texts}))
            .await?;
        let data = reply["data"]
            .as_array()
            .ok_or_else(|| AdkError::Model("openai returned embeddings without `data`".into()))?;
        // Each item names the input it embeds; order by it rather than trusting the reply's order.
        let mut vectors: Vec<(u64, Vec<f32>)> = data
            .iter()
            .enumerate()
            .map(|(i, item)| {
                Ok((
                    item["index"].as_u64().unwrap_or(i as u64),
                    floats("openai", &item["embedding"])?,
                ))
            })
            .collect::<Result<_>>()?;
        vectors.sort_by_key(|(index, _)| *index);
        Ok(vectors.into_iter().map(|(_, v)| v).collect())
    }
}

/// Gemini's `embedContent`.
#[derive(Debug, Clone)]
pub struct GeminiEmbeddings {
    http: HttpClient,
    base_url: String,
    model: String,
}

impl GeminiEmbeddings {
    /// `model` as Google names it, e.g. `text-embedding-004` (a `models/` prefix is accepted).
    pub fn new(model: impl Into<String>) -> Result<Self> {
        let model: String = model.into();
        let model = model.strip_prefix("models/").unwrap_or(&model).to_string();
        Ok(GeminiEmbeddings {
            http: HttpClient::new("gemini", &model)?,
            base_url: GEMINI_BASE_URL.to_string(),
            model,
        })
    }

    pub fn with_base_url(mut self, base_url: impl AsRef<str>) -> Self {
        self.base_url = base_url.as_ref().trim_end_matches('/').to_string();
        self
    }

    /// Sent in the `x-goog-api-key` header, never in the URL.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.http.set_auth(
            HeaderName::from_static("x-goog-api-key"),
            ApiKey::new("gemini", key, "")?,
        );
        Ok(self)
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }
}

#[async_trait]
impl Embedder for GeminiEmbeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let url = format!("{}/v1beta/models/{}:embedContent", self.base_url, self.model);
        let mut vectors = Vec::with_capacity(texts.len());
        for text in texts {
            let body = json!({
                "model": format!("models/{}", self.model),
                "content": {"parts": [{"text": text}]},
            });
            let reply = self.http.post_json(&url, &body).await?;
            vectors.push(floats("gemini", &reply["embedding"]["values"])?);
        }
        Ok(vectors)
    }
}

/// Builds the embedding model a configuration describes (`openai`, `gemini`, or `local`).
pub fn build_embedder(config: &ProviderConfig) -> Result<Arc<dyn Embedder>> {
    if config.timeout_secs == 0 {
        return Err(AdkError::Config("timeout_secs must be at least 1".into()));
    }
    let timeout = Duration::from_secs(config.timeout_secs);
    let base_url = config.base_url();
    let base_url = base_url.as_deref();
    Ok(match config.provider {
        ProviderKind::Openai => {
            let mut model = OpenAiEmbeddings::new(base_url.unwrap_or(OPENAI_BASE_URL), config.require_model()?)?
                .with_timeout(timeout);
            if let Some(key) = config.api_key()? {
                model = model.with_api_key(key)?;
            }
            Arc::new(model)
        }
        ProviderKind::Gemini => {
            let mut model = GeminiEmbeddings::new(config.require_model()?)?
                .with_base_url(base_url.unwrap_or(GEMINI_BASE_URL))
                .with_timeout(timeout);
            if let Some(key) = config.api_key()? {
                model = model.with_api_key(key)?;
            }
            Arc::new(model)
        }
        ProviderKind::Mock => {
            return Err(AdkError::Config(
                "provider mock has no embedding model: use openai, gemini or local".into(),
            ));
        }
        #[cfg(feature = "local-embeddings")]
        ProviderKind::Local => Arc::new(crate::local_embedding::LocalEmbeddings::load(config.require_model()?)?),
        #[cfg(not(feature = "local-embeddings"))]
        ProviderKind::Local => {
            return Err(AdkError::Config(
                "provider local needs a server built with the `local-embeddings` feature".into(),
            ));
        }
    })
}

/// Reads an embeddings file: app name (or `*` for every other app) -> provider, e.g.
///
/// ```yaml
/// support: { provider: openai, model: text-embedding-3-small, api_key_env: OPENAI_API_KEY }
/// "*": { provider: gemini, model: text-embedding-004, api_key_env: GOOGLE_API_KEY }
/// ```
///
/// `Config` errors name the file and the app.
pub fn load_embedders(path: &Path) -> Result<Embedders> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| AdkError::Config(format!("{file}: cannot read the embeddings file: {e}")))?;
    let configs: BTreeMap<String, ProviderConfig> =
        yaml_serde::from_str(&text).map_err(|e| AdkError::Config(format!("{file}: {e}")))?;
    configs
        .into_iter()
        .map(|(app, config)| {
            if app != "*" {
                adk_grpc_core::validate::id("app name", &app).map_err(|e| AdkError::Config(format!("{file}: {e}")))?;
            }
            let embedder = build_embedder(&config).map_err(|e| match e {
                AdkError::Config(message) => AdkError::Config(format!("{file}: app {app:?}: {message}")),
                other => other,
            })?;
            Ok((app, embedder))
        })
        .collect()
}
