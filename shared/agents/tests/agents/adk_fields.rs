//! ADK's agent fields built on the library (docs/adk-agent-fields.md): few-shot
//! examples, through the runner to the fake OpenAI server over loopback HTTP.

use crate::common::*;
use adk_grpc_agents::{Example, LlmAgentBuilder};
use adk_grpc_models::testing::{FakeServer, openai};
use std::sync::Arc;

#[tokio::test]
async fn examples_follow_the_instruction_in_every_request_of_the_agent() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("oracle")
        .model(openai(&server))
        .instruction("Answer in one word.")
        .examples([
            Example::new("What is 2+2?", "Four."),
            Example::new("Capital of France?", "Paris."),
        ])
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(openai::text("Oslo."));
    let run = h.say("Capital of Norway?").await.ok();
    assert_eq!(run.texts(), ["Oslo."]);

    let body = server.last_request().json();
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().expect("system text");
    let (instruction, examples) = system.split_once("\n\n").expect("instruction, then examples");
    assert_eq!(instruction, "Answer in one word.");
    assert!(
        examples.starts_with("<EXAMPLES>") && examples.ends_with("</EXAMPLES>"),
        "{system}"
    );
    assert!(
        examples.contains("Example 1:\n[user]\nWhat is 2+2?\n[model]\nFour.\n")
            && examples.contains("Example 2:\n[user]\nCapital of France?\n[model]\nParis.\n"),
        "{system}"
    );
    // The examples are system text, not turns of the conversation.
    let turns: Vec<&str> = messages[1..].iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(turns, ["Capital of Norway?"]);
}

#[test]
fn an_example_without_its_reply_is_refused_by_the_builder() {
    let server_less = Arc::new(adk_grpc_models::MockModel::echo());
    let built = LlmAgentBuilder::new("oracle")
        .model(server_less)
        .examples([Example::new("What is 2+2?", "")])
        .build();
    let error = built.err().expect("refused").to_string();
    assert!(error.contains("agent oracle: examples[0].output is empty"), "{error}");
}
