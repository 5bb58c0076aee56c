//! A Python HTTP server of the tests (tests/tools/context_tools.py, tests/hooks/hooks.py):
//! tools and hooks written as their users would write them, on Python's standard
//! library, each call they get recorded as one JSON line so tests can count calls and
//! read what each was sent.

use adk_grpc_testkit::{ChildGuard, free_port, venv_python, wait_for_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct ScriptServer {
    _process: ChildGuard,
    pub url: String,
    calls: PathBuf,
}

impl ScriptServer {
    /// Starts `script` (a path under `tests/`) with `--port` and `--calls` on a free
    /// port; its log and calls go to `dir`.
    pub async fn start(script: &str, dir: &Path) -> ScriptServer {
        let port = free_port();
        let calls = dir.join(format!("{}.calls.jsonl", script.replace('/', "_")));
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script);
        let mut command = Command::new(venv_python());
        command
            .arg(path)
            .args(["--port", &port.to_string(), "--calls"])
            .arg(&calls);
        let log = dir.join(format!("{}.log", script.replace('/', "_")));
        let process = ChildGuard::spawn(command, log).unwrap_or_else(|e| panic!("start {script}: {e}"));
        assert!(
            wait_for_port(port, Duration::from_secs(30)).await,
            "{script} did not listen"
        );
        ScriptServer {
            _process: process,
            url: format!("http://127.0.0.1:{port}"),
            calls,
        }
    }

    /// The bodies of the calls of `path` so far, oldest first.
    pub fn calls(&self, path: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.calls).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
            .filter(|call| call["path"] == path)
            .map(|call| call["body"].clone())
            .collect()
    }
}
