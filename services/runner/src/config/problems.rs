//! What is wrong with an agents file: every problem, each naming the file, the
//! place (model, tool, app, agent) and the field.

use adk_grpc_core::AdkError;
use std::fmt;

/// One thing wrong with the agents file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where: `app "weather", agent "planner"`, `model "smart"`, `tool "lookup"`;
    /// empty for the file as a whole.
    pub place: String,
    /// The field at fault, when one is.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.place.is_empty() {
            write!(f, "{}: ", self.place)?;
        }
        if let Some(field) = &self.field {
            write!(f, "field {field:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Why an agents file cannot be served: every problem found, each naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub problems: Vec<Problem>,
}

/// One line per problem, each starting with the file name (so editors and
/// terminals can jump to it); several are announced by a count on a line of its own.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.problems.len() > 1 {
            writeln!(f, "{}: {} problems", self.file, self.problems.len())?;
        }
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {problem}", self.file)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub(super) fn whole_file(file: &str, message: String) -> Self {
        ConfigError {
            file: file.to_string(),
            problems: vec![Problem {
                place: String::new(),
                field: None,
                message,
            }],
        }
    }
}

/// The library's configuration errors read "configuration error: …"; the
/// problem's place already says that much.
pub(super) fn library_message(error: &AdkError) -> String {
    match error {
        AdkError::Config(message) => message.clone(),
        other => other.to_string(),
    }
}

/// Collects problems while the file is checked.
pub(super) struct Problems(pub(super) Vec<Problem>);

impl Problems {
    pub(super) fn add(&mut self, place: &str, field: Option<&str>, message: impl Into<String>) {
        self.0.push(Problem {
            place: place.to_string(),
            field: field.map(str::to_string),
            message: message.into(),
        });
    }
}

pub(super) fn names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
