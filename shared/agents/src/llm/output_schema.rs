//! Structured output (ADK's `output_schema`) and the schemas of an agent called as a
//! tool (`input_schema`).
//!
//! Without tools, the schema goes to the provider in its own structured-output mode
//! (the request's `response_schema`). With tools, providers cannot be relied on to
//! combine the two, so, as ADK does, the model is offered `set_model_response`, whose
//! arguments are the reply: the call is answered, and its arguments become the agent's
//! final reply. Either way the reply is parsed as JSON and checked against the schema
//! (with the `jsonschema` crate), and the value, not the text, goes to `output_key`.

use crate::http_json::JsonEndpoint;
use crate::json_schema::{PydanticClass, compile, problems};
use adk_grpc_core::{AdkError, ResponseSchemaAsSent, Result, Tool, ToolContext, python_json, strip_code_fence};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub use crate::rules::SET_MODEL_RESPONSE_TOOL_NAME;

/// Appended to the system instruction when `set_model_response` is on offer: ADK's
/// text, word for word (an agent moved from ADK Python is told the same).
pub(super) const SET_MODEL_RESPONSE_INSTRUCTION: &str = "IMPORTANT: You have access to other tools, but you \
must provide your final response using the set_model_response tool with the required structured format. After \
using any other tools needed to complete the task, always call set_model_response with your final answer in the \
specified schema format.";

/// The `set_model_response` argument ADK declares for a list of a pydantic class.
const LIST_OF_CLASS_ARGUMENT: &str = "items";

/// An `output_schema` that is a Python object named by an ADK agent-config directory
/// and resolved by its Python worker: a pydantic class, or any other schema ADK's
/// `LlmAgent` takes (`list[Model]`, `dict[str, int]`, `str`, a JSON Schema dict, a
/// `types.Schema`). The model is sent it as ADK sends it, and its replies are checked
/// where ADK checks them.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaClass {
    /// pydantic itself, validating and dumping a value as ADK does, where the class's code
    /// is at hand (an ADK agent-config directory's worker): its validators and custom types
    /// then count. Without it, the JSON Schema stands in for pydantic ([`PydanticClass`]).
    /// A schema ADK does not validate (`validated` false) has one only as a task agent's
    /// output, which ADK's `finish_task` validates whatever its type.
    pub validator: Option<ClassValidator>,
    /// Its JSON Schema (pydantic's for a type, a dict as written).
    pub json_schema: Value,
    /// Whether ADK validates a value against it, which it does for a pydantic class and a
    /// list of one only (the value then stored as pydantic validates and dumps it); any
    /// other schema's value is taken as the JSON parses.
    pub validated: bool,
    /// It as ADK's model clients send it (an agent without tools).
    pub as_sent: ResponseSchemaAsSent,
    /// `set_model_response`'s parameters as ADK declares them for it (an agent with tools).
    pub set_model_response_parameters: Value,
    /// The `set_model_response` argument that carries the value: ADK's `items` for a
    /// list of a class, `response` for any other non-class schema; None for a class,
    /// whose fields are the arguments.
    pub set_model_response_argument: Option<String>,
}

/// What pydantic is asked to validate: a reply's text (ADK's `model_validate_json`, or
/// its `TypeAdapter`'s `validate_json` for a list of a class) or a call's value
/// (`model_validate`, `validate_python`).
#[derive(Debug, Clone, Copy)]
pub enum Unvalidated<'a> {
    Json(&'a str),
    Value(&'a Value),
}

/// pydantic's validation of a value of a class (or of a list of one), as ADK runs it:
/// the value as `model_dump(exclude_none=True)` gives it back, else pydantic's error
/// text, verbatim (ADK hands it to the model in set_model_response's answer).
#[async_trait]
pub trait ValidateClass: Send + Sync {
    async fn validate(&self, unvalidated: Unvalidated<'_>) -> std::result::Result<Value, String>;
}

/// A shared [`ValidateClass`]; equal only to itself (a class's schema is compared by value).
#[derive(Clone)]
pub struct ClassValidator(pub Arc<dyn ValidateClass>);

impl PartialEq for ClassValidator {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for ClassValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClassValidator")
    }
}

/// A [`ValidateClass`] served over HTTP (an ADK agent-config directory's Python worker
/// serves one per class): POSTed `{"json": text}` or `{"value": value}`, it answers
/// `{"value": dumped}` or `{"error": pydantic's error text}`.
pub struct HttpClassValidator {
    endpoint: JsonEndpoint,
}

impl HttpClassValidator {
    /// How long one validation may take (pydantic's is quick; a class's validator is user code).
    const TIMEOUT: Duration = Duration::from_secs(30);

    /// `Config` for a URL that is not http(s); `class` names it in errors.
    pub fn new(class: &str, url: &str) -> Result<Self> {
        Ok(HttpClassValidator {
            endpoint: JsonEndpoint::new(format!("output_schema {class}"), url, Self::TIMEOUT)?,
        })
    }
}

#[async_trait]
impl ValidateClass for HttpClassValidator {
    async fn validate(&self, unvalidated: Unvalidated<'_>) -> std::result::Result<Value, String> {
        let body = match unvalidated {
            Unvalidated::Json(text) => json!({ "json": text }),
            Unvalidated::Value(value) => json!({ "value": value }),
        };
        let mut reply = self
            .endpoint
            .post(&body)
            .await
            .map_err(|failure| format!("pydantic's validation could not run: {}", failure.message()))?;
        match (reply.get_mut("value").map(Value::take), reply["error"].as_str()) {
            (Some(value), _) => Ok(value),
            (None, Some(error)) => Err(error.to_string()),
            (None, None) => Err(format!(
                "pydantic's validation answered neither a value nor an error: {reply}"
            )),
        }
    }
}

/// A compiled JSON Schema of an agent's structured reply.
pub(crate) struct OutputSchema {
    schema: Value,
    validator: jsonschema::Validator,
    class: Option<SchemaClass>,
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
        Ok(OutputSchema {
            schema,
            validator,
            class: None,
        })
    }

    /// The schema of a Python object (its JSON Schema checks the replies where ADK
    /// validates them; any JSON fits the others).
    pub(crate) fn of_class(class: SchemaClass) -> Result<Self> {
        let checked = if class.validated {
            class.json_schema.clone()
        } else {
            json!({})
        };
        Ok(OutputSchema {
            schema: class.json_schema.clone(),
            validator: compile("output_schema", &checked)?,
            class: Some(class),
        })
    }

    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// Whether it is a Python object of an ADK agent-config directory (a class, a list of
    /// one, any other type ADK's `LlmAgent` takes), not an agents file's JSON Schema.
    pub(crate) fn is_python(&self) -> bool {
        self.class.is_some()
    }

    /// The class's forms as ADK sends them, when the schema is a Python class.
    pub(crate) fn as_sent(&self) -> Option<&ResponseSchemaAsSent> {
        self.class.as_ref().map(|class| &class.as_sent)
    }

    /// A structured value as the text of ADK's final reply event: Python's `json.dumps`
    /// of it (a validated class's dump already in the class's field order).
    pub(crate) fn reply_text(&self, value: &Value) -> String {
        python_json(value)
    }

    /// `value` checked, and as ADK gives it back: where ADK validates (a pydantic class, a
    /// list of one), as pydantic validates and dumps it (pydantic's own where the class
    /// has a validator, else [`PydanticClass`]); any other value as it came.
    pub(crate) async fn validated(&self, unvalidated: Unvalidated<'_>) -> std::result::Result<Value, String> {
        if let Some(class) = &self.class
            && class.validated
            && let Some(validator) = &class.validator
        {
            return validator.0.validate(unvalidated).await;
        }
        match unvalidated {
            Unvalidated::Value(value) => self.validated_by_schema(value),
            Unvalidated::Json(text) => {
                let value: Value = serde_json::from_str(text).map_err(|e| format!("it is not JSON ({e})"))?;
                self.validated_by_schema(&value)
            }
        }
    }

    /// `value` checked as ADK's `finish_task` checks a task's output
    /// (`TypeAdapter(schema).validate_python`, any schema): by pydantic itself where the
    /// schema is a Python type with its worker at hand (a class, `dict[str, int]`); else by
    /// its JSON Schema standing in for pydantic ([`PydanticClass`]), the problems in
    /// pydantic's text (the type named by the schema's `title`, as pydantic names a class),
    /// and what the stand-in does not check (a constraint such as `minLength`) in the schema
    /// check's words.
    /// Only whether it fits: the value kept is the caller's to make.
    pub(crate) async fn check_as_pydantic(&self, value: &Value) -> std::result::Result<(), String> {
        if let Some(validator) = self.class.as_ref().and_then(|class| class.validator.as_ref()) {
            return validator.0.validate(Unvalidated::Value(value)).await.map(|_| ());
        }
        let pydantic = PydanticClass::of(&self.schema, self.class.is_some());
        let validated = pydantic.validate_or_error(value).map_err(|error| error.to_string())?;
        problems_as_error(problems(&self.validator, &validated))
    }

    /// [`Self::validated`] by the JSON Schema alone.
    fn validated_by_schema(&self, value: &Value) -> std::result::Result<Value, String> {
        match &self.class {
            Some(class) if class.validated => {
                let pydantic = PydanticClass::new(&class.json_schema);
                let validated = pydantic.validate(value);
                self.check(&validated)?;
                Ok(pydantic.dump(&validated))
            }
            _ => {
                self.check(value)?;
                Ok(value.clone())
            }
        }
    }

    /// Every way `value` misses the schema, or Ok.
    fn check(&self, value: &Value) -> std::result::Result<(), String> {
        problems_as_error(problems(&self.validator, value))
    }

    /// A reply's text as the structured value: JSON (a Markdown code fence around it,
    /// which models add now and then, is removed first, as ADK does) that fits the schema.
    pub(crate) async fn parse_reply(&self, text: &str) -> std::result::Result<Value, String> {
        self.validated(Unvalidated::Json(strip_code_fence(text))).await
    }

    /// The structured value in `set_model_response`'s arguments: an object schema's
    /// properties are the arguments themselves (as ADK does for a Pydantic model);
    /// any other schema's value is the one argument `response` (a Python object's: the
    /// argument ADK declares for it). None where ADK has no value, so no final reply: a
    /// Python schema's `response` left out or null (ADK reads `args.get('response')`);
    /// a list of a class left out is ADK's default, an empty list.
    pub(crate) async fn value_of_call(&self, args: &Value) -> std::result::Result<Option<Value>, String> {
        let Some(class) = &self.class else {
            return self.value_in_call(args, self.value_argument("response")).map(Some);
        };
        match class.set_model_response_argument.as_deref() {
            None => self.validated(Unvalidated::Value(args)).await.map(Some),
            Some(LIST_OF_CLASS_ARGUMENT) => {
                let empty = json!([]);
                let items = args.get(LIST_OF_CLASS_ARGUMENT).unwrap_or(&empty);
                self.validated(Unvalidated::Value(items)).await.map(Some)
            }
            Some(key) => match args.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(value) => self.validated(Unvalidated::Value(value)).await.map(Some),
            },
        }
    }

    /// The argument carrying the value when it is not the arguments themselves.
    fn value_argument<'a>(&self, key: &'a str) -> Option<&'a str> {
        (!is_object_schema(&self.schema)).then_some(key)
    }

    fn value_in_call(&self, args: &Value, argument: Option<&str>) -> std::result::Result<Value, String> {
        let value = match argument {
            None => args.clone(),
            Some(key) => args
                .get(key)
                .cloned()
                .ok_or_else(|| format!("the argument `{key}` is missing"))?,
        };
        self.validated_by_schema(&value)
    }

    /// `set_model_response`'s parameters: ADK's declaration of a class, else made of the schema.
    fn call_parameters(&self) -> Value {
        match &self.class {
            Some(class) => class.set_model_response_parameters.clone(),
            None => self.call_parameters_keyed("response"),
        }
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

/// The schema check's problems as the runner words them, if any.
fn problems_as_error(problems: Vec<String>) -> std::result::Result<(), String> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("it does not fit output_schema: {}", problems.join("; ")))
    }
}

/// ADK's answer to a `set_model_response` call that misses the schema, around `problem`.
fn misfit_call_error(problem: &str) -> String {
    format!(
        "Validation Error found:\n{problem}\nRecall the set_model_response function correctly, fix the errors, and \
         call it again with all required fields using the correct types."
    )
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

    /// Arguments that miss the schema are answered as ADK answers them: a result (not a
    /// tool error) with ADK's words around the problems (pydantic's there, the schema
    /// check's here).
    async fn execute(&self, ctx: Arc<dyn ToolContext>, args: Value) -> Result<Value> {
        let value = match self.schema.value_of_call(&args).await {
            Ok(Some(value)) => value,
            // ADK answers with its None and stores no reply: the model is called again.
            Ok(None) => return Ok(Value::Null),
            Err(problem) => return Ok(json!({"error": misfit_call_error(&problem)})),
        };
        // Stored on the call's response event, as ADK stores it.
        let mut actions = ctx.actions();
        actions.set_model_response = Some(value.clone());
        ctx.set_actions(actions);
        Ok(value)
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

    #[tokio::test]
    async fn replies_parse_fenced_or_not_and_must_fit() {
        let s = schema();
        assert_eq!(
            s.parse_reply(r#"{"city":"Paris"}"#).await.unwrap(),
            json!({"city": "Paris"})
        );
        assert_eq!(
            s.parse_reply("```json\n{\"city\": \"Oslo\", \"temp\": 3}\n```")
                .await
                .unwrap(),
            json!({"city": "Oslo", "temp": 3})
        );
        let error = s.parse_reply(r#"{"temp": "warm"}"#).await.unwrap_err();
        assert!(error.contains("city") && error.contains("/temp"), "{error}");
        assert!(s.parse_reply("Paris").await.unwrap_err().contains("not JSON"));
    }

    #[tokio::test]
    async fn call_arguments_are_the_value_of_an_object_schema_and_response_otherwise() {
        assert_eq!(
            schema().value_of_call(&json!({"city": "Rome"})).await.unwrap(),
            Some(json!({"city": "Rome"}))
        );
        let list = OutputSchema::new(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        assert_eq!(list.call_parameters()["required"], json!(["response"]));
        assert_eq!(
            list.value_of_call(&json!({"response": ["a"]})).await.unwrap(),
            Some(json!(["a"]))
        );
        assert!(list.value_of_call(&json!({"response": [1]})).await.is_err());
    }

    #[tokio::test]
    async fn a_reply_and_its_call_are_the_class_as_pydantic_validates_and_dumps_it() {
        // Zone(spots: list[Spot], zone: float, label: str = "?", note: str | None = None),
        // Spot(b: str, a: int), as pydantic writes their JSON Schema.
        let class = SchemaClass {
            json_schema: json!({
                "$defs": {"Spot": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
                                   "required": ["b", "a"]}},
                "type": "object",
                "properties": {
                    "zone": {"type": "number"},
                    "spots": {"type": "array", "items": {"$ref": "#/$defs/Spot"}},
                    "label": {"type": "string", "default": "?"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                },
                "required": ["zone", "spots"],
            }),
            validated: true,
            as_sent: ResponseSchemaAsSent {
                gemini: json!({}),
                openai: Some(json!({})),
            },
            set_model_response_parameters: json!({}),
            set_model_response_argument: None,
            validator: None,
        };
        let value = json!({"spots": [{"a": "1", "b": "é"}], "extra": 1, "note": null, "zone": 2});
        let of_class = OutputSchema::of_class(class).unwrap();
        let dumped = r#"{"zone": 2.0, "spots": [{"b": "é", "a": 1}], "label": "?"}"#;
        assert_eq!(
            of_class.reply_text(&of_class.parse_reply(&value.to_string()).await.unwrap()),
            dumped
        );
        // set_model_response's result too, as ADK's validated model dumps it.
        assert_eq!(
            python_json(&of_class.value_of_call(&value).await.unwrap().unwrap()),
            dumped
        );
        // What pydantic would not take is still refused.
        assert!(
            of_class
                .value_of_call(&json!({"zone": "warm", "spots": []}))
                .await
                .is_err()
        );
        assert!(
            of_class
                .value_of_call(&json!({"zone": 1, "spots": [{"a": 1.5, "b": "x"}]}))
                .await
                .is_err()
        );
        // Without a class, the keys stay in the order the model gave.
        assert_eq!(
            schema().reply_text(&json!({"temp": 3, "city": "Rome"})),
            r#"{"temp": 3, "city": "Rome"}"#
        );
    }

    /// A Python object that is no class (ADK's YAML may name `list[Model]`, `dict[str, int]`):
    /// its value in the argument ADK declares, checked and ordered only where ADK validates.
    #[tokio::test]
    async fn a_python_schema_that_is_no_class_is_carried_and_checked_as_adk_does() {
        let object = |validated, argument: &str, json_schema| {
            OutputSchema::of_class(SchemaClass {
                json_schema,
                validated,
                as_sent: ResponseSchemaAsSent {
                    gemini: json!({}),
                    openai: None,
                },
                set_model_response_parameters: json!({}),
                set_model_response_argument: Some(argument.to_string()),
                validator: None,
            })
            .unwrap()
        };
        // dict[str, int]: an object schema, yet its value is `response`, taken unchecked.
        let counts = object(
            false,
            "response",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        );
        assert_eq!(
            counts
                .value_of_call(&json!({"response": {"pears": "three"}}))
                .await
                .unwrap(),
            Some(json!({"pears": "three"}))
        );
        // `response` left out or null: ADK has no value, so no final reply.
        assert_eq!(counts.value_of_call(&json!({"pears": 3})).await, Ok(None));
        assert_eq!(counts.value_of_call(&json!({"response": null})).await, Ok(None));
        assert_eq!(counts.parse_reply("[1]").await.unwrap(), json!([1]));
        // list[Model]: `items`, each item checked and in the class's order.
        let spots = object(
            true,
            "items",
            json!({"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
                   "hours": {"type": "integer"}}, "required": ["name"]}}),
        );
        let value = spots
            .value_of_call(&json!({"items": [{"hours": 2, "name": "Louvre"}]}))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(python_json(&value), r#"[{"name": "Louvre", "hours": 2}]"#);
        assert!(spots.value_of_call(&json!({"items": [{"hours": 2}]})).await.is_err());
        // `items` left out is ADK's default, an empty list; null is no list.
        assert_eq!(spots.value_of_call(&json!({})).await, Ok(Some(json!([]))));
        assert!(spots.value_of_call(&json!({"items": null})).await.is_err());
        assert_eq!(
            python_json(&spots.parse_reply(r#"[{"hours": 1, "name": "Park"}]"#).await.unwrap()),
            r#"[{"name": "Park", "hours": 1}]"#
        );
    }

    /// Stands in for pydantic with a rule the JSON Schema cannot say: a code upper-cased,
    /// and a value refused with its own words.
    struct UpperCasesCodes;

    #[async_trait]
    impl ValidateClass for UpperCasesCodes {
        async fn validate(&self, unvalidated: Unvalidated<'_>) -> std::result::Result<Value, String> {
            let value = match unvalidated {
                Unvalidated::Json(text) => serde_json::from_str::<Value>(text).map_err(|e| e.to_string())?,
                Unvalidated::Value(value) => value.clone(),
            };
            match value["code"].as_str() {
                Some(code) if code != "refused" => Ok(json!({"code": code.to_uppercase(), "from": "validator"})),
                _ => Err("1 validation error for Flight\n  Value error, refused".into()),
            }
        }
    }

    /// A class with a validator is validated by it alone: its value is the one stored and
    /// its error the one the model reads, word for word (no schema check of its own).
    #[tokio::test]
    async fn a_class_with_a_validator_takes_its_value_and_its_error_verbatim() {
        let class = |validated| SchemaClass {
            json_schema: json!({"type": "object", "properties": {"code": {"type": "string", "maxLength": 2}},
                                "required": ["code"]}),
            validated,
            as_sent: ResponseSchemaAsSent {
                gemini: json!({}),
                openai: None,
            },
            set_model_response_parameters: json!({}),
            set_model_response_argument: None,
            validator: Some(ClassValidator(Arc::new(UpperCasesCodes))),
        };
        let schema = OutputSchema::of_class(class(true)).unwrap();
        let stored = json!({"code": "AB123", "from": "validator"});
        assert_eq!(
            schema.value_of_call(&json!({"code": "ab123"})).await,
            Ok(Some(stored.clone()))
        );
        assert_eq!(
            schema.parse_reply("```json\n{\"code\": \"ab123\"}\n```").await,
            Ok(stored)
        );
        let refused = schema.value_of_call(&json!({"code": "refused"})).await.unwrap_err();
        assert_eq!(refused, "1 validation error for Flight\n  Value error, refused");
        // Where ADK does not validate, neither does the validator: the value is as it came.
        let unvalidated = OutputSchema::of_class(class(false)).unwrap();
        assert_eq!(
            unvalidated.value_of_call(&json!({"code": "refused"})).await,
            Ok(Some(json!({"code": "refused"})))
        );
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
