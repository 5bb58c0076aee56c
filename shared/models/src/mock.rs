//! A deterministic model for demos and tests that have no API key.
//!
//! Two modes:
//! - **echo**: replies "You said: <the last user text>";
//! - **scripted**: plays a list of turns, one per model call, in order.
//!
//! By default the script is a cursor on the model instance, shared by every
//! conversation that uses the instance. The runner builds one model per app, so
//! a test that scripts a conversation should give it an app of its own (or run
//! its conversations one after another in the order the script expects).
//! With `per_conversation` every conversation plays the script from its start
//! instead: a demo then answers each new session the same way, however many
//! ran before it on the same server.

use crate::response;
use adk_grpc_core::{
    AdkError, Content, FinishReason, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part, Result, UsageMetadata,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The mock's settings as the runner's configuration declares them:
///
/// ```yaml
/// mock:
///   turns:
///     - text: "Let me look that up."
///     - function_calls:
///         - name: get_weather
///           args: { city: Paris }
///     - text: "It is sunny in Paris."
///     - json: { city: Paris, sky: sunny }     # a structured reply (output_schema)
///     - thinking: { thought: "Sunny, so…", text: "Take sunglasses." }
///   when_exhausted: echo   # or `error` (the default)
///   per_conversation: true # each conversation from turn 1 (default: one script per server)
/// ```
///
/// No turns means echo mode.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockConfig {
    #[serde(default)]
    pub turns: Vec<MockTurn>,
    #[serde(default)]
    pub when_exhausted: WhenExhausted,
    /// Each conversation plays the script from its first turn (see [`MockModel::per_conversation`]).
    #[serde(default)]
    pub per_conversation: bool,
}

/// One scripted model call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MockTurn {
    /// Reply with this text.
    Text(String),
    /// Ask for these tool calls (in one response, as a parallel call).
    FunctionCalls(Vec<MockFunctionCall>),
    /// Reply with this value as JSON text, as a provider in JSON mode does.
    Json(Value),
    /// Reply with a thought part (`thought: true`) and then this text.
    Thinking { thought: String, text: String },
    /// Fail this call with a model error carrying this message.
    Error(String),
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockFunctionCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub args: Value,
    /// Left out, the runner assigns one, as for a real provider that sends none.
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// What a scripted mock does once every turn has been played.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenExhausted {
    /// Fail with `FAILED_PRECONDITION` naming the script's length: a test that
    /// calls the model more often than it planned hears about it.
    #[default]
    Error,
    /// Carry on as an echo model (handy for demos).
    Echo,
}

/// The mock model.
#[derive(Debug)]
pub struct MockModel {
    name: String,
    /// `None` in echo mode.
    script: Option<Vec<MockTurn>>,
    when_exhausted: WhenExhausted,
    per_conversation: bool,
    /// Calls answered so far; the script's position unless `per_conversation`.
    cursor: AtomicUsize,
}

impl MockModel {
    /// Echo mode: every call replies "You said: <last user text>".
    pub fn echo() -> Self {
        MockModel {
            name: "mock".into(),
            script: None,
            when_exhausted: WhenExhausted::Echo,
            per_conversation: false,
            cursor: AtomicUsize::new(0),
        }
    }

    /// Scripted mode: call N gets turn N; past the end, an error.
    pub fn scripted(turns: Vec<MockTurn>) -> Self {
        MockModel {
            script: Some(turns),
            when_exhausted: WhenExhausted::Error,
            ..MockModel::echo()
        }
    }

    /// From configuration: scripted when it has turns, echo otherwise.
    pub fn from_config(config: &MockConfig) -> Self {
        if config.turns.is_empty() {
            MockModel::echo()
        } else {
            MockModel::scripted(config.turns.clone())
                .when_exhausted(config.when_exhausted)
                .per_conversation(config.per_conversation)
        }
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn when_exhausted(mut self, behaviour: WhenExhausted) -> Self {
        self.when_exhausted = behaviour;
        self
    }

    /// With `true`, a call plays the turn numbered by how many of the agent's own
    /// turns (`model` contents) its request already holds: every conversation
    /// starts the script afresh and walks it as it goes on, whatever other
    /// conversations did. The runner sends an agent its own turns as `model`
    /// contents and everyone else's as `user` ones, so this counts the agent's turns.
    pub fn per_conversation(mut self, per_conversation: bool) -> Self {
        self.per_conversation = per_conversation;
        self
    }

    /// How many calls the model has answered (or refused) so far.
    pub fn calls(&self) -> usize {
        self.cursor.load(Ordering::SeqCst)
    }

    fn next_turn(&self, request: &LlmRequest) -> Result<MockTurn> {
        let mut call = self.cursor.fetch_add(1, Ordering::SeqCst);
        if self.per_conversation {
            call = request.contents.iter().filter(|c| c.role == "model").count();
        }
        let echo = || MockTurn::Text(echo_reply(request));
        let Some(script) = &self.script else {
            return Ok(echo());
        };
        match (script.get(call), self.when_exhausted) {
            (Some(turn), _) => Ok(turn.clone()),
            (None, WhenExhausted::Echo) => Ok(echo()),
            (None, WhenExhausted::Error) => Err(AdkError::FailedPrecondition(format!(
                "mock model `{}`: script exhausted, it has {} turn(s) and this is call {} \
                 (set `when_exhausted: echo` to fall back to echoing)",
                self.name,
                script.len(),
                call + 1
            ))),
        }
    }
}

fn echo_reply(request: &LlmRequest) -> String {
    let last_user_text = request
        .contents
        .iter()
        .rev()
        .filter(|c| c.role == "user")
        .find_map(Content::text);
    match last_user_text {
        Some(text) => format!("You said: {text}"),
        None => "You said nothing.".to_string(),
    }
}

/// Whitespace-separated words: the mock's stand-in for tokens.
fn word_count(text: &str) -> i32 {
    i32::try_from(text.split_whitespace().count()).unwrap_or(i32::MAX)
}

/// The reply cut after each run of whitespace, so the pieces join back exactly.
fn words_with_spacing(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            pieces.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

fn text_partials(text: &str) -> impl Iterator<Item = Result<LlmResponse>> + '_ {
    words_with_spacing(text)
        .into_iter()
        .map(|w| Ok(response::partial_text(w)))
}

#[async_trait]
impl Llm for MockModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn provider(&self) -> &str {
        "mock"
    }

    async fn generate_content(&self, request: LlmRequest, stream: bool) -> Result<LlmResponseStream> {
        let prompt_words: i32 = request
            .contents
            .iter()
            .filter_map(Content::text)
            .map(|t| word_count(&t))
            .sum();
        let mut responses: Vec<Result<LlmResponse>> = Vec::new();
        let (parts, reply_words) = match self.next_turn(&request)? {
            MockTurn::Error(message) => return Err(AdkError::Model(format!("mock model `{}`: {message}", self.name))),
            MockTurn::Text(text) => {
                if stream {
                    responses.extend(text_partials(&text));
                }
                (vec![Part::text_part(&text)], word_count(&text))
            }
            MockTurn::Json(value) => {
                let text = value.to_string();
                if stream {
                    responses.extend(text_partials(&text));
                }
                (vec![Part::text_part(&text)], word_count(&text))
            }
            MockTurn::Thinking { thought, text } => {
                if stream {
                    responses.push(Ok(response::partial_thought(&thought)));
                    responses.extend(text_partials(&text));
                }
                let words = word_count(&thought).saturating_add(word_count(&text));
                (vec![response::thought_part(thought), Part::text_part(&text)], words)
            }
            MockTurn::FunctionCalls(calls) => {
                let parts = calls
                    .into_iter()
                    .map(|c| Part::function_call(c.name, c.args, c.id))
                    .collect();
                (parts, 0)
            }
        };
        let usage = UsageMetadata {
            prompt_token_count: Some(prompt_words),
            candidates_token_count: Some(reply_words),
            total_token_count: Some(prompt_words.saturating_add(reply_words)),
            ..Default::default()
        };
        responses.push(Ok(response::complete(
            "mock",
            parts,
            Some(FinishReason::Stop),
            Some(usage),
        )));
        Ok(Box::pin(futures::stream::iter(responses)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_their_spacing() {
        assert_eq!(
            words_with_spacing("You said:  hi there "),
            ["You ", "said:  ", "hi ", "there "]
        );
        assert_eq!(words_with_spacing(""), Vec::<&str>::new());
        assert_eq!(words_with_spacing("  lead"), ["  ", "lead"]);
    }
}
