//! What to launch: [`LaunchSpec`] and its parts.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::LaunchError;

/// A hook run by the launcher after `clone` and before the child is released to set itself up:
/// the argument is the child's host PID. Helper crates use it to place the child in a cgroup,
/// so every byte and process of the worker is accounted from its first instruction.
/// Returning an error aborts the launch (the child is killed and reaped).
pub type BeforeRelease = Box<dyn FnOnce(i32) -> Result<(), String> + Send>;

/// How the workspace appears inside the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkspaceView {
    /// A host directory bound read-write at the same path.
    Bind(PathBuf),
    /// An overlay mounted inside the sandbox's private mount namespace: `lower` read-only (a
    /// template), `upper` and `work` host directories that receive every write (the upper
    /// directory is exactly the candidate's changes and stays readable on the host after the
    /// worker is gone). Mounted at `target` inside the sandbox.
    Overlay {
        /// Read-only lower layer (host path).
        lower: PathBuf,
        /// Upper layer (host path, writable, empty at first).
        upper: PathBuf,
        /// Overlay work directory (host path, same filesystem as `upper`).
        work: PathBuf,
        /// Where the merged view appears inside the sandbox (also the working directory).
        target: PathBuf,
    },
}

/// The sandbox's `/tmp`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TmpDir {
    /// A fresh tmpfs private to the worker.
    #[default]
    Private,
    /// A host directory (for example a size-limited writable area) bound read-write as `/tmp`.
    Host(PathBuf),
}

/// Where the worker's standard streams go.
#[derive(Debug, Default)]
#[non_exhaustive]
pub enum Stdio {
    /// The launcher's own descriptors 0, 1 and 2.
    #[default]
    Inherit,
    /// Explicit descriptors (each `None` inherits that stream).
    Fds {
        /// Standard input.
        stdin: Option<OwnedFd>,
        /// Standard output.
        stdout: Option<OwnedFd>,
        /// Standard error.
        stderr: Option<OwnedFd>,
    },
}

/// Everything needed to start one sandboxed worker.
///
/// Build one with [`LaunchSpec::new`] and the `with_*` methods; [`crate::launch`] validates it
/// and fails with [`LaunchError::InvalidSpec`] before anything is created.
#[non_exhaustive]
pub struct LaunchSpec {
    /// Program: a path inside the sandbox, or a bare name searched on the sandbox `PATH`.
    pub program: OsString,
    /// Arguments after the program (argv[1..]).
    pub args: Vec<OsString>,
    /// The complete environment of the worker: nothing else is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// The workspace view (read-write, also the working directory).
    pub workspace: WorkspaceView,
    /// Host paths bound read-only at the same path.
    pub ro_paths: Vec<PathBuf>,
    /// The sandbox's `/tmp`.
    pub tmp: TmpDir,
    /// TCP ports to listen on at `127.0.0.1` inside the sandbox's network namespace (0 picks
    /// an ephemeral port); the listeners are handed to the caller, in order.
    pub listen_ports: Vec<u16>,
    /// With Landlock ABI 4 or later, restrict TCP `connect` inside the sandbox to exactly the
    /// listener ports (default `true`). This also blocks connections to servers the worker
    /// starts on loopback itself; turn it off for workloads that need that.
    pub restrict_tcp_connect: bool,
    /// Standard streams.
    pub stdio: Stdio,
    /// Hook run with the child PID before the child is released.
    pub before_release: Option<BeforeRelease>,
    /// Cgroup v1 `tasks` files the worker joins itself before any other setup step (see
    /// [`Placement`]).
    pub placement: Option<Placement>,
    /// Upper bound for the whole setup (clone to exec); the child is killed past it.
    pub setup_timeout: Duration,
}

impl std::fmt::Debug for LaunchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field(
                "env_names",
                &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("workspace", &self.workspace)
            .field("ro_paths", &self.ro_paths)
            .field("tmp", &self.tmp)
            .field("listen_ports", &self.listen_ports)
            .finish_non_exhaustive()
    }
}

impl LaunchSpec {
    /// A spec running `program` with `args` in `workspace` (bound read-write), with an empty
    /// environment, a private `/tmp`, no listeners and inherited stdio.
    pub fn new(
        program: impl Into<OsString>,
        args: Vec<OsString>,
        workspace: impl Into<PathBuf>,
    ) -> Self {
        LaunchSpec {
            program: program.into(),
            args,
            env: Vec::new(),
            workspace: WorkspaceView::Bind(workspace.into()),
            ro_paths: Vec::new(),
            tmp: TmpDir::Private,
            listen_ports: Vec::new(),
            restrict_tcp_connect: true,
            stdio: Stdio::Inherit,
            before_release: None,
            placement: None,
            setup_timeout: Duration::from_secs(10),
        }
    }

    /// Sets one environment variable (replacing an earlier value of the same name).
    pub fn with_env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let name = name.into();
        self.env.retain(|(k, _)| *k != name);
        self.env.push((name, value.into()));
        self
    }

    /// Adds a read-only host path.
    pub fn with_ro(mut self, path: impl Into<PathBuf>) -> Self {
        self.ro_paths.push(path.into());
        self
    }

    /// Replaces the workspace view.
    pub fn with_workspace(mut self, view: WorkspaceView) -> Self {
        self.workspace = view;
        self
    }

    /// Uses a host directory as `/tmp`.
    pub fn with_tmp(mut self, tmp: TmpDir) -> Self {
        self.tmp = tmp;
        self
    }

    /// Adds a listener port inside the sandbox network namespace.
    pub fn with_listener(mut self, port: u16) -> Self {
        self.listen_ports.push(port);
        self
    }

    /// Sets the standard streams.
    pub fn with_stdio(mut self, stdio: Stdio) -> Self {
        self.stdio = stdio;
        self
    }

    /// Sets the before-release hook (for example: add the PID to a cgroup).
    pub fn with_before_release(mut self, hook: BeforeRelease) -> Self {
        self.before_release = Some(hook);
        self
    }

    /// Sets the cgroup placement (see [`Placement`]).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    /// The workspace path inside the sandbox (also the working directory).
    pub fn workspace_inside(&self) -> &Path {
        match &self.workspace {
            WorkspaceView::Bind(p) => p,
            WorkspaceView::Overlay { target, .. } => target,
        }
    }

    /// Canonicalizes host paths and rejects specs the launcher cannot honour safely.
    pub(crate) fn normalize(&mut self) -> Result<(), LaunchError> {
        let canon = |p: &Path, what: &str| -> Result<PathBuf, LaunchError> {
            if !p.is_absolute() {
                return Err(LaunchError::InvalidSpec(format!(
                    "{what} {} is not an absolute path",
                    p.display()
                )));
            }
            std::fs::canonicalize(p)
                .map_err(|e| LaunchError::InvalidSpec(format!("{what} {}: {e}", p.display())))
        };
        match &mut self.workspace {
            WorkspaceView::Bind(p) => {
                *p = canon(p, "workspace")?;
                if !p.is_dir() {
                    return Err(LaunchError::InvalidSpec(format!(
                        "workspace {} is not a directory",
                        p.display()
                    )));
                }
            }
            WorkspaceView::Overlay {
                lower,
                upper,
                work,
                target,
            } => {
                *lower = canon(lower, "overlay lower layer")?;
                *upper = canon(upper, "overlay upper layer")?;
                *work = canon(work, "overlay work directory")?;
                if !target.is_absolute() {
                    return Err(LaunchError::InvalidSpec(
                        "overlay target must be absolute".into(),
                    ));
                }
            }
        }
        check_target(self.workspace_inside(), "workspace")?;
        if let TmpDir::Host(d) = &mut self.tmp {
            *d = canon(d, "tmp directory")?;
        }
        let mut ro = Vec::with_capacity(self.ro_paths.len());
        for p in &self.ro_paths {
            let c = canon(p, "read-only path")?;
            check_target(&c, "read-only path")?;
            ro.push(c);
        }
        ro.sort();
        ro.dedup();
        self.ro_paths = ro;
        if self.listen_ports.len() > crate::sys::child::MAX_LISTENERS {
            return Err(LaunchError::InvalidSpec(format!(
                "at most {} listeners per worker",
                crate::sys::child::MAX_LISTENERS
            )));
        }
        if self.program.is_empty() {
            return Err(LaunchError::InvalidSpec("empty program name".into()));
        }
        for (k, _) in &self.env {
            let k = k.as_encoded_bytes();
            if k.is_empty() || k.contains(&b'=') {
                return Err(LaunchError::InvalidSpec(
                    "environment variable names must be non-empty and contain no '='".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Paths the launcher owns inside the sandbox: a caller bind may not replace them.
fn check_target(p: &Path, what: &str) -> Result<(), LaunchError> {
    let reserved = ["/proc", "/dev", "/sys", "/tmp"];
    if p == Path::new("/") {
        return Err(LaunchError::InvalidSpec(format!("{what} may not be /")));
    }
    for r in reserved {
        let r = Path::new(r);
        if p == r || (p.starts_with(r) && r != Path::new("/tmp")) {
            return Err(LaunchError::InvalidSpec(format!(
                "{what} {} would cover {}, which the sandbox provides itself",
                p.display(),
                r.display()
            )));
        }
    }
    Ok(())
}

/// Puts the worker into its cgroups from the inside (cgroup v1).
///
/// Moving a process into a cgroup by writing its pid to `cgroup.procs` takes the kernel's
/// global threadgroup lock for writing, which waits for an RCU grace period: several
/// milliseconds on an idle host, the largest single cost of a launch. A single-threaded
/// process moving *itself* through a v1 `tasks` file (writing `0`) needs no such lock. So the
/// launcher opens every `tasks` file before `clone` (the descriptors carry its credentials for
/// the kernel's permission check and close at `exec`), and the child, first thing after it is
/// released and before any other setup step, writes `0` into each, then enters its own cgroup
/// namespace rooted there. A failed write fails the launch. On cgroup v2 there is no such
/// file (`cgroup.threads` needs threaded mode); the before-release hook attaches instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// v1 `tasks` files, one per hierarchy (at most [`Placement::MAX`]).
    pub tasks_files: Vec<PathBuf>,
}

impl Placement {
    /// Most hierarchies one placement may name.
    pub const MAX: usize = 8;
}
