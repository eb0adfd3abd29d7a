//! [`LinuxBackend`]: the `stockade-sandbox` contract on top of the launcher, the overlay, the
//! size-limited writable area and worker cgroups.
//!
//! Layout under the backend's state directory:
//! - `templates/<key>/files/` — the byte files a template spec supplies (an extra lower layer);
//!   written once into a temporary directory and renamed into place.
//! - `sessions/<id>/area/` — the session's size-limited tmpfs ([`WritableArea`]) holding the
//!   overlay `upper/` and `work/` directories and the sandbox's `/tmp`: one ceiling bounds every
//!   byte the worker can write.
//! - `sessions/<id>/merged/` — the overlay (lower: the template, upper: `area/upper`), mounted
//!   on the host so the supervisor can read and write session files without a worker; it is
//!   bound read-write at the same path inside each worker.
//!
//! Every spawn gets fresh namespaces (from the launcher) and its own cgroup carrying the
//! policy's CPU, memory and PID ceilings; the policy's wall time arms a watchdog that kills the
//! whole cgroup. `delete` unmounts the overlay and the writable area and removes the session
//! directory; templates are never touched by a session.

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use stockade_capabilities::{Admission, SandboxCapabilities};
use stockade_policy::SandboxPolicy;
use stockade_sandbox::{
    Backend, EntryKind, ExitStatus, Launch, RawProcess, RawSession, SandboxError, SessionPath,
    SessionRecord, StdinMode, Template, TemplateKey, TemplateSpec,
};

use crate::cgroup::{CgroupHost, CgroupKiller, WorkerCgroup, watchdog::Watchdog};
use crate::disk::WritableArea;
use crate::probe::{self, BACKEND_NAME};
use crate::spec::{LaunchSpec, Stdio, TmpDir, WorkspaceView};

fn backend_err(message: impl Into<String>) -> SandboxError {
    SandboxError::Backend {
        backend: BACKEND_NAME.into(),
        message: message.into(),
    }
}

/// The Linux namespaces backend.
#[derive(Debug, Clone)]
pub struct LinuxBackend {
    state_dir: PathBuf,
    canary: Option<PathBuf>,
}

impl LinuxBackend {
    /// A backend keeping its templates and sessions under `state_dir` (created if missing).
    /// The probe uses the current executable as canary (see [`crate::probe()`]).
    pub fn new(state_dir: impl Into<PathBuf>) -> Result<LinuxBackend, SandboxError> {
        let state_dir = state_dir.into();
        for sub in ["templates", "sessions"] {
            let p = state_dir.join(sub);
            fs::create_dir_all(&p)
                .map_err(|e| SandboxError::io(format!("create {}", p.display()), e))?;
        }
        Ok(LinuxBackend {
            state_dir,
            canary: None,
        })
    }

    /// Uses `canary` (a binary that calls [`crate::canary::run_if_requested`] first) for the
    /// probe instead of the current executable.
    pub fn with_canary(mut self, canary: impl Into<PathBuf>) -> LinuxBackend {
        self.canary = Some(canary.into());
        self
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    fn files_dir(&self, key: &TemplateKey) -> PathBuf {
        self.state_dir
            .join("templates")
            .join(key.as_str())
            .join("files")
    }
}

fn unique_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_le_bytes());
    h.update(&nanos.to_le_bytes());
    h.update(&n.to_le_bytes());
    h.finalize().to_hex()[..16].to_string()
}

impl Backend for LinuxBackend {
    fn name(&self) -> &str {
        BACKEND_NAME
    }

    fn probe(&self) -> SandboxCapabilities {
        match &self.canary {
            Some(c) => probe::probe_with(c).capabilities,
            None => probe::probe().capabilities,
        }
    }

    fn prewarm(&self, spec: &TemplateSpec) -> Result<Template, SandboxError> {
        let meta = fs::metadata(&spec.lower).map_err(|e| {
            SandboxError::io(format!("template lower layer {}", spec.lower.display()), e)
        })?;
        if !meta.is_dir() {
            return Err(backend_err(format!(
                "template lower layer {} is not a directory",
                spec.lower.display()
            )));
        }
        let template = Template::new(BACKEND_NAME, spec, spec.lower.clone());
        if spec.files.is_empty() {
            return Ok(template);
        }
        let files = self.files_dir(template.key());
        if files.is_dir() {
            return Ok(template); // written once under its content key, never modified
        }
        let key_dir = files.parent().map(Path::to_path_buf).unwrap_or_default();
        let staging = self.state_dir.join("templates").join(format!(
            ".staging-{}-{}",
            template.key(),
            unique_id()
        ));
        let write = || -> Result<(), SandboxError> {
            for (rel, bytes) in &spec.files {
                let p = SessionPath::parse(rel, None)?;
                let dest = staging.join("files").join(p.as_relative());
                if let Some(parent) = dest.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|e| SandboxError::io(format!("create {}", parent.display()), e))?;
                }
                fs::write(&dest, bytes)
                    .map_err(|e| SandboxError::io(format!("write {}", dest.display()), e))?;
            }
            match fs::rename(&staging, &key_dir) {
                Ok(()) => Ok(()),
                // Another prewarm of the same key won the race: its content is identical.
                Err(_) if files.is_dir() => Ok(()),
                Err(e) => Err(SandboxError::io(
                    format!("publish template {}", key_dir.display()),
                    e,
                )),
            }
        };
        let result = write();
        let _ = fs::remove_dir_all(&staging);
        result.map(|()| template)
    }

    fn create(
        &self,
        template: &Template,
        policy: &SandboxPolicy,
        admission: Admission,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        if template.backend() != BACKEND_NAME {
            return Err(SandboxError::ForeignTemplate {
                key: template.key().to_string(),
                template_backend: template.backend().to_owned(),
                backend: BACKEND_NAME.into(),
            });
        }
        if admission.backend().name != BACKEND_NAME {
            return Err(backend_err(format!(
                "admission was granted by backend `{}`",
                admission.backend().name
            )));
        }
        let dir = self.state_dir.join("sessions").join(unique_id());
        let mut lowers = Vec::new();
        let files = self.files_dir(template.key());
        if files.is_dir() {
            lowers.push(files);
        }
        lowers.push(template.lower().to_path_buf());
        LinuxSession::create(dir, &lowers, policy).map(|s| Box::new(s) as Box<dyn RawSession>)
    }

    fn reattach(
        &self,
        template: &Template,
        record: &SessionRecord,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        let state: SessionState = serde_json::from_value(record.backend_state.clone())
            .map_err(|e| backend_err(format!("session record: {e}")))?;
        if !state.dir.starts_with(self.state_dir.join("sessions")) {
            return Err(backend_err(format!(
                "session directory {} is outside this backend's state",
                state.dir.display()
            )));
        }
        let _ = template;
        LinuxSession::reopen(state).map(|s| Box::new(s) as Box<dyn RawSession>)
    }
}

/// What a session record keeps so a stopped session can be reattached.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SessionState {
    dir: PathBuf,
    lowers: Vec<PathBuf>,
    ro_paths: Vec<PathBuf>,
    limits: stockade_policy::ResourceLimits,
    wall_time_ms: u64,
}

/// A live Linux session.
pub struct LinuxSession {
    state: SessionState,
    area: Option<WritableArea>,
    merged_mounted: bool,
    merged: PathBuf,
    merged_str: String,
    live: Arc<Mutex<Vec<CgroupKiller>>>,
    cgroups: CgroupHost,
}

impl std::fmt::Debug for LinuxSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxSession")
            .field("dir", &self.state.dir)
            .finish_non_exhaustive()
    }
}

/// Mounts the session overlay with several lower layers (topmost first) and the options that
/// keep the upper layer plain data for capture (ADR 0070).
fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    target: &Path,
) -> Result<(), SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let mut data = b"lowerdir=".to_vec();
    for (i, l) in lowers.iter().enumerate() {
        if i > 0 {
            data.push(b':');
        }
        let canon = fs::canonicalize(l)
            .map_err(|e| SandboxError::io(format!("lower layer {}", l.display()), e))?;
        data.extend(crate::overlay::opt_escape(&canon));
    }
    data.extend_from_slice(b",upperdir=");
    data.extend(crate::overlay::opt_escape(upper));
    data.extend_from_slice(b",workdir=");
    data.extend(crate::overlay::opt_escape(work));
    data.extend_from_slice(b",redirect_dir=off,metacopy=off,index=off,xino=off");
    let data = crate::plan::cstr(&data).map_err(|e| backend_err(e.to_string()))?;
    let target_c =
        crate::plan::cstr(target.as_os_str().as_bytes()).map_err(|e| backend_err(e.to_string()))?;
    crate::sys::mount(c"overlay", &target_c, c"overlay", (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong, Some(&data)).map_err(|e| SandboxError::Unsupported {
        backend: BACKEND_NAME.into(),
        what: "mount the session overlay".into(),
        remedy: format!("overlayfs mount failed ({}); run as root on a kernel with overlayfs, sessions are never silently copied", e.io()),
    })
}

fn unmount(target: &Path) -> Result<(), SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let c =
        crate::plan::cstr(target.as_os_str().as_bytes()).map_err(|e| backend_err(e.to_string()))?;
    crate::sys::umount_detach(&c)
        .map_err(|e| SandboxError::io(format!("unmount {}", target.display()), e.io()))
}

impl LinuxSession {
    fn create(
        dir: PathBuf,
        lowers: &[PathBuf],
        policy: &SandboxPolicy,
    ) -> Result<LinuxSession, SandboxError> {
        let cgroups = CgroupHost::detect().map_err(|e| backend_err(e.to_string()))?;
        fs::create_dir_all(dir.join("area"))
            .map_err(|e| SandboxError::io(format!("create {}", dir.display()), e))?;
        let state = SessionState {
            dir: dir.clone(),
            lowers: lowers.to_vec(),
            ro_paths: policy
                .read_only_host_paths()
                .iter()
                .map(PathBuf::from)
                .collect(),
            limits: *policy.limits(),
            wall_time_ms: u64::try_from(policy.wall_time().as_millis()).unwrap_or(u64::MAX),
        };
        let built = Self::mount_all(state, cgroups);
        if built.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        built
    }

    fn reopen(state: SessionState) -> Result<LinuxSession, SandboxError> {
        let cgroups = CgroupHost::detect().map_err(|e| backend_err(e.to_string()))?;
        // The writable area and overlay stay mounted across stop; reattach reuses them.
        let merged = state.dir.join("merged");
        let area_root = state.dir.join("area");
        let mounted = fs::read_to_string("/proc/self/mountinfo")
            .map(|m| m.contains(&*merged.to_string_lossy()))
            .unwrap_or(false);
        if !mounted {
            return Err(backend_err(format!(
                "session {} is not mounted any more (host rebooted?); it cannot be reattached",
                state.dir.display()
            )));
        }
        let area = WritableArea::adopt(&area_root, state.limits.disk_bytes);
        let merged_str = merged.to_string_lossy().into_owned();
        Ok(LinuxSession {
            state,
            area: Some(area),
            merged_mounted: true,
            merged,
            merged_str,
            live: Arc::default(),
            cgroups,
        })
    }

    fn mount_all(state: SessionState, cgroups: CgroupHost) -> Result<LinuxSession, SandboxError> {
        let area = WritableArea::create(&state.dir.join("area"), state.limits.disk_bytes)
            .map_err(|e| backend_err(e.to_string()))?;
        let merged = state.dir.join("merged");
        if let Err(e) = fs::create_dir_all(&merged) {
            let _ = area.unmount();
            return Err(SandboxError::io(format!("create {}", merged.display()), e));
        }
        if let Err(e) = mount_overlay(&state.lowers, &area.upper(), &area.work(), &merged) {
            let _ = area.unmount();
            return Err(e);
        }
        let merged_str = merged.to_string_lossy().into_owned();
        Ok(LinuxSession {
            state,
            area: Some(area),
            merged_mounted: true,
            merged,
            merged_str,
            live: Arc::default(),
            cgroups,
        })
    }

    fn open_beneath(
        &self,
        path: &SessionPath,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, SandboxError> {
        let root = rustix::fs::open(
            &self.merged,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| SandboxError::io(format!("open {}", self.merged.display()), e.into()))?;
        rustix::fs::openat2(
            &root,
            path.as_relative(),
            flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| SandboxError::io(format!("open {path} in session"), e.into()))
    }

    /// The session's isolated input directory on the host; bound read-only at the same path
    /// inside the sandbox, outside the workspace and the writable area.
    fn input_dir_path(&self) -> PathBuf {
        self.state.dir.join("input")
    }

    /// Replaces the input directory's content with `files` (plain names only), read-only.
    fn write_inputs(
        &self,
        files: &std::collections::BTreeMap<String, Vec<u8>>,
    ) -> Result<(), SandboxError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.input_dir_path();
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SandboxError::io(format!("clear {}", dir.display()), e)),
        }
        fs::create_dir(&dir)
            .map_err(|e| SandboxError::io(format!("create {}", dir.display()), e))?;
        for (name, bytes) in files {
            let plain =
                !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
            if !plain {
                return Err(backend_err(format!(
                    "input file name {name:?} must be one plain file name"
                )));
            }
            let path = dir.join(name);
            fs::write(&path, bytes)
                .map_err(|e| SandboxError::io(format!("write {}", path.display()), e))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o444))
                .map_err(|e| SandboxError::io(format!("chmod {}", path.display()), e))?;
        }
        // The directory itself is made read-only inside the sandbox by the read-only bind.
        Ok(())
    }

    fn kill_live(&self) -> Result<(), SandboxError> {
        let killers = self
            .live
            .lock()
            .map_err(|_| backend_err("session lock poisoned"))?;
        for k in killers.iter() {
            k.kill_all()
                .map_err(|e| backend_err(format!("kill worker tree: {e}")))?;
        }
        Ok(())
    }
}

impl RawSession for LinuxSession {
    fn backend(&self) -> &str {
        BACKEND_NAME
    }

    fn workspace_mount(&self) -> &str {
        &self.merged_str
    }

    fn read_bytes(&self, path: &SessionPath) -> Result<Vec<u8>, SandboxError> {
        let fd = self.open_beneath(path, OFlags::RDONLY, Mode::empty())?;
        let mut f = fs::File::from(fd);
        let mut out = Vec::new();
        f.read_to_end(&mut out)
            .map_err(|e| SandboxError::io(format!("read {path}"), e))?;
        Ok(out)
    }

    fn write_bytes(&self, path: &SessionPath, bytes: &[u8]) -> Result<(), SandboxError> {
        for parent in path.parents() {
            match self.lstat(&parent)? {
                Some(EntryKind::Directory) => {}
                None => {
                    let root = rustix::fs::open(
                        &self.merged,
                        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| SandboxError::io("open session root", e.into()))?;
                    // The parent chain was checked link-free just above, component by component.
                    rustix::fs::mkdirat(&root, parent.as_relative(), Mode::from_raw_mode(0o755))
                        .or_else(|e| {
                            if e == rustix::io::Errno::EXIST {
                                Ok(())
                            } else {
                                Err(e)
                            }
                        })
                        .map_err(|e| SandboxError::io(format!("mkdir {parent}"), e.into()))?;
                }
                Some(_) => return Err(backend_err(format!("{parent} is not a directory"))),
            }
        }
        let fd = self.open_beneath(
            path,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
            Mode::from_raw_mode(0o644),
        )?;
        let mut f = fs::File::from(fd);
        f.write_all(bytes)
            .map_err(|e| SandboxError::io(format!("write {path}"), e))
    }

    fn lstat(&self, path: &SessionPath) -> Result<Option<EntryKind>, SandboxError> {
        let root = rustix::fs::open(
            &self.merged,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| SandboxError::io("open session root", e.into()))?;
        match rustix::fs::statat(&root, path.as_relative(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
                Ok(Some(match kind {
                    rustix::fs::FileType::RegularFile => EntryKind::File,
                    rustix::fs::FileType::Directory => EntryKind::Directory,
                    rustix::fs::FileType::Symlink => EntryKind::Symlink,
                    _ => EntryKind::Other,
                }))
            }
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(SandboxError::io(format!("lstat {path}"), e.into())),
        }
    }

    fn spawn(&mut self, launch: &Launch) -> Result<Box<dyn RawProcess>, SandboxError> {
        let area = self
            .area
            .as_ref()
            .ok_or_else(|| backend_err("session has no writable area (deleted)"))?;
        let (program, args) = launch
            .argv
            .split_first()
            .ok_or_else(|| backend_err("empty command"))?;
        // A label unique per spawn: several sessions (each with its own `CgroupHost`) may
        // spawn at once in one supervisor.
        let label = format!("s{}", unique_id());
        let cgroup = self
            .cgroups
            .create(&label, &self.state.limits)
            .map_err(|e| backend_err(e.to_string()))?;
        let pipe = || {
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| SandboxError::io("pipe", e.into()))
        };
        let (stdin_r, stdin_w) = match launch.stdin {
            StdinMode::Piped => {
                let (r, w) = pipe()?;
                (Some(r), Some(w))
            }
            StdinMode::Null => (None, None),
        };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let workspace = WorkspaceView::Bind(self.merged.clone());
        let spec = LaunchSpec::new(
            OsString::from(program),
            args.iter().map(OsString::from).collect(),
            self.merged.clone(),
        )
        .with_workspace(workspace)
        .with_tmp(TmpDir::Host(area.tmp()))
        .with_stdio(Stdio::Fds {
            stdin: stdin_r.or_else(|| fs::File::open("/dev/null").ok().map(OwnedFd::from)),
            stdout: Some(out_w),
            stderr: Some(err_w),
        });
        let mut spec = cgroup.place(spec);
        if let Some(cwd) = &launch.cwd {
            let _ = cgroup.remove();
            return Err(SandboxError::Unsupported {
                backend: BACKEND_NAME.into(),
                what: format!("start a program in {cwd}"),
                remedy: "programs start in the workspace root; change directory inside the program"
                    .into(),
            });
        }
        for (k, v) in &launch.env {
            spec = spec.with_env(k, v);
        }
        for p in &self.state.ro_paths {
            spec = spec.with_ro(p);
        }
        for port in &launch.loopback_ports {
            spec = spec.with_listener(*port);
        }
        if !launch.input_files.is_empty() {
            if let Err(e) = self.write_inputs(&launch.input_files) {
                let _ = cgroup.remove();
                return Err(e);
            }
            spec = spec.with_ro(self.input_dir_path());
        }
        let mut worker = match crate::launch(spec) {
            Ok(w) => w,
            Err(e) => {
                let _ = cgroup.remove();
                return Err(backend_err(e.to_string()));
            }
        };
        // The policy's wall time is a ceiling; a launch may only ask for less.
        let policy_budget = Duration::from_millis(self.state.wall_time_ms);
        let budget = launch
            .wall_time
            .map_or(policy_budget, |w| w.min(policy_budget));
        let watchdog = Watchdog::arm(cgroup.killer(), budget);
        let listeners = launch
            .loopback_ports
            .iter()
            .copied()
            .zip(worker.take_listeners())
            .collect();
        if let Ok(mut live) = self.live.lock() {
            live.push(cgroup.killer());
        }
        Ok(Box::new(LinuxProcess {
            worker,
            cgroup: Some(cgroup),
            watchdog: Some(watchdog),
            stdin: stdin_w.map(fs::File::from),
            stdout: Some(fs::File::from(out_r)),
            stderr: Some(fs::File::from(err_r)),
            listeners,
            status: None,
            report: None,
        }))
    }

    fn stop(&mut self) -> Result<(), SandboxError> {
        self.kill_live()
    }

    fn shutdown(&mut self) -> Result<(), SandboxError> {
        self.kill_live()
    }

    fn delete(&mut self) -> Result<(), SandboxError> {
        self.kill_live()?;
        if self.merged_mounted {
            unmount(&self.merged)?;
            self.merged_mounted = false;
        }
        if let Some(area) = self.area.take() {
            area.unmount().map_err(|e| backend_err(e.to_string()))?;
        }
        fs::remove_dir_all(&self.state.dir)
            .map_err(|e| SandboxError::io(format!("remove {}", self.state.dir.display()), e))
    }

    fn change_layer(&self) -> Option<PathBuf> {
        self.area.as_ref().map(WritableArea::upper)
    }

    fn workspace_view(&self) -> Option<PathBuf> {
        self.merged_mounted.then(|| self.merged.clone())
    }

    fn backend_state(&self) -> serde_json::Value {
        serde_json::to_value(&self.state).unwrap_or(serde_json::Value::Null)
    }

    fn input_dir(&self) -> Option<PathBuf> {
        Some(self.input_dir_path())
    }
}

/// A process tree running in a Linux session.
struct LinuxProcess {
    worker: crate::Worker,
    cgroup: Option<WorkerCgroup>,
    watchdog: Option<Watchdog>,
    stdin: Option<fs::File>,
    stdout: Option<fs::File>,
    stderr: Option<fs::File>,
    listeners: Vec<(u16, TcpListener)>,
    status: Option<ExitStatus>,
    report: Option<serde_json::Value>,
}

impl LinuxProcess {
    fn finish(&mut self, status: crate::ExitStatus) -> Result<ExitStatus, SandboxError> {
        let wall_fired = self.watchdog.take().is_some_and(|w| w.disarm());
        let cgroup = self.cgroup.take();
        let usage = cgroup.as_ref().map(WorkerCgroup::usage);
        if let Some(cg) = cgroup {
            // PID 1 is gone, so its namespace is gone; the cgroup kill is the belt to those braces.
            cg.remove()
                .map_err(|e| backend_err(format!("remove worker cgroup: {e}")))?;
        }
        let status = match status {
            crate::ExitStatus::Exited(code) => ExitStatus::Exited { code },
            crate::ExitStatus::Signaled(signal) => ExitStatus::Signaled { signal },
        };
        self.report =
            Some(serde_json::json!({ "usage": usage, "wall_time_budget_hit": wall_fired }));
        self.status = Some(status.clone());
        Ok(status)
    }
}

impl RawProcess for LinuxProcess {
    fn take_stdin(&mut self) -> Option<Box<dyn Write + Send>> {
        self.stdin
            .take()
            .map(|f| Box::new(f) as Box<dyn Write + Send>)
    }
    fn take_stdout(&mut self) -> Option<Box<dyn Read + Send>> {
        self.stdout
            .take()
            .map(|f| Box::new(f) as Box<dyn Read + Send>)
    }
    fn take_stderr(&mut self) -> Option<Box<dyn Read + Send>> {
        self.stderr
            .take()
            .map(|f| Box::new(f) as Box<dyn Read + Send>)
    }
    fn take_listeners(&mut self) -> Vec<(u16, TcpListener)> {
        std::mem::take(&mut self.listeners)
    }
    fn try_wait(&mut self) -> Result<Option<ExitStatus>, SandboxError> {
        if let Some(s) = &self.status {
            return Ok(Some(s.clone()));
        }
        if let Some(cg) = &self.cgroup {
            cg.sample();
        }
        match self
            .worker
            .wait_timeout(Duration::ZERO)
            .map_err(|e| SandboxError::io("wait for worker", e))?
        {
            Some(s) => self.finish(s).map(Some),
            None => Ok(None),
        }
    }
    fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        if let Some(s) = &self.status {
            return Ok(s.clone());
        }
        let s = self
            .worker
            .wait()
            .map_err(|e| SandboxError::io("wait for worker", e))?;
        self.finish(s)
    }
    fn kill_tree(&mut self) -> Result<(), SandboxError> {
        if let Some(cg) = &self.cgroup {
            cg.kill_all()
                .map_err(|e| backend_err(format!("kill worker tree: {e}")))?;
        }
        self.worker
            .kill()
            .map_err(|e| SandboxError::io("kill worker", e))
    }
    fn report(&self) -> Option<serde_json::Value> {
        self.report.clone()
    }
}

impl Drop for LinuxProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.kill_tree();
            let _ = self.wait();
        }
    }
}

impl Drop for LinuxSession {
    /// Kills anything still running but keeps the mounts: `stop` and `shutdown` preserve the
    /// workspace, and only `delete` removes it.
    fn drop(&mut self) {
        let _ = self.kill_live();
        if let Some(area) = self.area.take() {
            area.keep_mounted();
        }
    }
}
