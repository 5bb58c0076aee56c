//! The flags bounding what the runner reads of a reply from outside the process
//! (adk_grpc_core::replies): set once, before the agents file is loaded.

use adk_grpc_core::replies::{
    DEFAULT_MAX_MODEL_REPLY_BYTES, DEFAULT_MAX_TOOL_REPLY_BYTES, set_max_saved_reply_bytes, set_reply_limits,
};
use clap::builder::RangedU64ValueParser;

#[derive(Debug, Clone, clap::Args)]
pub struct ReplyArgs {
    /// Largest reply read from an HTTP or OpenAPI tool, a hook, an MCP server (a body or a stdio line), an A2A
    /// remote or a remote OpenAPI spec, in bytes; reading stops there. A tool's longer reply becomes an error
    /// the model reads, a hook's a hook failure. The default leaves room in the 1 MiB event a reply becomes
    #[arg(
        long,
        env = "ADK_MAX_TOOL_REPLY_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_TOOL_REPLY_BYTES,
        value_parser = RangedU64ValueParser::<usize>::new().range(1024..),
    )]
    pub max_tool_reply_bytes: usize,

    /// Largest reply read from a model provider (a whole reply, or one event of a streamed one), in bytes;
    /// reading stops there and the model call fails with RESOURCE_EXHAUSTED naming the model
    #[arg(
        long,
        env = "ADK_MAX_MODEL_REPLY_BYTES",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_MODEL_REPLY_BYTES,
        value_parser = RangedU64ValueParser::<usize>::new().range(1024..),
    )]
    pub max_model_reply_bytes: usize,
}

impl ReplyArgs {
    /// Makes these the process's limits; `max_artifact_bytes` (the artifact store's
    /// `--max-artifact-bytes`) bounds what a tool with `large_reply: artifact` reads.
    pub fn apply(&self, max_artifact_bytes: u64) {
        set_reply_limits(self.max_tool_reply_bytes, self.max_model_reply_bytes);
        set_max_saved_reply_bytes(usize::try_from(max_artifact_bytes).unwrap_or(usize::MAX));
    }
}
