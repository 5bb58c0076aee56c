//! Structured output (ADK's `output_schema`) and the schemas of an agent called as a
//! tool (`input_schema`).
//!
//! Without tools, the schema goes to the provider in its own structured-output mode
//! (the request's `response_schema`). With tools, providers cannot be relied on to
//! combine the two, so, as ADK does, the model is offered `set_model_response`, whose
//! arguments are the reply: the call is answered, and its arguments become the agent's
//! final reply. Either way the reply is parsed as JSON and checked against the schema
//! (with the `jsonschema` crate), and the value, not the text, goes to `output_key`.

use crate::json_schema::{compile, problems};
use adk_grpc_core::{AdkError, Result, Tool, ToolContext};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// The tool a model with both tools and an output schema answers through (ADK's name).
pub const SET_MODEL_RESPONSE_TOOL_NAME: &str = "set_model_response";

/// Appended to the system instruction when `set_model_response` is on offer: ADK's
/// text, word for word (an agent moved from ADK Python is told the same).
pub(super) const SET_MODEL_RESPONSE_INSTRUCTION: &str = "IMPORTANT: You have access to other tools, but you \
must provide your final response using the set_model_response tool with the required structured format. After \
using any other tools needed to complete the task, always call set_model_response with your final answer in the \
specified schema format.";

/// A compiled JSON Schema of an agent's structured reply.
pub(crate) struct OutputSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutputSchema").field(&self.schema).finish()
    }
}

/// Checks that `schema` is a JSON Schema (an object that compiles); `field` names it
/// in the error.
pub fn check_schema(field: &str, schema: &Value) -> Result<()> {
    compile(field, schema).map(|_| ())
}

/// Checks that `schema` is a JSON Schema of an object (`type: object`), as the
/// arguments of a tool must be.
pub fn check_object_schema(field: &str, schema: &Value) -> Result<()> {
    check_schema(field, schema)?;
    if !is_object_schema(schema) {
        return Err(AdkError::Config(format!(
            "{field} must be an object schema (`type: object`): an agent called as a tool takes named \
             arguments"
        )));
    }
    Ok(())
}

fn is_object_schema(schema: &Value) -> bool {
    schema["type"] == "object"
}

impl OutputSchema {
    pub(crate) fn new(schema: Value) -> Result<Self> {
        let validator = compile("output_schema", &schema)?;
        Ok(OutputSchema { schema, validator })
    }

    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every way `value` misses the schema, or Ok.
    fn check(&self, value: &Value) -> std::result::Result<(), String> {
        let problems = problems(&self.validator, value);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("it does not fit output_schema: {}", problems.join("; ")))
        }
    }

    /// A reply's text as the structured value: JSON (a Markdown code fence around it,
    /// which models add now and then, is removed first, as ADK does) that fits the schema.
    pub(crate) fn parse_reply(&self, text: &str) -> std::result::Result<Value, String> {
        let value: Value = serde_json::from_str(strip_code_fence(text)).map_err(|e| format!("it is not JSON ({e})"))?;
        self.check(&value)?;
        Ok(value)
    }

    /// The structured value in `set_model_response`'s arguments: an object schema's
    /// properties are the arguments themselves (as ADK does for a Pydantic model);
    /// any other schema's value is the one argument `response`.
    pub(crate) fn value_of_call(&self, args: &Value) -> std::result::Result<Value, String> {
        self.value_of_call_keyed(args, "response")
    }

    /// As [`Self::value_of_call`], a non-object value under argument `key` (`finish_task`'s is `result`).
    pub(crate) fn value_of_call_keyed(&self, args: &Value, key: &str) -> std::result::Result<Value, String> {
        let value = if is_object_schema(&self.schema) {
            args.clone()
        } else {
            args.get(key)
                .cloned()
                .ok_or_else(|| format!("the argument `{key}` is missing"))?
        };
        self.check(&value)?;
        Ok(value)
    }

    fn call_parameters(&self) -> Value {
        self.call_parameters_keyed("response")
    }

    /// The arguments' schema of a call carrying the value (under `key` unless an object).
    pub(crate) fn call_parameters_keyed(&self, key: &str) -> Value {
        if is_object_schema(&self.schema) {
            self.schema.clone()
        } else {
            json!({"type": "object", "properties": {key: self.schema}, "required": [key]})
        }
    }
}

/// A Markdown code fence around the whole text (```` ```json … ``` ````) taken off.
fn strip_code_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .filter(|_| trimmed.len() >= 6)
    else {
        return trimmed;
    };
    // The language tag runs to the end of the first line.
    let body = match inner.split_once('\n') {
        Some((tag, body)) if tag.trim().chars().all(|c| c.is_ascii_alphanumeric()) => body,
        _ => inner,
    };
    body.trim()
}

/// ADK's `SetModelResponseTool`: the model's final, structured reply as a call.
/// Arguments that do not fit the schema get an error back, so the model can call again.
pub(super) struct SetModelResponseTool {
    schema: Arc<OutputSchema>,
}

impl SetModelResponseTool {
    pub(super) fn new(schema: Arc<OutputSchema>) -> Self {
        SetModelResponseTool { schema }
    }
}

#[async_trait]
impl Tool for SetModelResponseTool {
    fn name(&self) -> &str {
        SET_MODEL_RESPONSE_TOOL_NAME
    }

    fn description(&self) -> &str {
        // ADK's docstring, as its FunctionTool declares it.
        "Set your final response using the required output schema.\n\nUse this tool to provide your final \
         structured answer instead\nof outputting text directly."
    }

    fn parameters_schema(&self) -> Option<Value> {
        Some(self.schema.call_parameters())
    }

    async fn execute(&self, _ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        self.schema.value_of_call(&args).map_err(|problem| {
            AdkError::invalid_with(
                "set_model_response",
                format!("{problem}. Call set_model_response again with every required field in the right type."),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> OutputSchema {
        OutputSchema::new(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
            "required": ["city"],
        }))
        .unwrap()
    }

    #[test]
    fn replies_parse_fenced_or_not_and_must_fit() {
        let s = schema();
        assert_eq!(s.parse_reply(r#"{"city":"Paris"}"#).unwrap(), json!({"city": "Paris"}));
        assert_eq!(
            s.parse_reply("```json\n{\"city\": \"Oslo\", \"temp\": 3}\n```")
                .unwrap(),
            json!({"city": "Oslo", "temp": 3})
        );
        let error = s.parse_reply(r#"{"temp": "warm"}"#).unwrap_err();
        assert!(error.contains("city") && error.contains("/temp"), "{error}");
        assert!(s.parse_reply("Paris").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn call_arguments_are_the_value_of_an_object_schema_and_response_otherwise() {
        assert_eq!(
            schema().value_of_call(&json!({"city": "Rome"})).unwrap(),
            json!({"city": "Rome"})
        );
        let list = OutputSchema::new(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        assert_eq!(list.call_parameters()["required"], json!(["response"]));
        assert_eq!(list.value_of_call(&json!({"response": ["a"]})).unwrap(), json!(["a"]));
        assert!(list.value_of_call(&json!({"response": [1]})).is_err());
    }

    #[test]
    fn schemas_are_checked() {
        assert!(check_schema("output_schema", &json!("string")).is_err());
        let error = check_schema("output_schema", &json!({"type": "no-such-type"})).unwrap_err();
        assert!(error.to_string().contains("output_schema"), "{error}");
        assert!(check_object_schema("input_schema", &json!({"type": "string"})).is_err());
        assert!(check_object_schema("input_schema", &json!({"type": "object"})).is_ok());
    }
}
