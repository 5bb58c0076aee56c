//! ADK 2's delegation modes (`mode: single_turn`, `mode: task`): sub-agents their parent
//! calls as tools, run in the parent's session on a branch of their own.

use crate::common::*;
use adk_grpc_agents::{LlmAgentBuilder, RunOptions, Runner, RunnerConfig, SequentialAgent};
use adk_grpc_core::{Agent, AgentMode, CompactionConfig, Content, Event};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_store::InMemorySessionLease;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;

/// The text of every message a request sent (whatever the message's shape).
fn message_texts(request: &adk_grpc_models::testing::RecordedRequest) -> Vec<String> {
    messages(request)
        .iter()
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn tool_names(request: &adk_grpc_models::testing::RecordedRequest) -> Vec<String> {
    request.json()["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn by(events: &[Event], author: &str) -> Vec<Event> {
    events.iter().filter(|e| e.author == author).cloned().collect()
}

#[tokio::test]
async fn a_single_turn_agent_is_a_tool_run_in_the_callers_session_on_its_own_branch() {
    let host_server = FakeServer::start().await;
    let summarizer_server = FakeServer::start().await;
    let summarizer = LlmAgentBuilder::new("summarizer")
        .description("Summarises a text.")
        .mode(AgentMode::SingleTurn)
        .output_key("summary")
        .model(openai(&summarizer_server))
        .build()
        .unwrap();
    let helper = LlmAgentBuilder::new("helper")
        .description("Chats.")
        .model(openai(&host_server))
        .build()
        .unwrap();
    let host = LlmAgentBuilder::new("host")
        .model(openai(&host_server))
        .sub_agents([Arc::new(summarizer) as Arc<dyn Agent>, Arc::new(helper)])
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(host)).await;
    host_server.push(openai::tool_calls(&[(
        "c1",
        "summarizer",
        json!({"request": "Summarise: the cat sat."}),
    )]));
    summarizer_server.push(openai::text("A cat sat."));
    host_server.push(openai::text("Here it is: A cat sat."));
    let run = h.say("Please summarise my note").await.ok();

    // The parent is offered the agent as a tool (after transfer_to_agent, which ADK declares
    // before an agent's tools); it is no transfer target.
    let first = host_server.requests()[0].json();
    assert_eq!(
        tool_names(&host_server.requests()[0]),
        ["transfer_to_agent", "summarizer"]
    );
    let targets = first["tools"][0]["function"]["parameters"]["properties"]["agent_name"]["enum"].clone();
    assert_eq!(targets, json!(["helper"]), "{first}");
    assert_eq!(
        first["tools"][1]["function"]["parameters"]["required"],
        json!(["request"])
    );
    // The agent starts from the call's `request` text, told nothing more (as ADK 2.13's
    // single-turn tool runs it), and sees nothing of its caller's conversation.
    let asked = message_texts(&summarizer_server.last_request()).join("\n");
    assert!(asked.contains("Summarise: the cat sat."), "{asked}");
    assert!(!asked.contains("will not receive"), "{asked}");
    assert!(!asked.contains("Please summarise my note"), "{asked}");

    // Its reply is recorded in the session on its branch, then answers the call.
    let complete: Vec<Event> = run.complete().into_iter().cloned().collect();
    let reply = &by(&complete, "summarizer")[0];
    assert_eq!(reply.branch, "summarizer@c1");
    assert_eq!(reply.actions.state_delta.get("summary"), Some(&json!("A cat sat.")));
    let answer = complete
        .iter()
        .find(|e| !function_responses(e).is_empty())
        .expect("the call is answered");
    assert_eq!((answer.author.as_str(), answer.branch.as_str()), ("host", ""));
    assert_eq!(
        function_responses(answer),
        [(
            "c1".to_string(),
            "summarizer".to_string(),
            json!({"result": "A cat sat."})
        )]
    );
    assert_eq!(run.texts().last().unwrap(), "Here it is: A cat sat.");
    // The caller's next request has the answer, not the agent's turn as context.
    let second = message_texts(&host_server.last_request()).join("\n");
    assert!(!second.contains("[summarizer] said"), "{second}");
    let session = h.verify_log(&Default::default()).await;
    assert!(
        session
            .events
            .iter()
            .any(|e| e.author == "summarizer" && e.branch == "summarizer@c1")
    );
    assert_eq!(session.state.as_map().get("summary"), Some(&json!("A cat sat.")));
}

fn intake(server: &FakeServer) -> Arc<dyn Agent> {
    Arc::new(
        LlmAgentBuilder::new("intake")
            .description("Asks the party size.")
            .mode(AgentMode::Task)
            .output_schema(json!({
                "type": "object",
                "properties": {"guests": {"type": "integer"}},
                "required": ["guests"]
            }))
            .output_key("party")
            .model(openai(server))
            .build()
            .unwrap(),
    )
}

fn host_of(server: &FakeServer, task: Arc<dyn Agent>) -> Arc<dyn Agent> {
    Arc::new(
        LlmAgentBuilder::new("host")
            .model(openai(server))
            .sub_agents([task])
            .build()
            .unwrap(),
    )
}

async fn run_on(runner: &Runner, text: &str) -> Vec<Event> {
    let mut stream = runner
        .run(
            USER,
            SESSION,
            Content::new("user").with_text(text),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    events
}

#[tokio::test]
async fn a_task_agent_talks_with_the_user_across_turns_then_finish_task_answers_its_caller() {
    let host_server = FakeServer::start().await;
    let task_server = FakeServer::start().await;
    let h = Harness::new(host_of(&host_server, intake(&task_server))).await;

    // Turn 1: the host hands the work over; the task agent asks the user and waits.
    host_server.push(openai::tool_calls(&[(
        "t1",
        "intake",
        json!({"request": "Get the party size."}),
    )]));
    task_server.push(openai::text("For how many guests?"));
    let first = h.say("Book me a table").await.ok();
    assert_eq!(first.texts(), ["For how many guests?"]);
    let question = &by(&first.events, "intake")[0];
    assert_eq!(question.branch, "intake@t1");
    assert!(
        first.events.iter().all(|e| function_responses(e).is_empty()),
        "the call stays open"
    );
    assert_eq!(host_server.requests().len(), 1);
    let task_request = task_server.last_request().json();
    // As ADK offers them: the transfer back to its parent (without the transfer
    // instruction), then finish_task with its instruction.
    let task_tools: Vec<String> = tool_names(&task_server.last_request());
    assert_eq!(task_tools, ["transfer_to_agent", "finish_task"]);
    assert_eq!(
        task_request["tools"][0]["function"]["parameters"]["properties"]["agent_name"]["enum"],
        json!(["host"])
    );
    assert_eq!(
        task_request["tools"][1]["function"]["parameters"]["required"],
        json!(["guests"])
    );
    let task_prompt = system_prompt(&task_server.last_request());
    assert!(task_prompt.contains("call `finish_task` by itself"), "{task_request}");
    assert!(!task_prompt.contains("other agents to transfer to"), "{task_request}");
    assert!(
        task_request.get("response_format").is_none(),
        "a task's output goes through finish_task"
    );

    // Turn 2, on a runner that never saw turn 1 (everything is read from the log): the
    // reply goes to the task agent, which finishes (once with wrong arguments); the host
    // goes on in the same turn with the output.
    let lease = Arc::new(InMemorySessionLease::new());
    let restarted = Runner::new(RunnerConfig::new(
        APP,
        host_of(&host_server, intake(&task_server)),
        h.sessions.clone(),
        lease,
    ))
    .unwrap();
    task_server.push(openai::tool_calls(&[("f1", "finish_task", json!({"guests": "four"}))]));
    task_server.push(openai::tool_calls(&[("f2", "finish_task", json!({"guests": 4}))]));
    host_server.push(openai::text("Booked for 4."));
    let second = run_on(&restarted, "Four of us").await;

    let asked = message_texts(&task_server.requests()[1]);
    let from_user: Vec<&String> = asked.iter().skip(1).collect();
    // The call's arguments as ADK writes them (`json.dumps`).
    assert_eq!(
        from_user.first().map(|s| s.as_str()),
        Some(r#"{"request": "Get the party size."}"#)
    );
    assert!(asked.iter().any(|m| m == "For how many guests?"), "{asked:?}");
    assert!(asked.iter().any(|m| m == "Four of us"), "{asked:?}");
    assert!(!asked.iter().any(|m| m.contains("Book me a table")), "{asked:?}");

    let finishes: Vec<(String, String, Value)> = by(&second, "intake").iter().flat_map(function_responses).collect();
    assert_eq!(finishes[0].0, "f1");
    assert!(
        finishes[0].2["error"].as_str().unwrap().contains("guests"),
        "{finishes:?}"
    );
    assert_eq!(
        finishes[1],
        ("f2".into(), "finish_task".into(), json!({"result": "Task completed."}))
    );
    // The output answers the host's call, authored by the user as ADK 2 stores it.
    let answer: Vec<(String, String, Value)> = by(&second, "user").iter().flat_map(function_responses).collect();
    assert_eq!(answer, [("t1".into(), "intake".into(), json!({"guests": 4}))]);
    let last = second.last().unwrap();
    assert_eq!(
        (last.author.as_str(), last.content().and_then(Content::text)),
        ("host", Some("Booked for 4.".into()))
    );
    // The host saw the output, never the task's conversation.
    let host_asked = message_texts(&host_server.last_request()).join("\n");
    assert!(
        !host_asked.contains("Four of us") && !host_asked.contains("For how many"),
        "{host_asked}"
    );

    let session = h.session().await;
    let user_reply = session
        .events
        .iter()
        .find(|e| e.author == "user" && e.content().and_then(Content::text).as_deref() == Some("Four of us"))
        .unwrap();
    // The reply is the task's, as ADK 2 stores it: on no branch, in the task's scope
    // (the call's id), in the task's invocation; the task's events in its scope too.
    assert_eq!(
        (user_reply.branch.as_str(), user_reply.isolation_scope.as_str()),
        ("", "t1")
    );
    assert_eq!(user_reply.invocation_id, question.invocation_id);
    assert!(
        second.iter().all(|e| e.invocation_id == question.invocation_id),
        "the turn goes on with the task's invocation"
    );
    assert_eq!(question.isolation_scope, "t1");
    let done = second.iter().find(|e| e.output.is_some()).expect("the task's output");
    assert_eq!(
        (done.author.as_str(), done.output.clone()),
        ("intake", Some(json!({"guests": 4})))
    );
    assert_eq!(session.state.as_map().get("party"), Some(&json!({"guests": 4})));

    // The task is over: the next message goes to the host again.
    host_server.push(openai::text("Anything else?"));
    let third = run_on(&restarted, "Thanks").await;
    assert_eq!(third.last().unwrap().author, "host");
    let session = h.session().await;
    assert_eq!(session.events.as_slice().last().unwrap().branch, "");
}

/// A task agent of its own task agent: the inner one asks the user, whose answer joins the
/// inner task (the latest open one), and each `finish_task` answers its caller in turn, all
/// in the outer task's invocation; a single-turn agent the outer task calls runs in the
/// task's scope, given the task's input first and told no user will reply; as ADK 2 runs
/// it (the conformance case `task_nested`).
#[tokio::test]
async fn a_task_inside_a_task_takes_the_users_answer_and_each_finish_answers_its_caller() {
    let host_server = FakeServer::start().await;
    let planner_server = FakeServer::start().await;
    let guests_server = FakeServer::start().await;
    let menu_server = FakeServer::start().await;
    let menu: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("menu")
            .description("Suggests a dish.")
            .mode(AgentMode::SingleTurn)
            .model(openai(&menu_server))
            .build()
            .unwrap(),
    );
    let guests: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("guests")
            .description("Asks how many guests come.")
            .mode(AgentMode::Task)
            .model(openai(&guests_server))
            .build()
            .unwrap(),
    );
    let planner: Arc<dyn Agent> = Arc::new(
        LlmAgentBuilder::new("planner")
            .description("Plans a dinner.")
            .mode(AgentMode::Task)
            .output_key("plan")
            .model(openai(&planner_server))
            .sub_agents([menu, guests])
            .build()
            .unwrap(),
    );
    let h = Harness::new(host_of(&host_server, planner)).await;

    host_server.push(openai::tool_calls(&[(
        "p1",
        "planner",
        json!({"request": "Plan a dinner."}),
    )]));
    planner_server.push(openai::tool_calls(&[(
        "m1",
        "menu",
        json!({"request": "Pick a dish."}),
    )]));
    menu_server.push(openai::text("Roast chicken."));
    planner_server.push(openai::tool_calls(&[(
        "g1",
        "guests",
        json!({"request": "Count the guests."}),
    )]));
    guests_server.push(openai::text("How many guests?"));
    let first = h.say("Plan a dinner for Friday").await.ok();
    assert_eq!(first.texts(), ["Roast chicken.", "How many guests?"]);
    // As ADK adds them: a task agent's finish_task before its task sub-agents.
    assert_eq!(
        tool_names(&planner_server.last_request()),
        ["transfer_to_agent", "finish_task", "menu", "guests"]
    );
    let menu_asked = message_texts(&menu_server.last_request());
    let [task_input, request] = menu_asked.as_slice() else {
        panic!("the task's input, then the call's: {menu_asked:?}");
    };
    assert!(
        task_input.contains(r#"{\"request\": \"Plan a dinner.\"}"#)
            && task_input.contains("You will not receive any user replies"),
        "{task_input}"
    );
    assert_eq!(request, "Pick a dish.");
    let dish = &by(&first.events, "menu")[0];
    assert_eq!(
        (dish.branch.as_str(), dish.isolation_scope.as_str()),
        ("planner@p1.menu@m1", "p1")
    );
    let question = &by(&first.events, "guests")[0];
    assert_eq!(
        (question.branch.as_str(), question.isolation_scope.as_str()),
        ("planner@p1.guests@g1", "g1")
    );

    guests_server.push(openai::tool_calls(&[("f1", "finish_task", json!({"result": "six"}))]));
    planner_server.push(openai::tool_calls(&[(
        "f2",
        "finish_task",
        json!({"result": "Dinner for six."}),
    )]));
    host_server.push(openai::text("Your dinner for six is planned."));
    let second = h.say("Six of us").await.ok();

    // The answer went to the inner task, which alone saw it; the outer task saw only its
    // call's answer.
    let guests_asked = message_texts(&guests_server.last_request());
    assert!(guests_asked.iter().any(|m| m == "Six of us"), "{guests_asked:?}");
    let planner_asked = message_texts(&planner_server.last_request()).join("\n");
    assert!(
        !planner_asked.contains("Six of us") && !planner_asked.contains("How many guests?"),
        "{planner_asked}"
    );
    assert!(planner_asked.contains("six"), "{planner_asked}");
    let answers: Vec<(String, String, Value)> =
        by(&second.events, "user").iter().flat_map(function_responses).collect();
    assert_eq!(
        answers,
        [
            ("g1".into(), "guests".into(), json!({"result": "six"})),
            ("p1".into(), "planner".into(), json!({"result": "Dinner for six."})),
        ]
    );
    assert_eq!(second.texts().last().unwrap(), "Your dinner for six is planned.");
    assert!(
        second.events.iter().all(|e| e.invocation_id == question.invocation_id),
        "the turn goes on with the tasks' invocation"
    );

    let session = h.session().await;
    let scope_of = |author: &str, text: Option<&str>| {
        session
            .events
            .iter()
            .find(|e| e.author == author && (text.is_none() || e.content().and_then(Content::text).as_deref() == text))
            .map(|e| (e.branch.clone(), e.isolation_scope.clone()))
            .unwrap()
    };
    assert_eq!(scope_of("user", Some("Six of us")), ("".into(), "g1".into()));
    assert_eq!(scope_of("planner", None), ("planner@p1".into(), "p1".into()));
    assert_eq!(
        session.state.as_map().get("plan"),
        Some(&json!({"result": "Dinner for six."}))
    );
}

/// The error of what must be refused.
#[track_caller]
fn refusal<T>(result: adk_grpc_core::Result<T>, what: &str) -> String {
    match result {
        Ok(_) => panic!("{what} was not refused"),
        Err(e) => e.to_string(),
    }
}

/// A task conversation longer than the turn's context budget: the task's call falls out of
/// the newest events a turn reads, and the turn reads back to it, so the task keeps the
/// conversation and its output still answers the call.
#[tokio::test]
async fn a_task_longer_than_the_context_budget_keeps_the_conversation() {
    long_task(false).await;
}

/// The same when compaction summarises the task's call away: the turn reads the whole log.
#[tokio::test]
async fn a_task_whose_call_was_compacted_keeps_the_conversation() {
    long_task(true).await;
}

async fn long_task(compacted: bool) {
    let host_server = FakeServer::start().await;
    let task_server = FakeServer::start().await;
    let summarizer = FakeServer::start().await;
    let h = Harness::new(host_of(&host_server, intake(&task_server))).await;
    let mut config = RunnerConfig::new(
        APP,
        host_of(&host_server, intake(&task_server)),
        h.sessions.clone(),
        Arc::new(InMemorySessionLease::new()),
    );
    config.context_budget_tokens = Some(60);
    if compacted {
        for _ in 0..10 {
            summarizer.push(openai::text("The user is booking a table."));
        }
        config = config.with_compaction(CompactionConfig::new(1, openai(&summarizer)));
    }
    let runner = Runner::new(config).unwrap();

    host_server.push(openai::tool_calls(&[(
        "t1",
        "intake",
        json!({"request": "Get the party size."}),
    )]));
    task_server.push(openai::text("How many guests?"));
    run_on(&runner, "Book me a table").await;
    let long_reply = "Let me think about who is coming, it is a long story. ".repeat(4);
    for _ in 0..3 {
        task_server.push(openai::text("Sorry, how many?"));
        let turn = run_on(&runner, &long_reply).await;
        assert_eq!(by(&turn, "intake").len(), 1, "the task answered: {turn:?}");
    }
    task_server.push(openai::tool_calls(&[("f1", "finish_task", json!({"guests": 4}))]));
    host_server.push(openai::text("Booked for 4."));
    let last = run_on(&runner, "Four.").await;

    let answer: Vec<(String, String, Value)> = by(&last, "user").iter().flat_map(function_responses).collect();
    assert_eq!(answer, [("t1".into(), "intake".into(), json!({"guests": 4}))]);
    assert_eq!(
        last.last().and_then(|e| e.content()).and_then(Content::text).as_deref(),
        Some("Booked for 4.")
    );
    assert_eq!(
        host_server.requests().len(),
        2,
        "the host was asked only to call and to answer"
    );
    if compacted {
        let session = h.session().await;
        assert!(
            session.events.iter().any(|e| e.actions.compaction.is_some()),
            "the call was summarised"
        );
    }
}

#[tokio::test]
async fn what_cannot_be_is_refused() {
    let server = FakeServer::start().await;
    let chat = LlmAgentBuilder::new("chat").model(openai(&server)).build().unwrap();
    let refused = refusal(
        LlmAgentBuilder::new("intake")
            .mode(AgentMode::Task)
            .model(openai(&server))
            .sub_agents([Arc::new(chat) as Arc<dyn Agent>])
            .build(),
        "a task agent with a chat sub-agent",
    );
    assert!(
        refused
            .to_string()
            .contains("sub-agent chat must be of mode task or single_turn"),
        "{refused}"
    );

    let lease = || Arc::new(InMemorySessionLease::new());
    let sessions = Harness::new(host_of(&server, intake(&server))).await.sessions;
    let root = intake(&server);
    let refused = refusal(
        Runner::new(RunnerConfig::new(APP, root, sessions.clone(), lease())),
        "a task root",
    );
    assert!(
        refused.to_string().contains("root agent intake is of mode task"),
        "{refused}"
    );

    let steps = Arc::new(SequentialAgent::new("steps", vec![intake(&server)]));
    let refused = refusal(
        Runner::new(RunnerConfig::new(APP, steps, sessions, lease())),
        "a task agent of a workflow agent",
    );
    assert!(
        refused.to_string().contains("its parent steps is not an llm agent"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_client_tool_inside_a_single_turn_agent_pauses_the_run_and_its_answer_goes_on_through_the_caller() {
    let host_server = FakeServer::start().await;
    let checker_server = FakeServer::start().await;
    let checker = LlmAgentBuilder::new("checker")
        .description("Checks the booking with the manager.")
        .mode(AgentMode::SingleTurn)
        .model(openai(&checker_server))
        .tool(Arc::new(adk_grpc_agents::ClientTool::new(
            "ask_manager",
            "Asks the manager.",
        )))
        .build()
        .unwrap();
    let h = Harness::new(host_of(&host_server, Arc::new(checker))).await;
    host_server.push(openai::tool_calls(&[(
        "k1",
        "checker",
        json!({"request": "Table for 4?"}),
    )]));
    checker_server.push(openai::tool_calls(&[("m1", "ask_manager", json!({"q": "4 at 8?"}))]));
    let first = h.say("Book it").await.ok();
    let pause = &by(&first.events, "checker")[0];
    assert_eq!(
        (pause.branch.as_str(), pause.long_running_tool_ids.as_slice()),
        ("checker@k1", &["m1".to_string()][..])
    );
    assert!(first.events.iter().all(|e| function_responses(e).is_empty()));

    // The client's answer goes to the checker (on its branch) through the host, whose
    // call is answered with the checker's reply, and the host goes on.
    checker_server.push(openai::text("The manager says yes."));
    host_server.push(openai::text("Booked."));
    let second = h
        .send(
            function_response("m1", "ask_manager", json!({"answer": "yes"})),
            RunOptions::default(),
        )
        .await
        .ok();
    let shapes: Vec<(String, String)> = second
        .complete()
        .iter()
        .map(|e| (e.author.clone(), e.branch.clone()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("checker".to_string(), "checker@k1".to_string()),
            ("host".to_string(), String::new()),
            ("host".to_string(), String::new()),
        ]
    );
    let answer: Vec<(String, String, Value)> = by(&second.events, "host").iter().flat_map(function_responses).collect();
    assert_eq!(
        answer,
        [(
            "k1".into(),
            "checker".into(),
            json!({"result": "The manager says yes."})
        )]
    );
    assert_eq!(second.texts().last().unwrap(), "Booked.");
    let asked = message_texts(&checker_server.last_request()).join("\n");
    assert!(asked.contains("Table for 4?") && asked.contains("yes"), "{asked}");
    let session = h.verify_log(&Default::default()).await;
    let answer_event = session
        .events
        .iter()
        .find(|e| e.author == "user" && !function_responses(e).is_empty())
        .unwrap();
    assert_eq!(answer_event.branch, "checker@k1");
}

#[tokio::test]
async fn a_callers_reply_in_a_single_turn_agents_place_is_held_to_the_agents_output_schema() {
    let host_server = FakeServer::start().await;
    let notes_server = FakeServer::start().await;
    let notes = LlmAgentBuilder::new("notes")
        .description("Says what a note asks for.")
        .mode(AgentMode::SingleTurn)
        .output_schema(json!({
            "type": "object",
            "properties": {"asks": {"type": "string"}},
            "required": ["asks"]
        }))
        .output_key("note")
        .model(openai(&notes_server))
        .build()
        .unwrap();
    let host = LlmAgentBuilder::new("host")
        .model(openai(&host_server))
        .sub_agents([Arc::new(notes) as Arc<dyn Agent>])
        .build()
        .unwrap();
    let h = Harness::new(Arc::new(host)).await;
    let hand_back = |id: &str| openai::tool_calls(&[(id, "transfer_to_agent", json!({"agent_name": "host"}))]);

    // JSON of the schema: the value is the agent's output, in its output_key and as the
    // event's `output` (ADK's node output).
    host_server.push(openai::tool_calls(&[(
        "c1",
        "notes",
        json!({"request": "A quiet table."}),
    )]));
    notes_server.push(hand_back("t1"));
    host_server.push(openai::text(r#"{"asks": "a quiet table"}"#));
    host_server.push(openai::text("I will book it."));
    host_server.push(openai::text("Booked."));
    let run = h.say("Here is my note").await.ok();
    let complete: Vec<Event> = run.complete().into_iter().cloned().collect();
    let in_its_place = by(&complete, "host")
        .into_iter()
        .find(|e| e.branch == "notes@c1" && e.actions.state_delta.contains_key("note"))
        .expect("the caller's reply in the agent's place is its output");
    assert_eq!(in_its_place.output, Some(json!({"asks": "a quiet table"})));
    assert_eq!(
        in_its_place.actions.state_delta.get("note"),
        Some(&json!({"asks": "a quiet table"}))
    );

    // A reply the schema does not take fails the run, as the agent's own would (ADK's
    // validation of the node's output raises), rather than being stored as text.
    host_server.push(openai::tool_calls(&[(
        "c2",
        "notes",
        json!({"request": "A window seat."}),
    )]));
    notes_server.push(hand_back("t2"));
    host_server.push(openai::text("A window seat."));
    let error = h.say("Another note").await.error.expect("a misfit reply fails the run");
    let message = error.to_string();
    assert!(
        message.contains("output_schema") && message.contains("not JSON") && message.contains("notes"),
        "{message}"
    );
}
