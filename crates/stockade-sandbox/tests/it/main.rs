//! Contract tests: the session API built once on top of a backend, exercised through a
//! directory-backed test backend whose "processes" are scripted in-process streams.
//!
//! The test backend isolates nothing and is never offered as a sandbox: it exists to test
//! the generic logic (path resolution, leases, revision fences, lifecycle, deadlines and
//! bounded output) that every real backend inherits.

#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stockade_capabilities::{
    BackendIdentity, CgroupVersion, HostFacts, Protection, ProtectionStatus, SandboxCapabilities,
};
use stockade_sandbox::*;

struct DirBackend {
    root: PathBuf,
    spawned: Arc<Mutex<Vec<String>>>,
}

struct DirSession {
    dir: PathBuf,
    spawned: Arc<Mutex<Vec<String>>>,
    running: bool,
}

/// A scripted process: emits `out` on stdout then "exits" with `code`, or never exits.
struct Scripted {
    out: Option<Vec<u8>>,
    code: Option<i32>,
    killed: bool,
}

impl RawProcess for Scripted {
    fn take_stdin(&mut self) -> Option<Box<dyn Write + Send>> {
        Some(Box::new(std::io::sink()))
    }
    fn take_stdout(&mut self) -> Option<Box<dyn Read + Send>> {
        self.out
            .take()
            .map(|b| Box::new(std::io::Cursor::new(b)) as Box<dyn Read + Send>)
    }
    fn take_stderr(&mut self) -> Option<Box<dyn Read + Send>> {
        None
    }
    fn take_listeners(&mut self) -> Vec<(u16, TcpListener)> {
        Vec::new()
    }
    fn try_wait(&mut self) -> Result<Option<ExitStatus>, SandboxError> {
        Ok(if self.killed {
            Some(ExitStatus::Signaled { signal: 9 })
        } else {
            self.code.map(|code| ExitStatus::Exited { code })
        })
    }
    fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    fn kill_tree(&mut self) -> Result<(), SandboxError> {
        self.killed = true;
        Ok(())
    }
    fn report(&self) -> Option<serde_json::Value> {
        None
    }
}

fn host(dir: &Path, p: &SessionPath) -> PathBuf {
    dir.join(p.as_relative())
}

impl RawSession for DirSession {
    fn backend(&self) -> &str {
        "dir-test"
    }
    fn workspace_mount(&self) -> &str {
        "/ws"
    }
    fn read_bytes(&self, path: &SessionPath) -> Result<Vec<u8>, SandboxError> {
        std::fs::read(host(&self.dir, path)).map_err(|e| SandboxError::io(path.to_string(), e))
    }
    fn write_bytes(&self, path: &SessionPath, bytes: &[u8]) -> Result<(), SandboxError> {
        let p = host(&self.dir, path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| SandboxError::io("mkdir", e))?;
        }
        std::fs::write(p, bytes).map_err(|e| SandboxError::io(path.to_string(), e))
    }
    fn lstat(&self, path: &SessionPath) -> Result<Option<EntryKind>, SandboxError> {
        match std::fs::symlink_metadata(host(&self.dir, path)) {
            Ok(m) if m.file_type().is_symlink() => Ok(Some(EntryKind::Symlink)),
            Ok(m) if m.is_dir() => Ok(Some(EntryKind::Directory)),
            Ok(m) if m.is_file() => Ok(Some(EntryKind::File)),
            Ok(_) => Ok(Some(EntryKind::Other)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SandboxError::io(path.to_string(), e)),
        }
    }
    fn spawn(&mut self, launch: &Launch) -> Result<Box<dyn RawProcess>, SandboxError> {
        self.spawned.lock().unwrap().push(launch.argv.join(" "));
        match launch.argv.first().map(String::as_str) {
            Some("echo") => Ok(Box::new(Scripted {
                out: Some(launch.argv[1..].join(" ").into_bytes()),
                code: Some(0),
                killed: false,
            })),
            Some("flood") => Ok(Box::new(Scripted {
                out: Some(vec![b'x'; 1 << 20]),
                code: Some(3),
                killed: false,
            })),
            Some("hang") => Ok(Box::new(Scripted {
                out: None,
                code: None,
                killed: false,
            })),
            _ => Err(SandboxError::Backend {
                backend: "dir-test".into(),
                message: "unknown program".into(),
            }),
        }
    }
    fn stop(&mut self) -> Result<(), SandboxError> {
        self.running = false;
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), SandboxError> {
        self.running = false;
        Ok(())
    }
    fn delete(&mut self) -> Result<(), SandboxError> {
        std::fs::remove_dir_all(&self.dir).map_err(|e| SandboxError::io("delete", e))
    }
    fn change_layer(&self) -> Option<PathBuf> {
        None
    }
    fn workspace_view(&self) -> Option<PathBuf> {
        Some(self.dir.clone())
    }
    fn backend_state(&self) -> serde_json::Value {
        serde_json::json!({ "dir": self.dir })
    }
    fn input_dir(&self) -> Option<PathBuf> {
        None
    }
}

impl Backend for DirBackend {
    fn name(&self) -> &str {
        "dir-test"
    }
    fn probe(&self) -> SandboxCapabilities {
        let mut caps = SandboxCapabilities::new(
            BackendIdentity {
                name: "dir-test".into(),
                version: "0".into(),
            },
            HostFacts {
                kernel: "test".into(),
                landlock_abi: None,
                cgroup: CgroupVersion::None,
            },
        );
        for p in Protection::ALL {
            caps.set(
                p,
                ProtectionStatus::Enforced {
                    evidence: "test backend: contract tests only".into(),
                },
            );
        }
        caps
    }
    fn prewarm(&self, spec: &TemplateSpec) -> Result<Template, SandboxError> {
        Ok(Template::new(self.name(), spec, spec.lower.clone()))
    }
    fn create(
        &self,
        template: &Template,
        _policy: &stockade_policy::SandboxPolicy,
        _admission: stockade_capabilities::Admission,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        let dir = self
            .root
            .join(format!("s-{}", &template.key().as_str()[..8]));
        std::fs::create_dir_all(&dir).map_err(|e| SandboxError::io("create", e))?;
        Ok(Box::new(DirSession {
            dir,
            spawned: self.spawned.clone(),
            running: true,
        }))
    }
    fn reattach(
        &self,
        _template: &Template,
        record: &SessionRecord,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        let dir = PathBuf::from(record.backend_state["dir"].as_str().unwrap_or_default());
        Ok(Box::new(DirSession {
            dir,
            spawned: self.spawned.clone(),
            running: true,
        }))
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    backend: DirBackend,
    store: LeaseStore,
    template: Template,
    policy: stockade_policy::SandboxPolicy,
}

fn policy() -> stockade_policy::SandboxPolicy {
    let preset = stockade_policy::load_preset(
        br#"
id = "demo"
kind = "model-only"
command = ["agent"]
prompt_transport = "stdin"
sandbox_required = true
read_only_host_paths = []
[default_limits]
cpu_millis = 1000
memory_bytes = 1073741824
disk_bytes = 1073741824
pids = 256
"#,
        "preset.toml",
    )
    .expect("test preset loads");
    let unit = stockade_policy::load_work_unit(
        br#"
id = "wu-1"
objective = "fix the test"
base_commit = "0123456789abcdef0123456789abcdef01234567"
scope = ["src/**"]
forbidden = []
[permissions]
sandbox_required = true
process_execution = true
secrets = []
wall_time_secs = 60
network = { mode = "none" }
[permissions.limits]
cpu_millis = 1000
memory_bytes = 1073741824
disk_bytes = 1073741824
pids = 256
"#,
        "unit.toml",
    )
    .expect("test work unit loads");
    let trusted = stockade_policy::TrustedModelConnections::default();
    stockade_policy::SandboxPolicy::resolve(&unit, &preset, &trusted).expect("policy resolves")
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let backend = DirBackend {
        root: tmp.path().join("sessions"),
        spawned: Arc::default(),
    };
    let store = LeaseStore::open(tmp.path().join("state")).unwrap();
    let spec = TemplateSpec {
        source_id: "repo@0123".into(),
        lower: tmp.path().join("lower"),
        files: BTreeMap::new(),
    };
    let template = backend.prewarm(&spec).unwrap();
    Fixture {
        _tmp: tmp,
        backend,
        store,
        template,
        policy: policy(),
    }
}

fn holder() -> LeaseHolder {
    LeaseHolder {
        pid: std::process::id(),
        holder: "contract-test".into(),
    }
}

fn session(f: &Fixture, id: &str) -> Session {
    let caps = f.backend.probe();
    let admission =
        stockade_capabilities::admit(&caps, &f.policy).expect("all protections enforced");
    Session::create(
        &f.backend,
        f.store.clone(),
        SessionId::new(id).unwrap(),
        holder(),
        &f.template,
        &f.policy,
        admission,
    )
    .unwrap()
}

#[test]
fn refuses_paths_that_escape_or_go_through_links() {
    let f = fixture();
    let s = session(&f, "paths");
    s.write("src/a.txt", b"hello").unwrap();
    assert_eq!(s.read_text("src/a.txt").unwrap(), "hello");
    assert_eq!(s.read_text("/ws/src/./a.txt").unwrap(), "hello");
    assert!(matches!(
        s.read_bytes("../outside"),
        Err(SandboxError::Path(PathError::Escapes(_)))
    ));
    assert!(matches!(
        s.read_bytes("/etc/passwd"),
        Err(SandboxError::Path(PathError::Absolute(_)))
    ));
    let dir = s.workspace_view().unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("src/pw")).unwrap();
    assert!(matches!(
        s.read_bytes("link/passwd"),
        Err(SandboxError::Path(PathError::Symlink { .. }))
    ));
    assert!(matches!(
        s.read_bytes("src/pw"),
        Err(SandboxError::Path(PathError::Symlink { .. }))
    ));
    assert!(matches!(
        s.write("link/x", b"x"),
        Err(SandboxError::Path(PathError::Symlink { .. }))
    ));
    assert!(matches!(
        s.read_bytes("src/a.txt/x"),
        Err(SandboxError::Path(PathError::NotADirectory { .. }))
    ));
}

#[test]
fn run_bounds_output_and_enforces_the_deadline() {
    let f = fixture();
    let mut s = session(&f, "run");
    let out = s
        .run(
            vec!["echo".into(), "hi".into()],
            vec![],
            &RunOptions::default(),
        )
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.bytes, b"hi");
    assert!(!out.timed_out);

    let opts = RunOptions {
        max_output_bytes: 1000,
        ..RunOptions::default()
    };
    let out = s.run(vec!["flood".into()], vec![], &opts).unwrap();
    assert_eq!(out.status, ExitStatus::Exited { code: 3 });
    assert_eq!(out.stdout.bytes.len(), 1000);
    assert_eq!(out.stdout.total, 1 << 20);
    assert!(out.stdout.truncated);

    let opts = RunOptions {
        deadline: Duration::from_millis(100),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let out = s.run(vec!["hang".into()], vec![], &opts).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.status, ExitStatus::Signaled { signal: 9 });
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn revision_fences_delayed_launches() {
    let f = fixture();
    let mut s = session(&f, "fence");
    let launch = Launch {
        argv: vec!["echo".into()],
        env: vec![],
        cwd: None,
        stdin: StdinMode::Null,
        loopback_ports: vec![],
        wall_time: None,
        input_files: BTreeMap::new(),
    };
    let early = s.prepare_launch(launch.clone());
    s.advance_revision().unwrap();
    assert!(matches!(
        s.launch(early),
        Err(SandboxError::StaleRevision {
            prepared: 0,
            current: 1
        })
    ));
    let fresh = s.prepare_launch(launch);
    assert!(s.launch(fresh).is_ok());
}

#[test]
fn stop_keeps_the_session_reattachable_under_an_exclusive_lease() {
    let f = fixture();
    let s = session(&f, "reattach");
    s.write("src/keep.txt", b"kept").unwrap();
    let record = s.stop().unwrap();
    assert_eq!(record.backend, "dir-test");
    let again = Session::reattach(
        &f.backend,
        f.store.clone(),
        &record.session,
        holder(),
        &f.template,
    )
    .unwrap();
    assert_eq!(again.read_text("src/keep.txt").unwrap(), "kept");
    // A second holder cannot take it while the first holds the lease.
    let err = Session::reattach(
        &f.backend,
        f.store.clone(),
        &record.session,
        holder(),
        &f.template,
    )
    .unwrap_err();
    assert!(
        matches!(err, SandboxError::Lease(LeaseError::Held { .. })),
        "{err}"
    );
    // Another template is refused.
    let other = f
        .backend
        .prewarm(&TemplateSpec {
            source_id: "repo@other".into(),
            lower: PathBuf::new(),
            files: BTreeMap::new(),
        })
        .unwrap();
    drop(again);
    let err = Session::reattach(
        &f.backend,
        f.store.clone(),
        &record.session,
        holder(),
        &other,
    )
    .unwrap_err();
    assert!(matches!(err, SandboxError::ReattachMismatch(_)), "{err}");
}

#[test]
fn delete_removes_state_but_never_the_template() {
    let f = fixture();
    let s = session(&f, "delete");
    s.write("src/x", b"1").unwrap();
    let view = s.workspace_view().unwrap();
    let id = s.id().clone();
    s.delete().unwrap();
    assert!(!view.exists());
    assert!(matches!(
        f.store.load_record(&id),
        Err(LeaseError::NoRecord(_))
    ));
    assert_eq!(f.template.backend(), "dir-test");
    // The template is still usable for a new session.
    let s2 = session(&f, "delete2");
    s2.write("src/y", b"2").unwrap();
}

#[test]
fn foreign_templates_are_refused() {
    let f = fixture();
    let foreign = Template::new(
        "someone-else",
        &TemplateSpec {
            source_id: "x".into(),
            lower: PathBuf::new(),
            files: BTreeMap::new(),
        },
        PathBuf::new(),
    );
    let caps = f.backend.probe();
    let admission = stockade_capabilities::admit(&caps, &f.policy).unwrap();
    let err = Session::create(
        &f.backend,
        f.store.clone(),
        SessionId::new("foreign").unwrap(),
        holder(),
        &foreign,
        &f.policy,
        admission,
    )
    .unwrap_err();
    assert!(matches!(err, SandboxError::ForeignTemplate { .. }), "{err}");
}

#[test]
fn an_admission_for_another_policy_or_no_policy_is_refused() {
    let f = fixture();
    let caps = f.backend.probe();
    let exec_style =
        stockade_capabilities::admit_protections(&caps, &std::collections::BTreeSet::new())
            .unwrap();
    let err = Session::create(
        &f.backend,
        f.store.clone(),
        SessionId::new("nopolicy").unwrap(),
        holder(),
        &f.template,
        &f.policy,
        exec_style,
    )
    .unwrap_err();
    assert!(
        matches!(err, SandboxError::AdmissionMismatch { .. }),
        "{err}"
    );
    let mut other_caps = SandboxCapabilities::new(
        BackendIdentity {
            name: "another-backend".into(),
            version: "0".into(),
        },
        HostFacts {
            kernel: "test".into(),
            landlock_abi: None,
            cgroup: CgroupVersion::None,
        },
    );
    for p in Protection::ALL {
        other_caps.set(
            p,
            ProtectionStatus::Enforced {
                evidence: "test".into(),
            },
        );
    }
    let foreign = stockade_capabilities::admit(&other_caps, &f.policy).unwrap();
    let err = Session::create(
        &f.backend,
        f.store.clone(),
        SessionId::new("foreignadm").unwrap(),
        holder(),
        &f.template,
        &f.policy,
        foreign,
    )
    .unwrap_err();
    assert!(
        matches!(err, SandboxError::ForeignAdmission { .. }),
        "{err}"
    );
}
