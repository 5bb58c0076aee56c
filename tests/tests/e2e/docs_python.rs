//! Runs the Python blocks of the README and `docs/` as their readers would run them, so
//! the examples cannot rot (an MCP example once failed as written: its `mcp` API had
//! changed under it).
//!
//! Every ```` ```python ```` block is marked on the line before it with
//! `<!-- docs-python: KIND (why) -->`; KIND says how the tests run it:
//! - `mcp-server`: an MCP server over stdio, served by `adk-server` as the `notes` toolset
//!   of docs/tools.md (the Python with the `mcp` package of scripts/setup-mcp.sh), whose
//!   `save_note` a model calls: the state and the artifact it writes must land;
//! - `hook-server`: an HTTP hook on 127.0.0.1:9000 (moved to a free port), the
//!   `before_tool` guard of a runner's `transfer` tool: the frozen account's transfer
//!   must be refused without the tool running;
//! - `a2a-client`: an A2A client of `adk-server --agents examples/agents.yaml` whose
//!   agent cards are on 127.0.0.1:9464 (moved to a free port), run with the a2a-sdk of
//!   scripts/setup-python.sh: it must get the agent's answer.
//!
//! A block without a mark, or of another kind, fails the test rather than going unrun.

use super::mcp::{fastmcp, response, responses};
use super::tool_context::{adk_server, load_artifact_text, state_of};
use adk_grpc_e2e::runs::{self, user_text};
use adk_grpc_models::testing::{FakeServer, openai};
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_testkit::{ChildGuard, free_port, venv_python, wait_for_port};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const USER: &str = "alice";
const MARK: &str = "<!-- docs-python:";
const KINDS: [&str; 3] = ["mcp-server", "hook-server", "a2a-client"];

#[derive(Debug)]
struct Block {
    /// `docs/tools.md:104`, where the fence opens.
    place: String,
    /// The mark's KIND, or the line before the fence when it is no mark.
    kind: String,
    code: String,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every markdown file of the repository's root and `docs/`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [root.to_path_buf(), root.join("docs")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    files.sort();
    files
}

fn python_blocks_of(shown: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        if lines[index].trim() != "```python" {
            index += 1;
            continue;
        }
        let before = if index == 0 { "" } else { lines[index - 1].trim() };
        let kind = match before.strip_prefix(MARK) {
            Some(rest) => rest.split_whitespace().next().unwrap_or_default().to_string(),
            None => format!("unmarked ({before:?} before it)"),
        };
        let end = (index + 1..lines.len())
            .find(|&i| lines[i].trim() == "```")
            .unwrap_or_else(|| panic!("{shown}:{}: the python block never closes", index + 1));
        blocks.push(Block {
            place: format!("{shown}:{}", index + 1),
            kind,
            code: lines[index + 1..end].join("\n") + "\n",
        });
        index = end + 1;
    }
    blocks
}

fn python_blocks() -> Vec<Block> {
    let root = repo_root();
    markdown_files(&root)
        .iter()
        .flat_map(|path| {
            let shown = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{shown}: {e}"));
            python_blocks_of(&shown, &text)
        })
        .collect()
}

/// The blocks of `kind`, at least one.
fn blocks_of(kind: &str) -> Vec<Block> {
    let found: Vec<Block> = python_blocks().into_iter().filter(|block| block.kind == kind).collect();
    assert!(!found.is_empty(), "no python block of the docs is marked {kind}");
    found
}

/// `block`'s code in a file of `dir`, with `replacements` made; panics naming the block
/// when one of them is not in it (the doc changed: change the test with it).
fn write_block(dir: &Path, block: &Block, file: &str, replacements: &[(&str, String)]) -> PathBuf {
    let mut code = block.code.clone();
    for (from, to) in replacements {
        assert!(
            code.contains(from),
            "{}: the block no longer holds {from:?}",
            block.place
        );
        code = code.replace(from, to);
    }
    let path = dir.join(file);
    std::fs::write(&path, code).expect("write the block");
    path
}

#[test]
fn every_python_block_of_the_docs_is_marked_with_a_kind_the_tests_run() {
    let blocks = python_blocks();
    let unknown: Vec<String> = blocks
        .iter()
        .filter(|block| !KINDS.contains(&block.kind.as_str()))
        .map(|block| format!("{}: {}", block.place, block.kind))
        .collect();
    assert!(
        unknown.is_empty(),
        "python blocks the tests do not run (mark each `{MARK} KIND (why) -->`, KIND one of {KINDS:?}, \
         or add a kind to tests/tests/e2e/docs_python.rs):\n{}",
        unknown.join("\n")
    );
    for kind in KINDS {
        assert!(
            blocks.iter().any(|block| block.kind == kind),
            "no block is marked {kind}: did the parsing break? {blocks:#?}"
        );
    }
}

#[test]
fn the_block_parser_reads_marks_and_code() {
    let text = "<!-- docs-python: mcp-server (why) -->\n```python\nprint(1)\n```\n\n```python\nx = 2\n```\n";
    let blocks = python_blocks_of("t.md", text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        (blocks[0].place.as_str(), blocks[0].kind.as_str()),
        ("t.md:2", "mcp-server")
    );
    assert_eq!(blocks[0].code, "print(1)\n");
    assert!(blocks[1].kind.starts_with("unmarked"), "{:?}", blocks[1]);
    assert_eq!(blocks[1].code, "x = 2\n");
}

/// The MCP server of docs/tools.md, as written, is the `notes` toolset of a runner (with
/// the `context:` it declares there): the state and the artifact its actions ask for land.
#[tokio::test]
async fn the_mcp_server_of_the_docs_writes_state_and_an_artifact_through_the_runner() {
    for block in blocks_of("mcp-server") {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = write_block(dir.path(), &block, "notes_server.py", &[]);
        let provider = FakeServer::start().await;
        let agents = runs::agents_file(&format!(
            "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
tools:
  notes:
    kind: mcp
    transport: stdio
    command: '{python}'
    args: ['{script}']
    connect_timeout_secs: 60
    context: {{ state: [user:theme] }}
apps:
  demo:
    root_agent: {{ name: helper, model: gpt, tools: [notes] }}
",
            provider = provider.url(),
            python = fastmcp().0,
            script = script.display(),
        ));
        let server = adk_server("memory://", &agents).await;
        provider.push(openai::tool_calls(&[(
            "call_1",
            "save_note",
            json!({"text": "Buy milk"}),
        )]));
        provider.push(openai::text("Saved."));

        let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
        let request = runs::run_request("demo", USER, "s1", user_text("Note: buy milk"));
        let (events, failure) = runs::run_to_end(&mut client, request).await;
        assert!(
            failure.is_none(),
            "{}: {failure:?}\n{}",
            block.place,
            server.tail_log(40)
        );
        let all = responses(&events);
        assert_eq!(
            response(&all, "save_note"),
            &json!({"text": "saved"}),
            "{}",
            block.place
        );

        let session = runs::get_session(server.endpoint(), "demo", USER, "s1").await;
        assert_eq!(state_of(&session)["user:note_by"], "helper", "{}", block.place);
        let note = load_artifact_text(server.endpoint(), "demo", "s1", "note.txt").await;
        assert_eq!(note, ("Buy milk".to_string(), 1), "{}", block.place);
    }
}

/// The guardrail of docs/hooks.md, as written but on a free port, is the `before_tool`
/// hook of a runner's `transfer` tool: the frozen account's call is answered with its
/// refusal and the tool (an endpoint nobody listens on) is never called; another
/// account's call gets past it to the tool.
#[tokio::test]
async fn the_hook_of_the_docs_refuses_a_frozen_accounts_transfer() {
    for block in blocks_of("hook-server") {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let script = write_block(dir.path(), &block, "guard.py", &[("9000", port.to_string())]);
        let mut command = Command::new(venv_python());
        command.arg(&script);
        let _guard = ChildGuard::spawn(command, dir.path().join("guard.log")).expect("start the guard");
        assert!(
            wait_for_port(port, Duration::from_secs(30)).await,
            "{}: the guard did not listen",
            block.place
        );
        let provider = FakeServer::start().await;
        let agents = runs::agents_file(&format!(
            "
models:
  gpt: {{ provider: openai, model: fake-model, base_url: '{provider}', api_key_env: E2E_OPENAI_KEY }}
hooks:
  guard: {{ url: 'http://127.0.0.1:{port}/guard', points: [before_tool], on_failure: fail_closed }}
tools:
  transfer:
    kind: http
    url: 'http://127.0.0.1:{closed}/transfer'
    description: Moves money.
apps:
  bank:
    root_agent: {{ name: teller, model: gpt, tools: [transfer], hooks: [guard] }}
",
            provider = provider.url(),
            closed = free_port(),
        ));
        let server = adk_server("memory://", &agents).await;
        provider.push(openai::tool_calls(&[
            ("c1", "transfer", json!({"account": "frozen", "amount": 100})),
            ("c2", "transfer", json!({"account": "main", "amount": 5})),
        ]));
        provider.push(openai::text("One transfer was refused."));

        let mut client = AgentRunnerClient::connect(server.endpoint()).await.expect("connect");
        let request = runs::run_request("bank", USER, "b1", user_text("Move my money"));
        let (events, failure) = runs::run_to_end(&mut client, request).await;
        assert!(
            failure.is_none(),
            "{}: {failure:?}\n{}",
            block.place,
            server.tail_log(40)
        );
        let transfers: Vec<String> = responses(&events)
            .into_iter()
            .filter(|(name, _)| name == "transfer")
            .map(|(_, answer)| answer["error"].as_str().unwrap_or_default().to_string())
            .collect();
        // The frozen account's call is answered by the guard; the other reached the tool,
        // whose endpoint is closed.
        let refused = "refused: the account is frozen";
        assert_eq!(transfers.len(), 2, "{}: {transfers:?}", block.place);
        assert_eq!(
            transfers.iter().filter(|error| *error == refused).count(),
            1,
            "{}: {transfers:?}",
            block.place
        );
        assert!(
            transfers.iter().any(|error| !error.is_empty() && error != refused),
            "{}: {transfers:?}",
            block.place
        );
    }
}

/// The A2A client of docs/a2a.md, as written but with the server's ports, gets the
/// example assistant's answer from `adk-server --agents examples/agents.yaml`.
#[tokio::test]
async fn the_a2a_client_of_the_docs_gets_the_agents_answer() {
    for block in blocks_of("a2a-client") {
        let dir = tempfile::tempdir().expect("temp dir");
        let agents = repo_root().join("examples/agents.yaml");
        let (server, metrics) =
            runs::spawn_with_metrics("adk-server", &["--agents".to_string(), agents.display().to_string()]).await;
        let script = write_block(
            dir.path(),
            &block,
            "a2a_client.py",
            &[("127.0.0.1:9464", format!("127.0.0.1:{metrics}"))],
        );
        let output = tokio::process::Command::new(venv_python()).arg(&script).output();
        let output = tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .unwrap_or_else(|_| panic!("{}: the client ran for more than 60 s", block.place))
            .expect("run the client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{}: {}\n{stdout}\n{stderr}\n{}",
            block.place,
            output.status,
            server.tail_log(20)
        );
        assert!(stdout.contains("You said: Hi"), "{}: {stdout}", block.place);
    }
}
