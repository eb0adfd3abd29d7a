//! `stockade run`: one attempt of an agent preset on a work unit, end to end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use stockade_orchestrator::progress::{Progress, ProgressKind, Stage};
use stockade_orchestrator::{
    AttemptOutcome, AttemptRequest, AttemptStatus, CancelHandle, EXIT_AGENT_FAILED, EXIT_CAPTURED,
    EXIT_INCOMPLETE, EXIT_REFUSED, Orchestrator, OrchestratorConfig, load_inputs,
};
use stockade_sandbox::Backend;

/// Exit codes of `stockade run` and `stockade demo`.
pub const RUN_EXIT_CODES_HELP: &str = "\
Exit status:
  0    candidate captured: the agent exited 0 and the manifest is complete
       (a candidate is not an acceptance: nothing was verified or merged)
  10   refused before any worker started (policy, missing protection, missing
       credential, unsupported prompt transport); the message names the fix
  11   the agent failed (non-zero exit, signal or wall-time budget); what it
       changed was still captured and a manifest written
  12   Stockade could not finish the attempt, or it was cancelled; an
       incomplete record was written where possible
  13   (demo only) the demo ran but one of its checks failed
  123  invalid command line";

/// Arguments of `stockade run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The maintainer-owned agent preset (TOML or JSON).
    #[arg(long, value_name = "FILE")]
    preset: PathBuf,
    /// The work unit (TOML or JSON).
    #[arg(long = "work-unit", value_name = "FILE")]
    work_unit: PathBuf,
    /// The host operator's trusted model connections (default: $STOCKADE_TRUSTED, else
    /// /etc/stockade/trusted-connections.toml if present, else an empty allow-list).
    #[arg(long, value_name = "FILE")]
    trusted: Option<PathBuf>,
    /// The canonical repository (default: the current directory). Never written.
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// Artifact store for patches, blobs, logs and manifests (default: STATE/artifacts).
    #[arg(long, value_name = "DIR")]
    artifacts: Option<PathBuf>,
    /// Stockade's state: templates, leases, host logs (default: $STOCKADE_STATE_DIR, else
    /// $HOME/.local/state/stockade).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Extra trusted root certificate (PEM) for the gateway's upstream TLS.
    #[arg(long, value_name = "FILE", hide = true)]
    gateway_ca: Option<PathBuf>,
}

/// The default state directory.
pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STOCKADE_STATE_DIR") {
        return PathBuf::from(d);
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/state/stockade"),
        None => std::env::temp_dir().join("stockade-state"),
    }
}

/// The sandbox backend of this build (the Linux namespaces backend, keeping its templates and
/// sessions under `STATE/backend`), or why there is none. Never a raw-process fallback: its
/// probe runs a canary inside a real sandbox (this executable, re-executed).
pub fn backend(state: &Path) -> Result<Arc<dyn Backend>, String> {
    let backend = stockade_sandbox_linux::backend::LinuxBackend::new(state.join("backend"))
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(backend))
}

fn trusted_path(arg: Option<PathBuf>) -> Option<PathBuf> {
    arg.or_else(|| std::env::var_os("STOCKADE_TRUSTED").map(PathBuf::from))
        .or_else(|| {
            let p = PathBuf::from("/etc/stockade/trusted-connections.toml");
            p.is_file().then_some(p)
        })
}

/// Renders untrusted bytes (agent output, paths) without terminal control sequences.
pub fn sanitize(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Renders progress on stderr while the attempt runs: one updating line on a terminal,
/// nothing otherwise.
pub async fn render_progress(mut rx: tokio::sync::mpsc::UnboundedReceiver<Progress>) {
    let tty = std::io::stderr().is_terminal();
    let (mut stage, mut out, mut err, mut requests, mut denied) =
        (Stage::Queued, 0u64, 0u64, 0u64, 0u64);
    while let Some(p) = rx.recv().await {
        match p.kind {
            ProgressKind::Stage { stage: s } => stage = s,
            ProgressKind::Output { stream, total, .. } => match stream {
                stockade_orchestrator::progress::OutputStream::Stdout => out = total,
                stockade_orchestrator::progress::OutputStream::Stderr => err = total,
            },
            ProgressKind::Gateway {
                requests: r,
                denied: d,
            } => (requests, denied) = (r, d),
            _ => {}
        }
        if tty {
            eprint!(
                "\r\x1b[2K[{:>9}] {:>6.1}s  agent output {} / {}  gateway {} request(s), {} denied",
                stage.as_str(),
                p.elapsed.as_secs_f64(),
                human(out),
                human(err),
                requests,
                denied
            );
            if stage == Stage::Done {
                eprintln!();
            }
        }
    }
}

/// The summary of an outcome, as JSON.
pub fn summary_json(o: &AttemptOutcome) -> serde_json::Value {
    let manifest = o.manifest.as_ref();
    serde_json::json!({
        "attempt_id": o.attempt_id,
        "status": o.status,
        "exit_code": o.exit_code(),
        "error": o.error.as_ref().map(ToString::to_string),
        "policy_id": o.policy_id,
        "protections": o.protections.iter().map(|(p, e)| serde_json::json!({ "protection": p, "evidence": e })).collect::<Vec<_>>(),
        "agent_exit": o.agent_exit,
        "elapsed_ms": u64::try_from(o.elapsed.as_millis()).unwrap_or(u64::MAX),
        "stdout_bytes": o.output_bytes.0,
        "stderr_bytes": o.output_bytes.1,
        "gateway": o.gateway_audit,
        "usage": o.usage,
        "manifest_path": o.manifest_path,
        "completion": manifest.map(|m| serde_json::to_value(&m.completion).unwrap_or_default()),
        "accepted": manifest.map(|m| m.accepted.iter().map(|c| sanitize(c.path.as_bytes())).collect::<Vec<_>>()),
        "rejected": manifest.map(|m| m.rejected.iter().map(|c| serde_json::json!({ "path": sanitize(c.path.as_bytes()), "reason": serde_json::to_value(&c.reason).unwrap_or_default() })).collect::<Vec<_>>()),
        "bounds_hit": manifest.map(|m| serde_json::to_value(&m.bounds_hit).unwrap_or_default()),
        "patch": manifest.and_then(|m| m.artifacts.patch.as_ref()).and_then(|a| stockade_manifest::artifact_relative_path(&a.blake3)).map(|p| o.artifacts_dir.join(p)),
        "logs": o.log_paths,
    })
}

/// Prints the human summary of an outcome on stdout.
pub fn print_summary(o: &AttemptOutcome) {
    let verdict = match o.status {
        AttemptStatus::CandidateCaptured => {
            "candidate captured (not verified, not accepted, not merged)"
        }
        AttemptStatus::AgentFailed => "agent failed; its changes were still captured",
        AttemptStatus::Refused => "refused; no worker started",
        AttemptStatus::Incomplete => "incomplete",
    };
    println!("attempt {}: {verdict}", o.attempt_id);
    if let Some(e) = &o.error {
        println!(
            "  {}",
            sanitize(e.to_string().as_bytes()).replace('\n', "\n  ")
        );
    }
    if !o.protections.is_empty() {
        println!("protections in force:");
        for (p, evidence) in &o.protections {
            println!("  {p:<26} {}", sanitize(evidence.as_bytes()));
        }
    }
    if let Some(exit) = &o.agent_exit {
        println!("agent: {}", serde_json::to_string(exit).unwrap_or_default());
        println!(
            "agent output: {} stdout, {} stderr",
            human(o.output_bytes.0),
            human(o.output_bytes.1)
        );
    }
    let denied: Vec<_> = o
        .gateway_audit
        .iter()
        .filter(|r| r.decision != stockade_gateway::Decision::Allowed)
        .collect();
    println!(
        "gateway: {} request(s), {} allowed, {} denied or failed",
        o.gateway_audit.len(),
        o.gateway_audit.len() - denied.len(),
        denied.len()
    );
    for r in denied {
        println!(
            "  {:?} {} {} {} -> {} ({})",
            r.decision,
            r.method,
            r.origin,
            sanitize(r.path.as_bytes()),
            r.status,
            r.reason.as_deref().unwrap_or("-")
        );
    }
    if let Some(usage) = &o.usage {
        println!("limits and usage: {usage}");
    }
    if let Some(m) = &o.manifest {
        match &m.completion {
            stockade_manifest::Completion::Complete => println!("capture: complete"),
            stockade_manifest::Completion::Incomplete { reason } => {
                println!("capture: INCOMPLETE: {}", sanitize(reason.as_bytes()))
            }
        }
        println!("accepted changes ({}):", m.accepted.len());
        for c in &m.accepted {
            println!("  {:?} {}", c.kind, sanitize(c.path.as_bytes()));
        }
        println!("rejected changes ({}):", m.rejected.len());
        for c in &m.rejected {
            println!(
                "  {} — {}",
                sanitize(c.path.as_bytes()),
                serde_json::to_string(&c.reason).unwrap_or_default()
            );
        }
        for b in &m.bounds_hit {
            println!(
                "bound hit: {}",
                serde_json::to_string(b).unwrap_or_default()
            );
        }
        if let Some(patch) = m
            .artifacts
            .patch
            .as_ref()
            .and_then(|a| stockade_manifest::artifact_relative_path(&a.blake3))
        {
            println!("patch:    {}", o.artifacts_dir.join(patch).display());
        }
    }
    if let Some(p) = &o.manifest_path {
        println!("manifest: {}", p.display());
        println!("verify:   stockade manifest verify {}", p.display());
    }
}

/// Runs one attempt with Ctrl-C wired to cancellation, rendering progress.
pub async fn run_attempt(backend: Arc<dyn Backend>, req: AttemptRequest) -> AttemptOutcome {
    let orch = Orchestrator::new(
        backend,
        OrchestratorConfig {
            max_concurrent: 1,
            ..OrchestratorConfig::default()
        },
    );
    let (handle, cancel) = CancelHandle::new();
    tokio::spawn(async move {
        // Ctrl-C (SIGINT) and SIGTERM (a scheduler stopping the job) both cancel the attempt.
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => if r.is_err() { return },
            () = term => {}
        }
        eprintln!("\nstockade: interrupted; killing the worker and writing an incomplete record");
        handle.cancel();
    });
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let render = tokio::spawn(render_progress(rx));
    let outcome = orch.run(req, Some(tx), cancel).await;
    let _ = render.await;
    outcome
}

fn runtime() -> Result<tokio::runtime::Runtime, std::io::Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// `stockade run`.
pub fn run(args: RunArgs) -> i32 {
    let trusted = trusted_path(args.trusted.clone());
    let empty = std::env::temp_dir().join(format!(
        "stockade-empty-trusted-{}.toml",
        std::process::id()
    ));
    let trusted_file = match &trusted {
        Some(p) => p.clone(),
        None => {
            if let Err(e) = std::fs::write(&empty, "") {
                eprintln!("stockade: cannot write {}: {e}", empty.display());
                return EXIT_INCOMPLETE;
            }
            empty.clone()
        }
    };
    let loaded = load_inputs(&args.preset, &args.work_unit, &trusted_file);
    let _ = std::fs::remove_file(&empty);
    let (preset, work_unit, trusted) = match loaded {
        Ok(v) => v,
        Err(e) => {
            eprintln!("stockade: refused: {e}");
            return EXIT_REFUSED;
        }
    };
    let state = args.state.clone().unwrap_or_else(default_state_dir);
    let repo = match args.repo.clone().map_or_else(std::env::current_dir, Ok) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stockade: cannot determine the repository: {e}");
            return EXIT_INCOMPLETE;
        }
    };
    let gateway_extra_ca_pem = match &args.gateway_ca {
        Some(p) => match std::fs::read(p) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("stockade: cannot read {}: {e}", p.display());
                return EXIT_REFUSED;
            }
        },
        None => None,
    };
    let req = AttemptRequest {
        attempt_id: None,
        preset,
        work_unit,
        trusted,
        repo,
        artifacts_dir: args
            .artifacts
            .clone()
            .unwrap_or_else(|| state.join("artifacts")),
        state_dir: state,
        gateway_extra_ca_pem,
    };
    let backend = match backend(&req.state_dir) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("stockade: refused: backend unavailable: {e}");
            return EXIT_REFUSED;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stockade: cannot start the runtime: {e}");
            return EXIT_INCOMPLETE;
        }
    };
    let outcome = rt.block_on(run_attempt(backend, req));
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary_json(&outcome)).unwrap_or_default()
        );
    } else {
        print_summary(&outcome);
    }
    let code = outcome.exit_code();
    debug_assert!(
        [
            EXIT_CAPTURED,
            EXIT_REFUSED,
            EXIT_AGENT_FAILED,
            EXIT_INCOMPLETE
        ]
        .contains(&code)
    );
    code
}
