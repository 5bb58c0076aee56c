//! Provider configuration as the runner's YAML/JSON declares it, and the one
//! place a configuration becomes a model.

use crate::gemini::{GEMINI_BASE_URL, Gemini};
use crate::mock::{MockConfig, MockModel};
use crate::openai::{OPENAI_BASE_URL, OpenAiCompatible};
use adk_grpc_core::{AdkError, Llm, Result};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// Which provider serves the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions server.
    #[serde(alias = "openai_compatible", alias = "openai-compatible")]
    Openai,
    Gemini,
    Mock,
    /// An embedding model run inside the server; `model` is its directory. Embeddings only,
    /// and only in a build with the `local-embeddings` feature.
    Local,
}

/// One model, e.g.
///
/// ```yaml
/// provider: openai
/// model: llama3.2
/// base_url: http://localhost:11434/v1
/// timeout_secs: 120
/// ```
/// ```yaml
/// provider: gemini
/// model: gemini-2.0-flash
/// api_key_env: GOOGLE_API_KEY
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub provider: ProviderKind,
    /// The model name; required except for the mock (which defaults to "mock").
    #[serde(default)]
    pub model: String,
    /// Defaults: `https://api.openai.com/v1` and `https://generativelanguage.googleapis.com`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The NAME of the environment variable holding the API key (never the key
    /// itself, so configuration files hold no secret). Read when the model is
    /// built. Unset: no key is sent (local servers need none).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The NAME of an environment variable that, when set and not empty, replaces
    /// `base_url` (e.g. `OPENAI_BASE_URL`), so one file serves the provider and a local
    /// stand-in for it. Read when the model is built.
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// How long the provider may take to answer; for streams, the longest
    /// silence between two chunks.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// The mock's script; only read when `provider: mock`.
    #[serde(default)]
    pub mock: MockConfig,
    /// Without compaction, the most estimated tokens of history a turn reads for an
    /// agent on this model (newest first). None: the provider's default
    /// ([`adk_grpc_core::history::default_context_budget_tokens`]).
    #[serde(default)]
    pub context_budget_tokens: Option<usize>,
}

fn default_timeout_secs() -> u64 {
    60
}

impl ProviderConfig {
    /// A configuration with the defaults for everything but provider and model.
    pub fn new(provider: ProviderKind, model: impl Into<String>) -> Self {
        ProviderConfig {
            provider,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            base_url_env: None,
            timeout_secs: default_timeout_secs(),
            mock: MockConfig::default(),
            context_budget_tokens: None,
        }
    }

    /// The turn's history budget on this model: its own, else the provider's default.
    pub fn context_budget_tokens(&self) -> usize {
        let provider = match self.provider {
            ProviderKind::Openai => "openai",
            ProviderKind::Gemini => "gemini",
            ProviderKind::Mock => "mock",
            ProviderKind::Local => "local",
        };
        self.context_budget_tokens
            .unwrap_or_else(|| adk_grpc_core::history::default_context_budget_tokens(provider))
    }

    pub(crate) fn api_key(&self) -> Result<Option<String>> {
        let Some(var) = self.api_key_env.as_deref() else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(key) if key.trim().is_empty() => Err(AdkError::Config(format!(
                "environment variable {var} (api_key_env) is empty"
            ))),
            Ok(key) => Ok(Some(key.trim().to_string())),
            Err(std::env::VarError::NotPresent) => Err(AdkError::Config(format!(
                "environment variable {var} (api_key_env) is not set"
            ))),
            Err(std::env::VarError::NotUnicode(_)) => Err(AdkError::Config(format!(
                "environment variable {var} (api_key_env) is not valid UTF-8"
            ))),
        }
    }

    /// The base URL to call: `base_url_env`'s variable when set and not empty, else
    /// `base_url`; None: the provider's default.
    pub(crate) fn base_url(&self) -> Option<String> {
        let from_env = self
            .base_url_env
            .as_deref()
            .and_then(|var| std::env::var(var).ok())
            .filter(|url| !url.trim().is_empty());
        from_env
            .or_else(|| self.base_url.clone())
            .map(|url| url.trim().to_string())
            .filter(|url| !url.is_empty())
    }

    pub(crate) fn require_model(&self) -> Result<&str> {
        match self.model.trim() {
            "" => Err(AdkError::Config(format!(
                "provider {:?} needs a `model`",
                self.provider
            ))),
            model => Ok(model),
        }
    }
}

/// Builds the model a configuration describes.
pub fn build_model(config: &ProviderConfig) -> Result<Arc<dyn Llm>> {
    if config.timeout_secs == 0 {
        return Err(AdkError::Config("timeout_secs must be at least 1".into()));
    }
    if config.context_budget_tokens == Some(0) {
        return Err(AdkError::Config("context_budget_tokens must be at least 1".into()));
    }
    let timeout = Duration::from_secs(config.timeout_secs);
    let base_url = config.base_url();
    let base_url = base_url.as_deref();
    Ok(match config.provider {
        ProviderKind::Openai => {
            let mut model = OpenAiCompatible::new(base_url.unwrap_or(OPENAI_BASE_URL), config.require_model()?)?
                .with_timeout(timeout);
            if let Some(key) = config.api_key()? {
                model = model.with_api_key(key)?;
            }
            Arc::new(model)
        }
        ProviderKind::Gemini => {
            let mut model = Gemini::new(config.require_model()?)?
                .with_base_url(base_url.unwrap_or(GEMINI_BASE_URL))
                .with_timeout(timeout);
            if let Some(key) = config.api_key()? {
                model = model.with_api_key(key)?;
            }
            Arc::new(model)
        }
        ProviderKind::Mock => {
            let name = match config.model.trim() {
                "" => "mock",
                name => name,
            };
            Arc::new(MockModel::from_config(&config.mock).with_name(name))
        }
        ProviderKind::Local => {
            return Err(AdkError::Config(
                "provider local only serves embeddings: use openai, gemini or mock".into(),
            ));
        }
    })
}
