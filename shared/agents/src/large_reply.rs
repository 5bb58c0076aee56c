//! What a tool does with a reply too large for its event (the agents file's
//! `large_reply`), as far as reading it goes: where reading stops and how a reply
//! stopped there is described. Below the tools, as the HTTP client reads by it too;
//! saving a large reply is the tools' (`tools/reply_limit.rs`).

use adk_grpc_core::replies;

/// What a tool does with a reply longer than `--max-tool-reply-bytes` (the agents
/// file's `large_reply`, set per HTTP tool, OpenAPI toolset or MCP toolset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LargeReply {
    /// Reading stops at the limit; the model reads an error naming the tool and the limit.
    #[default]
    Error,
    /// Read up to the artifact limit (`--max-artifact-bytes`), saved as the session
    /// artifact `<tool>-<call id>.json` and recorded in the call's `artifact_delta`;
    /// the model reads a reference naming it. Past the artifact limit, the error.
    Artifact,
}

impl LargeReply {
    /// Where reading a reply stops: at the limit of a tool reply, unless a longer one
    /// is to be saved, which stops where the artifact store would refuse it.
    pub(crate) fn read_limit(self) -> usize {
        match self {
            LargeReply::Error => replies::max_tool_reply_bytes(),
            LargeReply::Artifact => replies::max_saved_reply_bytes().max(replies::max_tool_reply_bytes()),
        }
    }

    /// How a reply stopped at [`LargeReply::read_limit`] is described; `what` names it
    /// ("the reply to POST …").
    pub(crate) fn too_large(self, what: &str) -> String {
        match self {
            LargeReply::Error => replies::tool_reply_too_large(what),
            LargeReply::Artifact => replies::too_large(
                what,
                self.read_limit(),
                "--max-artifact-bytes, ADK_MAX_ARTIFACT_BYTES: the largest reply saved as an artifact",
            ),
        }
    }
}
