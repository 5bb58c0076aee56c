use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// How long [`ChildGuard::terminate`] waits after SIGTERM before it SIGKILLs.
pub const DEFAULT_TERMINATE_GRACE: Duration = Duration::from_secs(10);

/// Owns a child process and SIGKILLs it on drop, so a failing test never leaks
/// servers. The child's stdout and stderr are appended to a log file.
///
/// A `std` child is used rather than a tokio one so that drop can reap the
/// process synchronously (freeing its ports) even when no runtime is running.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    pid: u32,
    log_path: PathBuf,
}

impl ChildGuard {
    /// Spawns `command` with stdin closed and stdout/stderr appended to
    /// `log_path` (created if missing; appended so restarts keep earlier output).
    pub fn spawn(mut command: Command, log_path: impl Into<PathBuf>) -> io::Result<ChildGuard> {
        let log_path = log_path.into();
        let log = OpenOptions::new().create(true).append(true).open(&log_path)?;
        command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        let child = command.spawn()?;
        Ok(ChildGuard {
            pid: child.id(),
            child,
            log_path,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `n_lines` lines of the process log, for panic messages.
    pub fn tail_log(&self, n_lines: usize) -> String {
        tail_file(&self.log_path, n_lines)
    }

    /// The exit status if the process has exited, without blocking.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|err| panic!("failed to poll child pid {}: {err}", self.pid))
    }

    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        crate::try_eventually(timeout, || {
            let status = self.exit_status();
            async move { status.ok_or_else(|| "still running".to_string()) }
        })
        .await
        .ok()
    }

    /// Sends a signal by name (`"TERM"`, `"STOP"`, `"CONT"`, ...) via `kill(1)`.
    /// Does nothing if the process has already exited.
    pub fn send_signal(&mut self, signal: &str) {
        // While the child is unreaped its pid cannot be reused, so checking
        // first guarantees the signal reaches our process and nobody else's.
        if !self.is_running() {
            return;
        }
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("failed to run `kill` to signal a child process");
        // `kill` fails if the process exited in the meantime; that is fine.
        if !status.success() && self.is_running() {
            panic!("`kill -{signal} {}` failed: {status}", self.pid);
        }
    }

    /// SIGKILLs the process (a crash, from its point of view) and reaps it.
    pub async fn kill9(&mut self) -> ExitStatus {
        if let Some(status) = self.exit_status() {
            return status;
        }
        self.child
            .kill()
            .unwrap_or_else(|err| panic!("failed to SIGKILL pid {}: {err}", self.pid));
        self.wait_exit(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("pid {} did not exit within 10 s of SIGKILL", self.pid))
    }

    /// SIGTERM, then up to [`DEFAULT_TERMINATE_GRACE`] for a graceful exit,
    /// then SIGKILL. A status killed by signal 9 means it did not shut down.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.terminate_within(DEFAULT_TERMINATE_GRACE).await
    }

    /// Like [`ChildGuard::terminate`] with a custom grace period.
    pub async fn terminate_within(&mut self, grace: Duration) -> ExitStatus {
        self.send_signal("TERM");
        match self.wait_exit(grace).await {
            Some(status) => status,
            None => self.kill9().await,
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn tail_file(path: &Path, n_lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n_lines)..].join("\n")
        }
        Err(err) => format!("<could not read log {}: {err}>", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn sh(script: &str, dir: &Path) -> ChildGuard {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        ChildGuard::spawn(command, dir.join("child.log")).expect("spawn sh")
    }

    #[tokio::test]
    async fn logs_output_and_reports_exit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = sh("echo one; echo two >&2; echo three; exit 3", dir.path());
        let status = child.wait_exit(Duration::from_secs(5)).await.expect("exits");
        assert_eq!(status.code(), Some(3));
        assert_eq!(child.tail_log(2), "two\nthree");
        assert_eq!(child.tail_log(10), "one\ntwo\nthree");
    }

    #[tokio::test]
    async fn terminate_and_kill9_stop_the_process() {
        let dir = tempfile::tempdir().expect("tempdir");

        let mut graceful = sh("exec sleep 30", dir.path());
        assert!(graceful.wait_exit(Duration::from_millis(50)).await.is_none());
        let status = graceful.terminate().await;
        assert_eq!(status.signal(), Some(15));

        let mut stubborn = sh(
            "trap '' TERM; echo trap-installed; while true; do sleep 0.05; done",
            dir.path(),
        );
        // SIGTERM before the trap is installed would end the shell gracefully.
        crate::eventually(Duration::from_secs(5), || {
            let log = stubborn.tail_log(1);
            async move {
                match log.contains("trap-installed") {
                    true => Ok(()),
                    false => Err("shell never installed its TERM trap".to_string()),
                }
            }
        })
        .await;
        let status = stubborn.terminate_within(Duration::from_millis(200)).await;
        assert_eq!(status.signal(), Some(9));

        let mut crashed = sh("exec sleep 30", dir.path());
        assert_eq!(crashed.kill9().await.signal(), Some(9));
    }

    #[tokio::test]
    async fn drop_kills_the_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let child = sh("exec sleep 30", dir.path());
        let pid = child.pid();
        drop(child);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} still exists after drop"
        );
    }
}
