//! One test per rule of the agents file, plus the shapes that must work.

use super::*;
use adk_grpc_agents::RunOptions;
use adk_grpc_core::{Content, Event};
use futures::StreamExt;
use serde_json::json;

const FILE: &str = "agents.yaml";

/// The problems of `yaml`, one line each as the server prints them.
fn problems(yaml: &str) -> Vec<String> {
    match AgentsConfig::from_yaml(FILE, yaml) {
        Ok(_) => Vec::new(),
        Err(e) => e.to_string().lines().map(str::to_string).collect(),
    }
}

#[track_caller]
fn assert_problem(yaml: &str, expected: &str) {
    let found = problems(yaml);
    assert!(
        found.iter().any(|p| p.contains(expected)),
        "expected a problem containing {expected:?}, got {found:#?}"
    );
}

#[track_caller]
fn valid(yaml: &str) -> AgentsConfig {
    AgentsConfig::from_yaml(FILE, yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// A valid file around one app whose root agent is `root` (indented YAML).
fn with_root(root: &str) -> String {
    format!(
        "models:\n  fast: {{ provider: mock }}\n  smart: {{ provider: mock, model: smart-mock }}\n\
         tools:\n  lookup:\n    kind: client\n    description: Looks things up.\n\
         apps:\n  weather:\n    root_agent:\n{}",
        root.lines().map(|l| format!("      {l}\n")).collect::<String>()
    )
}

#[test]
fn the_error_names_file_app_agent_and_field() {
    let found = problems(&with_root("name: planner\nmodel: gpt5\n"));
    assert_eq!(
        found,
        [r#"agents.yaml: app "weather", agent "planner": field "model": unknown model "gpt5" (declared: fast, smart)"#]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let found = problems(&with_root(
        "name: planner\nmodel: gpt5\nsub_agents:\n  - name: helper\n    model: gpt4\n    tools: [nope]\n",
    ));
    assert_eq!(found[0], "agents.yaml: 3 problems");
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(
        found[1..]
            .iter()
            .all(|p| p.starts_with("agents.yaml: app \"weather\", agent \""))
    );
}

#[test]
fn unknown_fields_are_errors_with_their_place() {
    let found = problems(&with_root("name: planner\nmodel: fast\nmodle: smart\n"));
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("agents.yaml: apps.weather.root_agent: unknown field `modle`")
            && found[0].contains("line 13"),
        "{}",
        found[0]
    );
    assert_problem(
        "models:\n  m: { provider: mock, key: x }\napps: {}\n",
        r#"agents.yaml: model "m": unknown field `key`"#,
    );
    assert_problem(
        "models:\n  m: { provider: mock, mock: { turns: [{ txt: hi }] } }\napps: {}\n",
        r#"agents.yaml: model "m": unknown variant `txt`, expected one of `text`, `function_calls`, `json`, `thinking`, `error`"#,
    );
    assert_problem(
        "apps:\n  a:\n    root_agent: { name: a }\n    extra: 1\n",
        "unknown field `extra`",
    );
}

#[test]
fn yaml_syntax_and_type_errors_name_the_file() {
    assert_problem("apps: [", "agents.yaml: ");
    assert_problem(
        &with_root("name: planner\nmodel: fast\nmax_iterations: many\n"),
        "max_iterations",
    );
    assert_problem(
        "models:\n  m: { provider: claude }\napps: {}\n",
        "unknown variant `claude`",
    );
}

#[test]
fn an_empty_file_or_no_apps_is_an_error() {
    assert_eq!(
        problems("  \n"),
        ["agents.yaml: the file is empty: declare at least one app under `apps:`"]
    );
    assert_eq!(
        problems("models:\n  m: { provider: mock }\n"),
        [r#"agents.yaml: field "apps": declare at least one app"#]
    );
}

#[test]
fn the_file_must_exist() {
    let err = AgentsConfig::load(Path::new("/nonexistent/agents.yaml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/agents.yaml: cannot read the agents file: "),
        "{err}"
    );
}

#[test]
fn app_names_are_ids() {
    let yaml = "models:\n  m: { provider: mock }\napps:\n  \"bad\\tapp\":\n    root_agent: { name: a, model: m }\n";
    assert_problem(
        yaml,
        r#"app "bad\tapp": app name "bad\tapp" contains a control character"#,
    );
}

#[test]
fn agent_names_are_identifiers_other_than_user() {
    for name in ["plan-ner", "1st", "user", "\"\""] {
        assert_problem(
            &with_root(&format!("name: {name}\nmodel: fast\n")),
            r#"field "name": an agent name must be an identifier"#,
        );
    }
}

#[test]
fn agent_names_are_unique_within_an_app() {
    let yaml = with_root(
        "kind: sequential\nname: root\nsub_agents:\n  - { name: worker, model: fast }\n  - kind: parallel\n    name: fan\n    sub_agents:\n      - { name: worker, model: smart }\n",
    );
    assert_eq!(
        problems(&yaml),
        [
            r#"agents.yaml: app "weather", agent "worker": field "name": two agents are named worker: names are unique in an agent tree (transfers and resumptions find agents by name)"#
        ]
    );
    // The same name in two apps is fine.
    valid(
        "models:\n  m: { provider: mock }\napps:\n  a:\n    root_agent: { name: x, model: m }\n  b:\n    root_agent: { name: x, model: m }\n",
    );
}

/// The file's agents follow the runner library's rules, applied by the library's
/// own functions: each problem is the library's message, at the field.
#[test]
fn agents_follow_the_runner_librarys_own_rules() {
    let library = |rule: adk_grpc_core::Result<()>| library_message(&rule.unwrap_err());
    assert_problem(
        &with_root("name: \"1st\"\nmodel: fast\n"),
        &format!(
            r#"field "name": {}"#,
            library(adk_grpc_agents::validate_agent_name("1st"))
        ),
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\noutput_key: \"temp:\"\n"),
        &format!(
            r#"field "output_key": {}"#,
            library(adk_grpc_agents::validate_output_key("temp:"))
        ),
    );
    assert_problem(
        &with_tool("\"get weather\": { kind: client, description: d }"),
        &format!(
            r#"tool "get weather": {}"#,
            library(adk_grpc_agents::validate_tool_name("get weather"))
        ),
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\ntools: [lookup, lookup]\n"),
        &format!(
            r#"field "tools": {}"#,
            library(adk_grpc_agents::validate_tool_list(["lookup", "lookup"]))
        ),
    );
    // An a2a sub-agent offered as a tool counts among its parent's tools.
    let yaml = with_root(
        "name: planner\nmodel: fast\ntools: [lookup]\nsub_agents:\n  - { name: lookup, kind: a2a, endpoint: \"http://127.0.0.1:1\", as_tool: true }\n",
    );
    assert_problem(&yaml, r#"agent "planner": field "tools": lookup is listed twice"#);
}

#[test]
fn llm_agents_need_a_declared_model() {
    assert_problem(
        &with_root("name: planner\n"),
        r#"agent "planner": field "model": an llm agent needs a model, its own or an llm agent's above it (declared: fast, smart)"#,
    );
    assert_problem(
        "apps:\n  a:\n    root_agent: { name: x }\n",
        "an llm agent needs a model, its own or an llm agent's above it (declared: none)",
    );
    // Workflow agents have no model to pass on: under one, an llm agent names its own.
    let found = problems(&with_root(
        "kind: sequential\nname: flow\nsub_agents:\n  - { name: a, model: fast }\n  - { name: b }\n",
    ));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains(r#"agent "b": field "model": an llm agent needs a model"#),
        "{found:#?}"
    );
    // An unknown model is reported once, where it is named, not at the agents inheriting it.
    let found = problems(&with_root(
        "name: planner\nmodel: gpt5\nsub_agents:\n  - { name: helper }\n",
    ));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains(r#"agent "planner": field "model": unknown model "gpt5""#),
        "{found:#?}"
    );
}

#[test]
fn an_llm_agent_without_a_model_inherits_its_nearest_llm_ancestors() {
    // ADK's canonical_model: the nearest LlmAgent above, past workflow agents; an
    // agent's own model wins, and is what its own sub-agents inherit.
    let yaml = with_root(
        "name: planner\nmodel: fast\nsub_agents:\n\
         \x20 - kind: sequential\n    name: flow\n    sub_agents:\n\
         \x20     - { name: writer }\n\
         \x20     - name: critic\n        model: smart\n        sub_agents: [{ name: nitpicker }]\n\
         \x20 - { name: helper, as_tool: true }\n",
    );
    let apps = valid(&yaml).build(&RunnerServices::in_memory()).unwrap();
    let root = apps[0].root_agent();
    let flow = &root.sub_agents[0];
    let models: Vec<(&str, &str)> = [
        &root.sub_agents[0].sub_agents[0],
        &flow.sub_agents[1],
        &flow.sub_agents[1].sub_agents[0],
    ]
    .into_iter()
    .map(|agent| (agent.name.as_str(), agent.model.as_str()))
    .collect();
    assert_eq!(
        models,
        [
            ("writer", "mock"),
            ("critic", "smart-mock"),
            ("nitpicker", "smart-mock")
        ]
    );
    // An agent called as a tool is written under its parent, and inherits too.
    let helper = root.tools.iter().find(|tool| tool.name == "helper");
    assert!(helper.is_some(), "{:?}", root.tools);
}

#[test]
fn examples_are_pairs_of_an_input_and_an_output_on_llm_agents() {
    valid(&with_root(
        "name: planner\nmodel: fast\nexamples:\n  - { input: What is 2+2?, output: Four. }\n",
    ));
    assert_problem(
        &with_root("name: planner\nmodel: fast\nexamples:\n  - { input: What is 2+2?, output: \"\" }\n"),
        r#"agent "planner": field "examples": examples[0].output is empty"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nexamples:\n  - { input: hi }\n"),
        "missing field `output`",
    );
    assert_problem(
        &with_root(
            "kind: sequential\nname: flow\nexamples: [{ input: a, output: b }]\nsub_agents: [{ name: a, model: fast }]\n",
        ),
        r#"agent "flow": field "examples": only llm agents have it; this is a sequential agent"#,
    );
}

#[test]
fn timeout_secs_bounds_any_agent_that_is_run() {
    let config = valid(&with_root(
        "kind: sequential\nname: flow\ntimeout_secs: 60\nsub_agents:\n  - { name: a, model: fast, timeout_secs: 5 }\n\
         \x20 - { name: r, kind: a2a, endpoint: \"http://127.0.0.1:1\", timeout_secs: 5 }\n",
    ));
    // The timed agents keep their place in the tree.
    let apps = config.build(&RunnerServices::in_memory()).unwrap();
    let root = apps[0].runner().root_agent();
    let names: Vec<&str> = root.sub_agents().iter().map(|a| a.name()).collect();
    assert_eq!((root.name(), names), ("flow", vec!["a", "r"]));
    assert_problem(
        &with_root("name: planner\nmodel: fast\ntimeout_secs: 0\n"),
        r#"agent "planner": field "timeout_secs": must be at least 1"#,
    );
    assert_problem(
        &with_root(
            "name: planner\nmodel: fast\nsub_agents:\n  - { name: r, kind: a2a, endpoint: \"http://127.0.0.1:1\", as_tool: true, timeout_secs: 5 }\n",
        ),
        r#"agent "r": field "timeout_secs": an a2a agent offered as a tool is called"#,
    );
}

#[test]
fn tools_must_be_declared_or_built_in_and_listed_once() {
    assert_problem(
        &with_root("name: planner\nmodel: fast\ntools: [weather]\n"),
        r#"field "tools": unknown tool "weather" (declared: lookup; built in: exit_loop, load_artifacts, load_memory, preload_memory, google_search, url_context, code_execution, google_maps_grounding)"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\ntools: [lookup, lookup]\n"),
        r#"field "tools": lookup is listed twice"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\ntools: [transfer_to_agent]\n"),
        "transfer_to_agent is offered by itself",
    );
    valid(&with_root(
        "name: planner\nmodel: fast\ntools: [lookup, exit_loop, load_artifacts]\n",
    ));
}

#[test]
fn llm_fields_on_workflow_agents_are_errors() {
    let yaml = with_root(
        "kind: sequential\nname: flow\nmodel: fast\ninstruction: hi\ntools: [lookup]\noutput_key: k\ninclude_contents: none\ngeneration: { temperature: 0.1 }\nsub_agents: [{ name: a, model: fast }]\n",
    );
    let found = problems(&yaml);
    for field in [
        "model",
        "instruction",
        "tools",
        "output_key",
        "include_contents",
        "generation",
    ] {
        let expected = format!(r#"agent "flow": field "{field}": only llm agents have it; this is a sequential agent"#);
        assert!(found.iter().any(|p| p.contains(&expected)), "{expected}: {found:#?}");
    }
    assert_eq!(found.len(), 7, "a count and six problems");
}

#[test]
fn include_contents_takes_adks_values() {
    valid(&with_root("name: planner\nmodel: fast\ninclude_contents: none\n"));
    valid(&with_root("name: planner\nmodel: fast\ninclude_contents: default\n"));
    assert_problem(
        &with_root("name: planner\nmodel: fast\ninclude_contents: some\n"),
        "include_contents",
    );
}

#[test]
fn workflow_agents_need_sub_agents() {
    for kind in ["sequential", "parallel", "loop"] {
        assert_problem(
            &with_root(&format!("kind: {kind}\nname: flow\n")),
            &format!(r#"field "sub_agents": a {kind} agent runs its sub_agents and has none"#),
        );
    }
}

#[test]
fn max_iterations_is_for_loops_and_positive() {
    assert_problem(
        &with_root("kind: loop\nname: again\nmax_iterations: 0\nsub_agents: [{ name: a, model: fast }]\n"),
        r#"field "max_iterations": must be at least 1"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nmax_iterations: 3\n"),
        r#"field "max_iterations": only loop agents have it; this is a llm agent"#,
    );
    valid(&with_root(
        "kind: loop\nname: again\nmax_iterations: 3\nsub_agents: [{ name: a, model: fast, tools: [exit_loop] }]\n",
    ));
}

#[test]
fn output_keys_are_state_keys() {
    assert_problem(
        &with_root("name: planner\nmodel: fast\noutput_key: \"user:\"\n"),
        r#"field "output_key": output_key key "user:" has a scope prefix but no name"#,
    );
    valid(&with_root("name: planner\nmodel: fast\noutput_key: user:last_plan\n"));
}

#[test]
fn generation_settings_are_checked() {
    assert_problem(
        &with_root("name: planner\nmodel: fast\ngeneration: { max_output_tokens: 0 }\n"),
        r#"field "generation": max_output_tokens must be at least 1"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\ngeneration: { temprature: 0.2 }\n"),
        "unknown field `temprature`",
    );
    valid(&with_root(
        "name: planner\nmodel: fast\ngeneration: { temperature: 0.2, top_p: 0.9, max_output_tokens: 256, stop_sequences: [END] }\n",
    ));
}

#[test]
fn a_missing_api_key_variable_fails_the_start_naming_it() {
    let yaml = "models:\n  smart: { provider: openai, model: gpt-4o-mini, api_key_env: ADK_TEST_SURELY_UNSET_KEY }\n\
                apps:\n  a:\n    root_agent: { name: x, model: smart }\n";
    assert_eq!(
        problems(yaml),
        [r#"agents.yaml: model "smart": environment variable ADK_TEST_SURELY_UNSET_KEY (api_key_env) is not set"#]
    );
    // Reported once though two apps use the model, and also when no app does.
    let two_apps = "models:\n  smart: { provider: openai, model: gpt-4o-mini, api_key_env: ADK_TEST_SURELY_UNSET_KEY }\n\
                    apps:\n  a:\n    root_agent: { name: x, model: smart }\n  b:\n    root_agent: { name: y, model: smart }\n";
    assert_eq!(problems(two_apps).len(), 1, "{:#?}", problems(two_apps));
    let unused = "models:\n  m: { provider: mock }\n  smart: { provider: openai, model: gpt-4o-mini, api_key_env: ADK_TEST_SURELY_UNSET_KEY }\n\
                  apps:\n  a:\n    root_agent: { name: x, model: m }\n";
    assert_problem(
        unused,
        r#"model "smart": environment variable ADK_TEST_SURELY_UNSET_KEY"#,
    );
}

#[test]
fn provider_settings_are_checked_when_loading() {
    assert_problem(
        "models:\n  smart: { provider: gemini }\napps:\n  a:\n    root_agent: { name: x, model: smart }\n",
        r#"model "smart": provider"#,
    );
    assert_problem(
        "models:\n  m: { provider: mock, timeout_secs: 0 }\napps:\n  a:\n    root_agent: { name: x, model: m }\n",
        r#"model "m": timeout_secs must be at least 1"#,
    );
}

/// `context_budget_tokens` on a model entry bounds the history a turn reads (apps
/// without compaction): an app takes the smallest of its agents' models, each model's
/// own or its provider's default; zero is refused at the model.
#[test]
fn a_models_context_budget_bounds_its_apps_turns() {
    let config = valid(
        "models:\n  small: { provider: mock, context_budget_tokens: 300 }\n  \
         big: { provider: openai, model: gpt-4o, context_budget_tokens: 50000 }\n  plain: { provider: mock }\n  \
         remote: { provider: openai, model: gpt-4o }\n\
         apps:\n  mixed:\n    root_agent:\n      name: a\n      model: big\n      sub_agents:\n        \
         - { name: b, model: small }\n  \
         mock:\n    root_agent: { name: a, model: plain }\n  \
         real:\n    root_agent: { name: a, model: remote }\n",
    );
    let budget = |name: &str| {
        let app = config.apps.iter().find(|app| app.name == name).unwrap();
        app.context_budget_tokens
    };
    assert_eq!(budget("mixed"), Some(300));
    assert_eq!(budget("mock"), Some(adk_grpc_core::history::MOCK_CONTEXT_BUDGET_TOKENS));
    assert_eq!(
        budget("real"),
        Some(adk_grpc_core::history::DEFAULT_CONTEXT_BUDGET_TOKENS)
    );
    assert_problem(
        "models:\n  m: { provider: mock, context_budget_tokens: 0 }\napps:\n  a:\n    root_agent: { name: x, model: m }\n",
        r#"model "m": context_budget_tokens must be at least 1"#,
    );
    assert_problem(
        "models:\n  m: { provider: mock, context_budget_tokens: lots }\napps:\n  a:\n    root_agent: { name: x, model: m }\n",
        r#"model "m""#,
    );
}

/// A field that another kind of tool has is refused as the file is read, naming the
/// tool, the field, the kind and the line (each tool kind's struct has only its fields).
#[track_caller]
fn assert_misfit(yaml: &str, tool: &str, field: &str, kind: &str) {
    let found = problems(yaml);
    assert!(
        found.len() == 1
            && found[0].starts_with(&format!(
                "agents.yaml: tools.{tool}: unknown field `{field}`, expected "
            ))
            && found[0].contains(&format!(" (this is {kind}) at line ")),
        "expected {field} refused as no field of {kind}, got {found:#?}"
    );
}

fn with_tool(tool: &str) -> String {
    format!(
        "models:\n  m: {{ provider: mock }}\ntools:\n  {tool}\napps:\n  a:\n    root_agent: {{ name: x, model: m }}\n"
    )
}

#[test]
fn tool_names_are_function_names_and_not_built_ins() {
    assert_problem(
        &with_tool("\"get weather\": { kind: client, description: d }"),
        r#"tool "get weather": a tool name is what the model calls"#,
    );
    assert_problem(
        &with_tool("exit_loop: { kind: client, description: d }"),
        r#"tool "exit_loop": exit_loop is a built-in tool"#,
    );
}

#[test]
fn tools_need_a_description_and_an_object_schema() {
    assert_problem(
        &with_tool("t: { kind: client }"),
        r#"tool "t": field "description": a tool needs a description"#,
    );
    assert_problem(
        &with_tool("t: { kind: client, description: d, parameters: [city] }"),
        r#"tool "t": field "parameters": must be a JSON Schema object"#,
    );
}

#[test]
fn http_tools_need_an_http_url_and_a_positive_timeout() {
    assert_problem(
        &with_tool("t: { kind: http, description: d }"),
        r#"tool "t": field "url": an http tool needs the url"#,
    );
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"ftp://x/y\" }"),
        r#"tool "t": HTTP tool t: "ftp://x/y" is not an http(s) URL"#,
    );
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"http://x/y\", timeout_secs: 0 }"),
        r#"tool "t": field "timeout_secs": must be at least 1"#,
    );
}

#[test]
fn http_tool_headers_come_from_set_variables() {
    assert_problem(
        &with_tool(
            "t: { kind: http, description: d, url: \"http://x/y\", headers_from_env: { x-api-key: ADK_TEST_SURELY_UNSET_KEY } }",
        ),
        r#"tool "t": field "headers_from_env": environment variable ADK_TEST_SURELY_UNSET_KEY (for header x-api-key) is not set"#,
    );
    // PATH is set wherever tests run.
    valid(&with_tool(
        "t: { kind: http, description: d, url: \"http://x/y\", headers_from_env: { x-path: PATH } }",
    ));
}

#[test]
fn a_tools_fields_are_read_into_its_kinds_with_their_lines() {
    let yaml = |tool: &str| format!("tools:\n  t:\n{tool}apps: {{}}\n");
    // `kind` first (as written everywhere): a misfit is refused at its own line...
    let found = problems(&yaml("    kind: client\n    description: d\n    url: http://x\n"));
    assert!(
        found.len() == 1
            && found[0]
                .starts_with("agents.yaml: tools.t: unknown field `url`, expected `description` or `parameters`")
            && found[0].ends_with("(this is a client tool) at line 5 column 5"),
        "{found:#?}"
    );
    // ...and a problem inside a field at the field's place.
    let found = problems(&yaml(
        "    kind: http\n    description: d\n    url: http://x\n    context:\n      keys: [a]\n",
    ));
    assert!(
        found.len() == 1 && found[0].starts_with("agents.yaml: tools.t.context: unknown field `keys`"),
        "{found:#?}"
    );
    assert!(found[0].contains("at line 7"), "{found:#?}");
    // `kind` later: the fields before it are refused at the tool's line.
    let found = problems(&yaml("    url: http://x\n    kind: client\n"));
    assert!(
        found.len() == 1
            && found[0].starts_with("agents.yaml: tools.t: unknown field `url`")
            && found[0].ends_with("(this is a client tool) at line 3 column 5"),
        "{found:#?}"
    );
    assert_problem(&yaml("    description: d\n"), "tools.t: missing field `kind`");
    assert_problem(
        &yaml("    kind: rest\n"),
        "tools.t.kind: unknown variant `rest`, expected one of `http`, `client`, `mcp`, `openapi`, `model_consult`",
    );
}

#[test]
fn large_reply_takes_error_or_artifact_for_the_tools_that_read_their_replies() {
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", large_reply: keep }"),
        "tools.t.large_reply: unknown variant `keep`, expected `error` or `artifact`",
    );
    assert_problem(
        &with_tool("t: { kind: mcp, transport: http, url: \"http://x/mcp\", large_reply: save }"),
        "tools.t.large_reply: unknown variant `save`, expected `error` or `artifact`",
    );
    assert_problem(
        &with_tool("t: { kind: openapi, spec: spec.yaml, large_reply: big }"),
        "tools.t.large_reply: unknown variant `big`, expected `error` or `artifact`",
    );
    assert_misfit(
        &with_tool("t: { kind: client, description: d, large_reply: artifact }"),
        "t",
        "large_reply",
        "a client tool",
    );
    for value in ["error", "artifact"] {
        valid(&with_tool(&format!(
            "t: {{ kind: http, description: d, url: \"http://x\", large_reply: {value} }}"
        )));
        valid(&with_tool(&format!(
            "t: {{ kind: mcp, transport: http, url: \"http://x/mcp\", large_reply: {value} }}"
        )));
    }
}

#[test]
fn client_tools_have_no_server_side_settings() {
    for field in ["url: \"http://x\"", "timeout_secs: 3", "headers_from_env: { a: PATH }"] {
        let name = field.split(':').next().unwrap();
        assert_misfit(
            &with_tool(&format!("t: {{ kind: client, description: d, {field} }}")),
            "t",
            name,
            "a client tool",
        );
    }
}

fn with_mcp(fields: &str) -> String {
    with_tool(&format!("m: {{ kind: mcp, {fields} }}"))
}

#[test]
fn transfer_instruction_and_agent_tool_fields_of_llm_agents() {
    valid(&with_root(concat!(
        "name: desk\nmodel: fast\nglobal_instruction: Be polite.\nstatic_instruction: You work at a desk.\n",
        "sub_agents:\n",
        "  - { name: billing, model: fast, disallow_transfer_to_parent: true, disallow_transfer_to_peers: true }\n",
        "  - { name: researcher, model: fast, as_tool: true, description: Looks things up. }\n",
    )));
    assert_problem(
        &with_root("name: desk\nmodel: fast\nsub_agents:\n  - { name: billing, model: fast, global_instruction: x }\n"),
        r#"agent "billing": field "global_instruction": only the root agent's is used"#,
    );
    for field in [
        "global_instruction: x",
        "static_instruction: x",
        "disallow_transfer_to_parent: true",
        "disallow_transfer_to_peers: true",
    ] {
        let name = field.split(':').next().unwrap();
        assert_problem(
            &with_root(&format!(
                "name: steps\nkind: sequential\n{field}\nsub_agents:\n  - {{ name: a, model: fast }}\n"
            )),
            &format!(r#"agent "steps": field "{name}": only llm agents have it; this is a sequential agent"#),
        );
    }
}

#[test]
fn a_tool_context_is_for_http_and_mcp_tools_with_well_formed_state_keys() {
    valid(&with_tool(
        "t: { kind: http, description: d, url: \"http://x\", context: { state: [\"user:*\", theme, \"*\"] } }",
    ));
    valid(&with_mcp("transport: stdio, command: sh, context: {}"));
    assert_misfit(
        &with_tool("t: { kind: client, description: d, context: {} }"),
        "t",
        "context",
        "a client tool",
    );
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", context: { state: [\"us*er\"] } }"),
        r#"tool "t": field "context.state": "#,
    );
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", context: { state: [\"\"] } }"),
        r#"tool "t": field "context.state": "#,
    );
    assert_problem(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", context: { keys: [a] } }"),
        "unknown field `keys`",
    );
}

#[test]
fn mcp_tools_need_a_transport_and_its_target() {
    assert_problem(
        &with_mcp("command: sh"),
        r#"tool "m": field "transport": an mcp tool needs a transport: stdio (with a command) or http (with a url)"#,
    );
    assert_problem(
        &with_mcp("transport: stdio"),
        r#"tool "m": field "command": an mcp tool over stdio needs the command"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: adk-surely-not-a-program"),
        r#"tool "m": field "command": "adk-surely-not-a-program" is neither a file nor a program on PATH"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, working_dir: /surely/not/a/dir"),
        r#"tool "m": field "working_dir": "/surely/not/a/dir" is not a directory"#,
    );
    assert_problem(
        &with_mcp("transport: http"),
        r#"tool "m": field "url": an mcp tool over http needs the server's url"#,
    );
    assert_problem(
        &with_mcp("transport: http, url: \"ftp://x/mcp\""),
        r#"tool "m": field "url": MCP toolset m: "ftp://x/mcp" is not an http(s) URL"#,
    );
    valid(&with_mcp(
        "transport: stdio, command: sh, args: [-c, exit], working_dir: /, env: { A: b }",
    ));
    valid(&with_mcp(
        "transport: http, url: \"http://127.0.0.1:1/mcp\", description: everything",
    ));
}

#[test]
fn mcp_fields_fit_the_transport() {
    let found = problems(&with_mcp(
        "transport: http, url: \"http://x/mcp\", command: sh, args: [a], env: { A: b }, working_dir: /",
    ));
    for field in ["command", "args", "env", "working_dir"] {
        let expected =
            format!(r#"tool "m": field "{field}": only mcp tools over stdio have it; this is an mcp tool over http"#);
        assert!(found.iter().any(|p| p.contains(&expected)), "{expected}: {found:#?}");
    }
    assert_misfit(
        &with_mcp("transport: http, url: \"http://x/mcp\", parameters: {}"),
        "m",
        "parameters",
        "an mcp tool",
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, url: \"http://x/mcp\", bearer_token_env: PATH"),
        r#"tool "m": field "url": only http tools and mcp tools over http have it; this is an mcp tool over stdio"#,
    );
    assert_misfit(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", tool_prefix: p }"),
        "t",
        "tool_prefix",
        "an http tool",
    );
    assert_misfit(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", transport: http }"),
        "t",
        "transport",
        "an http tool",
    );
}

#[test]
fn use_mcp_resources_is_for_mcp_toolsets() {
    valid(&with_mcp("transport: stdio, command: sh, use_mcp_resources: true"));
    assert_misfit(
        &with_tool("t: { kind: http, description: d, url: \"http://x\", use_mcp_resources: true }"),
        "t",
        "use_mcp_resources",
        "an http tool",
    );
}

#[test]
fn safe_to_repeat_is_for_http_tools_and_mcp_toolsets() {
    valid(&with_tool(
        "t: { kind: http, description: d, url: \"http://x\", safe_to_repeat: true }",
    ));
    valid(&with_mcp("transport: stdio, command: sh, safe_to_repeat: true"));
    valid(&with_mcp(
        "transport: http, url: \"http://127.0.0.1:1/mcp\", safe_to_repeat: false",
    ));
    assert_misfit(
        &with_tool("t: { kind: client, description: d, safe_to_repeat: true }"),
        "t",
        "safe_to_repeat",
        "a client tool",
    );
}

#[test]
fn mcp_secrets_come_from_set_variables() {
    assert_problem(
        &with_mcp("transport: http, url: \"http://x/mcp\", bearer_token_env: ADK_TEST_SURELY_UNSET_TOKEN"),
        r#"tool "m": field "bearer_token_env": environment variable ADK_TEST_SURELY_UNSET_TOKEN (for the bearer token) is not set"#,
    );
    assert_problem(
        &with_mcp("transport: http, url: \"http://x/mcp\", headers_from_env: { x-key: ADK_TEST_SURELY_UNSET_KEY }"),
        r#"tool "m": field "headers_from_env": environment variable ADK_TEST_SURELY_UNSET_KEY (for header x-key) is not set"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, env_from_env: { API_KEY: ADK_TEST_SURELY_UNSET_KEY }"),
        r#"tool "m": field "env_from_env": environment variable ADK_TEST_SURELY_UNSET_KEY (for the server's API_KEY) is not set"#,
    );
    valid(&with_mcp(
        "transport: http, url: \"http://x/mcp\", bearer_token_env: PATH, headers_from_env: { x-path: PATH }",
    ));
    valid(&with_mcp("transport: stdio, command: sh, env_from_env: { P: PATH }"));
    // A bad url does not hide the other problems.
    let found = problems(&with_mcp(
        "transport: http, url: \"ftp://x\", bearer_token_env: ADK_TEST_SURELY_UNSET_TOKEN, tool_prefix: \"a b\"",
    ));
    for field in ["url", "bearer_token_env", "tool_prefix"] {
        let expected = format!(r#"tool "m": field "{field}""#);
        assert!(found.iter().any(|p| p.contains(&expected)), "{expected}: {found:#?}");
    }
}

#[test]
fn mcp_filter_prefix_and_timeouts_are_checked() {
    assert_problem(
        &with_mcp("transport: stdio, command: sh, tool_filter: []"),
        r#"tool "m": field "tool_filter": list the server's tools to offer by name"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, tool_prefix: \"my tools\""),
        r#"tool "m": field "tool_prefix": must be an identifier"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, timeout_secs: 0"),
        r#"tool "m": field "timeout_secs": must be at least 1"#,
    );
    assert_problem(
        &with_mcp("transport: stdio, command: sh, connect_timeout_secs: 0"),
        r#"tool "m": field "connect_timeout_secs": must be at least 1"#,
    );
    valid(&with_mcp(
        "transport: stdio, command: sh, tool_filter: [echo], tool_prefix: ev, timeout_secs: 5, connect_timeout_secs: 5",
    ));
}

#[test]
fn the_tree_is_built_and_described() {
    let yaml = "
models:
  fast: { provider: mock, model: fast-mock }
tools:
  weather:
    kind: http
    url: http://127.0.0.1:9/weather
    description: Weather of a city.
    parameters: { type: object, properties: { city: { type: string } } }
  confirm: { kind: client, description: Asks the user. }
apps:
  trip:
    root_agent:
      kind: sequential
      name: planner
      description: Plans trips.
      sub_agents:
        - name: researcher
          model: fast
          tools: [weather, confirm]
        - kind: loop
          name: polish
          max_iterations: 2
          sub_agents:
            - { name: critic, model: fast, tools: [exit_loop] }
";
    let config = valid(yaml);
    assert_eq!(config.app_names(), ["trip"]);
    let apps = config.build(&RunnerServices::in_memory()).unwrap();
    assert_eq!(apps.len(), 1);
    let root = apps[0].root_agent();
    assert_eq!((root.name.as_str(), root.kind.as_str()), ("planner", "sequential"));
    assert_eq!(root.description, "Plans trips.");
    let researcher = &root.sub_agents[0];
    assert_eq!(
        (researcher.kind.as_str(), researcher.model.as_str()),
        ("llm", "fast-mock")
    );
    let tools: Vec<(&str, bool)> = researcher
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.long_running))
        .collect();
    assert_eq!(tools, [("weather", false), ("confirm", true)]);
    assert_eq!(
        researcher.tools[0].parameters_schema,
        Some(json!({"type": "object", "properties": {"city": {"type": "string"}}}))
    );
    let polish = &root.sub_agents[1];
    assert_eq!(polish.kind, "loop");
    assert_eq!(polish.sub_agents[0].tools[0].name, "exit_loop");
    // The runner's own tree matches the description.
    let agent = apps[0].runner().root_agent();
    assert_eq!(agent.sub_agents()[1].sub_agents()[0].name(), "critic");
}

async fn run_once(app: &App, text: &str) -> Vec<Event> {
    let options = RunOptions {
        create_session_if_missing: true,
        ..Default::default()
    };
    let stream = app
        .runner()
        .run("u", "s", Content::new("user").with_text(text), options)
        .await
        .unwrap();
    stream.map(|e| e.unwrap()).collect().await
}

#[tokio::test]
async fn each_app_gets_its_own_models() {
    // One scripted mock, used by two apps: each app plays the script from the start.
    let yaml = "
models:
  scripted: { provider: mock, mock: { turns: [{ text: first }] } }
apps:
  a:
    root_agent: { name: x, model: scripted, output_key: reply }
  b:
    root_agent: { name: y, model: scripted }
";
    let apps = valid(yaml).build(&RunnerServices::in_memory()).unwrap();
    for app in &apps {
        let events = run_once(app, "hi").await;
        let reply = events.last().unwrap();
        assert_eq!(reply.content().and_then(Content::text).as_deref(), Some("first"));
        // output_key stores the reply through the reply's own event.
        let stored = reply.state_delta().get("reply");
        let expected = json!("first");
        assert_eq!(stored, (app.name() == "a").then_some(&expected));
    }
}

#[test]
fn the_examples_are_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&examples).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        checked += 1;
        match AgentsConfig::load(&path) {
            Ok(config) => {
                config
                    .build(&RunnerServices::in_memory())
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            // A real provider's example needs its key: then that is the only complaint.
            Err(e) => assert!(
                e.problems.len() == 1 && e.problems[0].message.contains("(api_key_env) is not set"),
                "{e}"
            ),
        }
    }
    assert!(checked >= 4, "examples/agents*.yaml: mock, OpenAI, Gemini, Ollama");
}

/// A valid file with one app whose `compaction:` is `fields` (indented YAML).
fn with_compaction(fields: &str) -> String {
    format!(
        "models:\n  fast: {{ provider: mock }}\napps:\n  chat:\n    root_agent: {{ name: assistant, model: fast }}\n    compaction:\n{}",
        fields.lines().map(|l| format!("      {l}\n")).collect::<String>()
    )
}

#[test]
fn compaction_needs_an_interval_and_a_declared_model() {
    valid(&with_compaction(
        "interval: 5\noverlap: 1\nmodel: fast\ntoken_budget: 8000\n",
    ));
    assert_problem(
        &with_compaction("model: fast\n"),
        r#"agents.yaml: app "chat": field "compaction.interval": compaction needs an interval"#,
    );
    assert_problem(
        &with_compaction("interval: 0\nmodel: fast\n"),
        r#"app "chat": field "compaction.interval": compaction interval must be at least 1 invocation"#,
    );
    assert_problem(
        &with_compaction("interval: 2\n"),
        r#"app "chat": field "compaction.model": compaction needs the model that writes summaries (declared: fast)"#,
    );
    assert_problem(
        &with_compaction("interval: 2\nmodel: gpt5\n"),
        r#"app "chat": field "compaction.model": unknown model "gpt5" (declared: fast)"#,
    );
    assert_problem(
        &with_compaction("interval: 2\nmodel: fast\ntoken_budget: 0\n"),
        r#"app "chat": field "compaction.token_budget": compaction token_budget must be positive"#,
    );
    assert_problem(
        &with_compaction("interval: 2\nmodel: fast\nevery: 3\n"),
        "unknown field `every`",
    );
    assert_problem(
        &with_compaction("interval: -1\nmodel: fast\n"),
        "apps.chat.compaction.interval: invalid type",
    );
}

#[test]
fn memory_add_is_invocation_or_session_and_needs_a_memory_store() {
    let app = |memory: &str| {
        format!(
            "models:\n  fast: {{ provider: mock }}\napps:\n  diary:\n    memory: {memory}\n    \
             root_agent: {{ name: d, model: fast, tools: [load_memory, preload_memory] }}\n"
        )
    };
    for add in ["invocation", "session", "ingest"] {
        let config = valid(&app(&format!("{{ add: {add} }}")));
        assert_eq!(config.build(&RunnerServices::in_memory()).unwrap().len(), 1);
    }
    assert_problem(
        &app("{ add: forever }"),
        "agents.yaml: apps.diary.memory.add: unknown variant `forever`, expected one of `invocation`, `session`, `ingest`",
    );
    assert_problem(
        &app("{ add: session, keep: 1 }"),
        "apps.diary.memory: unknown field `keep`",
    );
    // A runner without a memory store cannot add to one.
    let mut services = RunnerServices::in_memory();
    services.memory = None;
    let Err(err) = valid(&app("{ add: session }")).build(&services) else {
        panic!("built without a memory store");
    };
    assert_eq!(
        err.to_string(),
        r#"agents.yaml: app "diary": field "memory.add": add_to_memory needs a memory service, and this runner has none"#
    );
}

// ---------- kind: a2a ----------

/// A root agent with one `kind: a2a` sub-agent whose settings are `remote` (YAML lines).
fn with_remote(remote: &str) -> String {
    let remote: String = remote.lines().map(|l| format!("    {l}\n")).collect();
    with_root(&format!(
        "name: planner\nmodel: fast\nsub_agents:\n  - name: remote\n    kind: a2a\n    description: Elsewhere.\n{remote}"
    ))
}

#[test]
fn an_a2a_agent_is_a_transfer_target_of_its_parent() {
    let config = valid(&with_remote("endpoint: http://127.0.0.1:50099\ntenant: other_app\n"));
    let apps = config.build(&RunnerServices::in_memory()).expect("build");
    let root = apps[0].runner().root_agent().clone();
    let remote = &root.sub_agents()[0];
    assert_eq!((remote.name(), remote.description()), ("remote", "Elsewhere."));
    let described = &apps[0].root_agent().sub_agents[0];
    assert_eq!(described.kind, "a2a");
    assert_eq!(described.model, "A2A: http://127.0.0.1:50099");
}

#[test]
fn a2a_agents_are_checked_at_load_naming_their_field() {
    let place = r#"agents.yaml: app "weather", agent "remote": field "#;
    assert_problem(
        &with_remote(""),
        &format!(r#"{place}"endpoint": an a2a agent needs the remote's gRPC endpoint"#),
    );
    assert_problem(
        &with_remote("endpoint: 127.0.0.1:50099\n"),
        &format!(r#"{place}"endpoint": endpoint "127.0.0.1:50099" must start with http:// or https://"#),
    );
    assert_problem(
        &with_remote("endpoint: http://127.0.0.1:1\nbearer_token_env: ADK_TEST_SURELY_UNSET_TOKEN\n"),
        &format!(
            r#"{place}"bearer_token_env": environment variable ADK_TEST_SURELY_UNSET_TOKEN (for the bearer token) is not set"#
        ),
    );
    assert_problem(
        &with_remote("endpoint: https://127.0.0.1:1\nca_file: /surely/not/a/file.pem\n"),
        &format!(r#"{place}"ca_file": cannot read "/surely/not/a/file.pem""#),
    );
    assert_problem(
        &with_remote("endpoint: http://127.0.0.1:1\nmodel: fast\n"),
        &format!(r#"{place}"model": an a2a agent runs elsewhere"#),
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nendpoint: http://127.0.0.1:1\n"),
        r#"agent "planner": field "endpoint": only a2a agents have it; this is a llm agent"#,
    );
}

#[test]
fn an_a2a_agent_as_a_tool_is_offered_to_its_llm_parent_and_only_there() {
    let config = valid(&with_remote("endpoint: http://127.0.0.1:50099\nas_tool: true\n"));
    let apps = config.build(&RunnerServices::in_memory()).expect("build");
    let root = apps[0].root_agent();
    assert!(root.sub_agents.is_empty(), "a tool, not a transfer target");
    assert_eq!(root.tools[0].name, "remote");
    assert!(root.tools[0].parameters_schema.is_some());

    let under_a_workflow = with_root(
        "name: steps\nkind: sequential\nsub_agents:\n  - name: remote\n    kind: a2a\n    endpoint: http://127.0.0.1:1\n    as_tool: true\n",
    );
    assert_problem(
        &under_a_workflow,
        r#"agent "remote": field "as_tool": only an llm agent calls tools; its parent "steps" is a sequential agent"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nas_tool: true\n"),
        r#"agent "planner": field "as_tool": the root agent has no parent to call it as a tool"#,
    );
}

#[test]
fn retry_config_is_adks_with_its_defaults_on_llm_agents() {
    valid(&with_root(
        "name: a\nmodel: fast\nretry_config: { max_attempts: 3, initial_delay: 0.5, max_delay: 10, backoff_factor: 2, jitter: 0 }\n",
    ));
    valid(&with_root("name: a\nmodel: fast\nretry_config: {}\n"));
    assert_problem(
        &with_root("name: a\nmodel: fast\nretry_config: { backoff_factor: 0.5 }\n"),
        "retry_config.backoff_factor: 0.5 must be at least 1",
    );
    assert_problem(
        &with_root("name: a\nmodel: fast\nretry_config: { initial_delay: -1 }\n"),
        "retry_config.initial_delay: -1 is not a number of seconds of at least 0",
    );
    assert_problem(
        &with_root("name: a\nmodel: fast\nretry_config: { exceptions: [ValueError] }\n"),
        "unknown field `exceptions`",
    );
    assert_problem(
        &with_root("name: steps\nkind: sequential\nretry_config: {}\nsub_agents:\n  - { name: a, model: fast }\n"),
        r#"agent "steps": field "retry_config": only llm agents have it; this is a sequential agent"#,
    );
}

#[test]
fn tools_gemini_runs_itself_are_for_gemini_models() {
    valid(&with_provider_model(
        "gem",
        "tools: [google_search, url_context, code_execution, google_maps_grounding]",
    ));
    valid(&with_provider_model("fast", "tools: [google_search]"));
    assert_problem(
        &with_provider_model("gpt", "tools: [google_search]"),
        r#"agent "planner": field "tools": google_search is a tool Gemini runs itself, and this agent's model is not a gemini model (openai)"#,
    );
}

/// A valid file whose `planner` uses the model `model` (mock `fast`, `gpt` on openai,
/// `gem` on gemini) with these extra fields.
fn with_provider_model(model: &str, fields: &str) -> String {
    format!(
        "models:\n  fast: {{ provider: mock }}\n  gpt: {{ provider: openai, model: gpt-test, base_url: \"http://127.0.0.1:1/v1\" }}\n  \
         gem: {{ provider: gemini, model: gemini-test, base_url: \"http://127.0.0.1:1\" }}\n\
         apps:\n  weather:\n    root_agent:\n      name: planner\n      model: {model}\n{}",
        fields.lines().map(|l| format!("      {l}\n")).collect::<String>()
    )
}

#[tokio::test]
async fn output_schema_stores_the_structured_reply_as_json_under_output_key() {
    let yaml = "
models:
  scripted: { provider: mock, mock: { turns: [{ json: { city: Oslo, celsius: -2 } }, { text: not json }] } }
apps:
  a:
    root_agent:
      name: forecaster
      model: scripted
      output_key: forecast
      output_schema:
        type: object
        properties: { city: { type: string }, celsius: { type: number } }
        required: [city, celsius]
      input_schema: { type: object, properties: { city: { type: string } }, required: [city] }
";
    let apps = valid(yaml).build(&RunnerServices::in_memory()).unwrap();
    let events = run_once(&apps[0], "Oslo?").await;
    assert_eq!(
        events.last().unwrap().state_delta().get("forecast"),
        Some(&json!({"city": "Oslo", "celsius": -2}))
    );
    // The next reply is not JSON: the run fails naming output_schema.
    let options = RunOptions::default();
    let stream = apps[0]
        .runner()
        .run("u", "s", Content::new("user").with_text("again"), options)
        .await
        .unwrap();
    let results: Vec<_> = stream.collect().await;
    let error = results
        .into_iter()
        .find_map(Result::err)
        .expect("a misfit reply fails the run");
    assert!(error.to_string().contains("output_schema"), "{error}");
}

#[test]
fn output_and_input_schemas_must_be_json_schemas() {
    assert_problem(
        &with_root("name: planner\nmodel: fast\noutput_schema: a string\n"),
        r#"field "output_schema": output_schema must be a JSON Schema object"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\noutput_schema: { type: 7 }\n"),
        r#"field "output_schema": output_schema is not a valid JSON Schema"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\ninput_schema: { type: string }\n"),
        r#"field "input_schema": input_schema must be an object schema"#,
    );
    assert_problem(
        &with_root(
            "kind: sequential\nname: flow\noutput_schema: { type: object }\nsub_agents: [{ name: a, model: fast }]\n",
        ),
        r#"field "output_schema": only llm agents have it; this is a sequential agent"#,
    );
    assert_problem(
        &with_root(
            "kind: sequential\nname: flow\ninput_schema: { type: object }\nsub_agents: [{ name: a, model: fast }]\n",
        ),
        r#"field "input_schema": only llm agents have it"#,
    );
    valid(&with_root(
        "name: planner\nmodel: fast\ntools: [lookup]\noutput_schema: { type: array, items: { type: string } }\n",
    ));
}

#[test]
fn generation_settings_beyond_sampling_are_checked_per_provider() {
    let all = "generation:\n  top_k: 40\n  seed: 7\n  presence_penalty: 0.5\n  frequency_penalty: -0.5\n  \
               response_mime_type: application/json\n  \
               safety_settings: [{ category: HARM_CATEGORY_HARASSMENT, threshold: BLOCK_ONLY_HIGH }]\n  \
               thinking: { budget_tokens: 1024, include_thoughts: true }\n";
    valid(&with_provider_model("gem", all));
    valid(&with_provider_model(
        "gem",
        "generation: { thinking: { effort: high } }\n",
    ));
    valid(&with_provider_model(
        "gpt",
        "generation: { thinking: { effort: low }, top_k: 5, seed: 1 }\n",
    ));
    let place = r#"agent "planner": field "#;
    for (model, fields, expected) in [
        (
            "gpt",
            "generation: { safety_settings: [{ category: HARM_CATEGORY_HARASSMENT, threshold: BLOCK_NONE }] }",
            r#""generation.safety_settings": safety settings are Gemini's"#,
        ),
        (
            "gem",
            "generation: { safety_settings: [{ category: HARM_CATEGORY_HARASSMENT }] }",
            r#""generation.safety_settings": entry 1 must be {category"#,
        ),
        (
            "gpt",
            "generation: { thinking: { budget_tokens: 100 } }",
            r#""generation.thinking.budget_tokens": an openai model takes an effort"#,
        ),
        (
            "gpt",
            "generation: { thinking: { include_thoughts: true } }",
            r#""generation.thinking.include_thoughts": an openai model has no such switch"#,
        ),
        (
            "gem",
            "generation: { thinking: { budget_tokens: 100, effort: low } }",
            r#""generation.thinking": set budget_tokens or effort, not both"#,
        ),
        (
            "gem",
            "generation: { thinking: { budget_tokens: -2 } }",
            r#""generation.thinking.budget_tokens": must be -1"#,
        ),
        (
            "gem",
            "generation: { thinking: {} }",
            r#""generation.thinking": set budget_tokens"#,
        ),
        (
            "gem",
            "generation: { top_k: 0 }",
            r#""generation.top_k": must be at least 1"#,
        ),
        (
            "gpt",
            "generation: { response_mime_type: text/x.enum }",
            r#""generation.response_mime_type": an openai model replies in text/plain or application/json"#,
        ),
        (
            "gem",
            "generation: { response_mime_type: json }",
            r#""generation.response_mime_type": "json" is not a MIME type"#,
        ),
    ] {
        assert_problem(&with_provider_model(model, fields), &format!("{place}{expected}"));
    }
    // Values serde refuses name their field too.
    assert_problem(
        &with_provider_model("gem", "generation: { thinking: { effort: extreme } }"),
        "effort",
    );
    assert_problem(
        &with_provider_model("gem", "generation: { thinking: { budget: 5 } }"),
        "budget",
    );
}

#[test]
fn reply_settings_are_checked_per_provider() {
    let gemini = "generation:\n  candidate_count: 1\n  response_logprobs: true\n  logprobs: 5\n  \
                  media_resolution: MEDIA_RESOLUTION_LOW\n  cached_content: cachedContents/abc\n  \
                  response_modalities: [TEXT, IMAGE]\n  enable_enhanced_civic_answers: true\n";
    valid(&with_provider_model("gem", gemini));
    valid(&with_provider_model(
        "gpt",
        "generation: { response_logprobs: true, logprobs: 3, candidate_count: 1, response_modalities: [TEXT] }\n",
    ));
    let place = r#"agent "planner": field "#;
    for (model, fields, expected) in [
        (
            "gem",
            "generation: { candidate_count: 2 }",
            r#""generation.candidate_count": only 1: ADK reads the first candidate"#,
        ),
        (
            "gpt",
            "generation: { logprobs: 3 }",
            r#""generation.logprobs": needs response_logprobs: true"#,
        ),
        (
            "gem",
            "generation: { response_logprobs: true, logprobs: 21 }",
            r#""generation.logprobs": must be 0 to 20"#,
        ),
        (
            "gpt",
            "generation: { media_resolution: MEDIA_RESOLUTION_LOW }",
            r#""generation.media_resolution": Gemini's (mediaResolution)"#,
        ),
        (
            "gem",
            "generation: { media_resolution: low }",
            r#""generation.media_resolution": "low" is not one of MEDIA_RESOLUTION_UNSPECIFIED"#,
        ),
        (
            "gpt",
            "generation: { cached_content: cachedContents/abc }",
            r#""generation.cached_content": Gemini's (cachedContent)"#,
        ),
        (
            "gem",
            "generation: { cached_content: \" \" }",
            r#""generation.cached_content": is empty"#,
        ),
        (
            "gpt",
            "generation: { enable_enhanced_civic_answers: true }",
            r#""generation.enable_enhanced_civic_answers": Gemini's"#,
        ),
        (
            "gpt",
            "generation: { response_modalities: [TEXT, IMAGE] }",
            r#""generation.response_modalities": IMAGE replies are Gemini's"#,
        ),
        (
            "gem",
            "generation: { response_modalities: [AUDIO] }",
            r#""generation.response_modalities": AUDIO replies are not offered"#,
        ),
    ] {
        assert_problem(&with_provider_model(model, fields), &format!("{place}{expected}"));
    }
}

#[tokio::test]
async fn a_scripted_thought_is_stored_as_a_thought_part() {
    let yaml = "
models:
  scripted: { provider: mock, mock: { turns: [{ thinking: { thought: hmm, text: done } }] } }
apps:
  a:
    root_agent: { name: x, model: scripted, output_key: reply }
";
    let apps = valid(yaml).build(&RunnerServices::in_memory()).unwrap();
    let events = run_once(&apps[0], "hi").await;
    let reply = events.last().unwrap();
    let parts = &reply.content().unwrap().parts;
    assert_eq!(parts[0].thought, Some(true));
    assert_eq!(parts[0].kind, adk_grpc_core::PartKind::Text { text: "hmm".into() });
    assert_eq!(reply.state_delta().get("reply"), Some(&json!("done")));
}

/// A valid file with the hooks `hooks` (indented YAML under `hooks:`), app-wide
/// hooks `app_hooks` and the root agent `root`.
fn with_hooks(hooks: &str, app_hooks: &str, root: &str) -> String {
    format!(
        "models:\n  m: {{ provider: mock }}\nhooks:\n{}apps:\n  a:\n    hooks: {app_hooks}\n    root_agent:\n{}",
        hooks.lines().map(|l| format!("  {l}\n")).collect::<String>(),
        root.lines().map(|l| format!("      {l}\n")).collect::<String>()
    )
}

const GUARD: &str = "guard: { url: \"http://127.0.0.1:9/hook\", points: [before_tool] }";

#[test]
fn hooks_need_an_http_url_points_and_a_positive_timeout() {
    let root = "{ name: x, model: m }";
    assert_problem(
        &with_hooks("g: { url: \"http://x/h\" }", "[]", root),
        r#"hook "g": field "points": name the points the hook is called at"#,
    );
    assert_problem(
        &with_hooks("g: { url: \"ftp://x/h\", points: [after_model] }", "[]", root),
        r#"hook "g": field "url": hook g: "ftp://x/h" is not an http(s) URL"#,
    );
    assert_problem(
        &with_hooks(
            "g: { url: \"http://x/h\", points: [after_model], timeout_secs: 0 }",
            "[]",
            root,
        ),
        r#"hook "g": field "timeout_secs": must be at least 1"#,
    );
    assert_problem(
        &with_hooks(
            "\"a guard\": { url: \"http://x/h\", points: [after_model] }",
            "[]",
            root,
        ),
        r#"hook "a guard": a hook name is 1-64 characters"#,
    );
    assert_problem(
        &with_hooks("g: { points: [after_model] }", "[]", root),
        "missing field `url`",
    );
}

#[test]
fn hook_points_and_failure_policies_take_their_names_only() {
    let root = "{ name: x, model: m }";
    assert_problem(
        &with_hooks("g: { url: \"http://x/h\", points: [before_tol] }", "[]", root),
        "unknown variant `before_tol`, expected one of `before_agent`, `after_agent`, `before_model`, \
         `after_model`, `before_tool`, `after_tool`",
    );
    assert_problem(
        &with_hooks(
            "g: { url: \"http://x/h\", points: [after_model], on_failure: closed }",
            "[]",
            root,
        ),
        "unknown variant `closed`, expected `fail_open` or `fail_closed`",
    );
    assert_problem(
        &with_hooks(
            "g: { url: \"http://x/h\", points: [after_model], retries: 3 }",
            "[]",
            root,
        ),
        "unknown field `retries`",
    );
    valid(&with_hooks(
        "g: { url: \"http://x/h\", points: [after_model, before_agent], on_failure: fail_closed, timeout_secs: 2 }",
        "[g]",
        root,
    ));
}

#[test]
fn hook_context_and_headers_are_checked_as_tools_are() {
    let root = "{ name: x, model: m }";
    assert_problem(
        &with_hooks(
            "g: { url: \"http://x/h\", points: [after_model], context: { state: [\"us*er\"] } }",
            "[]",
            root,
        ),
        r#"hook "g": field "context.state""#,
    );
    assert_problem(
        &with_hooks(
            "g: { url: \"http://x/h\", points: [after_model], headers_from_env: { x-key: ADK_TEST_SURELY_UNSET_KEY } }",
            "[]",
            root,
        ),
        r#"hook "g": field "headers_from_env": environment variable ADK_TEST_SURELY_UNSET_KEY (for header x-key) is not set"#,
    );
    valid(&with_hooks(
        "g: { url: \"http://x/h\", points: [after_model], context: { state: [\"user:*\"] }, headers_from_env: { x-path: PATH } }",
        "[g]",
        root,
    ));
}

#[test]
fn apps_and_agents_list_declared_hooks_once() {
    assert_problem(
        &with_hooks(GUARD, "[gaurd]", "{ name: x, model: m }"),
        r#"app "a": field "hooks": unknown hook "gaurd" (declared: guard)"#,
    );
    assert_problem(
        &with_hooks(GUARD, "[]", "{ name: x, model: m, hooks: [gaurd] }"),
        r#"app "a", agent "x": field "hooks": unknown hook "gaurd""#,
    );
    assert_problem(
        &with_hooks(GUARD, "[]", "{ name: x, model: m, hooks: [guard, guard] }"),
        r#"app "a", agent "x": field "hooks": guard is listed twice"#,
    );
    assert_problem(
        &with_hooks(GUARD, "[guard]", "{ name: x, model: m, hooks: [guard] }"),
        r#"app "a", agent "x": field "hooks": guard is a hook of the whole app already"#,
    );
    valid(&with_hooks(GUARD, "[guard]", "{ name: x, model: m }"));
    valid(&with_hooks(GUARD, "[]", "{ name: x, model: m, hooks: [guard] }"));
}

#[test]
fn only_llm_agents_list_hooks_of_model_and_tool_points() {
    let hooks = "guard: { url: \"http://127.0.0.1:9/hook\", points: [before_tool] }\n\
                 greet: { url: \"http://127.0.0.1:9/hook\", points: [before_agent, after_agent] }";
    assert_problem(
        &with_hooks(
            hooks,
            "[]",
            "name: steps\nkind: sequential\nhooks: [guard]\nsub_agents:\n  - { name: x, model: m }\n",
        ),
        r#"app "a", agent "steps": field "hooks": hook guard is called at before_tool: only llm agents call models and tools"#,
    );
    // ADK's on_model_error and on_tool_error callbacks: points of llm agents too.
    assert_problem(
        &with_hooks(
            "rescue: { url: \"http://127.0.0.1:9/hook\", points: [on_model_error, on_tool_error] }",
            "[]",
            "name: steps\nkind: parallel\nhooks: [rescue]\nsub_agents:\n  - { name: x, model: m, hooks: [rescue] }\n",
        ),
        r#"agent "steps": field "hooks": hook rescue is called at on_model_error, on_tool_error: only llm agents"#,
    );
    assert_problem(
        &with_hooks(
            hooks,
            "[]",
            "name: x\nmodel: m\nsub_agents:\n  - { name: r, kind: a2a, endpoint: \"http://127.0.0.1:1\", as_tool: true, hooks: [greet] }\n",
        ),
        r#"app "a", agent "r": field "hooks": an a2a agent offered as a tool is called, not run as an agent"#,
    );
    // App-wide hooks apply to every agent at the points it has; workflow and a2a
    // agents take agent-point hooks of their own.
    valid(&with_hooks(
        hooks,
        "[guard]",
        "name: steps\nkind: sequential\nhooks: []\nsub_agents:\n  - { name: x, model: m }\n  - { name: r, kind: a2a, endpoint: \"http://127.0.0.1:1\", hooks: [greet] }\n",
    ));
    valid(&with_hooks(
        hooks,
        "[]",
        "name: steps\nkind: loop\nhooks: [greet]\nsub_agents:\n  - { name: x, model: m, hooks: [guard, greet] }\n",
    ));
}

// ---------- openapi tools ----------

/// An OpenAPI spec file in a temporary directory, and its path.
fn spec_file(dir: &tempfile::TempDir, yaml: &str) -> String {
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, yaml).expect("write the spec");
    path.display().to_string()
}

const PETS_SPEC: &str = "openapi: 3.0.3\nservers: [{ url: 'http://127.0.0.1:9/v1' }]\npaths:\n  /pets/{petId}:\n    get:\n      operationId: getPet\n      summary: One pet.\n      parameters: [{ name: petId, in: path, required: true, schema: { type: string } }]\n  /pets:\n    post: { operationId: addPet, summary: Adds a pet. }\n";

fn with_openapi(tool: &str, agent_tools: &str) -> String {
    format!(
        "models:\n  m: {{ provider: mock }}\ntools:\n  pets: {{ kind: openapi, {tool} }}\n  get_pet: {{ kind: client, description: d }}\napps:\n  a:\n    root_agent: {{ name: x, model: m, tools: [{agent_tools}] }}\n"
    )
}

#[test]
fn an_openapi_tool_offers_its_specs_operations_to_the_agent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = spec_file(&dir, PETS_SPEC);
    let config = valid(&with_openapi(&format!("spec: '{spec}', tool_prefix: shop"), "pets"));
    let tools: Vec<(String, String)> = config.apps[0]
        .description
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.description.clone()))
        .collect();
    assert_eq!(
        tools,
        [
            ("shop_get_pet".to_string(), "One pet.".to_string()),
            ("shop_add_pet".to_string(), "Adds a pet.".to_string())
        ]
    );
    // Filtered by operationId or tool name; a name no operation has is refused, listing them.
    let config = valid(&with_openapi(&format!("spec: '{spec}', tool_filter: [getPet]"), "pets"));
    assert_eq!(config.apps[0].description.tools.len(), 1);
    assert_problem(
        &with_openapi(&format!("spec: '{spec}', tool_filter: [get_pets]"), "pets"),
        r#"tool "pets": field "tool_filter": OpenAPI toolset pets: the spec"#,
    );
    // An operation named as another tool of the agent.
    assert_problem(
        &with_openapi(&format!("spec: '{spec}'"), "pets, get_pet"),
        r#"field "tools": pets's operation get_pet has the name of another of the agent's tools: give pets a tool_prefix"#,
    );
}

#[test]
fn an_openapi_tool_needs_a_spec_it_can_read_and_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    assert_problem(
        &with_openapi("description: d", "pets"),
        r#"tool "pets": field "spec": an openapi tool needs its spec"#,
    );
    assert_problem(
        &with_openapi("spec: /surely/not/here.yaml", "pets"),
        r#"tool "pets": field "spec": OpenAPI toolset pets: cannot read the spec file "/surely/not/here.yaml""#,
    );
    let external = spec_file(
        &dir,
        "openapi: 3.1.0\nservers: [{ url: 'http://x' }]\npaths:\n  /a:\n    get:\n      parameters: [{ $ref: 'common.yaml#/P' }]\n",
    );
    assert_problem(
        &with_openapi(&format!("spec: '{external}'"), "pets"),
        &format!(
            r#"tool "pets": field "spec": OpenAPI toolset pets: GET /a ({external}): paths./a.get.parameters[0]: $ref "common.yaml#/P" points into another document"#
        ),
    );
    let spec = spec_file(&dir, PETS_SPEC);
    assert_problem(
        &with_openapi(&format!("spec: '{spec}', base_url: 'ftp://x'"), "pets"),
        r#"tool "pets": field "base_url": OpenAPI toolset pets: base_url "ftp://x" is not an http(s) URL"#,
    );
    assert_problem(
        &with_openapi(
            &format!("spec: '{spec}', headers_from_env: {{ x-key: ADK_TEST_SURELY_UNSET_KEY }}"),
            "pets",
        ),
        r#"tool "pets": field "headers_from_env": environment variable ADK_TEST_SURELY_UNSET_KEY"#,
    );
    // Fields of other kinds.
    for field in ["url: 'http://x'", "context: {}", "parameters: { type: object }"] {
        let name = field.split(':').next().unwrap();
        assert_misfit(
            &with_openapi(&format!("spec: '{spec}', {field}"), "pets"),
            "pets",
            name,
            "an openapi tool",
        );
    }
    assert_misfit(
        &with_tool("t: { kind: http, description: d, url: 'http://x', spec: s.yaml }"),
        "t",
        "spec",
        "an http tool",
    );
}

#[test]
fn mode_makes_an_llm_sub_agent_a_tool_and_what_cannot_be_is_refused() {
    let config = valid(&with_root(
        "name: host\nmodel: fast\nsub_agents:\n  - { name: intake, mode: task }\n  - { name: summary, mode: single_turn }\n  - { name: chat, mode: chat }\n",
    ));
    let apps = config.build(&RunnerServices::in_memory()).expect("build");
    let modes: Vec<_> = apps[0]
        .runner()
        .root_agent()
        .sub_agents()
        .iter()
        .map(|sub| sub.mode())
        .collect();
    use adk_grpc_core::AgentMode;
    assert_eq!(modes, [AgentMode::Task, AgentMode::SingleTurn, AgentMode::Chat]);

    assert_problem(
        &with_root("name: host\nmodel: fast\nmode: task\n"),
        r#"agent "host": field "mode": the root agent has no parent to call it (task)"#,
    );
    assert_problem(
        &with_root("name: steps\nkind: sequential\nsub_agents:\n  - { name: intake, model: fast, mode: task }\n"),
        r#"agent "intake": field "mode": a task agent is a tool of its parent and only an llm agent calls tools; its parent "steps" is a sequential agent"#,
    );
    assert_problem(
        &with_root(
            "name: host\nmodel: fast\nsub_agents:\n  - { name: steps, kind: sequential, mode: task, sub_agents: [{ name: a }] }\n",
        ),
        r#"agent "steps": field "mode": only llm agents have it; this is a sequential agent"#,
    );
    assert_problem(
        &with_root("name: host\nmodel: fast\nsub_agents:\n  - { name: intake, mode: single_turn, as_tool: true }\n"),
        r#"agent "intake": field "as_tool": set mode or as_tool, not both"#,
    );
    assert_problem(
        &with_root(
            "name: host\nmodel: fast\nsub_agents:\n  - { name: intake, mode: task, sub_agents: [{ name: helper }] }\n",
        ),
        r#"agent "intake": field "sub_agents": a task agent answers its parent's call and never hands the conversation over: its sub-agent "helper" must be of mode task or single_turn"#,
    );
    assert_problem(
        &with_root("name: host\nmodel: fast\ntools: [intake]\nsub_agents:\n  - { name: intake, mode: task }\n"),
        r#"agent "host": field "tools""#,
    );
}

/// The `state_schema` llm agent `name` of the first app is held to.
fn state_schema_of(config: &AgentsConfig, name: &str) -> Option<serde_json::Value> {
    let apps = config.build(&RunnerServices::in_memory()).unwrap();
    let agent = adk_grpc_core::find_agent(apps[0].runner().root_agent(), name).expect("the agent");
    let spec = agent.spec();
    assert_eq!(spec.kind, adk_grpc_core::AgentKind::Llm, "an llm agent");
    spec.state_schema.map(|schema| schema.schema().clone())
}

#[test]
fn a_state_schema_is_an_object_schema_inline_or_in_a_file_and_held_below_it() {
    let schema = "{ type: object, properties: { city: { type: string } } }";
    let config = valid(&with_root(&format!(
        "kind: sequential\nname: flow\nstate_schema: {schema}\nsub_agents:\n\
         \x20 - {{ name: a, model: fast }}\n\
         \x20 - {{ name: b, model: fast, state_schema: {{ type: object, additionalProperties: true }} }}\n"
    )));
    assert_eq!(
        state_schema_of(&config, "a").unwrap()["properties"]["city"]["type"],
        "string"
    );
    assert_eq!(state_schema_of(&config, "b").unwrap()["additionalProperties"], true);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.yaml");
    std::fs::write(&path, "type: object\nproperties:\n  visits: { type: integer }\n").unwrap();
    let config = valid(&with_root(&format!(
        "name: planner\nmodel: fast\nstate_schema: {:?}\n",
        path.display().to_string()
    )));
    assert_eq!(
        state_schema_of(&config, "planner").unwrap()["properties"]["visits"]["type"],
        "integer"
    );

    assert_problem(
        &with_root("name: planner\nmodel: fast\nstate_schema: { type: string }\n"),
        r#"agent "planner": field "state_schema": state_schema must be a JSON Schema of the state, an object schema"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nstate_schema: { type: object, properties: 3 }\n"),
        r#"agent "planner": field "state_schema": state_schema is not a valid JSON Schema"#,
    );
    assert_problem(
        &with_root("name: planner\nmodel: fast\nstate_schema: /no/such/schema.json\n"),
        r#"agent "planner": field "state_schema": cannot read "/no/such/schema.json""#,
    );
    assert_problem(
        &with_root("name: r\nkind: a2a\nendpoint: \"http://127.0.0.1:1\"\nstate_schema: { type: object }\n"),
        r#"agent "r": field "state_schema": an a2a agent runs elsewhere"#,
    );
}

#[test]
fn a_model_consult_tool_names_a_declared_advisor_and_positive_budgets() {
    let file = |tool: &str| {
        format!(
            "models:\n  fast: {{ provider: mock }}\n  smart: {{ provider: mock, model: smart-mock }}\n\
             tools:\n  model_consult: {tool}\n\
             apps:\n  a:\n    root_agent: {{ name: x, model: fast, tools: [model_consult] }}\n"
        )
    };
    let config = valid(&file(
        "{ kind: model_consult, advisor: smart, max_uses: 2, session_max_uses: 10 }",
    ));
    let apps = config.build(&RunnerServices::in_memory()).unwrap();
    let tools = &apps[0].root_agent().tools;
    assert_eq!(tools[0].name, "model_consult", "{tools:?}");
    assert!(tools[0].description.contains("advisor"), "{tools:?}");

    assert_problem(
        &file("{ kind: model_consult, advisor: oracle }"),
        r#"tool "model_consult": field "advisor": unknown model "oracle" (declared: fast, smart)"#,
    );
    assert_problem(
        &file("{ kind: model_consult }"),
        r#"tool "model_consult": field "advisor": a model_consult tool needs the model that advises"#,
    );
    assert_problem(
        &file("{ kind: model_consult, advisor: smart, max_uses: 0 }"),
        r#"tool "model_consult": field "max_uses": must be at least 1"#,
    );
    assert_problem(
        &file("{ kind: model_consult, advisor: smart, session_max_uses: 0 }"),
        r#"tool "model_consult": field "session_max_uses": must be at least 1"#,
    );
    assert_misfit(
        &file("{ kind: model_consult, advisor: smart, url: \"http://x\" }"),
        "model_consult",
        "url",
        "a model_consult tool",
    );
    for field in [
        "advisor: smart",
        "thinking_level: high",
        "max_output_tokens: 10",
        "executor_instruction: x",
        "advisor_instruction: x",
        "include_agent_instruction: false",
        "include_tool_inventory: false",
        "context_config: {}",
        "generate_content_config: {}",
    ] {
        let name = field.split(':').next().unwrap();
        assert_misfit(
            &file(&format!("{{ kind: client, description: d, {field} }}")),
            "model_consult",
            name,
            "a client tool",
        );
    }
}

#[test]
fn a_model_consult_tools_advisor_settings_are_checked_at_load() {
    let file = |tool: &str| {
        format!(
            "models:\n  fast: {{ provider: mock }}\n  \
             smart: {{ provider: openai, model: gpt-test, base_url: \"http://127.0.0.1:1/v1\" }}\n\
             tools:\n  model_consult: {{ kind: model_consult, advisor: smart, {tool} }}\n\
             apps:\n  a:\n    root_agent: {{ name: x, model: fast, tools: [model_consult] }}\n"
        )
    };
    valid(&file(
        "thinking_level: minimal, max_output_tokens: 9, generate_content_config: { temperature: 0.5, max_output_tokens: \
         9 }, context_config: { max_chars: null, max_events: 3 }, executor_instruction: '', advisor_instruction: a",
    ));
    for (tool, expected) in [
        (
            "thinking_level: extreme",
            r#"field "thinking_level": "extreme" is not one of minimal, low, medium, high, off"#,
        ),
        (
            "max_output_tokens: 0",
            r#"field "max_output_tokens": must be at least 1"#,
        ),
        (
            "max_output_tokens: 5, generate_content_config: { max_output_tokens: 6 }",
            r#"field "max_output_tokens": 5 and generate_content_config.max_output_tokens 6 disagree"#,
        ),
        (
            "context_config: { max_chars: 0 }",
            r#"field "context_config.max_chars": must be at least 1"#,
        ),
        (
            "context_config: { max_events: 0 }",
            r#"field "context_config.max_events": must be at least 1"#,
        ),
        (
            "context_config: { max_part_chars: 0 }",
            r#"field "context_config.max_part_chars": must be at least 1"#,
        ),
        ("context_config: { max_tokens: 3 }", "unknown field `max_tokens`"),
        // The agents' `generation` rules, against the advisor's provider.
        (
            "generate_content_config: { safety_settings: [{ category: C, threshold: T }] }",
            r#"tool "model_consult": field "generate_content_config.safety_settings": safety settings are Gemini's"#,
        ),
        (
            "generate_content_config: { thinking: { budget_tokens: 100 } }",
            r#"tool "model_consult": field "generate_content_config.thinking.budget_tokens": an openai model takes an effort"#,
        ),
        (
            "generate_content_config: { top_k: 0 }",
            r#"tool "model_consult": field "generate_content_config.top_k": must be at least 1"#,
        ),
    ] {
        assert_problem(&file(tool), expected);
    }
}

#[tokio::test]
async fn a_model_consult_tools_settings_reach_the_advisors_request() {
    use adk_grpc_models::testing::{FakeServer, openai};
    let executor = FakeServer::start().await;
    let advisor = FakeServer::start().await;
    let yaml = format!(
        "
models:
  fast: {{ provider: openai, model: exec, base_url: '{}' }}
  smart: {{ provider: openai, model: adv, base_url: '{}' }}
tools:
  lookup: {{ kind: client, description: Looks a symbol up. }}
  model_consult:
    kind: model_consult
    advisor: smart
    thinking_level: low
    max_output_tokens: 321
    generate_content_config: {{ temperature: 0.5, seed: 7 }}
    advisor_instruction: You review plans.
    executor_instruction: Consult the reviewer first.
    include_tool_inventory: false
    context_config: {{ max_events: 1 }}
apps:
  a:
    root_agent: {{ name: coder, model: fast, instruction: Fix bugs in Rust., tools: [lookup, model_consult] }}
",
        executor.url(),
        advisor.url()
    );
    let apps = valid(&yaml).build(&RunnerServices::in_memory()).unwrap();
    executor.push(openai::tool_calls(&[(
        "c1",
        "model_consult",
        json!({"question": "Which file?"}),
    )]));
    advisor.push(openai::text("Read src/parse.rs."));
    executor.push(openai::text("Done."));
    run_once(&apps[0], "the parser drops commas").await;

    let executor_system = executor.requests()[0].json()["messages"][0]["content"].clone();
    assert!(
        executor_system
            .as_str()
            .unwrap()
            .ends_with("Consult the reviewer first."),
        "{executor_system}"
    );
    let body = advisor.last_request().json();
    assert_eq!(body["reasoning_effort"], "low", "{body}");
    assert_eq!(body["max_completion_tokens"], 321, "{body}");
    assert_eq!(body["temperature"], 0.5, "{body}");
    assert_eq!(body["seed"], 7, "{body}");
    assert_eq!(body["messages"][0]["content"], "You review plans.", "{body}");
    // The advisor's message is parts (the executor's instruction, the hand-off): their JSON.
    let text = &body["messages"][1]["content"].to_string();
    assert!(text.contains("Fix bugs in Rust."), "the agent's instruction: {text}");
    assert!(!text.contains("- lookup"), "no tool inventory: {text}");
    assert!(
        !text.contains("drops commas"),
        "only the newest event (the consult's own call, left out): {text}"
    );
    assert!(text.contains("Which file?"), "{text}");
}

#[test]
fn resumability_config_is_adks_and_defaults_to_not_resumable() {
    let app = |extra: &str| {
        format!(
            "models:\n  fast: {{ provider: mock }}\napps:\n  flow:\n{extra}    root_agent:\n      kind: sequential\n      \
             name: steps\n      sub_agents:\n        - {{ name: a, model: fast }}\n"
        )
    };
    let resumable = |yaml: &str| valid(yaml).apps[0].resumability_config.is_resumable;
    assert!(!resumable(&app("")), "ADK's App is not resumable unless it says so");
    assert!(resumable(&app("    resumability_config: { is_resumable: true }\n")));
    assert!(!resumable(&app("    resumability_config: {}\n")));
    assert_problem(
        &app("    resumability_config: { resumable: true }\n"),
        "unknown field `resumable`",
    );
}

/// ADK tests `static_instruction`'s truth: an empty text or list is none, and the
/// instruction stays the system text; a text makes the instruction a user content.
#[tokio::test]
async fn an_empty_static_instruction_is_none_as_adk_reads_it() {
    use adk_grpc_models::testing::{FakeServer, openai};
    for (static_instruction, instruction_is_system_text) in [("''", true), ("[]", true), ("Be brief.", false)] {
        let model = FakeServer::start().await;
        let yaml = format!(
            "
models:
  fast: {{ provider: openai, model: m, base_url: '{}' }}
apps:
  a:
    root_agent: {{ name: desk, model: fast, instruction: Answer in French., static_instruction: {static_instruction} }}
",
            model.url()
        );
        let apps = valid(&yaml).build(&RunnerServices::in_memory()).unwrap();
        model.push(openai::text("Oui."));
        run_once(&apps[0], "hello").await;
        let system = model.requests()[0].json()["messages"][0]["content"].clone();
        assert_eq!(
            system.as_str().is_some_and(|text| text.contains("Answer in French.")),
            instruction_is_system_text,
            "static_instruction {static_instruction}: {system}"
        );
    }
}
