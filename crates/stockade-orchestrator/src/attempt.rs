//! One attempt, end to end, failing closed at every step.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stockade_capabilities::admit;
use stockade_capture::{
    ArtifactStore, BaseRef, CaptureInput, CaptureMeta, DEFAULT_BOUNDS, LogInput, capture,
    write_incomplete,
};
use stockade_gateway::{AuditRecord, Decision, Gateway, GatewayConfig, GatewayHandle};
use stockade_policy::{AgentPreset, SandboxPolicy, TrustedModelConnections, WorkUnit};
use stockade_sandbox::{
    Backend, ExitStatus, Launch, LeaseHolder, LeaseStore, RawProcess, Session, SessionId,
    StdinMode, TemplateSpec,
};
use tokio::sync::{Semaphore, mpsc, watch};

use crate::outcome::{AgentExit, AttemptError, AttemptOutcome, AttemptStatus};
use crate::plan::{LaunchPlan, check_secrets, plan_launch};
use crate::progress::{OutputStream, Progress, ProgressKind, Stage};

/// Largest agent output kept in each host log file; the rest is counted, not kept.
pub const MAX_LOG_BYTES: u64 = 16 << 20;

/// One attempt to run.
#[derive(Debug, Clone)]
pub struct AttemptRequest {
    /// The attempt id (`[A-Za-z0-9._-]`, 1-128, not starting with a dot); `None` makes one
    /// from the work unit id, the time and the process id.
    pub attempt_id: Option<String>,
    /// The maintainer-owned preset.
    pub preset: AgentPreset,
    /// The task.
    pub work_unit: WorkUnit,
    /// The host operator's trusted model connections.
    pub trusted: TrustedModelConnections,
    /// The canonical repository (never written).
    pub repo: PathBuf,
    /// The artifact store root (outside the repository and every workspace).
    pub artifacts_dir: PathBuf,
    /// Stockade's state: workspace templates, leases and per-attempt host logs.
    pub state_dir: PathBuf,
    /// Extra trusted root certificate (PEM) for the gateway's upstream TLS (tests).
    pub gateway_extra_ca_pem: Option<Vec<u8>>,
}

/// Settings shared by every attempt of one orchestrator.
#[derive(Debug, Clone)]
pub struct OrchestratorConfig {
    /// Attempts running at once; more wait in [`Stage::Queued`].
    pub max_concurrent: usize,
    /// Longest a backend probe may take.
    pub probe_timeout: Duration,
    /// Longest Stockade waits for a killed process tree to be reaped before it gives up and
    /// records the attempt as incomplete (capture never runs beside a live worker).
    pub contain_timeout: Duration,
}

impl Default for OrchestratorConfig {
    fn default() -> Self {
        OrchestratorConfig {
            max_concurrent: 2,
            probe_timeout: Duration::from_secs(60),
            contain_timeout: Duration::from_secs(30),
        }
    }
}

/// Cancels attempts: [`CancelHandle::cancel`] makes every attempt holding the paired
/// [`Cancel`] kill its worker, clean up and write an incomplete record.
#[derive(Debug, Clone)]
pub struct CancelHandle(Arc<watch::Sender<bool>>);

/// The receiving side of a [`CancelHandle`].
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

impl CancelHandle {
    /// A new handle and its token.
    pub fn new() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(false);
        (CancelHandle(Arc::new(tx)), Cancel(rx))
    }

    /// Cancels every attempt holding a paired token.
    pub fn cancel(&self) {
        let _ = self.0.send(true);
    }
}

impl Cancel {
    /// A token that is never cancelled.
    pub fn never() -> Cancel {
        let (tx, rx) = watch::channel(false);
        // Keep the sender alive forever so `changed()` pends instead of erroring.
        std::mem::forget(tx);
        Cancel(rx)
    }

    fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    async fn cancelled(&mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Runs attempts on one backend, at most [`OrchestratorConfig::max_concurrent`] at once.
#[derive(Clone)]
pub struct Orchestrator {
    backend: Arc<dyn Backend>,
    slots: Arc<Semaphore>,
    config: OrchestratorConfig,
}

impl std::fmt::Debug for Orchestrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Orchestrator")
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .finish()
    }
}

type Events = Option<mpsc::UnboundedSender<Progress>>;

/// The live parts of an attempt. Dropping it before the attempt finished (a caller dropped the
/// future, or a step failed) kills the worker's tree, shuts the session down and writes an
/// honest incomplete record.
struct Live {
    attempt_id: String,
    started: Instant,
    stage: Stage,
    events: Events,
    work_unit_id: String,
    preset_id: String,
    base_commit: String,
    policy_id: String,
    attestation: Value,
    store: Option<ArtifactStore>,
    logs: Vec<LogInput>,
    process: Option<Box<dyn RawProcess>>,
    session: Option<Session>,
    gateway: Option<GatewayHandle>,
    finished: bool,
}

impl Live {
    fn emit(&self, kind: ProgressKind) {
        if let Some(tx) = &self.events {
            let _ = tx.send(Progress {
                attempt_id: self.attempt_id.clone(),
                elapsed: self.started.elapsed(),
                kind,
            });
        }
    }

    fn stage(&mut self, stage: Stage) {
        self.stage = stage;
        self.emit(ProgressKind::Stage { stage });
    }

    fn meta(&self, exit_report: Value) -> CaptureMeta {
        CaptureMeta {
            attempt_id: self.attempt_id.clone(),
            work_unit_id: self.work_unit_id.clone(),
            preset_id: self.preset_id.clone(),
            policy_id: self.policy_id.clone(),
            capability_attestation: self.attestation.clone(),
            exit_report,
            logs: self
                .logs
                .iter()
                .filter(|l| l.path.is_file())
                .cloned()
                .collect(),
        }
    }

    /// Kills whatever runs and shuts the session down, synchronously.
    fn teardown(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.kill_tree();
            let _ = p.wait();
        }
        self.gateway.take();
        if let Some(mut s) = self.session.take() {
            let _ = s.shutdown();
            let _ = s.delete();
        }
    }

    fn write_incomplete(
        &self,
        reason: &str,
        exit_report: Value,
    ) -> Option<stockade_capture::Captured> {
        let store = self.store.as_ref()?;
        write_incomplete(
            store,
            &self.base_commit,
            DEFAULT_BOUNDS,
            &self.meta(exit_report),
            reason,
        )
        .ok()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.teardown();
        let reason = format!(
            "cancelled: the attempt was abandoned during stage {}",
            self.stage
        );
        let _ = self.write_incomplete(
            &reason,
            json!({ "cancelled": true, "stage": self.stage.as_str() }),
        );
    }
}

fn make_attempt_id(work_unit_id: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = blake3::Hasher::new();
    h.update(&nanos.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let prefix: String = work_unit_id.chars().take(96).collect();
    format!("{prefix}-{}", &h.finalize().to_hex()[..16])
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AttemptError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AttemptError::Internal(format!("blocking step failed: {e}")))
}

/// Makes a JSON value canonical-JSON safe: floats become strings (canonical JSON refuses them).
fn without_floats(v: Value) -> Value {
    match v {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => Value::String(n.to_string()),
        Value::Array(a) => Value::Array(a.into_iter().map(without_floats).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, without_floats(v))).collect())
        }
        other => other,
    }
}

fn gateway_counts(audit: &[AuditRecord]) -> (u64, u64, u64) {
    let n = |d: Decision| audit.iter().filter(|r| r.decision == d).count() as u64;
    (audit.len() as u64, n(Decision::Denied), n(Decision::Failed))
}

/// Copies one agent stream to a host log file (bounded), counting bytes and reporting chunks.
fn pump(
    mut from: Box<dyn Read + Send>,
    to: PathBuf,
    stream: OutputStream,
    total: Arc<AtomicU64>,
    live_events: (Events, String, Instant),
) {
    let (events, attempt_id, started) = live_events;
    let mut file = std::fs::File::create(&to).ok();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let before = total.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(f) = file.as_mut() {
            let room = MAX_LOG_BYTES.saturating_sub(before);
            let keep = (n as u64).min(room) as usize;
            if keep > 0 && f.write_all(&buf[..keep]).is_err() {
                file = None;
            }
        }
        if let Some(tx) = &events {
            let _ = tx.send(Progress {
                attempt_id: attempt_id.clone(),
                elapsed: started.elapsed(),
                kind: ProgressKind::Output {
                    stream,
                    chunk: buf[..n].to_vec(),
                    total: before + n as u64,
                },
            });
        }
    }
}

struct Ran {
    exit: AgentExit,
    usage: Option<Value>,
    audit: Vec<AuditRecord>,
    output: (u64, u64),
}

impl Orchestrator {
    /// An orchestrator for `backend`.
    pub fn new(backend: Arc<dyn Backend>, config: OrchestratorConfig) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_concurrent.max(1)));
        Orchestrator {
            backend,
            slots,
            config,
        }
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &str {
        self.backend.name()
    }

    /// Runs several attempts, each in its own sandbox, at most `max_concurrent` at once.
    /// Outcomes come back in the order of `requests`.
    pub async fn run_many(
        &self,
        requests: Vec<AttemptRequest>,
        events: Events,
        cancel: Cancel,
    ) -> Vec<AttemptOutcome> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, req) in requests.into_iter().enumerate() {
            let this = self.clone();
            let events = events.clone();
            let cancel = cancel.clone();
            tasks.spawn(async move { (i, this.run(req, events, cancel).await) });
        }
        let mut out: Vec<(usize, AttemptOutcome)> = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            if let Ok(pair) = joined {
                out.push(pair);
            }
        }
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, o)| o).collect()
    }

    /// Runs one attempt. Never panics and never returns without cleaning up: every failure,
    /// and cancellation through `cancel`, kills the worker's tree, shuts the session down and
    /// writes an incomplete record to the artifact store where one can be written. Dropping
    /// the returned future does the same synchronously.
    pub async fn run(&self, req: AttemptRequest, events: Events, cancel: Cancel) -> AttemptOutcome {
        let attempt_id = req
            .attempt_id
            .clone()
            .unwrap_or_else(|| make_attempt_id(&req.work_unit.id));
        let mut live = Live {
            attempt_id: attempt_id.clone(),
            started: Instant::now(),
            stage: Stage::Queued,
            events,
            work_unit_id: req.work_unit.id.clone(),
            preset_id: req.preset.id.clone(),
            base_commit: req.work_unit.base_commit.clone(),
            policy_id: String::new(),
            attestation: Value::Null,
            store: None,
            logs: Vec::new(),
            process: None,
            session: None,
            gateway: None,
            finished: false,
        };
        let mut outcome = AttemptOutcome {
            attempt_id,
            status: AttemptStatus::Incomplete,
            error: None,
            policy_id: None,
            protections: Vec::new(),
            agent_exit: None,
            elapsed: Duration::ZERO,
            output_bytes: (0, 0),
            gateway_audit: Vec::new(),
            usage: None,
            manifest: None,
            manifest_path: None,
            artifacts_dir: req.artifacts_dir.clone(),
            log_paths: Vec::new(),
        };
        let result = self.attempt(&mut live, &mut outcome, req, cancel).await;
        match result {
            Ok(()) => {}
            Err(error) => {
                live.teardown();
                let refused = error.is_refusal() || matches!(error, AttemptError::AttemptId(_));
                outcome.status = if refused {
                    AttemptStatus::Refused
                } else {
                    AttemptStatus::Incomplete
                };
                let exit_report = json!({
                    "error": error.to_string(),
                    "refused": refused,
                    "stage": live.stage.as_str(),
                    "agent_exit": serde_json::to_value(&outcome.agent_exit).unwrap_or(Value::Null),
                });
                let reason = format!(
                    "{} during stage {}: {error}",
                    if refused { "refused" } else { "failed" },
                    live.stage
                );
                if let Some(captured) = live.write_incomplete(&reason, exit_report) {
                    outcome.manifest = Some(captured.manifest);
                    outcome.manifest_path = Some(captured.manifest_path);
                }
                outcome.error = Some(error);
            }
        }
        live.finished = true;
        outcome.elapsed = live.started.elapsed();
        live.stage(Stage::Done);
        outcome
    }

    async fn attempt(
        &self,
        live: &mut Live,
        outcome: &mut AttemptOutcome,
        req: AttemptRequest,
        mut cancel: Cancel,
    ) -> Result<(), AttemptError> {
        if !stockade_manifest::is_valid_id(&live.attempt_id) {
            return Err(AttemptError::AttemptId(live.attempt_id.clone()));
        }
        // The artifact store first, so that even a refusal leaves an honest record.
        let store_root = req.artifacts_dir.clone();
        live.store = Some(blocking(move || ArtifactStore::open(&store_root)).await??);
        let attempt_dir = req.state_dir.join("attempts").join(&live.attempt_id);
        std::fs::create_dir_all(&attempt_dir)
            .map_err(|e| AttemptError::io(format!("create {}", attempt_dir.display()), e))?;

        live.stage(Stage::Queued);
        let _permit = tokio::select! {
            permit = self.slots.clone().acquire_owned() => permit.map_err(|_| AttemptError::Internal("concurrency limit closed".into()))?,
            _ = cancel.cancelled() => return Err(AttemptError::Cancelled(Stage::Queued)),
        };

        // 1. Policy.
        live.stage(Stage::Resolve);
        let policy = SandboxPolicy::resolve(&req.work_unit, &req.preset, &req.trusted)?;
        live.policy_id = policy.id().to_owned();
        live.base_commit = policy.base_commit().to_owned();
        outcome.policy_id = Some(policy.id().to_owned());
        let plan = plan_launch(&policy)?;
        check_secrets(&plan)?;

        // 2. Probe and admit: no admission, no worker.
        live.stage(Stage::Admit);
        let backend = Arc::clone(&self.backend);
        let caps = tokio::select! {
            caps = tokio::time::timeout(self.config.probe_timeout, blocking(move || backend.probe())) => caps
                .map_err(|_| AttemptError::BackendUnavailable(format!("probe did not finish within {:?}", self.config.probe_timeout)))??,
            _ = cancel.cancelled() => return Err(AttemptError::Cancelled(Stage::Admit)),
        };
        let admission = admit(&caps, &policy)?;
        live.attestation = without_floats(
            json!({ "admission": serde_json::to_value(&admission).unwrap_or(Value::Null) }),
        );
        outcome.protections = admission
            .protections()
            .map(|p| {
                (
                    p.to_string(),
                    admission.evidence(p).unwrap_or_default().to_owned(),
                )
            })
            .collect();

        // 3. Exact-SHA workspace template, then the backend's template on top of it.
        live.stage(Stage::Workspace);
        let (repo, commit, templates) = (
            req.repo.clone(),
            policy.base_commit().to_owned(),
            req.state_dir.join("templates"),
        );
        let ws = self
            .cancellable(
                &mut cancel,
                Stage::Workspace,
                blocking(move || {
                    std::fs::create_dir_all(&templates).map_err(|e| {
                        AttemptError::io(format!("create {}", templates.display()), e)
                    })?;
                    stockade_workspace::Template::prewarm(&repo, &commit, &templates)
                        .map_err(AttemptError::from)
                }),
            )
            .await???;
        let backend = Arc::clone(&self.backend);
        let spec = TemplateSpec {
            source_id: format!("stockade-workspace:{}", ws.key().as_str()),
            lower: ws.tree_dir().to_owned(),
            files: BTreeMap::new(),
        };
        let template = self
            .cancellable(
                &mut cancel,
                Stage::Workspace,
                blocking(move || backend.prewarm(&spec)),
            )
            .await???;

        // 4. Session (consumes the admission witness).
        live.stage(Stage::Session);
        let backend = Arc::clone(&self.backend);
        let leases = req.state_dir.join("leases");
        let session_id = SessionId::new(live.attempt_id.clone())?;
        let policy_for_session = policy.clone();
        let session = self
            .cancellable(
                &mut cancel,
                Stage::Session,
                blocking(move || -> Result<Session, AttemptError> {
                    let store =
                        LeaseStore::open(&leases).map_err(stockade_sandbox::SandboxError::from)?;
                    let holder = LeaseHolder {
                        pid: std::process::id(),
                        holder: "stockade-orchestrator".to_owned(),
                    };
                    Ok(Session::create(
                        backend.as_ref(),
                        store,
                        session_id,
                        holder,
                        &template,
                        &policy_for_session,
                        admission,
                    )?)
                }),
            )
            .await???;
        live.session = Some(session);

        // 5. Launch the agent with the gateway listeners, then serve them.
        live.stage(Stage::Launch);
        let LaunchPlan {
            mut argv,
            env,
            stdin,
            prompt_file,
            ports,
            routes,
        } = plan;
        let mut input_files = std::collections::BTreeMap::new();
        if let Some(bytes) = prompt_file {
            // `file` transport: only through the isolated input mount, never the workspace.
            let dir = live
                .session
                .as_ref()
                .and_then(|s| s.input_dir())
                .ok_or(AttemptError::IsolatedInputMountUnavailable)?;
            let path = dir.join("prompt").to_string_lossy().into_owned();
            for a in &mut argv {
                *a = a.replace(stockade_policy::PROMPT_FILE_PLACEHOLDER, &path);
            }
            input_files.insert("prompt".to_owned(), bytes);
        }
        let launch = Launch {
            argv,
            env,
            cwd: None,
            stdin: if stdin.is_some() {
                StdinMode::Piped
            } else {
                StdinMode::Null
            },
            loopback_ports: ports.iter().map(|(p, _)| *p).collect(),
            wall_time: Some(policy.wall_time()),
            input_files,
        };
        let session = live
            .session
            .as_mut()
            .ok_or_else(|| AttemptError::Internal("session vanished".into()))?;
        let prepared = session.prepare_launch(launch);
        let mut process = session.launch(prepared)?;
        let listeners = process.take_listeners();
        let stdin_pipe = process.take_stdin();
        let stdout = process.take_stdout();
        let stderr = process.take_stderr();
        live.process = Some(process);
        if listeners.len() != ports.len() {
            return Err(AttemptError::Internal(format!(
                "backend opened {} of {} gateway listeners",
                listeners.len(),
                ports.len()
            )));
        }
        if !routes.is_empty() {
            let tagged = listeners
                .into_iter()
                .map(|(port, l)| {
                    let rule = ports
                        .iter()
                        .find(|(p, _)| *p == port)
                        .map(|(_, r)| r.clone())
                        .unwrap_or_default();
                    (l, rule)
                })
                .collect();
            let mut config = GatewayConfig::new(routes);
            config.extra_root_ca_pem = req.gateway_extra_ca_pem.clone();
            live.gateway = Some(Gateway::start(config, tagged)?);
        }

        // Output pumps (host-side log files, outside the workspace and the store).
        let out_total = Arc::new(AtomicU64::new(0));
        let err_total = Arc::new(AtomicU64::new(0));
        let mut pumps = Vec::new();
        for (pipe, name, stream, total) in [
            (stdout, "stdout", OutputStream::Stdout, &out_total),
            (stderr, "stderr", OutputStream::Stderr, &err_total),
        ] {
            let path = attempt_dir.join(format!("agent-{name}.log"));
            live.logs.push(LogInput {
                name: format!("agent-{name}"),
                path: path.clone(),
            });
            outcome.log_paths.push(path.clone());
            if let Some(pipe) = pipe {
                let ctx = (live.events.clone(), live.attempt_id.clone(), live.started);
                let total = Arc::clone(total);
                pumps.push(tokio::task::spawn_blocking(move || {
                    pump(pipe, path, stream, total, ctx)
                }));
            }
        }

        // 6. Prompt.
        live.stage(Stage::Prompt);
        if let Some(bytes) = stdin {
            let Some(mut pipe) = stdin_pipe else {
                return Err(AttemptError::Internal(
                    "backend gave no stdin pipe for stdin transport".into(),
                ));
            };
            // Written on a blocking thread: a agent that never reads its stdin cannot stall us,
            // and closing the pipe ends the prompt.
            tokio::task::spawn_blocking(move || {
                let _ = pipe.write_all(&bytes);
                drop(pipe);
            });
        }

        // 7. Run under the wall-time budget.
        live.stage(Stage::Agent);
        let ran = self
            .supervise(live, &policy, &mut cancel, &out_total, &err_total)
            .await?;
        outcome.agent_exit = Some(ran.exit.clone());
        outcome.usage = ran.usage.clone();
        outcome.gateway_audit = ran.audit.clone();
        outcome.output_bytes = ran.output;
        if ran.exit == AgentExit::Cancelled {
            // The tree is contained; a cancelled attempt records no candidate, only why.
            return Err(AttemptError::Cancelled(Stage::Agent));
        }
        for p in pumps {
            let _ = tokio::time::timeout(Duration::from_secs(5), p).await;
        }
        // The gateway's audit, as a host-written log beside the agent's output.
        let audit_path = attempt_dir.join("gateway-audit.jsonl");
        let mut audit_text = String::new();
        for r in &ran.audit {
            audit_text.push_str(&serde_json::to_string(r).unwrap_or_default());
            audit_text.push('\n');
        }
        std::fs::write(&audit_path, audit_text)
            .map_err(|e| AttemptError::io(format!("write {}", audit_path.display()), e))?;
        live.logs.push(LogInput {
            name: "gateway-audit".into(),
            path: audit_path,
        });

        // 9. Capture, from outside, after the tree is gone; the manifest is written last.
        live.stage(Stage::Capture);
        let (requests, denied, failed) = gateway_counts(&ran.audit);
        let exit_report = without_floats(json!({
            "agent_exit": serde_json::to_value(&ran.exit).unwrap_or(Value::Null),
            "wall_time_budget_secs": policy.wall_time().as_secs(),
            "elapsed_ms": u64::try_from(live.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "stdout_bytes": ran.output.0,
            "stderr_bytes": ran.output.1,
            "gateway": { "requests": requests, "denied": denied, "failed": failed },
            "usage": ran.usage.clone().unwrap_or(Value::Null),
        }));
        let session = live
            .session
            .as_ref()
            .ok_or_else(|| AttemptError::Internal("session vanished".into()))?;
        let (layer, view) = (session.change_layer(), session.workspace_view());
        let store_root = req.artifacts_dir.clone();
        let repo = req.repo.clone();
        let base_commit = policy.base_commit().to_owned();
        let scope = policy.scope().clone();
        let meta = live.meta(exit_report);
        let captured = blocking(move || -> Result<stockade_capture::Captured, AttemptError> {
            let store = ArtifactStore::open(&store_root)?;
            let base = BaseRef { repo: &repo, commit: &base_commit };
            let input = match (&layer, &view) {
                (Some(upper), _) => CaptureInput::ChangeLayer { upper },
                (None, Some(dir)) => CaptureInput::FullTree { dir, stat_cache: None },
                (None, None) => return Err(AttemptError::BackendUnavailable("the session exposes neither a change layer nor a workspace view to capture".into())),
            };
            Ok(capture(input, base, &scope, DEFAULT_BOUNDS, &store, &meta)?)
        })
        .await??;
        outcome.manifest_path = Some(captured.manifest_path);
        let complete = matches!(
            captured.manifest.completion,
            stockade_manifest::Completion::Complete
        );
        outcome.manifest = Some(captured.manifest);
        outcome.status = match (&ran.exit, complete) {
            (AgentExit::Exited { code: 0 }, true) => AttemptStatus::CandidateCaptured,
            (_, false) => AttemptStatus::Incomplete,
            _ => AttemptStatus::AgentFailed,
        };

        // Disposable state goes; the template stays.
        if let Some(session) = live.session.take() {
            let _ = blocking(move || session.delete()).await;
        }
        Ok(())
    }

    async fn cancellable<T>(
        &self,
        cancel: &mut Cancel,
        stage: Stage,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T, AttemptError> {
        tokio::select! {
            v = fut => Ok(v),
            _ = cancel.cancelled() => Err(AttemptError::Cancelled(stage)),
        }
    }

    /// Watches the agent until it exits, its budget runs out or the attempt is cancelled; then
    /// contains the tree (kill, reap, shut the session down) and stops the gateway.
    async fn supervise(
        &self,
        live: &mut Live,
        policy: &SandboxPolicy,
        cancel: &mut Cancel,
        out: &AtomicU64,
        err: &AtomicU64,
    ) -> Result<Ran, AttemptError> {
        // The backend's watchdog (Launch::wall_time) is primary; this deadline, a little later, is
        // the fallback for a backend whose watchdog did not fire.
        let deadline = Instant::now() + policy.wall_time() + Duration::from_secs(2);
        let mut last_requests = 0u64;
        let exit = loop {
            let process = live
                .process
                .as_mut()
                .ok_or_else(|| AttemptError::Internal("process vanished".into()))?;
            if let Some(status) = process.try_wait()? {
                break match status {
                    ExitStatus::Exited { code } => AgentExit::Exited { code },
                    ExitStatus::Signaled { signal } => AgentExit::Signaled { signal },
                };
            }
            if Instant::now() >= deadline {
                let _ = process.kill_tree();
                break AgentExit::TimedOut;
            }
            if cancel.is_cancelled() {
                let _ = process.kill_tree();
                break AgentExit::Cancelled;
            }
            if let Some(gw) = &live.gateway {
                let audit = gw.audit();
                let (requests, denied, _) = gateway_counts(&audit);
                if requests != last_requests {
                    last_requests = requests;
                    live.emit(ProgressKind::Gateway { requests, denied });
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = cancel.cancelled() => {}
            }
        };

        // 8. Contain: nothing of the tree may outlive this point, whatever the agent did.
        live.stage(Stage::Contain);
        let mut process = live
            .process
            .take()
            .ok_or_else(|| AttemptError::Internal("process vanished".into()))?;
        let _ = process.kill_tree();
        let reaped = tokio::time::timeout(
            self.config.contain_timeout,
            blocking(move || {
                let r = process.wait();
                (process, r)
            }),
        )
        .await;
        let (process, waited) = match reaped {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(AttemptError::Containment(format!(
                    "the process tree was not reaped within {:?}",
                    self.config.contain_timeout
                )));
            }
        };
        if let Err(e) = waited {
            return Err(AttemptError::Containment(format!(
                "waiting for the process tree failed: {e}"
            )));
        }
        let usage = process.report().map(without_floats);
        drop(process);
        // The backend's own watchdog usually fires first and the agent then looks signalled;
        // its report says whether the wall-time budget ended it.
        let budget_hit = usage
            .as_ref()
            .and_then(|u| u.get("wall_time_budget_hit"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let exit = match exit {
            AgentExit::Signaled { .. } if budget_hit => AgentExit::TimedOut,
            other => other,
        };
        if let Some(mut session) = live.session.take() {
            let (session, shut) = blocking(move || {
                let r = session.shutdown();
                (session, r)
            })
            .await?;
            live.session = Some(session);
            shut?;
        }
        let audit = match live.gateway.take() {
            Some(gw) => {
                let audit = gw.audit();
                gw.shutdown().await;
                audit
            }
            None => Vec::new(),
        };
        Ok(Ran {
            exit,
            usage,
            audit,
            output: (out.load(Ordering::Relaxed), err.load(Ordering::Relaxed)),
        })
    }
}

/// Reads and parses a preset, work unit and trusted-connections file trio from disk.
pub fn load_inputs(
    preset: &Path,
    work_unit: &Path,
    trusted: &Path,
) -> Result<(AgentPreset, WorkUnit, TrustedModelConnections), LoadInputError> {
    fn read(p: &Path) -> Result<(Vec<u8>, String), LoadInputError> {
        let bytes = std::fs::read(p).map_err(|source| LoadInputError::Read {
            path: p.to_owned(),
            source,
        })?;
        Ok((
            bytes,
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ))
    }
    let (b, n) = read(preset)?;
    let preset = stockade_policy::load_preset(&b, &n)?;
    let (b, n) = read(work_unit)?;
    let work_unit = stockade_policy::load_work_unit(&b, &n)?;
    let (b, n) = read(trusted)?;
    let trusted = stockade_policy::load_trusted_connections(&b, &n)?;
    Ok((preset, work_unit, trusted))
}

/// Why an input file could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadInputError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file does not parse or fit the schema.
    #[error(transparent)]
    Load(#[from] stockade_policy::LoadError),
}
