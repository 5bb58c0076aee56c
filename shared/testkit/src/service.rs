use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::{Instant, sleep};

use crate::net::{free_port, port_accepts};
use crate::process::ChildGuard;
use crate::redis_server::{keep_for_diagnosis_if_panicking, new_temp_dir};

/// How long a service may take to listen. Most listen in well under a second; one serving an
/// agent-config directory with Python code first waits for its Python worker to import ADK
/// (about 3 s on a quiet machine, over 15 s once seen while the whole suite ran).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// `free_port` is racy; a few fresh ports are tried before giving up.
const PORT_ATTEMPTS: usize = 3;
const LOG_TAIL_LINES: usize = 40;
const LOG_FILE: &str = "service.log";
/// What the log of each launch starts with.
const LAUNCH_HEADER: &str = "=== adk-grpc-testkit:";
/// The server kit's line once its listener is bound (adk-grpc-server-kit's server.rs).
const LISTENING: &str = "listening on";
/// The filter that keeps [`LISTENING`] in the log whatever `RUST_LOG` the test sets.
const LISTENING_LOG_FILTER: &str = "adk_grpc_server_kit::server=info";

/// Path of a binary built from this workspace, freshly built.
///
/// Uses `CARGO_BIN_EXE_<name>` if set (cargo built it for this very test). Otherwise
/// the binary lives in the test executable's own `target/<profile>/` directory, and
/// the first call in a `cargo test` run brings every workspace binary up to date
/// with `cargo build --workspace --bins` (see [`build_workspace_bins`]): a test never
/// runs a binary older than the sources. Panics if the build fails.
pub fn workspace_bin(name: &str) -> PathBuf {
    if let Some(dir) = SHIPPED_BIN_DIR.get() {
        return bin_in(dir, name);
    }
    if let Some(path) = std::env::var_os(format!("CARGO_BIN_EXE_{name}")) {
        return PathBuf::from(path);
    }
    let dir = bin_dir();
    build_workspace_bins(&dir);
    bin_in(&dir, name)
}

/// Set by [`use_binaries_beside_this_executable`]: the directory every later
/// [`workspace_bin`] takes its binaries from, as they are.
static SHIPPED_BIN_DIR: OnceLock<PathBuf> = OnceLock::new();

/// For a program shipped beside the servers (`adk-bench` in a release, or copied to
/// another machine): from now on [`workspace_bin`] and [`ServiceProcess`] start the
/// binaries in this executable's own directory, as they are, and never build anything
/// (there may be no sources, no cargo, and no profile to build with). Checks first that
/// each of `required` is there, and `redis-server` on the `PATH` when `redis` is true, so
/// that a missing one is reported before any process is started: the error names it and
/// where it was looked for.
pub fn use_binaries_beside_this_executable(required: &[&str], redis: bool) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|err| format!("cannot find this program's own path: {err}"))?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    for name in required {
        let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if !path.is_file() {
            return Err(format!(
                "{name} not found beside {}: it starts the servers next to it; copy {name} to {}, \
                 or give --endpoint to measure a server that is already running",
                exe.display(),
                dir.display()
            ));
        }
    }
    if redis && crate::redis_server::find_on_path("redis-server").is_none() {
        return Err(
            "redis-server not found on the PATH: install it (`apt-get install redis-server`), \
                    or give --endpoint to measure a server that is already running"
                .into(),
        );
    }
    SHIPPED_BIN_DIR
        .set(dir)
        .map_err(|_| "the binaries' directory was chosen already".to_string())
}

/// `target/<profile>/`: where cargo puts the workspace's binaries for the profile
/// this test executable was built with.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("cannot determine the test executable's path");
    let mut dir = exe
        .parent()
        .expect("test executable has no parent directory")
        .to_path_buf();
    // Test binaries live in target/<profile>/deps/; workspace binaries one level up.
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

fn bin_in(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        panic!(
            "binary `{name}` not built in {}: no such binary in the workspace",
            dir.display()
        );
    }
    path
}

/// Runs `cargo build --workspace --bins` for the profile and target directory of
/// `bin_dir` once per `cargo test` run.
///
/// The same command as the build step of `scripts/test.sh` (CONTRIBUTING.md), with the
/// same feature set, so after that step it only checks fingerprints (about half a
/// second). It runs once per test process (a `OnceLock`), and the test processes of
/// one `cargo test` run share it through a stamp file naming their parent (cargo)
/// process; cargo's own lock on the build directory serialises concurrent runs.
/// The e2e crate cannot simply depend on the server binaries: artifact dependencies
/// are unstable.
fn build_workspace_bins(bin_dir: &Path) {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let run = parent_process_identity();
        let stamp = bin_dir.join(".adk-testkit-bins-built");
        if run.is_some() && std::fs::read_to_string(&stamp).ok() == run {
            return;
        }
        let profile = bin_dir
            .file_name()
            .and_then(|name| name.to_str())
            .expect("target/<profile> has a name");
        let target_dir = bin_dir.parent().expect("target/<profile> has a parent");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let mut command = Command::new(cargo);
        // Cargo describes the test's own package to it in these variables; some build
        // scripts watch them (ring's CARGO_MANIFEST_DIR), so passing them on would make
        // this build and the test script's differ, each rebuilding what the other built.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_") || key.starts_with("CARGO_BIN_") || CARGO_TEST_VARS.contains(&&*key) {
                command.env_remove(&*key);
            }
        }
        command
            .args(["build", "--quiet", "--workspace", "--bins", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(target_dir);
        match profile {
            "debug" => {}
            "release" => {
                command.arg("--release");
            }
            other => {
                command.args(["--profile", other]);
            }
        }
        let output = command
            .output()
            .unwrap_or_else(|err| panic!("cannot run {command:?}: {err}"));
        if !output.status.success() {
            panic!(
                "building the workspace binaries the tests run failed ({command:?}, {}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        if let Some(run) = run {
            // Best effort: without the stamp the next test process checks again.
            let _ = std::fs::write(&stamp, run);
        }
    });
}

/// What cargo sets, besides `CARGO_PKG_*` and `CARGO_BIN_*`, for the test it runs.
const CARGO_TEST_VARS: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// The parent process (the `cargo test` running this test executable) as
/// `pid:start time`, unique on this machine even once the pid is reused; `None`
/// where `/proc` cannot tell (then every test process builds).
fn parent_process_identity() -> Option<String> {
    let parent = std::os::unix::process::parent_id();
    let stat = std::fs::read_to_string(format!("/proc/{parent}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; the start
    // time is the 20th field after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_time = after_name.split_whitespace().nth(19)?;
    Some(format!("{parent}:{start_time}"))
}

/// A workspace service binary running as a real process, listening on
/// `127.0.0.1:PORT` (passed as `--listen 127.0.0.1:PORT`). Killed on drop; its
/// output goes to a log file that is kept if the test panics.
pub struct ServiceProcess {
    child: ChildGuard,
    port: u16,
    bin: String,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    dir: TempDir,
}

impl ServiceProcess {
    /// Spawns `workspace_bin(bin)` with `args` plus `--listen 127.0.0.1:PORT` on a
    /// free port and waits (up to a minute) until the port accepts connections. Panics
    /// with the log tail if the process exits or never listens.
    pub async fn spawn(bin: &str, args: &[String], envs: &[(String, String)]) -> ServiceProcess {
        let dir = new_temp_dir(&format!("adk-{bin}-"));
        let mut last_error = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            match launch(bin, args, envs, port, dir.path()).await {
                Ok(child) => {
                    return ServiceProcess {
                        child,
                        port,
                        bin: bin.to_owned(),
                        args: args.to_vec(),
                        envs: envs.to_vec(),
                        dir,
                    };
                }
                Err(LaunchError::PortInUse(message)) => last_error = message,
                Err(LaunchError::Failed(message)) => panic!("{message}"),
            }
        }
        panic!("`{bin}` could not get a free port after {PORT_ATTEMPTS} attempts:\n{last_error}")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, the form gRPC clients connect to.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn log_path(&self) -> &Path {
        self.child.log_path()
    }

    pub fn tail_log(&self, n_lines: usize) -> String {
        self.child.tail_log(n_lines)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.is_running()
    }

    pub fn child_mut(&mut self) -> &mut ChildGuard {
        &mut self.child
    }

    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.child.wait_exit(timeout).await
    }

    /// Sends a signal by name (`"TERM"`, `"INT"`, `"STOP"`, `"CONT"`, ...).
    pub fn send_signal(&mut self, signal: &str) {
        self.child.send_signal(signal);
    }

    /// SIGTERM, up to 10 s for a graceful shutdown, then SIGKILL. A successful
    /// status means the service shut down cleanly.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.child.terminate().await
    }

    /// Crashes the service with SIGKILL.
    pub async fn kill9(&mut self) -> ExitStatus {
        self.child.kill9().await
    }

    /// Starts the same binary again with the same args, env and port (clients
    /// can reconnect to the same endpoint). A running process is terminated
    /// gracefully first; call [`ServiceProcess::kill9`] before to simulate a crash.
    pub async fn restart(&mut self) {
        if self.child.is_running() {
            self.terminate().await;
        }
        match launch(&self.bin, &self.args, &self.envs, self.port, self.dir.path()).await {
            Ok(child) => self.child = child,
            Err(LaunchError::PortInUse(message) | LaunchError::Failed(message)) => {
                panic!("restart failed: {message}")
            }
        }
    }

    /// Current resident memory (VmRSS) in KiB, or `None` if the process is gone.
    pub fn rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid(), "VmRSS")
    }

    /// Peak resident memory (VmHWM) in KiB, or `None` if the process is gone.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid(), "VmHWM")
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        keep_for_diagnosis_if_panicking(&mut self.dir, &self.bin, &self.child);
    }
}

enum LaunchError {
    /// Someone else took the port between `free_port` and the bind; retryable.
    PortInUse(String),
    Failed(String),
}

async fn launch(
    bin: &str,
    args: &[String],
    envs: &[(String, String)],
    port: u16,
    dir: &Path,
) -> Result<ChildGuard, LaunchError> {
    let binary = workspace_bin(bin);
    let listen = format!("127.0.0.1:{port}");
    let log_path = dir.join(LOG_FILE);
    // A header per launch separates the runs of a restarted service in one log.
    if let Ok(mut log) = OpenOptions::new().create(true).append(true).open(&log_path) {
        let _ = writeln!(
            log,
            "{LAUNCH_HEADER} {} {} --listen {listen}",
            binary.display(),
            args.join(" ")
        );
    }

    let mut command = Command::new(&binary);
    command
        .args(args)
        .arg("--listen")
        .arg(&listen)
        // Backtraces make a panicking service diagnosable from its log; callers can override.
        .env("RUST_BACKTRACE", "1")
        // No metrics endpoint: its default port (9464) is one for the whole machine, and
        // tests run services side by side. A test of the endpoint passes --metrics-listen
        // (or this variable in `envs`) with a port of its own.
        .env("ADK_METRICS_LISTEN", "off")
        .envs(envs.iter().map(|(key, value)| (key, value)));
    let rust_log = envs
        .iter()
        .find(|(key, _)| key == "RUST_LOG")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("RUST_LOG").ok());
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", format!("{filter},{LISTENING_LOG_FILTER}"));
    }
    let mut child = ChildGuard::spawn(command, &log_path)
        .map_err(|err| LaunchError::Failed(format!("failed to spawn {}: {err}", binary.display())))?;

    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.exit_status() {
            let log = child.tail_log(LOG_TAIL_LINES);
            let message = format!(
                "`{bin}` exited before listening on {listen} with {status}\n--- log {} ---\n{log}",
                log_path.display()
            );
            let port_taken = ["Address already in use", "AddrInUse"]
                .iter()
                .any(|needle| log.contains(needle));
            return Err(if port_taken {
                LaunchError::PortInUse(message)
            } else {
                LaunchError::Failed(message)
            });
        }
        // The port answering is not enough: a listener of this process (a fake provider
        // bound to port 0) may have been given the port the child failed to bind. The
        // child's own log says when it listens there.
        if port_accepts(port).await && child.is_running() && says_it_listens(&log_path, &listen) {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            return Err(LaunchError::Failed(format!(
                "`{bin}` did not listen on {listen} within {READY_TIMEOUT:?}\n--- log {} ---\n{}",
                log_path.display(),
                child.tail_log(LOG_TAIL_LINES)
            )));
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the latest launch logged at `log_path` says it listens on `listen`.
fn says_it_listens(log_path: &Path, listen: &str) -> bool {
    let Ok(log) = std::fs::read_to_string(log_path) else {
        return false;
    };
    let latest = log.rsplit(LAUNCH_HEADER).next().unwrap_or_default();
    let line = format!("{LISTENING} {listen}");
    // The whole port: `:4000` is not `:400`.
    latest
        .match_indices(&line)
        .any(|(at, _)| !latest[at + line.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// Reads a `Key:   1234 kB` line from `/proc/PID/status`.
fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_latest_launch_saying_it_listens_on_the_port_counts() {
        let dir = new_temp_dir("adk-listens-");
        let log = dir.path().join(LOG_FILE);
        let listen = "127.0.0.1:4000";
        std::fs::write(
            &log,
            format!("{LAUNCH_HEADER} a --listen {listen}\nINFO {LISTENING} {listen}\n"),
        )
        .unwrap();
        assert!(says_it_listens(&log, listen));
        assert!(!says_it_listens(&log, "127.0.0.1:400"));
        let relaunched = format!("{LAUNCH_HEADER} a --listen {listen}\nError: Address already in use\n");
        let mut file = OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(relaunched.as_bytes()).unwrap();
        assert!(
            !says_it_listens(&log, listen),
            "an earlier launch's line does not count"
        );
    }

    #[test]
    fn reads_own_memory_from_proc() {
        let rss = proc_status_kib(std::process::id(), "VmRSS").expect("VmRSS of self");
        let peak = proc_status_kib(std::process::id(), "VmHWM").expect("VmHWM of self");
        assert!(rss > 0 && peak >= rss, "rss {rss} peak {peak}");
        assert_eq!(proc_status_kib(std::process::id(), "NoSuchKey"), None);
    }

    #[test]
    #[should_panic(expected = "binary `adk-no-such-binary` not built")]
    fn a_missing_binary_is_named() {
        bin_in(&bin_dir(), "adk-no-such-binary");
    }

    #[test]
    fn the_parent_process_is_identified_by_pid_and_start_time() {
        let identity = parent_process_identity().expect("/proc tells");
        let (pid, start) = identity.split_once(':').expect("pid:start");
        assert_eq!(pid, std::os::unix::process::parent_id().to_string());
        assert!(start.parse::<u64>().is_ok(), "{identity}");
        assert_eq!(parent_process_identity(), Some(identity), "stable");
    }
}
