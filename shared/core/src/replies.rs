//! How much the runner reads of any one reply from outside the process: a tool's,
//! hook's, MCP server's, A2A remote's or OpenAPI spec's body, and a model
//! provider's whole reply or one streamed event. A reply is read against its limit
//! and dropped there, never buffered past it, so no outside party can raise the
//! runner's memory by answering big or without end.
//!
//! Process-wide: the limits are the server's flags (`--max-tool-reply-bytes`,
//! `--max-model-reply-bytes`), set once at startup before any agent is built, and
//! read where a reply is read; every part gets the same limit without each
//! constructor carrying it.

use crate::validate::MAX_EVENT_BYTES;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Default of `--max-tool-reply-bytes`: the event limit less room for the rest of
/// the event (the call's id and name, the author, actions), so a reply under it
/// fits the event it becomes.
pub const DEFAULT_MAX_TOOL_REPLY_BYTES: usize = MAX_EVENT_BYTES - 64 * 1024;
/// Default of `--max-model-reply-bytes`: a model's reply carries more than its
/// text (usage, candidates, logprobs, the provider's envelope), so it may be
/// larger than the event it becomes; it is still bounded.
pub const DEFAULT_MAX_MODEL_REPLY_BYTES: usize = 4 * MAX_EVENT_BYTES;

/// Default of the largest tool reply saved as an artifact: the artifact store's
/// default `--max-artifact-bytes` (256 MiB).
pub const DEFAULT_MAX_SAVED_REPLY_BYTES: usize = 256 * 1024 * 1024;

static MAX_TOOL_REPLY_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_TOOL_REPLY_BYTES);
static MAX_MODEL_REPLY_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_MODEL_REPLY_BYTES);
static MAX_SAVED_REPLY_BYTES: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_SAVED_REPLY_BYTES);

/// Largest reply read from a tool, hook, MCP server, A2A remote or remote spec.
pub fn max_tool_reply_bytes() -> usize {
    MAX_TOOL_REPLY_BYTES.load(Ordering::Relaxed)
}

/// Largest reply read from a model provider: a whole reply, or one streamed event.
pub fn max_model_reply_bytes() -> usize {
    MAX_MODEL_REPLY_BYTES.load(Ordering::Relaxed)
}

/// Largest reply read from a tool that saves a large reply as an artifact (the agents
/// file's `large_reply: artifact`): the artifact store's `--max-artifact-bytes`, so
/// nothing is read that the store would refuse.
pub fn max_saved_reply_bytes() -> usize {
    MAX_SAVED_REPLY_BYTES.load(Ordering::Relaxed)
}

/// Sets the limit of a reply saved as an artifact (the server's `--max-artifact-bytes`, at startup).
pub fn set_max_saved_reply_bytes(bytes: usize) {
    MAX_SAVED_REPLY_BYTES.store(bytes, Ordering::Relaxed);
}

/// Sets both limits (the server's flags, at startup).
pub fn set_reply_limits(tool_reply_bytes: usize, model_reply_bytes: usize) {
    MAX_TOOL_REPLY_BYTES.store(tool_reply_bytes, Ordering::Relaxed);
    MAX_MODEL_REPLY_BYTES.store(model_reply_bytes, Ordering::Relaxed);
}

/// How a reply over a limit is described: "`what` is longer than `limit` bytes, the
/// limit of a reply (`flag`)". Its size is known only when declared: reading stops at
/// the limit.
pub fn too_large(what: &str, limit: usize, flag: &str) -> String {
    format!("{what} is longer than {limit} bytes, the limit of a reply ({flag}); the rest was not read")
}

/// [`too_large`] for a reply read against `--max-tool-reply-bytes`.
pub fn tool_reply_too_large(what: &str) -> String {
    too_large(
        what,
        max_tool_reply_bytes(),
        "--max-tool-reply-bytes, ADK_MAX_TOOL_REPLY_BYTES",
    )
}
