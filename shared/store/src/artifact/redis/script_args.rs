//! The artifact scripts' inputs (`lua.rs`), one builder per script: see
//! `crate::redis::script_args`.

use super::{PendingChunks, lua};
use crate::redis::keys::NameKeys;
use crate::redis::script_args::ScriptArgs;
use adk_grpc_core::artifact::{MAX_VERSION, NewVersion};
use adk_grpc_core::{AdkError, Result};
use chrono::{DateTime, Utc};
use redis::{Script, ScriptInvocation};

/// The artifact scripts, loaded once per backend.
pub(super) struct Scripts {
    commit: Script,
    read_meta: Script,
    delete: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            commit: Script::new(CommitArgs::SOURCE),
            read_meta: Script::new(ReadMetaArgs::SOURCE),
            delete: Script::new(DeleteArgs::SOURCE),
        }
    }
}

/// A version number, or '' for none (the next, the latest or all, as the script says).
fn version_arg(to: &mut ScriptInvocation<'_>, version: Option<i64>) {
    match version {
        Some(v) => to.arg(v),
        None => to.arg(""),
    };
}

/// `lua::COMMIT`'s inputs.
pub(super) struct CommitArgs<'a> {
    pub keys: &'a NameKeys,
    /// Its requested version (none: the next) and metadata.
    pub new: &'a NewVersion,
    pub pending: &'a PendingChunks,
    pub created: DateTime<Utc>,
    pub size: u64,
    pub chunk_bytes: usize,
}

impl ScriptArgs for CommitArgs<'_> {
    const SOURCE: &'static str = lua::COMMIT;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.commit
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let (keys, new) = (self.keys, self.new);
        let custom = serde_json::to_string(&new.custom_metadata)
            .map_err(|e| AdkError::Internal(format!("cannot encode custom metadata: {e}")))?;
        to.key(&keys.names).key(&keys.seq).key(&keys.versions);
        version_arg(to, new.requested);
        to.arg(&keys.name)
            .arg(&keys.meta_prefix)
            .arg(&keys.chunk_prefix)
            .arg(&self.pending.prefix)
            .arg(self.pending.count())
            .arg(MAX_VERSION)
            // The metadata hash, as field/value pairs.
            .arg("mime")
            .arg(&new.mime_type)
            .arg("size")
            .arg(self.size)
            .arg("create_us")
            .arg(self.created.timestamp_micros())
            .arg("create_ns")
            .arg(self.created.timestamp_subsec_nanos() % 1000)
            .arg("custom")
            .arg(custom)
            .arg("text")
            .arg(if new.is_text { "1" } else { "0" })
            .arg("file_uri")
            .arg(if new.is_file_uri { "1" } else { "0" })
            .arg("chunk_bytes")
            .arg(self.chunk_bytes);
        if let Some(display_name) = &new.display_name {
            to.arg("display_name").arg(display_name);
        }
        Ok(())
    }
}

/// `lua::READ_META`'s inputs.
pub(super) struct ReadMetaArgs<'a> {
    pub keys: &'a NameKeys,
    /// None: the latest.
    pub version: Option<i64>,
}

impl ScriptArgs for ReadMetaArgs<'_> {
    const SOURCE: &'static str = lua::READ_META;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.read_meta
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(&self.keys.versions);
        version_arg(to, self.version);
        to.arg(&self.keys.meta_prefix).arg(&self.keys.name);
        Ok(())
    }
}

/// `lua::DELETE`'s inputs.
pub(super) struct DeleteArgs<'a> {
    pub keys: &'a NameKeys,
    /// None: every version.
    pub version: Option<i64>,
}

impl ScriptArgs for DeleteArgs<'_> {
    const SOURCE: &'static str = lua::DELETE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.delete
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.names).key(&keys.seq).key(&keys.versions);
        version_arg(to, self.version);
        to.arg(&keys.name).arg(&keys.meta_prefix).arg(&keys.chunk_prefix);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
