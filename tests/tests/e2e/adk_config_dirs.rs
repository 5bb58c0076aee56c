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
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
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

/// The app `shop`: YAML naming Python tools and callbacks in the modules beside it,
/// written as an ADK user writes them.
fn python_shop(dir: &Path) {
    write(
        dir,
        "shop/root_agent.yaml",
        "name: clerk\nmodel: gemini-2.5-flash\ninstruction: Sell fruit.\ntools:\n  - name: shop.tools.add_to_cart\n  \
         - name: shop.tools.save_receipt\nbefore_model_callbacks:\n  - name: shop.callbacks.greet\n\
         before_tool_callbacks:\n  - name: shop.callbacks.upper_case_item\n",
    );
    write(
        dir,
        "shop/tools.py",
        r#"from google.adk.tools import ToolContext
from google.genai import types


def add_to_cart(item: str, count: int, tool_context: ToolContext) -> dict:
    """Adds an item to the cart."""
    cart = dict(tool_context.state.get("cart") or {})
    cart[item] = cart.get(item, 0) + count
    tool_context.state["cart"] = cart
    return {"cart": cart}


async def save_receipt(tool_context: ToolContext) -> str:
    """Saves the cart as receipt.txt."""
    cart = tool_context.state.get("cart") or {}
    text = "\n".join(f"{count} x {item}" for item, count in sorted(cart.items()))
    await tool_context.save_artifact("receipt.txt", types.Part(text=text))
    return "saved"
"#,
    );
    write(
        dir,
        "shop/callbacks.py",
        r#"from google.adk.models.llm_response import LlmResponse
from google.genai import types


def greet(callback_context, llm_request):
    last = llm_request.contents[-1]
    if last.role == "user" and last.parts[0].text == "hello":
        callback_context.state["user:greeted"] = True
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Welcome to the shop!")]))
    return None


def upper_case_item(tool, args, tool_context):
    if tool.name == "add_to_cart":
        args["item"] = args["item"].upper()
"#,
    );
}

/// `adk-server --agents <dir>` with the test venv's Python for the worker, its Gemini
/// model the fake `provider`.
async fn serve_with_python(dir: &Path, provider: &FakeServer) -> ServiceProcess {
    let env = envs(&[("GOOGLE_GEMINI_BASE_URL", provider.url()), ("GOOGLE_API_KEY", "g-key")]);
    let args = [
        "--agents".to_string(),
        dir.display().to_string(),
        "--python".to_string(),
        venv_python().display().to_string(),
    ];
    ServiceProcess::spawn("adk-server", &args, &env).await
}

/// The worker processes serving `app_dir` (their command line names it).
fn workers_of(app_dir: &Path) -> Vec<u32> {
    let needle = app_dir.display().to_string();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("adk_grpc_worker") && cmdline.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test]
async fn python_tools_and_callbacks_of_an_adk_config_dir_run_in_the_supervised_worker() {
    let provider = FakeServer::start().await;
    let agents = tempfile::tempdir().expect("temp dir");
    python_shop(agents.path());
    let app_dir = std::fs::canonicalize(agents.path().join("shop")).expect("canonical");
    let server = serve_with_python(&app_dir, &provider).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let run = |text: &str| runs::run_request("shop", "alice", "s1", user_text(text));

    // The before_model callback answers a greeting in the model's place.
    let (events, status) = runs::run_to_end(&mut client, run("hello")).await;
    assert!(status.is_none(), "{status:?}\n{}", server.tail_log(30));
    assert_eq!(text_of(events.last().expect("a reply")), "Welcome to the shop!");
    assert!(provider.requests().is_empty(), "the model was not asked");

    // The before_tool callback upper-cases the item; the tool writes state.
    provider.push(gemini::function_calls(&[(
        "add_to_cart",
        serde_json::json!({"item": "apple", "count": 2}),
    )]));
    provider.push(gemini::text("Two apples added."));
    let (_, status) = runs::run_to_end(&mut client, run("Two apples, please.")).await;
    assert!(status.is_none(), "{status:?}\n{}", server.tail_log(30));
    // The model's request declared the tool as ADK declares it (the docstring, the signature's schema).
    let declarations = &provider.requests()[0].json()["tools"][0]["functionDeclarations"];
    assert_eq!(declarations[0]["name"], "add_to_cart");
    assert_eq!(declarations[0]["description"], "Adds an item to the cart.");
    assert_eq!(
        declarations[0]["parameters"]["required"],
        serde_json::json!(["item", "count"])
    );

    // Killed, the worker is started again and serves the next call.
    let workers = workers_of(&app_dir);
    assert_eq!(workers.len(), 1, "one worker per directory: {workers:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &workers[0].to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    adk_grpc_testkit::eventually(std::time::Duration::from_secs(60), || async {
        match workers_of(&app_dir).as_slice() {
            [pid] if *pid != workers[0] => Ok(()),
            other => Err(format!("workers: {other:?}")),
        }
    })
    .await;
    // Restarted on the same port: the tool's URL still reaches it once it listens.
    let fake = &provider;
    adk_grpc_testkit::eventually(std::time::Duration::from_secs(60), || {
        let mut client = client.clone();
        async move {
            // Each attempt asks the model twice: for the call, then after its response.
            fake.push(gemini::function_calls(&[("save_receipt", serde_json::json!({}))]));
            fake.push(gemini::text("Saved."));
            let (events, status) = runs::run_to_end(&mut client, run("A receipt, please.")).await;
            let answered = events.iter().any(|e| {
                e.content.as_ref().is_some_and(|c| {
                    c.parts.iter().any(|p| {
                        matches!(&p.kind, Some(pb::part::Kind::FunctionResponse(r))
                        if r.response.as_ref().is_some_and(|resp| format!("{resp:?}").contains("saved")))
                    })
                })
            });
            match (status, answered) {
                (None, true) => Ok(()),
                // Not listening yet: the model read the tool's error; the next attempt asks again.
                (status, _) => Err(format!("{status:?} {events:?}")),
            }
        }
    })
    .await;

    let session = runs::get_session(server.endpoint(), "shop", "alice", "s1").await;
    let state = adk_grpc_core::convert::map_from_struct("state", session.state.as_ref()).unwrap();
    assert_eq!(state["cart"], serde_json::json!({"APPLE": 2}), "{state:?}");
    assert_eq!(state["user:greeted"], serde_json::json!(true));
    let (receipt, _) = crate::tool_context::load_artifact_text(server.endpoint(), "shop", "s1", "receipt.txt").await;
    assert_eq!(receipt, "2 x APPLE");
}

#[tokio::test]
async fn a_dir_naming_python_functions_that_do_not_exist_stops_the_server_naming_file_and_field() {
    let agents = tempfile::tempdir().expect("temp dir");
    python_shop(agents.path());
    write(
        agents.path(),
        "shop/root_agent.yaml",
        "name: a\nmodel: gemini-2.5-flash\ninstruction: Hi.\nsub_agents: [{config_path: w.yaml}]\n",
    );
    write(
        agents.path(),
        "shop/w.yaml",
        "name: w\ninstruction: W.\ntools:\n  - name: shop.tools.remove_from_cart\n\
         before_model_callbacks:\n  - name: shop.guards.guard\n",
    );
    let output = std::process::Command::new(adk_grpc_testkit::workspace_bin("adk-runner-server"))
        .arg("--agents")
        .arg(agents.path())
        .env("GOOGLE_API_KEY", "k")
        .env("ADK_PYTHON", venv_python())
        .env_remove("ADK_AGENTS")
        .output()
        .expect("run adk-runner-server");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let dir = agents.path().display().to_string();
    for expected in [
        format!(
            r#"{dir}: shop/w.yaml, agent "w": field "tools[0]": the Python tool "shop.tools.remove_from_cart" does not import"#
        ),
        format!(
            r#"{dir}: shop/w.yaml, agent "w": field "before_model_callbacks[0]": the Python callback "shop.guards.guard" does not import"#
        ),
    ] {
        assert!(stderr.contains(&expected), "{expected}\nin:\n{stderr}");
    }
}

/// Two apps of one directory each name a Python tool `add_item`: each app's tool is its
/// own (as in ADK, where each app is its own), served by the app's own worker.
#[tokio::test]
async fn two_apps_naming_python_tools_of_the_same_name_each_run_their_own() {
    let provider = FakeServer::start().await;
    let agents = tempfile::tempdir().expect("temp dir");
    for app in ["shop", "deli"] {
        write(
            agents.path(),
            &format!("{app}/root_agent.yaml"),
            &format!(
                "name: clerk\nmodel: gemini-2.5-flash\ninstruction: Sell.\ntools:\n  - name: {app}.tools.add_item\n"
            ),
        );
        write(
            agents.path(),
            &format!("{app}/tools.py"),
            &format!(
                "def add_item(item: str) -> dict:\n    \"\"\"Adds an item.\"\"\"\n    return {{\"added_by\": \"{app}\"}}\n"
            ),
        );
    }
    let server = serve_with_python(agents.path(), &provider).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    for app in ["shop", "deli"] {
        provider.push(gemini::function_calls(&[(
            "add_item",
            serde_json::json!({"item": "bread"}),
        )]));
        provider.push(gemini::text("Added."));
        let run = runs::run_request(app, "alice", "s1", user_text("Bread, please."));
        let (events, status) = runs::run_to_end(&mut client, run).await;
        assert!(status.is_none(), "{app}: {status:?}\n{}", server.tail_log(30));
        let answered_by = events.iter().find_map(|e| {
            e.content.as_ref()?.parts.iter().find_map(|p| match &p.kind {
                Some(pb::part::Kind::FunctionResponse(r)) => Some(format!("{:?}", r.response)),
                _ => None,
            })
        });
        assert!(
            answered_by.as_deref().is_some_and(|r| r.contains(&format!("{app:?}"))),
            "{app}'s add_item answered: {answered_by:?}"
        );
    }
}

/// The app `notes`: Python tools and a callback that read what the session holds, as
/// ADK's contexts read it (artifacts saved before the call, the user's memories).
fn python_notes(dir: &Path) {
    write(
        dir,
        "notes/root_agent.yaml",
        "name: keeper\nmodel: gemini-2.5-flash\ninstruction: Keep notes.\ntools:\n  - name: notes.tools.save_note\n  \
         - name: notes.tools.read_notes\n  - name: notes.tools.recall\n  - name: notes.tools.keep_reads\n  \
         - name: notes.tools.read_kept\nbefore_model_callbacks:\n  - name: notes.callbacks.inventory\n",
    );
    write(
        dir,
        "notes/tools.py",
        r#"from google.adk.tools import ToolContext
from google.genai import types

KEPT = {}


async def save_note(text: str, tool_context: ToolContext) -> str:
    """Saves the note as note.txt, and the user's name as user:name.txt."""
    await tool_context.save_artifact("note.txt", types.Part(text=text))
    await tool_context.save_artifact("user:name.txt", types.Part(text="Alice"))
    return "saved"


async def read_notes(tool_context: ToolContext) -> dict:
    """Reads the notes saved before."""
    latest = await tool_context.load_artifact("note.txt")
    first = await tool_context.load_artifact("note.txt", version=0)
    return {
        "latest": latest.text if latest else None,
        "first": first.text if first else None,
        "no_such_version": await tool_context.load_artifact("note.txt", version=7) is None,
        "no_such_file": await tool_context.load_artifact("nothing.txt") is None,
        "names": await tool_context.list_artifacts(),
    }


async def recall(query: str, tool_context: ToolContext) -> dict:
    """Searches the user's memories."""
    found = await tool_context.search_memory(query)
    return {"memories": [m.content.parts[0].text for m in found.memories], "authors": [m.author for m in found.memories]}


def keep_reads(tool_context: ToolContext) -> str:
    """Keeps this call's artifact service for later."""
    KEPT["artifacts"] = tool_context._invocation_context.artifact_service
    return "kept"


async def read_kept(tool_context: ToolContext) -> str:
    """Reads through an artifact service kept from an earlier call."""
    try:
        await KEPT["artifacts"].list_artifact_keys()
    except Exception as e:
        return f"refused: {e}"
    return "read"
"#,
    );
    write(
        dir,
        "notes/callbacks.py",
        r#"from google.adk.models.llm_response import LlmResponse
from google.genai import types


async def inventory(callback_context, llm_request):
    last = llm_request.contents[-1]
    if last.role == "user" and last.parts[0].text == "inventory":
        names = await callback_context.list_artifacts()
        note = await callback_context.load_artifact("note.txt")
        text = f"{', '.join(names)}: {note.text if note else None}"
        return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
    return None
"#,
    );
}

/// What the model was given back for the last tool call of its latest request.
fn last_function_response(provider: &FakeServer) -> serde_json::Value {
    let request = provider.last_request().json();
    let contents = request["contents"].as_array().expect("contents").clone();
    contents
        .iter()
        .rev()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .find_map(|p| p.get("functionResponse").map(|r| r["response"].clone()))
        .unwrap_or_else(|| panic!("no function response in {request}"))
}

#[tokio::test]
async fn python_tools_and_callbacks_read_the_sessions_artifacts_and_the_users_memories() {
    let provider = FakeServer::start().await;
    let agents = tempfile::tempdir().expect("temp dir");
    python_notes(agents.path());
    let server = serve_with_python(agents.path(), &provider).await;
    let client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let turn = |user: &'static str, session: &'static str, calls: Option<(&'static str, serde_json::Value)>| {
        if let Some((tool, args)) = &calls {
            provider.push(gemini::function_calls(&[(tool, args.clone())]));
        }
        provider.push(gemini::text("Done."));
        let run = runs::run_request("notes", user, session, user_text("Go on."));
        let mut client = client.clone();
        async move {
            let (events, status) = runs::run_to_end(&mut client, run).await;
            assert!(status.is_none(), "{status:?}");
            events
        }
    };

    // Two turns save two versions of note.txt (and user:name.txt), each in its own call.
    for text in ["buy milk", "buy bread"] {
        turn("alice", "s1", Some(("save_note", serde_json::json!({ "text": text })))).await;
        assert_eq!(
            last_function_response(&provider),
            serde_json::json!({"result": "saved"})
        );
    }

    // A later turn's tool reads them: the latest, ADK's version 0 (the suite's 1), None
    // for a missing version or file, and the listing with the user's `user:` names.
    turn("alice", "s1", Some(("read_notes", serde_json::json!({})))).await;
    assert_eq!(
        last_function_response(&provider),
        serde_json::json!({
            "latest": "buy bread",
            "first": "buy milk",
            "no_such_version": true,
            "no_such_file": true,
            "names": ["note.txt", "user:name.txt"],
        })
    );

    // A callback reads them through its CallbackContext (and answers in the model's place).
    let (events, status) = runs::run_to_end(
        &mut client.clone(),
        runs::run_request("notes", "alice", "s1", user_text("inventory")),
    )
    .await;
    assert!(status.is_none(), "{status:?}\n{}", server.tail_log(30));
    assert_eq!(
        text_of(events.last().expect("a reply")),
        "note.txt, user:name.txt: buy bread"
    );

    // Only the call's own scope: Alice's other session sees her user: artifact only, Bob none.
    turn("alice", "s2", Some(("read_notes", serde_json::json!({})))).await;
    assert_eq!(
        last_function_response(&provider)["names"],
        serde_json::json!(["user:name.txt"])
    );
    assert_eq!(last_function_response(&provider)["latest"], serde_json::Value::Null);
    turn("bob", "s1", Some(("read_notes", serde_json::json!({})))).await;
    assert_eq!(last_function_response(&provider)["names"], serde_json::json!([]));

    // The user's memories, searched by the app's memory service: Alice's, not Bob's.
    let mut memory = MemoryServiceClient::connect(server.endpoint()).await.expect("connect");
    memory
        .add_memory(pb::AddMemoryRequest {
            app_name: "notes".into(),
            user_id: "alice".into(),
            memories: vec![pb::MemoryEntry {
                content: Some(user_text("My sister Maria lives in Oslo.")),
                author: "user".into(),
                ..Default::default()
            }],
            custom_metadata: None,
        })
        .await
        .expect("AddMemory");
    for (user, found) in [
        (
            "alice",
            serde_json::json!({"memories": ["My sister Maria lives in Oslo."], "authors": ["user"]}),
        ),
        ("bob", serde_json::json!({"memories": [], "authors": []})),
    ] {
        turn(user, "s3", Some(("recall", serde_json::json!({ "query": "Maria" })))).await;
        assert_eq!(last_function_response(&provider), found, "{user}");
    }

    // A read after its call has ended is refused, even from the same session.
    turn("alice", "s1", Some(("keep_reads", serde_json::json!({})))).await;
    turn("alice", "s1", Some(("read_kept", serde_json::json!({})))).await;
    let refused = last_function_response(&provider)["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        refused.starts_with("refused: list_artifacts: no call is running with this token"),
        "{refused}"
    );
}
