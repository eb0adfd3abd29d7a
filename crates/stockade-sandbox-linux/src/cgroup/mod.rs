//! Per-worker control groups: memory, PID and CPU ceilings, usage accounting, and killing a
//! whole process tree through the kernel's own membership list.
//!
//! [`CgroupHost::detect`] finds where this process may create cgroups:
//!
//! - **cgroup v2** (unified hierarchy with the `memory`, `pids` and `cpu` controllers): as root
//!   under `<cgroup2 mount>/stockade/`; otherwise under `<own cgroup>/stockade/` when the
//!   process's own cgroup is delegated to it (writable, controllers available), for example
//!   inside `systemd-run --user --scope -p Delegate=yes`. Because of the v2 "no internal
//!   processes" rule, the supervisor first moves itself into a `supervisor` leaf of its own
//!   cgroup before it enables controllers for the subtree.
//! - **cgroup v1** (`memory`, `pids`, `cpu`, `cpuacct` and `freezer` hierarchies):
//!   `/sys/fs/cgroup/<controller>/stockade/<name>`, which needs root or a `stockade` directory
//!   that root created and handed over with `chown`.
//!
//! Each worker cgroup is named `<supervisor pid>-<supervisor start time>-<sequence>[-label]`, so
//! [`CgroupHost::sweep_stale`] can find and remove the cgroups a SIGKILLed supervisor left
//! behind without touching those of a live one (a reused pid has another start time).
//!
//! What this module does **not** do: it never starts a process (the launcher does, then calls
//! [`WorkerCgroup::add_pid`] before it releases the child), never scans `ps` output, and never
//! unmounts or rebinds a cgroup hierarchy.

mod attest;
mod parse;
mod probe;
pub mod watchdog;

pub use attest::{CeilingAttestation, SandboxCanaries, attest_ceilings};
pub use probe::{
    CanaryExit, CanaryLauncher, CanaryProcess, CeilingEvidence, ProbeError, cpu_allowance_us,
    prove_cpu, prove_memory, prove_pids, prove_tree, prove_wall_time,
};
pub use watchdog::Watchdog;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use stockade_policy::ResourceLimits;

use parse::{CgroupMount, MountKind, WorkerName};

/// The controllers a worker cgroup needs on cgroup v2.
const V2_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];
/// The hierarchies a worker cgroup needs on cgroup v1.
const V1_CONTROLLERS: [&str; 5] = ["memory", "pids", "cpu", "cpuacct", "freezer"];
/// The CFS period used for CPU quotas (100 ms, the kernel default).
const CPU_PERIOD_US: u64 = 100_000;
/// How long [`WorkerCgroup::kill_all`] keeps trying before it reports survivors.
const KILL_DEADLINE: Duration = Duration::from_secs(10);

/// Remedy shared by the errors that mean "this process may not create cgroups here".
const REMEDY_DELEGATE: &str = "run stockade as root, or inside a delegated cgroup v2 subtree \
     (`systemd-run --user --scope -p Delegate=yes stockade ...`), or have root create the subtree \
     and hand it over (cgroup v2: `mkdir /sys/fs/cgroup/stockade-$USER && chown -R $USER` it and \
     start stockade inside it; cgroup v1: `mkdir /sys/fs/cgroup/{memory,pids,cpu,cpuacct,freezer}/stockade` \
     and `chown -R $USER` each)";

/// Why cgroups cannot be used; every message names a remedy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    /// Neither a usable cgroup v2 nor a complete cgroup v1 setup was found.
    #[error(
        "no usable cgroup hierarchy: {reasons}; remedy: mount cgroup2 with the memory, pids and \
         cpu controllers (or the v1 memory, pids, cpu, cpuacct and freezer hierarchies) and {REMEDY_DELEGATE}"
    )]
    NoHierarchy {
        /// What was found wanting, per version.
        reasons: String,
    },
    /// A cgroup v2 subtree cannot be prepared for workers.
    #[error("cgroup v2 subtree {path} cannot host workers: {detail}; remedy: {REMEDY_DELEGATE}")]
    NotDelegated {
        /// The directory Stockade tried to use.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A limit value the kernel cannot express.
    #[error("invalid {what} limit {value}: {why}; remedy: pass a value within the stated range")]
    InvalidLimit {
        /// Which limit.
        what: &'static str,
        /// The rejected value.
        value: u64,
        /// Why it is rejected.
        why: &'static str,
    },
    /// A worker label with characters not allowed in a cgroup name.
    #[error(
        "invalid cgroup label {0:?}; remedy: use at most 64 ASCII letters, digits, `-`, `_` or `.`"
    )]
    InvalidLabel(String),
    /// A cgroup file operation failed.
    #[error(
        "cannot {op} {path}: {source}; remedy: check that the cgroup filesystem is mounted \
         read-write and {REMEDY_DELEGATE}"
    )]
    Io {
        /// What was attempted (`create`, `write memory.max to`, ...).
        op: String,
        /// The file or directory.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Processes were still alive in the cgroup after the kill deadline.
    #[error(
        "{count} process(es) still in {path} after {waited_ms} ms of SIGKILL rounds (pids {pids:?}); \
         remedy: they are stuck in uninterruptible sleep (hung NFS, FUSE or device I/O); fix the \
         stuck mount or device, then run `stockade` again to sweep the cgroup"
    )]
    Survivors {
        /// The cgroup directory.
        path: PathBuf,
        /// How many were left.
        count: usize,
        /// Up to eight of them.
        pids: Vec<i32>,
        /// How long the kill loop ran.
        waited_ms: u64,
    },
}

fn io_err(op: impl Into<String>, path: &Path, source: io::Error) -> CgroupError {
    CgroupError::Io {
        op: op.into(),
        path: path.to_owned(),
        source,
    }
}

/// Which cgroup version workers are placed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

/// Ceilings to apply to one worker cgroup; `None` leaves a controller unlimited (still accounted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory ceiling in bytes, swap included (v1: `memsw`; v2: `memory.swap.max = 0`).
    pub memory_bytes: Option<u64>,
    /// CPU quota in milli-CPUs (1000 = one core); at least 10.
    pub cpu_millis: Option<u32>,
    /// Maximum live tasks (processes and threads).
    pub pids: Option<u32>,
}

impl From<&ResourceLimits> for CgroupLimits {
    fn from(l: &ResourceLimits) -> Self {
        Self {
            memory_bytes: Some(l.memory_bytes),
            cpu_millis: Some(l.cpu_millis),
            pids: Some(l.pids),
        }
    }
}

impl CgroupLimits {
    fn validate(&self) -> Result<(), CgroupError> {
        if let Some(m) = self.memory_bytes
            && m < 1 << 20
        {
            return Err(CgroupError::InvalidLimit {
                what: "memory",
                value: m,
                why: "below 1 MiB no program can start",
            });
        }
        if let Some(c) = self.cpu_millis
            && !(10..=1_000_000).contains(&c)
        {
            return Err(CgroupError::InvalidLimit {
                what: "cpu",
                value: u64::from(c),
                why: "milli-CPUs must be between 10 and 1000000",
            });
        }
        if let Some(p) = self.pids
            && p == 0
        {
            return Err(CgroupError::InvalidLimit {
                what: "pids",
                value: 0,
                why: "at least one process is needed",
            });
        }
        Ok(())
    }

    /// The CFS quota in microseconds per [`CPU_PERIOD_US`].
    fn cpu_quota_us(&self) -> Option<u64> {
        self.cpu_millis.map(|m| u64::from(m) * CPU_PERIOD_US / 1000)
    }
}

/// What the kernel accounted for one worker cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ResourceUsage {
    /// Highest memory charge seen (v2 `memory.peak`; v1 `memory.memsw.max_usage_in_bytes` or
    /// `memory.max_usage_in_bytes`), when the kernel records it.
    pub memory_peak_bytes: Option<u64>,
    /// CPU time consumed by every task of the cgroup, in microseconds.
    pub cpu_time_us: u64,
    /// Highest number of live tasks (`pids.peak`, or the highest `pids.current` sampled).
    pub pids_peak: Option<u64>,
    /// Processes the OOM killer killed in this cgroup.
    pub oom_kills: u64,
    /// Times a fork or clone was refused because `pids.max` was reached.
    pub pids_limit_hits: u64,
    /// CFS periods in which the cgroup was throttled by its CPU quota.
    pub cpu_throttled_periods: u64,
}

/// The directories of one worker cgroup.
#[derive(Debug, Clone)]
enum Dirs {
    V2 {
        dir: PathBuf,
    },
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: PathBuf,
        cpuacct: PathBuf,
        freezer: PathBuf,
    },
}

impl Dirs {
    /// Every distinct directory (v1 `cpu` and `cpuacct` may share a mount).
    fn all(&self) -> Vec<&Path> {
        match self {
            Dirs::V2 { dir } => vec![dir],
            Dirs::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                freezer,
            } => {
                let mut v: Vec<&Path> = Vec::with_capacity(5);
                for d in [memory, pids, cpu, cpuacct, freezer] {
                    if !v.contains(&d.as_path()) {
                        v.push(d);
                    }
                }
                v
            }
        }
    }

    fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        if pid <= 0 {
            return Err(CgroupError::InvalidLimit {
                what: "pid",
                value: 0,
                why: "a process id is positive",
            });
        }
        for d in self.all() {
            write_file(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Pids of every task in the cgroup (and in any sub-cgroup), from the kernel's lists.
    fn members(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for d in self.all() {
            collect_members(d, &mut out, 0);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn kill_all(&self) -> Result<KillStats, CgroupError> {
        let start = Instant::now();
        let mut stats = KillStats::default();
        if let Dirs::V2 { dir } = self {
            let kill_file = dir.join("cgroup.kill");
            if kill_file.exists() {
                loop {
                    if self.members().is_empty() && !v2_populated(dir) {
                        stats.elapsed = start.elapsed();
                        return Ok(stats);
                    }
                    if start.elapsed() > KILL_DEADLINE {
                        break;
                    }
                    stats.rounds += 1;
                    write_file(&kill_file, "1")?;
                    wait_until(Duration::from_millis(100), || {
                        self.members().is_empty() && !v2_populated(dir)
                    });
                }
                return Err(self.survivors(start));
            }
        }
        // v1, or v2 without cgroup.kill (kernel < 5.14): freeze, SIGKILL every member, thaw.
        loop {
            let before = self.members();
            if before.is_empty() {
                stats.elapsed = start.elapsed();
                return Ok(stats);
            }
            if start.elapsed() > KILL_DEADLINE {
                return Err(self.survivors(start));
            }
            stats.rounds += 1;
            self.freeze(true)?;
            let frozen = self.members();
            for pid in &frozen {
                if let Some(p) = rustix::process::Pid::from_raw(*pid) {
                    // ESRCH: already gone; EPERM cannot happen for root or the owning user.
                    if rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok() {
                        stats.signalled += 1;
                    }
                }
            }
            self.freeze(false)?;
            wait_until(Duration::from_millis(100), || self.members().is_empty());
        }
    }

    /// Freezes (or thaws) the cgroup and waits briefly for the state to settle.
    fn freeze(&self, on: bool) -> Result<(), CgroupError> {
        match self {
            Dirs::V2 { dir } => {
                write_file(&dir.join("cgroup.freeze"), if on { "1" } else { "0" })?;
                if on {
                    wait_until(Duration::from_millis(500), || {
                        read_to_string(&dir.join("cgroup.events"))
                            .and_then(|t| parse::flat_keyed(&t, "frozen"))
                            == Some(1)
                    });
                }
            }
            Dirs::V1 { freezer, .. } => {
                let state = freezer.join("freezer.state");
                write_file(&state, if on { "FROZEN" } else { "THAWED" })?;
                if on {
                    // FREEZING persists while a task sits in uninterruptible sleep; killing
                    // it anyway is still right (the signal is delivered on wake-up).
                    wait_until(Duration::from_millis(500), || {
                        read_to_string(&state).is_some_and(|s| s.trim() == "FROZEN")
                    });
                }
            }
        }
        Ok(())
    }

    fn survivors(&self, start: Instant) -> CgroupError {
        let left = self.members();
        CgroupError::Survivors {
            path: self
                .all()
                .first()
                .map(|p| p.to_path_buf())
                .unwrap_or_default(),
            count: left.len(),
            pids: left.into_iter().take(8).collect(),
            waited_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Removes every directory (children first), retrying briefly while the kernel finishes
    /// tearing down exiting tasks (`EBUSY`).
    fn rmdir_all(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for d in self.all() {
            if let Err(e) = rmdir_tree(d)
                && first_err.is_none()
            {
                first_err = Some(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn collect_members(dir: &Path, out: &mut Vec<i32>, depth: u32) {
    for f in ["cgroup.procs", "tasks", "cgroup.threads"] {
        if let Some(t) = read_to_string(&dir.join(f)) {
            out.extend(parse::parse_pids(&t));
        }
    }
    if depth < 16
        && let Ok(rd) = fs::read_dir(dir)
    {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_members(&e.path(), out, depth + 1);
            }
        }
    }
}

fn v2_populated(dir: &Path) -> bool {
    read_to_string(&dir.join("cgroup.events"))
        .and_then(|t| parse::flat_keyed(&t, "populated"))
        .is_some_and(|p| p != 0)
}

fn rmdir_tree(dir: &Path) -> Result<(), CgroupError> {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path())?;
            }
        }
    }
    let start = Instant::now();
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && start.elapsed() < Duration::from_secs(2) =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(io_err("remove", dir, e)),
        }
    }
}

/// Polls `done` until it holds or `limit` passes; returns whether it held.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

fn read_to_string(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read_to_string(path).and_then(|t| parse::single_u64(&t))
}

fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(|e| {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        io_err(format!("write {value:?} to {file} in"), path, e)
    })
}

fn mkdir(path: &Path) -> Result<bool, CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("create", path, e)),
    }
}

/// Counts from one kill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KillStats {
    /// Freeze-and-kill (v1) or `cgroup.kill` (v2) rounds needed.
    pub rounds: u32,
    /// SIGKILLs delivered by the v1 path (0 on v2, where the kernel signals).
    pub signalled: u32,
    /// Time until the cgroup was empty.
    pub elapsed: Duration,
}

/// Where workers are created on this host.
#[derive(Debug)]
enum Layout {
    V2 {
        /// `<top>/stockade` (root) or `<own cgroup>/stockade` (delegated).
        base: PathBuf,
        /// The directory whose `cgroup.subtree_control` must enable the controllers first.
        parent: PathBuf,
        /// Set when not root: the supervisor must first leave `parent` for a leaf.
        delegated: bool,
    },
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: PathBuf,
        cpuacct: PathBuf,
        freezer: PathBuf,
    },
}

/// The supervisor's identity, written into every worker cgroup name.
#[derive(Debug, Clone, Copy)]
struct Supervisor {
    pid: i32,
    start_time: u64,
}

fn process_start_time(pid: i32) -> Option<u64> {
    read_to_string(Path::new(&format!("/proc/{pid}/stat"))).and_then(|s| parse::stat_start_time(&s))
}

/// This host's cgroup setup and the place Stockade creates worker cgroups in.
#[derive(Debug)]
pub struct CgroupHost {
    layout: Layout,
    me: Supervisor,
    seq: AtomicU64,
    prepared: Mutex<bool>,
}

impl CgroupHost {
    /// Detects the cgroup setup from `/proc/self/cgroup` and `/proc/self/mountinfo`.
    ///
    /// Reads only; the base directory is prepared on the first [`CgroupHost::create`].
    ///
    /// # Errors
    /// [`CgroupError::NoHierarchy`] when neither version offers every controller needed, and
    /// [`CgroupError::NotDelegated`] when v2 has them but this process may not use them.
    pub fn detect() -> Result<Self, CgroupError> {
        let cg = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| io_err("read", Path::new("/proc/self/cgroup"), e))?;
        let mi = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| io_err("read", Path::new("/proc/self/mountinfo"), e))?;
        let root = rustix::process::geteuid().is_root();
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let me = Supervisor {
            pid,
            start_time: process_start_time(pid).unwrap_or(0),
        };
        Self::detect_from(&cg, &mi, root, me)
    }

    fn detect_from(
        proc_cgroup: &str,
        mountinfo: &str,
        is_root: bool,
        me: Supervisor,
    ) -> Result<Self, CgroupError> {
        let lines = parse::parse_proc_cgroup(proc_cgroup);
        let mounts = parse::parse_mountinfo_cgroups(mountinfo);
        let mut reasons = Vec::new();
        match detect_v2(&lines, &mounts, is_root) {
            Ok(Some(layout)) => return Ok(Self::with_layout(layout, me)),
            Ok(None) => reasons.push("cgroup v2: not mounted".to_owned()),
            Err(V2Miss::Reason(r)) => reasons.push(format!("cgroup v2: {r}")),
            Err(V2Miss::Fatal(e)) => return Err(e),
        }
        match detect_v1(&mounts, is_root) {
            Ok(layout) => return Ok(Self::with_layout(layout, me)),
            Err(r) => reasons.push(format!("cgroup v1: {r}")),
        }
        Err(CgroupError::NoHierarchy {
            reasons: reasons.join("; "),
        })
    }

    fn with_layout(layout: Layout, me: Supervisor) -> Self {
        Self {
            layout,
            me,
            seq: AtomicU64::new(0),
            prepared: Mutex::new(false),
        }
    }

    /// The cgroup version workers are placed in.
    pub fn version(&self) -> CgroupVersion {
        match self.layout {
            Layout::V1 { .. } => CgroupVersion::V1,
            Layout::V2 { .. } => CgroupVersion::V2,
        }
    }

    /// The directories worker cgroups are created in (one for v2, one per controller for v1).
    pub fn base_dirs(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V2 { base, .. } => vec![base.clone()],
            Layout::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                freezer,
            } => {
                let mut v: Vec<PathBuf> = Vec::new();
                for d in [memory, pids, cpu, cpuacct, freezer] {
                    if !v.contains(d) {
                        v.push(d.clone());
                    }
                }
                v
            }
        }
    }

    /// One line saying where workers go, for probe evidence.
    pub fn describe(&self) -> String {
        match &self.layout {
            Layout::V2 {
                base, delegated, ..
            } => format!(
                "cgroup v2, workers under {} ({})",
                base.display(),
                if *delegated {
                    "delegated subtree"
                } else {
                    "root"
                }
            ),
            Layout::V1 { memory, .. } => format!(
                "cgroup v1, {}/<memory|pids|cpu|cpuacct|freezer>/stockade",
                memory
                    .parent()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new("?"))
                    .display()
            ),
        }
    }

    /// Creates the base directories (and, on v2, enables the controllers) once.
    fn prepare(&self) -> Result<(), CgroupError> {
        let mut done = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        if *done {
            return Ok(());
        }
        match &self.layout {
            Layout::V1 { .. } => {
                for b in self.base_dirs() {
                    mkdir(&b)?;
                }
            }
            Layout::V2 {
                base,
                parent,
                delegated,
            } => {
                if *delegated {
                    leave_for_leaf(parent, self.me.pid)?;
                }
                enable_controllers(parent)?;
                mkdir(base)?;
                enable_controllers(base)?;
            }
        }
        *done = true;
        Ok(())
    }

    /// Creates a worker cgroup with `limits` (every field of [`ResourceLimits`] is applied).
    ///
    /// `label` is appended to the generated name to help a human reading `/sys/fs/cgroup`.
    ///
    /// # Errors
    /// An invalid label or limit, or a cgroup filesystem error; nothing is left behind.
    pub fn create(
        &self,
        label: &str,
        limits: &ResourceLimits,
    ) -> Result<WorkerCgroup, CgroupError> {
        self.create_with(label, &CgroupLimits::from(limits))
    }

    /// Creates a worker cgroup with some ceilings possibly unset (accounting still works).
    ///
    /// # Errors
    /// As [`CgroupHost::create`].
    pub fn create_with(
        &self,
        label: &str,
        limits: &CgroupLimits,
    ) -> Result<WorkerCgroup, CgroupError> {
        if !label.is_empty() && !parse::valid_label(label) {
            return Err(CgroupError::InvalidLabel(label.to_owned()));
        }
        limits.validate()?;
        self.prepare()?;
        let name = WorkerName {
            pid: self.me.pid,
            start_time: self.me.start_time,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
        }
        .render(label);
        let dirs = self.dirs_for(&name);
        let mut created: Vec<PathBuf> = Vec::new();
        let result = (|| {
            for d in dirs.all() {
                if mkdir(d)? {
                    created.push(d.to_path_buf());
                } else {
                    return Err(io_err(
                        "create",
                        d,
                        io::Error::from(io::ErrorKind::AlreadyExists),
                    ));
                }
            }
            apply_limits(&dirs, limits)
        })();
        if let Err(e) = result {
            for d in created.iter().rev() {
                let _ = fs::remove_dir(d);
            }
            return Err(e);
        }
        Ok(WorkerCgroup {
            name,
            dirs,
            pids_peak_seen: AtomicU64::new(0),
            removed: false,
        })
    }

    fn dirs_for(&self, name: &str) -> Dirs {
        match &self.layout {
            Layout::V2 { base, .. } => Dirs::V2 {
                dir: base.join(name),
            },
            Layout::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                freezer,
            } => Dirs::V1 {
                memory: memory.join(name),
                pids: pids.join(name),
                cpu: cpu.join(name),
                cpuacct: cpuacct.join(name),
                freezer: freezer.join(name),
            },
        }
    }

    /// Kills and removes worker cgroups whose supervisor is gone (it was SIGKILLed or crashed).
    ///
    /// A cgroup is stale when the supervisor pid in its name no longer runs, or now belongs to
    /// a process with another start time. Cgroups of live supervisors, including this one, and
    /// directories not named by Stockade are never touched.
    ///
    /// # Errors
    /// The first cgroup that could not be emptied or removed; the others are still swept.
    pub fn sweep_stale(&self) -> Result<Vec<String>, CgroupError> {
        let mut names: Vec<String> = Vec::new();
        for base in self.base_dirs() {
            let Ok(rd) = fs::read_dir(&base) else {
                continue;
            };
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) && !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let mut swept = Vec::new();
        let mut first_err = None;
        for n in names {
            let Some(w) = WorkerName::parse(&n) else {
                continue;
            };
            let alive = if w.pid == self.me.pid && w.start_time == self.me.start_time {
                true
            } else {
                process_start_time(w.pid) == Some(w.start_time)
            };
            if alive {
                continue;
            }
            let dirs = self.dirs_for(&n);
            match dirs.kill_all().and_then(|_| dirs.rmdir_all()) {
                Ok(()) => swept.push(n),
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(swept), Err)
    }
}

fn apply_limits(dirs: &Dirs, limits: &CgroupLimits) -> Result<(), CgroupError> {
    match dirs {
        Dirs::V2 { dir } => {
            if let Some(m) = limits.memory_bytes {
                write_file(&dir.join("memory.max"), &m.to_string())?;
                // Swap counts against the ceiling: allow none beyond memory.max.
                let swap = dir.join("memory.swap.max");
                if swap.exists() {
                    write_file(&swap, "0")?;
                }
            }
            if let Some(p) = limits.pids {
                write_file(&dir.join("pids.max"), &p.to_string())?;
            }
            if let Some(q) = limits.cpu_quota_us() {
                write_file(&dir.join("cpu.max"), &format!("{q} {CPU_PERIOD_US}"))?;
            }
        }
        Dirs::V1 {
            memory, pids, cpu, ..
        } => {
            if let Some(m) = limits.memory_bytes {
                write_file(&memory.join("memory.limit_in_bytes"), &m.to_string())?;
                let memsw = memory.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    write_file(&memsw, &m.to_string())?;
                }
            }
            if let Some(p) = limits.pids {
                write_file(&pids.join("pids.max"), &p.to_string())?;
            }
            if let Some(q) = limits.cpu_quota_us() {
                write_file(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                write_file(&cpu.join("cpu.cfs_quota_us"), &q.to_string())?;
            }
        }
    }
    Ok(())
}

/// Enables the worker controllers for the children of `dir` (v2).
fn enable_controllers(dir: &Path) -> Result<(), CgroupError> {
    let sc = dir.join("cgroup.subtree_control");
    let have = read_to_string(&sc)
        .map(|t| parse::parse_controller_list(&t))
        .unwrap_or_default();
    let want: Vec<String> = V2_CONTROLLERS
        .iter()
        .filter(|c| !have.iter().any(|h| h == *c))
        .map(|c| format!("+{c}"))
        .collect();
    if want.is_empty() {
        return Ok(());
    }
    write_file(&sc, &want.join(" ")).map_err(|e| CgroupError::NotDelegated {
        path: dir.to_owned(),
        detail: format!("enabling {} failed: {e}", want.join(" ")),
    })
}

/// Moves the supervisor out of its own (delegated) cgroup into `supervisor/`, so that the
/// cgroup may enable controllers for its children (v2 "no internal processes" rule).
fn leave_for_leaf(own: &Path, my_pid: i32) -> Result<(), CgroupError> {
    let procs = read_to_string(&own.join("cgroup.procs")).unwrap_or_default();
    let members = parse::parse_pids(&procs);
    if members.is_empty() {
        return Ok(());
    }
    let others: Vec<i32> = members.iter().copied().filter(|p| *p != my_pid).collect();
    if !others.is_empty() {
        return Err(CgroupError::NotDelegated {
            path: own.to_owned(),
            detail: format!(
                "it also holds processes {others:?}, so controllers cannot be enabled for its \
                 children; start stockade as the only process of its own delegated scope"
            ),
        });
    }
    let leaf = own.join("supervisor");
    mkdir(&leaf)?;
    write_file(&leaf.join("cgroup.procs"), &my_pid.to_string())
}

enum V2Miss {
    Reason(String),
    Fatal(CgroupError),
}

fn detect_v2(
    lines: &[parse::ProcCgroupLine],
    mounts: &[CgroupMount],
    is_root: bool,
) -> Result<Option<Layout>, V2Miss> {
    let Some(mount) = mounts.iter().find(|m| m.kind == MountKind::V2) else {
        return Ok(None);
    };
    let missing = |dir: &Path| -> Vec<&'static str> {
        let have = read_to_string(&dir.join("cgroup.controllers"))
            .map(|t| parse::parse_controller_list(&t))
            .unwrap_or_default();
        V2_CONTROLLERS
            .iter()
            .copied()
            .filter(|c| !have.iter().any(|h| h == c))
            .collect()
    };
    if is_root {
        let top = mount.mount_point.clone();
        let miss = missing(&top);
        if !miss.is_empty() {
            return Err(V2Miss::Reason(format!(
                "{} offers no {} controller(s) (they are bound to v1 hierarchies or disabled)",
                top.display(),
                miss.join(", ")
            )));
        }
        return Ok(Some(Layout::V2 {
            base: top.join("stockade"),
            parent: top,
            delegated: false,
        }));
    }
    let Some(line) = lines.iter().find(|l| l.hierarchy == 0) else {
        return Err(V2Miss::Reason(
            "this process has no cgroup v2 membership".to_owned(),
        ));
    };
    let Some(own) = parse::cgroup_dir(mount, &line.path) else {
        return Err(V2Miss::Reason(format!(
            "own cgroup {} is outside the mounted hierarchy",
            line.path
        )));
    };
    let miss = missing(&own);
    if !miss.is_empty() {
        return Err(V2Miss::Reason(format!(
            "own cgroup {} offers no {} controller(s)",
            own.display(),
            miss.join(", ")
        )));
    }
    for f in ["", "cgroup.procs", "cgroup.subtree_control"] {
        let p = if f.is_empty() {
            own.clone()
        } else {
            own.join(f)
        };
        if rustix::fs::access(&p, rustix::fs::Access::WRITE_OK).is_err() {
            return Err(V2Miss::Fatal(CgroupError::NotDelegated {
                path: own.clone(),
                detail: format!(
                    "not root and {} is not writable (not delegated)",
                    p.display()
                ),
            }));
        }
    }
    Ok(Some(Layout::V2 {
        base: own.join("stockade"),
        parent: own,
        delegated: true,
    }))
}

fn detect_v1(mounts: &[CgroupMount], is_root: bool) -> Result<Layout, String> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut missing = Vec::new();
    for c in V1_CONTROLLERS {
        match mounts
            .iter()
            .find(|m| m.kind == MountKind::V1 && m.controllers.iter().any(|x| x == c))
        {
            Some(m) => found.push(m.mount_point.join("stockade")),
            None => missing.push(c),
        }
    }
    if !missing.is_empty() {
        return Err(format!("no {} hierarchy mounted", missing.join(", ")));
    }
    if !is_root {
        for b in &found {
            if rustix::fs::access(b, rustix::fs::Access::WRITE_OK).is_err() {
                return Err(format!(
                    "not root and {} does not exist or is not writable",
                    b.display()
                ));
            }
        }
    }
    let mut it = found.into_iter();
    let mut next = || it.next().unwrap_or_default();
    Ok(Layout::V1 {
        memory: next(),
        pids: next(),
        cpu: next(),
        cpuacct: next(),
        freezer: next(),
    })
}

/// A handle that can kill every process of a worker cgroup from another thread.
#[derive(Debug, Clone)]
pub struct CgroupKiller {
    dirs: Dirs,
}

impl CgroupKiller {
    /// Kills every task of the cgroup; see [`WorkerCgroup::kill_all`].
    ///
    /// # Errors
    /// As [`WorkerCgroup::kill_all`].
    pub fn kill_all(&self) -> Result<KillStats, CgroupError> {
        self.dirs.kill_all()
    }
}

/// One worker's cgroup. Dropping it kills its processes and removes it (best effort);
/// [`WorkerCgroup::remove`] does the same and reports failure.
#[derive(Debug)]
pub struct WorkerCgroup {
    name: String,
    dirs: Dirs,
    pids_peak_seen: AtomicU64,
    removed: bool,
}

impl WorkerCgroup {
    /// The cgroup's directory name (`<pid>-<start time>-<seq>[-label]`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cgroup's directories (one on v2, one per controller hierarchy on v1).
    pub fn paths(&self) -> Vec<PathBuf> {
        self.dirs.all().into_iter().map(Path::to_path_buf).collect()
    }

    /// The v2 directory, for `clone3(CLONE_INTO_CGROUP)`; `None` on v1.
    pub fn v2_dir(&self) -> Option<&Path> {
        match &self.dirs {
            Dirs::V2 { dir } => Some(dir),
            Dirs::V1 { .. } => None,
        }
    }

    /// Moves process `pid` (all its threads) into this cgroup, in every hierarchy.
    ///
    /// Call it after the launcher's `clone` and before the child is released to `exec`, so the
    /// worker's first instruction already runs under the ceilings.
    ///
    /// # Errors
    /// A rejected pid or a cgroup write error (the process may then be in some v1 hierarchies
    /// only: the caller must kill it).
    pub fn add_pid(&self, pid: i32) -> Result<(), CgroupError> {
        self.dirs.add_pid(pid)?;
        self.sample();
        Ok(())
    }

    /// [`WorkerCgroup::add_pid`] as an owned closure, for the launcher's before-release hook
    /// (`LaunchSpec::before_release = Some(Box::new(cgroup.attach_hook()))`).
    pub fn attach_hook(&self) -> impl FnOnce(i32) -> Result<(), String> + Send + 'static {
        let dirs = self.dirs.clone();
        move |pid| dirs.add_pid(pid).map_err(|e| e.to_string())
    }

    /// Makes `spec` start its worker in this cgroup, before the worker runs any instruction of
    /// its program. On v1 the worker joins through the `tasks` files itself, which avoids the
    /// RCU grace period that moving a process by pid costs (see [`crate::Placement`]); on v2
    /// the launcher's before-release hook writes the pid to `cgroup.procs`.
    pub fn place(&self, spec: crate::LaunchSpec) -> crate::LaunchSpec {
        match &self.dirs {
            Dirs::V1 { .. } => spec.with_placement(crate::Placement {
                tasks_files: self.dirs.all().iter().map(|d| d.join("tasks")).collect(),
            }),
            Dirs::V2 { .. } => spec.with_before_release(Box::new(self.attach_hook())),
        }
    }

    /// Sets the CPU quota with a CFS period other than the default 100 ms (the CPU canary uses
    /// a short period so the quota binds quickly).
    pub(crate) fn set_cpu_period(&self, period_us: u64, quota_us: u64) -> Result<(), CgroupError> {
        match &self.dirs {
            Dirs::V2 { dir } => {
                write_file(&dir.join("cpu.max"), &format!("{quota_us} {period_us}"))
            }
            Dirs::V1 { cpu, .. } => {
                write_file(&cpu.join("cpu.cfs_quota_us"), &quota_us.to_string())?;
                write_file(&cpu.join("cpu.cfs_period_us"), &period_us.to_string())
            }
        }
    }

    /// Pids of every task currently in the cgroup, as the kernel lists them.
    pub fn pids(&self) -> Vec<i32> {
        self.dirs.members()
    }

    /// A clonable handle for killing the tree from a watchdog thread.
    pub fn killer(&self) -> CgroupKiller {
        CgroupKiller {
            dirs: self.dirs.clone(),
        }
    }

    /// Kills every task of the cgroup and waits until the kernel lists none.
    ///
    /// v2: `cgroup.kill`. v1 (and v2 before 5.14): freeze, SIGKILL every member listed in
    /// `cgroup.procs`/`tasks`, thaw, repeat until empty. Double forks, `setsid`, ignored or
    /// blocked signals and stopped processes make no difference: membership is inherited and
    /// SIGKILL cannot be caught. Bounded by ten seconds.
    ///
    /// # Errors
    /// [`CgroupError::Survivors`] when tasks remain (uninterruptible sleep), or a write error.
    pub fn kill_all(&self) -> Result<KillStats, CgroupError> {
        self.dirs.kill_all()
    }

    /// Samples `pids.current`, for kernels without `pids.peak`. Call it periodically while the
    /// worker runs (the launcher's wait loop); [`WorkerCgroup::usage`] reports the highest.
    pub fn sample(&self) {
        let dir = match &self.dirs {
            Dirs::V2 { dir } => dir,
            Dirs::V1 { pids, .. } => pids,
        };
        if let Some(c) = read_u64(&dir.join("pids.current")) {
            self.pids_peak_seen.fetch_max(c, Ordering::Relaxed);
        }
    }

    /// What the kernel accounted so far. Read it after [`WorkerCgroup::kill_all`] and before
    /// [`WorkerCgroup::remove`] for the final numbers.
    pub fn usage(&self) -> ResourceUsage {
        let mut u = ResourceUsage::default();
        let sampled = self.pids_peak_seen.load(Ordering::Relaxed);
        let (pids_dir, pids_peak) = match &self.dirs {
            Dirs::V2 { dir } => {
                u.memory_peak_bytes = read_u64(&dir.join("memory.peak"));
                let events = read_to_string(&dir.join("memory.events")).unwrap_or_default();
                u.oom_kills = parse::flat_keyed(&events, "oom_kill").unwrap_or(0);
                let stat = read_to_string(&dir.join("cpu.stat")).unwrap_or_default();
                u.cpu_time_us = parse::flat_keyed(&stat, "usage_usec").unwrap_or(0);
                u.cpu_throttled_periods = parse::flat_keyed(&stat, "nr_throttled").unwrap_or(0);
                (dir, read_u64(&dir.join("pids.peak")))
            }
            Dirs::V1 {
                memory,
                pids,
                cpu,
                cpuacct,
                ..
            } => {
                u.memory_peak_bytes = read_u64(&memory.join("memory.memsw.max_usage_in_bytes"))
                    .or_else(|| read_u64(&memory.join("memory.max_usage_in_bytes")));
                let oom = read_to_string(&memory.join("memory.oom_control")).unwrap_or_default();
                u.oom_kills = parse::flat_keyed(&oom, "oom_kill").unwrap_or(0);
                u.cpu_time_us = read_u64(&cpuacct.join("cpuacct.usage")).unwrap_or(0) / 1000;
                let stat = read_to_string(&cpu.join("cpu.stat")).unwrap_or_default();
                u.cpu_throttled_periods = parse::flat_keyed(&stat, "nr_throttled").unwrap_or(0);
                (pids, read_u64(&pids.join("pids.peak")))
            }
        };
        let events = read_to_string(&pids_dir.join("pids.events")).unwrap_or_default();
        u.pids_limit_hits = parse::flat_keyed(&events, "max").unwrap_or(0);
        u.pids_peak = match (pids_peak, sampled) {
            (Some(p), s) => Some(p.max(s)),
            (None, 0) => None,
            (None, s) => Some(s),
        };
        u
    }

    /// Kills every task, waits until the cgroup is empty, and removes its directories.
    ///
    /// # Errors
    /// Survivors or a removal failure; the next start's [`CgroupHost::sweep_stale`] retries.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.dirs.kill_all()?;
        self.dirs.rmdir_all()
    }
}

impl Drop for WorkerCgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.dirs.kill_all();
            let _ = self.dirs.rmdir_all();
        }
    }
}

#[cfg(test)]
mod tests;
