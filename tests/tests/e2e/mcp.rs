//! MCP toolsets end to end: the real `adk-runner-server` (on a real redis-server)
//! runs agents whose tools come from MCP servers nobody here wrote —
//! `@modelcontextprotocol/server-everything` from npm over stdio and streamable
//! HTTP, and a server on the `mcp` package from PyPI (tests/mcp/server.py) — and
//! a gRPC client drives them with `Run`. Models are the scripted mock and the
//! fake OpenAI server.
//!
//! The servers are installed by `scripts/setup-mcp.sh` (run by `scripts/test.sh`)
//! into `~/.cache/adk`; `ADK_MCP_NODE_DIR` / `ADK_MCP_PYTHON` point elsewhere.

use adk_grpc_core::ArtifactService;
use adk_grpc_core::artifact::LoadRequest;
use adk_grpc_core::convert::json_from_proto;
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::{after_user_event, connect_artifacts, spawn_artifact_server};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{ChildGuard, RedisServer, ServiceProcess, eventually, free_port, wait_for_port};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tonic::transport::Channel;

const USER: &str = "alice";
/// Starting node or Python and the MCP handshake, on a loaded CI machine.
const SERVER_START: Duration = Duration::from_secs(60);

// ---------- the MCP servers ----------

fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache"));
    base.join("adk")
}

/// `dist/index.js` of @modelcontextprotocol/server-everything (run with `node`).
fn server_everything() -> String {
    let dir = std::env::var_os("ADK_MCP_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("mcp-node"));
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.is_file(),
        "{} is missing: run scripts/setup-mcp.sh (it installs @modelcontextprotocol/server-everything)",
        script.display()
    );
    script.display().to_string()
}

/// The Python with the `mcp` package, and the test server it runs.
pub(crate) fn fastmcp() -> (String, String) {
    let python = std::env::var_os("ADK_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("mcp-venv/bin/python"));
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup-mcp.sh (it installs the mcp package)",
        python.display()
    );
    let server = repo_root().join("tests/mcp/server.py");
    (python.display().to_string(), server.display().to_string())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The YAML of an mcp tool running tests/mcp/server.py over stdio, leaving its
/// traces in `state`.
pub(crate) fn fastmcp_stdio(name: &str, state: &Path, extra: &str) -> String {
    let (python, server) = fastmcp();
    format!(
        "  {name}:\n    kind: mcp\n    transport: stdio\n    command: '{python}'\n    args: ['{server}', --state-dir, '{}']\n    connect_timeout_secs: 60\n{extra}",
        state.display()
    )
}

/// Waits for a file the test server writes.
async fn file_appears(path: PathBuf) {
    eventually(SERVER_START, || {
        let path = path.clone();
        async move {
            if path.exists() {
                Ok(())
            } else {
                Err(format!("{} does not exist", path.display()))
            }
        }
    })
    .await
}

// ---------- the runner ----------

struct Stack {
    redis: RedisServer,
    runner: ServiceProcess,
    _agents: tempfile::NamedTempFile,
}

impl Stack {
    async fn start(agents: &str, envs: &[(&str, &str)]) -> Stack {
        Self::start_with_args(agents, envs, &[]).await
    }

    async fn start_with_args(agents: &str, envs: &[(&str, &str)], extra_args: &[String]) -> Stack {
        let redis = RedisServer::start().await;
        let mut file = tempfile::Builder::new()
            .prefix("agents-")
            .suffix(".yaml")
            .tempfile()
            .expect("temp file");
        file.write_all(agents.as_bytes()).expect("write the agents file");
        let mut args = vec![
            "--store-url".to_string(),
            redis.url(),
            "--agents".to_string(),
            file.path().display().to_string(),
        ];
        args.extend_from_slice(extra_args);
        let envs: Vec<(String, String)> = envs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let runner = ServiceProcess::spawn("adk-runner-server", &args, &envs).await;
        Stack {
            redis,
            runner,
            _agents: file,
        }
    }

    async fn client(&self) -> AgentRunnerClient<Channel> {
        AgentRunnerClient::connect(self.runner.endpoint())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\n{}", self.runner.tail_log(30)))
    }

    /// One whole Run; panics (with the runner's log) if it fails.
    async fn run(&self, app: &str, session: &str, message: &str) -> Vec<pb::Event> {
        let mut client = self.client().await;
        let mut stream = client
            .run(run_request(app, session, message))
            .await
            .unwrap_or_else(|e| panic!("Run: {e:?}\n{}", self.runner.tail_log(40)))
            .into_inner();
        let mut events = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(event)) => events.push(event),
                Ok(None) => return after_user_event(events),
                Err(status) => panic!("the run failed: {status:?}\n{}", self.runner.tail_log(40)),
            }
        }
    }
}

fn run_request(app: &str, session: &str, message: &str) -> pb::RunRequest {
    runs::run_request(app, USER, session, user_text(message))
}

fn parts(events: &[pb::Event]) -> impl Iterator<Item = &pb::part::Kind> {
    events
        .iter()
        .flat_map(|e| e.content.iter().flat_map(|c| &c.parts))
        .filter_map(|p| p.kind.as_ref())
}

/// Every function response of the run, by tool name.
pub(crate) fn responses(events: &[pb::Event]) -> Vec<(String, Value)> {
    parts(events)
        .filter_map(|kind| match kind {
            pb::part::Kind::FunctionResponse(r) => Some((
                r.name.clone(),
                json_from_proto("response", r.response.as_ref().expect("a response")).expect("JSON"),
            )),
            _ => None,
        })
        .collect()
}

pub(crate) fn response<'a>(all: &'a [(String, Value)], tool: &str) -> &'a Value {
    &all.iter()
        .find(|(name, _)| name == tool)
        .unwrap_or_else(|| panic!("no response of {tool} in {all:#?}"))
        .1
}

pub(crate) fn inline_data(events: &[pb::Event]) -> Vec<(String, Vec<u8>)> {
    parts(events)
        .filter_map(|kind| match kind {
            pb::part::Kind::InlineData(blob) => Some((blob.mime_type.clone(), blob.data.clone())),
            _ => None,
        })
        .collect()
}

pub(crate) fn last_text(events: &[pb::Event]) -> String {
    parts(events)
        .filter_map(|kind| match kind {
            pb::part::Kind::Text(t) => Some(t.clone()),
            _ => None,
        })
        .last()
        .unwrap_or_default()
}

const PNG_SIGNATURE: &[u8] = b"\x89PNG";

/// The samples of `adk_tool_calls_total` for `tool`.
fn tool_calls<'a>(metrics: &'a str, tool: &str) -> Vec<&'a str> {
    samples(metrics, "adk_tool_calls_total", &format!("tool=\"{tool}\""))
}

/// The samples of `metric` whose labels include `label`.
fn samples<'a>(metrics: &'a str, metric: &str, label: &str) -> Vec<&'a str> {
    metrics
        .lines()
        .filter(|line| line.starts_with(&format!("{metric}{{")) && line.contains(label))
        .collect()
}

/// The value of a sample line (`name{labels} value`).
fn sample_value(line: &str) -> f64 {
    line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// The app as GetApp describes it.
async fn get_app(stack: &Stack, app: &str) -> pb::App {
    stack
        .client()
        .await
        .get_app(pb::GetAppRequest { app_name: app.into() })
        .await
        .unwrap_or_else(|e| panic!("GetApp: {e:?}\n{}", stack.runner.tail_log(30)))
        .into_inner()
}

/// The root agent's entry for toolset `name` in GetApp's reply, with its toolset part.
fn toolset_entry(app: &pb::App, name: &str) -> (pb::ToolInfo, pb::ToolsetInfo) {
    let root = app.root_agent.as_ref().expect("a root agent");
    let entry = root
        .tools
        .iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| panic!("no tool {name} in {:#?}", root.tools))
        .clone();
    let toolset = entry
        .toolset
        .clone()
        .unwrap_or_else(|| panic!("{name} is not described as a toolset: {entry:#?}"));
    (entry, toolset)
}

fn schema_of(tool: &pb::ToolInfo) -> Value {
    json_from_proto("parameters_schema", tool.parameters_schema.as_ref().expect("a schema")).expect("JSON")
}

/// A Run that must fail: the events streamed before the status (the user's event
/// first) and the status.
async fn failed_run(stack: &Stack, app: &str, session: &str) -> (Vec<pb::Event>, tonic::Status) {
    let mut client = stack.client().await;
    let (events, status) = runs::run_to_end(&mut client, run_request(app, session, "Use the tools")).await;
    let status = status.unwrap_or_else(|| panic!("the run ended OK: {events:#?}\n{}", stack.runner.tail_log(40)));
    (events, status)
}

// ---------- toolsets that cannot start ----------

/// A model that calls the tools of an MCP toolset it was never offered (the server
/// never answered); the toolset `broken`, declared by `tool`, is the agent's only one.
fn agents_with_toolset(tool: &str) -> String {
    format!(
        "
models:
  script:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: x_echo, args: {{ message: hello }} }}]
        - text: done
tools:
  broken:
{tool}    tool_prefix: x
    connect_timeout_secs: 10
apps:
  demo:
    root_agent: {{ name: helper, model: script, tools: [broken] }}
"
    )
}

/// What the client of Run, GetApp and the metrics show of toolset `broken` that
/// cannot connect: the run fails UNAVAILABLE naming the toolset, its server and
/// `cause`, before the model is called, each time; GetApp says FAILING with the
/// same error and no tools; the attempts are counted.
async fn a_toolset_that_cannot_connect_is_reported(stack: &Stack, metrics_port: u16, server: &str, cause: &str) {
    for session in ["s1", "s2"] {
        let (events, status) = failed_run(stack, "demo", session).await;
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        let message = status.message();
        for expected in ["MCP toolset broken", server, cause] {
            assert!(message.contains(expected), "{expected:?} missing from {message:?}");
        }
        // The model was not called: nothing but the user's event was stored and streamed.
        assert!(events.is_empty(), "{events:#?}");
    }

    let app = get_app(stack, "demo").await;
    let (_, toolset) = toolset_entry(&app, "broken");
    assert_eq!(toolset.state(), pb::ToolsetState::Failing, "{toolset:#?}");
    assert!(
        toolset.error.contains("MCP toolset broken") && toolset.error.contains(cause),
        "{toolset:#?}"
    );
    assert!(!toolset.tools_known && toolset.tools.is_empty(), "{toolset:#?}");

    let metrics = runs::metrics_reply(metrics_port).await;
    let failed = samples(&metrics, "adk_mcp_connection_attempts_total", "toolset=\"broken\"");
    assert!(
        failed.len() == 1 && failed[0].contains("outcome=\"UNAVAILABLE\"") && sample_value(failed[0]) >= 1.0,
        "{failed:?}"
    );
    assert_eq!(
        samples(&metrics, "adk_mcp_toolset_connected", "toolset=\"broken\""),
        ["adk_mcp_toolset_connected{toolset=\"broken\"} 0"]
    );
    let runs = samples(&metrics, "adk_runner_invocations_finished_total", "app=\"demo\"");
    assert_eq!(
        runs,
        ["adk_runner_invocations_finished_total{app=\"demo\",outcome=\"UNAVAILABLE\"} 2"]
    );
}

async fn start_with_metrics(agents: &str) -> (Stack, u16) {
    let metrics_port = free_port();
    let stack = Stack::start_with_args(
        agents,
        &[],
        &["--metrics-listen".to_string(), format!("127.0.0.1:{metrics_port}")],
    )
    .await;
    (stack, metrics_port)
}

#[tokio::test]
async fn a_stdio_server_that_exits_at_once_fails_the_run_naming_the_toolset_and_its_stderr() {
    let tool = "    kind: mcp\n    transport: stdio\n    command: sh\n    args: [-c, 'echo \"ModuleNotFoundError: No module named weather_mcp\" >&2; exit 3']\n";
    let (stack, metrics_port) = start_with_metrics(&agents_with_toolset(tool)).await;
    a_toolset_that_cannot_connect_is_reported(
        &stack,
        metrics_port,
        "stdio `sh`",
        "ModuleNotFoundError: No module named weather_mcp",
    )
    .await;
}

#[tokio::test]
async fn an_http_url_where_nothing_listens_fails_the_run_naming_the_toolset_and_the_refusal() {
    // Bound and closed: nothing listens there.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let tool = format!("    kind: mcp\n    transport: http\n    url: '{url}'\n");
    let (stack, metrics_port) = start_with_metrics(&agents_with_toolset(&tool)).await;
    a_toolset_that_cannot_connect_is_reported(
        &stack,
        metrics_port,
        &format!("streamable HTTP {url}"),
        "Connection refused",
    )
    .await;
}

// ---------- server-everything ----------

#[tokio::test]
async fn a_mock_agent_uses_server_everything_over_stdio_with_filter_and_prefix() {
    let everything = server_everything();
    let agents = format!(
        "
models:
  script:
    provider: mock
    mock:
      turns:
        - function_calls:
            - {{ name: ev_echo, args: {{ message: hello }} }}
            - {{ name: ev_get-sum, args: {{ a: 2, b: 3 }} }}
            - {{ name: ev_get-tiny-image }}
            - {{ name: ev_get-sum, args: {{ a: two, b: 3 }} }}
            - {{ name: ev_get-env }}
        - text: done
tools:
  everything:
    kind: mcp
    transport: stdio
    command: node
    args: ['{everything}', stdio]
    tool_filter: [echo, get-sum, get-tiny-image]
    tool_prefix: ev
    connect_timeout_secs: 60
apps:
  demo:
    root_agent: {{ name: helper, model: script, tools: [everything] }}
"
    );
    let stack = Stack::start(&agents, &[]).await;
    // Describing the app does not start the server: its tools are not known yet.
    let (entry, toolset) = toolset_entry(&get_app(&stack, "demo").await, "everything");
    assert!(entry.description.contains("MCP toolset"), "{entry:#?}");
    assert_eq!(toolset.state(), pb::ToolsetState::NotStarted, "{toolset:#?}");
    assert!(!toolset.tools_known && toolset.tools.is_empty() && toolset.error.is_empty());

    let events = stack.run("demo", "s1", "Use the tools").await;
    let all = responses(&events);

    assert_eq!(response(&all, "ev_echo")["text"], "Echo: hello", "{all:#?}");
    let sum = &all.iter().filter(|(n, _)| n == "ev_get-sum").collect::<Vec<_>>();
    assert_eq!(sum.len(), 2);
    assert!(
        sum[0].1["text"].as_str().unwrap_or_default().contains('5'),
        "{:?}",
        sum[0].1
    );
    // Checked against the tool's schema before the call: the model reads why.
    let refused = sum[1].1["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("do not fit the tool's schema") && refused.contains("/a"),
        "{refused}"
    );
    // The image is an inline-data part next to the response, which lists it.
    let image = response(&all, "ev_get-tiny-image");
    assert!(
        image["attachments"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["mime_type"] == "image/png")),
        "{image}"
    );
    let media = inline_data(&events);
    assert_eq!(media.len(), 1, "{media:?}");
    assert_eq!(media[0].0, "image/png");
    assert!(media[0].1.starts_with(PNG_SIGNATURE));
    // Filtered out: the model is told which tools there are.
    let missing = response(&all, "ev_get-env")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        missing.contains("not available") && missing.contains("ev_echo"),
        "{missing}"
    );
    assert_eq!(last_text(&events), "done");

    // Known once connected: the filtered tools, as the model calls them, with their schemas.
    let (_, toolset) = toolset_entry(&get_app(&stack, "demo").await, "everything");
    assert_eq!(toolset.state(), pb::ToolsetState::Connected, "{toolset:#?}");
    assert!(toolset.tools_known && toolset.error.is_empty(), "{toolset:#?}");
    let mut names: Vec<&str> = toolset.tools.iter().map(|tool| tool.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ev_echo", "ev_get-sum", "ev_get-tiny-image"]);
    let tool = |name: &str| toolset.tools.iter().find(|tool| tool.name == name).expect("listed");
    let echo = tool("ev_echo");
    assert!(!echo.description.is_empty(), "{echo:#?}");
    assert_eq!(schema_of(echo)["properties"]["message"]["type"], "string", "{echo:#?}");
    let sum = schema_of(tool("ev_get-sum"));
    assert_eq!(sum["properties"]["a"]["type"], "number", "{sum}");
    assert_eq!(sum["properties"]["b"]["type"], "number", "{sum}");
    // ListApps describes it the same way.
    let listed = stack
        .client()
        .await
        .list_apps(pb::ListAppsRequest {})
        .await
        .expect("ListApps")
        .into_inner();
    let (_, in_list) = toolset_entry(&listed.apps[0], "everything");
    assert_eq!(in_list.tools.len(), 3, "{in_list:#?}");
}

#[tokio::test]
async fn an_openai_agent_uses_server_everything_over_streamable_http() {
    let port = free_port();
    let mut command = Command::new("node");
    command
        .arg(server_everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let log = tempfile::NamedTempFile::new().expect("log file");
    let _server = ChildGuard::spawn(command, log.path()).expect("start server-everything");
    assert!(
        wait_for_port(port, SERVER_START).await,
        "server-everything did not listen on {port}"
    );

    let provider = FakeServer::start().await;
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}', api_key_env: E2E_OPENAI_KEY }}
tools:
  everything:
    kind: mcp
    transport: http
    url: 'http://127.0.0.1:{port}/mcp'
    bearer_token_env: E2E_MCP_TOKEN
    tool_filter: [echo, get-tiny-image]
apps:
  demo:
    root_agent: {{ name: helper, model: gpt, tools: [everything] }}
",
        provider.url()
    );
    let stack = Stack::start(&agents, &[("E2E_OPENAI_KEY", "sk-e2e"), ("E2E_MCP_TOKEN", "mcp-token")]).await;
    provider.push(openai::tool_calls(&[
        ("call_1", "echo", json!({"message": "over http"})),
        ("call_2", "get-tiny-image", json!({})),
    ]));
    provider.push(openai::text("Echoed and drawn."));
    let events = stack.run("demo", "s1", "Echo and draw").await;

    let all = responses(&events);
    assert_eq!(response(&all, "echo")["text"], "Echo: over http");
    assert_eq!(inline_data(&events)[0].0, "image/png");
    assert_eq!(last_text(&events), "Echoed and drawn.");

    let requests = provider.requests();
    let offered: Vec<Value> = requests[0].json()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["function"]["name"].clone())
        .collect();
    assert_eq!(offered, [json!("echo"), json!("get-tiny-image")]);
    let echo = requests[0].json()["tools"][0]["function"].clone();
    assert_eq!(echo["parameters"]["properties"]["message"]["type"], "string", "{echo}");
    // The model got the text as a tool message and the image as an image.
    let messages = requests[1].json()["messages"].clone();
    let tool_messages: Vec<&Value> = messages
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 2);
    assert!(
        tool_messages[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Echo: over http")
    );
    let image_url = messages
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|item| item["type"] == "image_url")
        .expect("the image went to the model as an image");
    assert!(
        image_url["image_url"]["url"]
            .as_str()
            .unwrap_or_default()
            .starts_with("data:image/png;base64,"),
        "{image_url}"
    );
}

// ---------- the FastMCP server ----------

#[tokio::test]
async fn an_openai_agent_uses_a_fastmcp_server_failures_images_and_structured_results() {
    let state = tempfile::tempdir().expect("state dir");
    let workdir = tempfile::tempdir().expect("working dir");
    let provider = FakeServer::start().await;
    let tool = fastmcp_stdio(
        "py",
        state.path(),
        &format!(
            "    working_dir: '{}'\n    env: {{ ADK_MCP_TEST_ENV: from-the-agents-file }}\n",
            workdir.path().display()
        ),
    );
    let agents = format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{}', api_key_env: E2E_OPENAI_KEY }}
tools:
{tool}
apps:
  demo:
    root_agent: {{ name: helper, model: gpt, tools: [py] }}
",
        provider.url()
    );
    // A secret of the runner's own environment: the MCP server must not get it.
    let metrics_port = free_port();
    let stack = Stack::start_with_args(
        &agents,
        &[("E2E_OPENAI_KEY", "sk-e2e"), ("ADK_MCP_RUNNER_SECRET", "runner-only")],
        &["--metrics-listen".to_string(), format!("127.0.0.1:{metrics_port}")],
    )
    .await;
    provider.push(openai::tool_calls(&[
        ("call_1", "weather", json!({"city": "Paris"})),
        ("call_2", "fail", json!({"reason": "on purpose"})),
        ("call_3", "red_pixel", json!({})),
        ("call_4", "whoami", json!({})),
    ]));
    provider.push(openai::text("All done."));
    let events = stack.run("demo", "s1", "Go").await;

    let all = responses(&events);
    assert_eq!(
        response(&all, "weather"),
        &json!({"structured_content": {"city": "Paris", "temp_c": 21}})
    );
    // isError is a tool error the model reads; the run goes on.
    let failed = response(&all, "fail")["error"].as_str().unwrap_or_default().to_string();
    assert!(failed.contains("failed on purpose: on purpose"), "{failed}");
    assert_eq!(inline_data(&events)[0].0, "image/png");
    assert!(inline_data(&events)[0].1.starts_with(PNG_SIGNATURE));
    // The child ran where and with what the agents file said, without the runner's secrets.
    let whoami = &response(&all, "whoami")["structured_content"];
    let cwd = std::fs::canonicalize(whoami["cwd"].as_str().expect("cwd")).expect("cwd exists");
    assert_eq!(cwd, std::fs::canonicalize(workdir.path()).expect("workdir"));
    assert_eq!(whoami["env"], "from-the-agents-file");
    assert_eq!(whoami["secret"], Value::Null);
    assert_eq!(last_text(&events), "All done.");

    let first = provider.requests()[0].json();
    let weather = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "weather")
        .expect("weather offered")
        .clone();
    assert_eq!(weather["function"]["parameters"]["required"], json!(["city"]));
    assert!(
        weather["function"]["description"]
            .as_str()
            .unwrap_or_default()
            .contains("weather")
    );
    let second = provider.requests()[1].json();
    let failed_message = second["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["tool_call_id"] == "call_2")
        .expect("the failure went back to the model")
        .clone();
    assert!(
        failed_message["content"]
            .as_str()
            .unwrap_or_default()
            .contains("failed on purpose")
    );

    // Counted like every tool call, by tool and outcome.
    let metrics = runs::metrics_reply(metrics_port).await;
    assert_eq!(
        tool_calls(&metrics, "weather"),
        [r#"adk_tool_calls_total{outcome="OK",tool="weather"} 1"#]
    );
    let failed = tool_calls(&metrics, "fail");
    assert!(
        failed.len() == 1 && !failed[0].contains(r#"outcome="OK""#) && failed[0].ends_with(" 1"),
        "{failed:?}"
    );
}

#[tokio::test]
async fn cancelling_the_run_or_the_call_timeout_cancels_the_mcp_request() {
    let state = tempfile::tempdir().expect("state dir");
    let patient = fastmcp_stdio("patient", state.path(), "");
    let hasty = fastmcp_stdio("hasty", state.path(), "    timeout_secs: 1\n");
    let agents = format!(
        "
models:
  waits:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: slow, args: {{ seconds: 300, tag: dropped }} }}]
  times_out:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: slow, args: {{ seconds: 300, tag: timed-out }} }}]
        - text: gave up
tools:
{patient}{hasty}
apps:
  cancel:
    root_agent: {{ name: waiter, model: waits, tools: [patient] }}
  timeout:
    root_agent: {{ name: waiter, model: times_out, tools: [hasty] }}
"
    );
    let stack = Stack::start(&agents, &[]).await;

    // The client goes away mid-call: the runner drops the call and tells the server.
    let mut client = stack.client().await;
    let mut stream = client
        .run(run_request("cancel", "s1", "Wait"))
        .await
        .expect("the run starts")
        .into_inner();
    let user = stream.message().await.expect("an event").expect("the user's event");
    assert_eq!(user.author, "user");
    let call = stream.message().await.expect("an event").expect("the model's call");
    assert!(call.content.is_some());
    file_appears(state.path().join("started-dropped")).await;
    drop(stream);
    file_appears(state.path().join("cancelled-dropped")).await;

    // The per-call timeout: an error the model reads, and the server is told.
    let events = stack.run("timeout", "s1", "Wait a bit").await;
    let all = responses(&events);
    let error = response(&all, "slow")["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("timed out after 1s"), "{error}");
    assert_eq!(last_text(&events), "gave up");
    file_appears(state.path().join("cancelled-timed-out")).await;
}

/// A stdio server's message longer than `--max-tool-reply-bytes` is dropped unread, never
/// buffered: ten calls at once that each get 8 MiB fail with an error the model reads,
/// naming the limit; the runner's memory stays within a bound over its idle size, and the
/// server keeps serving.
#[tokio::test]
async fn an_mcp_reply_over_the_limit_is_dropped_unread_and_the_call_fails_naming_it() {
    const LIMIT: usize = 256 * 1024;
    // Ten 8 MiB messages went through 16 MiB line buffers before the limit.
    const PEAK_BOUND_KIB: u64 = 32 * 1024;
    let state = tempfile::tempdir().expect("state dir");
    let tool = fastmcp_stdio("py", state.path(), "    timeout_secs: 3\n");
    let agents = format!(
        "
models:
  huge:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: huge, args: {{ megabytes: 8 }} }}]
        - text: gave up
  small:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: weather, args: {{ city: Oslo }} }}]
        - text: done
tools:
{tool}
apps:
  huge:
    root_agent: {{ name: caller, model: huge, tools: [py] }}
  small:
    root_agent: {{ name: caller, model: small, tools: [py] }}
"
    );
    let stack = Stack::start_with_args(&agents, &[], &["--max-tool-reply-bytes".into(), LIMIT.to_string()]).await;
    let before = stack.run("small", "before", "Weather?").await;
    assert_eq!(
        response(&responses(&before), "weather"),
        &json!({"structured_content": {"city": "Oslo", "temp_c": 21}})
    );
    let idle = stack.runner.rss_kib().expect("the runner runs");

    let runs = (0..10).map(|i| {
        let stack = &stack;
        async move { stack.run("huge", &format!("s{i}"), "Get it").await }
    });
    for events in futures::future::join_all(runs).await {
        let all = responses(&events);
        let error = response(&all, "huge")["error"].as_str().unwrap_or_default().to_string();
        assert!(
            error.contains(&format!(
                "a message the server sent is longer than {LIMIT} bytes, the limit of a reply (--max-tool-reply-bytes"
            )),
            "{error}"
        );
        assert!(error.contains("MCP tool huge (py)"), "{error}");
        assert_eq!(last_text(&events), "gave up");
    }
    let peak = stack.runner.peak_rss_kib().expect("the runner runs");
    eprintln!(
        "mcp reply limit: idle VmRSS {idle} KiB, peak VmHWM {peak} KiB over 10 calls of 8 MiB (+{} KiB)",
        peak.saturating_sub(idle)
    );
    assert!(
        peak < idle + PEAK_BOUND_KIB,
        "peak {peak} KiB is more than {PEAK_BOUND_KIB} KiB over the idle {idle} KiB"
    );

    let after = stack.run("small", "after", "Weather?").await;
    assert_eq!(last_text(&after), "done");
    assert_eq!(
        response(&responses(&after), "weather"),
        &json!({"structured_content": {"city": "Oslo", "temp_c": 21}})
    );
}

/// A result too large for its event from a toolset with `large_reply: artifact`: the
/// server's message is read past the limit of a tool reply, the result is saved as a
/// session artifact (as JSON, as the model would have read it), the tool event's
/// artifact_delta names it, the model gets the reference, and the run goes on.
#[tokio::test]
async fn an_mcp_result_over_the_limit_is_saved_as_an_artifact_when_the_toolset_says_so() {
    const LIMIT: usize = 256 * 1024;
    let state = tempfile::tempdir().expect("state dir");
    let tool = fastmcp_stdio("py", state.path(), "    large_reply: artifact\n");
    let agents = format!(
        "
models:
  huge:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: huge, args: {{ megabytes: 2 }} }}]
        - text: saved
tools:
{tool}
apps:
  huge:
    root_agent: {{ name: caller, model: huge, tools: [py] }}
"
    );
    let stack = Stack::start_with_args(&agents, &[], &["--max-tool-reply-bytes".into(), LIMIT.to_string()]).await;
    let events = stack.run("huge", "s1", "Get it").await;
    assert_eq!(last_text(&events), "saved");
    let all = responses(&events);
    let saved = &response(&all, "huge")["artifact"];
    let name = saved["file_name"].as_str().unwrap_or_default().to_string();
    assert!(name.starts_with("huge-") && name.ends_with(".json"), "{saved}");
    assert_eq!(
        (&saved["version"], &saved["mime_type"]),
        (&json!(1), &json!("application/json"))
    );
    let delta = events
        .iter()
        .find_map(|event| event.actions.as_ref()?.artifact_delta.get(&name).copied());
    assert_eq!(delta, Some(1), "the tool event's artifact_delta names {name}");

    // Read back through adk-artifact-server on the same store.
    let server = spawn_artifact_server(&stack.redis.url(), &[]).await;
    let load = LoadRequest {
        app_name: "huge".into(),
        user_id: USER.into(),
        session_id: "s1".into(),
        file_name: name.clone(),
        version: None,
    };
    let (metadata, body) = connect_artifacts(&server)
        .await
        .download(load, 0)
        .await
        .expect("the saved result");
    let bytes: Vec<u8> = futures::TryStreamExt::try_concat(body).await.expect("its bytes");
    assert_eq!(Some(metadata.size_bytes), saved["size_bytes"].as_u64());
    let result: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(result["text"].as_str().map(str::len), Some(2 << 20));
    assert!(
        result["text"]
            .as_str()
            .is_some_and(|text| text.bytes().all(|b| b == b'x'))
    );
}

#[tokio::test]
async fn a_killed_stdio_server_fails_its_call_then_is_restarted_and_the_tools_list_refreshes() {
    let state = tempfile::tempdir().expect("state dir");
    let tool = fastmcp_stdio("py", state.path(), "");
    let agents = format!(
        "
models:
  killed:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: slow, args: {{ seconds: 300, tag: killed }} }}]
        - text: the server died
  after:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: weather, args: {{ city: Oslo }} }}]
        - text: back
  bonus_on:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: enable_bonus }}]
        - text: enabled
  bonus_use:
    provider: mock
    mock:
      turns:
        - function_calls: [{{ name: bonus }}]
        - text: got the bonus
tools:
{tool}
apps:
  killed:
    root_agent: {{ name: helper, model: killed, tools: [py] }}
  after:
    root_agent: {{ name: helper, model: after, tools: [py] }}
  bonus_on:
    root_agent: {{ name: helper, model: bonus_on, tools: [py] }}
  bonus_use:
    root_agent: {{ name: helper, model: bonus_use, tools: [py] }}
"
    );
    let stack = Stack::start(&agents, &[]).await;
    let started = tokio::spawn({
        let state = state.path().to_path_buf();
        async move {
            file_appears(state.join("started-killed")).await;
            let pid = std::fs::read_to_string(state.join("pid")).expect("pid");
            let killed = Command::new("kill").args(["-9", pid.trim()]).status().expect("kill");
            assert!(killed.success());
        }
    });
    let events = stack.run("killed", "s1", "Wait").await;
    started.await.expect("the server was killed");
    let all = responses(&events);
    let error = response(&all, "slow")["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("MCP tool slow (py)"), "{error}");
    assert_eq!(last_text(&events), "the server died", "the run went on");

    // The next call, made at once, waits for the runner to restart the server (the
    // same toolset, shared by both apps) instead of failing while it starts.
    let events = stack.run("after", "s-weather", "Weather?").await;
    let weather = response(&responses(&events), "weather").clone();
    assert!(
        weather.get("error").is_none(),
        "the first call after the crash failed: {weather}"
    );
    assert_eq!(last_text(&events), "back");
    assert_eq!(weather["structured_content"]["city"], "Oslo");

    // tools/list_changed: the new tool is offered on the next use.
    let events = stack.run("bonus_on", "s1", "Enable it").await;
    assert_eq!(
        response(&responses(&events), "enable_bonus")["structured_content"]["result"],
        "bonus enabled"
    );
    let events = stack.run("bonus_use", "s1", "Use it").await;
    assert_eq!(
        response(&responses(&events), "bonus")["structured_content"]["result"],
        "bonus!"
    );
    assert_eq!(last_text(&events), "got the bonus");
    let n = std::fs::read_to_string(state.path().join("starts"))
        .expect("starts")
        .lines()
        .count();
    assert_eq!(n, 2, "one child process for every app, restarted once");
}

#[tokio::test]
async fn an_http_mcp_server_that_restarts_is_reached_again() {
    let port = free_port();
    let logs = tempfile::tempdir().expect("log dir");
    let start_server = || {
        let mut command = Command::new("node");
        command
            .arg(server_everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string());
        ChildGuard::spawn(command, logs.path().join("server-everything.log")).expect("start server-everything")
    };
    let mut server = start_server();
    assert!(
        wait_for_port(port, SERVER_START).await,
        "server-everything did not listen"
    );
    let agents = format!(
        "
models:
  script:
    provider: mock
    mock:
      per_conversation: true
      turns:
        - function_calls: [{{ name: echo, args: {{ message: again }} }}]
        - text: done
tools:
  everything: {{ kind: mcp, transport: http, url: 'http://127.0.0.1:{port}/mcp', tool_filter: [echo] }}
apps:
  demo:
    root_agent: {{ name: helper, model: script, tools: [everything] }}
"
    );
    let stack = Stack::start(&agents, &[]).await;
    let events = stack.run("demo", "s1", "Echo").await;
    assert_eq!(response(&responses(&events), "echo")["text"], "Echo: again");

    // Down: the call fails as a tool error the model reads.
    server.kill9().await;
    let events = stack.run("demo", "s2", "Echo").await;
    let error = response(&responses(&events), "echo")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("MCP tool echo (everything)"), "{error}");
    assert_eq!(last_text(&events), "done");
    // GetApp: failing, saying why, and still the last tools (their calls fail as above).
    let toolset = eventually(SERVER_START, || async {
        let (_, toolset) = toolset_entry(&get_app(&stack, "demo").await, "everything");
        if toolset.state() == pb::ToolsetState::Failing {
            Ok(toolset)
        } else {
            Err(format!("{toolset:#?}"))
        }
    })
    .await;
    assert!(toolset.error.contains("MCP toolset everything"), "{toolset:#?}");
    assert!(toolset.tools_known, "{toolset:#?}");
    let names: Vec<&str> = toolset.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["echo"]);

    // Back (a new process, which knows nothing of the old MCP session): the first call
    // works, whatever backoff delay the reconnecting toolset was in.
    let _server = start_server();
    assert!(
        wait_for_port(port, SERVER_START).await,
        "server-everything did not listen again"
    );
    let events = stack.run("demo", "s-back", "Echo").await;
    let echo = response(&responses(&events), "echo").clone();
    assert_eq!(echo["text"], "Echo: again", "the first call after the restart: {echo}");
}
