//! `stockade demo`: the whole path on an embedded default, with no configuration.
//!
//! Builds a small repository whose test fails, starts a scripted model server on host loopback
//! as the trusted upstream (it refuses any request without the key only the host holds), and
//! runs the bundled demo agent in the full sandbox. The agent asks the "model" for a fix
//! through the gateway, applies it, runs the test, and tries forbidden things on the way.
//! The demo then judges from outside: no forbidden thing may have succeeded, neither the key
//! nor the planted host secret may appear in anything the agent produced, the model must have
//! seen only authorized requests, and `calc.py` must be the captured candidate.

use std::path::{Path, PathBuf};

use clap::Args;
use stockade_orchestrator::demo::{
    DemoHost, DemoRepo, build_demo_repo, demo_inputs, demo_model_script, unique_token,
};
use stockade_orchestrator::model_server::{ModelServerConfig, ScriptedModelServer};
use stockade_orchestrator::{AttemptRequest, AttemptStatus, EXIT_INCOMPLETE, EXIT_REFUSED};

use crate::run::{backend, print_summary, run_attempt, sanitize, summary_json};

/// Exit code: the demo ran but one of its checks failed.
pub const EXIT_DEMO_CHECK_FAILED: i32 = 13;

/// Arguments of `stockade demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo directory (repository, artifacts, logs) for inspection.
    #[arg(long)]
    keep: bool,
    /// Print the attempt summary as JSON on stdout (after the demo's own lines).
    #[arg(long)]
    json: bool,
}

fn unique_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("stockade-demo-{}-{nanos:x}", std::process::id()))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// Everything the demo sets up on the host.
struct Setup {
    dir: PathBuf,
    repo: PathBuf,
    commit: String,
    secret_path: PathBuf,
    secret: String,
    key: String,
}

fn setup() -> Result<Setup, String> {
    let dir = unique_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let repo = build_demo_repo(&dir.join("demo-repo.git")).map_err(|e| e.to_string())?;
    let secret = format!("STOCKADE-DEMO-HOST-SECRET-{}", unique_token("secret"));
    let secret_path = dir.join("host-secret.txt");
    write_private(&secret_path, secret.as_bytes())
        .map_err(|e| format!("write {}: {e}", secret_path.display()))?;
    let key = format!("sk-stockade-demo-{}", unique_token("key"));
    Ok(Setup {
        dir,
        repo: repo.path,
        commit: repo.commit,
        secret_path,
        secret,
        key,
    })
}

fn request(s: &Setup, model_port: u16) -> Result<AttemptRequest, String> {
    let key_file = s.dir.join("model-authorization");
    write_private(&key_file, format!("Bearer {}", s.key).as_bytes())
        .map_err(|e| format!("write {}: {e}", key_file.display()))?;
    let repo = DemoRepo {
        path: s.repo.clone(),
        commit: s.commit.clone(),
    };
    let (preset, work_unit, trusted) = demo_inputs(DemoHost {
        repo: &repo,
        model_port,
        key_file: &key_file,
        secret_path: &s.secret_path,
    })
    .map_err(|e| e.to_string())?;
    Ok(AttemptRequest {
        attempt_id: None,
        preset,
        work_unit,
        trusted,
        repo: s.repo.clone(),
        artifacts_dir: s.dir.join("artifacts"),
        state_dir: s.dir.join("state"),
        gateway_extra_ca_pem: None,
    })
}

/// `stockade demo`.
pub fn run(args: DemoArgs) -> i32 {
    let s = match setup() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stockade demo: setup failed: {e}");
            return EXIT_INCOMPLETE;
        }
    };
    let code = run_in(&s, &args);
    if args.keep {
        println!("demo directory kept: {}", s.dir.display());
    } else if let Err(e) = std::fs::remove_dir_all(&s.dir) {
        eprintln!("stockade demo: could not remove {}: {e}", s.dir.display());
    } else {
        println!("demo directory removed (run `stockade demo --keep` to inspect the artifacts)");
    }
    code
}

fn run_in(s: &Setup, args: &DemoArgs) -> i32 {
    println!("stockade demo");
    println!(
        "  repository:   {} (bare, commit {})",
        s.repo.display(),
        s.commit
    );
    println!(
        "  host secret:  {} (planted outside the workspace)",
        s.secret_path.display()
    );
    let backend = match backend(&s.dir.join("state")) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("stockade demo: refused: backend unavailable: {e}");
            return EXIT_REFUSED;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stockade demo: cannot start the runtime: {e}");
            return EXIT_INCOMPLETE;
        }
    };
    rt.block_on(async {
        let server = match ScriptedModelServer::start(ModelServerConfig { api_key: s.key.clone(), model: "stockade-scripted".into(), replies: demo_model_script() }).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("stockade demo: cannot start the scripted model server: {e}");
                return EXIT_INCOMPLETE;
            }
        };
        println!("  model server: http://{} (scripted; refuses requests without the host's key)", server.addr());
        let req = match request(s, server.addr().port()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("stockade demo: {e}");
                return EXIT_INCOMPLETE;
            }
        };
        println!("  running the demo agent in the sandbox...\n");
        let outcome = run_attempt(backend, req).await;
        let stdout = outcome.log_paths.first().and_then(|p| std::fs::read(p).ok()).unwrap_or_default();
        let stderr = outcome.log_paths.get(1).and_then(|p| std::fs::read(p).ok()).unwrap_or_default();
        println!("--- what the agent printed (inside the sandbox) ---");
        print!("{}", sanitize(&stdout));
        if !stderr.is_empty() {
            println!("--- agent stderr ---");
            print!("{}", sanitize(&stderr));
        }
        println!("--- end of agent output ---\n");
        print_summary(&outcome);
        // The candidate itself: the captured patch, read back from the artifact store.
        let patch = outcome
            .manifest
            .as_ref()
            .and_then(|m| m.artifacts.patch.as_ref())
            .and_then(|a| stockade_manifest::artifact_relative_path(&a.blake3))
            .and_then(|rel| std::fs::read(outcome.artifacts_dir.join(rel)).ok());
        if let Some(patch) = patch {
            const SHOWN: usize = 8 * 1024;
            println!("\n--- the captured candidate (git patch, {} bytes) ---", patch.len());
            print!("{}", sanitize(&patch[..patch.len().min(SHOWN)]));
            if patch.len() > SHOWN {
                println!("... ({} more bytes in the artifact)", patch.len() - SHOWN);
            }
            println!("--- end of candidate ---");
        }

        // Judge from outside.
        let mut failures: Vec<String> = Vec::new();
        let text = String::from_utf8_lossy(&stdout);
        for line in text.lines().filter(|l| l.starts_with("ALLOWED")) {
            failures.push(format!("a forbidden action succeeded: {}", sanitize(line.as_bytes())));
        }
        let manifest_text = outcome.manifest_path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
        for (what, needle) in [("the model key", s.key.as_str()), ("the host secret", s.secret.as_str())] {
            if text.contains(needle) || String::from_utf8_lossy(&stderr).contains(needle) {
                failures.push(format!("{what} appears in the agent's output"));
            }
            if manifest_text.contains(needle) {
                failures.push(format!("{what} appears in the manifest"));
            }
        }
        let requests = server.requests();
        if requests.iter().any(|r| !r.authorized) {
            failures.push("the model server saw a request without the key (it did not come through the gateway)".into());
        }
        if !requests.iter().any(|r| r.authorized && r.status == 200) {
            failures.push("the agent never reached the model through the gateway".into());
        }
        if outcome.status != AttemptStatus::CandidateCaptured {
            failures.push(format!("the attempt ended {:?}, not with a captured candidate", outcome.status));
        }
        let accepted: Vec<&[u8]> = outcome.manifest.as_ref().map(|m| m.accepted.iter().map(|c| c.path.as_bytes()).collect()).unwrap_or_default();
        if accepted != [b"calc.py".as_slice()] {
            failures.push("the captured candidate is not exactly calc.py".into());
        }
        server.shutdown().await;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&summary_json(&outcome)).unwrap_or_default());
        }
        println!();
        if failures.is_empty() {
            println!("demo: PASS — every forbidden action was denied, the key and the secret stayed on the host,");
            println!("      and the fix was captured from outside the sandbox as a candidate.");
            0
        } else {
            println!("demo: FAIL");
            for f in &failures {
                println!("  - {f}");
            }
            if outcome.status == AttemptStatus::Refused {
                outcome.exit_code()
            } else {
                EXIT_DEMO_CHECK_FAILED
            }
        }
    })
}
