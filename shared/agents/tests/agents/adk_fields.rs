//! ADK's agent fields built on the library (docs/adk-agent-fields.md): few-shot
//! examples and an agent's timeout, through the runner to the fake OpenAI server
//! over loopback HTTP.

use crate::common::*;
use adk_grpc_agents::{Example, LlmAgentBuilder, RetryConfig, SequentialAgent, with_timeout};
use adk_grpc_core::AdkError;
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    // ADK's order: the instruction, who the agent is, then the examples block.
    let (instruction, examples) = system.split_once("\n\n<EXAMPLES>").expect("instruction, then examples");
    assert_eq!(
        instruction,
        "Answer in one word.\n\nYou are an agent. Your internal name is \"oracle\"."
    );
    assert!(examples.ends_with("End few-shot\n<EXAMPLES>"), "{system}");
    assert!(
        examples.contains("EXAMPLE 1:\nBegin example\n[user]\nWhat is 2+2?\n[model]\nFour.\nEnd example\n")
            && examples.contains("EXAMPLE 2:\nBegin example\n[user]\nCapital of France?\n[model]\nParis.\n"),
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

#[tokio::test]
async fn an_agent_past_its_timeout_is_stopped_and_the_run_fails_naming_it() {
    let server = FakeServer::start().await;
    let greeter = LlmAgentBuilder::new("greeter").model(openai(&server)).build().unwrap();
    let slow = LlmAgentBuilder::new("slow").model(openai(&server)).build().unwrap();
    let timed = with_timeout(Arc::new(slow), Duration::from_millis(300));
    let root = SequentialAgent::new("steps", vec![Arc::new(greeter), timed]);
    let h = Harness::new(Arc::new(root)).await;
    server.push(openai::text("Hello."));
    server.push(FakeReply::from(openai::text("Too late.")).delayed(Duration::from_secs(30)));

    let started = Instant::now();
    let run = h.say("Hi").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "not waited for: {:?}",
        started.elapsed()
    );
    match &run.error {
        Some(AdkError::DeadlineExceeded(message)) => {
            assert!(message.contains("agent slow") && message.contains("0.3s"), "{message}")
        }
        other => panic!("expected DEADLINE_EXCEEDED, got {other:?}"),
    }
    // The model request was dropped with the agent; what came before it is stored.
    assert!(server.wait_for_disconnects(1, Duration::from_secs(10)).await);
    assert_eq!(run.texts(), ["Hello."]);
    let stored: Vec<String> = h
        .session()
        .await
        .events
        .iter()
        .filter_map(|e| e.content().and_then(adk_grpc_core::Content::text))
        .collect();
    assert_eq!(stored, ["Hi", "Hello."]);

    // Within its time the agent runs as without a timeout.
    server.push(openai::text("Hello again."));
    server.push(openai::text("On time."));
    let run = h.say("Hi").await.ok();
    assert_eq!(run.texts(), ["Hello again.", "On time."]);
}

#[tokio::test]
async fn retry_config_makes_a_transiently_failed_model_call_again() {
    let server = FakeServer::start().await;
    let retry = RetryConfig {
        max_attempts: 3,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
        backoff_factor: 2.0,
        jitter: false,
    };
    let agent = LlmAgentBuilder::new("patient")
        .model(openai(&server))
        .retry_config(retry.clone())
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(FakeReply::status(503, "maintenance"));
    server.push(FakeReply::status(429, openai::error("Rate limit reached", "requests")));
    server.push(openai::text("Back."));
    let run = h.say("Hello?").await.ok();
    assert_eq!(run.texts(), ["Back."]);
    assert_eq!(server.requests().len(), 3, "two failures, then the reply");

    // Out of attempts, the last failure stands; a failure that is not transient is not retried.
    server.push(FakeReply::status(503, "down"));
    server.push(FakeReply::status(503, "still down"));
    server.push(FakeReply::status(503, "and down"));
    let failed = h.say("Again?").await;
    assert_eq!(
        failed.error.as_ref().map(AdkError::code),
        Some(tonic::Code::Unavailable)
    );
    assert_eq!(server.requests().len(), 6);
    server.push(FakeReply::status(
        400,
        openai::error("bad request", "invalid_request_error"),
    ));
    let refused = h.say("Once more?").await;
    assert!(refused.error.is_some());
    assert_eq!(server.requests().len(), 7, "a bad request is not made again");
}

#[tokio::test]
async fn log_probabilities_a_server_returns_are_stored_on_the_replys_event() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("oracle")
        .model(openai(&server))
        .generate_content_config(adk_grpc_core::GenerateContentConfig {
            response_logprobs: Some(true),
            logprobs: Some(1),
            ..Default::default()
        })
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let mut reply = openai::text("Oslo.");
    reply["choices"][0]["logprobs"] = serde_json::json!({"content": [
        {"token": "Oslo", "logprob": -0.5, "top_logprobs": [{"token": "Oslo", "logprob": -0.5}]},
        {"token": ".", "logprob": -0.25, "top_logprobs": [{"token": ".", "logprob": -0.25}]},
    ]});
    server.push(reply);
    h.say("Capital of Norway?").await.ok();
    let body = server.last_request().json();
    // Not asked for on this wire, as ADK's LiteLlm does not ask (docs/adk-conformance.md).
    assert!(
        body.get("logprobs").is_none() && body.get("top_logprobs").is_none(),
        "{body}"
    );
    let session = h.session().await;
    let stored = session.events().as_slice().last().expect("the reply's event");
    assert_eq!(stored.llm_response.avg_logprobs, Some(-0.375));
    let result = stored.llm_response.logprobs_result.as_ref().expect("logprobs_result");
    assert_eq!(
        result["chosen_candidates"][1],
        serde_json::json!({"token": ".", "log_probability": -0.25})
    );
    assert_eq!(result["top_candidates"].as_array().map(Vec::len), Some(2));
}
