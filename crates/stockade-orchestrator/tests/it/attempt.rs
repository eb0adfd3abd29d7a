//! The orchestrator's sequencing, judged against a **test double** backend.
//!
//! The double is not a sandbox and is never offered as one (its name says so, and it lives only
//! here): it runs an in-process "agent" closure on a thread, gives it a change-layer directory,
//! and opens gateway listeners on host loopback. What these tests prove is the orchestrator's
//! own behaviour — fail-closed admission, the gateway and capture wiring, the wall-time budget,
//! cancellation, dropping the future, the concurrency limit — not any kernel boundary (that is
//! `tests/it/agent_e2e.rs` and the escape suite, against the Linux backend).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_capabilities::{
    BackendIdentity, CgroupVersion, HostFacts, Protection, ProtectionStatus, SandboxCapabilities,
};
use stockade_orchestrator::demo::{CALC_PY_FIXED, build_demo_repo, demo_model_script};
use stockade_orchestrator::model_server::{ModelServerConfig, ScriptedModelServer};
use stockade_orchestrator::{
    AgentExit, AttemptRequest, AttemptStatus, Cancel, CancelHandle, Orchestrator,
    OrchestratorConfig,
};
use stockade_policy::{load_preset, load_trusted_connections, load_work_unit};
use stockade_sandbox::{
    Backend, EntryKind, ExitStatus, Launch, RawProcess, RawSession, SandboxError, SessionPath,
    SessionRecord, Template, TemplateSpec,
};

/// What the in-process "agent" does.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Reads the prompt, asks the model through the first gateway listener, writes the reply's
    /// file into the change layer, exits 0.
    AskModelAndFix,
    /// Writes the fix without any network, sleeps a little, exits 0.
    FixAfter(Duration),
    /// Never exits until killed.
    Hang,
}

#[derive(Default)]
struct Seen {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Vec<u8>,
}

struct Double {
    behaviour: Behaviour,
    missing: Vec<Protection>,
    root: PathBuf,
    probes: AtomicUsize,
    created: AtomicUsize,
    live: Arc<AtomicUsize>,
    max_live: Arc<AtomicUsize>,
    killed: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
}

impl Double {
    fn new(behaviour: Behaviour, root: &Path) -> Arc<Double> {
        Arc::new(Double {
            behaviour,
            missing: Vec::new(),
            root: root.to_owned(),
            probes: AtomicUsize::new(0),
            created: AtomicUsize::new(0),
            live: Arc::new(AtomicUsize::new(0)),
            max_live: Arc::new(AtomicUsize::new(0)),
            killed: Arc::new(AtomicBool::new(false)),
            seen: Arc::new(Mutex::new(Seen::default())),
        })
    }
}

impl Backend for Double {
    fn name(&self) -> &str {
        "test-double-not-a-sandbox"
    }
    fn probe(&self) -> SandboxCapabilities {
        self.probes.fetch_add(1, Ordering::SeqCst);
        let mut caps = SandboxCapabilities::new(
            BackendIdentity::new("test-double-not-a-sandbox", "0"),
            HostFacts {
                kernel: "test".into(),
                landlock_abi: None,
                cgroup: CgroupVersion::None,
            },
        );
        for p in Protection::ALL {
            let status = if self.missing.contains(&p) {
                ProtectionStatus::Unavailable {
                    reason: "the test double lacks it".into(),
                    remedy: "use another backend".into(),
                }
            } else {
                ProtectionStatus::Enforced {
                    evidence: "test double: claimed for an orchestrator test only".into(),
                }
            };
            caps.set(p, status);
        }
        caps
    }
    fn prewarm(&self, spec: &TemplateSpec) -> Result<Template, SandboxError> {
        Ok(Template::new(self.name(), spec, spec.lower.clone()))
    }
    fn create(
        &self,
        _t: &Template,
        _p: &stockade_policy::SandboxPolicy,
        _a: stockade_capabilities::Admission,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        let n = self.created.fetch_add(1, Ordering::SeqCst);
        let upper = self.root.join(format!("session-{n}-upper"));
        std::fs::create_dir_all(&upper).unwrap();
        Ok(Box::new(DoubleSession {
            upper,
            behaviour: self.behaviour,
            live: Arc::clone(&self.live),
            max_live: Arc::clone(&self.max_live),
            killed: Arc::clone(&self.killed),
            seen: Arc::clone(&self.seen),
        }))
    }
    fn reattach(
        &self,
        _t: &Template,
        _r: &SessionRecord,
    ) -> Result<Box<dyn RawSession>, SandboxError> {
        Err(SandboxError::Unsupported {
            backend: self.name().into(),
            what: "reattach".into(),
            remedy: "none".into(),
        })
    }
}

struct DoubleSession {
    upper: PathBuf,
    behaviour: Behaviour,
    live: Arc<AtomicUsize>,
    max_live: Arc<AtomicUsize>,
    killed: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
}

impl RawSession for DoubleSession {
    fn backend(&self) -> &str {
        "test-double-not-a-sandbox"
    }
    fn workspace_mount(&self) -> &str {
        "/workspace"
    }
    fn read_bytes(&self, p: &SessionPath) -> Result<Vec<u8>, SandboxError> {
        std::fs::read(self.upper.join(p.as_relative())).map_err(|e| SandboxError::io("read", e))
    }
    fn write_bytes(&self, p: &SessionPath, b: &[u8]) -> Result<(), SandboxError> {
        std::fs::write(self.upper.join(p.as_relative()), b)
            .map_err(|e| SandboxError::io("write", e))
    }
    fn lstat(&self, _p: &SessionPath) -> Result<Option<EntryKind>, SandboxError> {
        Ok(None)
    }
    fn spawn(&mut self, launch: &Launch) -> Result<Box<dyn RawProcess>, SandboxError> {
        let listeners: Vec<(u16, TcpListener)> = launch
            .loopback_ports
            .iter()
            .map(|p| (*p, TcpListener::bind("127.0.0.1:0").unwrap()))
            .collect();
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .map(|(_, l)| l.local_addr().unwrap())
            .collect();
        let (stdin_r, stdin_w) = std::io::pipe().unwrap();
        let (stdout_r, stdout_w) = std::io::pipe().unwrap();
        let (stderr_r, stderr_w) = std::io::pipe().unwrap();
        {
            let mut seen = self.seen.lock().unwrap();
            seen.argv = launch.argv.clone();
            seen.env = launch.env.clone();
        }
        let now = self.live.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_live.fetch_max(now, Ordering::SeqCst);
        let done: Arc<Mutex<Option<ExitStatus>>> = Arc::new(Mutex::new(None));
        let (upper, behaviour, killed, seen, live, done2) = (
            self.upper.clone(),
            self.behaviour,
            Arc::clone(&self.killed),
            Arc::clone(&self.seen),
            Arc::clone(&self.live),
            Arc::clone(&done),
        );
        let piped = launch.stdin == stockade_sandbox::StdinMode::Piped;
        let thread = std::thread::spawn(move || {
            let mut stdout = stdout_w;
            drop(stderr_w);
            let mut prompt = Vec::new();
            if piped {
                let mut r = stdin_r;
                r.read_to_end(&mut prompt).unwrap();
            }
            seen.lock().unwrap().stdin = prompt;
            let status = match behaviour {
                Behaviour::AskModelAndFix => {
                    let reply = ask(addrs[0]);
                    let content = reply
                        .split("```python\\n")
                        .nth(1)
                        .and_then(|s| s.split("```").next())
                        .unwrap_or("")
                        .replace("\\n", "\n");
                    std::fs::write(upper.join("calc.py"), content).unwrap();
                    writeln!(stdout, "asked the model and applied the fix").unwrap();
                    ExitStatus::Exited { code: 0 }
                }
                Behaviour::FixAfter(d) => {
                    std::thread::sleep(d);
                    std::fs::write(upper.join("calc.py"), CALC_PY_FIXED).unwrap();
                    ExitStatus::Exited { code: 0 }
                }
                Behaviour::Hang => {
                    writeln!(stdout, "hanging").unwrap();
                    while !killed.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    ExitStatus::Signaled { signal: 9 }
                }
            };
            live.fetch_sub(1, Ordering::SeqCst);
            *done2.lock().unwrap() = Some(status);
        });
        Ok(Box::new(DoubleProcess {
            stdin: Some(Box::new(stdin_w)),
            stdout: Some(Box::new(stdout_r)),
            stderr: Some(Box::new(stderr_r)),
            listeners,
            done,
            killed: Arc::clone(&self.killed),
            thread: Some(thread),
        }))
    }
    fn stop(&mut self) -> Result<(), SandboxError> {
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), SandboxError> {
        Ok(())
    }
    fn delete(&mut self) -> Result<(), SandboxError> {
        Ok(())
    }
    fn change_layer(&self) -> Option<PathBuf> {
        Some(self.upper.clone())
    }
    fn workspace_view(&self) -> Option<PathBuf> {
        None
    }
    fn backend_state(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn input_dir(&self) -> Option<PathBuf> {
        None
    }
}

/// One HTTP/1.1 request through the gateway listener, as an SDK inside a sandbox would send it:
/// with no credential of its own.
fn ask(addr: SocketAddr) -> String {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"fix"}]}"#;
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer stockade-placeholder\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

struct DoubleProcess {
    stdin: Option<Box<dyn Write + Send>>,
    stdout: Option<Box<dyn Read + Send>>,
    stderr: Option<Box<dyn Read + Send>>,
    listeners: Vec<(u16, TcpListener)>,
    done: Arc<Mutex<Option<ExitStatus>>>,
    killed: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawProcess for DoubleProcess {
    fn take_stdin(&mut self) -> Option<Box<dyn Write + Send>> {
        self.stdin.take()
    }
    fn take_stdout(&mut self) -> Option<Box<dyn Read + Send>> {
        self.stdout.take()
    }
    fn take_stderr(&mut self) -> Option<Box<dyn Read + Send>> {
        self.stderr.take()
    }
    fn take_listeners(&mut self) -> Vec<(u16, TcpListener)> {
        std::mem::take(&mut self.listeners)
    }
    fn try_wait(&mut self) -> Result<Option<ExitStatus>, SandboxError> {
        Ok(self.done.lock().unwrap().clone())
    }
    fn wait(&mut self) -> Result<ExitStatus, SandboxError> {
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        Ok(self.done.lock().unwrap().clone().unwrap())
    }
    fn kill_tree(&mut self) -> Result<(), SandboxError> {
        self.killed.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn report(&self) -> Option<serde_json::Value> {
        Some(
            serde_json::json!({ "cpu_seconds": 0.25, "note": "floats must not reach the manifest" }),
        )
    }
}

const PRESET: &str = r#"
id = "double-agent"
kind = "model-only"
command = ["agent"]
prompt_transport = "stdin"
sandbox_required = true
[default_limits]
cpu_millis = 1000
memory_bytes = 100000000
disk_bytes = 100000000
pids = 64
[env]
OPENAI_API_KEY = "stockade-placeholder-not-a-key"
[[connections]]
name = "openai"
base_url_env = ["OPENAI_BASE_URL"]
"#;

struct Fixture {
    dir: tempfile::TempDir,
    repo: PathBuf,
    commit: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = build_demo_repo(&dir.path().join("canonical.git")).unwrap();
    Fixture {
        repo: repo.path,
        commit: repo.commit,
        dir,
    }
}

fn request(f: &Fixture, network: &str, wall: u64, trusted: &str) -> AttemptRequest {
    let wu = format!(
        r#"
id = "fix-calc"
objective = "fix calc.py"
base_commit = "{}"
scope = ["calc.py"]
[permissions]
sandbox_required = true
process_execution = true
wall_time_secs = {wall}
network = {network}
"#,
        f.commit
    );
    AttemptRequest {
        attempt_id: None,
        preset: load_preset(PRESET.as_bytes(), "double.toml").unwrap(),
        work_unit: load_work_unit(wu.as_bytes(), "wu.toml").unwrap(),
        trusted: load_trusted_connections(trusted.as_bytes(), "trusted.toml").unwrap(),
        repo: f.repo.clone(),
        artifacts_dir: f.dir.path().join("artifacts"),
        state_dir: f.dir.path().join("state"),
        gateway_extra_ca_pem: None,
    }
}

const NO_TRUST: &str = "";

fn orchestrator(double: &Arc<Double>, max: usize) -> Orchestrator {
    let config = OrchestratorConfig {
        max_concurrent: max,
        ..OrchestratorConfig::default()
    };
    Orchestrator::new(Arc::clone(double) as Arc<dyn Backend>, config)
}

fn manifests(f: &Fixture) -> Vec<PathBuf> {
    let dir = f.dir.path().join("artifacts/manifests");
    std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_protection_refuses_before_any_session_and_leaves_an_incomplete_record() {
    let f = fixture();
    let mut double = Double::new(Behaviour::FixAfter(Duration::ZERO), f.dir.path());
    Arc::get_mut(&mut double).unwrap().missing = vec![Protection::Memory, Protection::Pids];
    let out = orchestrator(&double, 1)
        .run(
            request(&f, r#"{ mode = "none" }"#, 5, NO_TRUST),
            None,
            Cancel::never(),
        )
        .await;
    assert_eq!(out.status, AttemptStatus::Refused);
    assert_eq!(out.exit_code(), 10);
    let msg = out.error.as_ref().unwrap().to_string();
    assert!(
        msg.contains("memory") && msg.contains("pids"),
        "every missing protection is named: {msg}"
    );
    assert_eq!(
        double.created.load(Ordering::SeqCst),
        0,
        "no admission, no session"
    );
    let manifest = out.manifest.unwrap();
    assert!(matches!(
        manifest.completion,
        stockade_manifest::Completion::Incomplete { .. }
    ));
    assert!(manifest.accepted.is_empty() && manifest.artifacts.patch.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_violation_is_refused_before_the_backend_is_even_probed() {
    let f = fixture();
    let double = Double::new(Behaviour::FixAfter(Duration::ZERO), f.dir.path());
    let out = orchestrator(&double, 1)
        .run(
            request(&f, r#"{ mode = "unrestricted" }"#, 5, NO_TRUST),
            None,
            Cancel::never(),
        )
        .await;
    assert_eq!(out.status, AttemptStatus::Refused);
    assert!(out.error.unwrap().to_string().contains("unrestricted"));
    assert_eq!(double.probes.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_host_credential_refuses_before_anything_starts() {
    let f = fixture();
    let double = Double::new(Behaviour::AskModelAndFix, f.dir.path());
    let trusted = "[connections.openai]\norigin = \"http://127.0.0.1:9\"\nheaders = [{ header = \"authorization\", secret = \"file:/nonexistent/stockade-key\" }]\n";
    let out = orchestrator(&double, 1)
        .run(
            request(
                &f,
                r#"{ mode = "bounded", destinations = ["http://127.0.0.1:9"] }"#,
                5,
                trusted,
            ),
            None,
            Cancel::never(),
        )
        .await;
    assert_eq!(out.status, AttemptStatus::Refused, "{:?}", out.error);
    assert!(
        out.error
            .unwrap()
            .to_string()
            .contains("file:/nonexistent/stockade-key")
    );
    assert_eq!(double.created.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reaches_the_model_only_through_the_gateway_and_the_candidate_is_captured() {
    let f = fixture();
    let key = "sk-orchestrator-test-4f1c";
    let server = ScriptedModelServer::start(ModelServerConfig {
        api_key: key.into(),
        model: "m".into(),
        replies: demo_model_script(),
    })
    .await
    .unwrap();
    let key_file = f.dir.path().join("key");
    std::fs::write(&key_file, format!("Bearer {key}\n")).unwrap();
    let origin = server.origin().unwrap();
    let trusted = format!(
        "[connections.openai]\norigin = \"{origin}\"\nheaders = [{{ header = \"authorization\", secret = \"file:{}\" }}]\n",
        key_file.display()
    );
    let double = Double::new(Behaviour::AskModelAndFix, f.dir.path());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = orchestrator(&double, 1)
        .run(
            request(
                &f,
                &format!(r#"{{ mode = "bounded", destinations = ["{origin}"] }}"#),
                30,
                &trusted,
            ),
            Some(tx),
            Cancel::never(),
        )
        .await;
    assert_eq!(
        out.status,
        AttemptStatus::CandidateCaptured,
        "{:?}",
        out.error
    );
    assert_eq!(out.exit_code(), 0);
    // The key reached the upstream, injected on the host; the agent never held it.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].authorized);
    let seen = double.seen.lock().unwrap();
    assert!(!format!("{:?}", seen.env).contains(key));
    assert_eq!(
        seen.stdin, b"fix calc.py",
        "stdin transport delivers the objective"
    );
    assert!(
        seen.env
            .iter()
            .any(|(k, v)| k == "OPENAI_BASE_URL" && v.starts_with("http://127.0.0.1:"))
    );
    // The audit saw the one allowed request.
    assert_eq!(out.gateway_audit.len(), 1);
    assert_eq!(out.gateway_audit[0].status, 200);
    // The manifest: complete, calc.py accepted, artifacts verify, no float, no key.
    let manifest = out.manifest.unwrap();
    assert!(matches!(
        manifest.completion,
        stockade_manifest::Completion::Complete
    ));
    assert_eq!(manifest.accepted.len(), 1);
    assert_eq!(manifest.accepted[0].path.as_bytes(), b"calc.py");
    let path = out.manifest_path.unwrap();
    stockade_manifest::verify(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(key));
    assert!(
        text.contains("\"0.25\""),
        "backend floats are recorded as strings"
    );
    // Progress: every stage in order, ending with done.
    let mut stages = Vec::new();
    while let Ok(p) = rx.try_recv() {
        if let stockade_orchestrator::progress::ProgressKind::Stage { stage } = p.kind {
            stages.push(stage.as_str());
        }
    }
    assert_eq!(
        stages,
        [
            "queued",
            "resolve",
            "admit",
            "workspace",
            "session",
            "launch",
            "prompt",
            "agent",
            "contain",
            "capture",
            "done"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_time_budget_kills_the_tree_and_the_agent_is_reported_failed() {
    let f = fixture();
    let double = Double::new(Behaviour::Hang, f.dir.path());
    let out = orchestrator(&double, 1)
        .run(
            request(&f, r#"{ mode = "none" }"#, 1, NO_TRUST),
            None,
            Cancel::never(),
        )
        .await;
    assert_eq!(out.agent_exit, Some(AgentExit::TimedOut));
    assert_eq!(out.status, AttemptStatus::AgentFailed);
    assert_eq!(out.exit_code(), 11);
    assert!(double.killed.load(Ordering::SeqCst));
    assert!(out.manifest_path.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kills_the_tree_and_writes_an_incomplete_record() {
    let f = fixture();
    let double = Double::new(Behaviour::Hang, f.dir.path());
    let (handle, cancel) = CancelHandle::new();
    let orch = orchestrator(&double, 1);
    let req = request(&f, r#"{ mode = "none" }"#, 60, NO_TRUST);
    let run = tokio::spawn(async move { orch.run(req, None, cancel).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel();
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .unwrap()
        .unwrap();
    assert!(double.killed.load(Ordering::SeqCst));
    assert_eq!(out.status, AttemptStatus::Incomplete);
    assert_eq!(out.exit_code(), 12);
    let manifest = out.manifest.unwrap();
    assert!(matches!(
        manifest.completion,
        stockade_manifest::Completion::Incomplete { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_future_kills_the_tree_and_writes_an_incomplete_record() {
    let f = fixture();
    let double = Double::new(Behaviour::Hang, f.dir.path());
    let orch = orchestrator(&double, 1);
    let req = request(&f, r#"{ mode = "none" }"#, 60, NO_TRUST);
    let res = tokio::time::timeout(
        Duration::from_millis(800),
        orch.run(req, None, Cancel::never()),
    )
    .await;
    assert!(res.is_err(), "the attempt was still running when dropped");
    assert!(
        double.killed.load(Ordering::SeqCst),
        "dropping the future kills the tree"
    );
    let m = manifests(&f);
    assert_eq!(m.len(), 1, "{m:?}");
    let text = std::fs::read_to_string(&m[0]).unwrap();
    assert!(
        text.contains("incomplete") && text.contains("abandoned"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_run_in_their_own_sessions_bounded_by_the_concurrency_limit() {
    let f = fixture();
    let double = Double::new(
        Behaviour::FixAfter(Duration::from_millis(300)),
        f.dir.path(),
    );
    let orch = orchestrator(&double, 2);
    let reqs = (0..4)
        .map(|_| request(&f, r#"{ mode = "none" }"#, 30, NO_TRUST))
        .collect();
    let outs = orch.run_many(reqs, None, Cancel::never()).await;
    assert_eq!(outs.len(), 4);
    for o in &outs {
        assert_eq!(o.status, AttemptStatus::CandidateCaptured, "{:?}", o.error);
    }
    let ids: std::collections::BTreeSet<_> = outs.iter().map(|o| o.attempt_id.clone()).collect();
    assert_eq!(ids.len(), 4, "distinct attempt ids");
    assert_eq!(double.created.load(Ordering::SeqCst), 4);
    assert!(
        double.max_live.load(Ordering::SeqCst) <= 2,
        "at most two agents at once"
    );
    assert_eq!(manifests(&f).len(), 4);
}
