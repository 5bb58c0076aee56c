//! Messages: `Content` (a role and its parts) and `Part`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message in a conversation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Content {
    /// "user", "model" or "tool".
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
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionResponseData {
    pub name: String,
    pub response: Value,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
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
}

impl Part {
    pub fn text_part(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    pub fn inline_data(mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Part::InlineData {
            mime_type: mime_type.into(),
            data: data.into(),
        }
    }

    pub fn file_data(mime_type: impl Into<String>, file_uri: impl Into<String>) -> Self {
        Part::FileData {
            mime_type: mime_type.into(),
            file_uri: file_uri.into(),
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The MIME type of inline or file data.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            Part::InlineData { mime_type, .. } | Part::FileData { mime_type, .. } => Some(mime_type),
            _ => None,
        }
    }

    pub fn file_uri(&self) -> Option<&str> {
        match self {
            Part::FileData { file_uri, .. } => Some(file_uri),
            _ => None,
        }
    }

    /// True for binary media: inline data or a file reference.
    pub fn is_media(&self) -> bool {
        matches!(self, Part::InlineData { .. } | Part::FileData { .. })
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
