//! Provider failures, cancellation and HTTP tools, over real loopback HTTP.

use crate::common::*;
use adk_grpc_agents::{HttpTool, LlmAgentBuilder, RunOptions};
use adk_grpc_core::{Content, ModalityTokenCount, RunConfig, StreamingMode};
use adk_grpc_models::testing::{FakeReply, FakeServer, SseEnd, SseScript, SseStep, gemini, openai};
use adk_grpc_models::{Gemini, OpenAiCompatible};
use futures::StreamExt;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

fn sse() -> RunOptions {
    RunOptions {
        run_config: RunConfig {
            streaming_mode: StreamingMode::Sse,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn provider_failures_end_the_stream_with_an_error_that_says_so() {
    let server = FakeServer::start().await;
    let model = OpenAiCompatible::new(server.url(), "fake-model")
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let agent = LlmAgentBuilder::new("assistant")
        .model(Arc::new(model))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    server.push(
        FakeReply::status(429, openai::error("Rate limit reached for requests", "requests"))
            .with_header("retry-after", "7"),
    );
    let error = h.say("one").await.error.expect("429 fails the run");
    assert_eq!(error.code(), Code::ResourceExhausted);
    assert!(
        error.to_string().contains("rate limit") && error.to_string().contains("retry after 7s"),
        "{error}"
    );

    server.push(FakeReply::status(
        500,
        openai::error("The server had an error", "server_error"),
    ));
    let error = h.say("two").await.error.expect("500 fails the run");
    assert_eq!(error.code(), Code::Unavailable);
    assert!(error.to_string().contains("500"), "{error}");

    server.push(FakeReply::Stall);
    let error = h.say("three").await.error.expect("a silent provider fails the run");
    assert_eq!(error.code(), Code::DeadlineExceeded);

    // A stream cut in the middle is an error too, after the chunks that did arrive.
    server.push(SseScript::data([openai::role_chunk(), openai::text_chunk("Hal")]).ending(SseEnd::Cut));
    let run = h.send(Content::new("user").with_text("four"), sse()).await;
    assert_eq!(run.partial().len(), 1);
    assert!(run.error.is_some());

    // Nothing but the user's messages was stored, and the session is free again.
    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(session.events.len(), 4);
    server.push(openai::text("fine now"));
    assert_eq!(h.say("five").await.ok().texts(), ["fine now"]);
}

#[tokio::test]
async fn dropping_the_run_stream_cancels_the_provider_request_and_frees_the_session() {
    let server = FakeServer::start().await;
    server.push(SseScript::data([openai::role_chunk(), openai::text_chunk("Hel")]).ending(SseEnd::Hang));
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let mut stream = h
        .runner
        .run(USER, SESSION, Content::new("user").with_text("hi"), sse())
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.is_partial());
    drop(stream);
    assert!(
        server.wait_for_disconnects(1, Duration::from_secs(5)).await,
        "the provider saw the client leave"
    );

    // The lease is released by the dropped run; the next one proceeds.
    server.push(openai::text("back"));
    let run = adk_grpc_testkit::eventually(Duration::from_secs(5), || async {
        let run = h.say("again").await;
        match &run.error {
            Some(e) if e.code() == Code::Aborted => Err(format!("still busy: {e}")),
            _ => Ok(run),
        }
    })
    .await;
    assert_eq!(run.ok().texts(), ["back"]);
}

#[tokio::test]
async fn cancel_stops_a_running_invocation() {
    let server = FakeServer::start().await;
    server.push(
        SseScript::data([openai::role_chunk(), openai::text_chunk("thinking")])
            .then(SseStep::Pause(Duration::from_secs(30)))
            .ending(SseEnd::Close),
    );
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let mut stream = h
        .runner
        .run(USER, SESSION, Content::new("user").with_text("hi"), sse())
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(
        !h.runner
            .cancel("someone-else", SESSION, &first.invocation_id)
            .await
            .unwrap(),
        "another user's cancel is refused"
    );
    assert!(
        !h.runner
            .cancel(USER, "other-session", &first.invocation_id)
            .await
            .unwrap()
    );
    assert!(h.runner.cancel(USER, SESSION, &first.invocation_id).await.unwrap());
    let error = stream.next().await.unwrap().unwrap_err();
    assert_eq!(error.code(), Code::Cancelled);
    assert!(error.to_string().contains(&first.invocation_id));
    assert!(stream.next().await.is_none());
    assert!(
        !h.runner.cancel(USER, SESSION, &first.invocation_id).await.unwrap(),
        "no longer running"
    );
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)).await);
    // Cancelled runs release their lease before their stream ends.
    server.push(openai::text("next"));
    assert_eq!(h.say("next").await.ok().texts(), ["next"]);
}

#[tokio::test]
async fn gemini_calls_get_adk_ids_and_stream_text() {
    let server = FakeServer::start().await;
    server.push(gemini::stream(vec![gemini::function_calls(&[(
        "lookup",
        json!({"q": "rust"}),
    )])]));
    server.push(gemini::stream_text(&["Rust ", "is ", "fast."]));
    let lookup = adk_grpc_agents::FunctionTool::new("lookup", "Looks up.", |_ctx, args| async move {
        Ok(json!({"found": args["q"]}))
    });
    let model = Gemini::new("gemini-fake").unwrap().with_base_url(server.url());
    let agent = LlmAgentBuilder::new("assistant")
        .model(Arc::new(model))
        .tool(Arc::new(lookup))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.send(Content::new("user").with_text("about rust"), sse()).await.ok();
    let complete = run.complete();
    let (id, name, _) = function_calls(complete[0]).remove(0);
    assert!(id.starts_with("adk-") && id.len() > 10, "{id}");
    assert_eq!(name, "lookup");
    assert_eq!(
        function_responses(complete[1])[0].0,
        id,
        "the response answers the same id"
    );
    // Stored as ADK stores it, and sent to Gemini as a user turn.
    assert_eq!(complete[1].content().unwrap().role, "user");
    let contents = server.last_request().json()["contents"].clone();
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(contents[2]["parts"][0]["functionResponse"]["name"], "lookup");
    assert_eq!(run.partial().len(), 3);
    assert_eq!(run.texts().last().unwrap(), "Rust is fast.");
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn gemini_usage_details_and_model_version_are_stored() {
    let server = FakeServer::start().await;
    let mut reply = gemini::text("Hi.");
    reply["modelVersion"] = json!("gemini-2.5-flash-001");
    reply["usageMetadata"] = json!({
        "promptTokenCount": 7, "candidatesTokenCount": 2, "totalTokenCount": 9,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 7}],
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 2}],
        "trafficType": "ON_DEMAND"
    });
    server.push(reply);
    let model = Gemini::new("gemini-fake").unwrap().with_base_url(server.url());
    let agent = LlmAgentBuilder::new("assistant")
        .model(Arc::new(model))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    h.say("hello").await.ok();

    let stored = h.session().await;
    let reply = &stored.events.iter().last().expect("the reply").llm_response;
    assert_eq!(reply.model_version.as_deref(), Some("gemini-2.5-flash-001"));
    let usage = reply.usage_metadata.clone().expect("usage");
    let modality = |tokens| ModalityTokenCount {
        modality: Some("TEXT".into()),
        token_count: Some(tokens),
    };
    assert_eq!(usage.prompt_tokens_details, [modality(7)]);
    assert_eq!(usage.candidates_tokens_details, [modality(2)]);
    assert_eq!(usage.traffic_type.as_deref(), Some("ON_DEMAND"));
}

#[tokio::test]
async fn google_search_is_named_to_gemini_and_its_grounding_is_stored() {
    let server = FakeServer::start().await;
    server.push(json!({
        "candidates": [{
            "content": { "role": "model", "parts": [{ "text": "Sunny, says the news." }] },
            "finishReason": "STOP",
            "groundingMetadata": { "webSearchQueries": ["weather tokyo"] }
        }]
    }));
    let model = Gemini::new("gemini-fake").unwrap().with_base_url(server.url());
    let agent = LlmAgentBuilder::new("assistant")
        .model(Arc::new(model))
        .tool(adk_grpc_agents::builtin_tool("google_search").expect("a built-in"))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let run = h.say("Weather in Tokyo?").await.ok();

    // Named as Gemini's own tool, not declared as a function.
    assert_eq!(server.last_request().json()["tools"], json!([{ "googleSearch": {} }]));
    let reply = run.complete().last().copied().expect("a reply").clone();
    assert_eq!(run.texts(), ["Sunny, says the news."]);
    let grounding = reply
        .llm_response
        .grounding_metadata
        .clone()
        .expect("grounding metadata");
    assert_eq!(grounding["webSearchQueries"], json!(["weather tokyo"]));
    let stored = h.session().await;
    assert_eq!(
        stored
            .events
            .iter()
            .last()
            .and_then(|e| e.llm_response.grounding_metadata.clone()),
        Some(grounding)
    );
}

#[tokio::test]
async fn http_tools_post_the_arguments_and_failures_reach_the_model() {
    let model_server = FakeServer::start().await;
    let tool_server = FakeServer::start().await;
    let tool = HttpTool::new("weather", "Weather service.", &format!("{}/weather", tool_server.url()))
        .unwrap()
        .with_header("x-api-key", "secret")
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&model_server))
        .tool(Arc::new(tool))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let mut answers = Vec::new();
    for reply in [
        FakeReply::json(json!({"temp_c": 21})),
        FakeReply::status(503, "maintenance"),
        FakeReply::Stall,
    ] {
        tool_server.push(reply);
        model_server.push(openai::tool_calls(&[("w", "weather", json!({"city": "Oslo"}))]));
        model_server.push(openai::text("ok"));
        let run = h.say("weather?").await.ok();
        answers.push(function_responses(run.complete()[1])[0].2.clone());
    }
    assert_eq!(answers[0], json!({"temp_c": 21}));
    assert!(answers[1]["error"].as_str().unwrap().contains("503"), "{}", answers[1]);
    assert!(
        answers[2]["error"].as_str().unwrap().contains("timed out"),
        "{}",
        answers[2]
    );
    let sent = &tool_server.requests()[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/weather"));
    assert_eq!(sent.json(), json!({"city": "Oslo"}));
    assert_eq!(sent.header("x-api-key"), Some("secret"));
    h.verify_log(&HashMap::new()).await;
}
