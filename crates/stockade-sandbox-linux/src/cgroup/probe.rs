//! Live canaries proving each cgroup ceiling on this host.
//!
//! Each `prove_*` function creates a throw-away worker cgroup, has the launcher start a small
//! shell canary inside it, and succeeds only if the kernel really stopped the canary at its
//! limit. Nothing here starts processes itself: the caller passes a [`CanaryLauncher`] (the
//! backend's launcher, the only spawner). Every canary cgroup is killed and removed before the
//! function returns, whatever the outcome, and every step is bounded in time.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{CgroupError, CgroupHost, CgroupLimits, Watchdog, WorkerCgroup, wait_until};

/// How a canary process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryExit {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

/// A canary started by the launcher.
pub trait CanaryProcess {
    /// Its pid as seen from the supervisor.
    fn pid(&self) -> i32;
    /// Waits (and reaps) up to `timeout`; `None` while it still runs.
    fn wait_timeout(&mut self, timeout: Duration) -> Option<CanaryExit>;
}

/// Starts canaries; implemented by the backend's launcher.
pub trait CanaryLauncher {
    /// Starts `argv` (`argv[0]` an absolute path, stdin/stdout/stderr to `/dev/null`) so that it
    /// runs inside `cgroup` from its first instruction: the launcher calls
    /// [`WorkerCgroup::add_pid`] before it releases the child to `exec`.
    ///
    /// # Errors
    /// A launcher failure, described.
    fn launch(
        &mut self,
        argv: &[&str],
        cgroup: &WorkerCgroup,
    ) -> Result<Box<dyn CanaryProcess>, String>;
}

/// What a canary showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CeilingEvidence {
    /// Which ceiling (`memory`, `pids`, `cpu`, `process-tree`, `wall-time`).
    pub ceiling: &'static str,
    /// What was observed, for the probe report.
    pub detail: String,
    /// How long the proof took.
    pub elapsed: Duration,
}

/// Why a ceiling could not be proven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The cgroup machinery itself failed (its message names the remedy).
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The launcher could not start the canary.
    #[error(
        "cannot start the {ceiling} canary: {detail}; remedy: fix the launcher error above (the canary needs /bin/sh)"
    )]
    Launch {
        /// Which ceiling.
        ceiling: &'static str,
        /// The launcher's message.
        detail: String,
    },
    /// The canary was not stopped at its limit: the ceiling does not hold on this host.
    #[error(
        "{ceiling} ceiling not enforced: {detail}; remedy: this kernel's cgroup {ceiling} controller does not behave as required; use a kernel with a working controller and do not grant this protection"
    )]
    NotEnforced {
        /// Which ceiling.
        ceiling: &'static str,
        /// What was observed instead.
        detail: String,
    },
    /// The canary never reached its limit, so nothing was proven either way.
    #[error(
        "{ceiling} ceiling not proven: {detail}; remedy: the host is too loaded for the canary to reach its limit; run `stockade probe` again when it is quieter"
    )]
    Inconclusive {
        /// Which ceiling.
        ceiling: &'static str,
        /// What was observed.
        detail: String,
    },
}

const SH: &str = "/bin/sh";

fn launch(
    l: &mut dyn CanaryLauncher,
    ceiling: &'static str,
    script: &str,
    cg: &WorkerCgroup,
) -> Result<Box<dyn CanaryProcess>, ProbeError> {
    l.launch(&[SH, "-c", script], cg)
        .map_err(|detail| ProbeError::Launch { ceiling, detail })
}

fn not_enforced(ceiling: &'static str, detail: String) -> ProbeError {
    ProbeError::NotEnforced { ceiling, detail }
}

/// Kills the canary's tree, reaps the canary and removes the cgroup.
fn finish(cg: WorkerCgroup, p: &mut dyn CanaryProcess) -> Result<Option<CanaryExit>, ProbeError> {
    cg.kill_all()?;
    let exit = p.wait_timeout(Duration::from_secs(5));
    cg.remove()?;
    Ok(exit)
}

/// Memory: a `dd` that allocates and fills a 256 MiB buffer under a 32 MiB ceiling must be
/// OOM-killed, with the peak charge at or below the ceiling.
///
/// # Errors
/// [`ProbeError::NotEnforced`] when the balloon survives or the peak exceeds the ceiling.
pub fn prove_memory(
    host: &CgroupHost,
    l: &mut dyn CanaryLauncher,
) -> Result<CeilingEvidence, ProbeError> {
    const LIMIT: u64 = 32 << 20;
    let start = Instant::now();
    let cg = host.create_with(
        "probe-memory",
        &CgroupLimits {
            memory_bytes: Some(LIMIT),
            pids: Some(16),
            cpu_millis: None,
        },
    )?;
    let mut p = launch(
        l,
        "memory",
        "exec dd if=/dev/zero of=/dev/null bs=256M count=1",
        &cg,
    )?;
    let exit = p.wait_timeout(Duration::from_secs(20));
    let u = cg.usage();
    let exit = match exit {
        Some(e) => {
            finish(cg, p.as_mut())?;
            e
        }
        None => {
            finish(cg, p.as_mut())?;
            return Err(not_enforced(
                "memory",
                "a 256 MiB balloon under a 32 MiB ceiling was still running after 20 s".into(),
            ));
        }
    };
    let peak_ok = u.memory_peak_bytes.is_none_or(|p| p <= LIMIT);
    if exit != CanaryExit::Signal(libc::SIGKILL) || u.oom_kills == 0 || !peak_ok {
        return Err(not_enforced(
            "memory",
            format!(
                "balloon ended with {exit:?}, oom kills {}, peak {:?} bytes (ceiling {LIMIT})",
                u.oom_kills, u.memory_peak_bytes
            ),
        ));
    }
    Ok(CeilingEvidence {
        ceiling: "memory",
        detail: format!(
            "256 MiB balloon OOM-killed under a 32 MiB ceiling (oom kills {}, peak {} bytes)",
            u.oom_kills,
            u.memory_peak_bytes.unwrap_or(0)
        ),
        elapsed: start.elapsed(),
    })
}

/// PIDs: a shell forking background sleepers without end under `pids.max = 8` must be refused
/// (`pids.events max` counts the refusals) and never exceed 8 tasks.
///
/// # Errors
/// [`ProbeError::NotEnforced`] when no fork was refused or the peak exceeds the limit.
pub fn prove_pids(
    host: &CgroupHost,
    l: &mut dyn CanaryLauncher,
) -> Result<CeilingEvidence, ProbeError> {
    const LIMIT: u32 = 8;
    let start = Instant::now();
    let cg = host.create_with(
        "probe-pids",
        &CgroupLimits {
            memory_bytes: Some(256 << 20),
            pids: Some(LIMIT),
            cpu_millis: None,
        },
    )?;
    let mut p = launch(
        l,
        "pids",
        "while :; do /bin/sleep 30 & done 2>/dev/null",
        &cg,
    )?;
    let mut max_seen = 0usize;
    let hit = wait_until(Duration::from_secs(10), || {
        max_seen = max_seen.max(cg.pids().len());
        cg.sample();
        cg.usage().pids_limit_hits > 0
    });
    let u = cg.usage();
    finish(cg, p.as_mut())?;
    let peak = u.pids_peak.unwrap_or(max_seen as u64).max(max_seen as u64);
    if !hit || peak > u64::from(LIMIT) {
        return Err(not_enforced(
            "pids",
            format!(
                "fork loop under pids.max={LIMIT}: refusals {}, peak {peak} tasks",
                u.pids_limit_hits
            ),
        ));
    }
    Ok(CeilingEvidence {
        ceiling: "pids",
        detail: format!(
            "endless fork loop held at {peak} tasks under pids.max={LIMIT} ({} forks refused)",
            u.pids_limit_hits
        ),
        elapsed: start.elapsed(),
    })
}

/// CPU: a busy loop under a 0.05-CPU quota, run until the kernel has throttled it in at least
/// three periods (at most five seconds), must have used no more CPU time than the quota allows
/// for the elapsed wall time ([`cpu_allowance_us`]).
///
/// A small quota keeps the proof valid on a loaded host: the loop only has to get more than 5%
/// of one core for the quota to bind.
///
/// # Errors
/// [`ProbeError::NotEnforced`] when the loop used more than the quota allows;
/// [`ProbeError::Inconclusive`] when the loop never got enough CPU to reach its quota.
pub fn prove_cpu(
    host: &CgroupHost,
    l: &mut dyn CanaryLauncher,
) -> Result<CeilingEvidence, ProbeError> {
    const MILLIS: u32 = 50;
    // A 20 ms period (quota 1 ms) makes the quota bind within tens of milliseconds.
    const PERIOD_US: u64 = 20_000;
    let start = Instant::now();
    let cg = host.create_with(
        "probe-cpu",
        &CgroupLimits {
            memory_bytes: Some(64 << 20),
            pids: Some(8),
            cpu_millis: Some(MILLIS),
        },
    )?;
    cg.set_cpu_period(PERIOD_US, u64::from(MILLIS) * PERIOD_US / 1000)?;
    let launched = Instant::now();
    let mut p = launch(l, "cpu", "while :; do :; done", &cg)?;
    wait_until(Duration::from_secs(5), || {
        cg.usage().cpu_throttled_periods >= 3
    });
    cg.kill_all()?;
    let wall = launched.elapsed();
    let u = cg.usage();
    finish(cg, p.as_mut())?;
    let wall_us = u64::try_from(wall.as_micros()).unwrap_or(u64::MAX);
    let allowed_us = cpu_allowance_with_period_us(wall_us, MILLIS, PERIOD_US);
    let summary = format!(
        "busy loop under a {MILLIS} milli-CPU quota ({} ms period) used {} us of CPU in {wall_us} us of wall time (allowed {allowed_us} us), throttled in {} periods",
        PERIOD_US / 1000,
        u.cpu_time_us,
        u.cpu_throttled_periods
    );
    if u.cpu_time_us > allowed_us {
        return Err(not_enforced("cpu", summary));
    }
    if u.cpu_throttled_periods == 0 {
        return Err(ProbeError::Inconclusive {
            ceiling: "cpu",
            detail: summary,
        });
    }
    Ok(CeilingEvidence {
        ceiling: "cpu",
        detail: summary,
        elapsed: start.elapsed(),
    })
}

/// CPU time a quota of `millis` allows in `wall_us`: the quota of every period the run touched
/// (a partial period at each end gets a full quota), plus one scheduler tick (4 ms at
/// `HZ=250`) by which CFS may overrun before it throttles.
pub fn cpu_allowance_us(wall_us: u64, millis: u32) -> u64 {
    cpu_allowance_with_period_us(wall_us, millis, super::CPU_PERIOD_US)
}

/// [`cpu_allowance_us`] for a CFS period of `period_us`.
pub fn cpu_allowance_with_period_us(wall_us: u64, millis: u32, period_us: u64) -> u64 {
    let quota = u64::from(millis) * period_us / 1000;
    (wall_us.div_ceil(period_us.max(1)) + 1) * quota + 4_000
}

/// Reads whether `pid` still exists as a live (non-zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(Path::new(&format!("/proc/{pid}/stat"))) {
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Process tree: a canary that starts a `setsid` daemon ignoring SIGTERM/SIGHUP/SIGINT, a
/// double-forked orphan and a SIGSTOPped sleeper must leave no process behind after
/// [`WorkerCgroup::kill_all`].
///
/// # Errors
/// [`ProbeError::NotEnforced`] when any of them survives.
pub fn prove_tree(
    host: &CgroupHost,
    l: &mut dyn CanaryLauncher,
) -> Result<CeilingEvidence, ProbeError> {
    let start = Instant::now();
    let cg = host.create_with(
        "probe-tree",
        &CgroupLimits {
            memory_bytes: Some(128 << 20),
            pids: Some(32),
            cpu_millis: None,
        },
    )?;
    let script = "trap '' TERM HUP INT; \
        /usr/bin/setsid /bin/sh -c \"trap '' TERM HUP INT; /bin/sleep 1000\" & \
        ( /bin/sleep 1000 & ) ; \
        /bin/sleep 1000 & kill -STOP $! ; \
        /bin/sleep 1000";
    let mut p = launch(l, "process-tree", script, &cg)?;
    // sh, setsid'd sh, its sleep, the orphan, the stopped sleeper, the final sleep.
    let ready = wait_until(Duration::from_secs(10), || cg.pids().len() >= 6);
    let before = cg.pids();
    if !ready {
        finish(cg, p.as_mut())?;
        return Err(not_enforced(
            "process-tree",
            format!(
                "canary tree did not start: only {} tasks appeared",
                before.len()
            ),
        ));
    }
    let stats = cg.kill_all()?;
    let exit = p.wait_timeout(Duration::from_secs(5));
    // Orphans are reaped by their reaper; give it a moment.
    wait_until(Duration::from_secs(2), || !before.iter().any(|p| alive(*p)));
    let survivors: Vec<i32> = before.iter().copied().filter(|p| alive(*p)).collect();
    let left_in_cgroup = cg.pids();
    cg.remove()?;
    if !survivors.is_empty() || !left_in_cgroup.is_empty() {
        return Err(not_enforced(
            "process-tree",
            format!("after kill: alive {survivors:?}, still in cgroup {left_in_cgroup:?}"),
        ));
    }
    Ok(CeilingEvidence {
        ceiling: "process-tree",
        detail: format!(
            "setsid daemon ignoring TERM/HUP/INT, double-forked orphan and SIGSTOPped sleeper ({} tasks) all gone after cgroup kill in {} round(s), {} us; canary ended {exit:?}",
            before.len(),
            stats.rounds,
            stats.elapsed.as_micros()
        ),
        elapsed: start.elapsed(),
    })
}

/// Wall time: a sleeper ignoring SIGTERM under a 100 ms budget must be SIGKILLed by the
/// [`Watchdog`] within a second, children included.
///
/// # Errors
/// [`ProbeError::NotEnforced`] when the sleeper outlives its budget.
pub fn prove_wall_time(
    host: &CgroupHost,
    l: &mut dyn CanaryLauncher,
) -> Result<CeilingEvidence, ProbeError> {
    let budget = Duration::from_millis(100);
    let start = Instant::now();
    let cg = host.create_with(
        "probe-wall",
        &CgroupLimits {
            memory_bytes: Some(64 << 20),
            pids: Some(8),
            cpu_millis: None,
        },
    )?;
    let mut p = launch(
        l,
        "wall-time",
        "trap '' TERM; /bin/sleep 1000 & /bin/sleep 1000",
        &cg,
    )?;
    let launched = Instant::now();
    let dog = Watchdog::arm(cg.killer(), budget);
    let exit = p.wait_timeout(budget + Duration::from_secs(3));
    let ended = launched.elapsed();
    let fired = dog.disarm();
    let left = cg.pids();
    let reaped = match exit {
        Some(e) => Some(e),
        None => finish_exit(&cg, p.as_mut())?,
    };
    cg.remove()?;
    if !fired || exit.is_none() || !left.is_empty() {
        return Err(not_enforced(
            "wall-time",
            format!(
                "sleeper under a {} ms budget: watchdog fired {fired}, ended {reaped:?} after {} ms, left {left:?}",
                budget.as_millis(),
                ended.as_millis()
            ),
        ));
    }
    Ok(CeilingEvidence {
        ceiling: "wall-time",
        detail: format!(
            "sleeper ignoring SIGTERM killed ({reaped:?}) {} ms after start under a {} ms budget, with its child",
            ended.as_millis(),
            budget.as_millis()
        ),
        elapsed: start.elapsed(),
    })
}

fn finish_exit(
    cg: &WorkerCgroup,
    p: &mut dyn CanaryProcess,
) -> Result<Option<CanaryExit>, ProbeError> {
    cg.kill_all()?;
    Ok(p.wait_timeout(Duration::from_secs(5)))
}
