//! `state_schema` (ADK's): what an agent's events may write to the state, checked
//! before anything is stored, through the runner to the fake OpenAI server.

use crate::common::*;
use adk_grpc_agents::{FunctionTool, LlmAgentBuilder, StateSchema};
use adk_grpc_core::ToolContext;
use adk_grpc_models::testing::{FakeServer, openai};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

fn schema() -> Arc<StateSchema> {
    Arc::new(
        StateSchema::new(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "visits": {"type": "integer", "minimum": 0},
                "summary": {"type": "string", "maxLength": 20},
            },
            "required": ["city"],
        }))
        .unwrap(),
    )
}

/// A tool writing its arguments' `state` object to the state.
fn remember() -> FunctionTool {
    FunctionTool::new(
        "remember",
        "Writes to the state.",
        |ctx: Arc<dyn ToolContext>, args: Value| async move {
            let mut actions = ctx.actions();
            for (key, value) in args["state"].as_object().cloned().unwrap_or_default() {
                actions.state_delta.insert(key, value);
            }
            ctx.set_actions(actions);
            Ok(json!({"written": true}))
        },
    )
}

/// The error the model was sent for call `id`, from the last request's tool message.
fn tool_message(server: &FakeServer, id: &str) -> String {
    messages(&server.last_request())
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("no tool message for {id}"))
}

#[tokio::test]
async fn a_tool_write_that_misses_the_schema_is_an_error_the_model_reads_and_nothing_is_written() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("guide")
        .model(openai(&server))
        .tool(Arc::new(remember()))
        .state_schema(schema())
        .build()
        .unwrap();
    assert_eq!(agent.state_schema().unwrap()["required"], json!(["city"]));
    let h = Harness::new(Arc::new(agent)).await;

    server.push(openai::tool_calls(&[(
        "c1",
        "remember",
        json!({"state": {"visits": "many", "user:note": 7}}),
    )]));
    server.push(openai::text("I could not note that."));
    let run = h.say("note it").await.ok();
    assert_eq!(run.texts(), ["I could not note that."]);
    let error = tool_message(&server, "c1");
    assert!(
        error.contains("state_delta") && error.contains("remember") && error.contains("/visits"),
        "{error}"
    );
    let state = h.session().await.state.as_map().clone();
    assert!(
        !state.contains_key("visits") && !state.contains_key("user:note"),
        "{state:?}"
    );

    // An undeclared key is refused; declared keys that fit, and any key with a `:`, are written.
    server.push(openai::tool_calls(&[(
        "c2",
        "remember",
        json!({"state": {"colour": "red"}}),
    )]));
    server.push(openai::tool_calls(&[(
        "c3",
        "remember",
        json!({"state": {"city": "Oslo", "visits": 2, "user:note": [1]}}),
    )]));
    server.push(openai::text("Noted."));
    h.say("note it again").await.ok();
    let refused = messages(&server.requests()[3])
        .into_iter()
        .find(|m| m["tool_call_id"] == "c2")
        .unwrap();
    assert!(refused["content"].as_str().unwrap().contains("colour"), "{refused}");
    assert_eq!(tool_message(&server, "c3"), r#"{"written": true}"#);
    let state = h.session().await.state.as_map().clone();
    assert_eq!(state.get("city"), Some(&json!("Oslo")));
    assert_eq!(state.get("visits"), Some(&json!(2)));
    assert_eq!(state.get("user:note"), Some(&json!([1])));
    assert!(!state.contains_key("colour"));
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn an_output_key_write_that_misses_the_schema_fails_the_run_and_is_not_stored() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("guide")
        .model(openai(&server))
        .output_key("summary")
        .state_schema(schema())
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    server.push(openai::text("far too long a summary to fit"));
    let error = h.say("sum up").await.error.expect("a misfit write fails the run");
    assert_eq!(
        error.code(),
        tonic::Code::FailedPrecondition,
        "the message reaches the client"
    );
    let message = error.to_string();
    assert!(
        message.contains("guide") && message.contains("state_schema") && message.contains("/summary"),
        "{message}"
    );
    let session = h.session().await;
    assert!(
        session.events.iter().all(|e| e.author == "user"),
        "the reply was not stored"
    );
    assert!(!session.state.as_map().contains_key("summary"));

    server.push(openai::text("short"));
    h.say("again").await.ok();
    assert_eq!(h.session().await.state.as_map().get("summary"), Some(&json!("short")));
}
