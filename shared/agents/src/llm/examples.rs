//! Few-shot examples (ADK's `ExampleTool`): pairs of a user message and the reply
//! expected, written into the system instruction of every model request of the
//! agent's turns, after its instructions.

use adk_grpc_core::{AdkError, Result};

/// One example: what a user says and what the agent should answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub input: String,
    pub output: String,
}

impl Example {
    pub fn new(input: impl Into<String>, output: impl Into<String>) -> Self {
        Example {
            input: input.into(),
            output: output.into(),
        }
    }
}

/// The library's rule for examples: each has an input and an output, so the model
/// never reads a half example.
pub fn check_examples(examples: &[Example]) -> Result<()> {
    for (i, example) in examples.iter().enumerate() {
        for (field, text) in [("input", &example.input), ("output", &example.output)] {
            if text.trim().is_empty() {
                return Err(AdkError::Config(format!(
                    "examples[{i}].{field} is empty: an example needs a user message (input) and the reply \
                     expected (output)"
                )));
            }
        }
    }
    Ok(())
}

/// The examples as one block of system text; marked so the model can tell them from
/// the instruction and from the conversation.
pub(super) fn render(examples: &[Example]) -> String {
    let mut text = String::from(
        "<EXAMPLES>\nExamples of user messages and the replies expected; they are not part of this \
         conversation.\n\n",
    );
    for (i, example) in examples.iter().enumerate() {
        text.push_str(&format!(
            "Example {}:\n[user]\n{}\n[model]\n{}\n\n",
            i + 1,
            example.input.trim_end(),
            example.output.trim_end()
        ));
    }
    text.push_str("</EXAMPLES>");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_numbered_pairs_in_one_marked_block() {
        let text = render(&[
            Example::new("2+2?", "4"),
            Example::new("Capital of France?\n", "Paris."),
        ]);
        assert_eq!(
            text,
            "<EXAMPLES>\nExamples of user messages and the replies expected; they are not part of this \
             conversation.\n\nExample 1:\n[user]\n2+2?\n[model]\n4\n\nExample 2:\n[user]\nCapital of \
             France?\n[model]\nParis.\n\n</EXAMPLES>"
        );
    }

    #[test]
    fn an_example_needs_both_halves() {
        assert!(check_examples(&[Example::new("hi", "hello")]).is_ok());
        let e = check_examples(&[Example::new("hi", "hello"), Example::new("hi", " ")]).unwrap_err();
        assert!(e.to_string().contains("examples[1].output"), "{e}");
    }
}
