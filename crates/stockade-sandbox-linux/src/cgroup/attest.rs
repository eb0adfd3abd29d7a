//! Attesting the resource ceilings: the canaries of [`super::probe`] and
//! [`crate::disk::prove_disk`] run inside real sandboxes started by the launcher.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stockade_capabilities::{Protection, ProtectionStatus};

use super::probe::{CanaryExit, CanaryLauncher, CanaryProcess, ProbeError};
use super::{CgroupHost, WorkerCgroup};
use crate::launch::{ExitStatus, Worker};
use crate::spec::{LaunchSpec, Stdio};

/// Starts canaries through [`crate::launch`]: each runs in a full sandbox (namespaces,
/// Landlock, seccomp) with `workspace` as its working directory, and inside its worker cgroup
/// from its first instruction (the cgroup's attach hook is the launcher's before-release hook).
#[derive(Debug)]
pub struct SandboxCanaries {
    workspace: PathBuf,
}

impl SandboxCanaries {
    /// Canaries will use `workspace` (an existing, empty host directory) as their workspace.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
        }
    }
}

struct SandboxCanary(Worker);

impl CanaryProcess for SandboxCanary {
    fn pid(&self) -> i32 {
        self.0.pid()
    }

    fn wait_timeout(&mut self, timeout: Duration) -> Option<CanaryExit> {
        match self.0.wait_timeout(timeout) {
            Ok(Some(ExitStatus::Exited(c))) => Some(CanaryExit::Code(c)),
            Ok(Some(ExitStatus::Signaled(s))) => Some(CanaryExit::Signal(s)),
            _ => None,
        }
    }
}

fn dev_null() -> Result<OwnedFd, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| format!("open /dev/null: {e}"))
}

impl CanaryLauncher for SandboxCanaries {
    fn launch(
        &mut self,
        argv: &[&str],
        cgroup: &WorkerCgroup,
    ) -> Result<Box<dyn CanaryProcess>, String> {
        let (program, args) = argv.split_first().ok_or("empty argv")?;
        let spec = LaunchSpec::new(
            *program,
            args.iter().map(|a| std::ffi::OsString::from(*a)).collect(),
            &self.workspace,
        )
        .with_env("PATH", crate::DEFAULT_PATH)
        .with_env("HOME", crate::SANDBOX_HOME)
        .with_stdio(Stdio::Fds {
            stdin: Some(dev_null()?),
            stdout: Some(dev_null()?),
            stderr: Some(dev_null()?),
        });
        let spec = cgroup.place(spec);
        let w = crate::launch(spec).map_err(|e| e.to_string())?;
        Ok(Box::new(SandboxCanary(w)))
    }
}

/// The outcome of [`attest_ceilings`].
#[derive(Debug, Clone)]
pub struct CeilingAttestation {
    /// Status of [`Protection::Cpu`], [`Protection::Memory`], [`Protection::Pids`] and
    /// [`Protection::WritableDisk`], each from its own canary.
    pub statuses: Vec<(Protection, ProtectionStatus)>,
    /// The cgroup half of [`Protection::ProcessTree`] (cgroup kill of a daemon tree, and the
    /// wall-time budget); combine it with the PID-namespace teardown evidence: the protection
    /// holds only if both do.
    pub process_tree: ProtectionStatus,
    /// One `area PASS|FAIL detail` line per canary, for `stockade probe --json`.
    pub checks: Vec<String>,
}

fn unavailable(msg: String, fallback_remedy: &str) -> ProtectionStatus {
    let (reason, remedy) = match msg.split_once("; remedy: ") {
        Some((r, m)) => (r.to_owned(), m.to_owned()),
        None => (msg, fallback_remedy.to_owned()),
    };
    ProtectionStatus::Unavailable { reason, remedy }
}

/// Proves every resource ceiling on this host with live canaries (about two seconds), after
/// sweeping cgroups left by dead supervisors. `scratch` is a host directory for the canaries'
/// workspace and the disk canary's tmpfs (both removed before returning).
///
/// Never hangs: every canary step is bounded.
pub fn attest_ceilings(scratch: &Path) -> CeilingAttestation {
    let mut statuses = Vec::new();
    let mut checks = Vec::new();
    let cgroup_protections = [Protection::Memory, Protection::Pids, Protection::Cpu];

    let disk = match crate::disk::prove_disk(scratch) {
        Ok(ev) => {
            checks.push(format!("disk PASS {}", ev.detail));
            ProtectionStatus::Enforced {
                evidence: format!("size-limited tmpfs: {}", ev.detail),
            }
        }
        Err(e) => {
            checks.push(format!("disk FAIL {e}"));
            unavailable(e.to_string(), Protection::WritableDisk.default_remedy())
        }
    };
    statuses.push((Protection::WritableDisk, disk));

    let host = match CgroupHost::detect() {
        Ok(h) => h,
        Err(e) => {
            checks.push(format!("cgroup FAIL {e}"));
            for p in cgroup_protections {
                statuses.push((p, unavailable(e.to_string(), p.default_remedy())));
            }
            return CeilingAttestation {
                statuses,
                process_tree: unavailable(e.to_string(), Protection::ProcessTree.default_remedy()),
                checks,
            };
        }
    };
    if let Err(e) = host.sweep_stale() {
        checks.push(format!("cgroup FAIL sweeping stale cgroups: {e}"));
    }
    let ws = scratch.join(format!("stockade-ceiling-canary-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&ws) {
        let msg = format!("cannot create the canary workspace {}: {e}", ws.display());
        checks.push(format!("cgroup FAIL {msg}"));
        for p in cgroup_protections {
            statuses.push((p, unavailable(msg.clone(), p.default_remedy())));
        }
        return CeilingAttestation {
            statuses,
            process_tree: unavailable(msg, Protection::ProcessTree.default_remedy()),
            checks,
        };
    }
    let mut l = SandboxCanaries::new(&ws);
    let where_ = host.describe();
    type Prover =
        fn(&CgroupHost, &mut dyn CanaryLauncher) -> Result<super::CeilingEvidence, ProbeError>;
    let mut run = |area: &str, prove: Prover, remedy: &str| -> ProtectionStatus {
        match prove(&host, &mut l) {
            Ok(ev) => {
                checks.push(format!("{area} PASS {}", ev.detail));
                ProtectionStatus::Enforced {
                    evidence: format!("{} [{where_}]", ev.detail),
                }
            }
            Err(e) => {
                checks.push(format!("{area} FAIL {e}"));
                unavailable(e.to_string(), remedy)
            }
        }
    };
    let memory = run(
        "memory",
        super::probe::prove_memory,
        Protection::Memory.default_remedy(),
    );
    let pids = run(
        "pids",
        super::probe::prove_pids,
        Protection::Pids.default_remedy(),
    );
    let cpu = run(
        "cpu",
        super::probe::prove_cpu,
        Protection::Cpu.default_remedy(),
    );
    let tree = run(
        "tree-cgroup",
        super::probe::prove_tree,
        Protection::ProcessTree.default_remedy(),
    );
    let wall = run(
        "wall-time",
        super::probe::prove_wall_time,
        Protection::ProcessTree.default_remedy(),
    );
    let process_tree = match (tree, wall) {
        (
            ProtectionStatus::Enforced { evidence: a },
            ProtectionStatus::Enforced { evidence: b },
        ) => ProtectionStatus::Enforced {
            evidence: format!("cgroup kill: {a}; wall-time budget: {b}"),
        },
        (s @ ProtectionStatus::Unavailable { .. }, _) | (_, s) => s,
    };
    statuses.push((Protection::Memory, memory));
    statuses.push((Protection::Pids, pids));
    statuses.push((Protection::Cpu, cpu));
    let _ = std::fs::remove_dir_all(&ws);
    CeilingAttestation {
        statuses,
        process_tree,
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ceiling canary, through the real launcher, on this host (root needed).
    #[test]
    fn attest_ceilings_on_this_host() {
        if !rustix::process::geteuid().is_root() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "ceiling attestation needs root under CI"
            );
            eprintln!("SKIPPED: ceiling attestation needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let a = attest_ceilings(t.path());
        for c in &a.checks {
            eprintln!("{c}");
        }
        for (p, s) in &a.statuses {
            assert!(s.is_enforced(), "{p:?}: {s}");
        }
        assert!(a.process_tree.is_enforced(), "{}", a.process_tree);
        let host = CgroupHost::detect().unwrap();
        let me = format!("{}-", std::process::id());
        for b in host.base_dirs() {
            // Only the probe's own cgroups: other tests of this process run concurrently.
            for e in std::fs::read_dir(&b).unwrap().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                assert!(
                    !(n.starts_with(&me) && n.contains("-probe-")),
                    "left behind: {}",
                    e.path().display()
                );
            }
        }
    }
}
