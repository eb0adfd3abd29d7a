//! The launcher: precompute, `clone` from a dedicated long-lived thread, hand-shake, release.
//!
//! Why a dedicated thread: the parent-death signal fires when the *thread* that created the
//! child exits, not the process. Tokio's blocking pool (and any short-lived thread) would kill
//! workers when it retires an idle thread, so every `clone` happens on one launcher thread that
//! lives as long as the process and never exits.

use std::ffi::{CString, OsString};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::LaunchError;
use crate::landlock::LandlockSupport;
use crate::plan::{self, SetupFailure, Stage};
use crate::spec::{LaunchSpec, Stdio};
use crate::sys::{self, RawExit, child::ChildCtx};

/// How a worker ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum ExitStatus {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

impl ExitStatus {
    /// Shell convention: the code, or 128 + signal.
    pub fn code(&self) -> i32 {
        match *self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled(s) => 128 + s,
        }
    }
}

/// A running sandboxed worker: PID 1 of its own PID namespace.
///
/// Dropping a `Worker` that was not waited for kills it with `SIGKILL` and reaps it; because
/// it is PID 1 of its namespace the kernel then kills every process it left behind.
#[derive(Debug)]
pub struct Worker {
    pid: i32,
    pidfd: OwnedFd,
    listeners: Vec<TcpListener>,
    status: Option<ExitStatus>,
}

impl Worker {
    /// Host PID of the worker.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The listeners created inside the sandbox network namespace, in spec order.
    pub fn take_listeners(&mut self) -> Vec<TcpListener> {
        std::mem::take(&mut self.listeners)
    }

    /// Sends `SIGKILL` (race-free through the pidfd). The whole PID namespace dies with it.
    pub fn kill(&self) -> std::io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        match sys::pidfd_send_signal(self.pidfd.as_raw_fd(), libc::SIGKILL) {
            Ok(()) => Ok(()),
            Err(e) if e.0 == libc::ESRCH => Ok(()),
            Err(e) => Err(e.io()),
        }
    }

    /// Waits for the worker to exit.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = match sys::wait_pid(self.pid).map_err(sys::Errno::io)? {
            RawExit::Exited(c) => ExitStatus::Exited(c),
            RawExit::Signaled(s) => ExitStatus::Signaled(s),
        };
        self.status = Some(s);
        Ok(s)
    }

    /// Waits at most `timeout`; `Ok(None)` when the worker is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if sys::poll_readable(self.pidfd.as_raw_fd(), ms).map_err(sys::Errno::io)? {
            return self.wait().map(Some);
        }
        Ok(None)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.kill();
            let _ = self.wait();
        }
    }
}

/// The default `PATH` inside the sandbox.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

type Job = (Prepared, mpsc::Sender<Result<Worker, LaunchError>>);

/// Everything precomputed on the caller's thread (all `Send`).
struct Prepared {
    spec_stdio: [Option<OwnedFd>; 3],
    plan: plan::MountPlan,
    landlock: Option<crate::sys::child::LandlockCtx>,
    seccomp: Vec<libc::sock_filter>,
    cwd: CString,
    exec_paths: Vec<CString>,
    argv: Vec<CString>,
    env: Vec<CString>,
    listen_ports: Vec<u16>,
    before_release: Option<crate::spec::BeforeRelease>,
    placement: Option<crate::spec::Placement>,
    setup_timeout: Duration,
    program: String,
    uid: u32,
    gid: u32,
}

fn launcher() -> Result<mpsc::Sender<Job>, LaunchError> {
    static TX: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("stockade-launcher".into())
            .spawn(move || {
                // Lives as long as the process: the sender is in a static and never dropped.
                while let Ok((prepared, reply)) = rx.recv() {
                    let _ = reply.send(launch_on_this_thread(prepared));
                }
            });
        if spawned.is_err() {
            // The receiver is dropped with the failed closure; sends will fail below.
        }
        Mutex::new(tx)
    });
    tx.lock()
        .map(|g| g.clone())
        .map_err(|_| LaunchError::LauncherGone)
}

/// Launches one worker. See [`LaunchSpec`] for what the sandbox contains.
///
/// Blocks until the worker has `exec`uted its program (or setup failed). Safe to call from
/// any thread, including async runtimes' blocking pools.
pub fn launch(spec: LaunchSpec) -> Result<Worker, LaunchError> {
    let prepared = prepare(spec)?;
    let tx = launcher()?;
    let (rtx, rrx) = mpsc::channel();
    tx.send((prepared, rtx))
        .map_err(|_| LaunchError::LauncherGone)?;
    rrx.recv().map_err(|_| LaunchError::LauncherGone)?
}

/// Like [`launch`], but clones on the calling thread instead of the shared launcher thread,
/// which saves starting that thread in a process that launches once.
///
/// The worker's parent-death signal fires when the *thread* that cloned it exits, so call this
/// only from a thread that outlives the worker: a program's main thread (`stockade exec`), never
/// an async runtime's worker or blocking-pool thread.
pub fn launch_from_main_thread(spec: LaunchSpec) -> Result<Worker, LaunchError> {
    launch_on_this_thread(prepare(spec)?)
}

fn prepare(mut spec: LaunchSpec) -> Result<Prepared, LaunchError> {
    spec.normalize()?;
    let (uid, gid) = sys::ids();
    let plan = plan::build(&spec, uid, gid)?;
    let landlock = crate::landlock::plan(
        LandlockSupport::detect(),
        &plan.workspace_inside,
        &plan.ro_inside,
        spec.restrict_tcp_connect,
    )?;
    let seccomp = crate::seccomp::program().map_err(|e| LaunchError::InvalidSpec(e.to_string()))?;
    let cwd = plan::cstr(plan.workspace_inside.as_os_str().as_bytes())?;

    // Environment: exactly what the spec lists; PATH defaults to a fixed system path.
    let mut env_pairs: Vec<(OsString, OsString)> = spec.env.clone();
    if !env_pairs.iter().any(|(k, _)| k == "PATH") {
        env_pairs.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    let mut env = Vec::with_capacity(env_pairs.len());
    for (k, v) in &env_pairs {
        let mut b = k.as_bytes().to_vec();
        b.push(b'=');
        b.extend_from_slice(v.as_bytes());
        env.push(plan::cstr(&b)?);
    }
    let path_value = env_pairs
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| DEFAULT_PATH.into());

    let prog = spec.program.as_bytes();
    let exec_paths = if prog.contains(&b'/') {
        let mut p = prog.to_vec();
        if !prog.starts_with(b"/") {
            // Relative to the workspace (the working directory).
            let mut abs = plan.workspace_inside.as_os_str().as_bytes().to_vec();
            abs.push(b'/');
            abs.extend_from_slice(prog);
            p = abs;
        }
        vec![plan::cstr(&p)?]
    } else {
        let mut v = Vec::new();
        for dir in path_value.as_bytes().split(|&b| b == b':') {
            let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
            let mut p = dir.to_vec();
            p.push(b'/');
            p.extend_from_slice(prog);
            v.push(plan::cstr(&p)?);
        }
        v
    };
    let mut argv = vec![plan::cstr(prog)?];
    for a in &spec.args {
        argv.push(plan::cstr(a.as_bytes())?);
    }

    let spec_stdio = match spec.stdio {
        Stdio::Inherit => [None, None, None],
        Stdio::Fds {
            stdin,
            stdout,
            stderr,
        } => [stdin, stdout, stderr],
    };
    Ok(Prepared {
        spec_stdio,
        plan,
        landlock,
        seccomp,
        cwd,
        exec_paths,
        argv,
        env,
        listen_ports: spec.listen_ports,
        before_release: spec.before_release,
        placement: spec.placement,
        setup_timeout: spec.setup_timeout,
        program: String::from_utf8_lossy(prog).into_owned(),
        uid,
        gid,
    })
}

fn sys_err(what: &'static str) -> impl FnOnce(sys::Errno) -> LaunchError {
    move |e| LaunchError::Sys {
        what,
        source: e.io(),
    }
}

fn write_file(path: &str, contents: &[u8]) -> Result<(), LaunchError> {
    std::fs::write(path, contents).map_err(|e| LaunchError::Sys {
        what: "write uid/gid map",
        source: e,
    })
}

fn launch_on_this_thread(p: Prepared) -> Result<Worker, LaunchError> {
    let (go_r, go_w) = sys::pipe_cloexec().map_err(sys_err("pipe"))?;
    let (st_r, st_w) = sys::pipe_cloexec().map_err(sys_err("pipe"))?;
    let sock = if p.listen_ports.is_empty() {
        None
    } else {
        Some(sys::seqpacket_pair().map_err(sys_err("socketpair"))?)
    };
    // Cgroup placement: open every `tasks` file here; the child writes into them.
    let mut cgroup_tasks: Vec<OwnedFd> = Vec::new();
    if let Some(pl) = &p.placement {
        if pl.tasks_files.len() > crate::spec::Placement::MAX {
            return Err(LaunchError::InvalidSpec(format!(
                "a placement names {} cgroup hierarchies; at most {}",
                pl.tasks_files.len(),
                crate::spec::Placement::MAX
            )));
        }
        for f in &pl.tasks_files {
            let fd = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(f)
                .map_err(|e| LaunchError::Sys {
                    what: "open a cgroup tasks file",
                    source: e,
                })?;
            // Only a file of a cgroup v1 hierarchy places anything: writing `0` to any other
            // file would "succeed" and leave the worker outside its ceilings.
            let on_cgroupfs =
                rustix::fs::fstatfs(&fd).is_ok_and(|st| st.f_type == libc::CGROUP_SUPER_MAGIC);
            if !on_cgroupfs || f.file_name().is_none_or(|n| n != "tasks") {
                return Err(LaunchError::InvalidSpec(format!(
                    "{} is not the tasks file of a cgroup v1 hierarchy",
                    f.display()
                )));
            }
            cgroup_tasks.push(OwnedFd::from(fd));
        }
    }
    let argv_ptrs: Vec<*const libc::c_char> = p
        .argv
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const libc::c_char> = p
        .env
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let stdio_raw = [
        p.spec_stdio[0].as_ref().map(|f| f.as_raw_fd()),
        p.spec_stdio[1].as_ref().map(|f| f.as_raw_fd()),
        p.spec_stdio[2].as_ref().map(|f| f.as_raw_fd()),
    ];
    let ctx = ChildCtx {
        go_read: sys::raw(&go_r),
        go_write: sys::raw(&go_w),
        status_read: sys::raw(&st_r),
        status_write: sys::raw(&st_w),
        fd_sock: sock.as_ref().map(|(_, c)| sys::raw(c)),
        fd_sock_parent: sock.as_ref().map(|(pa, _)| sys::raw(pa)),
        stdio: stdio_raw,
        steps: p.plan.steps,
        hostname: c"stockade".to_owned(),
        cwd: p.cwd,
        listen_ports: p.listen_ports.clone(),
        landlock: p.landlock,
        seccomp: p.seccomp,
        cgroup_tasks: cgroup_tasks.iter().map(sys::raw).collect(),
        exec_paths: p.exec_paths,
        argv: argv_ptrs,
        envp: envp_ptrs,
    };
    let start = Instant::now();
    let cloned = sys::clone_worker(&ctx).map_err(|e| LaunchError::Sys {
        what: "clone into new namespaces (are unprivileged user namespaces allowed?)",
        source: e.io(),
    })?;
    // Parent: close the child's ends.
    drop(go_r);
    drop(st_w);
    let sock_parent = sock.map(|(pa, c)| {
        drop(c);
        pa
    });
    drop(p.spec_stdio);
    drop(cgroup_tasks);
    let mut worker = Worker {
        pid: cloned.pid,
        pidfd: cloned.pidfd,
        listeners: Vec::new(),
        status: None,
    };

    // Identity maps: the caller's uid/gid map to themselves (no privilege gained anywhere).
    let pid = cloned.pid;
    write_file(&format!("/proc/{pid}/setgroups"), b"deny")?;
    write_file(
        &format!("/proc/{pid}/uid_map"),
        format!("{0} {0} 1\n", p.uid).as_bytes(),
    )?;
    write_file(
        &format!("/proc/{pid}/gid_map"),
        format!("{0} {0} 1\n", p.gid).as_bytes(),
    )?;
    if let Some(hook) = p.before_release {
        hook(pid).map_err(LaunchError::Hook)?;
    }
    sys::write_all(sys::raw(&go_w), b"g").map_err(sys_err("release child"))?;
    drop(go_w);

    // Wait for exec (EOF on the close-on-exec status pipe) or a failure record.
    let mut buf = [0u8; SetupFailure::LEN];
    let mut got = 0usize;
    loop {
        let left = p.setup_timeout.saturating_sub(start.elapsed());
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        if !sys::poll_readable(sys::raw(&st_r), ms).map_err(sys_err("poll status pipe"))? {
            return Err(LaunchError::SetupTimeout(p.setup_timeout));
        }
        let n = sys::read(sys::raw(&st_r), &mut buf[got..]).map_err(sys_err("read status pipe"))?;
        if n == 0 {
            break;
        }
        got += n;
        if got == SetupFailure::LEN {
            break;
        }
    }
    if got != 0 {
        let _ = worker.wait();
        let fail = SetupFailure::decode(&buf).ok_or_else(|| LaunchError::Setup {
            stage: "unknown",
            detail: String::new(),
            source: std::io::Error::other("truncated failure record"),
        })?;
        let source = std::io::Error::from_raw_os_error(fail.errno);
        if fail.stage == Stage::Exec {
            return Err(LaunchError::Exec {
                program: p.program,
                source,
            });
        }
        let detail = match fail.stage {
            Stage::Mount => ctx
                .steps
                .get(fail.index as usize)
                .map(|s| format!(" ({})", s.describe()))
                .unwrap_or_default(),
            Stage::Seal => format!(" ({})", crate::plan::seal_check_name(fail.index)),
            Stage::Cgroup => match p
                .placement
                .as_ref()
                .and_then(|pl| pl.tasks_files.get(fail.index as usize))
            {
                Some(f) => format!(" (join {})", f.display()),
                None => " (enter a new cgroup namespace)".to_owned(),
            },
            _ if fail.index != 0 => format!(" (#{})", fail.index),
            _ => String::new(),
        };
        return Err(LaunchError::Setup {
            stage: fail.stage.name(),
            detail,
            source,
        });
    }
    if let Some(sp) = sock_parent {
        for _ in &ctx.listen_ports {
            let fd = sys::recv_fd(sys::raw(&sp)).map_err(sys_err("receive listener"))?;
            worker.listeners.push(TcpListener::from(fd));
        }
    }
    Ok(worker)
}
