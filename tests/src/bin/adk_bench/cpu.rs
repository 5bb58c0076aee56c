//! CPU time of the processes a bench started (the server, redis-server), read from
//! /proc around a phase: what the phase cost each of them, per operation. CPU time
//! is far less disturbed than latency by other work on a shared machine.

use std::time::Duration;

/// The process's CPU time (user + system, all its threads) so far, from /proc.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3;
    // utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    #[allow(unsafe_code)]
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_micros(ticks * 1_000_000 / per_second))
}

/// The CPU time of some processes at one moment; `None` for a process this bench did
/// not start (a given `--endpoint`) or cannot read.
#[derive(Clone, Debug)]
pub struct CpuSample(Vec<Option<Duration>>);

impl CpuSample {
    pub fn take(pids: &[Option<u32>]) -> CpuSample {
        CpuSample(pids.iter().map(|pid| pid.and_then(cpu_time)).collect())
    }

    /// Microseconds of CPU per operation of each process between `self` and `later`.
    pub fn per_op_us(&self, later: &CpuSample, ops: u64) -> Vec<Option<f64>> {
        self.0
            .iter()
            .zip(&later.0)
            .map(|(before, after)| match (before, after) {
                (Some(before), Some(after)) if ops > 0 => {
                    Some(after.saturating_sub(*before).as_secs_f64() * 1e6 / ops as f64)
                }
                _ => None,
            })
            .collect()
    }
}

/// A table cell: the value with `decimals`, or "n/a".
pub fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.decimals$}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn cpu_time_counts_this_process_work() {
        let pid = std::process::id();
        let before = CpuSample::take(&[Some(pid), None]);
        let start = cpu_time(pid).expect("this process's /proc/PID/stat");
        // Spin until the kernel has charged 50 ms of CPU (clock ticks are 10 ms), or fail.
        let deadline = Instant::now() + Duration::from_secs(30);
        while cpu_time(pid).expect("stat") < start + Duration::from_millis(50) {
            assert!(Instant::now() < deadline, "no CPU time charged after 30 s of spinning");
            std::hint::black_box((0..1000u64).sum::<u64>());
        }
        let per_op = before.per_op_us(&CpuSample::take(&[Some(pid), None]), 10);
        assert!(per_op[0].expect("a reading") >= 5_000.0, "{per_op:?}");
        assert_eq!(per_op[1], None, "no process, no reading");
        assert_eq!(cell(per_op[1], 0), "n/a");
    }
}
