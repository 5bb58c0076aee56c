//! `adk-bench memory-locomo` end to end: the real binary (with its own redis-server and
//! adk-session-server) on a small made-up conversation in LoCoMo's format, its answer,
//! judge and generation models one fake OpenAI server that records what it was sent and
//! answers by what each request asks.

use adk_grpc_e2e::runs::agents_file;
use adk_grpc_models::testing::{FakeReply, FakeServer, RecordedRequest, openai};
use adk_grpc_testkit::workspace_bin;
use serde_json::json;
use std::time::Duration;

/// Two sessions of Ann and Bo, and these questions.
fn locomo_file(qa: serde_json::Value) -> tempfile::NamedTempFile {
    let sample = json!([{
        "sample_id": "ann-bo",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."}
            ],
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "We moved to Lisbon last week."},
                {"speaker": "Bo", "dia_id": "D2:2", "text": "Send me photos of the river!"}
            ]
        },
        "qa": qa
    }]);
    agents_file(&sample.to_string())
}

/// The text of every message of a chat-completions request (system first).
fn messages(request: &RecordedRequest) -> String {
    let body = request.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .filter_map(|message| message["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

const ANSWER: &str = "You answer a question about a long conversation";
const JUDGE: &str = "You grade an answer";
const EXTRACT: &str = "You extract memories";

/// The requests whose instruction starts with `instruction`.
fn asked(provider: &FakeServer, instruction: &str) -> Vec<String> {
    provider
        .requests()
        .iter()
        .map(messages)
        .filter(|text| text.starts_with(instruction))
        .collect()
}

/// The fake's answers: the answer model says "Rex"; the judge finds the answers to the
/// questions about Rex and Lisbon CORRECT and the other WRONG; extraction makes one fact of
/// Bo's cello turn, with that turn as its source.
fn script(provider: &FakeServer) {
    provider.answer_with(|request| {
        let text = messages(request);
        let reply = if text.starts_with(JUDGE) {
            let correct = text.contains("Gold answer: Rex") || text.contains("Gold answer: Lisbon");
            openai::json_reply(&json!({"label": if correct { "CORRECT" } else { "WRONG" }}))
        } else if text.starts_with(EXTRACT) && text.contains("[D1:2]") {
            openai::json_reply(&json!({"facts": [{
                "fact": "Bo plays the cello, a string instrument",
                "topics": ["USER_PERSONAL_INFO"],
                "source_event_ids": ["D1:2"]
            }]}))
        } else if text.starts_with(EXTRACT) {
            openai::json_reply(&json!({"facts": []}))
        } else if text.starts_with(ANSWER) {
            openai::text("Rex")
        } else {
            openai::json_reply(&json!({"actions": []}))
        };
        FakeReply::json(reply)
    });
}

/// Runs `adk-bench memory-locomo` with `args`; its standard output (it must succeed).
async fn bench(args: &[&str]) -> String {
    // Brings the workspace's binaries up to date; adk-bench starts the server beside it.
    workspace_bin("adk-session-server");
    let run = tokio::process::Command::new(workspace_bin("adk-bench"))
        .arg("memory-locomo")
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("adk-bench memory-locomo finishes within 2 minutes")
        .expect("run adk-bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "adk-bench memory-locomo {args:?}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Each question of categories 1-4 is answered from the memories found (with the date of
/// their session) and judged against its gold answer; the J score is the share judged
/// CORRECT, per category and overall; category 5 is asked of no model.
#[tokio::test]
async fn the_bench_answers_from_the_memories_found_and_reports_the_judges_score() {
    let provider = FakeServer::start().await;
    script(&provider);
    let model = agents_file(&format!(
        "{{ provider: openai, model: fake-model, base_url: '{}/v1' }}",
        provider.url()
    ));
    // A question of each category; 5 (adversarial) is never asked.
    let data = locomo_file(json!([
        {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Bo start the cello?", "answer": "May 2023", "evidence": ["D1:2"], "category": 2},
        {"question": "Which city did Ann move to?", "answer": "Lisbon", "evidence": ["D2:1"], "category": 1},
        {"question": "What river did Bo swim in?", "adversarial_answer": "the Tagus", "evidence": ["D2:2"], "category": 5}
    ]));
    let (data, model) = (data.path().to_str().unwrap(), model.path().to_str().unwrap());
    let out = bench(&["--data", data, "--answer-model", model, "--judge-model", model]).await;

    for row in [
        "| 1 (multi-hop) | 1 | 100.0 % |",
        "| 2 (temporal) | 1 | 0.0 % |",
        "| 4 (single-hop) | 1 | 100.0 % |",
        "| all | 3 | 66.7 % |",
        "judge replies without a label (counted WRONG): 0",
    ] {
        assert!(out.contains(row), "{row:?} not in:\n{out}");
    }
    assert!(!out.contains("| 5 ("), "category 5 is not scored:\n{out}");
    let answers = asked(&provider, ANSWER);
    assert_eq!(answers.len(), 3, "{answers:#?}");
    let puppy = answers
        .iter()
        .find(|text| text.contains("Question: What is the name of Ann's puppy?"))
        .expect("the puppy question asked");
    assert!(
        puppy.contains("- [1:00 pm on 8 May, 2023] Ann: I adopted a puppy named Rex."),
        "the memory, with its session's date: {puppy}"
    );
    let judged = asked(&provider, JUDGE);
    assert_eq!(judged.len(), 3, "{judged:#?}");
    let city = judged
        .iter()
        .find(|text| text.contains("Question: Which city did Ann move to?"))
        .expect("the city answer judged");
    assert!(
        city.contains("Gold answer: Lisbon") && city.contains("Generated answer: Rex"),
        "{city}"
    );
    let all: Vec<String> = provider.requests().iter().map(messages).collect();
    assert!(
        !all.iter().any(|text| text.contains("river did Bo swim")),
        "category 5 was asked"
    );
}

/// With --memory-generation each session is given to GenerateMemories: the fact made of
/// Bo's cello turn is found by words only it has, counts for that turn (recall 100 % where
/// the raw turns alone find nothing), and is among the memories the answer model reads.
#[tokio::test]
async fn with_generation_a_fact_is_a_memory_that_counts_for_its_source_turns() {
    let provider = FakeServer::start().await;
    script(&provider);
    let model = agents_file(&format!(
        "{{ provider: openai, model: fake-model, base_url: '{}/v1' }}",
        provider.url()
    ));
    let generation = agents_file(&format!(
        "'*':\n  model: {{ provider: openai, model: fake-model, base_url: '{}/v1' }}\n",
        provider.url()
    ));
    let data = locomo_file(json!([
        {"question": "Who plays a string instrument?", "answer": "Bo", "evidence": ["D1:2"], "category": 4}
    ]));
    let paths = |file: &tempfile::NamedTempFile| file.path().to_str().unwrap().to_string();
    let (data, model, generation) = (paths(&data), paths(&model), paths(&generation));

    let raw = bench(&["--data", &data]).await;
    assert!(raw.contains("memories: raw turns\n"), "{raw}");
    assert!(
        raw.contains("| keywords (BM25) | 1 | 0.0 % / 0.0 % / 0.0 % |"),
        "no raw turn has the question's words:\n{raw}"
    );

    let generated = bench(&[
        "--data",
        &data,
        "--memory-generation",
        &generation,
        "--answer-model",
        &model,
        "--judge-model",
        &model,
    ])
    .await;
    assert!(
        generated.contains("memories: raw turns and generated facts"),
        "{generated}"
    );
    assert!(
        generated.contains("generation: 1 facts created, 0 updated, 0 deleted by GenerateMemories from 2 sessions"),
        "{generated}"
    );
    assert!(
        generated.contains("| keywords (BM25) | 1 | 100.0 % / 100.0 % / 100.0 % | 100.0 % / 100.0 % / 100.0 % |"),
        "the fact counts for its source turn D1:2:\n{generated}"
    );
    let extractions = asked(&provider, EXTRACT);
    assert_eq!(extractions.len(), 2, "one per session: {extractions:#?}");
    assert!(
        extractions[0].contains("[D1:2] Bo: Bo: Lovely! I started learning the cello."),
        "{}",
        extractions[0]
    );
    let answers = asked(&provider, ANSWER);
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert!(
        answers[0].contains("Bo plays the cello, a string instrument"),
        "the fact reaches the answer model: {}",
        answers[0]
    );
}
