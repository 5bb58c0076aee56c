//! The session scripts' inputs (`lua.rs`), one builder per script: see
//! `crate::redis::script_args`.

use super::{Fields, Micros, app_state, lua, watch_hub};
use crate::redis::keys::{ScopeKeys, SessionKeys};
use crate::redis::script_args::ScriptArgs;
use adk_grpc_core::history::WindowUpdate;
use adk_grpc_core::{AdkError, Event, Precondition, Result};
use chrono::{DateTime, Utc};
use redis::{Script, ScriptInvocation};

/// The session scripts, loaded once per backend.
pub(super) struct Scripts {
    create: Script,
    append: Script,
    read: Script,
    drop_stale: Script,
    delete: Script,
    app_write: Script,
    fork: Script,
    wake: Script,
    run_mark: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            create: Script::new(CreateArgs::SOURCE),
            append: Script::new(AppendArgs::SOURCE),
            read: Script::new(ReadArgs::SOURCE),
            drop_stale: Script::new(DropStaleArgs::SOURCE),
            delete: Script::new(DeleteArgs::SOURCE),
            app_write: Script::new(AppWriteArgs::SOURCE),
            fork: Script::new(ForkArgs::SOURCE),
            wake: Script::new(WakeArgs::SOURCE),
            run_mark: Script::new(RunMarkArgs::SOURCE),
        }
    }
}

/// The `app:` state a standalone Redis writes in the same script as the session
/// (on a cluster it lives on another node: see the module docs of `redis.rs`).
pub(super) struct AppStateInScript<'a> {
    /// The app's state hash.
    pub key: &'a str,
    /// The `app:` values (keys without the prefix).
    pub fields: &'a Fields,
}

impl AppStateInScript<'_> {
    fn key(app: Option<&Self>, to: &mut ScriptInvocation<'_>) {
        if let Some(app) = app {
            to.key(app.key);
        }
    }

    fn len(app: Option<&Self>) -> usize {
        app.map_or(0, |app| app.fields.len())
    }

    fn push_pairs(app: Option<&Self>, to: &mut ScriptInvocation<'_>) -> Result<()> {
        app.map_or(Ok(()), |app| push_pairs(to, app.fields))
    }
}

/// `lua::CREATE`'s inputs.
pub(super) struct CreateArgs<'a> {
    pub keys: &'a SessionKeys,
    /// The app index (shard) the session is listed in.
    pub app_index: &'a str,
    /// Standalone Redis only.
    pub app: Option<AppStateInScript<'a>>,
    pub created: &'a Micros,
    /// 0 = none.
    pub ttl_ms: i64,
    pub session_fields: &'a Fields,
    pub user_fields: &'a Fields,
}

impl ScriptArgs for CreateArgs<'_> {
    const SOURCE: &'static str = lua::CREATE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.create
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        let app = self.app.as_ref();
        push_session_keys(keys, to)
            .key(&keys.user_state)
            .key(&keys.user_index)
            .key(self.app_index);
        AppStateInScript::key(app, to);
        to.arg(&self.created.us)
            .arg(&self.created.ns)
            .arg(self.ttl_ms)
            .arg(&keys.user_member)
            .arg(&keys.app_member)
            .arg(self.session_fields.len())
            .arg(self.user_fields.len())
            .arg(AppStateInScript::len(app))
            .arg(&keys.app_name)
            .arg(app_state::CHANNEL);
        push_pairs(to, self.session_fields)?;
        push_pairs(to, self.user_fields)?;
        AppStateInScript::push_pairs(app, to)
    }
}

/// `lua::APPEND`'s inputs.
pub(super) struct AppendArgs<'a> {
    pub keys: &'a SessionKeys,
    /// The app index (shard) the session is listed in.
    pub app_index: &'a str,
    /// The session's lease (`lease.rs`), which a lease precondition compares.
    pub lease: &'a str,
    /// Standalone Redis only.
    pub app: Option<AppStateInScript<'a>>,
    pub event_id: &'a str,
    pub precondition: Option<&'a Precondition>,
    /// The session's new update time (meta and the listing indexes).
    pub update: &'a Micros,
    /// The event, protobuf-encoded, without its sequence.
    pub event: &'a [u8],
    /// The event's own time (the timestamp index).
    pub event_micros: i64,
    pub window: &'a WindowUpdate,
    /// Whether the script wakes the session's watchers itself (when the event is stored
    /// or found), rather than the caller once the write is acknowledged (see
    /// `RedisSessionBackend::append`).
    pub wake: bool,
    pub session_fields: &'a Fields,
    pub user_fields: &'a Fields,
}

impl ScriptArgs for AppendArgs<'_> {
    const SOURCE: &'static str = lua::APPEND;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.append
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        let app = self.app.as_ref();
        push_session_keys(keys, to)
            .key(&keys.user_state)
            .key(&keys.user_index)
            .key(self.app_index)
            .key(self.lease);
        AppStateInScript::key(app, to);
        to.arg(self.event_id);
        // The precondition as the script checks it: a kind and the value it expects.
        match self.precondition {
            None => to.arg("").arg(""),
            Some(Precondition::LastEventId(id)) => to.arg("id").arg(id),
            Some(Precondition::LastSequence(seq)) => to.arg("seq").arg(*seq),
            Some(Precondition::LeaseHeldBy(owner)) => to.arg("lease").arg(owner),
        };
        to.arg(&self.update.us)
            .arg(&self.update.ns)
            .arg(&keys.user_member)
            .arg(&keys.app_member)
            .arg(self.event)
            .arg(self.session_fields.len())
            .arg(self.user_fields.len())
            .arg(AppStateInScript::len(app))
            .arg(self.event_micros)
            .arg(&keys.app_name)
            .arg(app_state::CHANNEL);
        // How the event moves the bounded-read window: '' keeps it, 'reset' clears it,
        // else the compacted range's end (µs).
        match self.window {
            WindowUpdate::Keep => to.arg(""),
            WindowUpdate::Reset => to.arg("reset"),
            WindowUpdate::From { micros } => to.arg(*micros),
        };
        // The channel that wakes the watchers, or '' for none.
        to.arg(if self.wake { watch_hub::APPENDED_CHANNEL } else { "" });
        push_pairs(to, self.session_fields)?;
        push_pairs(to, self.user_fields)?;
        AppStateInScript::push_pairs(app, to)
    }
}

/// `lua::READ`'s inputs.
pub(super) struct ReadArgs<'a> {
    pub keys: &'a SessionKeys,
    /// Only the last N events.
    pub recent: Option<usize>,
    /// Only the events whose timestamp's microsecond is at or after this one's.
    pub after: Option<DateTime<Utc>>,
    /// The events of the window (from meta `window` on) instead.
    pub window: bool,
}

impl ScriptArgs for ReadArgs<'_> {
    const SOURCE: &'static str = lua::READ;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.read
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        to.key(&keys.meta)
            .key(&keys.state)
            .key(&keys.events)
            .key(&keys.event_times)
            .key(&keys.user_state);
        // '' for none.
        match self.recent {
            Some(n) => to.arg(n.min(i64::MAX as usize)),
            None => to.arg(""),
        };
        match self.after {
            Some(t) => to.arg(t.timestamp_micros()),
            None => to.arg(""),
        };
        to.arg(if self.window { "1" } else { "" });
        Ok(())
    }
}

/// `lua::DROP_STALE`'s inputs.
pub(super) struct DropStaleArgs<'a> {
    /// The listing index.
    pub index: &'a str,
    pub member: &'a str,
    /// The member's score when the listing saw it.
    pub score: f64,
}

impl ScriptArgs for DropStaleArgs<'_> {
    const SOURCE: &'static str = lua::DROP_STALE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.drop_stale
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.index).arg(self.member).arg(self.score.to_string());
        Ok(())
    }
}

/// `lua::DELETE`'s inputs.
pub(super) struct DeleteArgs<'a> {
    pub keys: &'a SessionKeys,
    /// The session's own artifacts.
    pub artifacts: &'a ScopeKeys,
    /// The app index (shard) the session is listed in.
    pub app_index: &'a str,
}

impl ScriptArgs for DeleteArgs<'_> {
    const SOURCE: &'static str = lua::DELETE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.delete
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let keys = self.keys;
        push_session_keys(keys, to).key(&keys.user_index).arg(&keys.user_member);
        // The next key and the next four arguments.
        self.artifacts.push_for_delete(to);
        to.key(self.app_index).arg(&keys.app_member).key(&keys.run_marks);
        Ok(())
    }
}

/// `lua::APP_WRITE`'s inputs.
pub(super) struct AppWriteArgs<'a> {
    /// The app's state hash.
    pub key: &'a str,
    pub app_name: &'a str,
    pub fields: &'a Fields,
}

impl ScriptArgs for AppWriteArgs<'_> {
    const SOURCE: &'static str = lua::APP_WRITE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.app_write
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.key).arg(app_state::CHANNEL).arg(self.app_name);
        push_pairs(to, self.fields)
    }
}

/// `lua::FORK`'s inputs.
pub(super) struct ForkArgs<'a> {
    pub source: &'a SessionKeys,
    pub fork: &'a SessionKeys,
    /// The fork's app index (shard).
    pub app_index: &'a str,
    /// The last sequence copied.
    pub up_to_sequence: u64,
    /// The id of the event at that sequence.
    pub up_to_event_id: &'a str,
    pub created: &'a Micros,
    pub updated: &'a Micros,
    /// The fork's window start (meta `window`).
    pub window_start: u64,
    /// The source's events 1..=`up_to_sequence`, for the fork's id and timestamp indexes.
    pub events: &'a [Event],
    pub state: &'a Fields,
}

impl ScriptArgs for ForkArgs<'_> {
    const SOURCE: &'static str = lua::FORK;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.fork
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        let (source, fork) = (self.source, self.fork);
        to.key(&source.meta)
            .key(&source.events)
            .key(&source.event_ids)
            .key(&fork.meta)
            .key(&fork.state)
            .key(&fork.events)
            .key(&fork.event_ids)
            .key(&fork.event_times)
            .key(&fork.user_index)
            .key(self.app_index)
            .arg(self.up_to_sequence)
            .arg(&self.created.us)
            .arg(&self.created.ns)
            .arg(&self.updated.us)
            .arg(&self.updated.ns)
            .arg(&fork.user_member)
            .arg(&fork.app_member)
            .arg(self.up_to_event_id)
            .arg(self.window_start)
            .arg(self.state.len());
        for event in self.events {
            to.arg(&event.id).arg(event.timestamp.timestamp_micros());
        }
        push_pairs(to, self.state)
    }
}

/// `lua::WAKE`'s inputs.
pub(super) struct WakeArgs<'a> {
    /// The session's events key: the message, and the key that routes the script to
    /// the session's node.
    pub events: &'a str,
}

impl ScriptArgs for WakeArgs<'_> {
    const SOURCE: &'static str = lua::WAKE;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.wake
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(self.events).arg(watch_hub::APPENDED_CHANNEL);
        Ok(())
    }
}

/// `lua::RUN_MARK`'s inputs.
pub(super) struct RunMarkArgs<'a> {
    pub keys: &'a SessionKeys,
    /// The session's lease (`lease.rs`).
    pub lease: &'a str,
    /// The invocation that must hold it.
    pub owner: &'a str,
    /// The mark's event, protobuf-encoded.
    pub event: &'a [u8],
}

impl ScriptArgs for RunMarkArgs<'_> {
    const SOURCE: &'static str = lua::RUN_MARK;
    type Scripts = Scripts;

    fn script(scripts: &Scripts) -> &Script {
        &scripts.run_mark
    }

    fn push(&self, to: &mut ScriptInvocation<'_>) -> Result<()> {
        to.key(&self.keys.meta)
            .key(&self.keys.run_marks)
            .key(self.lease)
            .arg(self.owner)
            .arg(self.event);
        Ok(())
    }
}

/// The five keys of a session, as the scripts that take them all read them first.
fn push_session_keys<'i, 's>(keys: &SessionKeys, to: &'i mut ScriptInvocation<'s>) -> &'i mut ScriptInvocation<'s> {
    to.key(&keys.meta)
        .key(&keys.state)
        .key(&keys.events)
        .key(&keys.event_ids)
        .key(&keys.event_times)
}

/// Appends `field, JSON text` for every entry: the pairs after a script's fixed ARGV.
fn push_pairs(to: &mut ScriptInvocation<'_>, fields: &Fields) -> Result<()> {
    for (field, value) in fields {
        let text = serde_json::to_string(value)
            .map_err(|e| AdkError::Internal(format!("cannot encode a state value: {e}")))?;
        to.arg(field).arg(text);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
