//! Memories generated from conversations (Vertex AI Memory Bank's model): what the app's
//! model is asked and how its answers are read. Extraction turns events into facts that
//! fall under the app's memory topics; consolidation sets those facts against the user's
//! related memories and answers, per fact, create, update or delete. The pipeline that
//! runs them and stores the outcome is [`super::CoreMemoryService`]'s `generate`.

use super::{MAX_ENTRIES_PER_ADD, MemoryEntry};
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::model::{Llm, ask_once, strip_code_fence};
use crate::validate::{self, quoted};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Longest topic label, in bytes.
pub const MAX_TOPIC_LABEL_BYTES: usize = 64;
/// Longest topic description, in bytes.
pub const MAX_TOPIC_DESCRIPTION_BYTES: usize = 2048;
/// Most topics one app or call may have.
pub const MAX_TOPICS: usize = 32;
/// Longest ttl: ten years, in seconds.
pub const MAX_TTL_SECONDS: i64 = 10 * 365 * 24 * 3600;
/// Longest fact kept, in bytes: a model's longer answer is no fact (and no memory's size
/// is then beyond what an added one may have).
pub const MAX_FACT_BYTES: usize = 4096;
/// The related memories consolidation reads per new fact (by keyword search).
pub const RELATED_PER_FACT: usize = 5;

/// Memory Bank's managed topics, with what each is for (said in this project's words).
pub const MANAGED_TOPICS: &[(&str, &str)] = &[
    (
        "USER_PERSONAL_INFO",
        "Significant personal information about the user: names, relationships, hobbies, important dates, \
         where they live or work.",
    ),
    (
        "USER_PREFERENCES",
        "What the user likes, dislikes, prefers, or the style and patterns they stated or showed.",
    ),
    (
        "KEY_CONVERSATION_DETAILS",
        "Important milestones or conclusions of the conversation: decisions taken, tasks completed, outcomes.",
    ),
    (
        "EXPLICIT_INSTRUCTIONS",
        "Information the user explicitly asked to remember, or to forget.",
    ),
];

/// An ingest's buffer generates when it holds this many events, unless the app says otherwise.
pub const DEFAULT_INGEST_MAX_EVENTS: u32 = 100;
/// ...or when its user has sent nothing for this long.
pub const DEFAULT_INGEST_IDLE_SECS: u64 = 60;
/// Most events an app may let a buffer hold before it generates: one generation's worth.
pub const MAX_INGEST_MAX_EVENTS: u32 = MAX_ENTRIES_PER_ADD as u32;
/// Longest idle time an app may set: one day.
pub const MAX_INGEST_IDLE_SECS: u64 = 24 * 3600;
/// When an app's ingested events are generated from (the `ingest` of its
/// `--memory-generation` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// A user's buffer generates as soon as it holds this many events.
    pub max_events: u32,
    /// ...or once the user has sent nothing for this many seconds.
    pub idle_secs: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_events: DEFAULT_INGEST_MAX_EVENTS,
            idle_secs: DEFAULT_INGEST_IDLE_SECS,
        }
    }
}

impl IngestConfig {
    /// Checks both bounds; `field` names the config (e.g. `ingest`).
    pub fn validate(&self, field: &str) -> Result<()> {
        if !(1..=MAX_INGEST_MAX_EVENTS).contains(&self.max_events) {
            return Err(AdkError::invalid(
                format!("{field}.max_events"),
                format!("must be 1 to {MAX_INGEST_MAX_EVENTS}, got {}", self.max_events),
            ));
        }
        if !(1..=MAX_INGEST_IDLE_SECS).contains(&self.idle_secs) {
            return Err(AdkError::invalid(
                format!("{field}.idle_secs"),
                format!("must be 1 to {MAX_INGEST_IDLE_SECS}, got {}", self.idle_secs),
            ));
        }
        Ok(())
    }

    pub fn idle(&self) -> Duration {
        Duration::from_secs(self.idle_secs)
    }
}

/// A kind of information worth remembering (Memory Bank's memory topic).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryTopic {
    pub label: String,
    /// Empty for a managed topic: its own description is used.
    #[serde(default)]
    pub description: String,
}

impl MemoryTopic {
    /// Every managed topic (what an app without topics of its own gets).
    pub fn managed() -> Vec<MemoryTopic> {
        MANAGED_TOPICS
            .iter()
            .map(|(label, _)| MemoryTopic {
                label: (*label).to_string(),
                description: String::new(),
            })
            .collect()
    }

    /// The description the model is given: the topic's own, else the managed topic's.
    fn description(&self) -> &str {
        if !self.description.is_empty() {
            return &self.description;
        }
        MANAGED_TOPICS
            .iter()
            .find(|(label, _)| *label == self.label)
            .map_or("", |(_, description)| description)
    }
}

/// One fact as the extraction answers it (and as a few-shot example lists it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtractedFact {
    pub fact: String,
    #[serde(default)]
    pub topics: Vec<String>,
    /// The ids of the events the fact comes from (any of the transcript's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_event_ids: Vec<String>,
}

/// A few-shot example: a conversation and the facts it should give.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MemoryExample {
    /// The conversation, as transcript lines (`user: ...`).
    pub conversation: String,
    /// The facts to extract from it (none: nothing there is worth remembering).
    #[serde(default)]
    pub facts: Vec<ExtractedFact>,
}

/// How an app's memories are generated: its model, topics, examples and ttl.
#[derive(Clone)]
pub struct GenerationConfig {
    pub model: Arc<dyn Llm>,
    /// Empty: the managed topics.
    pub topics: Vec<MemoryTopic>,
    pub examples: Vec<MemoryExample>,
    /// How long a created or updated memory is found; none: for ever.
    pub ttl: Option<Duration>,
    /// When the app's ingested events are generated from.
    pub ingest: IngestConfig,
}

impl std::fmt::Debug for GenerationConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenerationConfig")
            .field("model", &self.model.name())
            .field("topics", &self.topics)
            .field("examples", &self.examples.len())
            .field("ttl", &self.ttl)
            .field("ingest", &self.ingest)
            .finish()
    }
}

impl GenerationConfig {
    /// Checks the topics, examples and ttl; `field` (may be empty) prefixes the field named.
    pub fn validate(&self, field: &str) -> Result<()> {
        let at = |name: &str| match field {
            "" => name.to_string(),
            _ => format!("{field}.{name}"),
        };
        validate_topics(&at("topics"), &self.topics)?;
        for (i, example) in self.examples.iter().enumerate() {
            if example.conversation.trim().is_empty() {
                return Err(AdkError::invalid(
                    at(&format!("examples[{i}].conversation")),
                    "is empty",
                ));
            }
            for (j, fact) in example.facts.iter().enumerate() {
                if fact.fact.trim().is_empty() {
                    return Err(AdkError::invalid(
                        at(&format!("examples[{i}].facts[{j}].fact")),
                        "is empty",
                    ));
                }
            }
        }
        if let Some(ttl) = self.ttl {
            ttl_seconds(&at("ttl"), i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX))?;
        }
        self.ingest.validate(&at("ingest"))
    }

    /// The topics a call uses: its own, else the app's, else the managed ones.
    pub(super) fn topics_for(&self, requested: &[MemoryTopic]) -> Vec<MemoryTopic> {
        if !requested.is_empty() {
            requested.to_vec()
        } else if !self.topics.is_empty() {
            self.topics.clone()
        } else {
            MemoryTopic::managed()
        }
    }
}

/// The generation settings of the apps that configure them: app name -> settings, `*`
/// for every app without its own.
pub type Generators = HashMap<String, Arc<GenerationConfig>>;

/// The generation settings of `app_name`, or FAILED_PRECONDITION naming the app.
pub fn generator_for(generators: &Generators, app_name: &str) -> Result<Arc<GenerationConfig>> {
    generators
        .get(app_name)
        .or_else(|| generators.get("*"))
        .cloned()
        .ok_or_else(|| {
            AdkError::FailedPrecondition(format!(
                "app {} has no memory generation model configured on this server (see --memory-generation)",
                quoted(app_name)
            ))
        })
}

pub(super) fn validate_topics(field: &str, topics: &[MemoryTopic]) -> Result<()> {
    if topics.len() > MAX_TOPICS {
        return Err(AdkError::invalid(
            field,
            format!("has {} topics, more than the limit of {MAX_TOPICS}", topics.len()),
        ));
    }
    let mut seen = HashSet::new();
    for (i, topic) in topics.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let label = &topic.label;
        if label.is_empty()
            || label.len() > MAX_TOPIC_LABEL_BYTES
            || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(AdkError::invalid(
                format!("{at}.label"),
                format!(
                    "{} must be 1-{MAX_TOPIC_LABEL_BYTES} letters, digits or underscores",
                    quoted(label)
                ),
            ));
        }
        if !seen.insert(label.as_str()) {
            return Err(AdkError::invalid(
                format!("{at}.label"),
                format!("{} is given twice", quoted(label)),
            ));
        }
        if topic.description.len() > MAX_TOPIC_DESCRIPTION_BYTES {
            return Err(AdkError::invalid(
                format!("{at}.description"),
                format!("is longer than {MAX_TOPIC_DESCRIPTION_BYTES} bytes"),
            ));
        }
        if topic.description().is_empty() {
            return Err(AdkError::invalid(
                format!("{at}.description"),
                format!("is needed: {} is not a managed topic", quoted(label)),
            ));
        }
    }
    Ok(())
}

pub(super) fn ttl_seconds(field: &str, seconds: i64) -> Result<()> {
    if !(0..=MAX_TTL_SECONDS).contains(&seconds) {
        return Err(AdkError::invalid(
            field,
            format!("must be 0 to {MAX_TTL_SECONDS} seconds, got {seconds}"),
        ));
    }
    Ok(())
}

// ---------- extraction ----------

const EXTRACTION_PROMPT: &str = "You extract memories from a conversation between a user and an assistant: \
short, self-contained facts about the user, in the third person, that will help in later conversations. \
Extract only facts that fall under one of the topics below; ignore everything else (small talk, the \
assistant's own statements, passing details). Each line of the conversation starts with its event id in \
brackets. Answer with JSON only, of the form \
{\"facts\": [{\"fact\": \"...\", \"topics\": [\"TOPIC_LABEL\"], \"source_event_ids\": [\"...\"]}]}; \
{\"facts\": []} when nothing is worth remembering.";

/// The text lines of the events (`[id] author: text`), thoughts left out.
pub(super) fn transcript(events: &[&Event]) -> String {
    let mut lines = Vec::new();
    for event in events {
        let Some(content) = event.content() else {
            continue;
        };
        for part in &content.parts {
            if let Some(text) = part.text().filter(|_| !part.is_thought()) {
                lines.push(format!("[{}] {}: {text}", event.id, event.author));
            }
        }
    }
    lines.join("\n")
}

/// Whether the event has text to remember.
pub(super) fn has_text(event: &Event) -> bool {
    event.content().is_some_and(|c| {
        c.parts
            .iter()
            .any(|p| !p.is_thought() && p.text().is_some_and(|t| !t.trim().is_empty()))
    })
}

fn extraction_instruction(topics: &[MemoryTopic], examples: &[MemoryExample]) -> String {
    let mut prompt = format!("{EXTRACTION_PROMPT}\n\nTopics:\n");
    for topic in topics {
        prompt.push_str(&format!("- {}: {}\n", topic.label, topic.description()));
    }
    for (i, example) in examples.iter().enumerate() {
        let answer = serde_json::json!({ "facts": example.facts });
        prompt.push_str(&format!(
            "\nExample {}:\nConversation:\n{}\nAnswer: {answer}\n",
            i + 1,
            example.conversation
        ));
    }
    prompt
}

/// The facts the model finds in the events, only those under one of `topics` (a fact's
/// other topics are dropped), their sources among the events (all of them when it names none).
pub(super) async fn extract(
    model: &dyn Llm,
    topics: &[MemoryTopic],
    examples: &[MemoryExample],
    events: &[&Event],
) -> Result<Vec<ExtractedFact>> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        facts: Vec<ExtractedFact>,
    }
    let answer: Answer = ask_json(model, extraction_instruction(topics, examples), transcript(events)).await?;
    let labels: HashSet<&str> = topics.iter().map(|t| t.label.as_str()).collect();
    let event_ids: HashSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let all_ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    Ok(answer
        .facts
        .into_iter()
        .filter_map(|mut fact| {
            fact.fact = fact_text(&fact.fact);
            fact.topics.retain(|t| labels.contains(t.as_str()));
            fact.source_event_ids.retain(|id| event_ids.contains(id.as_str()));
            if fact.source_event_ids.is_empty() {
                fact.source_event_ids = all_ids.clone();
            }
            (!fact.fact.is_empty() && !fact.topics.is_empty()).then_some(fact)
        })
        .collect())
}

// ---------- consolidation ----------

const CONSOLIDATION_PROMPT: &str = "You keep a user's memories consistent. You are given the user's existing \
memories (each with its id) and new facts just learned. For each new fact decide: CREATE it when no existing \
memory says the same; UPDATE an existing memory (by id) when the new fact refines or contradicts it, giving \
the memory's new text; DELETE an existing memory (by id) when the new fact makes it untrue or the user asked \
to forget it; nothing when an existing memory already says it. Answer with JSON only, of the form \
{\"actions\": [{\"action\": \"CREATE\", \"fact\": \"...\", \"topics\": [\"...\"]}, \
{\"action\": \"UPDATE\", \"id\": \"...\", \"fact\": \"...\", \"topics\": [\"...\"]}, \
{\"action\": \"DELETE\", \"id\": \"...\"}]}.";

/// What consolidation decided for one fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Consolidation {
    Create(ExtractedFact),
    Update { id: String, fact: ExtractedFact },
    Delete { id: String, source_event_ids: Vec<String> },
}

/// The changes the model decides between the new facts and the related memories. An
/// update or delete of a memory not among `related`, or of one already changed, is
/// dropped: the model may only touch what it was shown, once.
pub(super) async fn consolidate(
    model: &dyn Llm,
    topics: &[MemoryTopic],
    related: &[MemoryEntry],
    facts: Vec<ExtractedFact>,
) -> Result<Vec<Consolidation>> {
    if related.is_empty() {
        // Nothing to set them against: every fact is new.
        return Ok(facts.into_iter().map(Consolidation::Create).collect());
    }
    #[derive(Deserialize)]
    struct Action {
        action: String,
        #[serde(default)]
        id: String,
        #[serde(default)]
        fact: String,
        #[serde(default)]
        topics: Vec<String>,
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        actions: Vec<Action>,
    }
    let existing: Vec<serde_json::Value> = related
        .iter()
        .map(|m| serde_json::json!({ "id": m.id, "fact": m.text() }))
        .collect();
    let new: Vec<serde_json::Value> = facts
        .iter()
        .map(|f| serde_json::json!({ "fact": f.fact, "topics": f.topics }))
        .collect();
    let question = format!(
        "Existing memories:\n{}\n\nNew facts:\n{}",
        serde_json::Value::Array(existing),
        serde_json::Value::Array(new)
    );
    let answer: Answer = ask_json(model, CONSOLIDATION_PROMPT.to_string(), question).await?;
    let labels: HashSet<&str> = topics.iter().map(|t| t.label.as_str()).collect();
    let shown: HashMap<&str, &MemoryEntry> = related.iter().map(|m| (m.id.as_str(), m)).collect();
    let sources: Vec<String> = facts
        .iter()
        .flat_map(|f| f.source_event_ids.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // A fact's own sources when the model kept its text, else every new fact's.
    let sources_of = |text: &str| {
        facts
            .iter()
            .find(|f| f.fact == text)
            .map_or_else(|| sources.clone(), |f| f.source_event_ids.clone())
    };
    let mut touched = HashSet::new();
    let mut changes = Vec::new();
    for action in answer.actions {
        let fact = fact_text(&action.fact);
        let mut topics: Vec<String> = action
            .topics
            .into_iter()
            .filter(|t| labels.contains(t.as_str()))
            .collect();
        match action.action.to_ascii_uppercase().as_str() {
            "CREATE" if !fact.is_empty() => {
                if topics.is_empty() {
                    topics = facts
                        .iter()
                        .find(|f| f.fact == fact)
                        .map(|f| f.topics.clone())
                        .unwrap_or_default();
                }
                if !topics.is_empty() {
                    let source_event_ids = sources_of(&fact);
                    changes.push(Consolidation::Create(ExtractedFact {
                        fact,
                        topics,
                        source_event_ids,
                    }));
                }
            }
            // `touched.insert` last: only a change that is kept marks its memory.
            "UPDATE"
                if !fact.is_empty() && shown.contains_key(action.id.as_str()) && touched.insert(action.id.clone()) =>
            {
                if topics.is_empty() {
                    topics = shown[action.id.as_str()]
                        .fact
                        .as_ref()
                        .map(|f| f.topics.clone())
                        .unwrap_or_default();
                }
                let source_event_ids = sources_of(&fact);
                changes.push(Consolidation::Update {
                    id: action.id,
                    fact: ExtractedFact {
                        fact,
                        topics,
                        source_event_ids,
                    },
                });
            }
            "DELETE" if shown.contains_key(action.id.as_str()) && touched.insert(action.id.clone()) => {
                changes.push(Consolidation::Delete {
                    id: action.id,
                    source_event_ids: sources.clone(),
                });
            }
            _ => {}
        }
    }
    Ok(changes)
}

/// A model's fact as stored: trimmed; empty (dropped) when longer than [`MAX_FACT_BYTES`].
fn fact_text(text: &str) -> String {
    let text = text.trim();
    if text.len() > MAX_FACT_BYTES {
        return String::new();
    }
    text.to_string()
}

/// Asks the model once (JSON reply) and parses the reply's text as `T`.
async fn ask_json<T: serde::de::DeserializeOwned>(model: &dyn Llm, instruction: String, question: String) -> Result<T> {
    let text = ask_once(model, instruction, question, true).await?;
    serde_json::from_str(strip_code_fence(&text)).map_err(|e| {
        AdkError::Model(format!(
            "memory generation: model {} answered no JSON of the asked form ({e}): {}",
            model.name(),
            validate::quoted(&text.chars().take(200).collect::<String>())
        ))
    })
}

/// Whether a memory's ttl has passed at `now`.
pub fn is_expired(entry: &MemoryEntry, now: DateTime<Utc>) -> bool {
    entry
        .fact
        .as_ref()
        .and_then(|f| f.expire_time)
        .is_some_and(|expire| expire <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlong_fact_is_dropped() {
        assert_eq!(fact_text("  The user likes tea "), "The user likes tea");
        assert_eq!(fact_text(&"x".repeat(MAX_FACT_BYTES + 1)), "");
    }

    #[test]
    fn a_custom_topic_needs_a_description_and_a_managed_one_does_not() {
        let topic = |label: &str, description: &str| MemoryTopic {
            label: label.into(),
            description: description.into(),
        };
        assert!(validate_topics("topics", &MemoryTopic::managed()).is_ok());
        let err = validate_topics("topics", &[topic("PETS", "")]).unwrap_err();
        assert!(matches!(err, AdkError::InvalidArgument { ref field, .. } if field == "topics[0].description"));
        let err = validate_topics("topics", &[topic("bad label", "x")]).unwrap_err();
        assert!(matches!(err, AdkError::InvalidArgument { ref field, .. } if field == "topics[0].label"));
        let err = validate_topics("topics", &[topic("PETS", "pets"), topic("PETS", "pets")]).unwrap_err();
        assert!(matches!(err, AdkError::InvalidArgument { ref field, .. } if field == "topics[1].label"));
    }
}
