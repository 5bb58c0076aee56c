//! ADK's `static_instruction` as rich content (its `types.ContentUnion`: a text, or
//! parts with files): the system text takes the texts and a reference to each file,
//! and the files themselves go to the model as user contents at the start of the
//! request, as ADK's `LlmRequest.append_instructions` does.

use adk_grpc_core::{Content, Part};

/// An agent's static instruction: its parts in order.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticInstruction {
    parts: Vec<StaticPart>,
    /// Its parts' texts that are not empty, in order: what an advisor is shown of it.
    texts: Vec<String>,
    /// What every request of the agent carries of it, built once: the parts never change.
    request: StaticRequestParts,
}

/// A part of a static instruction.
#[derive(Debug, Clone, PartialEq)]
pub enum StaticPart {
    Text(String),
    /// A file sent with the request (ADK's `inline_data`).
    InlineData {
        mime_type: String,
        data: Vec<u8>,
        /// Named in the system text's reference; not sent (ADK drops it for the Gemini API).
        display_name: Option<String>,
    },
    /// A file named by its URI (ADK's `file_data`).
    FileData {
        mime_type: String,
        file_uri: String,
        display_name: Option<String>,
    },
}

/// The system text's parts and the contents carrying the files, in ADK's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StaticRequestParts {
    /// Each text, and in a file's place a reference to it, joined by blank lines.
    pub(crate) system_text: String,
    /// Each file in a user content of its own, after a line naming its reference.
    pub(crate) file_contents: Vec<Content>,
}

impl StaticInstruction {
    pub fn new(parts: Vec<StaticPart>) -> Self {
        let texts = parts
            .iter()
            .filter_map(|part| match part {
                StaticPart::Text(text) if !text.is_empty() => Some(text.clone()),
                _ => None,
            })
            .collect();
        let request = request_parts(&parts);
        StaticInstruction { parts, texts, request }
    }

    /// The texts of its parts that are not empty, in order (ADK's model consult forwards
    /// these to the advisor, without the files).
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    pub fn parts(&self) -> &[StaticPart] {
        &self.parts
    }

    /// Whether it holds a file (ADK then opens the request with the files and the instruction).
    pub(crate) fn has_files(&self) -> bool {
        self.parts.iter().any(|part| !matches!(part, StaticPart::Text(_)))
    }

    /// Its parts as ADK's `append_instructions` places them ([`request_parts`]).
    pub(crate) fn request_parts(&self) -> &StaticRequestParts {
        &self.request
    }
}

/// `parts` as ADK's `append_instructions` places them: files are numbered in order
/// (`inline_data_0`, `file_data_1`, …, one count for both kinds); an empty text is left out.
fn request_parts(parts: &[StaticPart]) -> StaticRequestParts {
    let mut texts = Vec::new();
    let mut file_contents = Vec::new();
    for part in parts {
        let named = |name: &Option<String>| name.as_ref().map(|name| format!("'{name}'"));
        let typed = |mime: &String| Some(mime).filter(|m| !m.is_empty()).map(|m| format!("type: {m}"));
        // What the system text calls the file, what its content calls it, the
        // reference's prefix, what describes it, and the file as sent.
        let (reference_says, content_says, prefix, details, sent) = match part {
            StaticPart::Text(text) => {
                if !text.is_empty() {
                    texts.push(text.clone());
                }
                continue;
            }
            StaticPart::InlineData {
                mime_type,
                data,
                display_name,
            } => (
                "inline binary data",
                "inline data",
                "inline_data",
                vec![named(display_name), typed(mime_type)],
                Part::inline_data(mime_type.clone(), data.clone()),
            ),
            StaticPart::FileData {
                mime_type,
                file_uri,
                display_name,
            } => (
                "file data",
                "file data",
                "file_data",
                vec![named(display_name), Some(format!("URI: {file_uri}")), typed(mime_type)],
                Part::file_data(mime_type.clone(), file_uri.clone()),
            ),
        };
        let reference = format!("{prefix}_{}", file_contents.len());
        let details: Vec<String> = details.into_iter().flatten().collect();
        let details = if details.is_empty() {
            String::new()
        } else {
            format!(" ({})", details.join(", "))
        };
        texts.push(format!("[Reference to {reference_says}: {reference}{details}]"));
        file_contents.push(
            Content::new("user")
                .with_text(format!("Referenced {content_says}: {reference}"))
                .with_part(sent),
        );
    }
    StaticRequestParts {
        system_text: texts.join("\n\n"),
        file_contents,
    }
}

impl From<String> for StaticInstruction {
    fn from(text: String) -> Self {
        StaticInstruction::new(vec![StaticPart::Text(text)])
    }
}

impl From<&str> for StaticInstruction {
    fn from(text: &str) -> Self {
        text.to_string().into()
    }
}

impl From<&String> for StaticInstruction {
    fn from(text: &String) -> Self {
        text.clone().into()
    }
}
