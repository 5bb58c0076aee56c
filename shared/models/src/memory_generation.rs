//! The servers' `--memory-generation` file: per app (or `*` for every other app), the
//! model GenerateMemories asks and the app's memory topics, few-shot examples and ttl
//! (see `adk_grpc_core::memory::GenerationConfig`).

use crate::config::{ProviderConfig, build_model};
use adk_grpc_core::memory::{GenerationConfig, Generators, IngestConfig, MemoryExample, MemoryTopic};
use adk_grpc_core::{AdkError, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One app's entry of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppGeneration {
    model: ProviderConfig,
    /// Empty: Memory Bank's managed topics.
    #[serde(default)]
    topics: Vec<MemoryTopic>,
    #[serde(default)]
    examples: Vec<MemoryExample>,
    /// 0 or absent: memories do not expire.
    #[serde(default)]
    ttl_secs: u64,
    /// When ingested events are generated from; absent: the defaults.
    #[serde(default)]
    ingest: IngestConfig,
}

/// Reads a memory generation file, e.g.
///
/// ```yaml
/// support:
///   model: { provider: openai, model: gpt-4o-mini, api_key_env: OPENAI_API_KEY }
///   topics:
///     - label: USER_PREFERENCES
///     - { label: ORDERS, description: "The user's orders and their state" }
///   examples:
///     - conversation: "user: my order 1234 never arrived"
///       facts: [{ fact: "The user's order 1234 did not arrive", topics: [ORDERS] }]
///   ttl_secs: 2592000
///   ingest: { max_events: 20, idle_secs: 120 }
/// ```
///
/// `Config` errors name the file, the app and the field.
pub fn load_generators(path: &Path) -> Result<Generators> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| AdkError::Config(format!("{file}: cannot read the memory generation file: {e}")))?;
    let apps: BTreeMap<String, AppGeneration> =
        yaml_serde::from_str(&text).map_err(|e| AdkError::Config(format!("{file}: {e}")))?;
    apps.into_iter()
        .map(|(app, entry)| {
            let in_app = |e: AdkError| match e {
                AdkError::Config(message) => AdkError::Config(format!("{file}: app {app:?}: {message}")),
                AdkError::InvalidArgument { message, .. } => {
                    AdkError::Config(format!("{file}: app {app:?}: {message}"))
                }
                other => other,
            };
            if app != "*" {
                adk_grpc_core::validate::id("app name", &app).map_err(in_app)?;
            }
            let config = GenerationConfig {
                model: build_model(&entry.model).map_err(in_app)?,
                topics: entry.topics,
                examples: entry.examples,
                ttl: (entry.ttl_secs > 0).then(|| Duration::from_secs(entry.ttl_secs)),
                ingest: entry.ingest,
            };
            config.validate("").map_err(in_app)?;
            Ok((app, Arc::new(config)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<Generators> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("generation.yaml");
        std::fs::write(&path, yaml).unwrap();
        load_generators(&path)
    }

    fn error(yaml: &str) -> String {
        load(yaml).unwrap_err().to_string()
    }

    #[test]
    fn a_valid_file_gives_each_app_its_model_topics_examples_and_ttl() {
        let generators = load(
            r#"
support:
  model: { provider: openai, model: gpt-test, base_url: "http://127.0.0.1:9/v1" }
  topics: [{ label: USER_PREFERENCES }, { label: ORDERS, description: "The user's orders" }]
  examples:
    - conversation: "user: order 12 never came"
      facts: [{ fact: "Order 12 did not arrive", topics: [ORDERS] }]
  ttl_secs: 60
  ingest: { max_events: 7, idle_secs: 5 }
"*":
  model: { provider: gemini, model: gemini-test }
"#,
        )
        .unwrap();
        let support = &generators["support"];
        assert_eq!(support.model.name(), "gpt-test");
        assert_eq!(support.topics[1].label, "ORDERS");
        assert_eq!(support.examples[0].facts[0].topics, ["ORDERS"]);
        assert_eq!(support.ttl, Some(Duration::from_secs(60)));
        assert_eq!((support.ingest.max_events, support.ingest.idle_secs), (7, 5));
        assert!(generators["*"].topics.is_empty() && generators["*"].ttl.is_none());
        assert_eq!(generators["*"].ingest, IngestConfig::default());
    }

    #[test]
    fn every_bad_field_is_named_with_its_app() {
        let model = "model: { provider: openai, model: m }";
        for (yaml, expected) in [
            (
                format!("a:\n  {model}\n  topics: [{{ label: PETS }}]"),
                "topics[0].description",
            ),
            (
                format!("a:\n  {model}\n  topics: [{{ label: 'no space', description: d }}]"),
                "topics[0].label",
            ),
            (
                format!("a:\n  {model}\n  examples: [{{ conversation: '' }}]"),
                "examples[0].conversation",
            ),
            (
                format!("a:\n  {model}\n  examples: [{{ conversation: c, facts: [{{ fact: '' }}] }}]"),
                "examples[0].facts[0].fact",
            ),
            (format!("a:\n  {model}\n  ttl_secs: 999999999999"), "ttl"),
            (
                format!("a:\n  {model}\n  ingest: {{ max_events: 0 }}"),
                "ingest.max_events",
            ),
            (
                format!("a:\n  {model}\n  ingest: {{ idle_secs: 0 }}"),
                "ingest.idle_secs",
            ),
            (
                format!("a:\n  {model}\n  ingest: {{ every: 1 }}"),
                "unknown field `every`",
            ),
            (format!("a:\n  {model}\n  colour: blue"), "unknown field `colour`"),
            ("a:\n  model: { provider: openai }".to_string(), "needs a `model`"),
            (format!("\"bad\\tapp\":\n  {model}"), "app name"),
        ] {
            let message = error(&yaml);
            assert!(message.contains(expected), "{expected:?} not in {message:?}");
        }
        assert!(error("a:\n  model: { provider: openai }").contains("app \"a\""));
    }
}
