//! The rules of an agent definition, written once. The builders and
//! `Runner::new` apply them to what code builds; the runner
//! service's agents file applies the same functions to what it declares, field by
//! field, so a file is refused for exactly the reasons code would be and says which
//! field is at fault. Every error is an [`AdkError::Config`].

use adk_grpc_core::{AdkError, Result};
use std::collections::{HashMap, HashSet};

/// The author of the user's events: no agent may be called that.
pub const USER_AUTHOR: &str = "user";

/// The tool an LLM agent with sub-agents offers by itself; no other tool may take its name.
pub const TRANSFER_TOOL_NAME: &str = "transfer_to_agent";

/// The tool a model with both tools and an output schema answers through (ADK's name).
pub const SET_MODEL_RESPONSE_TOOL_NAME: &str = "set_model_response";

/// The longest function name OpenAI and Gemini accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Agent names are identifiers (they appear in branches `parent.child` and in
/// `transfer_to_agent` calls) and never `user`, the author of the user's events.
pub fn validate_agent_name(name: &str) -> Result<()> {
    if !is_identifier(name) || name == USER_AUTHOR {
        return Err(AdkError::Config(format!(
            "an agent name must be an identifier ([A-Za-z_][A-Za-z0-9_]*) other than \"user\": it appears in \
             branches and in transfer_to_agent calls (got {name:?})"
        )));
    }
    Ok(())
}

/// The agent names of one tree, each unique: a transfer or a resumption finds its
/// agent by name.
#[derive(Debug, Default)]
pub struct AgentNames(HashSet<String>);

impl AgentNames {
    /// Adds `name`; an error when the tree has an agent of that name already.
    pub fn insert(&mut self, name: &str) -> Result<()> {
        if !self.0.insert(name.to_string()) {
            return Err(AdkError::Config(format!(
                "two agents are named {name}: names are unique in an agent tree (transfers and resumptions find \
                 agents by name)"
            )));
        }
        Ok(())
    }
}

/// What a model can call: 1-64 characters of `[A-Za-z0-9_-]`, starting with a letter or `_`.
pub fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().count() <= MAX_TOOL_NAME_CHARS
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A tool's name is what the model calls: see [`is_tool_name`].
pub fn validate_tool_name(name: &str) -> Result<()> {
    if !is_tool_name(name) {
        return Err(AdkError::Config(format!(
            "a tool name is what the model calls: 1-{MAX_TOOL_NAME_CHARS} characters of [A-Za-z0-9_-], starting \
             with a letter or _ (got {name:?})"
        )));
    }
    Ok(())
}

/// The tools of one agent, by name: each once (the model calls them by name), and
/// none named `transfer_to_agent` (the agent offers that one by itself).
pub fn validate_tool_list<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut seen = HashSet::new();
    for name in names {
        if name == TRANSFER_TOOL_NAME {
            return Err(AdkError::Config(format!(
                "{TRANSFER_TOOL_NAME} is offered by itself to agents with sub_agents: leave it out"
            )));
        }
        if !seen.insert(name) {
            return Err(AdkError::Config(format!(
                "{name} is listed twice: an agent's tools have unique names (the model calls them by name)"
            )));
        }
    }
    Ok(())
}

/// `output_key` is a state key, written through the reply event's `state_delta`.
pub fn validate_output_key(key: &str) -> Result<()> {
    let probe = HashMap::from([(key.to_string(), serde_json::Value::Null)]);
    adk_grpc_core::validate::state_keys("output_key", &probe).map_err(|e| AdkError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_and_tool_names() {
        for good in ["a", "_x", "planner_2"] {
            validate_agent_name(good).unwrap();
        }
        for bad in ["", "1st", "plan-ner", "user", "a.b"] {
            assert!(validate_agent_name(bad).is_err(), "{bad}");
        }
        for good in ["get-weather", "_t", &"t".repeat(MAX_TOOL_NAME_CHARS)] {
            validate_tool_name(good).unwrap();
        }
        for bad in ["", "get weather", "1t", &"t".repeat(MAX_TOOL_NAME_CHARS + 1)] {
            assert!(validate_tool_name(bad).is_err(), "{bad}");
        }
        let mut names = AgentNames::default();
        names.insert("a").unwrap();
        assert!(
            names
                .insert("a")
                .unwrap_err()
                .to_string()
                .contains("two agents are named a")
        );
        validate_tool_list(["a", "b"]).unwrap();
        assert!(
            validate_tool_list(["a", "a"])
                .unwrap_err()
                .to_string()
                .contains("a is listed twice")
        );
        assert!(validate_tool_list(["transfer_to_agent"]).is_err());
        assert!(validate_output_key("user:").is_err());
        validate_output_key("user:last").unwrap();
    }
}
