//! The per-run resource report written by `stockade exec --json-report FILE`.
//!
//! [`RunReport::new`] combines what the launcher saw (exit status, wall time, whether the
//! wall-time [`Watchdog`](crate::cgroup::Watchdog) fired) with what the kernel accounted
//! ([`ResourceUsage`] of the worker cgroup, [`DiskUsage`] of the writable area) and names the
//! limit that ended the run, if any.

use std::time::Duration;

use serde::Serialize;

use crate::cgroup::ResourceUsage;
use crate::disk::DiskUsage;

/// How the worker's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitOutcome {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal number.
    Signal(i32),
}

/// A ceiling that was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The memory ceiling (the OOM killer ran in the worker's cgroup).
    Memory,
    /// The PID ceiling (a fork or clone was refused).
    Pids,
    /// The wall-time budget (the watchdog killed the tree).
    WallTime,
    /// The writable-disk ceiling (the area is full: writes failed with `ENOSPC`).
    Disk,
    /// The CPU quota throttled the worker (slows it, never ends it).
    Cpu,
}

/// The ceilings in force for a run (`None`: not requested).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LimitsInForce {
    /// Memory ceiling in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU quota in milli-CPUs.
    pub cpu_millis: Option<u32>,
    /// Maximum tasks.
    pub pids: Option<u32>,
    /// Writable-disk ceiling in bytes.
    pub disk_bytes: Option<u64>,
    /// Wall-time budget in milliseconds.
    pub wall_ms: Option<u64>,
}

/// One run's resource report (`--json-report`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// Exit status or signal of the worker's main process.
    pub exit: ExitOutcome,
    /// The limit that ended the run, or `null` when the worker ended on its own.
    pub ended_by: Option<LimitKind>,
    /// Every ceiling that was reached during the run, including ones the worker survived.
    pub limits_hit: Vec<LimitKind>,
    /// The ceilings in force.
    pub limits: LimitsInForce,
    /// Peak memory charge of the whole tree, in bytes (when the kernel records it).
    pub memory_peak_bytes: Option<u64>,
    /// CPU time of the whole tree, in microseconds.
    pub cpu_time_us: u64,
    /// Peak number of live tasks.
    pub pids_peak: Option<u64>,
    /// Processes the OOM killer killed.
    pub oom_kills: u64,
    /// Forks refused at the PID ceiling.
    pub pids_limit_hits: u64,
    /// Bytes written to the writable area (workspace changes plus `/tmp`) still held at the end.
    pub bytes_written: Option<u64>,
    /// Wall time from release to exit, in milliseconds.
    pub wall_time_ms: u64,
}

impl RunReport {
    /// Builds the report and decides which limit ended the run.
    ///
    /// Precedence when several apply: the wall-time budget (the supervisor killed the tree),
    /// then memory (the main process died by SIGKILL with an OOM kill recorded), then a failed
    /// exit with the PID ceiling reached, then a failed exit with the writable area full.
    pub fn new(
        exit: ExitOutcome,
        wall: Duration,
        wall_budget_fired: bool,
        usage: &ResourceUsage,
        disk: Option<&DiskUsage>,
        limits: LimitsInForce,
    ) -> Self {
        let mut hit = Vec::new();
        if wall_budget_fired {
            hit.push(LimitKind::WallTime);
        }
        if usage.oom_kills > 0 {
            hit.push(LimitKind::Memory);
        }
        if usage.pids_limit_hits > 0 {
            hit.push(LimitKind::Pids);
        }
        if disk.is_some_and(DiskUsage::exhausted) {
            hit.push(LimitKind::Disk);
        }
        if usage.cpu_throttled_periods > 0 {
            hit.push(LimitKind::Cpu);
        }
        let failed = exit != ExitOutcome::Code(0);
        let ended_by = if wall_budget_fired {
            Some(LimitKind::WallTime)
        } else if usage.oom_kills > 0 && exit == ExitOutcome::Signal(libc::SIGKILL) {
            Some(LimitKind::Memory)
        } else if failed && usage.pids_limit_hits > 0 {
            Some(LimitKind::Pids)
        } else if failed && disk.is_some_and(DiskUsage::exhausted) {
            Some(LimitKind::Disk)
        } else {
            None
        };
        Self {
            exit,
            ended_by,
            limits_hit: hit,
            limits,
            memory_peak_bytes: usage.memory_peak_bytes,
            cpu_time_us: usage.cpu_time_us,
            pids_peak: usage.pids_peak,
            oom_kills: usage.oom_kills,
            pids_limit_hits: usage.pids_limit_hits,
            bytes_written: disk.map(|d| d.bytes_used),
            wall_time_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain integers, strings and enums cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> ResourceUsage {
        ResourceUsage {
            memory_peak_bytes: Some(10),
            cpu_time_us: 5,
            pids_peak: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn clean_exit_names_no_limit() {
        let r = RunReport::new(
            ExitOutcome::Code(0),
            Duration::from_millis(12),
            false,
            &usage(),
            None,
            LimitsInForce::default(),
        );
        assert_eq!(r.ended_by, None);
        assert!(r.limits_hit.is_empty());
        assert_eq!(r.wall_time_ms, 12);
    }

    #[test]
    fn precedence() {
        let oom = ResourceUsage {
            oom_kills: 1,
            pids_limit_hits: 2,
            ..usage()
        };
        let r = |exit, fired, u: &ResourceUsage, d: Option<&DiskUsage>| {
            RunReport::new(exit, Duration::ZERO, fired, u, d, LimitsInForce::default()).ended_by
        };
        let sig9 = ExitOutcome::Signal(9);
        assert_eq!(r(sig9, true, &oom, None), Some(LimitKind::WallTime));
        assert_eq!(r(sig9, false, &oom, None), Some(LimitKind::Memory));
        assert_eq!(
            r(ExitOutcome::Code(2), false, &oom, None),
            Some(LimitKind::Pids)
        );
        // The worker survived a child's OOM kill and exited 0: nothing ended it.
        assert_eq!(r(ExitOutcome::Code(0), false, &oom, None), None);
        let full = DiskUsage {
            bytes_used: 1 << 20,
            bytes_limit: 1 << 20,
            inodes_used: 3,
            inodes_limit: 4096,
        };
        assert_eq!(
            r(ExitOutcome::Code(1), false, &usage(), Some(&full)),
            Some(LimitKind::Disk)
        );
        let roomy = DiskUsage {
            bytes_used: 0,
            ..full
        };
        assert_eq!(r(ExitOutcome::Code(1), false, &usage(), Some(&roomy)), None);
    }

    #[test]
    fn json_shape() {
        let r = RunReport::new(
            ExitOutcome::Signal(9),
            Duration::from_millis(300),
            true,
            &ResourceUsage {
                cpu_throttled_periods: 2,
                ..usage()
            },
            None,
            LimitsInForce {
                wall_ms: Some(300),
                ..Default::default()
            },
        );
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["exit"], serde_json::json!({"signal": 9}));
        assert_eq!(v["ended_by"], "wall_time");
        assert_eq!(v["limits_hit"], serde_json::json!(["wall_time", "cpu"]));
        assert_eq!(v["limits"]["wall_ms"], 300);
        assert_eq!(v["bytes_written"], serde_json::Value::Null);
    }
}
