//! Typed argument builders for the Lua scripts: one per script, beside each backend's
//! scripts (`session/redis/script_args.rs`, `artifact/redis/script_args.rs`,
//! `memories/redis/script_args.rs`, `lease/redis/script_args.rs`). A Lua script reads
//! its KEYS and ARGV by position; each builder names every input of its script, and its
//! [`ScriptArgs::push`] is the one list of the script's positions: KEYS and ARGV in the
//! order the script reads them. Every call site goes through a builder, and the tests
//! ([`check`], each backend's `script_args/tests.rs`) check that each script reads
//! exactly the positions its builder sends, no more and no fewer, and against a real
//! Redis that each value lands where the script means it to.

use adk_grpc_core::Result;
use redis::{Script, ScriptInvocation};

/// A script's inputs, by name.
pub(crate) trait ScriptArgs {
    /// The script these are the inputs of.
    const SOURCE: &'static str;

    /// Where its backend keeps its scripts, loaded.
    type Scripts;

    /// The loaded [`Self::SOURCE`].
    fn script(scripts: &Self::Scripts) -> &Script;

    /// Pushes the script's KEYS and ARGV, each in the order the script reads them.
    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()>;

    /// The call of the script with these inputs.
    fn invocation<'s>(&self, scripts: &'s Self::Scripts) -> Result<ScriptInvocation<'s>> {
        let mut invocation = Self::script(scripts).prepare_invoke();
        self.push(&mut invocation)?;
        Ok(invocation)
    }
}

#[cfg(test)]
pub(crate) mod check;
