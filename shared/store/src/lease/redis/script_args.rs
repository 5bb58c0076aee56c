//! The lease scripts' inputs (`lua.rs`), one builder per script: see
//! `crate::redis::script_args`.

use super::{CANCEL_CHANNEL, lua};
use crate::redis::keys::{cancel_key, holder_key, line_key, run_key};
use crate::redis::script_args::ScriptArgs;
use adk_grpc_core::{RUN_RECORD_GRACE, Result};
use redis::{Script, ScriptInvocation};
use std::time::Duration;

/// How long a crashed holder's record is kept for the next holder to find.
pub(super) const HOLDER_RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a cancel request waits for its holder's renewal.
pub(super) const CANCEL_MARK_TTL: Duration = Duration::from_secs(60);

fn millis(ttl: Duration) -> String {
    ttl.as_millis().max(1).to_string()
}

/// How long a run record lives past a renewal: the lease, then the grace.
fn record_ttl(ttl: Duration) -> Duration {
    ttl + RUN_RECORD_GRACE
}

/// The lease scripts, loaded once per backend.
pub(super) struct Scripts {
    acquire: Script,
    acquire_in_turn: Script,
    renew: Script,
    release: Script,
    cancel: Script,
    register: Script,
    claim: Script,
    hand_over: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            acquire: Script::new(AcquireArgs::SOURCE),
            acquire_in_turn: Script::new(AcquireInTurnArgs::SOURCE),
            renew: Script::new(RenewArgs::SOURCE),
            release: Script::new(ReleaseArgs::SOURCE),
            cancel: Script::new(CancelArgs::SOURCE),
            register: Script::new(RegisterArgs::SOURCE),
            claim: Script::new(ClaimArgs::SOURCE),
            hand_over: Script::new(HandOverArgs::SOURCE),
        }
    }
}

/// The runs index as a script writes it itself (`lua::runs_index_lua`): on standalone
/// Redis, where the index is on the session's node; None on a cluster.
#[derive(Clone, Copy)]
pub(super) struct RunsIndex<'a> {
    /// The index key (`crate::redis::keys::RUNS_INDEX`).
    pub key: &'a str,
    /// The session's member in it (`crate::redis::keys::runs_index_member`).
    pub member: &'a str,
}

/// Pushes the index's key and the session's member, last of the script's KEYS and ARGV:
/// absent (nil in the script) when the index is written beside it.
fn push_index(to: &mut ScriptInvocation<'_>, index: Option<RunsIndex<'_>>) {
    if let Some(index) = index {
        to.key(index.key).arg(index.member);
    }
}

/// A run to record as its lease is taken (ACQUIRE and ACQUIRE_IN_TURN): its
/// invocation and options, as `lua::REGISTER` records them.
#[derive(Clone, Copy)]
pub(super) struct RunToRecord<'a> {
    pub invocation_id: &'a str,
    pub options: &'a str,
}

/// Pushes the ARGV of `lua::record_run_lua`'s caller in an acquire script: the run's
/// invocation (empty: record nothing), its options and its record's TTL.
fn push_run(to: &mut ScriptInvocation<'_>, run: Option<RunToRecord<'_>>, ttl: Duration) {
    let (invocation_id, options) = run.map_or(("", ""), |run| (run.invocation_id, run.options));
    to.arg(invocation_id).arg(options).arg(millis(record_ttl(ttl)));
}

/// `lua::ACQUIRE`'s inputs.
pub(super) struct AcquireArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    pub ttl: Duration,
    /// The run to record once the lease is taken, if any.
    pub run: Option<RunToRecord<'a>>,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for AcquireArgs<'_> {
    const SOURCE: &'static str = lua::ACQUIRE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL));
        push_run(to, self.run, self.ttl);
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::ACQUIRE_IN_TURN`'s inputs.
pub(super) struct AcquireInTurnArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    pub ttl: Duration,
    /// How long the owner's place in line lasts unless it asks again.
    pub patience: Duration,
    /// The run to record once the lease is taken, if any.
    pub run: Option<RunToRecord<'a>>,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for AcquireInTurnArgs<'_> {
    const SOURCE: &'static str = lua::ACQUIRE_IN_TURN;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.acquire_in_turn
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let line = line_key(self.lease);
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(&line)
            // The ticket counter, and each place's lapse time (ms).
            .key(format!("{line}:ticket"))
            .key(format!("{line}:lapses"))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL))
            .arg(millis(self.patience));
        push_run(to, self.run, self.ttl);
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::RENEW`'s inputs.
pub(super) struct RenewArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    pub ttl: Duration,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for RenewArgs<'_> {
    const SOURCE: &'static str = lua::RENEW;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.renew
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(self.ttl))
            .arg(millis(record_ttl(self.ttl)));
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::RELEASE`'s inputs.
pub(super) struct ReleaseArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for ReleaseArgs<'_> {
    const SOURCE: &'static str = lua::RELEASE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.release
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner);
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::CANCEL`'s inputs.
pub(super) struct CancelArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for CancelArgs<'_> {
    const SOURCE: &'static str = lua::CANCEL;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.cancel
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(millis(CANCEL_MARK_TTL))
            .arg(CANCEL_CHANNEL);
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::REGISTER`'s inputs.
pub(super) struct RegisterArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    pub invocation_id: &'a str,
    pub options: &'a str,
    pub ttl: Duration,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for RegisterArgs<'_> {
    const SOURCE: &'static str = lua::REGISTER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.register
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(run_key(self.lease))
            .arg(self.owner)
            .arg(self.invocation_id)
            .arg(self.options)
            .arg(millis(record_ttl(self.ttl)));
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::CLAIM`'s inputs.
pub(super) struct ClaimArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    /// The claim id the new owner token ends with.
    pub claim: &'a str,
    pub ttl: Duration,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for ClaimArgs<'_> {
    const SOURCE: &'static str = lua::CLAIM;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.claim
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.claim)
            .arg(millis(self.ttl))
            .arg(millis(HOLDER_RECORD_TTL))
            .arg(millis(record_ttl(self.ttl)));
        push_index(to, self.index);
        Ok(())
    }
}

/// `lua::HAND_OVER`'s inputs.
pub(super) struct HandOverArgs<'a> {
    /// The session's lease key (`crate::redis::keys::lease_key`).
    pub lease: &'a str,
    pub owner: &'a str,
    /// The runs index, when the script writes it (`RunsIndex`).
    pub index: Option<RunsIndex<'a>>,
}

impl ScriptArgs for HandOverArgs<'_> {
    const SOURCE: &'static str = lua::HAND_OVER;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.hand_over
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.lease)
            .key(holder_key(self.lease))
            .key(cancel_key(self.lease))
            .key(run_key(self.lease))
            .arg(self.owner);
        push_index(to, self.index);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
