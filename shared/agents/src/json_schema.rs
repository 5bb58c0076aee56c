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

    /// `value` as `model_validate` makes it (before the dump leaves Nones out).
    pub(crate) fn validate(&self, value: &Value) -> Value {
        self.validate_at(self.root, value)
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

    /// The branch of a union (`anyOf`/`oneOf`) a non-null `value` is validated by: the first
    /// of its type exactly (a class: one whose required fields are all there), else the first
    /// pydantic's lax mode converts it to, as its "smart" union mode prefers.
    fn branch(&self, schema: &'a Value, value: &Value) -> Option<&'a Value> {
        let branches: Vec<&'a Value> = ["anyOf", "oneOf"]
            .iter()
            .filter_map(|key| schema.get(*key).and_then(Value::as_array))
            .flatten()
            .map(|branch| self.resolve(branch))
            .filter(|branch| branch["type"] != "null")
            .collect();
        if branches.is_empty() {
            return None;
        }
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

    fn validate_at(&self, schema: &'a Value, value: &Value) -> Value {
        let schema = self.resolve(schema);
        if value.is_null() {
            return Value::Null;
        }
        if let Some(branch) = self.branch(schema, value) {
            return self.validate_at(branch, value);
        }
        match (schema["type"].as_str(), value) {
            (Some("object") | None, Value::Object(given)) => {
                let properties = schema.get("properties").and_then(Value::as_object);
                let declared = properties.into_iter().flatten().filter_map(|(name, property)| {
                    let value = match given.get(name) {
                        Some(value) => self.validate_at(property, value),
                        // A default is not validated (pydantic's `validate_default` is off).
                        None => property.get("default")?.clone(),
                    };
                    Some((name.clone(), value))
                });
                let extra = schema.get("additionalProperties");
                let keep_undeclared = match extra {
                    Some(Value::Bool(allowed)) => *allowed,
                    Some(_) => true,
                    None => self.keep_undeclared || properties.is_none(),
                };
                let undeclared = given
                    .iter()
                    .filter(|(name, _)| keep_undeclared && !properties.is_some_and(|p| p.contains_key(*name)))
                    .map(|(name, value)| {
                        let value = match extra {
                            Some(item) if item.is_object() => self.validate_at(item, value),
                            _ => value.clone(),
                        };
                        (name.clone(), value)
                    });
                Value::Object(declared.chain(undeclared).collect())
            }
            (Some("array"), Value::Array(items)) => match schema.get("items") {
                Some(item) => items.iter().map(|value| self.validate_at(item, value)).collect(),
                None => value.clone(),
            },
            (Some(kind), _) => lax_scalar(kind, value).unwrap_or_else(|| value.clone()),
            _ => value.clone(),
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
}
