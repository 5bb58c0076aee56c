//! ADK's `ModelConsultTool` through the runner: the executor and the advisor are two
//! fake OpenAI servers over loopback HTTP, so each side's requests are seen as sent.

use crate::common::*;
use adk_grpc_agents::{ConsultContext, FunctionTool, LlmAgentBuilder, ModelConsultTool};
use adk_grpc_core::{GenerateContentConfig, ThinkingConfig, ThinkingEffort};
use adk_grpc_models::testing::{FakeReply, FakeServer, openai};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The JSON the executor was sent as the answer of call `id`, in its latest request.
fn answer(executor: &FakeServer, id: &str) -> Value {
    let message = messages(&executor.last_request())
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no answer of {id}"));
    serde_json::from_str(message["content"].as_str().unwrap()).unwrap()
}

fn consult(id: &str, question: &str) -> Value {
    openai::tool_calls(&[(id, "model_consult", json!({"question": question}))])
}

#[tokio::test]
async fn the_advisor_reads_the_conversation_and_the_question_within_its_budgets() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor))
        .unwrap()
        .with_max_uses(1)
        .unwrap()
        .with_session_max_uses(2)
        .unwrap();
    let agent = LlmAgentBuilder::new("coder")
        .model(openai(&executor))
        .instruction("Fix bugs.")
        .tool(Arc::new(tool))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;

    // Turn 1: one consult answered, the second over the turn's budget.
    executor.push(consult("c1", "Which file holds the parser?"));
    advisor.push(openai::text("1. Read src/parse.rs first."));
    executor.push(consult("c2", "And then?"));
    executor.push(openai::text("Done."));
    h.say("the parser drops commas").await.ok();

    let asked = advisor.requests();
    assert_eq!(asked.len(), 1, "the second consult did not reach the advisor");
    let system = system_prompt(&asked[0]);
    assert!(system.starts_with("You are a senior technical advisor"), "{system}");
    let text = advisor_text(&asked[0]);
    assert!(
        text.contains("[user] the parser drops commas"),
        "the conversation: {text}"
    );
    assert!(text.contains("Which file holds the parser?"), "the question: {text}");
    assert!(text.contains("(coder)"), "the executor's name: {text}");
    assert!(
        !text.contains("c1") && !text.contains("[tool_call] model_consult"),
        "not the call itself: {text}"
    );
    let executor_system = system_prompt(&executor.requests()[0]);
    assert!(executor_system.contains("`model_consult` tool"), "{executor_system}");

    let requests = executor.requests();
    let first = messages(&requests[1])
        .into_iter()
        .find(|m| m["tool_call_id"] == "c1")
        .unwrap();
    let first: Value = serde_json::from_str(first["content"].as_str().unwrap()).unwrap();
    assert_eq!(first["status"], "ok");
    assert_eq!(first["guidance"], "1. Read src/parse.rs first.");
    assert_eq!(first["consults"]["remaining"], 0);
    let second = answer(&executor, "c2");
    assert_eq!(second["status"], "limit_reached");
    assert!(
        second["message"]
            .as_str()
            .unwrap()
            .contains("for this turn is exhausted (1 of 1 used)"),
        "{second}"
    );

    let state = h.session().await.state.as_map().clone();
    assert_eq!(state.get("model_consult:model_consult:session_uses"), Some(&json!(1)));
    assert!(state.keys().all(|k| !k.starts_with("temp:")), "{state:?}");

    // Turn 2: a new turn's budget; a failing advisor is a result to go on from, not a
    // failed turn, and is not counted; the next consult is.
    executor.push(consult("c3", "Is the fix right?"));
    advisor.push(FakeReply::status(
        400,
        openai::error("bad request", "invalid_request_error"),
    ));
    executor.push(consult("c4", "Is the fix right now?"));
    advisor.push(openai::text("Yes."));
    executor.push(openai::text("Fixed."));
    h.say("check the fix").await.ok();
    let requests = executor.requests();
    let failed = messages(&requests[requests.len() - 2])
        .into_iter()
        .find(|m| m["tool_call_id"] == "c3")
        .unwrap();
    let failed: Value = serde_json::from_str(failed["content"].as_str().unwrap()).unwrap();
    assert_eq!(failed["status"], "error", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains("own best judgment"),
        "{failed}"
    );
    assert_eq!(answer(&executor, "c4")["guidance"], "Yes.");
    let later = advisor.requests().last().unwrap().json().to_string();
    assert!(
        later.contains("Read src/parse.rs first."),
        "earlier advice is in the conversation: {later}"
    );

    // Turn 3: the session's budget (2) is used up.
    executor.push(consult("c5", "Anything else?"));
    executor.push(openai::text("No."));
    h.say("anything else?").await.ok();
    let over = answer(&executor, "c5");
    assert_eq!(over["status"], "limit_reached");
    assert!(
        over["message"]
            .as_str()
            .unwrap()
            .contains("for this session is exhausted (2 of 2 used)"),
        "{over}"
    );
    assert_eq!(advisor.requests().len(), 3);
    h.verify_log(&HashMap::new()).await;
}

/// An executor agent with a `lookup` tool, the consult tool and the instruction
/// "Fix bugs in {lang}." ({lang} from state: the advisor sees it resolved).
async fn executor_with(tool: ModelConsultTool, executor: &FakeServer) -> Harness {
    let lookup = FunctionTool::new("lookup", "Looks a   symbol up\nin the index.", |_ctx, _args| async {
        Ok(json!({"found": true}))
    });
    let agent = LlmAgentBuilder::new("coder")
        .model(openai(executor))
        .instruction("Fix bugs in Rust.")
        .tool(Arc::new(lookup))
        .tool(Arc::new(tool))
        .build()
        .unwrap();
    Harness::new(Arc::new(agent)).await
}

/// The text the advisor was sent (its one user message, its parts a line each).
fn advisor_text(request: &adk_grpc_models::testing::RecordedRequest) -> String {
    let sent = messages(request);
    let content = &sent.last().unwrap()["content"];
    match content.as_str() {
        Some(text) => text.to_string(),
        None => content
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[tokio::test]
async fn the_advisor_request_carries_its_generation_instructions_and_the_executors_tools() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor))
        .unwrap()
        .with_advisor_instruction("You are the reviewer.")
        .with_executor_instruction("  Ask the reviewer before you commit.  ")
        .with_generate_content_config(GenerateContentConfig {
            temperature: Some(0.25),
            max_output_tokens: Some(777),
            thinking: Some(ThinkingConfig {
                effort: Some(ThinkingEffort::Minimal),
                ..Default::default()
            }),
            ..Default::default()
        });
    let h = executor_with(tool, &executor).await;
    executor.push(consult("c1", "Which file?"));
    advisor.push(openai::text("Read src/parse.rs."));
    executor.push(openai::text("Done."));
    h.say("the parser drops commas").await.ok();

    let executor_system = system_prompt(&executor.requests()[0]);
    assert!(
        executor_system.ends_with("Ask the reviewer before you commit."),
        "{executor_system}"
    );
    assert!(
        !executor_system.contains("`model_consult` tool"),
        "ADK's text is replaced: {executor_system}"
    );

    let asked = advisor.last_request();
    let body = asked.json();
    assert_eq!(body["reasoning_effort"], "minimal", "{body}");
    assert_eq!(body["max_completion_tokens"], 777, "{body}");
    assert_eq!(body["temperature"], 0.25, "{body}");
    assert!(body.get("tools").is_none(), "the advisor gets no tools: {body}");
    assert_eq!(system_prompt(&asked), "You are the reviewer.");
    let text = advisor_text(&asked);
    assert!(
        text.contains("--- EXECUTOR AGENT INSTRUCTION (coder) ---") && text.contains("\n\nFix bugs in Rust.\n"),
        "the agent's instruction: {text}"
    );
    assert!(
        !text.contains("Ask the reviewer"),
        "not the consult tool's own text: {text}"
    );
    assert!(
        text.contains("- lookup: Looks a symbol up in the index."),
        "the tool inventory: {text}"
    );
    assert!(!text.contains("- model_consult"), "not the consult tool itself: {text}");
    assert_eq!(answer(&executor, "c1")["guidance"], "Read src/parse.rs.");
}

#[tokio::test]
async fn the_context_config_bounds_what_the_advisor_reads_and_the_blocks_can_be_left_out() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor))
        .unwrap()
        .with_agent_instruction(false)
        .with_tool_inventory(false)
        .with_executor_instruction("")
        .with_context(ConsultContext {
            max_events: Some(5),
            max_part_chars: 40,
            include_thoughts: true,
            ..Default::default()
        })
        .unwrap();
    let h = executor_with(tool, &executor).await;
    // Turn 1: a long tool call. Turn 2: the consult sees only the newest 5 events
    // (all but the first message), the call cut to 40 characters.
    executor.push(openai::tool_calls(&[(
        "l1",
        "lookup",
        json!({"symbol": "x".repeat(200)}),
    )]));
    executor.push(openai::reasoning("the lookup says found", "Found it."));
    h.say("find the parser").await.ok();
    executor.push(consult("c1", "Which file?"));
    advisor.push(openai::text("Read src/parse.rs."));
    executor.push(openai::text("Done."));
    h.say("now fix it").await.ok();

    let executor_system = system_prompt(&executor.requests()[0]);
    assert!(!executor_system.contains("model_consult"), "{executor_system}");
    let text = advisor_text(&advisor.last_request());
    assert!(
        !text.contains("EXECUTOR AGENT INSTRUCTION") && !text.contains("Fix bugs"),
        "{text}"
    );
    assert!(!text.contains("TOOLS AVAILABLE TO THE EXECUTOR"), "{text}");
    assert!(!text.contains("find the parser"), "older than max_events: {text}");
    assert!(
        text.contains("[thought] the lookup says found"),
        "thoughts asked for: {text}"
    );
    assert!(text.contains("[user] now fix it"), "{text}");
    // Cut to 40 characters, its note (35 of them) included, as ADK cuts it.
    assert!(
        text.contains("[tool_call] lookup({\"sym\n[... 209 characters truncated ...])"),
        "the call cut to max_part_chars: {text}"
    );

    // include_session: false: the question only; long calls cut to max_part_chars.
    let advisor2 = FakeServer::start().await;
    let executor2 = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor2))
        .unwrap()
        .with_context(ConsultContext {
            include_session: false,
            ..Default::default()
        })
        .unwrap();
    let h = executor_with(tool, &executor2).await;
    executor2.push(consult("c1", "Which file?"));
    advisor2.push(openai::text("Read src/parse.rs."));
    executor2.push(openai::text("Done."));
    h.say("the parser drops commas").await.ok();
    let text = advisor_text(&advisor2.last_request());
    assert!(
        !text.contains("drops commas") && !text.contains("[tool_call]"),
        "{text}"
    );
    assert!(
        text.contains("Which file?") && text.contains("Fix bugs in Rust."),
        "{text}"
    );
    assert!(
        ModelConsultTool::new("model_consult", openai(&advisor2))
            .unwrap()
            .with_context(ConsultContext {
                max_chars: Some(0),
                ..Default::default()
            })
            .is_err()
    );
}

#[tokio::test]
async fn an_advisor_that_refuses_thinking_is_asked_again_without_it() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor))
        .unwrap()
        .with_generate_content_config(GenerateContentConfig {
            thinking: Some(ThinkingConfig {
                effort: Some(ThinkingEffort::High),
                ..Default::default()
            }),
            ..Default::default()
        });
    let h = executor_with(tool, &executor).await;
    executor.push(consult("c1", "Which file?"));
    advisor.push(FakeReply::status(
        400,
        openai::error(
            "reasoning_effort is not supported with this model",
            "invalid_request_error",
        ),
    ));
    advisor.push(openai::text("Read src/parse.rs."));
    executor.push(openai::text("Done."));
    h.say("the parser drops commas").await.ok();
    let asked = advisor.requests();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].json()["reasoning_effort"], "high");
    assert!(asked[1].json().get("reasoning_effort").is_none(), "{}", asked[1].json());
    assert_eq!(answer(&executor, "c1")["guidance"], "Read src/parse.rs.");
}

/// ADK forwards a static instruction's texts to the advisor, a line each, without its
/// files or empty texts, before the agent's instruction.
#[tokio::test]
async fn the_advisor_reads_a_rich_static_instructions_texts_without_its_files() {
    use adk_grpc_agents::{StaticInstruction, StaticPart};
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let tool = ModelConsultTool::new("model_consult", openai(&advisor)).unwrap();
    let agent = LlmAgentBuilder::new("coder")
        .model(openai(&executor))
        .static_instruction(StaticInstruction::new(vec![
            StaticPart::Text("You fix parsers.".into()),
            StaticPart::InlineData {
                mime_type: "image/png".into(),
                data: b"png".to_vec(),
                display_name: Some("grammar.png".into()),
            },
            StaticPart::Text(String::new()),
            StaticPart::Text("Keep diffs small.".into()),
        ]))
        .instruction("Fix bugs in Rust.")
        .tool(Arc::new(tool))
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(agent)).await;
    executor.push(consult("c1", "Which file?"));
    advisor.push(openai::text("Read src/parse.rs."));
    executor.push(openai::text("Done."));
    h.say("the parser drops commas").await.ok();

    let text = advisor_text(&advisor.last_request());
    assert!(
        text.contains("\n\nYou fix parsers.\nKeep diffs small.\n\nFix bugs in Rust.\n"),
        "the static texts a line each, then the instruction: {text}"
    );
    assert!(!text.contains("grammar.png"), "no file: {text}");
}

/// An executor whose only tool is the consult, with `max_uses` consults a turn.
async fn coder_with_turn_budget(executor: &FakeServer, advisor: &FakeServer, max_uses: u32) -> Harness {
    let tool = ModelConsultTool::new("model_consult", openai(advisor))
        .unwrap()
        .with_max_uses(max_uses)
        .unwrap();
    let agent = LlmAgentBuilder::new("coder")
        .model(openai(executor))
        .tool(Arc::new(tool))
        .build()
        .unwrap();
    Harness::new(Arc::new(agent)).await
}

/// Two consults in one model step: answered one after another in call order, the second
/// counting after the first (as ADK's second waits for the first and reads its count),
/// and the step's event stores the higher count.
#[tokio::test]
async fn two_consults_in_one_step_are_answered_in_call_order_each_counting_after_the_other() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let h = coder_with_turn_budget(&executor, &advisor, 2).await;
    let both = |first: &str, second: &str| {
        openai::tool_calls(&[
            (
                first,
                "model_consult",
                json!({"question": format!("Question {first}?")}),
            ),
            (
                second,
                "model_consult",
                json!({"question": format!("Question {second}?")}),
            ),
        ])
    };

    executor.push(both("c1", "c2"));
    advisor.push(openai::text("Advice one."));
    advisor.push(openai::text("Advice two."));
    executor.push(both("c3", "c4"));
    executor.push(openai::text("Done."));
    h.say("plan the fix").await.ok();

    let asked = advisor.requests();
    assert_eq!(asked.len(), 2, "the turn's budget is two");
    assert!(advisor_text(&asked[0]).contains("Question c1?"));
    assert!(advisor_text(&asked[1]).contains("Question c2?"));
    // Neither is shown the other, unanswered when the step began.
    assert!(!advisor_text(&asked[1]).contains("Question c1?"));
    let requests = executor.requests();
    let answer_in = |request: usize, id: &str| -> Value {
        let message = messages(&requests[request])
            .into_iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no answer of {id}"));
        serde_json::from_str(message["content"].as_str().unwrap()).unwrap()
    };
    let (first, second) = (answer_in(1, "c1"), answer_in(1, "c2"));
    assert_eq!(first["guidance"], "Advice one.");
    assert_eq!(first["consults"]["used_this_turn"], 1);
    assert_eq!(second["guidance"], "Advice two.");
    assert_eq!(second["consults"]["used_this_turn"], 2);
    assert_eq!(second["consults"]["remaining"], 0);
    // The next step's two are over the turn's budget, both seeing the stored count.
    for id in ["c3", "c4"] {
        let over = answer_in(2, id);
        assert_eq!(over["status"], "limit_reached", "{over}");
        assert_eq!(over["consults"]["used_this_turn"], 2, "{over}");
    }
    let state = h.session().await.state.as_map().clone();
    assert_eq!(state.get("model_consult:model_consult:session_uses"), Some(&json!(2)));
    h.verify_log(&HashMap::new()).await;
}

/// With a budget of one, the step's second consult waits for the first and is over the
/// budget after it (ADK's answer), not refused for running beside it.
#[tokio::test]
async fn a_second_consult_in_a_step_over_the_budget_reads_the_firsts_count() {
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let h = coder_with_turn_budget(&executor, &advisor, 1).await;
    executor.push(openai::tool_calls(&[
        ("c1", "model_consult", json!({"question": "First?"})),
        ("c2", "model_consult", json!({"question": "Second?"})),
    ]));
    advisor.push(openai::text("Advice."));
    executor.push(openai::text("Done."));
    h.say("plan the fix").await.ok();

    assert_eq!(advisor.requests().len(), 1);
    assert_eq!(answer(&executor, "c1")["status"], "ok");
    let second = answer(&executor, "c2");
    assert_eq!(second["status"], "limit_reached", "{second}");
    assert!(
        second["message"]
            .as_str()
            .unwrap()
            .contains("for this turn is exhausted (1 of 1 used)"),
        "{second}"
    );
    assert_eq!(second["consults"]["used_this_turn"], 1, "{second}");
    assert_eq!(second["consults"]["used_this_session"], 1, "{second}");
}
