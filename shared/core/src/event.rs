//! Events: the immutable entries of a session's log.

use crate::content::{Content, Part};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// Why a model stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinishReason {
    Stop,
    MaxTokens,
    Safety,
    Recitation,
    Other,
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageMetadata {
    pub prompt_token_count: i32,
    pub candidates_token_count: i32,
    pub total_token_count: i32,
}

/// A model reply (or one streamed chunk of it) with its metadata.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LlmResponse {
    pub content: Option<Content>,
    pub usage_metadata: Option<UsageMetadata>,
    pub finish_reason: Option<FinishReason>,
    pub partial: bool,
    pub turn_complete: bool,
    pub interrupted: bool,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

/// Side effects of an event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EventActions {
    /// State changes, keys keeping their scope prefix.
    pub state_delta: HashMap<String, Value>,
    /// Artifacts written: file name -> version.
    pub artifact_delta: HashMap<String, i64>,
    pub skip_summarization: bool,
    pub transfer_to_agent: Option<String>,
    pub escalate: bool,
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

    pub fn state_delta(&self) -> &HashMap<String, Value> {
        &self.actions.state_delta
    }

    pub fn is_partial(&self) -> bool {
        self.llm_response.partial
    }

    /// True when the event is the agent's last word for this turn, as in ADK:
    /// skipped summaries and long-running calls end a turn; otherwise a complete
    /// event with no function call or response in it.
    pub fn is_final_response(&self) -> bool {
        if self.actions.skip_summarization || !self.long_running_tool_ids.is_empty() {
            return true;
        }
        let has_function_parts = self.content().is_some_and(|c| {
            c.parts
                .iter()
                .any(|p| matches!(p, Part::FunctionCall { .. } | Part::FunctionResponse { .. }))
        });
        !has_function_parts && !self.llm_response.partial
    }
}

/// Event ids are UUIDv4 strings.
pub fn new_event_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::FunctionResponseData;
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
    fn final_response_rules() {
        let text = Event::new("i").with_content(Content::new("model").with_text("hi"));
        assert!(text.is_final_response());

        let mut partial = text.clone();
        partial.llm_response.partial = true;
        assert!(!partial.is_final_response());

        let call = Event::new("i").with_content(Content::new("model").with_part(Part::FunctionCall {
            name: "f".into(),
            args: json!({}),
            id: Some("c1".into()),
        }));
        assert!(!call.is_final_response());

        let mut long_running = call.clone();
        long_running.long_running_tool_ids.push("c1".into());
        assert!(long_running.is_final_response());

        let response = Event::new("i").with_content(Content::new("tool").with_part(Part::FunctionResponse {
            function_response: FunctionResponseData {
                name: "f".into(),
                response: json!({"ok": true}),
            },
            id: Some("c1".into()),
        }));
        assert!(!response.is_final_response());
        let mut skipped = response;
        skipped.actions.skip_summarization = true;
        assert!(skipped.is_final_response());
    }
}
