//! The JSON forms hooks read and write: google-genai's (snake_case, as Python's
//! `model_dump(mode="json", exclude_none=True)` writes and `model_validate` reads).

use crate::tools::part_json;
use adk_grpc_core::{AdkError, Content, FinishReason, LlmRequest, LlmResponse, Part, Result, ToolDeclaration};
use serde::Deserialize;
use serde_json::{Value, json};

pub(super) fn part_from_json(field: &str, json: Value) -> Result<Part> {
    let Value::Object(mut object) = json else {
        return Err(AdkError::invalid(
            field,
            "a part must be an object such as {\"text\": \"…\"}",
        ));
    };
    if let Some(Value::String(text)) = object.remove("text") {
        object.insert("text".into(), json!({ "text": text }));
    }
    if let Some(Value::Object(mut flat)) = object.remove("function_response") {
        let id = flat.remove("id").unwrap_or(Value::Null);
        object.insert(
            "function_response".into(),
            json!({ "function_response": Value::Object(flat), "id": id }),
        );
    }
    for key in ["function_call", "executable_code", "code_execution_result"] {
        if let Some(Value::Object(inner)) = object.get_mut(key) {
            for optional in ["id", "code", "language", "outcome", "output"] {
                if !inner.contains_key(optional) && (key != "function_call" || optional == "id") {
                    inner.insert(optional.into(), Value::Null);
                }
            }
        }
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| AdkError::invalid(field, e.to_string()))
}

pub(super) fn content_json(content: &Content) -> Value {
    json!({
        "role": content.role,
        "parts": content.parts.iter().map(part_json).collect::<Vec<_>>(),
    })
}

/// A content as google-genai's JSON, or a string (a model's text reply).
pub(super) fn content_from_json(field: &str, json: Value) -> Result<Content> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ContentJson {
        #[serde(default)]
        role: Option<String>,
        #[serde(default)]
        parts: Vec<Value>,
    }
    if let Value::String(text) = json {
        return Ok(Content::new("model").with_text(text));
    }
    let content: ContentJson = serde_json::from_value(json).map_err(|e| AdkError::invalid(field, e.to_string()))?;
    let parts = content
        .parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| part_from_json(&format!("{field}.parts[{i}]"), part))
        .collect::<Result<Vec<_>>>()?;
    Ok(Content {
        role: content
            .role
            .filter(|role| !role.is_empty())
            .unwrap_or_else(|| "model".into()),
        parts,
    })
}

pub(super) fn request_json(request: &LlmRequest) -> Value {
    json!({
        "model": request.model,
        "contents": request.contents.iter().map(content_json).collect::<Vec<_>>(),
        "system_instruction": request.system_instruction,
        "tools": request.tools,
    })
}

/// `changed` over `request`: each of `contents`, `system_instruction` and `tools`
/// given replaces the request's.
pub(super) fn request_from_json(mut request: LlmRequest, changed: Value) -> Result<LlmRequest> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Changed {
        #[serde(default)]
        model: Option<Value>,
        #[serde(default)]
        contents: Option<Vec<Value>>,
        #[serde(default, deserialize_with = "present")]
        system_instruction: Option<Option<String>>,
        #[serde(default)]
        tools: Option<Vec<ToolDeclaration>>,
    }
    let changed: Changed = serde_json::from_value(changed).map_err(|e| AdkError::invalid("request", e.to_string()))?;
    if changed
        .model
        .as_ref()
        .is_some_and(|model| model != &json!(request.model))
    {
        return Err(AdkError::invalid(
            "request.model",
            "the agent's model is not changed by a hook",
        ));
    }
    if let Some(contents) = changed.contents {
        request.contents = contents
            .into_iter()
            .enumerate()
            .map(|(i, content)| content_from_json(&format!("request.contents[{i}]"), content))
            .collect::<Result<_>>()?;
    }
    if let Some(instruction) = changed.system_instruction {
        request.system_instruction = instruction;
    }
    if let Some(tools) = changed.tools {
        request.tools = tools;
    }
    Ok(request)
}

/// A field given as `null` is `Some(None)`, one left out `None`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

/// An error as a hook reads it: its gRPC code's name and its message.
pub(super) fn error_json(error: &AdkError) -> Value {
    json!({ "code": adk_grpc_telemetry::code_name(error.code()), "message": error.to_string() })
}

pub(super) fn response_json(response: &LlmResponse) -> Value {
    json!({
        "content": response.content.as_ref().map(content_json),
        "finish_reason": response.finish_reason,
        "usage_metadata": response.usage_metadata,
    })
}

/// `changed` over `response`: its `content` (required) and `finish_reason` replace
/// the response's; the rest (usage, model version) stays what the model said.
pub(super) fn response_from_json(mut response: LlmResponse, changed: Value) -> Result<LlmResponse> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Changed {
        content: Value,
        #[serde(default)]
        finish_reason: Option<FinishReason>,
        /// Accepted as a hook echoes it, and ignored: usage is what the model spent.
        #[serde(default, rename = "usage_metadata")]
        _usage_metadata: Option<serde::de::IgnoredAny>,
    }
    let changed: Changed = serde_json::from_value(changed).map_err(|e| AdkError::invalid("response", e.to_string()))?;
    response.content = Some(content_from_json("response.content", changed.content)?);
    if changed.finish_reason.is_some() {
        response.finish_reason = changed.finish_reason;
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::FunctionResponseData;

    #[test]
    fn parts_travel_as_google_genai_json_and_back() {
        let parts = [
            Part::text_part("hi"),
            Part::function_call("add", json!({"a": 1}), Some("c1".into())),
            Part::function_response(
                FunctionResponseData {
                    name: "add".into(),
                    response: json!({"sum": 2}),
                },
                Some("c1".into()),
            ),
            Part::inline_data("image/png", vec![1, 2, 3]),
            Part::file_data("text/plain", "gs://b/f"),
        ];
        let json: Vec<Value> = parts.iter().map(part_json).collect();
        assert_eq!(json[0], json!({"text": "hi"}));
        assert_eq!(
            json[1],
            json!({"function_call": {"name": "add", "args": {"a": 1}, "id": "c1"}})
        );
        assert_eq!(
            json[2],
            json!({"function_response": {"name": "add", "response": {"sum": 2}, "id": "c1"}})
        );
        assert_eq!(
            json[3],
            json!({"inline_data": {"mime_type": "image/png", "data": "AQID"}})
        );
        assert_eq!(
            json[4],
            json!({"file_data": {"mime_type": "text/plain", "file_uri": "gs://b/f"}})
        );
        for (part, json) in parts.iter().zip(json) {
            assert_eq!(&part_from_json("p", json).unwrap(), part);
        }
        let mut thought = Part::text_part("hmm");
        thought.thought = Some(true);
        assert_eq!(part_json(&thought), json!({"text": "hmm", "thought": true}));
        let call = part_from_json("p", json!({"function_call": {"name": "f", "args": {}}})).unwrap();
        assert_eq!(call, Part::function_call("f", json!({}), None));
        assert!(part_from_json("p", json!("hi")).is_err());
    }

    #[test]
    fn a_changed_request_replaces_only_what_it_names() {
        let request = LlmRequest {
            model: "m".into(),
            contents: vec![Content::new("user").with_text("hello")],
            system_instruction: Some("Be brief.".into()),
            ..Default::default()
        };
        let changed = request_from_json(
            request.clone(),
            json!({"contents": [{"role": "user", "parts": [{"text": "bye"}]}]}),
        )
        .unwrap();
        assert_eq!(changed.contents, vec![Content::new("user").with_text("bye")]);
        assert_eq!(changed.system_instruction.as_deref(), Some("Be brief."));
        let cleared = request_from_json(request.clone(), json!({"system_instruction": null})).unwrap();
        assert_eq!(cleared.system_instruction, None);
        assert!(request_from_json(request.clone(), json!({"model": "other"})).is_err());
        assert!(request_from_json(request, json!({"contens": []})).is_err());
    }
}
