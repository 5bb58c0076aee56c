//! A part as the remote tools and hooks exchange it: google-genai's JSON, read
//! ([`RemotePart`], what a tool may send: text or inline data) and written
//! ([`part_json`], any part). Shared by the tool context (`remote_context`), the session
//! reads of a call (`session_reads`) and the hooks' codec.

use adk_grpc_core::{AdkError, Part, Result};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A part as google-genai writes it in JSON: `{"text": …}` or
/// `{"inline_data": {"mime_type": …, "data": <base64>}}` (camelCase accepted).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RemotePart {
    Text {
        text: String,
    },
    InlineData {
        #[serde(alias = "inlineData")]
        inline_data: RemoteBlob,
    },
}

#[derive(Debug, Deserialize)]
pub(crate) struct RemoteBlob {
    #[serde(alias = "mimeType")]
    mime_type: String,
    data: String,
}

/// A part as google-genai's JSON: `{"text": "…"}`, `{"function_call": {"name", "args", "id"}}`,
/// `{"function_response": {"name", "response", "id"}}`, `{"inline_data": {"mime_type", "data"}}`, …
pub(crate) fn part_json(part: &Part) -> Value {
    let mut json = serde_json::to_value(part).unwrap_or(Value::Null);
    if let Some(object) = json.as_object_mut() {
        // The core's serde form nests these one level deeper than google-genai.
        if let Some(Value::Object(text)) = object.get_mut("text") {
            let text = text.remove("text").unwrap_or_default();
            object.insert("text".into(), text);
        }
        if let Some(Value::Object(outer)) = object.get_mut("function_response") {
            let mut flat = match outer.remove("function_response") {
                Some(Value::Object(inner)) => inner,
                _ => Map::new(),
            };
            if let Some(id) = outer.remove("id").filter(|id| !id.is_null()) {
                flat.insert("id".into(), id);
            }
            object.insert("function_response".into(), Value::Object(flat));
        }
        for key in ["function_call", "executable_code", "code_execution_result"] {
            if let Some(Value::Object(inner)) = object.get_mut(key) {
                inner.retain(|_, value| !value.is_null());
            }
        }
    }
    json
}

impl RemotePart {
    pub(crate) fn into_part(self, field: &str) -> Result<Part> {
        match self {
            RemotePart::Text { text } => Ok(Part::text_part(text)),
            RemotePart::InlineData { inline_data } => {
                let bytes = BASE64
                    .decode(inline_data.data.as_bytes())
                    .map_err(|e| AdkError::invalid(field, format!("inline_data.data is not base64: {e}")))?;
                Ok(Part::inline_data(inline_data.mime_type, bytes))
            }
        }
    }
}
