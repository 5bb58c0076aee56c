//! ADK agent-config directories: the ones `adk create --type=config` (the PyPI
//! google-adk of the repository's Python venv) writes, hand-written ones for each
//! agent class, and every refusal naming the YAML file and the field.

use super::file::{
    AgentConfig, AgentKind, AgentsFile, Mode, ModelConsultToolConfig, StaticInstructionConfig, ToolConfig,
};
use super::*;
use adk_grpc_agents::{StaticInstruction, StaticPart};
use adk_grpc_testkit::venv_python;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// `adk create --type=config --model <model> <name>` run in `dir`.
fn adk_create(dir: &Path, name: &str, model: &str) {
    let output = Command::new(venv_python())
        .args(["-m", "google.adk.cli", "create", "--type=config", "--model", model])
        .args(["--api_key", "not-a-key", name])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run adk create");
    assert!(
        output.status.success(),
        "adk create failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        dir.join(name).join("root_agent.yaml").is_file(),
        "adk create wrote no root_agent.yaml"
    );
}

/// A directory of files: (relative path, contents).
fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, contents) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        std::fs::write(path, contents).expect("write");
    }
    dir
}

/// The translation of the ADK directory `dir`, or its problems.
fn translated(dir: &Path) -> AgentsFile {
    match adk_config::read(dir, Path::new("python3")) {
        Ok((spec, _)) => spec,
        Err(e) => panic!("{e}"),
    }
}

/// The problems of loading `dir`, one line each as the server prints them.
fn problems(dir: &Path) -> Vec<String> {
    match AgentsConfig::load(dir) {
        Ok(_) => Vec::new(),
        Err(e) => e.to_string().lines().map(str::to_string).collect(),
    }
}

#[track_caller]
fn assert_problem(dir: &Path, expected: &str) {
    let found = problems(dir);
    let expected = format!("{}: {expected}", dir.display());
    assert!(
        found.iter().any(|p| p.contains(&expected)),
        "expected a problem containing {expected:?}, got {found:#?}"
    );
}

/// Loads the translation of `dir` with every model a mock: the agents file's
/// rules and builders run on it as on any agents file, without API keys.
fn built_with_mocks(dir: &Path) -> AgentsConfig {
    let (mut spec, origins) = adk_config::read(dir, Path::new("python3")).unwrap_or_else(|e| panic!("{e}"));
    for provider in spec.models.values_mut() {
        *provider = json!({ "provider": "mock" });
    }
    AgentsConfig::check("adk", &spec, Some(&origins)).unwrap_or_else(|e| panic!("{e}"))
}

fn kinds(agent: &AgentConfig) -> Vec<(String, &'static str)> {
    let mut all = vec![(agent.name.clone(), agent.kind.as_str())];
    for sub in &agent.sub_agents {
        all.extend(kinds(sub));
    }
    all
}

#[test]
fn a_directory_adk_create_writes_is_an_app_named_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    adk_create(dir.path(), "my_app", "gemini-2.5-flash");
    let app_dir = dir.path().join("my_app");
    let written: Value =
        yaml_serde::from_str(&std::fs::read_to_string(app_dir.join("root_agent.yaml")).unwrap()).unwrap();

    let spec = translated(&app_dir);
    let names: Vec<&String> = spec.apps.keys().collect();
    assert_eq!(names, ["my_app"]);
    let root = &spec.apps["my_app"].root_agent;
    assert_eq!(root.name, written["name"].as_str().expect("adk create names the agent"));
    assert_eq!(root.kind, AgentKind::Llm);
    assert_eq!(root.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(root.instruction.as_deref(), written["instruction"].as_str());
    assert!(root.instruction.as_deref().is_some_and(|i| !i.is_empty()));
    assert_eq!(root.description, written["description"].as_str().unwrap_or_default());
    let provider = &spec.models["gemini-2.5-flash"];
    assert_eq!(provider["provider"], "gemini");
    assert_eq!(provider["model"], "gemini-2.5-flash");
    let key = provider["api_key_env"].as_str().expect("a key variable");
    assert!(key == "GOOGLE_API_KEY" || key == "GEMINI_API_KEY", "{key}");

    // Built by the agents file's builders (models as mocks, no key needed).
    let built = built_with_mocks(&app_dir);
    assert_eq!(built.app_names(), ["my_app"]);
    assert_eq!(built.apps[0].description.name, root.name);
    assert_eq!(built.apps[0].description.kind, "llm");

    // Without a key in the environment, the start fails naming the YAML and the variable.
    if std::env::var_os("GOOGLE_API_KEY").is_none() && std::env::var_os("GEMINI_API_KEY").is_none() {
        assert_problem(
            &app_dir,
            r#"root_agent.yaml, model "gemini-2.5-flash": environment variable GOOGLE_API_KEY (api_key_env) is not set"#,
        );
    }
}

#[test]
fn a_directory_of_adk_created_directories_is_one_app_each() {
    let dir = tempfile::tempdir().expect("temp dir");
    adk_create(dir.path(), "alpha", "gemini-2.5-flash");
    adk_create(dir.path(), "beta", "openai/gpt-4o-mini");
    // Not agents: skipped as adk web skips them.
    std::fs::create_dir_all(dir.path().join("__pycache__")).unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();

    let spec = translated(dir.path());
    let names: Vec<&String> = spec.apps.keys().collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(
        spec.apps["beta"].root_agent.model.as_deref(),
        Some("openai/gpt-4o-mini")
    );
    let openai = &spec.models["openai/gpt-4o-mini"];
    assert_eq!(
        (&openai["provider"], &openai["model"], &openai["api_key_env"]),
        (&json!("openai"), &json!("gpt-4o-mini"), &json!("OPENAI_API_KEY"))
    );
    assert_eq!(built_with_mocks(dir.path()).app_names(), ["alpha", "beta"]);
}

#[test]
fn a_python_agent_beside_config_agents_is_refused() {
    let dir = dir_with(&[
        (
            "good/root_agent.yaml",
            "name: a\nmodel: gemini-2.5-flash\ninstruction: hi\n",
        ),
        ("coded/agent.py", "root_agent = None\n"),
    ]);
    assert_problem(dir.path(), "coded/: app \"coded\" is an ADK agent written in Python");
}

#[test]
fn an_empty_directory_is_neither_kind() {
    let dir = tempfile::tempdir().unwrap();
    let found = problems(dir.path());
    assert!(
        found.len() == 1 && found[0].contains("no root_agent.yaml here nor in a subdirectory"),
        "{found:#?}"
    );
}

#[test]
fn every_agent_class_with_sub_agents_in_nested_files() {
    let dir = dir_with(&[
        (
            "trip/root_agent.yaml",
            "agent_class: SequentialAgent\nname: trip\ndescription: Plans a trip.\nsub_agents:\n\
             \x20 - config_path: agents/research.yaml\n  - config_path: ./agents/polish.yaml\n",
        ),
        (
            "trip/agents/research.yaml",
            "agent_class: ParallelAgent\nname: research\nsub_agents:\n  - config_path: team/weather.yaml\n\
             \x20 - team/sights.yaml\n",
        ),
        (
            "trip/agents/team/weather.yaml",
            "name: weather\nmodel: openai/gpt-4o-mini\ninstruction: Say the weather in {city}.\n\
             output_key: weather\ninclude_contents: none\ngenerate_content_config:\n  temperature: 0.2\n\
             \x20 maxOutputTokens: 200\n  stop_sequences: [END]\n",
        ),
        (
            "trip/agents/team/sights.yaml",
            "agent_class: google.adk.agents.LlmAgent\nname: sights\nmodel: gemini-2.5-flash\n\
             instruction: List sights.\ntools:\n  - name: load_memory\n  - preload_memory\n",
        ),
        (
            "trip/agents/polish.yaml",
            "agent_class: LoopAgent\nname: polish\nmax_iterations: 3\nsub_agents:\n  - config_path: critic.yaml\n",
        ),
        (
            "trip/agents/critic.yaml",
            "name: critic\nmodel: gemini-2.5-flash\ninstruction: Improve it; call exit_loop when done.\n\
             tools: [{name: exit_loop}, transfer_to_agent]\nsub_agents:\n  - config_path: nested/helper.yaml\n\
             disallow_transfer_to_parent: true\n",
        ),
        // No model: inherits its LlmAgent parent's, as in ADK.
        ("trip/agents/nested/helper.yaml", "name: helper\ninstruction: Help.\n"),
    ]);
    let app_dir = dir.path().join("trip");
    let spec = translated(&app_dir);
    let root = &spec.apps["trip"].root_agent;
    let expected: Vec<(String, &str)> = [
        ("trip", "sequential"),
        ("research", "parallel"),
        ("weather", "llm"),
        ("sights", "llm"),
        ("polish", "loop"),
        ("critic", "llm"),
        ("helper", "llm"),
    ]
    .into_iter()
    .map(|(name, kind)| (name.to_string(), kind))
    .collect();
    assert_eq!(kinds(root), expected);
    assert_eq!(root.description, "Plans a trip.");
    let weather = &root.sub_agents[0].sub_agents[0];
    assert_eq!(weather.instruction.as_deref(), Some("Say the weather in {city}."));
    assert_eq!(weather.output_key.as_deref(), Some("weather"));
    assert!(matches!(weather.include_contents, Some(file::IncludeContents::None)));
    let generation = weather.generation.as_ref().expect("generation");
    assert_eq!(
        (
            generation.temperature,
            generation.max_output_tokens,
            generation.stop_sequences.clone()
        ),
        (Some(0.2), Some(200), vec!["END".to_string()])
    );
    let sights = &root.sub_agents[0].sub_agents[1];
    assert_eq!(sights.tools, ["load_memory", "preload_memory"]);
    let polish = &root.sub_agents[1];
    assert_eq!(polish.max_iterations, Some(3));
    let critic = &polish.sub_agents[0];
    // transfer_to_agent is the runner's, given to an agent with sub_agents.
    assert_eq!(critic.tools, ["exit_loop"]);
    let helper = &critic.sub_agents[0];
    assert_eq!(helper.model, None, "translated as written");

    let built = built_with_mocks(&app_dir);
    let description = &built.apps[0].description;
    assert_eq!(
        (description.name.as_str(), description.kind.as_str()),
        ("trip", "sequential")
    );
    // The agents file's rule gives helper critic's model, as ADK does.
    let critic = &description.sub_agents[1].sub_agents[0];
    assert_eq!(critic.sub_agents[0].model, critic.model);
    assert_eq!(description.sub_agents[1].sub_agents[0].tools[0].name, "exit_loop");
}

/// One app whose root agent is `root` (YAML), beside other files.
#[test]
fn a_value_of_the_wrong_type_is_refused_naming_its_key() {
    let dir = app(
        "name: a\nmodel: gemini-2.5-flash\ninstruction: A.\nmax_iterations: 5000000000\n\
         generate_content_config:\n  temperature: hot\n  topK: 5\n  thinking_config: {thinking_budget: lots}\n",
        &[],
    );
    let file = "root_agent.yaml, agent \"a\"";
    for expected in [
        format!("{file}: field \"generate_content_config.temperature\": invalid type: string \"hot\", expected f32"),
        format!("{file}: field \"generate_content_config.thinking_config.thinking_budget\": invalid type: string"),
        format!("{file}: field \"max_iterations\": must be at most 4294967295"),
    ] {
        assert_problem(dir.path(), &expected);
    }
    assert_eq!(problems(dir.path()).len(), 4, "{:#?}", problems(dir.path()));
}

fn app(root: &str, others: &[(&str, &str)]) -> tempfile::TempDir {
    let mut files = vec![("root_agent.yaml", root)];
    files.extend_from_slice(others);
    dir_with(&files)
}

const HEAD: &str = "name: assistant\nmodel: gemini-2.5-flash\ninstruction: Help.\n";

#[test]
fn code_references_are_refused_naming_file_field_and_what_to_use() {
    let dir = app(
        &format!("{HEAD}sub_agents:\n  - config_path: sub/worker.yaml\n  - code: my_lib.agents.helper\n"),
        &[(
            "sub/worker.yaml",
            "name: worker\nmodel_code: {name: my_lib.models.make}\ninstruction: Work.\n",
        )],
    );
    let d = dir.path();
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "sub_agents[1].code": "my_lib.agents.helper" is an agent defined in Python"#,
    );
    assert_problem(
        d,
        r#"sub/worker.yaml, agent "worker": field "model_code": a Python code reference building a model"#,
    );
    // worker has neither model nor (after model_code) an llm ancestor's? It has: assistant's.
    // (An output_schema or input_schema class is served by the Python worker:
    // python_output_schema_…, and the conformance case input_schema.)
    assert_eq!(problems(d).len(), 3, "{:#?}", problems(d));
}

/// The app `shop` (a name Python can import) in a temporary directory, with the
/// Python modules `files` beside its root_agent.yaml.
fn python_app(root: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let mut all = vec![("shop/root_agent.yaml", root.to_string())];
    all.extend(files.iter().map(|(path, text)| (*path, text.to_string())));
    let written: Vec<(&str, &str)> = all.iter().map(|(path, text)| (*path, text.as_str())).collect();
    let dir = dir_with(&written);
    let app = dir.path().join("shop");
    (dir, app)
}

const SHOP_TOOLS: &str = "from google.adk.tools import ToolContext\n\n\
def add_item(item: str, count: int, tool_context: ToolContext) -> dict:\n    \
\"\"\"Adds an item to the cart.\n\n    Args:\n      item: what to add.\n      count: how many.\n    \"\"\"\n    \
tool_context.state['cart'] = [item] * count\n    return {'added': count}\n";

const SHOP_CALLBACKS: &str = "def guard(tool, args, tool_context):\n    return None\n";

#[test]
fn python_tools_and_callbacks_are_served_by_the_worker_as_http_tools_and_hooks() {
    let (_dir, app) = python_app(
        &format!(
            "{HEAD}tools:\n  - name: shop.tools.add_item\nbefore_tool_callbacks:\n  - name: shop.callbacks.guard\n"
        ),
        &[("shop/tools.py", SHOP_TOOLS), ("shop/callbacks.py", SHOP_CALLBACKS)],
    );
    let (spec, _) = adk_config::read(&app, &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    let agent = &spec.apps["shop"].root_agent;
    // Declared under a key of the app; the tool is named as ADK names a FunctionTool.
    assert_eq!(agent.tools, ["shop:shop.tools.add_item"]);
    assert_eq!(agent.hooks, ["shop-guard-before_tool"]);
    let Some(ToolConfig::Python(served)) = spec.tools.get("shop:shop.tools.add_item") else {
        panic!("add_item is not a Python tool: {:?}", spec.tools)
    };
    let [(name, tool)] = served.as_slice() else {
        panic!("one tool: {served:?}")
    };
    assert_eq!(name, "add_item");
    // ADK's own declaration: the docstring, the schema pydantic makes of the signature.
    assert_eq!(
        tool.description,
        "Adds an item to the cart.\n\nArgs:\n  item: what to add.\n  count: how many."
    );
    assert_eq!(
        tool.parameters,
        Some(json!({
            "properties": {"item": {"title": "Item", "type": "string"}, "count": {"title": "Count", "type": "integer"}},
            "required": ["item", "count"],
            "title": "add_itemParams",
            "type": "object",
        }))
    );
    assert!(
        tool.url
            .as_deref()
            .is_some_and(|url| url.ends_with("/tool/shop.tools.add_item/add_item")),
        "{tool:?}"
    );
    let hook = &spec.hooks["shop-guard-before_tool"];
    assert_eq!(hook.points, [adk_grpc_agents::HookPoint::BeforeTool]);
    assert!(hook.url.ends_with("/callback/shop.callbacks.guard"), "{hook:?}");
}

/// Loads the translation of the Python app `dir` with its worker in the test venv and
/// every model a mock; the apps built.
fn built_python_apps(dir: &Path) -> Vec<crate::app::App> {
    let (mut spec, origins) = adk_config::read(dir, &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    for provider in spec.models.values_mut() {
        *provider = json!({ "provider": "mock" });
    }
    let config = AgentsConfig::check("adk", &spec, Some(&origins)).unwrap_or_else(|e| panic!("{e}"));
    config
        .build(&RunnerServices::in_memory())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn tool_names(app: &crate::app::App) -> Vec<String> {
    app.root_agent().tools.iter().map(|t| t.name.clone()).collect()
}

/// A toolset instance, a tool class ADK makes with `from_config`, and a function ADK
/// calls with the entry's `args` to make the tool.
const SHOP_TOOLSET: &str = r#"
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

def lookup(order_id: str) -> dict:
    """Looks an order up."""
    return {}

def cancel(order_id: str) -> dict:
    """Cancels an order."""
    return {}

class Orders(BaseToolset):
    async def get_tools(self, readonly_context=None):
        return [FunctionTool(lookup), FunctionTool(cancel)]

orders = Orders(tool_name_prefix="orders")

class Greeter(BaseTool):
    def __init__(self, greeting: str):
        super().__init__(name=greeting.lower(), description="Greets.")

    def _get_declaration(self):
        return types.FunctionDeclaration(name=self.name, description=self.description)

def discount_tool(args):
    percent = args.model_dump()["percent"]

    def apply_discount(price: float) -> float:
        """Applies the discount."""
        return price * (100 - percent) / 100

    return FunctionTool(apply_discount)
"#;

#[test]
fn python_toolsets_tool_classes_and_tools_made_with_args_are_served_as_adk_makes_them() {
    let (_dir, app) = python_app(
        &format!(
            "{HEAD}tools:\n  - name: shop.tools.orders\n  - name: shop.tools.Greeter\n    args: {{greeting: Welcome}}\n\
             \x20 - name: shop.tools.discount_tool\n    args: {{percent: 10}}\n"
        ),
        &[("shop/tools.py", SHOP_TOOLSET)],
    );
    let apps = built_python_apps(&app);
    // The toolset's tools with its prefix, the class made with its args, the made tool.
    assert_eq!(
        tool_names(&apps[0]),
        ["orders_lookup", "orders_cancel", "welcome", "apply_discount"]
    );
}

#[test]
fn two_apps_may_name_python_tools_of_the_same_name() {
    let dir = dir_with(&[
        (
            "shop/root_agent.yaml",
            &format!("{HEAD}tools:\n  - name: shop.tools.add_item\n"),
        ),
        ("shop/tools.py", SHOP_TOOLS),
        (
            "deli/root_agent.yaml",
            &format!("{HEAD}tools:\n  - name: deli.tools.add_item\n"),
        ),
        ("deli/tools.py", SHOP_TOOLS),
    ]);
    let (spec, _) = adk_config::read(dir.path(), &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    // Each app's tool is its own: its own declaration, served by its own worker.
    let url = |key: &str| match spec.tools.get(key) {
        Some(ToolConfig::Python(served)) => served[0].1.url.clone().expect("a url"),
        other => panic!("{key}: {other:?}"),
    };
    assert_ne!(url("shop:shop.tools.add_item"), url("deli:deli.tools.add_item"));
    let apps = built_python_apps(dir.path());
    for app in &apps {
        assert_eq!(tool_names(app), ["add_item"]);
    }
    assert_eq!(apps.len(), 2);
}

/// The error loading `app` with the test venv's worker gives (it must not load).
fn refusal_with_python(app: &Path) -> String {
    match AgentsConfig::load_with_python(app, &venv_python()) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn python_functions_that_do_not_import_are_refused_naming_the_field() {
    let (_dir, app) = python_app(
        &format!(
            "{HEAD}tools:\n  - name: shop.tools.remove_item\n  - name: nowhere.tools.find\n\
             before_model_callbacks:\n  - name: shop.callbacks.missing\n"
        ),
        &[("shop/tools.py", SHOP_TOOLS), ("shop/callbacks.py", SHOP_CALLBACKS)],
    );
    let found = refusal_with_python(&app);
    for expected in [
        r#"root_agent.yaml, agent "assistant": field "tools[0]": the Python tool "shop.tools.remove_item" does not import: Invalid fully qualified name: shop.tools.remove_item (AttributeError: module 'shop.tools' has no attribute 'remove_item')"#,
        r#"root_agent.yaml, agent "assistant": field "tools[1]": the Python tool "nowhere.tools.find" does not import: Invalid fully qualified name: nowhere.tools.find (ModuleNotFoundError: No module named 'nowhere')"#,
        r#"root_agent.yaml, agent "assistant": field "before_model_callbacks[0]": the Python callback "shop.callbacks.missing" does not import"#,
    ] {
        assert!(found.contains(expected), "expected {expected:?} in:\n{found}");
    }
}

const SHOP_SCHEMAS: &str = "from pydantic import BaseModel, Field\n\n\
class Receipt(BaseModel):\n    total: float = Field(description='What it costs.')\n    items: list[str]\n\n\
Receipts = list[Receipt]\n\nCounts = dict[str, int]\n\nNOT_A_SCHEMA = 3\n";

#[test]
fn python_output_schema_classes_are_sent_as_adk_sends_them() {
    let (_dir, app) = python_app(
        &format!("{HEAD}output_schema:\n  name: shop.schemas.Receipt\noutput_key: receipt\n"),
        &[("shop/schemas.py", SHOP_SCHEMAS)],
    );
    let (spec, _) = adk_config::read(&app, &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    let agent = &spec.apps["shop"].root_agent;
    let class = agent.output_schema_class.as_ref().expect("the class is resolved");
    // Its JSON Schema (pydantic's) checks the replies.
    assert_eq!(agent.output_schema.as_ref(), Some(&class.json_schema));
    assert_eq!(class.json_schema["required"], json!(["total", "items"]));
    // google-genai's form: upper-case types, pydantic's titles, the fields' order.
    assert_eq!(class.as_sent.gemini["property_ordering"], json!(["total", "items"]));
    assert_eq!(class.as_sent.gemini["properties"]["total"]["type"], "NUMBER");
    assert_eq!(class.as_sent.gemini["title"], "Receipt");
    // ADK's LiteLlm form: strict, named after the class, every property required, sorted.
    let openai = class.as_sent.openai.as_ref().expect("LiteLlm sends a class");
    assert_eq!(openai["json_schema"]["name"], "Receipt");
    assert_eq!(openai["json_schema"]["strict"], true);
    assert_eq!(openai["json_schema"]["schema"]["required"], json!(["items", "total"]));
    assert_eq!(openai["json_schema"]["schema"]["additionalProperties"], false);
    // set_model_response's parameters: the fields, their descriptions kept.
    let parameters = &class.set_model_response_parameters;
    assert_eq!(parameters["title"], "set_model_responseParams");
    assert_eq!(parameters["properties"]["total"]["description"], "What it costs.");
}

/// ADK's YAML names any Python object as an `output_schema`: a `list[Model]` is sent as
/// google-genai sends it, validated, carried in `set_model_response`'s `items`; any other
/// type (`dict[str, int]`) in its `response`, not validated, as ADK takes it.
#[test]
fn python_output_schemas_that_are_no_class_are_sent_as_adk_sends_them() {
    let (_dir, app) = python_app(
        &format!("{HEAD}output_schema:\n  name: shop.schemas.Receipts\nsub_agents:\n  - config_path: counter.yaml\n"),
        &[
            ("shop/schemas.py", SHOP_SCHEMAS),
            (
                "shop/counter.yaml",
                "name: counter\nmodel: gemini-2.5-flash\noutput_schema:\n  name: shop.schemas.Counts\n",
            ),
        ],
    );
    let (spec, _) = adk_config::read(&app, &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    let root = &spec.apps["shop"].root_agent;
    let list = root.output_schema_class.as_ref().expect("the list is resolved");
    assert!(list.validated);
    assert_eq!(list.json_schema["type"], "array");
    assert_eq!(list.as_sent.gemini["type"], "ARRAY");
    assert_eq!(
        list.as_sent.gemini["items"]["property_ordering"],
        json!(["total", "items"])
    );
    // ADK's LiteLlm sends no response_format for a list.
    assert_eq!(list.as_sent.openai, None);
    assert_eq!(list.set_model_response_argument.as_deref(), Some("items"));
    assert_eq!(list.set_model_response_parameters["required"], json!(["items"]));
    let counts = root.sub_agents[0]
        .output_schema_class
        .as_ref()
        .expect("the dict is resolved");
    assert!(!counts.validated);
    assert_eq!(
        counts.json_schema,
        json!({"type": "object", "additionalProperties": {"type": "integer"}})
    );
    assert_eq!(counts.set_model_response_argument.as_deref(), Some("response"));
}

/// ADK's `finish_task` validates a task's output of any type with its `TypeAdapter`: the
/// worker validates a task agent's `dict[str, int]` (and answers in pydantic's words),
/// which it does not for a chat agent's, whose replies ADK takes as they come.
#[tokio::test]
async fn a_task_agents_python_output_type_is_validated_by_the_worker() {
    let (_dir, app) = python_app(
        &format!("{HEAD}output_schema:\n  name: shop.schemas.Counts\nsub_agents:\n  - config_path: counter.yaml\n"),
        &[
            ("shop/schemas.py", SHOP_SCHEMAS),
            (
                "shop/counter.yaml",
                "name: counter\nmodel: gemini-2.5-flash\ndescription: Counts.\nmode: task\noutput_schema:\n  \
                 name: shop.schemas.Counts\n",
            ),
        ],
    );
    let (spec, _origins) = adk_config::read(&app, &venv_python()).unwrap_or_else(|e| panic!("{e}"));
    let root = &spec.apps["shop"].root_agent;
    assert!(root.output_schema_class.as_ref().unwrap().validator.is_none());
    let counts = root.sub_agents[0].output_schema_class.as_ref().unwrap();
    assert!(!counts.validated, "ADK validates no reply of it");
    let validator = &counts
        .validator
        .as_ref()
        .expect("the worker validates a task's output")
        .0;
    assert_eq!(
        validator
            .validate(adk_grpc_agents::Unvalidated::Value(&json!({"pears": "3"})))
            .await,
        Ok(json!({"pears": 3}))
    );
    let error = validator
        .validate(adk_grpc_agents::Unvalidated::Value(&json!({"pears": "three"})))
        .await
        .unwrap_err();
    assert!(
        error.starts_with("1 validation error for dict[str,int]\npears\n  Input should be a valid integer"),
        "{error}"
    );
}

#[test]
fn python_objects_that_are_no_schema_are_refused_naming_the_field() {
    let (_dir, app) = python_app(
        &format!("{HEAD}output_schema:\n  name: shop.schemas.NOT_A_SCHEMA\n"),
        &[("shop/schemas.py", SHOP_SCHEMAS)],
    );
    let found = refusal_with_python(&app);
    assert!(
        found.contains(
            r#"root_agent.yaml, agent "assistant": field "output_schema": the Python object "shop.schemas.NOT_A_SCHEMA" cannot be the output_schema: shop.schemas.NOT_A_SCHEMA is no schema ADK's LlmAgent can send: Unsupported schema type: 3"#
        ),
        "{found}"
    );
}

/// ADK's `input_schema` is a pydantic class only (`type[BaseModel]`).
#[test]
fn python_input_schemas_that_are_no_pydantic_class_are_refused_naming_the_field() {
    let (_dir, app) = python_app(
        &format!("{HEAD}input_schema:\n  name: shop.schemas.Receipts\n"),
        &[("shop/schemas.py", SHOP_SCHEMAS)],
    );
    let found = refusal_with_python(&app);
    assert!(
        found.contains(
            r#"field "input_schema": the Python object "shop.schemas.Receipts" cannot be the input_schema: ADK's input_schema is a pydantic model class"#
        ),
        "{found}"
    );
}

#[test]
fn a_python_interpreter_without_the_worker_is_an_error_naming_the_field() {
    let (_dir, app) = python_app(
        &format!("{HEAD}tools:\n  - name: shop.tools.add_item\n"),
        &[("shop/tools.py", SHOP_TOOLS)],
    );
    let found = match AgentsConfig::load_with_python(&app, Path::new("/nonexistent/python3")) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    assert!(
        found.contains(r#"field "tools[0]": cannot start the Python worker with /nonexistent/python3"#),
        "{found}"
    );
}

#[test]
fn agent_classes_beyond_the_four_are_refused() {
    let custom = app("agent_class: my_lib.agents.Custom\nname: c\n", &[]);
    assert_problem(
        custom.path(),
        r#"root_agent.yaml, agent "c": field "agent_class": "my_lib.agents.Custom" is a Python class"#,
    );
    let remote = app("agent_class: RemoteA2aAgent\nname: r\n", &[]);
    assert_problem(
        remote.path(),
        r#"root_agent.yaml, agent "r": field "agent_class": ADK's "RemoteA2aAgent" is not supported"#,
    );
}

#[test]
fn tools_the_suite_does_not_have_are_refused() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: enterprise_web_search\n  - name: exit_loop\n    args: {{a: 1}}\n  - transfer_to_agent\n"
        ),
        &[],
    );
    let d = dir.path();
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[0]": ADK's tool "enterprise_web_search" is not offered here (built in: exit_loop"#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[1].args": the built-in exit_loop takes no args"#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[2]": transfer_to_agent is given to an agent with sub_agents"#,
    );
}

#[test]
fn an_openapi_toolset_points_to_the_agents_files_openapi_tools() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: google.adk.tools.openapi_tool.OpenAPIToolset\n    args: {{spec_str: '{{}}'}}\n  - OpenAPIToolset\n"
        ),
        &[],
    );
    for i in 0..2 {
        assert_problem(
            dir.path(),
            &format!(
                r#"root_agent.yaml, agent "assistant": field "tools[{i}]": ADK builds an OpenAPIToolset in Python code only (its YAML loader refuses it too): declare the spec as a tool of kind: openapi"#
            ),
        );
    }
}

#[test]
fn an_mcp_toolset_is_a_declared_mcp_tool() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: McpToolset\n    args:\n      stdio_connection_params:\n        \
             server_params: {{command: python3, args: [notes.py], env: {{NOTES: /tmp}}, cwd: /tmp}}\n        \
             timeout: 2.5\n      tool_filter: [save_note]\n      tool_name_prefix: notes\n  \
             - name: google.adk.tools.mcp_tool.MCPToolset\n    args:\n      streamable_http_connection_params:\n        \
             {{url: 'http://127.0.0.1:9/mcp', sse_read_timeout: 30}}\n      use_mcp_resources: true\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let agent = &spec.apps[&agent_dir_name(dir.path())].root_agent;
    assert_eq!(agent.tools, ["mcp_toolset_1", "mcp_toolset_2"]);
    let Some(ToolConfig::Mcp(stdio)) = spec.tools.get("mcp_toolset_1") else {
        panic!("{:?}", spec.tools)
    };
    assert_eq!(stdio.transport, Some(super::file::McpTransportKind::Stdio));
    assert_eq!(
        (
            stdio.command.as_deref(),
            stdio.args.as_slice(),
            stdio.working_dir.as_deref()
        ),
        (Some("python3"), ["notes.py".to_string()].as_slice(), Some("/tmp"))
    );
    assert_eq!(stdio.env["NOTES"], "/tmp");
    assert_eq!(stdio.connect_timeout_secs, Some(3));
    assert_eq!(stdio.tool_filter.as_deref(), Some(["save_note".to_string()].as_slice()));
    assert_eq!(stdio.tool_prefix.as_deref(), Some("notes"));
    let Some(ToolConfig::Mcp(http)) = spec.tools.get("mcp_toolset_2") else {
        panic!("{:?}", spec.tools)
    };
    assert_eq!(http.transport, Some(super::file::McpTransportKind::Http));
    assert_eq!(http.url.as_deref(), Some("http://127.0.0.1:9/mcp"));
    assert_eq!((http.timeout_secs, http.use_mcp_resources), (Some(30), Some(true)));
    // And the agents file's rules build them.
    built_with_mocks(dir.path());
}

#[test]
fn an_mcp_toolset_the_runner_cannot_connect_as_written_is_refused() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: McpToolset\n    args:\n      sse_connection_params: {{url: 'http://h/sse'}}\n  \
             - name: McpToolset\n    args:\n      streamable_http_connection_params: {{url: 'http://h/mcp', \
             headers: {{x-key: secret}}}}\n  - name: McpToolset\n    args: {{tool_filter: [a]}}\n"
        ),
        &[],
    );
    let d = dir.path();
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[0].args.sse_connection_params": MCP's SSE transport (which MCP deprecated) is not offered"#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[1].args.streamable_http_connection_params.headers": not supported yet: headers written in the YAML"#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "tools[2].args": exactly one of stdio_server_params"#,
    );
}

#[test]
fn google_maps_grounding_is_a_built_in_tool() {
    let dir = app(&format!("{HEAD}tools:\n  - google_maps_grounding\n"), &[]);
    let spec = translated(dir.path());
    assert_eq!(
        spec.apps[&agent_dir_name(dir.path())].root_agent.tools,
        ["google_maps_grounding"]
    );
    built_with_mocks(dir.path());
}

/// The app a directory holding root_agent.yaml is: named after the directory.
fn agent_dir_name(dir: &Path) -> String {
    dir.file_name().expect("a name").to_string_lossy().into_owned()
}

#[test]
fn an_agent_tool_is_a_sub_agent_called_as_a_tool() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: AgentTool\n    args:\n      agent:\n        config_path: researcher.yaml\n\
             \x20     skip_summarization: false\n"
        ),
        &[(
            "researcher.yaml",
            "name: researcher\nmodel: gemini-2.5-flash\ndescription: Looks things up.\ninstruction: Research.\n",
        )],
    );
    let file = translated(dir.path());
    let root = &file.apps.values().next().expect("one app").root_agent;
    assert_eq!(root.sub_agents.len(), 1);
    assert_eq!(root.sub_agents[0].name, "researcher");
    assert!(root.sub_agents[0].as_tool);
    built_with_mocks(dir.path());

    let summarized = app(
        &format!(
            "{HEAD}tools:\n  - name: AgentTool\n    args: {{agent: {{config_path: r.yaml}}, skip_summarization: true}}\n"
        ),
        &[("r.yaml", "name: r\nmodel: gemini-2.5-flash\n")],
    );
    assert_problem(
        summarized.path(),
        r#"root_agent.yaml, agent "assistant": field "tools[0].args.skip_summarization": not supported yet"#,
    );
}

#[test]
fn a_sub_agents_mode_maps_to_the_agents_file() {
    let dir = app(
        &format!("{HEAD}sub_agents:\n  - config_path: intake.yaml\n  - config_path: summary.yaml\n"),
        &[
            (
                "intake.yaml",
                "name: intake\ndescription: Asks.\ninstruction: Ask.\nmode: task\n",
            ),
            (
                "summary.yaml",
                "name: summary\ninstruction: Sum up.\nmode: single_turn\n",
            ),
        ],
    );
    let file = translated(dir.path());
    let root = &file.apps.values().next().expect("one app").root_agent;
    let modes: Vec<_> = root.sub_agents.iter().map(|sub| sub.mode).collect();
    assert_eq!(modes, [Some(Mode::Task), Some(Mode::SingleTurn)]);
    let built = built_with_mocks(dir.path());
    let subs: Vec<&str> = built.apps[0]
        .description
        .sub_agents
        .iter()
        .map(|sub| sub.name.as_str())
        .collect();
    assert_eq!(subs, ["intake", "summary"]);

    let root_task = app_dir_with_root_mode();
    assert_problem(
        root_task.path(),
        r#"root_agent.yaml, agent "assistant": field "mode": the root agent has no parent to call it (task)"#,
    );
}

fn app_dir_with_root_mode() -> tempfile::TempDir {
    app(&format!("{HEAD}mode: task\n"), &[])
}

#[test]
fn instructions_and_transfer_fields_map_to_the_agents_file() {
    let dir = app(
        &format!(
            "{HEAD}static_instruction: You are a desk.\nglobal_instruction: Be polite.\n\
             disallow_transfer_to_parent: false\ndisallow_transfer_to_peers: true\n"
        ),
        &[],
    );
    let file = translated(dir.path());
    let root = &file.apps.values().next().expect("one app").root_agent;
    assert_eq!(
        root.static_instruction,
        Some(StaticInstructionConfig::Text("You are a desk.".into()))
    );
    assert_eq!(root.global_instruction.as_deref(), Some("Be polite."));
    assert!(!root.disallow_transfer_to_parent && root.disallow_transfer_to_peers);
    built_with_mocks(dir.path());
}

#[test]
fn fields_not_supported_yet_are_refused_never_dropped() {
    let dir = app(
        &format!(
            "{HEAD}mode: delegate\n\
             generate_content_config:\n  temperature: 0.5\n  audio_timestamp: true\n  thinking_config: {{thinking_level: EXTREME}}\n\
             output_schema: null\n"
        ),
        &[],
    );
    let d = dir.path();
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "mode": "delegate" is none of "chat", "task" and "single_turn""#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "generate_content_config.audio_timestamp": not offered: Vertex AI only"#,
    );
    assert_problem(
        d,
        r#"root_agent.yaml, agent "assistant": field "generate_content_config.thinking_config.thinking_level": "EXTREME" is not supported yet"#,
    );
    // A key set to null is a key left out.
    assert!(!problems(d).iter().any(|p| p.contains("output_schema")));
    assert_eq!(problems(d).len(), 4, "3 problems and the count: {:#?}", problems(d));
}

#[test]
fn an_example_tool_becomes_the_agents_examples() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: ExampleTool\n    args:\n      examples:\n\
             \x20       - input: {{role: user, parts: [{{text: What is 2+2?}}]}}\n\
             \x20         output: [{{role: model, parts: [{{text: Four.}}]}}]\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("one app").root_agent;
    let examples: Vec<(&str, &str)> = root
        .examples
        .iter()
        .map(|e| (e.input.as_str(), e.output.as_str()))
        .collect();
    assert_eq!(examples, [("What is 2+2?", "Four.")]);
    assert!(root.tools.is_empty(), "{:?}", root.tools);
    built_with_mocks(dir.path());

    let calls = app(
        &format!(
            "{HEAD}tools:\n  - name: ExampleTool\n    args:\n      examples:\n\
             \x20       - input: {{parts: [{{text: Weather?}}]}}\n\
             \x20         output: [{{role: model, parts: [{{function_call: {{name: weather, args: {{}}}}}}]}}]\n\
             \x20 - name: ExampleTool\n    args: {{examples: my_lib.examples.provider}}\n"
        ),
        &[],
    );
    assert_problem(
        calls.path(),
        r#"root_agent.yaml, agent "assistant": field "tools[0].args.examples[0].output[0]": not supported yet: an example here is text"#,
    );
    assert_problem(
        calls.path(),
        r#"root_agent.yaml, agent "assistant": field "tools[1].args.examples": a BaseExampleProvider (a code reference)"#,
    );
}

#[test]
fn model_strings_without_a_mapped_provider_are_refused() {
    let dir = app("name: a\nmodel: claude-3-5-sonnet\ninstruction: Hi.\n", &[]);
    assert_problem(
        dir.path(),
        r#"root_agent.yaml, model "claude-3-5-sonnet": field "model": the model string "claude-3-5-sonnet" names no provider the suite maps"#,
    );
    let none = app("name: a\ninstruction: Hi.\n", &[]);
    assert_problem(
        none.path(),
        r#"root_agent.yaml, agent "a": field "model": an llm agent needs a model, its own or an llm agent's above it"#,
    );
}

#[test]
fn sub_agent_paths_stay_inside_and_form_a_tree() {
    let outside = app(&format!("{HEAD}sub_agents:\n  - config_path: ../elsewhere.yaml\n"), &[]);
    assert_problem(
        outside.path(),
        r#"root_agent.yaml, agent "assistant": field "sub_agents[0].config_path": "../elsewhere.yaml" must be a relative path inside this file's directory"#,
    );
    let cycle = app(
        &format!("{HEAD}sub_agents:\n  - config_path: a.yaml\n"),
        &[("a.yaml", "name: a\ninstruction: A.\nsub_agents: [root_agent.yaml]\n")],
    );
    assert_problem(
        cycle.path(),
        r#"a.yaml, agent "a": field "sub_agents[0]": config_path "root_agent.yaml" leads back to a file above it"#,
    );
    let missing = app(&format!("{HEAD}sub_agents:\n  - config_path: gone.yaml\n"), &[]);
    assert_problem(missing.path(), "gone.yaml: cannot read the agent config");
}

#[test]
fn the_agents_file_rules_name_the_yaml_and_adk_field() {
    let dir = app(
        "agent_class: LoopAgent\nname: loop\nmax_iterations: 0\nsub_agents: [w.yaml]\n",
        &[(
            "w.yaml",
            "name: w\nmodel: gemini-2.5-flash\ninstruction: W.\ngenerate_content_config: {max_output_tokens: 0}\n",
        )],
    );
    let d = dir.path();
    assert_problem(
        d,
        r#"root_agent.yaml, agent "loop": field "max_iterations": must be at least 1"#,
    );
    assert_problem(
        d,
        r#"w.yaml, agent "w": field "generate_content_config": max_output_tokens must be at least 1"#,
    );
}

#[test]
fn two_files_with_one_agent_name_are_refused_naming_both() {
    let dir = app(
        "agent_class: ParallelAgent\nname: p\nsub_agents: [w.yaml, again/w.yaml]\n",
        &[
            ("w.yaml", "name: w\nmodel: gemini-2.5-flash\ninstruction: W.\n"),
            (
                "again/w.yaml",
                "name: w\nmodel: gemini-2.5-flash\ninstruction: W again.\n",
            ),
        ],
    );
    assert_problem(
        dir.path(),
        r#"again/w.yaml, agent "w": field "name": w.yaml, agent "w" has the same name"#,
    );
}

#[test]
fn schemas_and_generation_settings_map_to_the_agents_file() {
    let dir = app(
        "name: extractor\nmodel: gemini-2.5-flash\ninstruction: Extract.\noutput_key: person\n\
         output_schema: {type: object, properties: {name: {type: string}}, required: [name]}\n\
         generate_content_config:\n  topK: 5\n  seed: 7\n  response_mime_type: application/json\n\
         \x20 safety_settings: [{category: HARM_CATEGORY_HATE_SPEECH, threshold: BLOCK_NONE}]\n\
         \x20 thinking_config: {include_thoughts: true, thinking_level: HIGH}\n\
         \x20 candidateCount: 1\n  responseLogprobs: true\n  logprobs: 4\n  media_resolution: MEDIA_RESOLUTION_LOW\n\
         \x20 cachedContent: cachedContents/c1\n  response_modalities: [TEXT]\n",
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    assert_eq!(
        root.output_schema.as_ref().map(|s| s["required"].clone()),
        Some(json!(["name"]))
    );
    let generation = root.generation.as_ref().expect("generation");
    assert_eq!((generation.top_k, generation.seed), (Some(5), Some(7)));
    assert_eq!(generation.response_mime_type.as_deref(), Some("application/json"));
    assert_eq!(generation.safety_settings[0]["threshold"], "BLOCK_NONE");
    assert_eq!(
        (
            generation.candidate_count,
            generation.response_logprobs,
            generation.logprobs
        ),
        (Some(1), Some(true), Some(4))
    );
    assert_eq!(generation.media_resolution.as_deref(), Some("MEDIA_RESOLUTION_LOW"));
    assert_eq!(generation.cached_content.as_deref(), Some("cachedContents/c1"));
    assert_eq!(generation.response_modalities, ["TEXT"]);
    let thinking = generation.thinking.as_ref().expect("thinking");
    assert_eq!(
        (thinking.budget_tokens, thinking.include_thoughts, thinking.effort),
        (None, Some(true), Some(adk_grpc_core::ThinkingEffort::High))
    );
    built_with_mocks(dir.path());

    let budget = app(
        "name: a\nmodel: gemini-2.5-flash\ninstruction: A.\ngenerate_content_config: {thinkingConfig: {thinkingBudget: 128}}\n",
        &[],
    );
    let spec = translated(budget.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    let thinking = root
        .generation
        .as_ref()
        .and_then(|g| g.thinking.as_ref())
        .expect("thinking");
    assert_eq!(thinking.budget_tokens, Some(128));
}

#[test]
fn tool_image_speech_and_serving_settings_map_and_labels_are_dropped_as_adk_drops_them() {
    let dir = app(
        &format!(
            "{HEAD}generate_content_config:\n\
             \x20 toolConfig: {{functionCallingConfig: {{mode: any, allowedFunctionNames: [lookup]}}}}\n\
             \x20 image_config: {{aspectRatio: '16:9', image_size: 1K}}\n\
             \x20 speechConfig: Kore\n\
             \x20 audio_transcription_config: {{}}\n\
             \x20 labels: {{team: library}}\n\
             \x20 service_tier: flex\n\
             \x20 store: false\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    let generation = root.generation.as_ref().expect("generation");
    let sent = adk_grpc_core::GenerateContentConfig::from(generation);
    let calling = sent
        .tool_config
        .and_then(|t| t.function_calling_config)
        .expect("function_calling_config");
    assert_eq!(
        (calling.mode, calling.allowed_function_names),
        (
            Some(adk_grpc_core::FunctionCallingMode::Any),
            Some(vec!["lookup".to_string()])
        )
    );
    let image = sent.image_config.expect("image_config");
    assert_eq!(
        (image.aspect_ratio.as_deref(), image.image_size.as_deref()),
        (Some("16:9"), Some("1K"))
    );
    // A voice name, as google-genai makes it a SpeechConfig and writes it.
    assert_eq!(
        sent.speech_config,
        Some(json!({"voice_config": {"prebuilt_voice_config": {"voice_name": "Kore"}}}))
    );
    assert_eq!(sent.audio_transcription_config, Some(json!({})));
    assert_eq!((sent.service_tier.as_deref(), sent.store), (Some("flex"), Some(false)));
    built_with_mocks(dir.path());

    // Written in camelCase, sent in google-genai's snake_case.
    let camel = app(
        &format!(
            "{HEAD}generate_content_config:\n  speech_config: {{voiceConfig: {{prebuiltVoiceConfig: {{voiceName: Puck}}}}, languageCode: en-US}}\n"
        ),
        &[],
    );
    let spec = translated(camel.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    let sent = adk_grpc_core::GenerateContentConfig::from(root.generation.as_ref().expect("generation"));
    assert_eq!(
        sent.speech_config,
        Some(json!({"voice_config": {"prebuilt_voice_config": {"voice_name": "Puck"}}, "language_code": "en-US"}))
    );

    // What google-genai refuses on the Gemini API is refused here, with its reason.
    let vertex = app(
        &format!(
            "{HEAD}generate_content_config:\n  image_config: {{aspect_ratio: '1:1', person_generation: ALLOW_ALL}}\n  labels: [a]\n"
        ),
        &[],
    );
    assert_problem(
        vertex.path(),
        r#"root_agent.yaml, agent "assistant": field "generate_content_config.image_config.person_generation": Vertex AI only"#,
    );
    assert_problem(
        vertex.path(),
        r#"root_agent.yaml, agent "assistant": field "generate_content_config.labels": must be a mapping"#,
    );
}

#[test]
fn a_static_instruction_takes_adks_content_forms() {
    let dir = app(
        &format!(
            "{HEAD}static_instruction:\n  role: user\n  parts:\n\
             \x20   - text: You guide.\n\
             \x20   - inlineData: {{mimeType: image/png, data: cG5n, displayName: plan.png}}\n\
             \x20   - file_data: {{file_uri: 'https://example.com/a.jpg', mime_type: image/jpeg}}\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    let config = root.static_instruction.as_ref().expect("static_instruction");
    assert_eq!(
        StaticInstruction::try_from(config).expect("parts").parts(),
        [
            StaticPart::Text("You guide.".into()),
            StaticPart::InlineData {
                mime_type: "image/png".into(),
                data: b"png".to_vec(),
                display_name: Some("plan.png".into()),
            },
            StaticPart::FileData {
                mime_type: "image/jpeg".into(),
                file_uri: "https://example.com/a.jpg".into(),
                display_name: None,
            },
        ]
    );
    built_with_mocks(dir.path());

    // A list of parts, and a text among them as a bare string.
    let list = app(
        &format!("{HEAD}static_instruction: [Be kind., {{text: Be brief.}}]\n"),
        &[],
    );
    let spec = translated(list.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    let config = root.static_instruction.as_ref().expect("static_instruction");
    assert_eq!(
        StaticInstruction::try_from(config).expect("parts").parts(),
        [
            StaticPart::Text("Be kind.".into()),
            StaticPart::Text("Be brief.".into())
        ]
    );

    let bad = app(
        &format!("{HEAD}static_instruction: {{inline_data: {{mime_type: image/png, data: '***'}}}}\n"),
        &[],
    );
    let (mut spec, origins) = adk_config::read(bad.path(), Path::new("python3")).unwrap_or_else(|e| panic!("{e}"));
    for provider in spec.models.values_mut() {
        *provider = json!({ "provider": "mock" });
    }
    let refused = match AgentsConfig::check("adk", &spec, Some(&origins)) {
        Ok(_) => panic!("data that is not base64 is refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        refused.contains("static_instruction.parts[0]: inline_data.data is not base64"),
        "{refused}"
    );
}

#[test]
fn a_state_schema_mapping_maps_and_a_class_is_refused() {
    let dir = app(
        &format!("{HEAD}state_schema: {{type: object, properties: {{city: {{type: string}}}}}}\n"),
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    assert_eq!(
        root.state_schema
            .as_ref()
            .map(|s| s["properties"]["city"]["type"].clone()),
        Some(json!("string"))
    );
    built_with_mocks(dir.path());
    let dir = app(&format!("{HEAD}state_schema: my_lib.State\n"), &[]);
    assert_problem(
        dir.path(),
        r#"root_agent.yaml, agent "assistant": field "state_schema": a Python class (a code reference)"#,
    );
}

/// The declared model_consult tool `name` of `spec`.
#[track_caller]
fn consult<'a>(spec: &'a AgentsFile, name: &str) -> &'a ModelConsultToolConfig {
    match &spec.tools[name] {
        ToolConfig::ModelConsult(tool) => tool,
        other => panic!("{name} is not a model_consult tool: {other:?}"),
    }
}

#[test]
fn a_model_consult_tool_is_a_declared_model_consult_tool_with_its_advisor() {
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{model: gemini-2.5-pro, max_uses: 2, \
             session_max_uses: 5, timeout_seconds: 1.5}}\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let root = &spec.apps.values().next().expect("an app").root_agent;
    assert_eq!(root.tools, ["model_consult"]);
    let tool = consult(&spec, "model_consult");
    assert_eq!(
        (
            tool.advisor.as_deref(),
            tool.max_uses,
            tool.session_max_uses,
            tool.timeout_secs
        ),
        (Some("gemini-2.5-pro"), Some(2), Some(5), Some(2))
    );
    assert!(spec.models.contains_key("gemini-2.5-pro"), "{:?}", spec.models.keys());
    built_with_mocks(dir.path());

    // ADK's default advisor when `model` is left out; a name of its own.
    let dir = app(
        &format!("{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{name: ask_senior}}\n"),
        &[],
    );
    let spec = translated(dir.path());
    assert_eq!(
        consult(&spec, "ask_senior").advisor.as_deref(),
        Some("gemini-3.1-pro-preview")
    );

    // ADK's thinking level is "high" unless given; `null` turns it off.
    assert_eq!(consult(&spec, "ask_senior").thinking_level.as_deref(), Some("high"));
    let dir = app(
        &format!("{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{thinking_level: null}}\n"),
        &[],
    );
    assert_eq!(
        consult(&translated(dir.path()), "model_consult")
            .thinking_level
            .as_deref(),
        Some("off")
    );

    // Every other arg, as the agents file's fields of the same names.
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: ModelConsultTool\n    args:\n      thinking_level: LOW\n      \
             max_output_tokens: 300\n      executor_instruction: Ask first.\n      advisor_instruction: Review.\n      \
             include_agent_instruction: false\n      include_tool_inventory: false\n      \
             context_config: {{max_events: 4, max_chars: null, include_thoughts: true}}\n      \
             generate_content_config: {{temperature: 0.2, topK: 5, thinking_config: {{include_thoughts: true}}}}\n"
        ),
        &[],
    );
    let spec = translated(dir.path());
    let tool = consult(&spec, "model_consult");
    assert_eq!(tool.thinking_level.as_deref(), Some("LOW"));
    assert_eq!(tool.max_output_tokens, Some(300));
    assert_eq!(
        (
            tool.executor_instruction.as_deref(),
            tool.advisor_instruction.as_deref()
        ),
        (Some("Ask first."), Some("Review."))
    );
    assert_eq!(
        (tool.include_agent_instruction, tool.include_tool_inventory),
        (Some(false), Some(false))
    );
    let context = tool.context_config.as_ref().expect("context_config");
    assert_eq!(
        (context.max_events, context.max_chars, context.include_thoughts),
        (Some(4), Some(None), Some(true))
    );
    let generation = tool.generate_content_config.as_ref().expect("generate_content_config");
    assert_eq!((generation.temperature, generation.top_k), (Some(0.2), Some(5)));
    assert_eq!(
        generation.thinking.as_ref().and_then(|t| t.include_thoughts),
        Some(true)
    );
    built_with_mocks(dir.path());

    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{max_uses: 0, max_output_tokens: 0, \
             include_tool_inventory: maybe, context_config: {{max_tokens: 3}}, \
             generate_content_config: {{tools: [], top_k: 0}}, thinking_level: extreme, project: p}}\n"
        ),
        &[],
    );
    let d = dir.path();
    for expected in [
        r#"field "tools[0].args.max_uses": must be a whole number, at least 1"#,
        r#"field "tools[0].args.max_output_tokens": must be a whole number, at least 1"#,
        r#"field "tools[0].args.include_tool_inventory": must be true or false"#,
        r#"field "tools[0].args.context_config.max_tokens": not a field of ModelConsultContextConfig"#,
        r#"field "tools[0].args.generate_content_config.tools": not offered: ADK refuses it too"#,
        r#"field "tools[0].args.project": not an argument of ADK's ModelConsultTool"#,
    ] {
        assert_problem(d, &format!(r#"root_agent.yaml, agent "assistant": {expected}"#));
    }
    // The agents file's rules, on the translation: a level it does not know, a top_k of 0.
    let dir = app(
        &format!(
            "{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{thinking_level: extreme, \
             generate_content_config: {{top_k: 0}}}}\n"
        ),
        &[],
    );
    let found = problems(dir.path());
    let expected = r#"field "thinking_level": "extreme" is not one of minimal, low, medium, high, off"#;
    assert!(found.iter().any(|p| p.contains(expected)), "{expected}: {found:#?}");
    // The agents' generation rules run once the app's advisor is built (mocks here).
    let dir = app(
        &format!("{HEAD}tools:\n  - name: ModelConsultTool\n    args: {{generate_content_config: {{top_k: 0}}}}\n"),
        &[],
    );
    let (mut spec, origins) = adk_config::read(dir.path(), Path::new("python3")).unwrap_or_else(|e| panic!("{e}"));
    for provider in spec.models.values_mut() {
        *provider = json!({ "provider": "mock" });
    }
    let Err(refused) = AgentsConfig::check("adk", &spec, Some(&origins)) else {
        panic!("a top_k of 0 is refused");
    };
    let refused = refused.to_string();
    assert!(
        refused.contains(r#"tool "model_consult": field "generate_content_config.top_k": must be at least 1"#),
        "{refused}"
    );
}
