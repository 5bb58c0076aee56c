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

/// The examples as one block of system text, word for word as ADK's ExampleTool writes
/// it (its `convert_examples_to_text`: the model was tuned to its markers, the closing
/// `<EXAMPLES>` included).
pub(super) fn render(examples: &[Example]) -> String {
    let mut text = String::from(
        "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model responses using the \
         available tools.\n\n",
    );
    for (i, example) in examples.iter().enumerate() {
        text.push_str(&format!(
            "EXAMPLE {}:\nBegin example\n[user]\n{}\n[model]\n{}\nEnd example\n\n",
            i + 1,
            example.input,
            example.output
        ));
    }
    text.push_str("End few-shot\n<EXAMPLES>");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_written_as_adk_writes_them() {
        let text = render(&[Example::new("2+2?", "4"), Example::new("Capital of France?", "Paris.")]);
        assert_eq!(
            text,
            "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model responses using \
             the available tools.\n\nEXAMPLE 1:\nBegin example\n[user]\n2+2?\n[model]\n4\nEnd example\n\n\
             EXAMPLE 2:\nBegin example\n[user]\nCapital of France?\n[model]\nParis.\nEnd example\n\n\
             End few-shot\n<EXAMPLES>"
        );
    }

    #[test]
    fn an_example_needs_both_halves() {
        assert!(check_examples(&[Example::new("hi", "hello")]).is_ok());
        let e = check_examples(&[Example::new("hi", "hello"), Example::new("hi", " ")]).unwrap_err();
        assert!(e.to_string().contains("examples[1].output"), "{e}");
    }
}
