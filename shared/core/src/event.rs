//! Events: the immutable entries of a session's log.

use crate::content::{Content, FunctionCall, FunctionResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// A JSON object: the typed home of ADK's free-form metadata fields, and of the
/// `extensions` that carry ADK fields without a typed field (see docs/adk-fields.md).
pub type JsonObject = serde_json::Map<String, Value>;

/// Why a model stopped generating (google.genai's FinishReason values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinishReason {
    Stop,
    MaxTokens,
    Safety,
    Recitation,
    Other,
    Language,
    Blocklist,
    ProhibitedContent,
    Spii,
    MalformedFunctionCall,
    ImageSafety,
    UnexpectedToolCall,
    TooManyToolCalls,
    ImageProhibitedContent,
    NoImage,
    ImageRecitation,
    ImageOther,
    Continuation,
}

/// Token counts of one model call. Unset and 0 are different (ADK's Optional[int]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageMetadata {
    pub prompt_token_count: Option<i32>,
    pub candidates_token_count: Option<i32>,
    pub total_token_count: Option<i32>,
    pub cached_content_token_count: Option<i32>,
    pub thoughts_token_count: Option<i32>,
    pub tool_use_prompt_token_count: Option<i32>,
    pub prompt_tokens_details: Vec<ModalityTokenCount>,
    pub cache_tokens_details: Vec<ModalityTokenCount>,
    pub candidates_tokens_details: Vec<ModalityTokenCount>,
    pub tool_use_prompt_tokens_details: Vec<ModalityTokenCount>,
    /// google.genai's TrafficType name.
    pub traffic_type: Option<String>,
}

/// Tokens of one modality ("TEXT", "IMAGE", …).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModalityTokenCount {
    pub modality: Option<String>,
    pub token_count: Option<i32>,
}

/// A transcription of live audio.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Transcription {
    pub text: Option<String>,
    pub finished: Option<bool>,
    /// google.genai Transcription fields without a typed field.
    pub extensions: JsonObject,
}

/// A model reply (or one streamed chunk of it) with its metadata.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LlmResponse {
    pub content: Option<Content>,
    pub usage_metadata: Option<UsageMetadata>,
    pub finish_reason: Option<FinishReason>,
    /// A streamed chunk; `None` and `Some(false)` are different values (ADK's Optional[bool]).
    pub partial: Option<bool>,
    pub turn_complete: Option<bool>,
    pub interrupted: Option<bool>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub model_version: Option<String>,
    pub grounding_metadata: Option<JsonObject>,
    pub citation_metadata: Option<JsonObject>,
    pub custom_metadata: Option<JsonObject>,
    pub input_transcription: Option<Transcription>,
    pub output_transcription: Option<Transcription>,
    pub avg_logprobs: Option<f64>,
    pub logprobs_result: Option<JsonObject>,
    /// google.genai's TurnCompleteReason name.
    pub turn_complete_reason: Option<String>,
}

/// A tool's request that the user confirm a call, or the user's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolConfirmation {
    pub hint: String,
    pub confirmed: bool,
    /// Any JSON; `Value::Null` when unset.
    pub payload: Value,
}

/// A summary standing in for a range of earlier events in the model's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCompaction {
    pub start_timestamp: DateTime<Utc>,
    pub end_timestamp: DateTime<Utc>,
    pub compacted_content: Content,
}

/// Side effects of an event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EventActions {
    /// State changes, keys keeping their scope prefix.
    pub state_delta: HashMap<String, Value>,
    /// Artifacts written: file name -> version.
    pub artifact_delta: HashMap<String, i64>,
    pub skip_summarization: Option<bool>,
    pub transfer_to_agent: Option<String>,
    pub escalate: Option<bool>,
    pub transfer_reason: Option<String>,
    /// Function call id -> ADK AuthConfig (JSON).
    pub requested_auth_configs: JsonObject,
    /// Function call id -> the confirmation asked for.
    pub requested_tool_confirmations: HashMap<String, ToolConfirmation>,
    pub compaction: Option<EventCompaction>,
    pub end_of_agent: Option<bool>,
    pub agent_state: Option<JsonObject>,
    pub rewind_before_invocation_id: Option<String>,
    /// The structured reply given through a `set_model_response` call (ADK's field),
    /// on the call's response event.
    #[serde(default)]
    pub set_model_response: Option<Value>,
    /// ADK EventActions fields without a typed field, as ADK's JSON.
    pub extensions: JsonObject,
}

impl EventActions {
    pub fn skips_summarization(&self) -> bool {
        self.skip_summarization == Some(true)
    }

    pub fn escalates(&self) -> bool {
        self.escalate == Some(true)
    }
}

/// One entry of a session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// A UUIDv4; an empty id is assigned by the session store on append.
    pub id: String,
    pub timestamp: DateTime<Utc>,
    pub invocation_id: String,
    pub branch: String,
    pub author: String,
    pub llm_response: LlmResponse,
    pub actions: EventActions,
    pub long_running_tool_ids: Vec<String>,
    /// Position in the session's log (1, 2, ...), assigned on append; 0 when not stored.
    pub sequence: u64,
    /// The id of the call that delegated the task this event belongs to (ADK 2's
    /// `isolation_scope`); empty outside any task. Which events an agent reads follows
    /// it (see the agents' history).
    #[serde(default)]
    pub isolation_scope: String,
    /// A task's output, on the `finish_task` response that ends it (ADK 2's `output`).
    #[serde(default)]
    pub output: Option<Value>,
    /// ADK Event fields without a typed field, as ADK's JSON (see docs/adk-fields.md).
    pub extensions: JsonObject,
}

impl Event {
    /// A new event with a fresh id and the current time.
    pub fn new(invocation_id: impl Into<String>) -> Self {
        Event {
            id: new_event_id(),
            timestamp: Utc::now(),
            invocation_id: invocation_id.into(),
            branch: String::new(),
            author: String::new(),
            llm_response: LlmResponse::default(),
            actions: EventActions::default(),
            long_running_tool_ids: Vec::new(),
            sequence: 0,
            isolation_scope: String::new(),
            output: None,
            extensions: JsonObject::new(),
        }
    }

    pub fn with_author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    pub fn with_content(mut self, content: Content) -> Self {
        self.llm_response.content = Some(content);
        self
    }

    pub fn with_state_delta(mut self, key: impl Into<String>, value: Value) -> Self {
        self.actions.state_delta.insert(key.into(), value);
        self
    }

    pub fn content(&self) -> Option<&Content> {
        self.llm_response.content.as_ref()
    }

    /// The function calls of its content, in order (ADK's `get_function_calls`).
    pub fn function_calls(&self) -> impl Iterator<Item = FunctionCall<'_>> {
        self.content().into_iter().flat_map(Content::function_calls)
    }

    /// The function responses of its content, in order (ADK's `get_function_responses`).
    pub fn function_responses(&self) -> impl Iterator<Item = FunctionResponse<'_>> {
        self.content().into_iter().flat_map(Content::function_responses)
    }

    pub fn state_delta(&self) -> &HashMap<String, Value> {
        &self.actions.state_delta
    }

    /// Whether it calls a tool it marks long-running (ADK's `should_pause_invocation`):
    /// such an event pauses the workflow above its agent, even when the tool answered at
    /// once, and its agent stores no end.
    pub fn calls_a_long_running_tool(&self) -> bool {
        self.function_calls()
            .any(|call| self.long_running_tool_ids.iter().any(|id| id == call.id))
    }

    /// True for an event that closes an interrupted invocation ([`Event::interrupted_by_crash`]).
    pub fn interrupted(&self) -> bool {
        self.llm_response.interrupted == Some(true)
    }

    /// The event that closes invocation `invocation_id`, cut short when its runner
    /// died, in the name of `author` (the agent that was answering): `interrupted`,
    /// error code [`Event::INTERRUPTED`], and a short model turn saying so, so that the
    /// next model request does not see two user turns in a row.
    pub fn interrupted_by_crash(invocation_id: &str, author: &str) -> Event {
        let mut event = Event::new(invocation_id).with_author(author).with_content(
            Content::new("model").with_text("(This reply was interrupted: the runner stopped before it finished.)"),
        );
        event.llm_response.interrupted = Some(true);
        event.llm_response.error_code = Some(Event::INTERRUPTED.to_string());
        event.llm_response.error_message =
            Some("the runner running this invocation stopped (crashed or was killed) before it finished".to_string());
        event
    }

    /// The `error_code` of an event closing an interrupted invocation.
    pub const INTERRUPTED: &'static str = "INTERRUPTED";

    pub fn is_partial(&self) -> bool {
        self.llm_response.partial == Some(true)
    }

    /// True when the event is the agent's last word for this turn, as in ADK:
    /// skipped summaries and long-running calls end a turn; otherwise a complete
    /// event with no function call or response in it.
    pub fn is_final_response(&self) -> bool {
        if self.actions.skips_summarization() || !self.long_running_tool_ids.is_empty() {
            return true;
        }
        let has_function_parts = self.function_calls().next().is_some() || self.function_responses().next().is_some();
        !has_function_parts && !self.is_partial()
    }
}

/// The prefix of the `custom_metadata` keys only ADK itself writes (google-adk 2.13's
/// `__adk_internal_` keys, e.g. the mark on an event restored into a session). The session
/// service stores and returns them as they were appended, as ADK's own session services
/// do, so an ADK runner on the Python adapter reads back what it wrote; nothing the suite
/// sends elsewhere (A2A tasks) carries an event's `custom_metadata`. See
/// docs/semantics.md §10 rule 8.
pub const INTERNAL_METADATA_PREFIX: &str = "__adk_internal_";

/// Event ids are UUIDv4 strings.
pub fn new_event_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{FunctionResponseData, Part};
    use serde_json::json;

    #[test]
    fn new_event_has_uuid_and_now() {
        let before = Utc::now();
        let e = Event::new("inv-1");
        assert_eq!(e.invocation_id, "inv-1");
        assert!(uuid::Uuid::parse_str(&e.id).is_ok());
        assert!(e.timestamp >= before);
        assert_eq!(e.sequence, 0);
    }

    #[test]
    fn function_calls_and_responses_are_read_in_order_with_their_ids() {
        let content = Content::new("model")
            .with_text("looking")
            .with_part(Part::function_call("find", json!({"q": 1}), Some("c1".into())))
            .with_part(Part::function_call("list", json!({}), None))
            .with_part(Part::function_response(
                FunctionResponseData {
                    name: "find".into(),
                    response: json!({"ok": true}),
                },
                Some("c0".into()),
            ));
        let event = Event::new("i").with_content(content);
        let calls: Vec<(&str, &str, &Value)> = event.function_calls().map(|c| (c.id, c.name, c.args)).collect();
        assert_eq!(calls, [("c1", "find", &json!({"q": 1})), ("", "list", &json!({}))]);
        let responses: Vec<(&str, &str, &Value)> =
            event.function_responses().map(|r| (r.id, r.name, r.response)).collect();
        assert_eq!(responses, [("c0", "find", &json!({"ok": true}))]);
        let empty = Event::new("i");
        assert_eq!(empty.function_calls().count() + empty.function_responses().count(), 0);
    }

    #[test]
    fn final_response_rules() {
        let text = Event::new("i").with_content(Content::new("model").with_text("hi"));
        assert!(text.is_final_response());

        let mut partial = text.clone();
        partial.llm_response.partial = Some(true);
        assert!(!partial.is_final_response());

        let call = Event::new("i").with_content(Content::new("model").with_part(Part::function_call(
            "f",
            json!({}),
            Some("c1".into()),
        )));
        assert!(!call.is_final_response());

        let mut long_running = call.clone();
        long_running.long_running_tool_ids.push("c1".into());
        assert!(long_running.is_final_response());

        let response = Event::new("i").with_content(Content::new("tool").with_part(Part::function_response(
            FunctionResponseData {
                name: "f".into(),
                response: json!({"ok": true}),
            },
            Some("c1".into()),
        )));
        assert!(!response.is_final_response());
        let mut skipped = response;
        skipped.actions.skip_summarization = Some(true);
        assert!(skipped.is_final_response());
    }
}
