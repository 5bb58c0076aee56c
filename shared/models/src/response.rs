//! Building the responses every provider returns, so they all look alike.

use adk_grpc_core::{Content, FinishReason, LlmResponse, Part, PartKind, UsageMetadata};
use serde_json::Value;

/// One streamed text chunk.
pub(crate) fn partial_text(text: impl Into<String>) -> LlmResponse {
    LlmResponse {
        content: Some(Content::new("model").with_text(text)),
        partial: Some(true),
        ..Default::default()
    }
}

/// One streamed piece of the model's thoughts (a part with `thought: true`).
pub(crate) fn partial_thought(text: impl Into<String>) -> LlmResponse {
    LlmResponse {
        content: Some(Content::new("model").with_part(thought_part(text))),
        partial: Some(true),
        ..Default::default()
    }
}

pub(crate) fn thought_part(text: impl Into<String>) -> Part {
    Part {
        thought: Some(true),
        ..Part::text_part(text)
    }
}

/// The complete reply of a model call. One that carries nothing and did not
/// end normally says why in `error_code`/`error_message`, as ADK does, so the
/// agent can tell "filtered" from "said nothing".
pub(crate) fn complete(
    provider: &str,
    parts: Vec<Part>,
    finish_reason: Option<FinishReason>,
    usage: Option<UsageMetadata>,
) -> LlmResponse {
    let mut response = LlmResponse {
        usage_metadata: usage,
        finish_reason,
        ..Default::default()
    };
    if !parts.is_empty() {
        response.content = Some(Content {
            role: "model".into(),
            parts,
        });
    } else if let Some(reason) = finish_reason.filter(|r| *r != FinishReason::Stop) {
        let code = finish_reason_code(reason);
        response.error_message = Some(format!("{provider} returned no content (finish reason {code})"));
        response.error_code = Some(code);
    }
    response
}

/// `MAX_TOKENS`, `SAFETY`…: the names the enum serializes to.
pub(crate) fn finish_reason_code(reason: FinishReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{reason:?}"))
}

/// Adds text to a part list, merging it into a text part just before it so a
/// streamed reply ends as one text part rather than one per chunk.
pub(crate) fn push_text(parts: &mut Vec<Part>, text: &str) {
    if let Some(Part {
        kind: PartKind::Text { text: last },
        thought: None,
        ..
    }) = parts.last_mut()
    {
        last.push_str(text);
    } else {
        parts.push(Part::text_part(text));
    }
}

/// Adds thought text, merging it into a thought part just before it, so a streamed
/// reply's thoughts end as one part.
pub(crate) fn push_thought(parts: &mut Vec<Part>, text: &str) {
    if let Some(Part {
        kind: PartKind::Text { text: last },
        thought: Some(true),
        thought_signature: None,
        ..
    }) = parts.last_mut()
    {
        last.push_str(text);
    } else {
        parts.push(thought_part(text));
    }
}

/// A reply's token log probabilities as they arrive (ADK's `avg_logprobs` and
/// `logprobs_result`, in google.genai's field names).
#[derive(Default)]
pub(crate) struct Logprobs {
    /// The average the provider reported, if it did.
    pub(crate) average: Option<f64>,
    /// Each step's chosen token: `{token, log_probability}` (Gemini adds `token_id`).
    pub(crate) chosen: Vec<Value>,
    /// Each step's likeliest tokens: `{candidates: [{token, log_probability}]}`.
    pub(crate) top: Vec<Value>,
}

impl Logprobs {
    /// Sets them on the complete response. The average is that of the chosen tokens
    /// when they are known (a streamed reply's chunks each report their own
    /// average), else the provider's.
    pub(crate) fn apply(self, response: &mut LlmResponse) {
        if self.chosen.is_empty() && self.top.is_empty() && self.average.is_none() {
            return;
        }
        let chosen: Vec<f64> = self
            .chosen
            .iter()
            .filter_map(|c| c["log_probability"].as_f64())
            .collect();
        response.avg_logprobs = match chosen.len() {
            0 => self.average,
            n => Some(chosen.iter().sum::<f64>() / n as f64),
        };
        if !self.chosen.is_empty() || !self.top.is_empty() {
            let mut result = serde_json::Map::new();
            result.insert("chosen_candidates".into(), Value::Array(self.chosen));
            result.insert("top_candidates".into(), Value::Array(self.top));
            response.logprobs_result = Some(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_filtered_reply_carries_an_error_code() {
        let response = complete("p", vec![], Some(FinishReason::MaxTokens), None);
        assert_eq!(response.content, None);
        assert_eq!(response.error_code.as_deref(), Some("MAX_TOKENS"));
        assert!(response.turn_complete.is_none() && response.partial.is_none());
        let normal = complete("p", vec![], Some(FinishReason::Stop), None);
        assert_eq!(normal.error_code, None);
    }

    #[test]
    fn text_merges() {
        let mut parts = vec![];
        push_text(&mut parts, "a");
        push_text(&mut parts, "b");
        assert_eq!(parts, [Part::text_part("ab")]);
        push_thought(&mut parts, "t");
        push_thought(&mut parts, "u");
        push_text(&mut parts, "c");
        assert_eq!(parts, [Part::text_part("ab"), thought_part("tu"), Part::text_part("c")]);
    }
}
