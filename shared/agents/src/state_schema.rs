//! ADK's `state_schema`: the state keys an agent's events may write, and their
//! values, as a JSON Schema of the state (an object schema).
//!
//! ADK checks each assignment to its `State` against a Pydantic model; here the
//! writes are checked where they come together, with one rule ([`StateSchema::check`]):
//! a tool call's writes (a Rust tool's, a remote tool's actions, its tool hooks') when
//! the call is answered, so a misfit is a tool error the model reads and nothing is
//! written; and every event of the agent (its `output_key` write, its agent and model
//! hooks' actions) before the runner stores it, where a misfit fails the run, as ADK's
//! `StateSchemaError` does.
//!
//! As ADK, a key with a `:` is not checked: the `app:`, `user:` and `temp:` scopes, and
//! the `<owner>:<key>` names ADK's own tools keep their state under (`model_consult`'s
//! counters). The other keys are checked as an object of the keys written: `required`
//! does not apply (a write sets some keys, not all), and a key the schema does not
//! declare is refused unless `additionalProperties` or `patternProperties` admit it
//! (a Pydantic model refuses undeclared fields; JSON Schema's default is to allow them).

use crate::json_schema::{compile as compile_schema, problems as schema_problems};
use adk_grpc_core::{AdkError, Agent, Event, Result, StateSchemaCheck, find_agent};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A compiled `state_schema`.
pub struct StateSchema {
    schema: Value,
    /// The schema as writes are checked against it: no `required`, undeclared keys refused.
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for StateSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StateSchema").field(&self.schema).finish()
    }
}

impl StateSchema {
    /// `schema` must be a JSON Schema of an object (`type: object`) that compiles;
    /// the error names `state_schema`.
    pub fn new(schema: Value) -> Result<Self> {
        if !schema.is_object() || schema["type"] != "object" {
            return Err(AdkError::Config(format!(
                "state_schema must be a JSON Schema of the state, an object schema (`type: object`, with the \
                 keys under `properties`), not {schema}"
            )));
        }
        let mut writes = schema.clone();
        if let Some(root) = writes.as_object_mut() {
            root.remove("required");
            root.entry("additionalProperties").or_insert(Value::Bool(false));
        }
        compile_schema("state_schema", &schema)?;
        let validator = compile_schema("state_schema", &writes)?;
        Ok(StateSchema { schema, validator })
    }

    /// The schema as given.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether the writes of `delta` fit: Err says every way they do not (up to a few),
    /// naming the keys.
    pub fn check(&self, delta: &HashMap<String, Value>) -> std::result::Result<(), String> {
        let checked: Map<String, Value> = delta
            .iter()
            .filter(|(key, _)| !key.contains(':'))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if checked.is_empty() {
            return Ok(());
        }
        let problems = schema_problems(&self.validator, &Value::Object(checked));
        if problems.is_empty() {
            return Ok(());
        }
        let mut keys: Vec<&str> = delta
            .keys()
            .map(String::as_str)
            .filter(|key| !key.contains(':'))
            .collect();
        keys.sort_unstable();
        Err(format!(
            "the state write of {} does not fit the agent's state_schema: {}",
            keys.join(", "),
            problems.join("; ")
        ))
    }
}

impl StateSchemaCheck for StateSchema {
    fn schema(&self) -> &Value {
        StateSchema::schema(self)
    }

    fn check(&self, delta: &HashMap<String, Value>) -> std::result::Result<(), String> {
        StateSchema::check(self, delta)
    }
}

/// The runner's check of an event before it is stored: its state writes must fit
/// its author's schema. Err fails the run with the agent, the keys and the misfit.
pub(crate) fn check_event(root: &Arc<dyn Agent>, event: &Event) -> Result<()> {
    if event.actions.state_delta.is_empty() {
        return Ok(());
    }
    let author = find_agent(root, &event.author);
    let schema = author.as_ref().and_then(|agent| agent.spec().state_schema);
    check_writes(schema, &event.author, &event.actions.state_delta)
}

/// The writes `delta` of agent `author`'s event, held to its `schema` (none: anything
/// goes): Err fails the run `FAILED_PRECONDITION` (the app's state does not admit the
/// write, as a missing instruction key does not admit the request), naming the agent,
/// the keys and the misfit.
pub(crate) fn check_writes<S: StateSchemaCheck + ?Sized>(
    schema: Option<&S>,
    author: &str,
    delta: &HashMap<String, Value>,
) -> Result<()> {
    match schema {
        Some(schema) => schema
            .check(delta)
            .map_err(|problem| AdkError::FailedPrecondition(format!("agent {author}: {problem}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> StateSchema {
        StateSchema::new(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "visits": {"type": "integer", "minimum": 0},
            },
            "required": ["city", "visits"],
        }))
        .unwrap()
    }

    fn delta(pairs: &[(&str, Value)]) -> HashMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn a_write_of_some_declared_keys_that_fit_is_allowed() {
        let s = schema();
        assert_eq!(s.check(&delta(&[("city", json!("Oslo"))])), Ok(()));
        assert_eq!(
            s.check(&delta(&[("visits", json!(3)), ("city", json!("Rome"))])),
            Ok(())
        );
        assert_eq!(s.check(&HashMap::new()), Ok(()));
    }

    #[test]
    fn a_value_of_the_wrong_type_or_range_is_refused_naming_the_key() {
        let s = schema();
        let problem = s.check(&delta(&[("visits", json!("many"))])).unwrap_err();
        assert!(problem.contains("visits") && problem.contains("/visits"), "{problem}");
        let problem = s.check(&delta(&[("visits", json!(-1))])).unwrap_err();
        assert!(problem.contains("/visits"), "{problem}");
    }

    #[test]
    fn an_undeclared_key_is_refused_unless_the_schema_admits_it() {
        let problem = schema().check(&delta(&[("colour", json!("red"))])).unwrap_err();
        assert!(problem.contains("colour"), "{problem}");
        let open = StateSchema::new(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "patternProperties": {"^note_": {"type": "string"}},
        }))
        .unwrap();
        assert_eq!(open.check(&delta(&[("note_1", json!("x"))])), Ok(()));
        assert!(open.check(&delta(&[("note_1", json!(1))])).is_err());
        let any = StateSchema::new(json!({"type": "object", "additionalProperties": true})).unwrap();
        assert_eq!(any.check(&delta(&[("colour", json!("red"))])), Ok(()));
    }

    #[test]
    fn keys_with_a_colon_are_not_checked_as_in_adk() {
        let s = schema();
        let writes = delta(&[
            ("user:theme", json!(1)),
            ("app:flag", json!([])),
            ("temp:scratch", json!({})),
            ("model_consult:model_consult:session_uses", json!(2)),
        ]);
        assert_eq!(s.check(&writes), Ok(()));
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_or_does_not_compile_is_refused() {
        for bad in [
            json!("string"),
            json!({"type": "string"}),
            json!({"type": "object", "properties": 3}),
        ] {
            let e = StateSchema::new(bad.clone()).unwrap_err();
            assert!(e.to_string().contains("state_schema"), "{bad}: {e}");
        }
    }
}
