//! ADK's memory tools: `load_memory` (the model searches the user's long-term
//! memory) and `preload_memory` (every model request carries what memory holds
//! about the user's message).

use adk_grpc_core::{AdkError, CallbackContext, Content, LlmRequest, MemoryEntry, Result, Tool, ToolContext};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::sync::Arc;

/// A memory as the model reads it in a `load_memory` response (ADK's `MemoryEntry` as its
/// FunctionTool dumps it: pydantic's field order, `custom_metadata` even when empty; the
/// model reads the JSON as text on the OpenAI-compatible wire, so the order is part of it).
/// The metadata's keys are sorted: the store keeps no order for them.
pub(super) fn entry_json(entry: &MemoryEntry) -> Value {
    let text = entry.text();
    let metadata: std::collections::BTreeMap<_, _> = entry.custom_metadata.iter().collect();
    let mut json = json!({
        "content": { "parts": [{ "text": text }], "role": entry.content.role },
        "custom_metadata": metadata,
        "id": entry.id,
        "author": entry.author,
    });
    if let Some(timestamp) = entry.timestamp {
        json["timestamp"] = json!(adk_timestamp(timestamp));
    }
    json
}

/// A memory's time as ADK writes it for the model (`datetime.fromtimestamp(t).isoformat()`,
/// the server's local time without an offset), for a server in UTC: seconds, and
/// microseconds only when there are any.
fn adk_timestamp(timestamp: DateTime<Utc>) -> String {
    match timestamp.timestamp_subsec_micros() {
        0 => timestamp.format("%Y-%m-%dT%H:%M:%S").to_string(),
        _ => timestamp.format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
    }
}

/// Lets the model search the user's long-term memory (ADK's `load_memory`): it is
/// told it has memory, calls `load_memory(query)` and gets the best memories back.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadMemoryTool;

impl LoadMemoryTool {
    pub const NAME: &'static str = "load_memory";
}

#[async_trait]
impl Tool for LoadMemoryTool {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        // ADK's docstring, as its FunctionTool declares it.
        "Loads the memory for the current user.\n\nArgs:\n  query: The query to load the memory for.\n\nReturns:\n  \
         A list of memory results."
    }
    /// ADK's schema, word for word (no descriptions: the docstring has them).
    fn parameters_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": { "query": { "type": "string" } },
            "required": ["query"]
        }))
    }
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let query = args["query"]
            .as_str()
            .ok_or_else(|| AdkError::Tool("load_memory needs a string argument `query`".into()))?;
        let found = ctx.search_memory(query).await?;
        let memories: Vec<Value> = found.memories.iter().map(entry_json).collect();
        // ADK's function returns a LoadMemoryResponse, not a dict: its FunctionTool
        // wraps it as `result`, and the model and the stored event see it so.
        Ok(json!({ "result": { "memories": memories } }))
    }
    async fn process_llm_request(&self, _ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        // ADK's text, its line breaks included.
        super::builtin::append_instruction(
            request,
            "\nYou have memory. You can use it to answer questions. If any questions need\nyou to look up the \
             memory, you should call load_memory function with a query.\n",
        );
        Ok(())
    }
}

/// Puts what the user's memory holds about their message into every model request
/// (ADK's `preload_memory`): the model never calls it, so it is not declared to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PreloadMemoryTool;

impl PreloadMemoryTool {
    pub const NAME: &'static str = "preload_memory";
}

#[async_trait]
impl Tool for PreloadMemoryTool {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn description(&self) -> &str {
        "Preloads the user's memories relevant to their message."
    }
    async fn execute(&self, _ctx: Arc<dyn ToolContext>, _args: Value) -> Result<Value> {
        Err(AdkError::Tool("preload_memory is not a function to call".into()))
    }
    async fn process_llm_request(&self, ctx: Arc<dyn CallbackContext>, request: &mut LlmRequest) -> Result<()> {
        request.tools.retain(|tool| tool.name != Self::NAME);
        let query = ctx.user_content().text().unwrap_or_default();
        let Some(memory) = ctx.memory().filter(|_| !query.trim().is_empty()) else {
            return Ok(());
        };
        // As ADK: a memory outage must not stop the conversation, only its recall.
        let found = match memory.search(&query).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "preload_memory: the memory search failed; answering without memory");
                return Ok(());
            }
        };
        let mut lines = Vec::new();
        for entry in &found.memories {
            if let Some(timestamp) = entry.timestamp {
                lines.push(format!("Time: {}", adk_timestamp(timestamp)));
            }
            let text = entry.text();
            if !text.is_empty() {
                lines.push(match entry.author.as_str() {
                    "" => text,
                    author => format!("{author}: {text}"),
                });
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        let text = format!(
            "The following content is from your previous conversations with the user.\nThey may be useful for \
             answering the user's current query.\n<PAST_CONVERSATIONS>\n{}\n</PAST_CONVERSATIONS>\n",
            lines.join("\n")
        );
        let at = current_turn_boundary(&request.contents);
        request.contents.insert(at, Content::new("user").with_text(text));
        Ok(())
    }
}

/// Where ADK inserts request-scoped user content: before the latest run of the user's
/// messages, but after a function response (stored with role "user" too), so that a
/// tool call and its answer stay adjacent, as every provider requires.
fn current_turn_boundary(contents: &[Content]) -> usize {
    contents
        .iter()
        .rposition(|c| c.role != "user" || c.function_responses().next().is_some())
        .map_or(0, |at| at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{FunctionResponseData, Part};

    fn answer() -> Content {
        let response = FunctionResponseData {
            name: "f".into(),
            response: serde_json::json!({"result": null}),
        };
        Content::new("user").with_part(Part::function_response(response, Some("c".into())))
    }

    #[test]
    fn memories_go_before_the_users_latest_messages_and_after_a_function_response() {
        let user = |text: &str| Content::new("user").with_text(text);
        let model = Content::new("model").with_text("m");
        assert_eq!(current_turn_boundary(&[]), 0);
        assert_eq!(current_turn_boundary(&[user("a"), user("b")]), 0);
        assert_eq!(current_turn_boundary(&[user("a"), model.clone(), user("b")]), 2);
        // A tool call's answer stays right after the call.
        assert_eq!(current_turn_boundary(&[user("a"), model.clone(), answer()]), 3);
        assert_eq!(current_turn_boundary(&[user("a"), model, answer(), user("b")]), 3);
    }

    #[test]
    fn a_memory_reads_as_adk_dumps_its_memory_entry() {
        let at = |secs, micros: u32| DateTime::from_timestamp(secs, micros * 1000).expect("a time");
        let entry = MemoryEntry {
            id: "m1".into(),
            content: Content::new("user").with_text("Maria lives in Oslo."),
            author: "user".into(),
            timestamp: Some(at(1_767_225_600, 0)),
            ..Default::default()
        };
        // As text, in ADK's order: the model on the OpenAI-compatible wire reads it so.
        assert_eq!(
            entry_json(&entry).to_string(),
            r#"{"content":{"parts":[{"text":"Maria lives in Oslo."}],"role":"user"},"custom_metadata":{},"id":"m1","author":"user","timestamp":"2026-01-01T00:00:00"}"#
        );
        assert_eq!(adk_timestamp(at(1_767_225_600, 250)), "2026-01-01T00:00:00.000250");
    }
}
