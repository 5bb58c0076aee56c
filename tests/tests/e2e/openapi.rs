//! `kind: openapi` end to end: a real FastAPI app (tests/openapi/app.py) serves the
//! spec FastAPI generates; the real `adk-server` fetches it at start, offers one tool
//! per operation to a model speaking the OpenAI wire format, and calls the operations
//! as the spec describes them. The tools are the ones google-adk's own OpenAPIToolset
//! makes of that spec. The app records what it got; the session stores the function
//! responses. A spec the suite cannot read stops the start, naming the field.
//! The convention: docs/tools.md, "Tools from an OpenAPI spec".

use super::mcp::{last_text, response, responses};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_e2e::script_server::ScriptServer;
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{ServiceProcess, venv_python, workspace_bin};
use serde_json::{Value, json};

const USER: &str = "alice";

fn agents(provider: &FakeServer, spec: &str) -> String {
    format!(
        "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
  pets:
    kind: openapi
    spec: '{spec}'
    headers_from_env: {{ x-api-key: E2E_PETS_KEY }}
    timeout_secs: 10
apps:
  shop:
    root_agent: {{ name: clerk, model: gpt, tools: [pets] }}
",
        provider = provider.url(),
    )
}

/// The declaration of `name` among the tools of a chat completions request.
fn declaration<'a>(request: &'a Value, name: &str) -> &'a Value {
    request["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["function"]["name"] == name))
        .map(|tool| &tool["function"])
        .unwrap_or_else(|| panic!("no tool {name} in {request}"))
}

#[tokio::test]
async fn the_operations_of_a_fastapi_apps_spec_are_tools_the_model_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = ScriptServer::start("openapi/app.py", dir.path()).await;
    let provider = FakeServer::start().await;
    let file = runs::agents_file(&agents(&provider, &format!("{}/openapi.json", app.url)));
    let args = ["--store-url", "memory://", "--agents"].map(String::from);
    let args = [&args[..], &[file.path().display().to_string()]].concat();
    let envs =
        [("E2E_OPENAI_KEY", "sk-e2e"), ("E2E_PETS_KEY", "pets-key")].map(|(k, v)| (k.to_string(), v.to_string()));
    let mut server = ServiceProcess::spawn("adk-server", &args, &envs).await;

    // One turn: a path parameter that must be encoded, a query and a header parameter;
    // a JSON body flattened into arguments; a 404 the model reads as an error.
    provider.push(openai::tool_calls(&[
        (
            "call_1",
            "get_pet",
            json!({"pet_id": "Rex & co?", "verbose": true, "x_tenant": "acme"}),
        ),
        (
            "call_2",
            "add_pet",
            json!({"name": "Tom", "species": "cat", "tags": ["indoor"]}),
        ),
        ("call_3", "get_pet", json!({"pet_id": "missing"})),
    ]));
    provider.push(openai::text("Done."));
    let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
    let request = runs::run_request("shop", USER, "s1", user_text("Find Rex, add Tom"));
    let (events, failure) = runs::run_to_end(&mut client, request).await;
    assert!(failure.is_none(), "{failure:?}\n{}", server.tail_log(40));
    assert_eq!(last_text(&events), "Done.");

    // What the model was offered: one tool per operation, named after the snake_cased
    // operationId, with the path, query and header parameters and the body's properties.
    let first = provider.requests()[0].json();
    let get_pet = declaration(&first, "get_pet");
    assert_eq!(get_pet["description"], "Reads one pet by its id.");
    let properties = &get_pet["parameters"]["properties"];
    assert_eq!(properties["pet_id"]["type"], "string", "{get_pet}");
    assert_eq!(properties["verbose"]["type"], "boolean", "{get_pet}");
    assert!(properties.get("x_tenant").is_some(), "{get_pet}");
    assert_eq!(get_pet["parameters"]["required"], json!(["pet_id"]));
    let add_pet = declaration(&first, "add_pet");
    assert_eq!(add_pet["description"], "Adds a pet.");
    assert_eq!(
        add_pet["parameters"]["properties"]["tags"]["items"]["type"], "string",
        "{add_pet}"
    );
    assert_eq!(add_pet["parameters"]["required"], json!(["name"]));

    // The same names, descriptions and arguments as google-adk's own OpenAPIToolset gives
    // for this spec.
    let adk = adk_declarations(&format!("{}/openapi.json", app.url));
    let ours: serde_json::Map<String, Value> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| {
            let function = &tool["function"];
            let sorted = |value: &Value| {
                let mut names: Vec<String> = match value {
                    Value::Object(properties) => properties.keys().cloned().collect(),
                    Value::Array(names) => names.iter().filter_map(|n| n.as_str().map(str::to_string)).collect(),
                    _ => Vec::new(),
                };
                names.sort();
                names
            };
            let parameters = &function["parameters"];
            (
                function["name"].as_str().expect("a name").to_string(),
                json!({
                    "description": function["description"],
                    "properties": sorted(&parameters["properties"]),
                    "required": sorted(&parameters["required"]),
                }),
            )
        })
        .collect();
    assert_eq!(Value::Object(ours), adk, "ours, then google-adk's");

    // What the app received.
    let gets = app.calls("/pets/Rex & co?");
    assert_eq!(gets.len(), 1, "{gets:?} {:#?}", responses(&events));
    let get = &gets[0];
    assert_eq!(get["method"], "GET");
    // Encoded: unencoded, the `?` would have started the query.
    assert_eq!(get["raw_path"], "/pets/Rex%20%26%20co%3F");
    assert_eq!(get["query"], json!([["verbose", "true"]]));
    assert_eq!(get["headers"]["x-tenant"], "acme");
    assert_eq!(get["headers"]["x-api-key"], "pets-key", "headers_from_env is sent");
    let posts = app.calls("/pets");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["method"], "POST");
    assert_eq!(
        posts[0]["json"],
        json!({"name": "Tom", "species": "cat", "tags": ["indoor"]})
    );
    assert_eq!(posts[0]["headers"]["content-type"], "application/json");
    assert_eq!(app.calls("/pets/missing").len(), 1);

    // The function responses, as stored in the session.
    let session = runs::get_session(server.endpoint(), "shop", USER, "s1").await;
    let stored = responses(&session.events);
    let found: Vec<&Value> = stored
        .iter()
        .filter(|(name, _)| name == "get_pet")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(found.len(), 2, "{stored:#?}");
    assert_eq!(
        found[0],
        &json!({"id": "Rex & co?", "name": "Rex", "verbose": true, "tenant": "acme"})
    );
    let error = found[1]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("OpenAPI tool get_pet: GET")
            && error.contains("/pets/missing answered 404 Not Found")
            && error.contains("no such pet"),
        "{}",
        found[1]
    );
    assert_eq!(
        response(&stored, "add_pet"),
        &json!({"id": "p-2", "name": "Tom", "species": "cat", "tags": ["indoor"]})
    );
    server.terminate().await;
}

/// What google-adk's OpenAPIToolset makes of the spec at `url`: per tool, its
/// description and its arguments' names (all, and the required ones), sorted.
fn adk_declarations(url: &str) -> Value {
    const SCRIPT: &str = r#"
import asyncio, json, sys, urllib.request, warnings
warnings.simplefilter("ignore")
from google.adk.tools.openapi_tool import OpenAPIToolset
spec = urllib.request.urlopen(sys.argv[1]).read().decode()
tools = asyncio.run(OpenAPIToolset(spec_str=spec, spec_str_type="json").get_tools())
declared = {}
for tool in tools:
    schema = tool._operation_parser.get_json_schema()
    declared[tool.name] = {
        "description": tool.description,
        "properties": sorted(schema["properties"]),
        "required": sorted(schema["required"]),
    }
print(json.dumps(declared))
"#;
    let output = std::process::Command::new(venv_python())
        .args(["-c", SCRIPT, url])
        .output()
        .expect("run google-adk");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[tokio::test]
async fn a_spec_with_a_ref_into_another_file_stops_the_start_naming_the_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = ScriptServer::start("openapi/app.py", dir.path()).await;
    let provider = FakeServer::start().await;
    let spec = format!("{}/bad-openapi.json", app.url);
    let file = runs::agents_file(&agents(&provider, &spec));
    let output = std::process::Command::new(workspace_bin("adk-server"))
        .args(["--listen", "127.0.0.1:0", "--store-url", "memory://"])
        .arg("--agents")
        .arg(file.path())
        .env("E2E_OPENAI_KEY", "sk-e2e")
        .env("E2E_PETS_KEY", "pets-key")
        .output()
        .expect("run adk-server");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{log}");
    let expected = format!(
        "{}: tool \"pets\": field \"spec\": OpenAPI toolset pets: POST /pets ({spec}): \
         paths./pets.post.requestBody.content.application/json.schema: $ref \"pets.yaml#/Pet\" points into another document",
        file.path().display()
    );
    assert!(log.contains(&expected), "{log}");
}
