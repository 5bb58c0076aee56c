//! LLM and workflow agents run by the Runner against the fake OpenAI-compatible
//! server over real HTTP (and a scripted model where the model is not the point).

use crate::common::*;
use adk_grpc_agents::{
    AgentTool, BeforeModel, BeforeTool, Callback, ClientTool, ExitLoopTool, FunctionTool, Hook, Hooks, IncludeContents,
    LlmAgentBuilder, LoadArtifactsTool, LoopAgent, ParallelAgent, RunOptions, SequentialAgent, StaticInstruction,
    StaticPart, with_agent_hooks,
};
use adk_grpc_core::{
    AdkError, Content, FunctionResponseData, LlmResponse, Part, RunConfig, StreamingMode, ToolContext,
};
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
async fn a_streamed_text_turn_is_partial_events_then_one_stored_event() {
    let server = FakeServer::start().await;
    server.push(openai::stream_text(&["Hel", "lo ", "there"]));
    server.push(openai::text("Plain reply"));
    let agent = LlmAgentBuilder::new("assistant")
        .instruction("Be brief.")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.send(Content::new("user").with_text("Hi"), sse()).await.ok();
    let partial_texts: Vec<String> = run
        .partial()
        .iter()
        .filter_map(|e| e.content().and_then(Content::text))
        .collect();
    assert_eq!(partial_texts, ["Hel", "lo ", "there"]);
    assert_eq!(run.texts(), ["Hello there"]);
    let last = run.events.last().unwrap();
    assert!(!last.is_partial() && last.is_final_response());
    assert_eq!(last.author, "assistant");
    assert!(last.invocation_id.starts_with("e-"));
    assert!(run.events.iter().all(|e| e.invocation_id == last.invocation_id));
    let request = server.last_request().json();
    assert_eq!(request["stream"], true);
    assert_eq!(
        request["messages"][0],
        json!({"role": "system", "content": "Be brief.\n\nYou are an agent. Your internal name is \"assistant\"."})
    );
    assert_eq!(request["messages"][1], json!({"role": "user", "content": "Hi"}));

    // Without streaming: one complete event, no partial ones.
    let run = h.say("Again").await.ok();
    assert_eq!(run.events.len(), 1);
    assert_eq!(run.texts(), ["Plain reply"]);
    assert_ne!(server.last_request().json()["stream"], json!(true));
    // The second request carries the whole conversation.
    let texts: Vec<Value> = messages(&server.last_request())
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(texts[1..], [json!("Hi"), json!("Hello there"), json!("Again")]);

    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(session.events.len(), 4);
}

fn weather_tool(seen: Arc<Mutex<Vec<Value>>>) -> Arc<FunctionTool> {
    Arc::new(
        FunctionTool::new(
            "get_weather",
            "Weather in a city.",
            move |ctx: Arc<dyn ToolContext>, args| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(args.clone());
                    ctx.set_state("last_city", args["city"].clone());
                    Ok(json!({"city": args["city"], "sky": "sunny"}))
                }
            },
        )
        .with_parameters_schema(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

#[tokio::test]
async fn a_tool_call_round_trip_feeds_the_result_back_to_the_model() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_1", "get_weather", json!({"city": "Paris"})),
        ("call_2", "broken", json!({})),
        ("call_3", "no_such_tool", json!({})),
    ]));
    server.push(openai::text("Sunny in Paris."));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let broken = FunctionTool::new("broken", "Always fails.", |_ctx, _args| async {
        Err(AdkError::Tool("the backend is down".into()))
    });
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&server))
        .tool(weather_tool(seen.clone()))
        .tool(Arc::new(broken))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.say("Weather in Paris?").await.ok();
    let events = run.complete();
    assert_eq!(events.len(), 3, "call, responses, answer");
    let calls = function_calls(events[0]);
    assert_eq!(
        calls[0],
        ("call_1".into(), "get_weather".into(), json!({"city": "Paris"}))
    );
    let responses = function_responses(events[1]);
    assert_eq!(events[1].author, "assistant");
    // Stored with role "user", as ADK stores function responses.
    assert_eq!(events[1].content().unwrap().role, "user");
    assert_eq!(
        responses[0],
        (
            "call_1".into(),
            "get_weather".into(),
            json!({"city": "Paris", "sky": "sunny"})
        )
    );
    assert_eq!(responses[1].0, "call_2");
    assert!(
        responses[1].2["error"]
            .as_str()
            .unwrap()
            .contains("the backend is down")
    );
    assert!(responses[2].2["error"].as_str().unwrap().contains("no_such_tool"));
    assert_eq!(
        events[1].actions.state_delta,
        HashMap::from([("last_city".into(), json!("Paris"))])
    );
    assert_eq!(run.texts().last().unwrap(), "Sunny in Paris.");
    assert_eq!(*seen.lock().unwrap(), [json!({"city": "Paris"})]);

    // The tools were declared, and the model saw every result, errors included.
    let first = server.requests()[0].json();
    let declared: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, ["get_weather", "broken"]);
    let second = messages(&server.last_request());
    let tool_messages: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 3);
    assert_eq!(tool_messages[0]["tool_call_id"], "call_1");
    assert!(
        tool_messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("the backend is down")
    );

    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(session.state.as_map().get("last_city"), Some(&json!("Paris")));
}

#[tokio::test]
async fn streamed_tool_call_deltas_are_assembled_and_executed() {
    let server = FakeServer::start().await;
    server.push(openai::stream(
        vec![
            openai::tool_call_chunk(0, Some("call_9"), Some("add"), "{\"a\": "),
            openai::tool_call_chunk(0, None, None, "2, \"b\""),
            openai::tool_call_chunk(0, None, None, ": 3}"),
        ],
        "tool_calls",
    ));
    server.push(openai::stream_text(&["5"]));
    let add = FunctionTool::new("add", "Adds a and b.", |_ctx, args| async move {
        let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
        Ok(json!({"sum": sum}))
    });
    let agent = LlmAgentBuilder::new("calc")
        .model(openai(&server))
        .tool(Arc::new(add))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.send(Content::new("user").with_text("2+3?"), sse()).await.ok();
    let events = run.complete();
    assert_eq!(
        function_calls(events[0]),
        [("call_9".into(), "add".into(), json!({"a": 2, "b": 3}))]
    );
    assert_eq!(function_responses(events[1])[0].2, json!({"sum": 5}));
    assert_eq!(run.texts().last().unwrap(), "5");
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn transfer_hands_the_invocation_to_a_sub_agent() {
    let router_server = FakeServer::start().await;
    let billing_server = FakeServer::start().await;
    router_server.push(openai::tool_calls(&[(
        "t1",
        "transfer_to_agent",
        json!({"agent_name": "nobody"}),
    )]));
    router_server.push(openai::tool_calls(&[(
        "t2",
        "transfer_to_agent",
        json!({"agent_name": "billing"}),
    )]));
    billing_server.push(openai::text("Billing here: your invoice is paid."));
    let h = Harness::new(router_with_billing(
        &router_server,
        &billing_server,
        "Invoices and payments",
    ))
    .await;

    let run = h.say("Is my invoice paid?").await.ok();
    let events = run.complete();
    let authors: Vec<&str> = events.iter().map(|e| e.author.as_str()).collect();
    assert_eq!(authors, ["router", "router", "router", "router", "billing"]);
    // An unknown target is an error the model reads, not a failed run.
    assert!(
        function_responses(events[1])[0].2["error"]
            .as_str()
            .unwrap()
            .contains("no agent `nobody`")
    );
    assert_eq!(events[1].actions.transfer_to_agent, None);
    assert_eq!(events[3].actions.transfer_to_agent.as_deref(), Some("billing"));
    // ADK's transfer_to_agent returns None: its answer is stored as {"result": null}.
    assert_eq!(
        function_responses(events[3]),
        [("t2".into(), "transfer_to_agent".into(), json!({"result": null}))]
    );
    assert_eq!(events[3].content().unwrap().role, "user");
    assert_eq!(run.texts().last().unwrap(), "Billing here: your invoice is paid.");

    // The router was offered the transfer tool and told whom it can reach.
    let first = router_server.requests()[0].json();
    assert_eq!(first["tools"][0]["function"]["name"], "transfer_to_agent");
    assert!(system_prompt(&router_server.requests()[0]).contains("Agent name: billing"));
    // Billing sees the user's question and the router's turns as context, and may hand
    // the turn back to its parent (ADK's default).
    let billing_messages = messages(&billing_server.last_request());
    assert!(system_prompt(&billing_server.last_request()).contains("Agent name: router"));
    assert_eq!(
        billing_messages[1],
        json!({"role": "user", "content": "Is my invoice paid?"})
    );
    // Retold as ADK retells it: the preamble, then each call, each its own text part.
    assert!(billing_messages.iter().any(|m| {
        m["content"].as_array().into_iter().flatten().any(|item| {
            item["text"]
                .as_str()
                .is_some_and(|c| c.contains("[router] called tool `transfer_to_agent`"))
        })
    }));
    h.verify_log(&HashMap::new()).await;
}

/// A router on `router_server` with one sub-agent, billing (described as `billing_does`),
/// on `billing_server`.
fn router_with_billing(
    router_server: &FakeServer,
    billing_server: &FakeServer,
    billing_does: &str,
) -> Arc<dyn adk_grpc_core::Agent> {
    let billing = LlmAgentBuilder::new("billing")
        .description(billing_does)
        .model(openai(billing_server))
        .build()
        .unwrap();
    Arc::new(
        LlmAgentBuilder::new("router")
            .model(openai(router_server))
            .sub_agents([Arc::new(billing) as _])
            .build()
            .unwrap(),
    )
}

/// The names `transfer_to_agent` offers in the last request to `server`.
fn offered_targets(server: &FakeServer) -> Vec<String> {
    let request = server.last_request().json();
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let transfer = tools
        .iter()
        .find(|t| t["function"]["name"] == "transfer_to_agent")
        .map(|t| t["function"]["parameters"]["properties"]["agent_name"]["enum"].clone());
    serde_json::from_value(transfer.unwrap_or(json!([]))).unwrap()
}

#[tokio::test]
async fn transfers_reach_parent_and_peers_by_default_and_the_agent_that_replied_keeps_the_conversation() {
    let router_server = FakeServer::start().await;
    let billing_server = FakeServer::start().await;
    let support_server = FakeServer::start().await;
    let billing = LlmAgentBuilder::new("billing")
        .description("Invoices")
        .model(openai(&billing_server))
        .build()
        .unwrap();
    let support = LlmAgentBuilder::new("support")
        .description("Everything else")
        .model(openai(&support_server))
        .disallow_transfer_to_parent(true)
        .disallow_transfer_to_peers(true)
        .build()
        .unwrap();
    let router = LlmAgentBuilder::new("router")
        .model(openai(&router_server))
        .global_instruction("Company policy for {user:name?}.")
        .sub_agents([Arc::new(billing) as _, Arc::new(support) as _])
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(router)).await;

    // Turn 1: the router hands over to billing, which answers.
    router_server.push(openai::tool_calls(&[(
        "t1",
        "transfer_to_agent",
        json!({"agent_name": "billing"}),
    )]));
    billing_server.push(openai::text("Paid."));
    h.say("Is my invoice paid?").await.ok();
    assert_eq!(offered_targets(&router_server), ["billing", "support"]);
    assert_eq!(offered_targets(&billing_server), ["router", "support"]);
    // The root's global instruction comes first in every agent's system text.
    assert!(system_prompt(&billing_server.last_request()).starts_with("Company policy for ."));

    // Turn 2 goes straight to billing (it replied last and can hand back); it hands over
    // to its peer.
    billing_server.push(openai::tool_calls(&[(
        "t2",
        "transfer_to_agent",
        json!({"agent_name": "support"}),
    )]));
    support_server.push(openai::text("Support here."));
    let run = h.say("And my password?").await.ok();
    let authors: Vec<&str> = run.complete().iter().map(|e| e.author.as_str()).collect();
    assert_eq!(authors, ["billing", "billing", "support"]);
    assert_eq!(router_server.requests().len(), 1, "the router was not asked again");
    // Support may not transfer at all: no transfer tool.
    assert!(offered_targets(&support_server).is_empty());

    // Turn 3: support may not hand back, so the conversation returns to the newest agent
    // before it that can (ADK's find_agent_to_run): billing.
    billing_server.push(openai::text("Billing again."));
    let run = h.say("Thanks").await.ok();
    assert_eq!(run.texts(), ["Billing again."]);
    assert_eq!(router_server.requests().len(), 1);
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn a_rewound_transfer_no_longer_decides_who_has_the_conversation() {
    let router_server = FakeServer::start().await;
    let billing_server = FakeServer::start().await;
    let h = Harness::new(router_with_billing(&router_server, &billing_server, "Invoices")).await;

    router_server.push(openai::text("Hello."));
    h.say("Hi").await.ok();
    router_server.push(openai::tool_calls(&[(
        "t1",
        "transfer_to_agent",
        json!({"agent_name": "billing"}),
    )]));
    billing_server.push(openai::text("Paid."));
    let handed_over = h.say("Is my invoice paid?").await.ok();
    h.runner
        .rewind(USER, SESSION, &handed_over.events[0].invocation_id)
        .await
        .unwrap();

    // With the hand-over undone, the router has the conversation again (ADK's
    // find_agent_to_run reads the log with its rewinds applied), not billing.
    router_server.push(openai::text("Router here."));
    let run = h.say("Who is this?").await.ok();
    assert_eq!(run.texts(), ["Router here."]);
    assert_eq!(billing_server.requests().len(), 1, "billing was not asked again");
}

#[tokio::test]
async fn a_static_instruction_comes_first_and_the_instruction_before_the_users_turn() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    let agent = LlmAgentBuilder::new("assistant")
        .static_instruction("You are {not templated}.")
        .instruction("Today is {day?}.")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    h.say("Hi").await.ok();
    let sent = messages(&server.last_request());
    assert_eq!(
        sent[0],
        json!({"role": "system", "content": "You are {not templated}.\n\nYou are an agent. Your internal name is \"assistant\"."})
    );
    // ADK's place and label: before the user's turn, fenced as the agent's own instruction.
    let instruction = sent[1]["content"].as_str().expect("text");
    assert!(
        instruction.starts_with("The text between <<<BEGIN_SYSTEM_INSTRUCTION>>> and <<<END_SYSTEM_INSTRUCTION>>>")
            && instruction.ends_with("\n<<<BEGIN_SYSTEM_INSTRUCTION>>>\nToday is .\n<<<END_SYSTEM_INSTRUCTION>>>"),
        "{instruction}"
    );
    assert_eq!(sent[2], json!({"role": "user", "content": "Hi"}));
    assert_eq!(sent.len(), 3);
}

#[tokio::test]
async fn a_static_instructions_files_open_every_request_referenced_from_the_system_text() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    server.push(openai::text("ok"));
    let agent = LlmAgentBuilder::new("guide")
        .static_instruction(StaticInstruction::new(vec![
            StaticPart::Text("You guide.".into()),
            StaticPart::InlineData {
                mime_type: "image/png".into(),
                data: b"png".to_vec(),
                display_name: Some("plan.png".into()),
            },
            StaticPart::FileData {
                mime_type: "image/jpeg".into(),
                file_uri: "https://example.com/door.jpg".into(),
                display_name: None,
            },
            StaticPart::Text(String::new()),
        ]))
        .instruction("Be brief.")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    h.say("Hi").await.ok();
    h.say("Again").await.ok();
    let sent = messages(&server.last_request());
    assert_eq!(
        sent[0]["content"],
        "You guide.\n\n[Reference to inline binary data: inline_data_0 ('plan.png', type: image/png)]\n\n\
         [Reference to file data: file_data_1 (URI: https://example.com/door.jpg, type: image/jpeg)]\n\n\
         You are an agent. Your internal name is \"guide\"."
    );
    // ADK's order: the files, then the instruction, then the whole conversation (a prefix
    // the same on every turn), not the instruction before the latest message.
    assert_eq!(
        sent[1]["content"],
        json!([
            {"type": "text", "text": "Referenced inline data: inline_data_0"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}},
        ])
    );
    assert_eq!(
        sent[2]["content"],
        json!([
            {"type": "text", "text": "Referenced file data: file_data_1"},
            {"type": "image_url", "image_url": {"url": "https://example.com/door.jpg"}},
        ])
    );
    assert!(
        sent[3]["content"].as_str().is_some_and(|t| t.contains("\nBe brief.\n")),
        "{}",
        sent[3]
    );
    assert_eq!(sent[4], json!({"role": "user", "content": "Hi"}));
    assert_eq!(sent[6], json!({"role": "user", "content": "Again"}));
    assert_eq!(sent.len(), 7);
}

#[tokio::test]
async fn an_agent_called_as_a_tool_answers_with_its_reply_and_writes_the_callers_state() {
    let caller_server = FakeServer::start().await;
    let researcher_server = FakeServer::start().await;
    let researcher = LlmAgentBuilder::new("researcher")
        .description("Looks a topic up.")
        .instruction("Research {user:lang?} topics.")
        .input_schema(json!({"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}))
        .output_key("research")
        .model(openai(&researcher_server))
        .build()
        .unwrap();
    let caller = LlmAgentBuilder::new("caller")
        .model(openai(&caller_server))
        .tool(Arc::new(AgentTool::new(Arc::new(researcher))))
        .build()
        .unwrap();
    let mut state = HashMap::new();
    state.insert("user:lang".to_string(), json!("systems"));
    let h = Harness::with_state(Arc::new(caller), state).await;
    caller_server.push(openai::tool_calls(&[("a1", "researcher", json!({"topic": "rust"}))]));
    researcher_server.push(openai::text("Rust is fast."));
    caller_server.push(openai::text("Done."));
    let run = h.say("Tell me about Rust").await.ok();

    // The tool is the agent, its parameters its input_schema.
    let first = caller_server.requests()[0].json();
    assert_eq!(first["tools"][0]["function"]["name"], "researcher");
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["required"],
        json!(["topic"])
    );
    // The agent got the arguments as JSON text and the caller's state for its instruction.
    let asked = messages(&researcher_server.last_request());
    assert_eq!(
        asked[0],
        json!({
            "role": "system",
            "content": "Research systems topics.\n\nYou are an agent. Your internal name is \"researcher\". The \
                        description about you is \"Looks a topic up.\"."
        })
    );
    assert_eq!(asked[1]["content"], r#"{"topic":"rust"}"#);
    // Its reply is the call's result; its output_key write is the call's state_delta.
    let complete = run.complete();
    let response = &function_responses(complete[1])[0];
    assert_eq!(response.2, json!({"result": "Rust is fast."}));
    assert_eq!(
        complete[1].actions.state_delta.get("research"),
        Some(&json!("Rust is fast."))
    );
    assert_eq!(run.texts().last().unwrap(), "Done.");
    // Its own events stay out of the caller's session.
    let session = h.session().await;
    assert!(session.events.iter().all(|e| e.author != "researcher"));
    assert_eq!(session.state.as_map().get("research"), Some(&json!("Rust is fast.")));
}

#[tokio::test]
async fn an_agent_called_as_a_tool_runs_under_the_callers_run_config_unstreamed() {
    let caller_server = FakeServer::start().await;
    let researcher_server = FakeServer::start().await;
    let noop = FunctionTool::new("noop", "Does nothing.", |_ctx, _args| async { Ok(json!({})) });
    let researcher = LlmAgentBuilder::new("researcher")
        .description("Looks a topic up.")
        .model(openai(&researcher_server))
        .tool(Arc::new(noop))
        .build()
        .unwrap();
    let caller = LlmAgentBuilder::new("caller")
        .model(openai(&caller_server))
        .tool(Arc::new(AgentTool::new(Arc::new(researcher))))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(caller)).await;
    caller_server.push(openai::stream(
        vec![openai::tool_call_chunk(
            0,
            Some("a1"),
            Some("researcher"),
            r#"{"request": "rust"}"#,
        )],
        "tool_calls",
    ));
    // A researcher that would call its tool forever.
    for i in 0..5 {
        researcher_server.push(openai::tool_calls(&[(&format!("n{i}"), "noop", json!({}))]));
    }
    caller_server.push(openai::stream_text(&["Done."]));
    let options = RunOptions {
        run_config: RunConfig {
            streaming_mode: StreamingMode::Sse,
            max_llm_calls: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    h.send(Content::new("user").with_text("Research Rust"), options).await;

    // The caller's bound holds the wrapped agent (counted on its own: the caller had made
    // one call already), and the wrapped agent is asked unstreamed, as ADK runs it.
    let asked = researcher_server.requests();
    assert_eq!(asked.len(), 2, "the caller's max_llm_calls bounds the agent it calls");
    assert!(
        asked
            .iter()
            .all(|request| request.json().get("stream").is_none_or(|s| s == false))
    );
    assert_eq!(caller_server.requests()[0].json()["stream"], true);
}

#[tokio::test]
async fn a_loop_runs_until_exit_loop_escalates() {
    let server = FakeServer::start().await;
    server.push(openai::text("draft 1"));
    server.push(openai::text("draft 2"));
    server.push(openai::tool_calls(&[("x1", "exit_loop", json!({}))]));
    let worker = LlmAgentBuilder::new("worker")
        .model(openai(&server))
        .tool(Arc::new(ExitLoopTool))
        .build()
        .unwrap();
    let refine = LoopAgent::new("refine", vec![Arc::new(worker)]).max_iterations(10);
    let h = Harness::new(Arc::new(refine)).await;

    let run = h.say("Write and refine").await.ok();
    // The loop's position events (it is resumable) carry no content.
    let events: Vec<&adk_grpc_core::Event> = run.complete().into_iter().filter(|e| e.content().is_some()).collect();
    assert_eq!(run.texts(), ["draft 1", "draft 2"]);
    assert_eq!(events.len(), 4);
    let exit = events[3];
    assert!(exit.actions.escalates() && exit.actions.skips_summarization());
    // ADK's exit_loop returns None: {"result": null}, and no text part beside it.
    assert_eq!(
        exit.content().unwrap().parts,
        [Part::function_response(
            FunctionResponseData {
                name: "exit_loop".into(),
                response: json!({"result": null}),
            },
            Some("x1".into())
        )]
    );
    assert_eq!(server.requests().len(), 3, "no model call after exit_loop");

    // max_iterations bounds a loop that never escalates.
    server.push(openai::text("a"));
    server.push(openai::text("b"));
    let worker = LlmAgentBuilder::new("worker").model(openai(&server)).build().unwrap();
    let bounded = LoopAgent::new("bounded", vec![Arc::new(worker)]).max_iterations(2);
    let h = Harness::new(Arc::new(bounded)).await;
    assert_eq!(h.say("go").await.ok().texts(), ["a", "b"]);
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn sequential_and_parallel_agents_store_every_branch_and_pass_outputs_on() {
    let a_server = FakeServer::start().await;
    let b_server = FakeServer::start().await;
    let s_server = FakeServer::start().await;
    // `a` answers later than `b`, so the branches' events interleave by time, not by order.
    a_server.push(FakeReply::json(openai::text("facts from A")).delayed(std::time::Duration::from_millis(200)));
    b_server.push(openai::text("facts from B"));
    s_server.push(openai::text("summary"));
    let a = LlmAgentBuilder::new("a")
        .model(openai(&a_server))
        .output_key("a_out")
        .build()
        .unwrap();
    let b = LlmAgentBuilder::new("b")
        .model(openai(&b_server))
        .output_key("b_out")
        .build()
        .unwrap();
    let summarizer = LlmAgentBuilder::new("summarizer")
        .instruction("Combine: {a_out} + {b_out}")
        .model(openai(&s_server))
        .output_key("summary")
        .build()
        .unwrap();
    let fanout = ParallelAgent::new("fanout", vec![Arc::new(a), Arc::new(b)]);
    let pipeline = SequentialAgent::new("pipeline", vec![Arc::new(fanout), Arc::new(summarizer)]);
    let h = Harness::new(Arc::new(pipeline)).await;

    let run = h.say("Research this").await.ok();
    let branches: Vec<(&str, &str)> = run
        .complete()
        .iter()
        .filter(|e| e.content().is_some())
        .map(|e| (e.author.as_str(), e.branch.as_str()))
        .collect();
    assert_eq!(branches, [("b", "fanout.b"), ("a", "fanout.a"), ("summarizer", "")]);
    assert_eq!(
        system_prompt(&s_server.last_request()),
        "Combine: facts from A + facts from B\n\nYou are an agent. Your internal name is \"summarizer\"."
    );
    // Each branch saw only the user's message, not the other branch.
    for server in [&a_server, &b_server] {
        let turns = messages(&server.last_request());
        assert_eq!(turns.iter().filter(|m| m["role"] != "system").count(), 1, "{turns:?}");
    }

    let session = h.verify_log(&HashMap::new()).await;
    let state = session.state.as_map();
    assert_eq!(state["a_out"], "facts from A");
    assert_eq!(state["b_out"], "facts from B");
    assert_eq!(state["summary"], "summary");
}

#[tokio::test]
async fn instructions_are_templated_from_every_scope_and_artifacts() {
    let server = FakeServer::start().await;
    server.push(openai::text("ok"));
    let agent = LlmAgentBuilder::new("assistant")
        .instruction("Hello {user:name} of {app:company}; topic {topic}, mood {mood?}, step {temp:step}. Notes: {artifact.notes.txt} {\"json\": 1}")
        .model(openai(&server))
        .build()
        .unwrap();
    let initial: HashMap<String, Value> = [
        ("user:name", json!("Ada")),
        ("app:company", json!("ACME")),
        ("topic", json!("rust")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let h = Harness::with_state(Arc::new(agent), initial.clone()).await;
    h.artifacts
        .save(adk_grpc_core::artifact::SaveRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            file_name: "notes.txt".into(),
            part: Part::text_part("be kind"),
            version: None,
        })
        .await
        .unwrap();

    let options = RunOptions {
        state_delta: HashMap::from([("temp:step".to_string(), json!(3))]),
        ..Default::default()
    };
    h.send(Content::new("user").with_text("hi"), options).await.ok();
    assert_eq!(
        system_prompt(&server.last_request()),
        "Hello Ada of ACME; topic rust, mood , step 3. Notes: be kind {\"json\": 1}\n\nYou are an agent. Your \
         internal name is \"assistant\"."
    );
    h.verify_log(&initial).await;
}

#[tokio::test]
async fn a_missing_template_key_ends_the_run_with_an_error_naming_it() {
    let server = FakeServer::start().await;
    let agent = LlmAgentBuilder::new("assistant")
        .instruction("Talk about {topic}.")
        .model(openai(&server))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let run = h.say("hi").await;
    let error = run.error.expect("the run fails");
    assert_eq!(error.code(), Code::FailedPrecondition);
    assert!(error.to_string().contains("`topic`"), "{error}");
    assert!(server.requests().is_empty(), "the model was not called");
    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(session.events.len(), 1, "only the user's message is stored");
}

#[tokio::test]
async fn temp_state_reaches_later_steps_of_the_invocation_and_is_gone_afterwards() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[("c1", "remember", json!({}))]));
    server.push(openai::text("done"));
    server.push(openai::text("next turn"));
    let remember = FunctionTool::new(
        "remember",
        "Remembers.",
        |ctx: Arc<dyn ToolContext>, _args| async move {
            ctx.set_state("temp:scratch", json!("42"));
            ctx.set_state("kept", json!(true));
            // A tool reads its own writes back at once.
            Ok(json!({"scratch": ctx.state().get("temp:scratch")}))
        },
    );
    let agent = LlmAgentBuilder::new("assistant")
        .instruction("Scratch: [{temp:scratch?}]")
        .model(openai(&server))
        .tool(Arc::new(remember))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.say("go").await.ok();
    let prompts: Vec<String> = server.requests().iter().map(system_prompt).collect();
    assert_eq!(
        prompts,
        [
            "Scratch: []\n\nYou are an agent. Your internal name is \"assistant\".",
            "Scratch: [42]\n\nYou are an agent. Your internal name is \"assistant\"."
        ],
        "the second model call sees temp:"
    );
    let response_event = run.complete()[1].clone();
    assert_eq!(function_responses(&response_event)[0].2, json!({"scratch": "42"}));
    // Streamed events are the stored ones: without the temp: key.
    assert_eq!(
        response_event.actions.state_delta,
        HashMap::from([("kept".to_string(), json!(true))])
    );

    h.say("again").await.ok();
    assert_eq!(
        system_prompt(&server.last_request()),
        "Scratch: []\n\nYou are an agent. Your internal name is \"assistant\".",
        "the next invocation has no temp:"
    );
    let session = h.verify_log(&HashMap::new()).await;
    assert_eq!(session.state.as_map().get("temp:scratch"), None);
    assert_eq!(session.state.as_map().get("kept"), Some(&json!(true)));
}

#[tokio::test]
async fn a_client_tool_pauses_the_turn_and_the_answer_resumes_the_calling_agent() {
    let router_server = FakeServer::start().await;
    let helper_server = FakeServer::start().await;
    router_server.push(openai::tool_calls(&[(
        "t1",
        "transfer_to_agent",
        json!({"agent_name": "helper"}),
    )]));
    helper_server.push(openai::tool_calls(&[(
        "ask_1",
        "ask_user",
        json!({"question": "Favourite colour?"}),
    )]));
    helper_server.push(openai::text("Blue it is."));
    let helper = LlmAgentBuilder::new("helper")
        .model(openai(&helper_server))
        .tool(Arc::new(ClientTool::new("ask_user", "Asks the user a question.")))
        .build()
        .unwrap();
    let router = LlmAgentBuilder::new("router")
        .model(openai(&router_server))
        .sub_agents([Arc::new(helper) as _])
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(router)).await;

    let run = h.say("Pick a colour for me").await.ok();
    let last = run.events.last().unwrap();
    assert_eq!(last.author, "helper");
    assert_eq!(last.long_running_tool_ids, ["ask_1"]);
    assert!(last.is_final_response());
    assert_eq!(function_calls(last)[0].1, "ask_user");
    assert_eq!(
        helper_server.requests().len(),
        1,
        "no model call after a long-running call"
    );

    let run = h
        .send(
            function_response("ask_1", "ask_user", json!({"answer": "blue"})),
            RunOptions::default(),
        )
        .await
        .ok();
    assert_eq!(run.complete().len(), 1);
    assert_eq!(
        run.complete()[0].author,
        "helper",
        "the answer went back to the agent that asked"
    );
    assert_eq!(run.texts(), ["Blue it is."]);
    assert_eq!(router_server.requests().len(), 1, "the router was not involved");
    let tool_message = messages(&helper_server.last_request())
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_message["tool_call_id"], "ask_1");
    assert!(tool_message["content"].as_str().unwrap().contains("blue"));

    // An answer to no call is refused before anything is stored.
    let run = h
        .send(function_response("nope", "ask_user", json!({})), RunOptions::default())
        .await;
    assert_eq!(run.error.unwrap().code(), Code::InvalidArgument);
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn a_clients_answer_goes_on_with_its_calls_invocation_and_answers_to_two_invocations_are_refused() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[(
        "ask_1",
        "ask_user",
        json!({"question": "Colour?"}),
    )]));
    server.push(openai::tool_calls(&[(
        "ask_2",
        "ask_user",
        json!({"question": "Size?"}),
    )]));
    let helper = LlmAgentBuilder::new("helper")
        .model(openai(&server))
        .tool(Arc::new(ClientTool::new("ask_user", "Asks the user a question.")))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(helper)).await;
    let first = h.say("Pick a colour").await.ok().events[0].invocation_id.clone();
    let second = h.say("And a size").await.ok().events[0].invocation_id.clone();
    assert_ne!(first, second);

    // One message answering calls of two invocations is refused, as ADK refuses it.
    let mut both = function_response("ask_1", "ask_user", json!({"answer": "blue"}));
    both.parts
        .extend(function_response("ask_2", "ask_user", json!({"answer": "L"})).parts);
    let refused = h.send(both, RunOptions::default()).await.error.unwrap();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.to_string().contains("function_response") && refused.to_string().contains("one invocation"),
        "{refused}"
    );

    // The answer to the first call goes on with the first invocation (ADK's id resolved
    // from the function responses): its message and everything the Run stores.
    server.push(openai::text("Blue it is."));
    let run = h
        .send(
            function_response("ask_1", "ask_user", json!({"answer": "blue"})),
            RunOptions::default(),
        )
        .await
        .ok();
    assert_eq!(run.texts(), ["Blue it is."]);
    let session = h.verify_log(&HashMap::new()).await;
    let answered: Vec<&str> = session
        .events
        .iter()
        .skip_while(|e| function_responses(e).is_empty())
        .map(|e| e.invocation_id.as_str())
        .collect();
    assert_eq!(answered, [first.as_str(), first.as_str()]);
}

#[tokio::test]
async fn a_long_running_tool_with_an_interim_result_is_read_by_the_model_which_goes_on() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[("c1", "approve", json!({"amount": 900}))]));
    server.push(openai::text("Your manager was asked: ticket t-1."));
    // ADK's LongRunningFunctionTool: it starts the work and says so at once.
    let approve = FunctionTool::new("approve", "Asks a manager to approve.", |_ctx, _args| async {
        Ok(json!({"status": "pending", "ticket": "t-1"}))
    })
    .long_running();
    let agent = LlmAgentBuilder::new("expenses")
        .model(openai(&server))
        .tool(Arc::new(approve))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.say("File 900 euros").await.ok();
    let call = &run.complete()[0];
    assert_eq!(
        call.long_running_tool_ids,
        ["c1"],
        "the call is marked long-running, as in ADK"
    );
    assert_eq!(
        function_responses(run.complete()[1])[0].2,
        json!({"status": "pending", "ticket": "t-1"})
    );
    assert_eq!(run.texts(), ["Your manager was asked: ticket t-1."]);
    assert_eq!(server.requests().len(), 2, "the model read the interim result");
}

#[tokio::test]
async fn max_llm_calls_stops_a_runaway_tool_loop() {
    let server = FakeServer::start().await;
    for i in 0..5 {
        server.push(openai::tool_calls(&[(&format!("c{i}"), "noop", json!({}))]));
    }
    let noop = FunctionTool::new("noop", "Does nothing.", |_ctx, _args| async { Ok(json!({})) });
    let agent = LlmAgentBuilder::new("looper")
        .model(openai(&server))
        .tool(Arc::new(noop))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let options = RunOptions {
        run_config: RunConfig {
            max_llm_calls: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    let run = h.send(Content::new("user").with_text("go"), options).await;
    let error = run.error.as_ref().expect("the run fails");
    assert_eq!(error.code(), Code::ResourceExhausted);
    assert!(error.to_string().contains("max_llm_calls exceeded"), "{error}");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        run.events.len(),
        4,
        "two calls and their responses were stored and streamed"
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn load_artifacts_puts_artifact_contents_into_the_next_request() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[(
        "l1",
        "load_artifacts",
        json!({"artifact_names": ["report.txt"]}),
    )]));
    server.push(openai::text("The report says hi."));
    let agent = LlmAgentBuilder::new("reader")
        .model(openai(&server))
        .tool(Arc::new(LoadArtifactsTool))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    h.artifacts
        .save(adk_grpc_core::artifact::SaveRequest {
            app_name: APP.into(),
            user_id: USER.into(),
            session_id: SESSION.into(),
            file_name: "report.txt".into(),
            part: Part::text_part("hi from the report"),
            version: None,
        })
        .await
        .unwrap();

    h.say("What does the report say?").await.ok();
    assert!(system_prompt(&server.requests()[0]).contains("[\"report.txt\"]"));
    let last_message = messages(&server.last_request()).pop().unwrap();
    assert_eq!(last_message["role"], "user");
    let text = last_message["content"].to_string();
    assert!(
        text.contains("Artifact report.txt is:") && text.contains("hi from the report"),
        "{text}"
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn tools_save_artifacts_with_the_version_recorded_in_artifact_delta() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[("w1", "write_report", json!({}))]));
    server.push(openai::text("written"));
    let write = FunctionTool::new(
        "write_report",
        "Writes the report.",
        |ctx: Arc<dyn ToolContext>, _args| async move {
            let artifacts = ctx.artifacts().ok_or_else(|| AdkError::Tool("no artifacts".into()))?;
            let version = artifacts.save("report.txt", &Part::text_part("v1")).await?;
            Ok(json!({"version": version}))
        },
    );
    let agent = LlmAgentBuilder::new("writer")
        .model(openai(&server))
        .tool(Arc::new(write))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let run = h.say("write it").await.ok();
    assert_eq!(
        run.complete()[1].actions.artifact_delta,
        HashMap::from([("report.txt".to_string(), 1)])
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn model_callbacks_can_rewrite_short_circuit_and_replace() {
    let model = ScriptedLlm::new(vec![ScriptedLlm::text("from the model")]);
    let agent = LlmAgentBuilder::new("assistant")
        .model(model.clone())
        .before_model_callback(|_ctx, mut request| async move {
            let asked = request.contents.last().and_then(Content::text).unwrap_or_default();
            if asked == "cached?" {
                return Ok(BeforeModel::Respond(LlmResponse {
                    content: Some(Content::new("model").with_text("from the cache")),
                    ..Default::default()
                }));
            }
            request.system_instruction = Some("added by a callback".into());
            Ok(BeforeModel::Continue(request))
        })
        .after_model_callback(|ctx, mut response| async move {
            let text = response.content.as_ref().and_then(Content::text).unwrap_or_default();
            response.content =
                Some(Content::new("model").with_text(format!("{text} (checked by {})", ctx.agent_name())));
            Ok(response)
        })
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    assert_eq!(
        h.say("cached?").await.ok().texts(),
        ["from the cache (checked by assistant)"]
    );
    assert!(model.requests().is_empty(), "the model was skipped");
    assert_eq!(
        h.say("fresh").await.ok().texts(),
        ["from the model (checked by assistant)"]
    );
    assert_eq!(
        model.requests()[0].system_instruction.as_deref(),
        Some("added by a callback")
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn rust_callbacks_guard_tool_calls_as_http_hooks_do() {
    let server = FakeServer::start().await;
    server.push(openai::tool_calls(&[
        ("call_1", "get_weather", json!({"city": "Paris"})),
        ("call_2", "get_weather", json!({"city": "Atlantis"})),
        ("call_3", "broken", json!({})),
    ]));
    server.push(openai::text("Sunny in Paris."));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let broken = FunctionTool::new("broken", "Always fails.", |_ctx, _args| async {
        Err(AdkError::Tool("the backend is down".into()))
    });
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&server))
        .tool(weather_tool(seen.clone()))
        .tool(Arc::new(broken))
        .hook(Callback::before_tool(|ctx, tool, args| async move {
            if tool == "get_weather" && args["city"] == "Atlantis" {
                ctx.set_state("refused_city", args["city"].clone());
                return Ok(BeforeTool::Respond(json!({"error": "refused: no such city"})));
            }
            Ok(BeforeTool::Continue(args))
        }))
        .hook(Callback::on_tool_error(|_ctx, tool, _args, error| {
            let fallback = json!({"fallback": format!("{tool}: {error}")});
            async move { Ok(Some(fallback)) }
        }))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.say("Weather in Paris and Atlantis?").await.ok();
    let events = run.complete();
    assert_eq!(
        *seen.lock().unwrap(),
        [json!({"city": "Paris"})],
        "the refused call never ran"
    );
    let responses = function_responses(events[1]);
    assert_eq!(responses[1].2, json!({"error": "refused: no such city"}));
    let fallback = responses[2].2["fallback"].as_str().unwrap();
    assert!(
        fallback.starts_with("broken: ") && fallback.contains("the backend is down"),
        "{fallback}"
    );
    assert_eq!(events[1].actions.state_delta["refused_city"], json!("Atlantis"));
    assert_eq!(events[1].actions.state_delta["last_city"], json!("Paris"));
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn a_rust_after_model_callback_sees_the_reply_whole_before_any_of_it_streams() {
    let server = FakeServer::start().await;
    server.push(openai::text("Mail bob@example.com"));
    let agent = LlmAgentBuilder::new("assistant")
        .model(openai(&server))
        .after_model_callback(|_ctx, mut response| async move {
            let text = response.content.as_ref().and_then(Content::text).unwrap_or_default();
            response.content = Some(Content::new("model").with_text(text.replace("bob@example.com", "[email]")));
            Ok(response)
        })
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    let run = h.send(Content::new("user").with_text("Who?"), sse()).await.ok();
    assert!(run.partial().is_empty(), "no fragment of the reply passed the callback");
    assert_eq!(run.texts(), ["Mail [email]"]);
    assert_ne!(
        server.last_request().json()["stream"],
        true,
        "the model is asked without streaming"
    );
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn a_rust_before_agent_callback_answers_for_a_workflow_agent() {
    let model = ScriptedLlm::new(vec![ScriptedLlm::text("from the model")]);
    let step = LlmAgentBuilder::new("step").model(model.clone()).build().unwrap();
    let closed = Callback::before_agent(|ctx| async move {
        Ok(Some(
            Content::new("model").with_text(format!("{} is closed today", ctx.agent_name())),
        ))
    });
    let pipeline = with_agent_hooks(
        Arc::new(SequentialAgent::new("pipeline", vec![Arc::new(step)])),
        Hooks::new([Arc::new(closed) as Arc<dyn Hook>]),
        None,
    );
    let h = Harness::new(pipeline).await;

    assert_eq!(h.say("hi").await.ok().texts(), ["pipeline is closed today"]);
    assert!(model.requests().is_empty(), "the agent was skipped");
    h.verify_log(&HashMap::new()).await;
}

#[tokio::test]
async fn a_model_reply_without_a_complete_response_is_an_error() {
    let partial_only = LlmResponse {
        content: Some(Content::new("model").with_text("Hel")),
        partial: Some(true),
        ..Default::default()
    };
    let model = ScriptedLlm::new(vec![vec![partial_only]]);
    let agent = LlmAgentBuilder::new("assistant").model(model).build().unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    let run = h.send(Content::new("user").with_text("hi"), sse()).await;
    assert!(run.error.unwrap().to_string().contains("without a complete response"));
    assert_eq!(run.events.len(), 1, "the partial chunk was streamed");
    h.verify_log(&HashMap::new()).await;
}

#[test]
fn bad_definitions_are_refused() {
    let model = ScriptedLlm::new(vec![]);
    for (name, needle) in [("bad name", "identifier"), ("user", "identifier"), ("", "identifier")] {
        let err = LlmAgentBuilder::new(name).model(model.clone()).build().err().unwrap();
        assert!(err.to_string().contains(needle), "{name}: {err}");
    }
    let err = LlmAgentBuilder::new("a").build().err().unwrap();
    assert!(err.to_string().contains("no model"));
    let noop = || Arc::new(FunctionTool::new("t", "", |_ctx, _args| async { Ok(Value::Null) }));
    let err = LlmAgentBuilder::new("a")
        .model(model.clone())
        .tool(noop())
        .tool(noop())
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("agent a: t is listed twice"), "{err}");
    // The rules the agents file applies field by field are the builder's own.
    for (tool, needle) in [
        ("get weather", "a tool name is what the model calls"),
        ("transfer_to_agent", "transfer_to_agent is offered by itself"),
    ] {
        let named = FunctionTool::new(tool, "", |_ctx, _args| async { Ok(Value::Null) });
        let err = LlmAgentBuilder::new("a")
            .model(model.clone())
            .tool(Arc::new(named))
            .build()
            .err()
            .unwrap();
        assert!(err.to_string().contains(needle), "{tool}: {err}");
    }
    let err = LlmAgentBuilder::new("a")
        .model(model.clone())
        .output_key("user:")
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("agent a: output_key"), "{err}");

    // Agent names are unique across the tree the runner runs.
    let twin = || {
        Arc::new(LlmAgentBuilder::new("twin").model(model.clone()).build().unwrap()) as Arc<dyn adk_grpc_core::Agent>
    };
    let root = SequentialAgent::new(
        "root",
        vec![twin(), Arc::new(SequentialAgent::new("inner", vec![twin()]))],
    );
    let sessions = Arc::new(adk_grpc_core::CoreSessionService::new(
        adk_grpc_store::InMemorySessionBackend::new(),
    ));
    let lease = Arc::new(adk_grpc_store::InMemorySessionLease::new());
    let err = adk_grpc_agents::Runner::new(adk_grpc_agents::RunnerConfig::new(
        "app",
        Arc::new(root),
        sessions,
        lease,
    ))
    .err()
    .unwrap();
    assert!(err.to_string().contains("two agents are named twin"), "{err}");
}

/// ADK's `include_contents: none`: the model sees the current turn, not the earlier ones.
#[tokio::test]
async fn include_contents_none_sends_the_model_only_the_current_turn() {
    for (include, expected) in [(IncludeContents::Default, 3), (IncludeContents::None, 1)] {
        let model = ScriptedLlm::new(vec![ScriptedLlm::text("one"), ScriptedLlm::text("two")]);
        let agent = LlmAgentBuilder::new("assistant")
            .model(model.clone())
            .include_contents(include)
            .build()
            .unwrap();
        let harness = Harness::new(Arc::new(agent)).await;
        harness.say("first").await.ok();
        harness.say("second").await.ok();
        let second = &model.requests()[1];
        assert_eq!(second.contents.len(), expected, "{include:?}: {:?}", second.contents);
        assert_eq!(
            second.contents.last().and_then(Content::text).as_deref(),
            Some("second")
        );
    }
}
