//! The per-run resource report written by `stockade exec --json-report FILE`.
//!
//! [`RunReport::new`] combines what the launcher saw (exit status, wall time, whether the
//! wall-time [`Watchdog`](crate::cgroup::Watchdog) fired) with what the kernel accounted
//! ([`ResourceUsage`] of the worker cgroup, [`DiskUsage`] of the writable area) and names the
//! limit that ended the run, if any.

use std::time::Duration;

use serde::Serialize;

use crate::cgroup::{CgroupError, CgroupHost, CgroupLimits, ResourceUsage, Watchdog, WorkerCgroup};
use crate::disk::{DiskError, DiskUsage, WritableArea};

/// How the worker's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitOutcome {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal number.
    Signal(i32),
}

impl From<crate::ExitStatus> for ExitOutcome {
    fn from(s: crate::ExitStatus) -> Self {
        match s {
            crate::ExitStatus::Exited(c) => ExitOutcome::Code(c),
            crate::ExitStatus::Signaled(s) => ExitOutcome::Signal(s),
        }
    }
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

/// The ceilings one run asks for (`None`: not requested).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Memory ceiling in bytes (`--memory`).
    pub memory_bytes: Option<u64>,
    /// CPU quota in milli-CPUs (`--cpus`).
    pub cpu_millis: Option<u32>,
    /// Maximum tasks (`--pids`).
    pub pids: Option<u32>,
    /// Writable-disk ceiling in bytes (`--disk`).
    pub disk_bytes: Option<u64>,
    /// Wall-time budget (`--wall`).
    pub wall: Option<Duration>,
    /// Create a worker cgroup even without a cgroup ceiling, for the report's usage numbers
    /// and cgroup-wide cancel (best effort: without one the PID namespace still takes the whole
    /// tree down with the worker).
    pub account: bool,
}

impl RunLimits {
    fn in_force(&self) -> LimitsInForce {
        LimitsInForce {
            memory_bytes: self.memory_bytes,
            cpu_millis: self.cpu_millis,
            pids: self.pids,
            disk_bytes: self.disk_bytes,
            wall_ms: self
                .wall
                .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    fn wants_cgroup(&self) -> bool {
        self.memory_bytes.is_some() || self.cpu_millis.is_some() || self.pids.is_some()
    }
}

/// Why the ceilings of a run could not be set up (each message names a remedy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CeilingSetupError {
    /// The worker cgroup could not be created.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The writable area could not be mounted.
    #[error(transparent)]
    Disk(#[from] DiskError),
}

/// Everything the ceilings need around one launch: the worker cgroup, the writable area, the
/// wall-time watchdog, and the report at the end.
///
/// Use: [`RunCeilings::prepare`]; put [`RunCeilings::attach_hook`] into the launch spec's
/// before-release hook and, with a disk ceiling, use [`RunCeilings::area`] for the workspace's
/// overlay upper/work and the sandbox `/tmp`; [`RunCeilings::started`] right after launch;
/// wait for the worker; [`RunCeilings::finish`]. Dropping it instead kills the tree, removes
/// the cgroup and unmounts the area.
#[derive(Debug)]
pub struct RunCeilings {
    limits: RunLimits,
    cgroup: Option<WorkerCgroup>,
    area: Option<WritableArea>,
    area_dir: Option<std::path::PathBuf>,
    watchdog: Option<Watchdog>,
}

impl RunCeilings {
    /// Creates the worker cgroup (when cgroups are usable, even without cgroup ceilings, so
    /// usage is accounted and the tree can be killed; required when a cgroup ceiling or a
    /// wall-time budget is requested) and, with a disk ceiling, mounts the writable area at
    /// `area_dir` (created; removed again by [`RunCeilings::finish`]); name it with
    /// [`crate::disk::run_area_dir`] so a later run can sweep it if this supervisor is killed.
    ///
    /// Sweeps the cgroups and run areas of dead supervisors first.
    ///
    /// # Errors
    /// A requested ceiling cannot be set up; nothing is left behind.
    pub fn prepare(
        limits: RunLimits,
        label: &str,
        area_dir: &std::path::Path,
    ) -> Result<Self, CeilingSetupError> {
        if !limits.wants_cgroup() && !limits.account && limits.disk_bytes.is_none() {
            // Nothing to set up: no cgroup, no writable area (and no sweep: the next run that
            // sets up ceilings sweeps what crashed supervisors left).
            return Ok(Self {
                limits,
                cgroup: None,
                area_dir: None,
                area: None,
                watchdog: None,
            });
        }
        if let Some(base) = area_dir.parent() {
            crate::disk::sweep_stale_areas(base);
        }
        let host = match CgroupHost::detect() {
            Ok(h) => Some(h),
            Err(e) if limits.wants_cgroup() => return Err(e.into()),
            Err(_) => None,
        };
        let cgroup = match &host {
            Some(h) => {
                let _ = h.sweep_stale();
                match h.create_with(
                    label,
                    &CgroupLimits {
                        memory_bytes: limits.memory_bytes,
                        cpu_millis: limits.cpu_millis,
                        pids: limits.pids,
                    },
                ) {
                    Ok(c) => Some(c),
                    Err(e) if limits.wants_cgroup() => return Err(e.into()),
                    Err(_) => None,
                }
            }
            None => None,
        };
        let area = match limits.disk_bytes {
            Some(b) => Some(WritableArea::create(area_dir, b)?),
            None => None,
        };
        Ok(Self {
            limits,
            cgroup,
            area_dir: area.as_ref().map(|_| area_dir.to_owned()),
            area,
            watchdog: None,
        })
    }

    /// Makes `spec` start its worker in the run's cgroup (unchanged without one); see
    /// [`WorkerCgroup::place`].
    pub fn place(&self, spec: crate::LaunchSpec) -> crate::LaunchSpec {
        match &self.cgroup {
            Some(c) => c.place(spec),
            None => spec,
        }
    }

    /// The worker cgroup, if any.
    pub fn cgroup(&self) -> Option<&WorkerCgroup> {
        self.cgroup.as_ref()
    }

    /// The writable area (with a disk ceiling): `upper()`/`work()` for the workspace overlay,
    /// `tmp()` for the sandbox `/tmp`.
    pub fn area(&self) -> Option<&WritableArea> {
        self.area.as_ref()
    }

    /// Starts the wall-time budget; call right after the launch. Returns `false` when a budget
    /// was requested but there is no cgroup to kill through (the caller must then enforce the
    /// budget by killing the worker's PID 1 itself).
    pub fn started(&mut self) -> bool {
        match (self.limits.wall, &self.cgroup) {
            (Some(w), Some(cg)) => {
                self.watchdog = Some(Watchdog::arm(cg.killer(), w));
                true
            }
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// Has the wall-time budget run out (the tree was killed)?
    pub fn wall_fired(&self) -> bool {
        self.watchdog.as_ref().is_some_and(Watchdog::fired)
    }

    /// Ends the run: stops the budget, kills whatever is left of the tree, reads the kernel's
    /// accounting, removes the cgroup and unmounts the area. `wall_fired_elsewhere` lets a
    /// caller without a cgroup say its own budget ended the run.
    ///
    /// Returns the report and any cleanup errors (each with its remedy); the report is
    /// complete either way.
    pub fn finish(
        mut self,
        exit: ExitOutcome,
        wall: Duration,
        wall_fired_elsewhere: bool,
    ) -> (RunReport, Vec<String>) {
        let mut errors = Vec::new();
        let fired = self.watchdog.take().is_some_and(Watchdog::disarm) || wall_fired_elsewhere;
        let usage = match self.cgroup.take() {
            Some(cg) => {
                if let Err(e) = cg.kill_all() {
                    errors.push(e.to_string());
                }
                let u = cg.usage();
                if let Err(e) = cg.remove() {
                    errors.push(e.to_string());
                }
                u
            }
            None => ResourceUsage::default(),
        };
        let disk = match self.area.take() {
            Some(a) => {
                let d = a.usage().ok();
                if let Err(e) = a.unmount() {
                    errors.push(e.to_string());
                }
                d
            }
            None => None,
        };
        if let Some(dir) = self.area_dir.take() {
            let _ = std::fs::remove_dir(dir);
        }
        let report = RunReport::new(
            exit,
            wall,
            fired,
            &usage,
            disk.as_ref(),
            self.limits.in_force(),
        );
        (report, errors)
    }
}

impl Drop for RunCeilings {
    fn drop(&mut self) {
        drop(self.watchdog.take());
        drop(self.cgroup.take());
        drop(self.area.take());
        if let Some(dir) = self.area_dir.take() {
            let _ = std::fs::remove_dir(dir);
        }
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

    /// Through the real launcher: a worker fills its /tmp (the area) and then sleeps past its
    /// wall-time budget; the report names the budget, shows the bytes and the area is gone.
    #[test]
    fn run_ceilings_end_to_end() {
        if !rustix::process::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "needs root under CI"
            );
            eprintln!("SKIPPED: run ceilings need root");
            return;
        }
        use crate::spec::{LaunchSpec, Stdio, TmpDir};
        let t = tempfile::tempdir().unwrap();
        let area_dir = t.path().join("area");
        let ws = t.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let limits = RunLimits {
            memory_bytes: Some(64 << 20),
            cpu_millis: Some(500),
            pids: Some(16),
            disk_bytes: Some(1 << 20),
            wall: Some(Duration::from_millis(400)),
            account: false,
        };
        let mut rc = RunCeilings::prepare(limits, "unit-run", &area_dir).unwrap();
        let tmp = rc.area().unwrap().tmp();
        let null = || {
            std::os::fd::OwnedFd::from(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .unwrap(),
            )
        };
        let spec = LaunchSpec::new(
            "/bin/sh",
            vec![
                "-c".into(),
                "dd if=/dev/zero of=/tmp/fill bs=64k count=64; trap '' TERM; sleep 100".into(),
            ],
            &ws,
        )
        .with_tmp(TmpDir::Host(tmp))
        .with_stdio(Stdio::Fds {
            stdin: None,
            stdout: Some(null()),
            stderr: Some(null()),
        });
        let spec = rc.place(spec);
        let start = std::time::Instant::now();
        let mut w = crate::launch(spec).unwrap();
        assert!(rc.started());
        let st = w.wait().unwrap();
        let wall = start.elapsed();
        let exit = ExitOutcome::from(st);
        let (r, errs) = rc.finish(exit, wall, false);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(r.exit, ExitOutcome::Signal(libc::SIGKILL));
        assert_eq!(r.ended_by, Some(LimitKind::WallTime));
        assert!(r.limits_hit.contains(&LimitKind::Disk), "{r:?}");
        assert!(r.bytes_written.unwrap() <= 1 << 20);
        assert!(r.bytes_written.unwrap() >= 900_000, "{r:?}");
        assert!(r.wall_time_ms >= 400 && r.wall_time_ms < 3000, "{r:?}");
        assert!(!crate::disk::is_tmpfs_mount(&area_dir));
        assert!(!area_dir.exists());
        eprintln!("{}", r.to_json());
    }
}
