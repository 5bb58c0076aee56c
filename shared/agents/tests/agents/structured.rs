//! Structured output (`output_schema`), `set_model_response` with tools, and thoughts,
//! through the runner to the fake OpenAI and Gemini servers over loopback HTTP.

use crate::common::*;
use adk_grpc_agents::{FunctionTool, LlmAgentBuilder, RunOptions};
use adk_grpc_core::{Content, Event, Llm, PartKind, RunConfig, StreamingMode};
use adk_grpc_models::testing::{FakeServer, gemini, openai};
use adk_grpc_models::{Gemini, OpenAiCompatible};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tonic::Code;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
    })
}

fn sse() -> RunOptions {
    RunOptions {
        run_config: RunConfig {
            streaming_mode: StreamingMode::Sse,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A Gemini model behind an OpenAI-compatible server (a proxy): it cannot take a reply
/// schema and tools in one request, as ADK's LiteLlm decides for `openai/gemini-…`.
fn gemini_behind_openai(server: &FakeServer) -> Arc<OpenAiCompatible> {
    Arc::new(OpenAiCompatible::new(server.url(), "gemini-2.5-flash").expect("openai client"))
}

fn gemini_model(server: &FakeServer) -> Arc<Gemini> {
    Arc::new(Gemini::new("gemini-test").unwrap().with_base_url(server.url()))
}

fn thought_texts(event: &Event) -> Vec<String> {
    event
        .content()
        .iter()
        .flat_map(|c| &c.parts)
        .filter(|p| p.is_thought())
        .filter_map(|p| match &p.kind {
            PartKind::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_structured_reply_is_stored_as_json_under_output_key_streamed_or_not() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("forecaster")
        .model(openai(&server))
        .output_schema(schema())
        .output_key("forecast")
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    server.push(openai::json_reply(&json!({"city": "Oslo", "celsius": -3})));
    let run = h.say("Oslo?").await.ok();
    assert_eq!(run.texts(), [r#"{"city":"Oslo","celsius":-3}"#]);
    let body = server.last_request().json();
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema());
    assert!(
        body.get("tools").is_none(),
        "no tools, so no set_model_response: {body}"
    );
    assert_eq!(
        h.session().await.state.as_map().get("forecast"),
        Some(&json!({"city": "Oslo", "celsius": -3})),
        "the value, not its text"
    );

    // Streamed: the pieces go out as partials, the whole reply is parsed once.
    server.push(openai::stream_text(&["{\"city\": \"Rome\",", " \"celsius\": 21}"]));
    let run = h.send(Content::new("user").with_text("Rome?"), sse()).await.ok();
    assert_eq!(run.partial().len(), 2);
    assert_eq!(
        h.session().await.state.as_map().get("forecast"),
        Some(&json!({"city": "Rome", "celsius": 21}))
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn gemini_structured_replies_go_through_response_json_schema() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("forecaster")
        .model(gemini_model(&server))
        .output_schema(schema())
        .output_key("forecast")
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(gemini::stream_text(&[
        "```json\n{\"city\": \"Oslo\",",
        " \"celsius\": 1}\n```",
    ]));
    h.send(Content::new("user").with_text("Oslo?"), sse()).await.ok();
    let config = &server.last_request().json()["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["responseJsonSchema"], schema());
    assert_eq!(
        h.session().await.state.as_map().get("forecast"),
        Some(&json!({"city": "Oslo", "celsius": 1})),
        "a code fence around the JSON is taken off, as ADK does"
    );
}

#[tokio::test]
async fn a_reply_that_misses_the_schema_fails_the_run_and_is_not_stored() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("forecaster")
        .model(openai(&server))
        .output_schema(schema())
        .output_key("forecast")
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    for (reply, problem) in [
        (openai::text("It is cold in Oslo."), "not JSON"),
        (openai::json_reply(&json!({"city": "Oslo"})), "celsius"),
    ] {
        server.push(reply);
        let error = h.say("Oslo?").await.error.expect("a misfit reply fails the run");
        assert_eq!(error.code(), Code::Internal, "{error}");
        let message = error.to_string();
        assert!(
            message.contains("output_schema") && message.contains(problem) && message.contains("forecaster"),
            "{message}"
        );
    }
    let session = h.verify_log(&HashMap::new()).await;
    assert!(session.events.iter().all(|e| e.author == "user"), "no reply was stored");
    assert!(!session.state.as_map().contains_key("forecast"));
}

/// A forecaster on `model` with a tool `lookup` and the output schema, its reply stored
/// under `forecast`.
async fn forecaster_with_a_tool(model: Arc<dyn Llm>) -> Harness {
    let lookup = FunctionTool::new("lookup", "Looks a city up.", |_ctx, _args| async {
        Ok(json!({"celsius": 4}))
    });
    let agent = LlmAgentBuilder::new("forecaster")
        .model(model)
        .instruction("Forecast the weather.")
        .tool(Arc::new(lookup))
        .output_schema(schema())
        .output_key("forecast")
        .build()
        .unwrap();
    Harness::new(Arc::new(agent)).await
}

#[tokio::test]
async fn with_tools_the_model_answers_through_set_model_response() {
    let server = FakeServer::start().await;
    let h = forecaster_with_a_tool(gemini_behind_openai(&server)).await;
    server.push(openai::tool_calls(&[("c1", "lookup", json!({"city": "Oslo"}))]));
    // A misfit call is answered with the problem, and the model calls again.
    server.push(openai::tool_calls(&[(
        "c2",
        "set_model_response",
        json!({"city": "Oslo"}),
    )]));
    server.push(openai::tool_calls(&[(
        "c3",
        "set_model_response",
        json!({"city": "Oslo", "celsius": 4}),
    )]));
    let run = h.say("Oslo?").await.ok();

    let requests = server.requests();
    assert_eq!(requests.len(), 3, "no model call after the structured reply");
    let first = requests[0].json();
    assert!(
        first.get("response_format").is_none(),
        "tools and a schema: no provider mode: {first}"
    );
    let tools = first["tools"].as_array().unwrap();
    let set = tools
        .iter()
        .find(|t| t["function"]["name"] == "set_model_response")
        .expect("set_model_response is offered");
    assert_eq!(set["function"]["parameters"], schema());
    assert!(system_prompt(&requests[0]).contains("Forecast the weather."));
    assert!(system_prompt(&requests[0]).contains("set_model_response"));
    let misfit = messages(&requests[2])
        .into_iter()
        .find(|m| m["tool_call_id"] == "c2")
        .expect("the misfit call was answered");
    // ADK's answer: a result with its words around the problems, which name the field.
    let answer: Value = serde_json::from_str(misfit["content"].as_str().unwrap()).unwrap();
    let error = answer["error"].as_str().expect("an error result");
    assert!(error.starts_with("Validation Error found:\n"), "{error}");
    assert!(error.contains("celsius"), "{error}");
    assert!(
        error.ends_with("\nRecall the set_model_response function correctly, fix the errors, and call it again with all required fields using the correct types."),
        "{error}"
    );

    let complete = run.complete();
    let last = complete.last().unwrap();
    assert_eq!(last.author, "forecaster");
    assert_eq!(
        last.content().and_then(Content::text).as_deref(),
        // As ADK writes it: Python's json.dumps of the value, its keys in the model's order.
        Some(r#"{"city": "Oslo", "celsius": 4}"#)
    );
    assert_eq!(
        function_responses(complete[complete.len() - 2])[0].1,
        "set_model_response"
    );
    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(
        session.state.as_map().get("forecast"),
        Some(&json!({"city": "Oslo", "celsius": 4}))
    );
}

/// ADK's rule for a model that takes a reply schema with tools (its LiteLlm's for an
/// OpenAI model): the schema goes as `response_format` beside the tools, and no
/// `set_model_response` is offered or told.
#[tokio::test]
async fn an_openai_model_gets_the_schema_beside_the_tools() {
    let server = FakeServer::start().await;
    let h = forecaster_with_a_tool(openai(&server)).await;
    server.push(openai::json_reply(&json!({"city": "Oslo", "celsius": 4})));
    let run = h.say("Oslo?").await.ok();

    let body = server.last_request().json();
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema());
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(names, ["lookup"]);
    assert!(!system_prompt(&server.last_request()).contains("set_model_response"));
    assert_eq!(run.texts(), [r#"{"city":"Oslo","celsius":4}"#]);
    assert_eq!(
        h.session().await.state.as_map().get("forecast"),
        Some(&json!({"city": "Oslo", "celsius": 4}))
    );
}

#[tokio::test]
async fn thoughts_are_stored_streamed_and_sent_back_beside_the_reply() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("thinker")
        .model(gemini_model(&server))
        .output_key("answer")
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(gemini::stream(vec![
        gemini::response(vec![gemini::thought_part("secret plan")], None),
        gemini::response(vec![json!({"text": "Hello."})], Some("STOP")),
    ]));
    let run = h.send(Content::new("user").with_text("hi"), sse()).await.ok();
    assert_eq!(
        thought_texts(run.partial()[0]),
        ["secret plan"],
        "the thought is streamed"
    );
    let reply = run.complete()[0].clone();
    assert_eq!(thought_texts(&reply), ["secret plan"], "and stored with thought=true");
    assert_eq!(reply.content().and_then(Content::text).as_deref(), Some("Hello."));
    assert_eq!(
        h.session().await.state.as_map().get("answer"),
        Some(&json!("Hello.")),
        "thoughts are not the output"
    );

    // The next turn's request carries the agent's own turn whole, as ADK sends it: the
    // thought beside the answer (a turn of thoughts alone would be left out).
    server.push(gemini::text("Again."));
    h.say("more").await.ok();
    let body = server.last_request().json();
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "secret plan", "thought": true}, {"text": "Hello."}]),
        "{body}"
    );
    let session = h.verify_log(&HashMap::new()).await;
    let stored = session.events.iter().find(|e| e.author == "thinker").unwrap();
    assert_eq!(thought_texts(stored), ["secret plan"]);
}

#[tokio::test]
async fn openai_reasoning_is_stored_as_thoughts_and_sent_back_as_reasoning_content() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("thinker").model(openai(&server)).build().unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(openai::reasoning("private chain", "Public answer."));
    let run = h.say("q1").await.ok();
    assert_eq!(thought_texts(run.complete()[0]), ["private chain"]);
    server.push(openai::text("ok"));
    h.say("q2").await.ok();
    // ADK's LiteLlm sends a turn's thoughts as the assistant message's reasoning_content.
    let sent = messages(&server.last_request());
    let assistant = sent.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], "Public answer.");
    assert_eq!(assistant["reasoning_content"], "private chain", "{sent:?}");
}

#[tokio::test]
async fn schemas_are_checked_when_the_agent_is_built_and_input_schema_is_kept() {
    let server = FakeServer::start().await;
    let error = LlmAgentBuilder::new("a")
        .model(openai(&server))
        .output_schema(json!({"type": 7}))
        .build()
        .err()
        .unwrap();
    assert!(error.to_string().contains("output_schema"), "{error}");
    let error = LlmAgentBuilder::new("a")
        .model(openai(&server))
        .input_schema(json!({"type": "string"}))
        .build()
        .err()
        .unwrap();
    assert!(error.to_string().contains("input_schema"), "{error}");
    let args = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let agent = LlmAgentBuilder::new("a")
        .model(openai(&server))
        .input_schema(args.clone())
        .output_schema(schema())
        .build()
        .unwrap();
    assert_eq!(agent.input_schema(), Some(&args));
    assert_eq!(agent.output_schema(), Some(&schema()));
}
