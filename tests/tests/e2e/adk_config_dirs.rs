//! ADK agent-config directories (`root_agent.yaml`, what `adk create --type=config`
//! writes) served by the real binaries: `adk-runner-server --agents <dir>` on a real
//! redis-server and `adk-server --agents <dir>`, their model strings mapped to the
//! fake OpenAI and Gemini servers through the SDKs' own variables
//! (`OPENAI_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`), a reply read over gRPC.

use adk_grpc_e2e::runs::{self, text_of, user_text};
use adk_grpc_e2e::{spawn_session_server, venv_python};
use adk_grpc_models::testing::{FakeServer, gemini, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{RedisServer, ServiceProcess};
use std::path::Path;

fn write(dir: &Path, path: &str, contents: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
    std::fs::write(path, contents).expect("write");
}

fn envs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn a_hand_written_adk_config_dir_runs_on_the_runner_server_over_redis() {
    let provider = FakeServer::start().await;
    let agents = tempfile::tempdir().expect("temp dir");
    // A directory of apps, as `adk web` reads: `helpdesk` is one of them.
    write(
        agents.path(),
        "helpdesk/root_agent.yaml",
        "agent_class: SequentialAgent\nname: desk\nsub_agents:\n  - config_path: agents/greeter.yaml\n",
    );
    write(
        agents.path(),
        "helpdesk/agents/greeter.yaml",
        "name: greeter\nmodel: openai/fake-model\ninstruction: Greet the user warmly.\noutput_key: greeting\n",
    );
    let redis = RedisServer::start().await;
    let args = [
        "--store-url".to_string(),
        redis.url(),
        "--agents".to_string(),
        agents.path().display().to_string(),
    ];
    let env = envs(&[("OPENAI_BASE_URL", provider.url()), ("OPENAI_API_KEY", "sk-adk-dir")]);
    let runner = ServiceProcess::spawn("adk-runner-server", &args, &env).await;
    let mut client = AgentRunnerClient::connect(runner.endpoint()).await.expect("connect");

    let app = client
        .get_app(pb::GetAppRequest {
            app_name: "helpdesk".into(),
        })
        .await
        .expect("GetApp")
        .into_inner();
    let root = app.root_agent.expect("a root agent");
    assert_eq!((root.name.as_str(), root.kind.as_str()), ("desk", "sequential"));
    let greeter = &root.sub_agents[0];
    assert_eq!(
        (greeter.name.as_str(), greeter.kind.as_str(), greeter.model.as_str()),
        ("greeter", "llm", "fake-model")
    );

    provider.push(openai::text("Hello there!"));
    let (events, status) = runs::run_to_end(
        &mut client,
        runs::run_request("helpdesk", "alice", "s1", user_text("Hi")),
    )
    .await;
    assert!(status.is_none(), "{status:?}\n{}", runner.tail_log(30));
    // An agent-config directory is an app not marked resumable, as `adk web` runs it:
    // ADK streams and stores no position of the sequence, so the reply is the last event.
    let last = events.last().expect("a reply");
    assert_eq!(
        (last.author.as_str(), text_of(last).as_str()),
        ("greeter", "Hello there!"),
        "{events:#?}"
    );
    assert!(
        events.iter().all(|e| e
            .actions
            .as_ref()
            .is_none_or(|a| a.agent_state.is_none() && a.end_of_agent.is_none())),
        "{events:#?}"
    );
    let request = provider.last_request();
    assert_eq!(request.header("authorization"), Some("Bearer sk-adk-dir"));
    let body = request.json();
    assert_eq!(body["model"], "fake-model");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .is_some_and(|system| system.contains("Greet the user warmly.")),
        "the instruction is the system message: {body}"
    );
    // output_key stored the reply in the session's state, in Redis.
    let sessions = spawn_session_server(&redis.url(), &[]).await;
    let session = runs::get_session(sessions.endpoint(), "helpdesk", "alice", "s1").await;
    let state = adk_grpc_core::convert::map_from_struct("state", session.state.as_ref()).unwrap();
    assert_eq!(state["greeting"], "Hello there!");
}

#[tokio::test]
async fn a_dir_made_by_adk_create_runs_on_adk_server_with_its_gemini_model() {
    let work = tempfile::tempdir().expect("temp dir");
    let output = std::process::Command::new(venv_python())
        .args([
            "-m",
            "google.adk.cli",
            "create",
            "--type=config",
            "--model",
            "gemini-2.5-flash",
        ])
        .args(["--api_key", "not-used", "my_app"])
        .current_dir(work.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run adk create");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let app_dir = work.path().join("my_app");
    let written = std::fs::read_to_string(app_dir.join("root_agent.yaml")).expect("root_agent.yaml");
    let instruction = written
        .lines()
        .find_map(|line| line.strip_prefix("instruction: "))
        .expect("adk create writes an instruction")
        .to_string();

    let provider = FakeServer::start().await;
    let args = ["--agents".to_string(), app_dir.display().to_string()];
    let env = envs(&[("GOOGLE_GEMINI_BASE_URL", provider.url()), ("GOOGLE_API_KEY", "g-key")]);
    let server = ServiceProcess::spawn("adk-server", &args, &env).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");

    provider.push(gemini::text("Paris."));
    let (events, status) = runs::run_to_end(
        &mut client,
        runs::run_request("my_app", "bob", "s1", user_text("Capital of France?")),
    )
    .await;
    assert!(status.is_none(), "{status:?}\n{}", server.tail_log(30));
    let last = events.last().expect("a reply");
    assert_eq!((last.author.as_str(), text_of(last).as_str()), ("root_agent", "Paris."));
    let request = provider.last_request();
    assert_eq!(request.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(request.header("x-goog-api-key"), Some("g-key"));
    let system = request.json()["systemInstruction"]["parts"][0]["text"].clone();
    assert!(
        system.as_str().is_some_and(|s| s.contains(&instruction)),
        "the instruction adk create wrote ({instruction:?}) is the system instruction: {system}"
    );
}

#[tokio::test]
async fn a_dir_with_python_code_references_stops_the_server_naming_file_and_field() {
    let agents = tempfile::tempdir().expect("temp dir");
    write(
        agents.path(),
        "root_agent.yaml",
        "name: a\nmodel: gemini-2.5-flash\ninstruction: Hi.\nsub_agents: [{config_path: w.yaml}]\n",
    );
    write(
        agents.path(),
        "w.yaml",
        "name: w\ninstruction: W.\ntools:\n  - name: my_tools.lookup\nbefore_model_callbacks:\n  - name: cb.guard\n",
    );
    let output = std::process::Command::new(adk_grpc_testkit::workspace_bin("adk-runner-server"))
        .arg("--agents")
        .arg(agents.path())
        .env("GOOGLE_API_KEY", "k")
        .env_remove("ADK_AGENTS")
        .output()
        .expect("run adk-runner-server");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let dir = agents.path().display().to_string();
    for expected in [
        format!(r#"{dir}: w.yaml, agent "w": field "tools[0]": "my_tools.lookup" is a Python tool"#),
        format!(r#"{dir}: w.yaml, agent "w": field "before_model_callbacks": callbacks are Python code"#),
    ] {
        assert!(stderr.contains(&expected), "{expected}\nin:\n{stderr}");
    }
}
