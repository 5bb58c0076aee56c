//! The last check of any tool's result, whatever the tool (a Rust function, an MCP
//! server over stdio, a client tool): a response too large for the event it becomes
//! is the tool's error, which the model reads, instead of an event the store refuses
//! and a run that ends without saying which tool answered what.
//!
//! And what a tool that reads its reply itself (HTTP, OpenAPI, MCP) does with one too
//! large for its event: by default the same error, read no further than the limit;
//! with [`LargeReply::Artifact`], the reply is read up to the artifact limit, saved as
//! a session artifact, and the model gets a reference to it instead.

use crate::large_reply::LargeReply;
use adk_grpc_core::{AdkError, Part, Result, ToolContext, ToolOutput, replies};
use serde_json::{Value, json};
use std::io::Write;

impl LargeReply {
    /// `output` as the model gets it from `tool`: as it is within the limit of a tool
    /// reply, or without `Artifact` (the flow's [`within_reply_limit`] then refuses it);
    /// a longer response, with `Artifact`, saved as JSON and answered by its reference.
    /// For tools whose reply is a result built from a message (MCP, the HTTP envelope).
    pub(crate) async fn fit(self, tool: &str, ctx: &dyn ToolContext, output: ToolOutput) -> Result<ToolOutput> {
        if self == LargeReply::Error || !is_large(json_len(&output.response)) {
            return Ok(output);
        }
        let json = serde_json::to_vec(&output.response).map_err(|e| AdkError::Internal(e.to_string()))?;
        Ok(ToolOutput {
            response: save_large_reply(tool, ctx, json, JSON_MIME).await?,
            parts: output.parts,
        })
    }
}

pub(crate) const JSON_MIME: &str = "application/json";
pub(crate) const TEXT_MIME: &str = "text/plain";

/// True for a reply longer than the limit of a tool reply: only a tool that saves
/// large replies ([`LargeReply::Artifact`]) reads one that far.
pub(crate) fn is_large(size: usize) -> bool {
    size > replies::max_tool_reply_bytes()
}

/// Whether `bytes` are one JSON value, checked without building it (a saved reply
/// may be hundreds of MiB).
pub(crate) fn check_json(bytes: &[u8]) -> serde_json::Result<()> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map(drop)
}

/// Saves `bytes`, a reply of `tool` too large for its event, as they are: the session
/// artifact `<tool>-<function call id>` (`.json`, or `.txt` for text), recorded in the
/// call's `artifact_delta` by the tool context. Returns what the model reads instead:
/// the artifact's name, version, size and MIME type.
pub(crate) async fn save_large_reply(
    tool: &str,
    ctx: &dyn ToolContext,
    bytes: Vec<u8>,
    mime_type: &str,
) -> Result<Value> {
    let size = bytes.len();
    let limit = replies::max_tool_reply_bytes();
    let extension = if mime_type == JSON_MIME { "json" } else { "txt" };
    let file_name = format!("{}-{}.{extension}", name_safe(tool), name_safe(ctx.function_call_id()));
    let answered = format!(
        "tool {tool} answered {size} bytes, more than {limit} bytes, the limit of a tool's reply \
         (--max-tool-reply-bytes, ADK_MAX_TOOL_REPLY_BYTES)"
    );
    let artifacts = ctx.artifacts().ok_or_else(|| {
        AdkError::Tool(format!(
            "{answered}; it is to be saved as an artifact (large_reply: artifact), but this runner has no artifact service"
        ))
    })?;
    let version = artifacts
        .save(&file_name, &Part::inline_data(mime_type, bytes))
        .await
        .map_err(|e| AdkError::Tool(format!("{answered}; saving it as the artifact {file_name} failed: {e}")))?;
    Ok(json!({
        "artifact": {
            "file_name": file_name,
            "version": version,
            "size_bytes": size,
            "mime_type": mime_type,
        },
        "note": format!(
            "{answered}, so it was saved as the session artifact {file_name} (version {version}); \
             load_artifacts loads it"
        ),
    }))
}

/// `text` as part of an artifact name: letters, digits, `_`, `-` and `.` kept, anything
/// else (a `/`, a `user:` scope) replaced, so the name is always a plain session name.
fn name_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `output`, or a tool error naming `tool`, the response's size and the limit when its
/// JSON is longer than `--max-tool-reply-bytes`.
pub(crate) fn within_reply_limit(tool: &str, output: ToolOutput) -> Result<ToolOutput> {
    let limit = replies::max_tool_reply_bytes();
    let size = json_len(&output.response);
    if size <= limit {
        return Ok(output);
    }
    Err(AdkError::Tool(format!(
        "tool {tool} answered {size} bytes of JSON, more than {limit} bytes, the limit of a tool's reply \
         (--max-tool-reply-bytes, ADK_MAX_TOOL_REPLY_BYTES): the event it would make is too large; \
         answer with less, or save large data as an artifact and answer with its name"
    )))
}

/// The length of `value` as compact JSON, counted without building the text.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_saved_reply_is_named_as_a_plain_session_artifact_whatever_the_tool_and_call() {
        let name = format!("{}-{}.json", name_safe("user:ev/get"), name_safe("../call 1"));
        assert_eq!(name, "user_ev_get-.._call_1.json");
        adk_grpc_core::artifact::validate_file_name(&name).expect("a valid name");
        assert!(!adk_grpc_core::artifact::is_user_scoped(&name));
    }

    #[test]
    fn a_response_longer_than_the_limit_is_an_error_naming_the_tool_and_sizes() {
        let limit = replies::max_tool_reply_bytes();
        let fits = ToolOutput::new(json!({ "data": "x".repeat(limit - 20) }));
        assert!(within_reply_limit("small", fits).is_ok());
        let big = ToolOutput::new(json!({ "data": "x".repeat(limit) }));
        let size = limit + r#"{"data":""}"#.len();
        let error = within_reply_limit("big", big).unwrap_err().to_string();
        assert!(
            error.contains(&format!(
                "tool big answered {size} bytes of JSON, more than {limit} bytes"
            )),
            "{error}"
        );
    }
}
