//! The Python worker of an ADK agent-config directory whose YAML names Python
//! functions (tools, callbacks): `<python> -m adk_grpc_worker`, the project's own
//! package (`python/adk_grpc_worker`), started once per directory as a supervised
//! child. It imports the functions as ADK does and serves them over the runner's
//! existing HTTP tool and hook protocols, so each becomes an `http` tool or a hook
//! of the translated agents file: no new wire.
//!
//! The worker reports on its first stdout line the port it listens on and, per code
//! reference, the declaration ADK makes of the tool (or why the reference does not
//! resolve). A worker that dies is started again on the same port, so the tools'
//! URLs stay valid. It exits when its stdin closes: the runner holds it open for
//! its whole life, so the worker never outlives the runner, however it ends.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::Duration;

/// The variable naming the Python interpreter (the binaries' `--python` reads it too).
pub(super) const PYTHON_ENV: &str = "ADK_PYTHON";

/// How long a worker may take to import ADK and the directory's modules.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Stderr lines kept to say why a worker did not start.
const STDERR_TAIL_LINES: usize = 20;

/// The interpreter: `ADK_PYTHON`, else `python3`.
pub(super) fn interpreter_from_env() -> PathBuf {
    std::env::var_os(PYTHON_ENV)
        .filter(|python| !python.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// What the worker made of one tool reference: ADK's function declaration.
#[derive(Debug, Deserialize)]
pub(super) struct PythonTool {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) parameters: Option<Value>,
    #[serde(default)]
    pub(super) long_running: bool,
}

/// A `tools:` entry naming Python code, as the worker resolves it: ADK's loader's
/// rules (a function, a tool, a tool or toolset class made `from_config` with `args`,
/// a function called with `args`, a toolset's tools), under `key`, the entry's name
/// in the worker's report and its tools' URLs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ToolEntry {
    pub(super) key: String,
    /// `module.name`, as ADK's loader imports it.
    pub(super) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) args: Option<Value>,
    /// The YAML file naming it (ADK hands `from_config` its path).
    pub(super) config_path: PathBuf,
}

/// What the worker made of one `output_schema` or `input_schema` reference (a pydantic
/// model class, or any schema object ADK's `LlmAgent` takes as an `output_schema`): its
/// JSON Schema and the forms ADK sends of it.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct PythonSchema {
    json_schema: Value,
    validated: bool,
    /// A type pydantic's `TypeAdapter` takes (a class, `dict[str, int]`, `str`; not a JSON
    /// Schema dict): the worker validates a task's output of it, as ADK's `finish_task` does.
    #[serde(default)]
    pub(super) type_adapter: bool,
    /// A pydantic class (ADK's `input_schema` takes nothing else).
    pub(super) pydantic_class: bool,
    gemini: Value,
    openai: Option<Value>,
    set_model_response: Value,
    set_model_response_argument: Option<String>,
}

impl From<PythonSchema> for adk_grpc_agents::SchemaClass {
    fn from(schema: PythonSchema) -> Self {
        adk_grpc_agents::SchemaClass {
            json_schema: schema.json_schema,
            validated: schema.validated,
            as_sent: adk_grpc_core::ResponseSchemaAsSent {
                gemini: schema.gemini,
                openai: schema.openai,
            },
            set_model_response_parameters: schema.set_model_response,
            set_model_response_argument: schema.set_model_response_argument,
            // The worker's, which the directory's translation adds (it knows the worker's URL).
            validator: None,
        }
    }
}

/// The worker's first line: its port and, per reference, what it resolved to (per
/// tool entry, its tools: one, or a toolset's).
#[derive(Debug, Deserialize)]
struct Report {
    port: u16,
    tools: BTreeMap<String, Resolved<Vec<PythonTool>>>,
    callbacks: BTreeMap<String, Resolved<Value>>,
    #[serde(default)]
    schemas: BTreeMap<String, Resolved<PythonSchema>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Resolved<T> {
    Failed { error: String },
    Served(T),
}

/// A started worker: where its references are served, and each one's fate.
pub(super) struct Worker {
    port: u16,
    /// Per tool entry (its key), its tools.
    pub(super) tools: BTreeMap<String, Result<Vec<PythonTool>, String>>,
    pub(super) callbacks: BTreeMap<String, Result<(), String>>,
    pub(super) schemas: BTreeMap<String, Result<PythonSchema, String>>,
    supervisor: Supervisor,
}

impl Worker {
    /// The URL a tool, callback or class's validation is served at.
    pub(super) fn url(&self, served: ServedAs) -> String {
        let path = match served {
            ServedAs::Tool { entry, name } => format!("tool/{entry}/{name}"),
            ServedAs::Callback(reference) => format!("callback/{reference}"),
            ServedAs::Validation(reference) => format!("validate/{reference}"),
        };
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// Stops the worker (a directory that cannot be served does not keep it).
    pub(super) fn stop(self) {
        self.supervisor.stop();
    }
}

#[derive(Clone, Copy)]
pub(super) enum ServedAs<'a> {
    /// The tool `name` of the tool entry keyed `entry`.
    Tool { entry: &'a str, name: &'a str },
    /// The callback `module.function`.
    Callback(&'a str),
    /// pydantic's validation of a value of the `output_schema` class `module.Class`.
    Validation(&'a str),
}

/// Starts the worker of the app directory `app_dir` for these references (tools and
/// callbacks served, `output_schema` classes) and waits for its report. An error says
/// why it did not start (the interpreter, the package).
pub(super) fn start(
    python: &Path,
    app_dir: &Path,
    tools: &[ToolEntry],
    callbacks: &[String],
    schemas: &[String],
) -> Result<Worker, String> {
    let refs = json!({ "tools": tools, "callbacks": callbacks, "schemas": schemas }).to_string();
    let app_dir = std::fs::canonicalize(app_dir).unwrap_or_else(|_| app_dir.to_path_buf());
    let command = WorkerCommand {
        python: python.to_path_buf(),
        args: vec![
            "-m".into(),
            "adk_grpc_worker".into(),
            "--app-dir".into(),
            app_dir.into_os_string(),
            "--refs".into(),
            refs.into(),
        ],
    };
    let (child, stdin, report) = command.spawn(None)?;
    let supervisor = Supervisor::start(command, child, stdin, report.port);
    let tools = report
        .tools
        .into_iter()
        .map(|(reference, resolved)| (reference, resolved.into_result()))
        .collect();
    let callbacks = report
        .callbacks
        .into_iter()
        .map(|(reference, resolved)| (reference, resolved.into_result().map(|_| ())))
        .collect();
    let schemas = report
        .schemas
        .into_iter()
        .map(|(reference, resolved)| (reference, resolved.into_result()))
        .collect();
    Ok(Worker {
        port: report.port,
        tools,
        callbacks,
        schemas,
        supervisor,
    })
}

impl<T> Resolved<T> {
    fn into_result(self) -> Result<T, String> {
        match self {
            Resolved::Served(served) => Ok(served),
            Resolved::Failed { error } => Err(error),
        }
    }
}

#[derive(Clone)]
struct WorkerCommand {
    python: PathBuf,
    args: Vec<OsString>,
}

impl WorkerCommand {
    /// Starts the worker (on `port`, else one it picks) and reads its report.
    fn spawn(&self, port: Option<u16>) -> Result<(Child, ChildStdin, Report), String> {
        let mut command = Command::new(&self.python);
        command
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(port) = port {
            command.args(["--port", &port.to_string()]);
        }
        let shown = self.python.display();
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the Python worker with {shown}: {e} (set --python or {PYTHON_ENV})"))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr_tail = forward_stderr(child.stderr.take().expect("stderr is piped"));
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = sender.send(read);
        });
        let failed = |child: &mut Child, why: String| {
            let _ = child.kill();
            let _ = child.wait();
            let tail = stderr_tail
                .lock()
                .map(|tail| tail.iter().cloned().collect::<Vec<_>>().join("\n"));
            format!(
                "the Python worker ({shown} -m adk_grpc_worker) did not start: {why}{}; it is the package \
                 python/adk_grpc_worker, installed with pip into that interpreter's environment",
                tail.ok()
                    .filter(|tail| !tail.is_empty())
                    .map(|tail| format!("\n{tail}"))
                    .unwrap_or_default()
            )
        };
        let line = match receiver.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) if !line.trim().is_empty() => line,
            Ok(Ok(_)) => return Err(failed(&mut child, "it exited without reporting its port".into())),
            Ok(Err(e)) => return Err(failed(&mut child, format!("cannot read its report: {e}"))),
            Err(_) => return Err(failed(&mut child, format!("no report within {START_TIMEOUT:?}"))),
        };
        match serde_json::from_str::<Report>(&line) {
            Ok(report) => Ok((child, stdin, report)),
            Err(e) => Err(failed(
                &mut child,
                format!("its report {:?} is not one: {e}", line.trim()),
            )),
        }
    }
}

/// Each stderr line of the worker (a traceback of a tool that raised) goes to the
/// runner's log; the last ones are kept to explain a failed start.
fn forward_stderr(stderr: std::process::ChildStderr) -> Arc<Mutex<VecDeque<String>>> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let kept = tail.clone();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tracing::warn!(target: "adk_grpc_worker", "{line}");
            if let Ok(mut tail) = kept.lock() {
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
    });
    tail
}

/// Restarts the worker when it dies, until stopped (dropping it does not stop it: the
/// worker serves for the runner's whole life).
struct Supervisor {
    /// Set by `stop`; the restart delay is a wait on it, so a stop ends the wait at once.
    stopped: Arc<(Mutex<bool>, Condvar)>,
    /// The running worker's stdin: closing it stops the worker.
    stdin: Arc<Mutex<Option<ChildStdin>>>,
}

/// Whether `stop` was called, waiting up to `delay` for it.
fn stopped_within(stopped: &(Mutex<bool>, Condvar), delay: Duration) -> bool {
    let (flag, changed) = stopped;
    let Ok(guard) = flag.lock() else {
        return true;
    };
    changed
        .wait_timeout_while(guard, delay, |stopped| !*stopped)
        .map_or(true, |(stopped, _)| *stopped)
}

impl Supervisor {
    /// How long after a death the worker is started again (a worker that dies at once
    /// does not spin).
    const RESTART_DELAY: Duration = Duration::from_secs(1);

    fn start(command: WorkerCommand, mut child: Child, stdin: ChildStdin, port: u16) -> Supervisor {
        let stopped = Arc::new((Mutex::new(false), Condvar::new()));
        let slot = Arc::new(Mutex::new(Some(stdin)));
        let supervisor = Supervisor {
            stopped: stopped.clone(),
            stdin: slot.clone(),
        };
        thread::spawn(move || {
            loop {
                let status = child.wait();
                if stopped_within(&stopped, Duration::ZERO) {
                    return;
                }
                tracing::warn!(?status, port, "the Python worker exited: starting it again");
                loop {
                    if stopped_within(&stopped, Self::RESTART_DELAY) {
                        return;
                    }
                    match command.spawn(Some(port)) {
                        Ok((next, stdin, _)) => {
                            child = next;
                            if let Ok(mut slot) = slot.lock() {
                                *slot = Some(stdin);
                            }
                            break;
                        }
                        Err(e) => tracing::error!("{e}"),
                    }
                }
            }
        });
        supervisor
    }

    fn stop(&self) {
        let (flag, changed) = &*self.stopped;
        if let Ok(mut stopped) = flag.lock() {
            *stopped = true;
        }
        changed.notify_all();
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
    }
}
