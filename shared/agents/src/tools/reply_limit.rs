//! The last check of any tool's result, whatever the tool (a Rust function, an MCP
//! server over stdio, a client tool): a response too large for the event it becomes
//! is the tool's error, which the model reads, instead of an event the store refuses
//! and a run that ends without saying which tool answered what.

use adk_grpc_core::{AdkError, Result, ToolOutput, replies};
use std::io::Write;

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
