//! The tool context for tools that run outside the runner (HTTP endpoints, MCP
//! servers): what they are sent about the call (`in`), and the actions they may
//! send back (`out`), as JSON. One shape for every kind of remote tool, documented
//! in `docs/tools.md` ("The tool context of HTTP and MCP tools"):
//!
//! ```json
//! in:  {"app_name": "…", "user_id": "…", "session_id": "…", "invocation_id": "…",
//!       "function_call_id": "…", "agent_name": "…", "state": {"user:theme": "dark"}}
//! out: {"state_delta": {"user:theme": "light"},
//!       "artifacts": {"report.txt": {"text": "…"}, "chart.png": {"inline_data": {"mime_type": "image/png", "data": "<base64>"}}},
//!       "transfer_to_agent": "billing", "escalate": true, "skip_summarization": true}
//! ```
//!
//! A tool is sent only the state it declares it reads ([`ContextGrant`]); what it
//! sends back ([`ToolActions`]) goes through the same [`ToolContext`] as a Rust tool's writes, so
//! state is recorded in the response event's `state_delta` and saved artifacts in
//! its `artifact_delta`.

use super::remote_part::RemotePart;
use adk_grpc_core::{AdkError, Artifacts, EventActions, Part, ReadonlyContext, Result, ToolContext, validate};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};

/// What a remote tool is granted of the tool context: the call's ids always, and
/// the state it declares it reads, never more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextGrant {
    state: Vec<StatePattern>,
    /// The call may read its session's artifacts and the user's memories while it
    /// runs (`session_reads`): granted to the Python worker's tools and callbacks,
    /// whose ADK contexts read them.
    session_reads: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum StatePattern {
    Key(String),
    /// `user:*`: every key starting with `user:`; `*`: every key.
    Prefix(String),
}

impl ContextGrant {
    /// `state` lists the keys the tool reads: a key (`user:theme`), a prefix ending in
    /// `*` (`user:*`, `cart_*`), or `*` for all. `INVALID_ARGUMENT` naming `context.state`
    /// for an empty entry or a `*` that is not last.
    pub fn new<I, S>(state: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let state = state
            .into_iter()
            .map(|entry| {
                let entry: String = entry.into();
                match entry.find('*') {
                    _ if entry.trim().is_empty() => Err(AdkError::invalid("context.state", "has an empty entry")),
                    Some(at) if at + 1 != entry.len() => Err(AdkError::invalid(
                        "context.state",
                        format!("{entry:?}: `*` may only end an entry (a prefix such as user:*)"),
                    )),
                    Some(at) => Ok(StatePattern::Prefix(entry[..at].to_string())),
                    None => Ok(StatePattern::Key(entry)),
                }
            })
            .collect::<Result<_>>()?;
        Ok(ContextGrant {
            state,
            session_reads: false,
        })
    }

    /// Grants the call reads of its session while it runs (see `session_reads`).
    pub fn with_session_reads(mut self, session_reads: bool) -> Self {
        self.session_reads = session_reads;
        self
    }

    /// For a grant with session reads: puts where and how the call reads its session in
    /// its `context` (`"reads": {"url", "token"}`); the reads end when the returned
    /// lease is dropped, which the caller does when the call ends.
    pub(crate) fn open_reads(
        &self,
        ctx: &(impl adk_grpc_core::CallbackContext + ?Sized),
        context: &mut Value,
    ) -> Result<Option<super::session_reads::ReadLease>> {
        if !self.session_reads {
            return Ok(None);
        }
        let (reads, lease) = super::session_reads::open(ctx)?;
        context["reads"] = reads;
        Ok(Some(lease))
    }

    /// The `in` half for this call: ids, and the granted state as the tool would read
    /// it from a Rust tool context (the invocation's state, `temp:` keys included).
    pub fn context_json(&self, ctx: &dyn ToolContext) -> Value {
        let mut context = self.callback_context_json(ctx);
        context["function_call_id"] = json!(ctx.function_call_id());
        context
    }

    /// The same outside a tool call (a hook at an agent or model point): no
    /// `function_call_id`.
    pub fn callback_context_json(&self, ctx: &dyn ReadonlyContext) -> Value {
        json!({
            "app_name": ctx.app_name(),
            "user_id": ctx.user_id(),
            "session_id": ctx.session_id(),
            "invocation_id": ctx.invocation_id(),
            "agent_name": ctx.agent_name(),
            "state": self.granted_state(ctx),
        })
    }

    fn granted_state(&self, ctx: &dyn ReadonlyContext) -> Map<String, Value> {
        let mut granted = Map::new();
        let prefixes: Vec<&str> = self
            .state
            .iter()
            .filter_map(|pattern| match pattern {
                StatePattern::Prefix(prefix) => Some(prefix.as_str()),
                StatePattern::Key(_) => None,
            })
            .collect();
        if !prefixes.is_empty() {
            for (key, value) in ctx.state().all() {
                if prefixes.iter().any(|prefix| key.starts_with(prefix)) {
                    granted.insert(key, value);
                }
            }
        }
        for pattern in &self.state {
            if let StatePattern::Key(key) = pattern
                && let Some(value) = ctx.state().get(key)
            {
                granted.insert(key.clone(), value);
            }
        }
        granted
    }
}

/// The `out` half: what a tool outside the runner asks it to do besides answering
/// (an HTTP or MCP tool's reply, a client tool's `function_response`). Every field
/// is checked when it is read, so applying it cannot fail on bad input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolActions {
    pub state_delta: HashMap<String, Value>,
    /// Artifacts to save, by file name.
    pub artifacts: BTreeMap<String, Part>,
    pub transfer_to_agent: Option<String>,
    pub escalate: bool,
    pub skip_summarization: bool,
}

/// [`ToolActions`] as JSON. Unknown fields are refused, so a misspelt action is an
/// error the model and the log see, not a silent no-op.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolActionsJson {
    #[serde(default)]
    state_delta: HashMap<String, Value>,
    #[serde(default)]
    artifacts: BTreeMap<String, RemotePart>,
    #[serde(default)]
    transfer_to_agent: Option<String>,
    #[serde(default)]
    escalate: Option<bool>,
    #[serde(default)]
    skip_summarization: Option<bool>,
}

impl ToolActions {
    /// Reads and checks the actions of a tool's reply (`null` or absent: none).
    pub fn from_json(value: Value) -> Result<Self> {
        if value.is_null() {
            return Ok(ToolActions::default());
        }
        let json: ToolActionsJson =
            serde_json::from_value(value).map_err(|e| AdkError::invalid("actions", e.to_string()))?;
        let mut artifacts = BTreeMap::new();
        for (name, part) in json.artifacts {
            let part = part.into_part(&format!("actions.artifacts.{name}"))?;
            artifacts.insert(name, part);
        }
        ToolActions {
            state_delta: json.state_delta,
            artifacts,
            transfer_to_agent: json.transfer_to_agent,
            escalate: json.escalate == Some(true),
            skip_summarization: json.skip_summarization == Some(true),
        }
        .checked("actions")
    }

    /// The rules every source of actions is held to; `field` is where they came from.
    pub fn checked(self, field: &str) -> Result<Self> {
        let state_field = format!("{field}.state_delta");
        validate::state_keys(&state_field, &self.state_delta)?;
        validate::state_limits(&state_field, &self.state_delta)?;
        if let Some(target) = &self.transfer_to_agent {
            crate::rules::validate_agent_name(target)
                .map_err(|e| AdkError::invalid(format!("{field}.transfer_to_agent"), e.to_string()))?;
        }
        Ok(self)
    }

    /// Adds `other` (another call's actions of the same message): maps merge, flags add up.
    pub fn merge(&mut self, other: ToolActions) {
        self.state_delta.extend(other.state_delta);
        self.artifacts.extend(other.artifacts);
        if other.transfer_to_agent.is_some() {
            self.transfer_to_agent = other.transfer_to_agent;
        }
        self.escalate |= other.escalate;
        self.skip_summarization |= other.skip_summarization;
    }

    /// Saves the artifacts in `artifacts` and records everything in `into` (versions
    /// in its `artifact_delta`); FAILED_PRECONDITION when there are artifacts to save
    /// and no artifact service.
    pub async fn record(self, artifacts: Option<std::sync::Arc<dyn Artifacts>>, into: &mut EventActions) -> Result<()> {
        if !self.artifacts.is_empty() {
            let store = artifacts.ok_or_else(|| {
                AdkError::FailedPrecondition(
                    "actions.artifacts: this runner has no artifact service to save artifacts in".into(),
                )
            })?;
            for (name, part) in &self.artifacts {
                let version = store.save(name, part).await?;
                into.artifact_delta.insert(name.clone(), version);
            }
        }
        into.state_delta.extend(self.state_delta);
        if self.transfer_to_agent.is_some() {
            into.transfer_to_agent = self.transfer_to_agent;
        }
        if self.escalate {
            into.escalate = Some(true);
        }
        if self.skip_summarization {
            into.skip_summarization = Some(true);
        }
        Ok(())
    }

    /// Does what a tool asked through its context, as a Rust tool's own writes.
    pub async fn apply(self, ctx: &dyn ToolContext) -> Result<()> {
        let mut actions = ctx.actions();
        self.record(ctx.artifacts(), &mut actions).await?;
        ctx.set_actions(actions);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_names_keys_and_prefixes_and_refuses_a_star_inside() {
        let grant = ContextGrant::new(["user:theme", "cart_*", "*"]).unwrap();
        assert_eq!(
            grant.state,
            vec![
                StatePattern::Key("user:theme".into()),
                StatePattern::Prefix("cart_".into()),
                StatePattern::Prefix(String::new()),
            ]
        );
        let e = ContextGrant::new(["us*er"]).unwrap_err();
        assert!(e.to_string().contains("context.state"), "{e}");
        assert!(ContextGrant::new([" "]).is_err());
    }

    #[test]
    fn actions_refuse_unknown_fields_and_bad_base64() {
        let e = ToolActions::from_json(json!({ "escalated": true })).unwrap_err();
        assert!(e.to_string().contains("escalated"), "{e}");
        let part: RemotePart =
            serde_json::from_value(json!({ "inline_data": { "mime_type": "a/b", "data": "!!" } })).unwrap();
        assert!(
            part.into_part("actions.artifacts.x")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
        let part: RemotePart =
            serde_json::from_value(json!({ "inlineData": { "mimeType": "a/b", "data": "aGk=" } })).unwrap();
        assert_eq!(part.into_part("x").unwrap(), Part::inline_data("a/b", b"hi".to_vec()));
    }
}
