//! Structured output and thoughts end to end: `adk-runner-server` with an agents file
//! whose agents have an `output_schema` and `generation.thinking`, the fake OpenAI and
//! Gemini servers on loopback HTTP, the real `adk-session-server` on one redis-server;
//! what GetSession shows is what the runner stored.

use super::tool_context::state_of;
use adk_grpc_e2e::runs::{self, agents_file, spawn_runner, user_text};
use adk_grpc_e2e::spawn_session_server;
use adk_grpc_models::testing::{FakeServer, gemini, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::RedisServer;
use serde_json::json;
use std::time::Duration;
use tonic_types::StatusExt;

const USER: &str = "alice";

fn sse(mut request: pb::RunRequest) -> pb::RunRequest {
    request.run_config = Some(pb::RunConfig {
        streaming_mode: pb::StreamingMode::Sse as i32,
        max_llm_calls: 0,
        ..Default::default()
    });
    request
}

fn thoughts(event: &pb::Event) -> Vec<String> {
    let parts = event.content.as_ref().map(|c| c.parts.as_slice()).unwrap_or_default();
    parts
        .iter()
        .filter(|p| p.thought == Some(true))
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(text)) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_structured_reply_lands_as_json_under_output_key_and_thoughts_are_stored() {
    let gpt = FakeServer::start().await;
    let gem = FakeServer::start().await;
    let yaml = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}' }}
  gem: {{ provider: gemini, model: gemini-test, base_url: '{}' }}
apps:
  forecast:
    root_agent:
      name: forecaster
      model: gpt
      output_key: forecast
      output_schema:
        type: object
        properties: {{ city: {{ type: string }}, celsius: {{ type: number }} }}
        required: [city, celsius]
        additionalProperties: false
      generation: {{ thinking: {{ effort: low }}, seed: 3 }}
  thinker:
    root_agent:
      name: thinker
      model: gem
      generation: {{ thinking: {{ budget_tokens: 512, include_thoughts: true }} }}
",
        gpt.url(),
        gem.url()
    );
    let redis = RedisServer::start().await;
    let file = agents_file(&yaml);
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let runner_process = spawn_runner(&redis.url(), &file, &[]).await;
    let mut runner = AgentRunnerClient::connect(runner_process.endpoint())
        .await
        .expect("connect");

    // Streamed, with reasoning before the JSON.
    gpt.push(openai::stream(
        vec![
            openai::reasoning_chunk("Oslo in winter."),
            openai::text_chunk("{\"city\": \"Oslo\", "),
            openai::text_chunk("\"celsius\": -4}"),
        ],
        "stop",
    ));
    let request = sse(runs::run_request("forecast", USER, "s1", user_text("Oslo?")));
    let (events, error) = runs::run_to_end(&mut runner, request).await;
    assert!(error.is_none(), "{error:?}\n{}", runner_process.tail_log(30));
    assert!(
        events
            .iter()
            .any(|e| e.partial == Some(true) && thoughts(e) == ["Oslo in winter."])
    );
    let body = gpt.last_request().json();
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["seed"], 3);

    let session = runs::get_session(sessions.endpoint(), "forecast", USER, "s1").await;
    assert_eq!(state_of(&session)["forecast"], json!({"city": "Oslo", "celsius": -4}));
    let reply = session.events.last().unwrap();
    assert_eq!(thoughts(reply), ["Oslo in winter."]);

    // A reply that is not the structure fails the run, and nothing of it is stored.
    gpt.push(openai::text("Cold, probably."));
    let request = runs::run_request("forecast", USER, "s1", user_text("And Rome?"));
    let (_, error) = runs::run_to_end(&mut runner, request).await;
    let status = error.expect("a misfit reply fails the run");
    // A model error: INTERNAL with reason MODEL_ERROR, its message in the server's log.
    assert_eq!(status.code(), tonic::Code::Internal);
    let info = status.get_details_error_info().expect("error info");
    assert_eq!(info.reason, "MODEL_ERROR");
    adk_grpc_testkit::eventually(Duration::from_secs(10), || async {
        let log = runner_process.tail_log(50);
        if log.contains("output_schema") && log.contains("Cold, probably.") {
            Ok(())
        } else {
            Err(format!("the log does not say why yet:\n{log}"))
        }
    })
    .await;
    let after = runs::get_session(sessions.endpoint(), "forecast", USER, "s1").await;
    assert_eq!(after.events.len(), session.events.len() + 1, "only the user's message");
    assert_eq!(state_of(&after)["forecast"], json!({"city": "Oslo", "celsius": -4}));

    // Gemini: thinkingConfig on the wire, the thought stored, and sent back beside the
    // reply (the agent's own turn, as ADK sends it).
    gem.push(gemini::thinking("plan the greeting", "Hi!"));
    let request = runs::run_request("thinker", USER, "t1", user_text("hello"));
    let (_, error) = runs::run_to_end(&mut runner, request).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        gem.last_request().json()["generationConfig"]["thinkingConfig"],
        json!({"thinking_budget": 512, "include_thoughts": true})
    );
    gem.push(gemini::text("Again."));
    let request = runs::run_request("thinker", USER, "t1", user_text("again"));
    let (_, error) = runs::run_to_end(&mut runner, request).await;
    assert!(error.is_none(), "{error:?}");
    let contents = gem.last_request().json()["contents"].to_string();
    assert!(
        contents.contains("plan the greeting") && contents.contains("Hi!"),
        "{contents}"
    );
    let session = runs::get_session(sessions.endpoint(), "thinker", USER, "t1").await;
    let reply = session.events.iter().find(|e| e.author == "thinker").unwrap();
    assert_eq!(thoughts(reply), ["plan the greeting"]);
}
