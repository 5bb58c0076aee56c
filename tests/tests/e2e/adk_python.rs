//! ADK Python on this suite, read from Rust: a real `adk-server` on a real
//! `redis-server`; a real ADK `Runner` (google-adk, in the venv scripts/setup-python.sh
//! makes) runs the multi-agent app of clients/python/tests/adk_app.py through the Python
//! adapter (adk_client.adk); then the Rust client reads the same session, state and
//! artifact and finds what ADK stored.

use adk_grpc_client::{RemoteArtifactService, RemoteSessionService};
use adk_grpc_core::artifact::LoadRequest;
use adk_grpc_core::session::{GetRequest, UserStateRequest};
use adk_grpc_core::{ArtifactService, PartKind, SessionService};
use adk_grpc_e2e::venv_python as python;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn run_python(python: &Path, dir: &Path, args: &[&str]) -> String {
    let output = Command::new(python)
        .args(args)
        .current_dir(dir)
        .env("PYTHONPATH", "src:tests")
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "python {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// An ADK float timestamp (seconds) of the events the Python side printed.
fn seconds(value: &Value) -> f64 {
    value.as_f64().expect("a float timestamp")
}

#[tokio::test]
async fn an_adk_python_runner_stores_a_multi_agent_run_that_rust_reads_back() {
    let client_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let python = python();
    // The stubs are generated, not committed: make them for this venv's protobuf.
    run_python(&python, &client_dir, &["generate.py"]);

    let redis = RedisServer::start().await;
    let server = ServiceProcess::spawn("adk-server", &["--store-url".into(), redis.url()], &[]).await;
    let target = server.endpoint().trim_start_matches("http://").to_string();
    let (app, user, session_id) = ("trip-planner", "alice", "trip-1");

    let printed = run_python(
        &python,
        &client_dir,
        &[
            "tests/adk_app.py",
            "--target",
            &target,
            "--app",
            app,
            "--user",
            user,
            "--session",
            session_id,
        ],
    );
    let adk_events: Vec<Value> = serde_json::from_str(printed.trim()).expect("the events ADK produced, as JSON");
    assert_eq!(
        adk_events.len(),
        5,
        "transfer call and response, tool call and response, answer"
    );

    let sessions = RemoteSessionService::connect(server.endpoint()).await.expect("connect");
    let session = sessions
        .get(GetRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session_id.into(),
            ..Default::default()
        })
        .await
        .expect("the session ADK created");
    let events = session.events.as_slice();
    // The user's message first, then exactly the events ADK's runner produced.
    assert_eq!(events.len(), 6);
    assert_eq!(events[0].author, "user");
    for (stored, adk) in events[1..].iter().zip(&adk_events) {
        assert_eq!(stored.id, adk["id"].as_str().unwrap());
        assert_eq!(stored.author, adk["author"].as_str().unwrap());
        assert_eq!(stored.invocation_id, adk["invocation_id"].as_str().unwrap());
        let stamp = stored.timestamp.timestamp() as f64 + f64::from(stored.timestamp.timestamp_subsec_nanos()) / 1e9;
        assert!(
            (stamp - seconds(&adk["timestamp"])).abs() < 1e-6,
            "timestamp of {}",
            stored.id
        );
    }
    let kinds: Vec<String> = events[1..]
        .iter()
        .map(
            |e| match &e.llm_response.content.as_ref().expect("content").parts[0].kind {
                PartKind::FunctionCall { name, .. } => format!("call {name}"),
                PartKind::FunctionResponse { function_response, .. } => format!("response {}", function_response.name),
                PartKind::Text { text } => text.clone(),
                other => panic!("unexpected part {other:?}"),
            },
        )
        .collect();
    assert_eq!(
        kinds,
        [
            "call transfer_to_agent",
            "response transfer_to_agent",
            "call book_room",
            "response book_room",
            "Booked 2 nights at Hotel Sakura."
        ]
    );
    assert_eq!(events[2].actions.transfer_to_agent.as_deref(), Some("booker"));
    // The tool's artifact, in this suite's 1-based versions.
    assert_eq!(events[4].actions.artifact_delta.get("receipt.txt"), Some(&1));
    let answer = &events[5].llm_response;
    assert_eq!(answer.model_version.as_deref(), Some("scripted-1"));
    let usage = answer.usage_metadata.as_ref().expect("usage metadata");
    assert_eq!(usage.candidates_token_count, Some(0), "0 is set, not unset");
    // State: scopes merged by the server, ADK's output_key, no temp: key anywhere.
    let state = session.state.into_inner();
    assert_eq!(
        state.get("booking_summary"),
        Some(&json!("Booked 2 nights at Hotel Sakura."))
    );
    assert_eq!(state.get("user:last_hotel"), Some(&json!("Hotel Sakura")));
    assert_eq!(state.get("app:bookings"), Some(&json!(1)));
    assert_eq!(state.get("step"), Some(&json!(1)));
    assert!(state.keys().all(|k| !k.starts_with("temp:")));
    assert!(
        events
            .iter()
            .all(|e| e.actions.state_delta.keys().all(|k| !k.starts_with("temp:")))
    );
    let user_state = sessions
        .user_state(UserStateRequest {
            app_name: app.into(),
            user_id: user.into(),
        })
        .await
        .expect("user state");
    assert_eq!(user_state.get("last_hotel"), Some(&json!("Hotel Sakura")));
    assert_eq!(user_state.get("name"), Some(&json!("Alice")));

    let artifacts = RemoteArtifactService::connect(server.endpoint())
        .await
        .expect("connect");
    let receipt = artifacts
        .load(LoadRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session_id.into(),
            file_name: "receipt.txt".into(),
            version: None,
        })
        .await
        .expect("the receipt the tool saved");
    assert_eq!(receipt.metadata.version, 1);
    assert_eq!(receipt.part.text(), Some("2 nights at Hotel Sakura"));
}
