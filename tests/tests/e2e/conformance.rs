//! The conformance suite recorded from ADK Python (`tests/conformance/`, described in
//! docs/adk-conformance.md): each case is an ADK agent-config directory, a script of the
//! conversation and ADK's `recording.json` (the model requests ADK sent, the replies it got,
//! the session it stored). Each test serves the directory with `adk-server --agents <case>`,
//! its Gemini model pointed at a fake endpoint answering ADK's recorded replies (each to the
//! agent the script addressed it to, if any), sends the same user turns over gRPC, and
//! compares every model request (each agent's in order), then the stored session
//! (GetSession), field by field with ADK's. Only the normalisations named below are applied.

use adk_grpc_client::RemoteArtifactService;
use adk_grpc_core::artifact::SaveRequest;
use adk_grpc_core::{ArtifactService, Content, Part, PartKind};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::venv_python;
use adk_grpc_models::testing::{FakeServer, requesting_agent};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::memory_service_client::MemoryServiceClient;
use adk_grpc_testkit::{ChildGuard, ServiceProcess, free_port, wait_for_port};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Differences of the stored session that are still open, each a field of the stored
/// events (a path below an event, as `compare` names it), the cases it is known in (none:
/// any case) and why. Every other difference fails the test. The same table is in
/// docs/adk-conformance.md.
const KNOWN_SESSION_DIFFERENCES: &[(&str, &[&str], &str)] = &[(
    "actions.artifactDelta",
    &[],
    "artifact versions count from 1 in the suite, from 0 in ADK Python (docs/behaviour.md, by design)",
)];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance").join(case)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The wire the runner's model speaks in a replay.
#[derive(Clone, Copy, PartialEq)]
enum Wire {
    /// The case as written: Gemini, compared with the requests ADK sent.
    Gemini,
    /// The case's models as `openai/<model>` on an OpenAI-compatible server, compared
    /// with ADK's LiteLlm conversion of the same requests (`openai.json`).
    OpenAi,
}

/// Replays `case` on `adk-server` and compares its requests and session with ADK's.
async fn replay(case: &str) {
    replay_on(case, Wire::Gemini).await;
}

/// Replays `case` with its models on an OpenAI-compatible server: each chat-completions
/// request is compared with what ADK's LiteLlm makes of ADK's request
/// (`tests/conformance/openai_reference.py`), the session with ADK's.
async fn replay_openai(case: &str) {
    replay_on(case, Wire::OpenAi).await;
}

/// A copy of the case directory with every `model: gemini-…` written `model:
/// openai/gemini-…` (ADK's LiteLlm model string), in a directory named as the case so
/// the app keeps its name; an agents file's Gemini provider becomes the
/// OpenAI-compatible one, with its key and base URL variables.
fn openai_copy(case: &str) -> tempfile::TempDir {
    case_copy(case, |path, text| {
        if path.file_name().is_some_and(|name| name == "agents.yaml") {
            text.replace("provider: gemini", "provider: openai")
                .replace("GOOGLE_API_KEY", "OPENAI_API_KEY")
                .replace("GOOGLE_GEMINI_BASE_URL", "OPENAI_BASE_URL")
        } else if path.extension().is_some_and(|ext| ext == "yaml") {
            text.replace("model: gemini-", "model: openai/gemini-")
        } else {
            text
        }
    })
}

/// A copy of the case directory, each file's text passed through `rewrite`, in a
/// directory named as the case so the app keeps its name.
fn case_copy(case: &str, rewrite: impl Fn(&Path, String) -> String) -> tempfile::TempDir {
    let work = tempfile::tempdir().expect("temp dir");
    let copy = work.path().join(case);
    std::fs::create_dir(&copy).expect("create the copy");
    for entry in std::fs::read_dir(case_dir(case)).expect("read the case") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(copy.join(path.file_name().expect("a file")), rewrite(&path, text)).expect("write");
    }
    work
}

/// What the runner serves for `case`: its agent-config directory, or its agents file when
/// the case has one (a case whose ADK side is an `App` in `agent.py`, for settings ADK's
/// agent-config YAML has no field for, such as resumability).
fn served(case: &Path) -> PathBuf {
    let agents_file = case.join("agents.yaml");
    if agents_file.exists() {
        agents_file
    } else {
        case.to_path_buf()
    }
}

/// A case's MCP server over streamable HTTP (`http_server.py`, the `mcp_http` case),
/// started on a free port as record.py starts it for ADK; the case's YAML names the port
/// `MCP_HTTP_PORT`, which [`with_port`] writes in.
async fn start_mcp_http_server(case: &str) -> Option<(ChildGuard, u16, tempfile::TempDir)> {
    let script = case_dir(case).join("http_server.py");
    if !script.exists() {
        return None;
    }
    let port = free_port();
    let logs = tempfile::tempdir().expect("temp dir");
    let mut command = std::process::Command::new(venv_python());
    command.arg(&script).arg(port.to_string());
    let mut server = ChildGuard::spawn(command, logs.path().join("mcp.log")).expect("start the MCP server");
    if !wait_for_port(port, Duration::from_secs(30)).await {
        panic!("the MCP server did not listen on {port}:\n{}", server.tail_log(30));
    }
    assert!(server.is_running(), "the MCP server stopped:\n{}", server.tail_log(30));
    Some((server, port, logs))
}

/// The copy of a case's directory (itself, or its OpenAI copy) with the MCP server's
/// port in place of `MCP_HTTP_PORT`, so the recording and the case stay free of it.
fn with_port(dir: &Path, port: u16) {
    for entry in std::fs::read_dir(dir).expect("read the copy") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|ext| ext == "yaml") {
            let text = std::fs::read_to_string(&path).expect("read");
            std::fs::write(&path, text.replace("MCP_HTTP_PORT", &port.to_string())).expect("write");
        }
    }
}

async fn replay_on(case: &str, wire: Wire) {
    let recording = read_json(&case_dir(case).join("recording.json"));
    let provider = FakeServer::start().await;
    let mcp_http = start_mcp_http_server(case).await;
    // The runner serves a copy when the case is rewritten for the wire or the port.
    let copy = match wire {
        Wire::OpenAi => Some(openai_copy(case)),
        Wire::Gemini => mcp_http.is_some().then(|| case_copy(case, |_, text| text)),
    };
    if let (Some(copy), Some((_, port, _))) = (&copy, &mcp_http) {
        with_port(&copy.path().join(case), *port);
    }
    let dir = match &copy {
        Some(copy) => served(&copy.path().join(case)),
        None => served(&case_dir(case)),
    };
    let (url_variable, key_variable) = match wire {
        Wire::Gemini => ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY"),
        Wire::OpenAi => ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    };
    let env = [
        (url_variable.to_string(), provider.url().to_string()),
        (key_variable.to_string(), "conformance-key".to_string()),
    ];
    let env = [env.as_slice(), &python_env()].concat();
    let args = ["--agents".to_string(), dir.display().to_string()];
    let server = ServiceProcess::spawn("adk-server", &args, &env).await;
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let (app, user, session) = (
        recording["app_name"].as_str().expect("app_name"),
        recording["user_id"].as_str().expect("user_id"),
        recording["session_id"].as_str().expect("session_id"),
    );
    save_artifacts(&server, app, user, session, &recording["artifacts"]).await;
    add_memories(&server, app, user, &recording["memory"]).await;
    let run_config = run_config_of(&recording["run_config"]);

    let mut problems = Vec::new();
    let mut adk_requests = Vec::new();
    for (t, turn) in recording["turns"].as_array().expect("turns").iter().enumerate() {
        let exchanges = turn["exchanges"].as_array().expect("exchanges");
        for (k, exchange) in exchanges.iter().enumerate() {
            let reply = match wire {
                Wire::Gemini => exchange["reply"].clone(),
                Wire::OpenAi => openai_reply(&exchange["reply"], adk_requests.len() + k),
            };
            // A reply the script addressed to an agent answers that agent's request (the
            // branches of a parallel agent ask in no set order), as record.py answered it.
            match exchange["agent"].as_str() {
                Some(agent) => provider.push_for(agent, reply),
                None => provider.push(reply),
            };
        }
        let asked_before = provider.requests().len();
        // The client's answers first, then the user's text, as record.py sends them.
        let mut message = pb::Content {
            role: "user".into(),
            parts: Vec::new(),
        };
        if let Some(answers) = turn.get("function_response") {
            message.parts = answers_to_latest_calls(&server, app, user, session, answers).await;
        }
        if let Some(text) = turn.get("user") {
            message.parts.extend(user_text(text.as_str().expect("user")).parts);
        }
        if let Some(inline) = turn.get("inline_data") {
            message.parts.push(inline_data(inline));
        }
        let request = pb::RunRequest {
            run_config,
            ..runs::run_request(app, user, session, message)
        };
        let (_, status) = runs::run_to_end(&mut client, request).await;
        match turn["refused"].as_str() {
            // A turn ADK refused with a `ValueError`: the runner refuses it as a bad
            // argument in ADK's words (the session compared below shows nothing stored).
            Some(adk_error) => match &status {
                Some(status)
                    if status.code() == tonic::Code::InvalidArgument && status.message().contains(adk_error) => {}
                _ => problems.push(format!("turn {t}: {status:?}, ADK refused it: {adk_error}")),
            },
            None => assert!(status.is_none(), "turn {t}: {status:?}\n{}", server.tail_log(30)),
        }
        let asked = provider.requests().len() - asked_before;
        if asked != exchanges.len() {
            problems.push(format!(
                "turn {t}: {asked} model requests, ADK made {}",
                exchanges.len()
            ));
        }
        adk_requests.extend(exchanges.iter().map(|e| (t, e["path"].clone(), e["request"].clone())));
    }
    let litellm = (wire == Wire::OpenAi).then(|| read_json(&case_dir(case).join("openai.json")));
    let runner_requests = provider.requests();
    let branches = branches_of_agents(&recording["session"]);
    // Only a script that addresses its replies (agents asking at once) lets the order
    // between agents go; every other case is held to ADK's order of requests.
    let addressed = adk_exchanges_name_agents(&recording);
    let order = if addressed {
        per_agent_order(
            &runner_requests.iter().map(|r| r.json()).collect::<Vec<_>>(),
            &adk_requests
                .iter()
                .map(|(_, _, request)| request.clone())
                .collect::<Vec<_>>(),
        )
    } else {
        (0..runner_requests.len())
            .map(|i| (i < adk_requests.len()).then_some(i))
            .collect()
    };
    for (got, i) in runner_requests.iter().zip(order) {
        let Some(i) = i else {
            problems.push(format!(
                "a request of agent {:?} ADK did not make",
                requesting_agent(&got.json())
            ));
            continue;
        };
        let (turn, path, expected) = &adk_requests[i];
        let place = format!("request {i} (turn {turn})");
        match &litellm {
            None => {
                if got.path != path.as_str().unwrap_or_default() {
                    problems.push(format!("{place}: path {} (ADK: {path})", got.path));
                }
                compare(
                    &place,
                    &normalise_request(with_branch_retellings_in_order(expected.clone(), &branches)),
                    &normalise_request(with_branch_retellings_in_order(got.json(), &branches)),
                    &mut problems,
                );
            }
            Some(litellm) => {
                // Grouped before the call ids are numbered, so both number them alike.
                let adk = with_branch_retellings_in_order(litellm["requests"][i].clone(), &branches);
                let got = with_branch_retellings_in_order(got.json(), &branches);
                compare(
                    &place,
                    &openai_request(&adk, &adk["generation"]),
                    &openai_request(&got, &got),
                    &mut problems,
                );
            }
        }
    }
    drop(copy);

    let stored = runs::get_session(server.endpoint(), app, user, session).await;
    let known = compare_session(case, &recording["session"], &stored, &mut problems);
    for (field, _, reason) in KNOWN_SESSION_DIFFERENCES.iter().filter(|(f, ..)| known.contains(f)) {
        eprintln!("{case}: known difference at {field}: {reason}");
    }
    assert!(
        problems.is_empty(),
        "{case}: {} differences from ADK Python's recording:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The Run requests' `run_config` for the script's (ADK's RunConfig fields, which record.py
/// ran every turn with); None when the script sets none. A field the replay cannot send
/// fails the test rather than replaying the case without it.
fn run_config_of(adk: &Value) -> Option<pb::RunConfig> {
    let fields = adk.as_object()?;
    let mut config = pb::RunConfig::default();
    for (field, value) in fields {
        match (field.as_str(), value) {
            ("include_thoughts_from_other_agents", Value::Bool(on)) => config.include_thoughts_from_other_agents = *on,
            _ => panic!("the replay cannot send the script's run_config field {field}: {value}"),
        }
    }
    Some(config)
}

/// Whether the script addressed a reply to an agent (record.py keeps the name).
fn adk_exchanges_name_agents(recording: &Value) -> bool {
    recording["turns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|turn| turn["exchanges"].as_array())
        .flatten()
        .any(|exchange| exchange["agent"].is_string())
}

/// For each of the runner's requests, the index of ADK's request it is compared with:
/// each agent's requests in order (the agent read from the identity line,
/// [`requesting_agent`]; a request without one counts as an agent of its own), since the
/// order between agents running at once (a parallel agent's branches) is their timing.
/// `None` for a request past the ADK requests of its agent.
fn per_agent_order(runner: &[Value], adk: &[Value]) -> Vec<Option<usize>> {
    let mut adk_of_agent: HashMap<Option<String>, std::collections::VecDeque<usize>> = HashMap::new();
    for (i, request) in adk.iter().enumerate() {
        adk_of_agent.entry(requesting_agent(request)).or_default().push_back(i);
    }
    runner
        .iter()
        .map(|request| adk_of_agent.get_mut(&requesting_agent(request))?.pop_front())
        .collect()
}

/// A `function_response` turn's answers (`name`, `response`; one or a list): each the
/// client's answer to a call of its name in the runner's session, the k answers of a name
/// that name's latest k calls in order, as record.py answers ADK's.
async fn answers_to_latest_calls(
    server: &ServiceProcess,
    app: &str,
    user: &str,
    session: &str,
    answers: &Value,
) -> Vec<pb::Part> {
    let answers = match answers {
        Value::Array(answers) => answers.clone(),
        answer => vec![answer.clone()],
    };
    let stored = runs::get_session(server.endpoint(), app, user, session).await;
    let calls_of = |name: &str| -> Vec<String> {
        stored
            .events
            .iter()
            .flat_map(|event| event.content.iter().flat_map(|content| content.parts.iter()))
            .filter_map(|part| match &part.kind {
                Some(pb::part::Kind::FunctionCall(call)) if call.name == name => call.id.clone(),
                _ => None,
            })
            .collect()
    };
    let name_of = |answer: &Value| answer["name"].as_str().expect("function_response name").to_string();
    answers
        .iter()
        .enumerate()
        .map(|(k, answer)| {
            let name = name_of(answer);
            let calls = calls_of(&name);
            let of_name = answers.iter().filter(|a| name_of(a) == name).count();
            let earlier = answers[..k].iter().filter(|a| name_of(a) == name).count();
            let call_id = calls
                .len()
                .checked_sub(of_name)
                .map(|first| calls[first + earlier].clone())
                .unwrap_or_else(|| panic!("{of_name} answers of {name}, {} calls", calls.len()));
            let response = pb::FunctionResponse {
                name,
                response: Some(adk_grpc_core::convert::json_to_proto(&answer["response"])),
                id: Some(call_id),
                ..Default::default()
            };
            pb::Part {
                kind: Some(pb::part::Kind::FunctionResponse(response)),
                ..Default::default()
            }
        })
        .collect()
}

/// A turn's `inline_data` (its `mime_type` and base64 `data`, as record.py sends it after
/// the user's text) as a part of the user's message.
fn inline_data(inline: &Value) -> pb::Part {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD
        .decode(inline["data"].as_str().expect("inline data"))
        .expect("base64 inline data");
    pb::Part {
        kind: Some(pb::part::Kind::InlineData(pb::Blob {
            mime_type: inline["mime_type"].as_str().expect("inline mime_type").into(),
            data,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The test venv's Python for the server: the Python worker serving the cases' Python
/// tools and callbacks runs in it, and a case's MCP server is `python` on the PATH (as
/// record.py runs it).
fn python_env() -> [(String, String); 2] {
    let python = venv_python();
    let bin = python.parent().expect("the venv's bin directory");
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    [
        ("ADK_PYTHON".to_string(), python.display().to_string()),
        ("PATH".to_string(), path.to_string_lossy().into_owned()),
    ]
}

/// The session's files before the first turn, as the recording saved them (name to text).
async fn save_artifacts(server: &ServiceProcess, app: &str, user: &str, session: &str, artifacts: &Value) {
    let Some(artifacts) = artifacts.as_object().filter(|a| !a.is_empty()) else {
        return;
    };
    let service = RemoteArtifactService::connect(server.endpoint())
        .await
        .expect("connect to the artifact service");
    for (name, text) in artifacts {
        let save = SaveRequest {
            app_name: app.into(),
            user_id: user.into(),
            session_id: session.into(),
            file_name: name.clone(),
            part: Part::text_part(text.as_str().expect("an artifact's text")),
            version: None,
        };
        service.save(save).await.expect("save the artifact");
    }
}

/// The user's memories before the first turn, as the recording added them: an earlier
/// session's events, each of its own invocation (ADK's `add_session_to_memory`; here
/// AddEventsToMemory, which records no session id, as ADK's in-memory service records none).
async fn add_memories(server: &ServiceProcess, app: &str, user: &str, memory: &Value) {
    let Some(memory) = memory.as_array().filter(|m| !m.is_empty()) else {
        return;
    };
    let events = memory
        .iter()
        .map(|m| {
            let (id, author) = (m["id"].as_str().expect("id"), m["author"].as_str().expect("author"));
            let mut content = user_text(m["text"].as_str().expect("text"));
            content.role = if author == "user" { "user" } else { "model" }.into();
            pb::Event {
                id: id.into(),
                invocation_id: format!("{id}-invocation"),
                author: author.into(),
                timestamp: Some(prost_types::Timestamp {
                    seconds: m["timestamp"].as_i64().expect("timestamp"),
                    nanos: 0,
                }),
                content: Some(content),
                ..Default::default()
            }
        })
        .collect();
    MemoryServiceClient::connect(server.endpoint())
        .await
        .expect("connect to the memory service")
        .add_events_to_memory(pb::AddEventsToMemoryRequest {
            app_name: app.into(),
            user_id: user.into(),
            events,
            ..Default::default()
        })
        .await
        .expect("AddEventsToMemory");
}

/// A part's inline data in standard base64: google-genai writes bytes in the URL-safe
/// alphabet (pydantic's), the runner in the standard one; the bytes are the same.
fn standard_base64(part: &mut Value) {
    if let Some(Value::String(data)) = part.pointer_mut("/inlineData/data") {
        *data = data.replace('-', "+").replace('_', "/");
    }
}

/// A model request with the normalisations the comparison allows:
/// - the ids the runner gave the model's function calls (`adk-…`: Gemini gives none) are
///   left out of the contents, as ADK leaves its own out before it sends a request;
/// - an empty `generationConfig` is left out (ADK's client sends `{}`, which asks for the
///   same defaults as none);
/// - a declaration's `parameters_json_schema` (the name google-genai gives a JSON Schema
///   made from a Python signature) and `parameters` are the same field: the schema is
///   compared, under `parameters`; `response_json_schema` (a result's JSON Schema, as
///   google-genai names the field) is compared as `responseJsonSchema`, its JSON name;
/// - inline data is compared in standard base64 ([`standard_base64`]).
fn normalise_request(mut request: Value) -> Value {
    if let Some(body) = request.as_object_mut()
        && body.get("generationConfig").is_some_and(|c| c == &json!({}))
    {
        body.remove("generationConfig");
    }
    for part in request["contents"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .flat_map(|content| content["parts"].as_array_mut().into_iter().flatten())
    {
        standard_base64(part);
        for kind in ["functionCall", "functionResponse"] {
            let made_here = part
                .pointer(&format!("/{kind}/id"))
                .and_then(Value::as_str)
                .is_some_and(|id| id.starts_with("adk-"));
            if made_here {
                part[kind].as_object_mut().expect("an object").remove("id");
            }
        }
    }
    for tool in request["tools"].as_array_mut().into_iter().flatten() {
        for declaration in tool["functionDeclarations"].as_array_mut().into_iter().flatten() {
            let declaration = declaration.as_object_mut().expect("a declaration is an object");
            if let Some(schema) = declaration.remove("parameters_json_schema") {
                declaration.insert("parameters".into(), schema);
            }
            // The same proto field by its two JSON names: google-genai sends the field's
            // own name, the runner its JSON name, as it names every other field.
            if let Some(schema) = declaration.remove("response_json_schema") {
                declaration.insert("responseJsonSchema".into(), schema);
            }
        }
    }
    without_measured_times(&mut request);
    request
}

/// What a model consult measured, its `latency_ms` (a result's field, and the same
/// field in a result written as text: the advisor's transcript, a tool message on the
/// OpenAI wire), as `<measured>`: a time is never the same twice. Its presence and
/// place are still compared.
fn without_measured_times(value: &mut Value) {
    const FIELD: &str = "latency_ms";
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if key == FIELD && field.is_number() {
                    *field = json!("<measured>");
                } else {
                    without_measured_times(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(without_measured_times),
        Value::String(text) if text.contains(FIELD) => {
            let key = format!("\"{FIELD}\": ");
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find(&key) {
                out.push_str(&rest[..at + key.len()]);
                rest = &rest[at + key.len()..];
                let number = rest
                    .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
                    .unwrap_or(rest.len());
                out.push_str(if number > 0 { "<measured>" } else { "" });
                rest = &rest[number..];
            }
            out.push_str(rest);
            *text = out;
        }
        _ => {}
    }
}

/// The OpenAI sampling parameters ADK hands LiteLLM, by their chat-completions names.
/// `top_k` is not one (ADK passes Gemini's on; LiteLLM refuses or drops it for an OpenAI
/// model), nor is a thinking config, which LiteLLM maps from its own model table.
const OPENAI_GENERATION: [&str; 7] = [
    "temperature",
    "max_completion_tokens",
    "top_p",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
];

/// What of a chat-completions request is compared (its sampling parameters read from
/// `generation`: ADK's conversion keeps them apart), with the normalisations the
/// comparison allows:
/// - the messages, the tools, `response_format`, `tool_choice` and the sampling
///   parameters ([`OPENAI_GENERATION`]) are compared; the rest (the model's name,
///   `stream` and its options) is how a client calls, not what ADK converts;
/// - a message's null fields are left out (the API reads null as absent, and LiteLLM
///   builds its messages with them);
/// - tool call ids are numbered in order of appearance (the recording has none: ADK
///   leaves them out of a Gemini request; which result answers which call is still
///   compared).
fn openai_request(body: &Value, generation: &Value) -> Value {
    let mut out = Map::new();
    for key in ["messages", "tools", "response_format", "tool_choice"] {
        if let Some(value) = body.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), value.clone());
        }
    }
    for key in OPENAI_GENERATION {
        if let Some(value) = generation.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), value.clone());
        }
    }
    let mut ids = Ids::default();
    for message in out
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(message) = message.as_object_mut() else {
            continue;
        };
        message.retain(|_, value| !value.is_null());
        if let Some(Value::String(id)) = message.get("tool_call_id").cloned() {
            message.insert("tool_call_id".into(), ids.number("call", &id).into());
        }
        for call in message
            .get_mut("tool_calls")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(Value::String(id)) = call.get("id").cloned() {
                call["id"] = ids.number("call", &id).into();
            }
        }
    }
    let mut out = Value::Object(out);
    without_measured_times(&mut out);
    out
}

/// The chat-completions reply to the `n`th request for ADK's recorded Gemini reply: its
/// text or its function calls (ids `call_<n>_<i>`, as OpenAI gives ids), its model
/// version as the model and its token counts as the usage, so the stored event is
/// compared with ADK's.
fn openai_reply(gemini: &Value, n: usize) -> Value {
    let candidate = &gemini["candidates"][0];
    let parts = candidate["content"]["parts"].as_array().cloned().unwrap_or_default();
    let is_thought = |p: &&Value| p["thought"] == true;
    let text: String = parts
        .iter()
        .filter(|p| !is_thought(p))
        .filter_map(|p| p["text"].as_str())
        .collect();
    // A thought as an OpenAI-compatible server that reasons sends it.
    let reasoning: String = parts
        .iter()
        .filter(is_thought)
        .filter_map(|p| p["text"].as_str())
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|p| p.get("functionCall"))
        .enumerate()
        .map(|(i, call)| {
            json!({
                "id": format!("call_{n}_{i}"),
                "type": "function",
                "function": {"name": call["name"], "arguments": call["args"].to_string()},
            })
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": (!text.is_empty()).then_some(text)});
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = reasoning.into();
    }
    let usage = &gemini["usageMetadata"];
    json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": gemini["modelVersion"],
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
        }],
        "usage": {
            "prompt_tokens": usage["promptTokenCount"],
            "completion_tokens": usage["candidatesTokenCount"],
            "total_tokens": usage["totalTokenCount"],
        },
    })
}

/// The differences between `expected` and `got`, each named by its path under `place`.
fn compare(place: &str, expected: &Value, got: &Value, problems: &mut Vec<String>) {
    let mut found = Vec::new();
    diff("", expected, got, &mut found);
    problems.extend(found.into_iter().map(|(path, what)| format!("{place}: {path}: {what}")));
}

/// Each path where `got` differs from `expected`, with both values.
fn diff(path: &str, expected: &Value, got: &Value, found: &mut Vec<(String, String)>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            let mut keys: Vec<&String> = e.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff(
                    &at,
                    e.get(key).unwrap_or(&Value::Null),
                    g.get(key).unwrap_or(&Value::Null),
                    found,
                );
            }
        }
        (Value::Array(e), Value::Array(g)) if e.len() == g.len() => {
            for (i, (e, g)) in e.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), e, g, found);
            }
        }
        _ if expected == got => {}
        // Numbers by value: protobuf's Value holds every number as a double (a stored 18.0
        // comes back as 18), and a JSON API reads 18 and 18.0 alike.
        (Value::Number(e), Value::Number(g)) if e.as_f64() == g.as_f64() => {}
        _ => found.push((path.to_string(), format!("ADK {expected}, runner {got}"))),
    }
}

/// Compares the stored events with ADK's; differences in [`KNOWN_SESSION_DIFFERENCES`]
/// are returned (their fields), every other one is a problem.
fn compare_session(case: &str, adk: &Value, stored: &pb::Session, problems: &mut Vec<String>) -> Vec<&'static str> {
    let mut ids = Ids::default();
    let expected: Vec<Value> = in_branch_order(adk["events"].as_array().expect("events").clone())
        .into_iter()
        .map(|e| normalise_adk_event(e, &mut ids))
        .collect();
    let mut ids = Ids::default();
    let mut known = Vec::new();
    let got: Vec<Value> = in_branch_order(stored.events.iter().map(adk_json).collect())
        .into_iter()
        .map(|event| normalise_adk_event(event, &mut ids))
        .collect();
    if expected.len() != got.len() {
        let authors = |events: &[Value]| {
            events
                .iter()
                .map(|e| e["author"].to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        problems.push(format!(
            "session: {} events (authors {}), ADK stored {} (authors {})",
            got.len(),
            authors(&got),
            expected.len(),
            authors(&expected)
        ));
    }
    for (i, (expected, got)) in expected.iter().zip(&got).enumerate() {
        let mut found = Vec::new();
        diff("", expected, got, &mut found);
        for (path, what) in found {
            match KNOWN_SESSION_DIFFERENCES
                .iter()
                .find(|(field, cases, _)| path.starts_with(field) && (cases.is_empty() || cases.contains(&case)))
            {
                Some((field, ..)) => known.push(*field),
                None => problems.push(format!("session event {i} ({}): {path}: {what}", expected["author"])),
            }
        }
    }
    known.sort();
    known.dedup();
    known
}

/// The events with those of sibling parallel branches grouped by branch: in each run of
/// consecutive events that carry a `branch` (only a parallel agent's branches do), the
/// events are ordered by the branch below the run's common one (`research.food_scout`
/// before `research.weather_scout`), each branch's own events in their order. How the
/// branches' events interleave is their timing, in ADK as in the runner; each branch's
/// order, and everything outside the runs, is still compared. Applied alike to ADK's
/// events and the runner's, before ids are numbered.
fn in_branch_order(events: Vec<Value>) -> Vec<Value> {
    in_order_of_branches(events, |event| {
        event["branch"].as_str().filter(|b| !b.is_empty()).map(str::to_string)
    })
}

/// `items` with each run of consecutive items of parallel branches (`branch` says whose
/// an item is) ordered by the branch below the run's common one, stably.
fn in_order_of_branches<T>(items: Vec<T>, branch: impl Fn(&T) -> Option<String>) -> Vec<T> {
    let mut ordered = Vec::with_capacity(items.len());
    let mut run: Vec<(Vec<String>, T)> = Vec::new();
    let close = |run: &mut Vec<(Vec<String>, T)>, ordered: &mut Vec<T>| {
        let Some((first, _)) = run.first() else {
            return;
        };
        let common = run.iter().fold(first.len(), |common, (path, _)| {
            first.iter().zip(path).take(common).take_while(|(a, b)| a == b).count()
        });
        // A stable sort: each branch keeps its events' order.
        run.sort_by(|(a, _), (b, _)| a.get(common).cmp(&b.get(common)));
        ordered.extend(run.drain(..).map(|(_, event)| event));
    };
    for item in items {
        match branch(&item) {
            // A segment's agent only: a delegated call's id (`intake@<id>`) is no order,
            // and on the Gemini wire the runner makes it at random.
            Some(branch) => run.push((
                branch
                    .split('.')
                    .map(|segment| segment.split('@').next().unwrap_or(segment).to_string())
                    .collect(),
                item,
            )),
            None => {
                close(&mut run, &mut ordered);
                ordered.push(item);
            }
        }
    }
    close(&mut run, &mut ordered);
    ordered
}

/// The grouping is the same whatever order the branches' events came in, keeps each
/// branch's own order and leaves events outside the runs where they are.
#[test]
fn sibling_branches_events_are_grouped_by_branch() {
    let event = |author: &str, branch: Option<&str>| json!({"author": author, "branch": branch});
    let authors = |events: Vec<Value>| -> Vec<String> {
        in_branch_order(events)
            .iter()
            .map(|e| e["author"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let one_timing = vec![
        event("user", None),
        event("weather 1", Some("research.weather")),
        event("food", Some("research.food")),
        event("weather 2", Some("research.weather")),
        event("planner", None),
    ];
    let another = vec![
        event("user", None),
        event("food", Some("research.food")),
        event("weather 1", Some("research.weather")),
        event("weather 2", Some("research.weather")),
        event("planner", None),
    ];
    let grouped = ["user", "food", "weather 1", "weather 2", "planner"];
    assert_eq!(authors(one_timing), grouped);
    assert_eq!(authors(another), grouped);
    let swapped_in_a_branch = vec![
        event("weather 2", Some("research.weather")),
        event("weather 1", Some("research.weather")),
    ];
    assert_eq!(authors(swapped_in_a_branch), ["weather 2", "weather 1"]);
}

/// Each agent of a parallel branch in ADK's stored session, and its branch.
fn branches_of_agents(adk_session: &Value) -> HashMap<String, String> {
    adk_session["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|event| Some((event["author"].as_str()?.into(), event["branch"].as_str()?.into())))
        .collect()
}

/// A request (Gemini's `contents` or an OpenAI-compatible request's `messages`) whose
/// retellings of parallel branches' events (`For context:`, `[<agent>] said: …`) are
/// grouped by branch as [`in_branch_order`] groups the events: an agent after a parallel
/// agent reads the branches' events in the order they were stored, which is their
/// timing. Applied alike to ADK's request and the runner's.
fn with_branch_retellings_in_order(mut request: Value, branches: &HashMap<String, String>) -> Value {
    if branches.is_empty() {
        return request;
    }
    let retold_branch = |item: &Value| {
        let parts = item.get("parts").or_else(|| item.get("content"))?.as_array()?;
        let [preamble, retelling, ..] = parts.as_slice() else {
            return None;
        };
        preamble["text"].as_str()?.starts_with("For context:").then_some(())?;
        let agent = retelling["text"].as_str()?.strip_prefix('[')?.split(']').next()?;
        branches.get(agent).cloned()
    };
    for key in ["contents", "messages"] {
        if let Some(Value::Array(items)) = request.get_mut(key) {
            *items = in_order_of_branches(std::mem::take(items), retold_branch);
        }
    }
    request
}

/// Ids and timestamps numbered in order of appearance, so a comparison still sees which
/// events share an invocation and which response answers which call. Each kind counts on
/// its own, so a difference of invocations does not shift the calls' numbers.
#[derive(Default)]
struct Ids {
    numbered: HashMap<String, String>,
    counts: HashMap<String, usize>,
}

impl Ids {
    fn number(&mut self, kind: &str, id: &str) -> String {
        if let Some(known) = self.numbered.get(id) {
            return known.clone();
        }
        let count = self.counts.entry(kind.to_string()).or_default();
        *count += 1;
        let numbered = format!("{kind}-{count}");
        self.numbered.insert(id.to_string(), numbered.clone());
        numbered
    }
}

/// An event in ADK's JSON (by alias, without None) with the normalisations the comparison
/// allows:
/// - `id` and `timestamp` are left out; `invocationId` and function call ids (in the
///   parts and in `longRunningToolIds`) are numbered in order of appearance ([`Ids`]);
/// - `nodeInfo` (ADK 2's workflow node path) is left out: the suite's Event has no such
///   field, so the wire cannot carry it;
/// - the call id in a delegated call's branch (`<agent>@<call id>`) and in
///   `isolationScope` (the call that opened a task) is numbered as the call's;
/// - empty maps and lists are left out: protobuf cannot tell an empty map or repeated
///   field from an absent one.
///
/// Numbers are left as they are: [`diff`] compares them by value (`4.0` is `4`).
fn normalise_adk_event(mut event: Value, ids: &mut Ids) -> Value {
    let object = event.as_object_mut().expect("an event is an object");
    for field in ["id", "timestamp", "nodeInfo"] {
        object.remove(field);
    }
    if let Some(Value::String(call)) = object.get("isolationScope").cloned() {
        object.insert("isolationScope".into(), ids.number("call", &call).into());
    }
    if let Some(Value::String(branch)) = object.get("branch").cloned() {
        let numbered: Vec<String> = branch
            .split('.')
            .map(|segment| match segment.split_once('@') {
                Some((agent, call)) => format!("{agent}@{}", ids.number("call", call)),
                None => segment.to_string(),
            })
            .collect();
        object.insert("branch".into(), numbered.join(".").into());
    }
    if let Some(Value::String(id)) = object.get("invocationId") {
        let numbered = ids.number("invocation", id);
        object.insert("invocationId".into(), numbered.into());
    }
    for part in event
        .pointer_mut("/content/parts")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        standard_base64(part);
        for kind in ["functionCall", "functionResponse"] {
            if let Some(Value::String(id)) = part.pointer(&format!("/{kind}/id")).cloned() {
                part[kind]["id"] = ids.number("call", &id).into();
            }
        }
    }
    // The long-running calls are named by their (numbered) call ids too.
    if let Some(Value::Array(ids_of_calls)) = event.get_mut("longRunningToolIds") {
        for id in ids_of_calls.iter_mut() {
            if let Value::String(call) = id {
                *id = ids.number("call", call).into();
            }
        }
    }
    without_measured_times(&mut event);
    drop_empty(&mut event);
    event
}

fn drop_empty(value: &mut Value) {
    if let Value::Object(map) = value {
        map.values_mut().for_each(drop_empty);
        map.retain(|key, v| {
            // A function's arguments and response are values: `{}` there is what was sent.
            let payload = matches!(key.as_str(), "args" | "response");
            payload || !matches!(v, Value::Object(m) if m.is_empty()) && !matches!(v, Value::Array(a) if a.is_empty())
        });
    }
}

/// A stored event in ADK's JSON form (by alias, without None), from the gRPC event.
fn adk_json(event: &pb::Event) -> Value {
    let core = adk_grpc_core::Event::try_from(event).expect("a valid event");
    let mut json = Map::new();
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            json.insert(key.to_string(), value);
        }
    };
    put("modelVersion", json!(event.model_version));
    put("content", core.content().map(content_json).unwrap_or(Value::Null));
    if let Some(usage) = &event.usage_metadata {
        put(
            "usageMetadata",
            json!({
                "promptTokenCount": usage.prompt_token_count,
                "candidatesTokenCount": usage.candidates_token_count,
                "totalTokenCount": usage.total_token_count,
            }),
        );
    }
    let finish = pb::FinishReason::try_from(event.finish_reason).unwrap_or_default();
    if finish != pb::FinishReason::Unspecified {
        put(
            "finishReason",
            json!(finish.as_str_name().trim_start_matches("FINISH_REASON_")),
        );
    }
    put("errorCode", json!(core.llm_response.error_code));
    put("errorMessage", json!(core.llm_response.error_message));
    put("partial", json!(event.partial));
    put("turnComplete", json!(event.turn_complete));
    put("invocationId", json!(event.invocation_id));
    put("author", json!(event.author));
    if !event.branch.is_empty() {
        put("branch", json!(event.branch));
    }
    if !event.isolation_scope.is_empty() {
        put("isolationScope", json!(event.isolation_scope));
    }
    put("output", core.output.clone().unwrap_or(Value::Null));
    let actions = &core.actions;
    put(
        "actions",
        json!({
            "stateDelta": actions.state_delta,
            "artifactDelta": actions.artifact_delta,
            "transferToAgent": actions.transfer_to_agent,
            "escalate": actions.escalate,
            "skipSummarization": actions.skip_summarization,
            "endOfAgent": actions.end_of_agent,
            "agentState": actions.agent_state,
            "setModelResponse": actions.set_model_response,
        }),
    );
    put("longRunningToolIds", json!(event.long_running_tool_ids));
    let mut value = Value::Object(json);
    drop_nulls(&mut value);
    value
}

fn drop_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(drop_nulls);
    }
}

/// A content as google-genai dumps it by alias: camelCase part fields.
fn content_json(content: &Content) -> Value {
    let parts: Vec<Value> = content
        .parts
        .iter()
        .map(|part| {
            let mut json = Map::new();
            if let PartKind::Text { text } = &part.kind {
                json.insert("text".into(), text.as_str().into());
            } else if let Some(call) = part.function_call_view() {
                json.insert(
                    "functionCall".into(),
                    json!({"id": call.id, "args": call.args, "name": call.name}),
                );
            } else if let Some(response) = part.function_response_view() {
                json.insert(
                    "functionResponse".into(),
                    json!({"id": response.id, "name": response.name, "response": response.response}),
                );
            } else {
                let mut generic = serde_json::to_value(part).expect("a part is JSON");
                camel_case_keys(&mut generic);
                return generic;
            }
            if let Some(thought) = part.thought {
                json.insert("thought".into(), thought.into());
            }
            Value::Object(json)
        })
        .collect();
    json!({"parts": parts, "role": content.role})
}

fn camel_case_keys(value: &mut Value) {
    if let Value::Object(map) = value {
        let old = std::mem::take(map);
        for (key, mut v) in old {
            camel_case_keys(&mut v);
            let mut camel = String::new();
            let mut upper = false;
            for c in key.chars() {
                match (c, upper) {
                    ('_', _) => upper = true,
                    (c, true) => {
                        camel.push(c.to_ascii_uppercase());
                        upper = false
                    }
                    (c, false) => camel.push(c),
                }
            }
            map.insert(camel, v);
        }
    }
}

#[tokio::test]
async fn single_agent() {
    replay("single_agent").await;
}

#[tokio::test]
async fn coordinator() {
    replay("coordinator").await;
}

#[tokio::test]
async fn sequential() {
    replay("sequential").await;
}

#[tokio::test]
async fn loop_exit() {
    replay("loop_exit").await;
}

#[tokio::test]
async fn examples() {
    replay("examples").await;
}

#[tokio::test]
async fn static_instruction() {
    replay("static_instruction").await;
}

#[tokio::test]
async fn static_instruction_parts() {
    replay("static_instruction_parts").await;
}

#[tokio::test]
async fn python_tools() {
    replay("python_tools").await;
}

#[tokio::test]
async fn transfer_with_tools() {
    replay("transfer_with_tools").await;
}

#[tokio::test]
async fn thoughts_in_contents() {
    replay("thoughts_in_contents").await;
}

#[tokio::test]
async fn empty_reply() {
    replay("empty_reply").await;
}

#[tokio::test]
async fn thoughts_from_other_agents() {
    replay("thoughts_from_other_agents").await;
}

#[tokio::test]
async fn python_callbacks() {
    replay("python_callbacks").await;
}

#[tokio::test]
async fn python_callbacks_all() {
    replay("python_callbacks_all").await;
}

#[tokio::test]
async fn python_toolset() {
    replay("python_toolset").await;
}

#[tokio::test]
async fn long_running() {
    replay("long_running").await;
}

#[tokio::test]
async fn include_contents_none() {
    replay("include_contents_none").await;
}

#[tokio::test]
async fn builtin_search() {
    replay("builtin_search").await;
}

#[tokio::test]
async fn memory_tools() {
    replay("memory_tools").await;
}

#[tokio::test]
async fn generation_config() {
    replay("generation_config").await;
}

#[tokio::test]
async fn transfer_limits() {
    replay("transfer_limits").await;
}

#[tokio::test]
async fn agent_tool() {
    replay("agent_tool").await;
}

#[tokio::test]
async fn output_schema() {
    replay("output_schema").await;
}

#[tokio::test]
async fn long_running_answered() {
    replay("long_running_answered").await;
}

#[tokio::test]
async fn long_running_in_task() {
    replay("long_running_in_task").await;
}

#[tokio::test]
async fn long_running_in_sequence() {
    replay("long_running_in_sequence").await;
}

#[tokio::test]
async fn answer_with_text_refused() {
    replay("answer_with_text_refused").await;
}

#[tokio::test]
async fn answers_in_sequence() {
    replay("answers_in_sequence").await;
}

#[tokio::test]
async fn resumable_workflow() {
    replay("resumable_workflow").await;
}

#[tokio::test]
async fn output_schema_tools() {
    replay("output_schema_tools").await;
}

#[tokio::test]
async fn output_schema_validators() {
    replay("output_schema_validators").await;
}

#[tokio::test]
async fn mcp_toolset() {
    replay("mcp_toolset").await;
}

#[tokio::test]
async fn maps_grounding() {
    replay("maps_grounding").await;
}

#[tokio::test]
async fn generation_config_openai() {
    replay("generation_config_openai").await;
}

#[tokio::test]
async fn output_schema_transfer() {
    replay("output_schema_transfer").await;
}

#[tokio::test]
async fn output_schema_list() {
    replay("output_schema_list").await;
}

#[tokio::test]
async fn output_schema_list_tools() {
    replay("output_schema_list_tools").await;
}

#[tokio::test]
async fn output_schema_dict_tools() {
    replay("output_schema_dict_tools").await;
}

#[tokio::test]
async fn output_schema_str_dict() {
    replay("output_schema_str_dict").await;
}

#[tokio::test]
async fn output_schema_defaults() {
    replay("output_schema_defaults").await;
}

#[tokio::test]
async fn output_schema_defaults_tools() {
    replay("output_schema_defaults_tools").await;
}

#[tokio::test]
async fn output_schema_union_schema() {
    replay("output_schema_union_schema").await;
}

#[tokio::test]
async fn output_schema_missing_argument() {
    replay("output_schema_missing_argument").await;
}

#[tokio::test]
async fn python_artifacts_read() {
    replay("python_artifacts_read").await;
}

#[tokio::test]
async fn python_callback_reads() {
    replay("python_callback_reads").await;
}

#[tokio::test]
async fn memory_present() {
    replay("memory_present").await;
}

#[tokio::test]
async fn mcp_output_schema() {
    replay("mcp_output_schema").await;
}

#[tokio::test]
async fn mcp_media() {
    replay("mcp_media").await;
}

#[tokio::test]
async fn resumable_transfer() {
    replay("resumable_transfer").await;
}

#[tokio::test]
async fn python_callback_tool_schema() {
    replay("python_callback_tool_schema").await;
}

#[tokio::test]
async fn user_choice() {
    replay("user_choice").await;
}

#[tokio::test]
async fn parallel_branch() {
    replay("parallel_branch").await;
}

#[tokio::test]
async fn parallel_branches() {
    replay("parallel_branches").await;
}

#[tokio::test]
async fn loop_max_iterations() {
    replay("loop_max_iterations").await;
}

#[tokio::test]
async fn model_inherited() {
    replay("model_inherited").await;
}

#[tokio::test]
async fn global_instruction() {
    replay("global_instruction").await;
}

#[tokio::test]
async fn instruction_artifact() {
    replay("instruction_artifact").await;
}

#[tokio::test]
async fn callback_chain() {
    replay("callback_chain").await;
}

#[tokio::test]
async fn input_schema() {
    replay("input_schema").await;
}

#[tokio::test]
async fn mcp_resources() {
    replay("mcp_resources").await;
}

#[tokio::test]
async fn state_placeholders() {
    replay("state_placeholders").await;
}

#[tokio::test]
async fn mcp_http() {
    replay("mcp_http").await;
}

#[tokio::test]
async fn generation_config_output() {
    replay("generation_config_output").await;
}

#[tokio::test]
async fn generation_config_more() {
    replay("generation_config_more").await;
}

#[tokio::test]
async fn generation_config_logprobs() {
    replay("generation_config_logprobs").await;
}

#[tokio::test]
async fn model_consult() {
    replay("model_consult").await;
}

#[tokio::test]
async fn model_consult_settings() {
    replay("model_consult_settings").await;
}

#[tokio::test]
async fn model_consult_parallel() {
    replay("model_consult_parallel").await;
}

#[tokio::test]
async fn model_consult_transcript() {
    replay("model_consult_transcript").await;
}

#[tokio::test]
async fn model_consult_thoughts() {
    replay("model_consult_thoughts").await;
}

#[tokio::test]
async fn model_consult_builtin() {
    replay("model_consult_builtin").await;
}

#[tokio::test]
async fn code_execution() {
    replay("code_execution").await;
}

#[tokio::test]
async fn thoughts_inline_text() {
    replay("thoughts_inline_text").await;
}

#[tokio::test]
async fn inline_files() {
    replay("inline_files").await;
}

#[tokio::test]
async fn agent_tool_run_config() {
    replay("agent_tool_run_config").await;
}

#[tokio::test]
async fn task_agent() {
    replay("task_agent").await;
}

#[tokio::test]
async fn task_agent_default() {
    replay("task_agent_default").await;
}

#[tokio::test]
async fn task_transfer() {
    replay("task_transfer").await;
}

#[tokio::test]
async fn single_turn_transfer() {
    replay("single_turn_transfer").await;
}

#[tokio::test]
async fn task_transfer_twice() {
    replay("task_transfer_twice").await;
}

#[tokio::test]
async fn task_peer_transfer() {
    replay("task_peer_transfer").await;
}

#[tokio::test]
async fn single_turn_transfer_schema() {
    replay("single_turn_transfer_schema").await;
}

#[tokio::test]
async fn task_agent_misfit_default() {
    replay("task_agent_misfit_default").await;
}

#[tokio::test]
async fn task_agent_typed_output() {
    replay("task_agent_typed_output").await;
}

#[tokio::test]
async fn single_turn_input_schema() {
    replay("single_turn_input_schema").await;
}

#[tokio::test]
async fn task_nested() {
    replay("task_nested").await;
}

#[tokio::test]
async fn task_single_turn_tool() {
    replay("task_single_turn_tool").await;
}

/// The cases on the OpenAI-compatible wire: every case whose agents a model of that
/// wire can run (`builtin_search`, `maps_grounding` and `model_consult_builtin` name Gemini's own tools,
/// `generation_config` its safety settings, all refused for an OpenAI model at load).
/// Calls and results whose keys are not in sorted order (`python_tools`' arguments, an
/// MCP content block's `type` before its `text`, ADK's `MemoryEntry` fields) reach the
/// model's messages in their order, as ADK's `json.dumps` writes a dict
/// (docs/adk-conformance.md, "Key order").
mod openai {
    use super::replay_openai;

    #[tokio::test]
    async fn model_consult() {
        replay_openai("model_consult").await;
    }

    #[tokio::test]
    async fn model_consult_settings() {
        replay_openai("model_consult_settings").await;
    }

    #[tokio::test]
    async fn model_consult_parallel() {
        replay_openai("model_consult_parallel").await;
    }

    #[tokio::test]
    async fn model_consult_transcript() {
        replay_openai("model_consult_transcript").await;
    }

    #[tokio::test]
    async fn task_agent() {
        replay_openai("task_agent").await;
    }

    #[tokio::test]
    async fn task_agent_default() {
        replay_openai("task_agent_default").await;
    }

    #[tokio::test]
    async fn task_transfer() {
        replay_openai("task_transfer").await;
    }

    #[tokio::test]
    async fn single_turn_transfer() {
        replay_openai("single_turn_transfer").await;
    }

    #[tokio::test]
    async fn task_peer_transfer() {
        replay_openai("task_peer_transfer").await;
    }

    #[tokio::test]
    async fn task_transfer_twice() {
        replay_openai("task_transfer_twice").await;
    }

    #[tokio::test]
    async fn single_turn_transfer_schema() {
        replay_openai("single_turn_transfer_schema").await;
    }

    #[tokio::test]
    async fn task_agent_misfit_default() {
        replay_openai("task_agent_misfit_default").await;
    }

    #[tokio::test]
    async fn task_agent_typed_output() {
        replay_openai("task_agent_typed_output").await;
    }

    #[tokio::test]
    async fn single_turn_input_schema() {
        replay_openai("single_turn_input_schema").await;
    }

    #[tokio::test]
    async fn task_nested() {
        replay_openai("task_nested").await;
    }

    #[tokio::test]
    async fn task_single_turn_tool() {
        replay_openai("task_single_turn_tool").await;
    }

    #[tokio::test]
    async fn model_consult_thoughts() {
        replay_openai("model_consult_thoughts").await;
    }

    #[tokio::test]
    async fn python_tools() {
        replay_openai("python_tools").await;
    }

    #[tokio::test]
    async fn long_running() {
        replay_openai("long_running").await;
    }

    #[tokio::test]
    async fn mcp_toolset() {
        replay_openai("mcp_toolset").await;
    }

    #[tokio::test]
    async fn memory_present() {
        replay_openai("memory_present").await;
    }

    #[tokio::test]
    async fn long_running_answered() {
        replay_openai("long_running_answered").await;
    }

    #[tokio::test]
    async fn answer_with_text_refused() {
        replay_openai("answer_with_text_refused").await;
    }

    #[tokio::test]
    async fn long_running_in_task() {
        replay_openai("long_running_in_task").await;
    }

    #[tokio::test]
    async fn long_running_in_sequence() {
        replay_openai("long_running_in_sequence").await;
    }

    #[tokio::test]
    async fn resumable_workflow() {
        replay_openai("resumable_workflow").await;
    }

    #[tokio::test]
    async fn single_agent() {
        replay_openai("single_agent").await;
    }

    #[tokio::test]
    async fn coordinator() {
        replay_openai("coordinator").await;
    }

    #[tokio::test]
    async fn sequential() {
        replay_openai("sequential").await;
    }

    #[tokio::test]
    async fn loop_exit() {
        replay_openai("loop_exit").await;
    }

    #[tokio::test]
    async fn examples() {
        replay_openai("examples").await;
    }

    #[tokio::test]
    async fn static_instruction() {
        replay_openai("static_instruction").await;
    }

    #[tokio::test]
    async fn static_instruction_parts() {
        replay_openai("static_instruction_parts").await;
    }

    #[tokio::test]
    async fn include_contents_none() {
        replay_openai("include_contents_none").await;
    }

    #[tokio::test]
    async fn memory_tools() {
        replay_openai("memory_tools").await;
    }

    #[tokio::test]
    async fn transfer_limits() {
        replay_openai("transfer_limits").await;
    }

    #[tokio::test]
    async fn agent_tool() {
        replay_openai("agent_tool").await;
    }

    #[tokio::test]
    async fn python_callbacks() {
        replay_openai("python_callbacks").await;
    }

    #[tokio::test]
    async fn python_callbacks_all() {
        replay_openai("python_callbacks_all").await;
    }

    #[tokio::test]
    async fn python_toolset() {
        replay_openai("python_toolset").await;
    }

    #[tokio::test]
    async fn transfer_with_tools() {
        replay_openai("transfer_with_tools").await;
    }

    #[tokio::test]
    async fn thoughts_in_contents() {
        replay_openai("thoughts_in_contents").await;
    }

    #[tokio::test]
    async fn thoughts_inline_text() {
        replay_openai("thoughts_inline_text").await;
    }

    #[tokio::test]
    async fn agent_tool_run_config() {
        replay_openai("agent_tool_run_config").await;
    }

    #[tokio::test]
    async fn empty_reply() {
        replay_openai("empty_reply").await;
    }

    #[tokio::test]
    async fn thoughts_from_other_agents() {
        replay_openai("thoughts_from_other_agents").await;
    }

    #[tokio::test]
    async fn output_schema() {
        replay_openai("output_schema").await;
    }

    #[tokio::test]
    async fn output_schema_tools() {
        replay_openai("output_schema_tools").await;
    }

    #[tokio::test]
    async fn output_schema_validators() {
        replay_openai("output_schema_validators").await;
    }

    #[tokio::test]
    async fn generation_config_openai() {
        replay_openai("generation_config_openai").await;
    }

    #[tokio::test]
    async fn output_schema_transfer() {
        replay_openai("output_schema_transfer").await;
    }

    #[tokio::test]
    async fn output_schema_list() {
        replay_openai("output_schema_list").await;
    }

    #[tokio::test]
    async fn output_schema_list_tools() {
        replay_openai("output_schema_list_tools").await;
    }

    #[tokio::test]
    async fn output_schema_dict_tools() {
        replay_openai("output_schema_dict_tools").await;
    }

    #[tokio::test]
    async fn output_schema_str_dict() {
        replay_openai("output_schema_str_dict").await;
    }

    #[tokio::test]
    async fn output_schema_defaults() {
        replay_openai("output_schema_defaults").await;
    }

    #[tokio::test]
    async fn output_schema_defaults_tools() {
        replay_openai("output_schema_defaults_tools").await;
    }

    #[tokio::test]
    async fn output_schema_union_schema() {
        replay_openai("output_schema_union_schema").await;
    }

    #[tokio::test]
    async fn output_schema_missing_argument() {
        replay_openai("output_schema_missing_argument").await;
    }

    /// Gemini's own tools cannot run on another provider: the directory is refused at
    /// load, the refusal naming the tool (ADK's GoogleMapsGroundingTool raises for a
    /// model that is not Gemini too, at the first request).
    #[test]
    fn maps_grounding_is_refused_at_load() {
        let copy = super::openai_copy("maps_grounding");
        let output = std::process::Command::new(adk_grpc_testkit::workspace_bin("adk-server"))
            .args(["--listen", "127.0.0.1:0", "--agents"])
            .arg(copy.path().join("maps_grounding"))
            .env("OPENAI_API_KEY", "conformance-key")
            .output()
            .expect("run adk-server");
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{log}");
        assert!(
            log.contains(
                "google_maps_grounding is a tool Gemini runs itself, and this agent's model is not a gemini model \
                 (openai)"
            ),
            "{log}"
        );
    }

    #[tokio::test]
    async fn python_artifacts_read() {
        replay_openai("python_artifacts_read").await;
    }

    #[tokio::test]
    async fn python_callback_reads() {
        replay_openai("python_callback_reads").await;
    }

    #[tokio::test]
    async fn resumable_transfer() {
        replay_openai("resumable_transfer").await;
    }

    #[tokio::test]
    async fn mcp_output_schema() {
        replay_openai("mcp_output_schema").await;
    }

    #[tokio::test]
    async fn mcp_media() {
        replay_openai("mcp_media").await;
    }

    #[tokio::test]
    async fn python_callback_tool_schema() {
        replay_openai("python_callback_tool_schema").await;
    }

    #[tokio::test]
    async fn user_choice() {
        replay_openai("user_choice").await;
    }

    #[tokio::test]
    async fn parallel_branch() {
        replay_openai("parallel_branch").await;
    }

    #[tokio::test]
    async fn parallel_branches() {
        replay_openai("parallel_branches").await;
    }

    #[tokio::test]
    async fn loop_max_iterations() {
        replay_openai("loop_max_iterations").await;
    }

    #[tokio::test]
    async fn model_inherited() {
        replay_openai("model_inherited").await;
    }

    #[tokio::test]
    async fn global_instruction() {
        replay_openai("global_instruction").await;
    }

    #[tokio::test]
    async fn instruction_artifact() {
        replay_openai("instruction_artifact").await;
    }

    #[tokio::test]
    async fn callback_chain() {
        replay_openai("callback_chain").await;
    }

    #[tokio::test]
    async fn input_schema() {
        replay_openai("input_schema").await;
    }

    #[tokio::test]
    async fn mcp_resources() {
        replay_openai("mcp_resources").await;
    }

    #[tokio::test]
    async fn state_placeholders() {
        replay_openai("state_placeholders").await;
    }

    #[tokio::test]
    async fn mcp_http() {
        replay_openai("mcp_http").await;
    }

    /// ADK's LiteLlm maps the function-calling mode ANY to `tool_choice: required` and
    /// drops the allowed names, the image, speech and transcription settings, the
    /// service tier and `store`; the runner does the same.
    #[tokio::test]
    async fn generation_config_more() {
        replay_openai("generation_config_more").await;
    }

    /// ADK's LiteLlm sends no `logprobs` / `top_logprobs`, and neither does the runner.
    #[tokio::test]
    async fn generation_config_logprobs() {
        replay_openai("generation_config_logprobs").await;
    }
}
