//! JSON Schemas as agents use them (`output_schema`, `input_schema`, `state_schema`, an
//! MCP tool's arguments): compiled once, and every way a value misses one said.

use crate::pydantic_errors::{ErrorKind, LineError, ValidationError, expected_choices};
use crate::python_repr::python_repr;
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

/// A value as pydantic gives back a class it validates (`model_validate` in its default, lax
/// mode, then `model_dump(exclude_none=True)`), its JSON Schema being the class's as pydantic
/// writes it (`$ref`s into `$defs` for nested classes, `anyOf` for a union, `default`s).
/// ADK stores and sends such a dump for a class's `output_schema` and `input_schema`, so
/// the runner gives back the same: fields in the class's order whatever the model's, a field
/// left out taking its default, the scalars pydantic converts converted ("3" for an `int`
/// is 3, 2 for a `float` is 2.0, "yes" for a `bool` is true), fields that are None left out.
/// Validation and dump are two steps so that a caller can check the validated value against
/// the schema in between (a null where the class takes none is then still seen).
pub(crate) struct PydanticClass<'a> {
    root: &'a Value,
    keep_undeclared: bool,
}

impl<'a> PydanticClass<'a> {
    /// A pydantic class's schema: keys it does not declare are dropped, as its default
    /// `extra="ignore"` does (kept where its schema's `additionalProperties` allows them).
    pub(crate) fn new(root: &'a Value) -> Self {
        PydanticClass {
            root,
            keep_undeclared: false,
        }
    }

    /// A JSON Schema of an agents file, which allows keys it does not declare unless it
    /// says otherwise: they are kept, after the declared ones.
    pub(crate) fn keeping_undeclared(root: &'a Value) -> Self {
        PydanticClass {
            root,
            keep_undeclared: true,
        }
    }

    /// A Python class's schema ([`Self::new`]) or an agents file's ([`Self::keeping_undeclared`]).
    pub(crate) fn of(root: &'a Value, is_class: bool) -> Self {
        if is_class {
            Self::new(root)
        } else {
            Self::keeping_undeclared(root)
        }
    }

    /// `value` as `model_validate` makes it (before the dump leaves Nones out); what
    /// pydantic refuses is left as it came, for a schema check to see.
    pub(crate) fn validate(&self, value: &Value) -> Value {
        self.validate_at(self.root, value, &mut Vec::new(), &mut LineErrors::ignored())
    }

    /// `value` as `model_validate` makes it, or pydantic's `ValidationError` for it: every
    /// way it misses the class that pydantic reports, with the class named by the schema's
    /// `title` (a JSON Schema without one by pydantic's name of its type, `dict[str,any]`).
    pub(crate) fn validate_or_error(&self, value: &Value) -> std::result::Result<Value, ValidationError> {
        let mut errors = LineErrors::kept();
        let validated = self.validate_at(self.root, value, &mut Vec::new(), &mut errors);
        let errors = errors.0.unwrap_or_default();
        if errors.is_empty() {
            return Ok(validated);
        }
        let resolved = self.resolve(self.root);
        let title = match resolved.get("title").and_then(Value::as_str) {
            Some(title) => title.to_string(),
            None => self.type_name(resolved),
        };
        Err(ValidationError { title, errors })
    }

    /// A validated value as `model_dump(exclude_none=True)` writes it: a class's fields that
    /// are None left out (a dict's None values stay, as pydantic keeps them).
    pub(crate) fn dump(&self, value: &Value) -> Value {
        self.dump_at(self.root, value)
    }

    /// `validate` then `dump`, for a caller that checks nothing in between.
    pub(crate) fn validate_and_dump(&self, value: &Value) -> Value {
        self.dump(&self.validate(value))
    }

    /// `schema` with its `$ref` (pydantic's `#/$defs/Name`, or an `allOf` of one, which
    /// older pydantic writes around a reference with a description) followed.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        let mut schema = schema;
        for _ in 0..32 {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
                match reference
                    .strip_prefix('#')
                    .and_then(|pointer| self.root.pointer(pointer))
                {
                    Some(target) => schema = target,
                    None => return schema,
                }
            } else if let Some([only]) = schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                schema = only;
            } else {
                return schema;
            }
        }
        schema
    }

    /// The non-null branches of a union (`anyOf`/`oneOf`); none for any other schema.
    fn branches(&self, schema: &'a Value) -> Vec<&'a Value> {
        ["anyOf", "oneOf"]
            .iter()
            .filter_map(|key| schema.get(*key).and_then(Value::as_array))
            .flatten()
            .map(|branch| self.resolve(branch))
            .filter(|branch| branch["type"] != "null")
            .collect()
    }

    /// The branch of a union (`anyOf`/`oneOf`) a non-null `value` is validated by: the first
    /// of its type exactly (a class: one whose required fields are all there), else the first
    /// pydantic's lax mode converts it to, as its "smart" union mode prefers.
    fn branch(&self, schema: &'a Value, value: &Value) -> Option<&'a Value> {
        self.branch_of(&self.branches(schema), value)
    }

    fn branch_of(&self, branches: &[&'a Value], value: &Value) -> Option<&'a Value> {
        branches
            .iter()
            .find(|branch| is_exactly(branch, value))
            .or_else(|| {
                branches.iter().find(|branch| {
                    branch["type"]
                        .as_str()
                        .and_then(|kind| lax_scalar(kind, value))
                        .is_some()
                })
            })
            .copied()
    }

    /// Whether `schema` takes None: a union with a null branch, `type: null`, an enum of
    /// null, or no type at all (pydantic's `Any`).
    fn takes_null(&self, schema: &'a Value) -> bool {
        let unions: Vec<&Value> = ["anyOf", "oneOf"]
            .iter()
            .filter_map(|key| schema.get(*key).and_then(Value::as_array))
            .flatten()
            .collect();
        match (schema.get("type"), choices(schema)) {
            (_, Some(choices)) => choices.contains(&Value::Null),
            (Some(kind), None) => kind == "null" || kind.as_array().is_some_and(|kinds| kinds.contains(&"null".into())),
            (None, None) => unions.is_empty() || unions.iter().any(|branch| self.resolve(branch)["type"] == "null"),
        }
    }

    /// Validates `value` found at location `at` (a stack of field names and indexes),
    /// pushing each way it misses `schema` onto `errors` in pydantic's order (a class's
    /// fields in the class's order, then its forbidden extras), and keeping what pydantic
    /// refuses as it came.
    fn validate_at(&self, schema: &'a Value, value: &Value, at: &mut Vec<String>, errors: &mut LineErrors) -> Value {
        let schema = self.resolve(schema);
        if value.is_null() && self.takes_null(schema) {
            return Value::Null;
        }
        let branches = self.branches(schema);
        if let [only] = branches[..] {
            // pydantic's `nullable[...]`: the one type, at the same location.
            return self.validate_at(only, value, at, errors);
        }
        if !branches.is_empty() {
            if let Some(branch) = self.branch_of(&branches, value) {
                return self.validate_at(branch, value, at, errors);
            }
            // No branch takes it: pydantic's smart union says why for each, under its type's
            // name (only said when the errors are kept: the value is kept as it came anyway).
            if errors.are_kept() {
                for branch in branches {
                    at.push(self.type_name(branch));
                    self.validate_at(branch, value, at, errors);
                    at.pop();
                }
            }
            return value.clone();
        }
        if let Some(allowed) = choices(schema) {
            if !allowed.contains(value) {
                errors.push(|| self.line_error(self.type_error(schema, value), at, value));
            }
            return value.clone();
        }
        match (schema["type"].as_str(), value) {
            (Some("object") | None, Value::Object(given)) => self.validate_object(schema, given, at, errors),
            (Some("array"), Value::Array(items)) => match schema.get("items") {
                Some(item) => items
                    .iter()
                    .enumerate()
                    .map(|(index, value)| {
                        at.push(index.to_string());
                        let validated = self.validate_at(item, value, at, errors);
                        at.pop();
                        validated
                    })
                    .collect(),
                None => value.clone(),
            },
            (Some(kind), _) => lax_scalar(kind, value).unwrap_or_else(|| {
                errors.push(|| self.line_error(self.type_error(schema, value), at, value));
                value.clone()
            }),
            (None, _) => value.clone(),
        }
    }

    /// A class's (or a dict's) fields validated at `at`: declared ones in the schema's order,
    /// a missing required one reported with the whole input, then the undeclared ones,
    /// forbidden (`additionalProperties: false`), validated by `additionalProperties`, kept
    /// or dropped.
    fn validate_object(
        &self,
        schema: &'a Value,
        given: &serde_json::Map<String, Value>,
        at: &mut Vec<String>,
        errors: &mut LineErrors,
    ) -> Value {
        let properties = schema.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut validated = serde_json::Map::new();
        for (name, property) in properties.into_iter().flatten() {
            match given.get(name) {
                Some(value) => {
                    at.push(name.clone());
                    validated.insert(name.clone(), self.validate_at(property, value, at, errors));
                    at.pop();
                }
                // A default is not validated (pydantic's `validate_default` is off).
                None => match property.get("default") {
                    Some(default) => {
                        validated.insert(name.clone(), default.clone());
                    }
                    None if required.contains(&name.as_str()) => {
                        at.push(name.clone());
                        // pydantic reports a missing field with the whole object as its input.
                        errors.push(|| self.line_error(ErrorKind::Missing, at, &Value::Object(given.clone())));
                        at.pop();
                    }
                    None => {}
                },
            }
        }
        let extra = schema.get("additionalProperties");
        let keep_undeclared = match extra {
            Some(Value::Bool(allowed)) => *allowed,
            Some(_) => true,
            None => self.keep_undeclared || properties.is_none(),
        };
        let undeclared = given
            .iter()
            .filter(|(name, _)| !properties.is_some_and(|p| p.contains_key(*name)));
        for (name, value) in undeclared {
            at.push(name.clone());
            match extra {
                Some(Value::Bool(false)) => errors.push(|| self.line_error(ErrorKind::ExtraForbidden, at, value)),
                Some(item) if item.is_object() => {
                    validated.insert(name.clone(), self.validate_at(item, value, at, errors));
                }
                _ if keep_undeclared => {
                    validated.insert(name.clone(), value.clone());
                }
                _ => {}
            }
            at.pop();
        }
        Value::Object(validated)
    }

    fn line_error(&self, kind: ErrorKind, at: &[String], input: &Value) -> LineError {
        LineError {
            kind,
            location: at.to_vec(),
            input: input.clone(),
        }
    }

    /// Whether `schema` is one of the root's definitions (a class or an `Enum` of its own).
    fn is_definition(&self, schema: &Value) -> bool {
        ["$defs", "definitions"]
            .iter()
            .filter_map(|key| self.root.get(*key).and_then(Value::as_object))
            .flat_map(|definitions| definitions.values())
            .any(|definition| std::ptr::eq(definition, schema))
    }

    /// The error pydantic reports for `value`, which `schema` (no union) does not take.
    fn type_error(&self, schema: &Value, value: &Value) -> ErrorKind {
        if let Some(allowed) = choices(schema) {
            let expected = expected_choices(allowed);
            // An `Enum` class is a definition of its own (`$defs`); a `Literal` is written in place.
            return if self.is_definition(schema) {
                ErrorKind::Enum(expected)
            } else {
                ErrorKind::Literal(expected)
            };
        }
        let integral = |n: &serde_json::Number| n.as_f64().is_some_and(|f| f.fract() == 0.0);
        match (schema["type"].as_str(), value) {
            (Some("integer"), Value::String(_)) => ErrorKind::IntParsing,
            (Some("integer"), Value::Number(n)) if integral(n) => ErrorKind::IntParsingSize,
            (Some("integer"), Value::Number(_)) => ErrorKind::IntFromFloat,
            (Some("integer"), _) => ErrorKind::IntType,
            (Some("number"), Value::String(_)) => ErrorKind::FloatParsing,
            (Some("number"), _) => ErrorKind::FloatType,
            (Some("boolean"), Value::String(_)) => ErrorKind::BoolParsing,
            (Some("boolean"), Value::Number(n)) if integral(n) => ErrorKind::BoolParsing,
            (Some("boolean"), _) => ErrorKind::BoolType,
            (Some("array"), _) => ErrorKind::ListType,
            (Some("object"), _) => match (schema.get("properties"), schema["title"].as_str()) {
                (Some(_), Some(class)) => ErrorKind::ModelType(class.to_string()),
                _ => ErrorKind::DictType,
            },
            _ => ErrorKind::StringType,
        }
    }

    /// pydantic's name of the type `schema` describes (a union's branch in an error's
    /// location, a type's `ValidationError` title): a class's or an `Enum`'s title, else
    /// `str`, `int`, `list[int]`, `dict[str,any]`, `literal['a','b']`, `nullable[int]`, ….
    fn type_name(&self, schema: &'a Value) -> String {
        let schema = self.resolve(schema);
        if let Some(title) = schema["title"].as_str()
            && (schema.get("properties").is_some() || choices(schema).is_some())
        {
            return title.to_string();
        }
        if let Some(allowed) = choices(schema) {
            let reprs: Vec<String> = allowed.iter().map(python_repr).collect();
            return format!("literal[{}]", reprs.join(","));
        }
        let branches = self.branches(schema);
        if !branches.is_empty() {
            let names: Vec<String> = branches.iter().map(|branch| self.type_name(branch)).collect();
            let union = match names.as_slice() {
                [only] => only.clone(),
                _ => format!("union[{}]", names.join(",")),
            };
            return if self.takes_null(schema) {
                format!("nullable[{union}]")
            } else {
                union
            };
        }
        let of = |key: &str| match schema.get(key).filter(|item| item.is_object()) {
            Some(item) => self.type_name(item),
            None => "any".to_string(),
        };
        match schema["type"].as_str() {
            Some("string") => "str".into(),
            Some("integer") => "int".into(),
            Some("number") => "float".into(),
            Some("boolean") => "bool".into(),
            Some("null") => "none".into(),
            Some("array") => format!("list[{}]", of("items")),
            Some("object") => format!("dict[str,{}]", of("additionalProperties")),
            _ => "any".into(),
        }
    }

    fn dump_at(&self, schema: &'a Value, value: &Value) -> Value {
        let schema = self.resolve(schema);
        if let Some(branch) = self.branch(schema, value) {
            return self.dump_at(branch, value);
        }
        match value {
            Value::Object(map) => {
                let properties = schema.get("properties").and_then(Value::as_object);
                let is_class = properties.is_some();
                map.iter()
                    .filter(|(_, value)| !(is_class && value.is_null()))
                    .map(|(name, value)| {
                        let property = properties
                            .and_then(|p| p.get(name))
                            .or_else(|| schema.get("additionalProperties").filter(|item| item.is_object()));
                        let value = match property {
                            Some(property) => self.dump_at(property, value),
                            None => value.clone(),
                        };
                        (name.clone(), value)
                    })
                    .collect()
            }
            Value::Array(items) => match schema.get("items") {
                Some(item) => items.iter().map(|value| self.dump_at(item, value)).collect(),
                None => value.clone(),
            },
            scalar => scalar.clone(),
        }
    }
}

/// The ways a value misses a schema, as validation finds them, in pydantic's order; for a
/// caller that wants only the validated value, not worked out at all (no error's location
/// and input copied).
struct LineErrors(Option<Vec<LineError>>);

impl LineErrors {
    fn kept() -> Self {
        LineErrors(Some(Vec::new()))
    }

    fn ignored() -> Self {
        LineErrors(None)
    }

    fn are_kept(&self) -> bool {
        self.0.is_some()
    }

    /// Adds the error `line` makes, when errors are kept.
    fn push(&mut self, line: impl FnOnce() -> LineError) {
        if let Some(errors) = &mut self.0 {
            errors.push(line());
        }
    }
}

/// The values an `enum` or a `const` allows, if it is one.
fn choices(schema: &Value) -> Option<&[Value]> {
    match (schema.get("enum").and_then(Value::as_array), schema.get("const")) {
        (Some(values), _) => Some(values.as_slice()),
        (None, Some(value)) => Some(std::slice::from_ref(value)),
        (None, None) => None,
    }
}

/// Whether `value` is of `schema`'s type as it stands (a class: with all its required fields).
fn is_exactly(schema: &Value, value: &Value) -> bool {
    match (schema["type"].as_str(), value) {
        (Some("object"), Value::Object(map)) => schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .all(|name| map.contains_key(name)),
        (Some("array"), Value::Array(_)) | (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => {
            true
        }
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Value::Number(_)) => true,
        _ => false,
    }
}

/// A scalar as pydantic's lax mode converts it to a JSON Schema `kind`, or None where it
/// does not: an integer from an integral float, a bool or a string of one; a float from an
/// integer, a bool or a string of one; a bool from 0/1 or the words pydantic takes.
fn lax_scalar(kind: &str, value: &Value) -> Option<Value> {
    let from_text = |text: &str| text.trim().parse::<f64>().ok().filter(|f| f.is_finite());
    match (kind, value) {
        ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => Some(value.clone()),
        ("integer", Value::Number(n)) => n.as_f64().and_then(integral),
        ("integer", Value::Bool(b)) => Some(Value::from(i64::from(*b))),
        ("integer", Value::String(text)) => from_text(text).and_then(integral),
        ("number", Value::Number(n)) => n.as_f64().map(Value::from),
        ("number", Value::Bool(b)) => Some(Value::from(if *b { 1.0 } else { 0.0 })),
        ("number", Value::String(text)) => from_text(text).map(Value::from),
        ("boolean", Value::Bool(_)) => Some(value.clone()),
        ("boolean", Value::Number(n)) => match n.as_f64() {
            Some(0.0) => Some(Value::Bool(false)),
            Some(1.0) => Some(Value::Bool(true)),
            _ => None,
        },
        ("boolean", Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(Value::Bool(false)),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(Value::Bool(true)),
            _ => None,
        },
        ("string", Value::String(_)) => Some(value.clone()),
        _ => None,
    }
}

/// An integral float as an integer (pydantic's `int` takes 3.0, not 3.5).
fn integral(f: f64) -> Option<Value> {
    (f.fract() == 0.0 && f.abs() < 9.0e15).then(|| Value::from(f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Trip(origin: str, legs: list[Leg], passengers: int = 1, return_: Leg | None = None,
    /// tags: dict[str, int | None] = {}), Leg(to: str, hours: float, direct: bool = True,
    /// note: str | None = None), as pydantic's JSON Schema writes them.
    fn trip() -> Value {
        json!({
            "$defs": {"Leg": {"type": "object", "title": "Leg", "properties": {
                "to": {"type": "string"},
                "hours": {"type": "number"},
                "direct": {"type": "boolean", "default": true},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            }, "required": ["to", "hours"]}},
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}},
                "passengers": {"type": "integer", "default": 1},
                "return_": {"anyOf": [{"$ref": "#/$defs/Leg"}, {"type": "null"}], "default": null},
                "tags": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                         "default": {}},
            },
            "required": ["origin", "legs"],
        })
    }

    #[test]
    fn a_class_is_validated_and_dumped_as_pydantic_does() {
        let schema = trip();
        let class = PydanticClass::new(&schema);
        let given = json!({
            "tags": {"x": "2", "y": null},
            "legs": [{"hours": 2, "to": "Rome", "note": null, "direct": "no"}],
            "extra": true,
            "return_": {"hours": "1.5", "to": "Paris"},
            "passengers": 3.0,
            "origin": "Paris",
        });
        let validated = class.validate(&given);
        // Converted as pydantic's lax mode does, the class's order, undeclared keys dropped,
        // Nones still there until the dump.
        assert_eq!(
            validated.to_string(),
            r#"{"origin":"Paris","legs":[{"to":"Rome","hours":2.0,"direct":false,"note":null}],"passengers":3,"return_":{"to":"Paris","hours":1.5,"direct":true,"note":null},"tags":{"x":2,"y":null}}"#
        );
        // The dump leaves out a class's None fields, not a dict's None values.
        assert_eq!(
            class.dump(&validated).to_string(),
            r#"{"origin":"Paris","legs":[{"to":"Rome","hours":2.0,"direct":false}],"passengers":3,"return_":{"to":"Paris","hours":1.5,"direct":true},"tags":{"x":2,"y":null}}"#
        );
        // Defaults fill what is left out (not validated, as pydantic leaves them); a null
        // for an optional class is None, left out.
        assert_eq!(
            class
                .validate_and_dump(&json!({"legs": [], "origin": "Oslo", "return_": null}))
                .to_string(),
            r#"{"origin":"Oslo","legs":[],"passengers":1,"tags":{}}"#
        );
    }

    #[test]
    fn what_pydantic_refuses_is_left_as_it_came_for_the_check_to_see() {
        let schema = trip();
        let class = PydanticClass::new(&schema);
        let given = json!({"origin": 5, "legs": [{"to": "Rome", "hours": "soon", "direct": 2}], "passengers": 1.5});
        let validated = class.validate(&given);
        assert_eq!(validated["origin"], json!(5));
        assert_eq!(validated["legs"][0]["hours"], json!("soon"));
        assert_eq!(validated["legs"][0]["direct"], json!(2));
        assert_eq!(validated["passengers"], json!(1.5));
        let validator = compile("output_schema", &schema).unwrap();
        assert_eq!(problems(&validator, &validated).len(), 4, "{validated}");
    }

    #[test]
    fn a_json_schema_of_an_agents_file_keeps_the_keys_it_does_not_declare() {
        let schema = json!({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}});
        assert_eq!(
            PydanticClass::keeping_undeclared(&schema)
                .validate_and_dump(&json!({"z": null, "a": "x", "y": 1, "b": "2"}))
                .to_string(),
            r#"{"b":2,"a":"x","y":1}"#
        );
        let closed = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert_eq!(
            PydanticClass::keeping_undeclared(&closed)
                .validate_and_dump(&json!({"y": 1, "a": "x"}))
                .to_string(),
            r#"{"a":"x"}"#
        );
    }

    /// pydantic's own texts for values missing schemas (`tests/conformance/pydantic_errors.py`
    /// writes them with the pydantic ADK 2.13 is recorded with): every error kind a model's
    /// arguments can hit, nested locations, unions, the count line, cut input reprs.
    #[test]
    fn errors_read_as_pydantics_own_text() {
        let table: Vec<Value> =
            serde_json::from_str(include_str!("../../../tests/conformance/pydantic_errors.json")).unwrap();
        assert!(table.len() > 20);
        for case in &table {
            let schema = &case["schema"];
            let error = PydanticClass::new(schema)
                .validate_or_error(&case["input"])
                .expect_err(&format!("{} misses {schema}", case["input"]));
            assert_eq!(error.to_string(), case["error"].as_str().unwrap(), "{}", case["input"]);
        }
    }

    #[test]
    fn a_fitting_value_has_no_errors() {
        let schema = trip();
        let fitting = json!({"origin": "Oslo", "legs": [{"to": "Rome", "hours": "2"}], "tags": {"a": null}});
        assert_eq!(
            PydanticClass::new(&schema).validate_or_error(&fitting).map(|v| v.to_string()),
            Ok(r#"{"origin":"Oslo","legs":[{"to":"Rome","hours":2.0,"direct":true,"note":null}],"passengers":1,"return_":null,"tags":{"a":null}}"#.to_string())
        );
    }
}
