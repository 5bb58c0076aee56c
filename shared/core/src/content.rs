//! Messages: `Content` (a role and its parts) and `Part`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message in a conversation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Content {
    /// "user" or "model". Function responses are "user", as ADK stores them; sessions
    /// stored before that carry "tool" for them, which every provider reads alike.
    pub role: String,
    pub parts: Vec<Part>,
}

impl Content {
    pub fn new(role: impl Into<String>) -> Self {
        Content {
            role: role.into(),
            parts: Vec::new(),
        }
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::text_part(text));
        self
    }

    pub fn with_inline_data(mut self, mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        self.parts.push(Part::inline_data(mime_type, data));
        self
    }

    pub fn with_file_uri(mut self, mime_type: impl Into<String>, file_uri: impl Into<String>) -> Self {
        self.parts.push(Part::file_data(mime_type, file_uri));
        self
    }

    pub fn with_part(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }

    /// The text parts joined, or None when the message has no text.
    pub fn text(&self) -> Option<String> {
        let texts: Vec<&str> = self.parts.iter().filter_map(Part::text).collect();
        (!texts.is_empty()).then(|| texts.concat())
    }

    /// Its function calls, in order.
    pub fn function_calls(&self) -> impl Iterator<Item = FunctionCall<'_>> {
        self.parts.iter().filter_map(Part::function_call_view)
    }

    /// Its function responses, in order.
    pub fn function_responses(&self) -> impl Iterator<Item = FunctionResponse<'_>> {
        self.parts.iter().filter_map(Part::function_response_view)
    }
}

/// A function call part, read: its id ("" when the model gave none), the tool's name
/// and the arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FunctionCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub args: &'a Value,
}

/// A function response part, read: the id of the call it answers ("" when none), the
/// tool's name and the response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FunctionResponse<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub response: &'a Value,
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionResponseData {
    pub name: String,
    pub response: Value,
}

/// One piece of a message: what it is (`kind`) and ADK's attributes of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    #[serde(flatten)]
    pub kind: PartKind,
    /// The model's reasoning rather than its answer; `None` and `Some(false)` differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// An opaque signature of the reasoning, sent back to the model as is.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "base64_bytes_opt")]
    pub thought_signature: Option<Vec<u8>>,
    /// A display name of inline or file data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Of a function call or response: more chunks of it follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will_continue: Option<bool>,
    /// Which part of a video the data refers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_metadata: Option<VideoMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_metadata: Option<serde_json::Map<String, Value>>,
    /// ADK Part fields without a typed field, as ADK's JSON (see docs/adk-fields.md).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extensions: serde_json::Map<String, Value>,
}

/// What a part is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    Text {
        text: String,
    },
    InlineData {
        mime_type: String,
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    FileData {
        mime_type: String,
        file_uri: String,
    },
    FunctionCall {
        name: String,
        args: Value,
        id: Option<String>,
    },
    FunctionResponse {
        function_response: FunctionResponseData,
        id: Option<String>,
    },
    /// Code the model generated for a code-execution tool.
    ExecutableCode {
        code: Option<String>,
        /// google.genai's Language name, e.g. "PYTHON".
        language: Option<String>,
        id: Option<String>,
    },
    /// The result of running executable code.
    CodeExecutionResult {
        /// google.genai's Outcome name, e.g. "OUTCOME_OK".
        outcome: Option<String>,
        output: Option<String>,
        id: Option<String>,
    },
}

/// The part of a video a part refers to.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VideoMetadata {
    pub start_offset: Option<String>,
    pub end_offset: Option<String>,
    pub fps: Option<f64>,
}

impl From<PartKind> for Part {
    fn from(kind: PartKind) -> Self {
        Part {
            kind,
            thought: None,
            thought_signature: None,
            display_name: None,
            will_continue: None,
            video_metadata: None,
            part_metadata: None,
            extensions: serde_json::Map::new(),
        }
    }
}

impl Part {
    pub fn text_part(text: impl Into<String>) -> Self {
        PartKind::Text { text: text.into() }.into()
    }

    pub fn inline_data(mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        PartKind::InlineData {
            mime_type: mime_type.into(),
            data: data.into(),
        }
        .into()
    }

    pub fn file_data(mime_type: impl Into<String>, file_uri: impl Into<String>) -> Self {
        PartKind::FileData {
            mime_type: mime_type.into(),
            file_uri: file_uri.into(),
        }
        .into()
    }

    pub fn function_call(name: impl Into<String>, args: Value, id: Option<String>) -> Self {
        PartKind::FunctionCall {
            name: name.into(),
            args,
            id,
        }
        .into()
    }

    pub fn function_response(function_response: FunctionResponseData, id: Option<String>) -> Self {
        PartKind::FunctionResponse { function_response, id }.into()
    }

    /// The part as a function call, when it is one.
    pub fn function_call_view(&self) -> Option<FunctionCall<'_>> {
        match &self.kind {
            PartKind::FunctionCall { name, args, id } => Some(FunctionCall {
                id: id.as_deref().unwrap_or_default(),
                name,
                args,
            }),
            _ => None,
        }
    }

    /// The part as a function response, when it is one.
    pub fn function_response_view(&self) -> Option<FunctionResponse<'_>> {
        match &self.kind {
            PartKind::FunctionResponse { function_response, id } => Some(FunctionResponse {
                id: id.as_deref().unwrap_or_default(),
                name: &function_response.name,
                response: &function_response.response,
            }),
            _ => None,
        }
    }

    /// The text of a text part that is not a thought.
    pub fn text(&self) -> Option<&str> {
        match &self.kind {
            PartKind::Text { text } if self.thought != Some(true) => Some(text),
            _ => None,
        }
    }

    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }

    /// The MIME type of inline or file data.
    pub fn mime_type(&self) -> Option<&str> {
        match &self.kind {
            PartKind::InlineData { mime_type, .. } | PartKind::FileData { mime_type, .. } => Some(mime_type),
            _ => None,
        }
    }

    pub fn file_uri(&self) -> Option<&str> {
        match &self.kind {
            PartKind::FileData { file_uri, .. } => Some(file_uri),
            _ => None,
        }
    }

    /// True for binary media: inline data or a file reference.
    pub fn is_media(&self) -> bool {
        matches!(self.kind, PartKind::InlineData { .. } | PartKind::FileData { .. })
    }
}

/// JSON has no bytes type: optional bytes travel as base64 too.
mod base64_bytes_opt {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, serializer: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_some(&STANDARD.encode(bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|text| STANDARD.decode(text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// JSON has no bytes type: inline data travels as base64 in JSON documents.
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_and_accessors() {
        let c = Content::new("user")
            .with_text("What's in this image?")
            .with_inline_data("image/jpeg", vec![0xFF, 0xD8])
            .with_file_uri("image/png", "https://example.com/chart.png");
        assert_eq!(c.role, "user");
        assert_eq!(c.parts[0].text(), Some("What's in this image?"));
        assert!(!c.parts[0].is_media());
        assert_eq!(c.parts[1].mime_type(), Some("image/jpeg"));
        assert!(c.parts[1].is_media());
        assert_eq!(c.parts[2].file_uri(), Some("https://example.com/chart.png"));
        assert_eq!(c.text().as_deref(), Some("What's in this image?"));
    }

    #[test]
    fn parts_serialize_to_json_and_back() {
        let part = Part::inline_data("application/pdf", vec![1, 2, 3]);
        let json = serde_json::to_string(&part).unwrap();
        assert!(json.contains("AQID"), "{json}");
        assert_eq!(serde_json::from_str::<Part>(&json).unwrap(), part);
    }
}
