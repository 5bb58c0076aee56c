//! JSON Schemas as agents use them (`output_schema`, `input_schema`, `state_schema`, an
//! MCP tool's arguments): compiled once, and every way a value misses one said.

use adk_grpc_core::{AdkError, Result};
use serde_json::Value;

/// `schema` compiled; `field` names it in the error (also for `state_schema`).
pub(crate) fn compile(field: &str, schema: &Value) -> Result<jsonschema::Validator> {
    if !schema.is_object() {
        return Err(AdkError::Config(format!(
            "{field} must be a JSON Schema object, not {schema}"
        )));
    }
    jsonschema::validator_for(schema).map_err(|e| AdkError::Config(format!("{field} is not a valid JSON Schema: {e}")))
}

/// The first few ways `value` misses the schema, each with where (a JSON pointer).
pub(crate) fn problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect()
}
