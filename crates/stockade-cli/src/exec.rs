//! `stockade exec`: one program in a fresh sandbox.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use stockade_capabilities::{Protection, admit_protections};
use stockade_sandbox_linux::usage::{ExitOutcome, RunCeilings, RunLimits};
use stockade_sandbox_linux::{
    ExitStatus, LaunchError, LaunchSpec, TmpDir, WorkspaceView, launch, launch_from_main_thread,
};

use crate::codes;
use crate::units::{parse_cpus, parse_duration, parse_size};

/// Arguments of `stockade exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Directory mounted read-write at the same path and used as the working directory
    /// (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Host path made visible read-only at the same path (repeatable). Nothing else of the host
    /// is visible besides system directories.
    #[arg(long = "ro", value_name = "PATH")]
    ro: Vec<PathBuf>,
    /// Memory ceiling (e.g. 512M, 2G); refused unless the memory protection is attested.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory: Option<u64>,
    /// CPU ceiling in cores (e.g. 1.5); refused unless the cpu protection is attested.
    #[arg(long, value_name = "N", value_parser = parse_cpus)]
    cpus: Option<f64>,
    /// Process/thread ceiling; refused unless the pids protection is attested.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pids: Option<u32>,
    /// Writable-disk ceiling (e.g. 1G); refused unless the writable-disk protection is attested.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    disk: Option<u64>,
    /// Wall-time budget (e.g. 30s, 5m); the whole process tree is killed when it runs out.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wall: Option<Duration>,
    /// Extra environment variable for the program (repeatable). Nothing else of the host
    /// environment passes except TERM and LANG.
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Allow HTTP(S) requests to this exact origin (`scheme://host[:port]`, repeatable). The
    /// host-side gateway serves it on a loopback port inside the sandbox (printed on stderr and
    /// set in `STOCKADE_ORIGIN_ORIGIN_<N>` and `STOCKADE_GATEWAY_ORIGINS`); every other
    /// connection stays denied.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// A header the gateway sets on every request to ORIGIN, its value read on the host from an
    /// environment variable or a file: `NAME=env:VAR` or `NAME=file:PATH`, holding the whole
    /// header value (e.g. `Bearer sk-...`). The program never sees it. Repeatable.
    #[arg(long = "origin-header", num_args = 2, value_names = ["ORIGIN", "NAME=SOURCE"])]
    origin_header: Vec<String>,
    /// Write a JSON report of the run to FILE.
    #[arg(long, value_name = "FILE")]
    json_report: Option<PathBuf>,
    /// Prove every protection with a live probe in this process instead of reusing the
    /// attestation a recent process of this boot made on the same host, binary and user
    /// (ADR-0015); the fresh outcome is shared for later calls.
    #[arg(long)]
    live_probe: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<OsString>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE"))?;
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("invalid environment variable name `{k}`"));
    }
    Ok((k.to_owned(), v.to_owned()))
}

fn report(path: &Option<PathBuf>, value: serde_json::Value) {
    if let Some(p) = path {
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        if let Err(e) = std::fs::write(p, text + "\n") {
            eprintln!(
                "stockade: cannot write the json report {}: {e}",
                p.display()
            );
        }
    }
}

/// Runs `stockade exec`; returns the process exit code.
pub fn run(args: ExecArgs) -> i32 {
    // What this request needs: isolation always (added by admission), one ceiling per flag.
    let mut required = BTreeSet::new();
    let mut limits = Vec::new();
    if args.memory.is_some() {
        required.insert(Protection::Memory);
        limits.push("memory");
    }
    if args.cpus.is_some() {
        required.insert(Protection::Cpu);
        limits.push("cpus");
    }
    if args.pids.is_some() {
        required.insert(Protection::Pids);
        limits.push("pids");
    }
    if args.disk.is_some() {
        required.insert(Protection::WritableDisk);
        limits.push("disk");
    }
    // Ceiling canaries run only when a ceiling is requested (they take the longest). A live
    // probe made by a recent process of this boot on the same host key is reused (ADR-0015);
    // the launch's own seal still checks the worker's restrictions before exec.
    use stockade_sandbox_linux::shared::{self, Scope};
    let scope = if required.is_empty() {
        Scope::Isolation
    } else {
        Scope::Full
    };
    let max_age = if args.live_probe {
        Duration::ZERO
    } else {
        shared::DEFAULT_MAX_AGE
    };
    let attested = shared::probe_shared(scope, max_age);
    if let Some(w) = &attested.warning {
        eprintln!("stockade: warning: attestation not shared: {w}");
    }
    let attestation = serde_json::to_value(&attested.source).unwrap_or_default();
    let outcome = attested.outcome;
    let caps = &outcome.capabilities;
    if let Err(refusal) = admit_protections(caps, &required) {
        eprintln!("stockade: refused: {refusal}");
        report(
            &args.json_report,
            serde_json::json!({
                "outcome": "refused",
                "exit_code": codes::REFUSED,
                "missing": refusal.missing_protections().iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                "attestation": attestation,
            }),
        );
        return codes::REFUSED;
    }
    let not_in_force: Vec<&str> = Protection::ADR_0017
        .iter()
        .chain(
            [
                Protection::SeccompFilter,
                Protection::NoNewPrivs,
                Protection::Landlock,
            ]
            .iter(),
        )
        .filter(|p| !required.contains(*p) && !Protection::ISOLATION_FLOOR.contains(*p))
        .filter(|p| {
            !(caps.is_enforced(**p)
                && matches!(
                    p,
                    Protection::SeccompFilter | Protection::NoNewPrivs | Protection::Landlock
                ))
        })
        .map(|p| p.as_str())
        .collect();
    if !not_in_force.is_empty() {
        eprintln!(
            "stockade: note: not in force for this run: {}",
            not_in_force.join(", ")
        );
    }

    let workspace = match args
        .workspace
        .clone()
        .map_or_else(std::env::current_dir, Ok)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("stockade: cannot determine the workspace (current directory): {e}");
            return codes::SETUP_FAILED;
        }
    };
    let mut cmd = args.command.clone().into_iter();
    let Some(program) = cmd.next() else {
        eprintln!("stockade: no program given");
        return codes::USAGE;
    };
    let mut spec = LaunchSpec::new(program, cmd.collect(), workspace.clone())
        .with_env("HOME", stockade_sandbox_linux::SANDBOX_HOME);
    for name in ["TERM", "LANG"] {
        if let Some(v) = std::env::var_os(name) {
            spec = spec.with_env(name, v);
        }
    }
    for (k, v) in &args.env {
        spec = spec.with_env(k, v);
    }
    for p in &args.ro {
        spec = spec.with_ro(p.clone());
    }
    // Network (issue 6): each allowed origin is served by the host-side gateway on a loopback
    // listener the launcher opens inside the sandbox; secrets are checked here, before launch.
    let origin_headers: Vec<(String, String)> = args
        .origin_header
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect();
    let gateway_plan = match stockade_gateway::plan_for_sandbox(
        &args.allow_origin,
        &origin_headers,
        stockade_gateway::DEFAULT_FIRST_PORT,
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("stockade: {e}");
            report(
                &args.json_report,
                serde_json::json!({"outcome": "usage", "exit_code": codes::USAGE, "error": e.to_string()}),
            );
            return codes::USAGE;
        }
    };
    for (port, _) in &gateway_plan.ports {
        spec = spec.with_listener(*port);
    }
    for (k, v) in &gateway_plan.env {
        spec = spec.with_env(k, v);
    }
    for line in &gateway_plan.lines {
        eprintln!("{line}");
    }
    // Resource ceilings (issue 4): the worker cgroup (memory, cpu, pids; usage accounting and
    // tree kill), the writable area (one tmpfs bounding the workspace's writes and /tmp), and
    // the wall-time watchdog.
    let run_limits = RunLimits {
        memory_bytes: args.memory,
        cpu_millis: args
            .cpus
            .map(|c| (c * 1000.0).round().clamp(1.0, 1e9) as u32),
        pids: args.pids,
        disk_bytes: args.disk,
        wall: args.wall,
        // Usage numbers for the report come from the worker cgroup.
        account: args.json_report.is_some(),
    };
    let area_dir = stockade_sandbox_linux::disk::run_area_dir(&std::env::temp_dir());
    let mut ceilings = match RunCeilings::prepare(run_limits, "exec", &area_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stockade: {e}");
            report(
                &args.json_report,
                serde_json::json!({"outcome": "setup-failed", "exit_code": codes::SETUP_FAILED, "error": e.to_string()}),
            );
            return codes::SETUP_FAILED;
        }
    };
    spec = ceilings.place(spec);
    if let Some(area) = ceilings.area() {
        eprintln!(
            "stockade: note: --disk makes the workspace copy-on-write: the program's writes to it and to /tmp land in one {}-byte layer that is discarded after the run",
            area.limit()
        );
        spec = spec
            .with_tmp(TmpDir::Host(area.tmp()))
            .with_workspace(WorkspaceView::Overlay {
                lower: workspace.clone(),
                upper: area.upper(),
                work: area.work(),
                target: workspace.clone(),
            });
    }
    // Caller cancel (Ctrl-C, SIGTERM): kill the whole tree through its cgroup and finish
    // normally, so nothing is left behind and the report says the run was cancelled. The
    // handlers are in place before the launch. Without a cgroup the default disposition stays:
    // stockade dies and the PID namespace and parent-death signal take the worker with it.
    let cancelled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(killer) = ceilings.cgroup().map(|c| c.killer()) {
        let flag = std::sync::Arc::clone(&cancelled);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            use tokio::signal::unix::{SignalKind, signal};
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let (Ok(mut int), Ok(mut term)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) else {
                    return;
                };
                let _ = ready_tx.send(());
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = killer.kill_all();
            });
        });
        // Wait until the handlers are really installed (no timeout: a signal arriving between
        // launch and installation would otherwise take the default disposition). If the thread
        // could not install them it drops the sender and the default disposition stays, which
        // is still safe: the PID namespace and parent-death signal take the worker along.
        let _ = ready_rx.recv();
    }
    let start = Instant::now();
    // `main` outlives the worker, so it may be the worker's parent (parent-death signal).
    let mut worker = match launch_from_main_thread(spec) {
        Ok(w) => w,
        Err(e @ LaunchError::Exec { .. }) => {
            eprintln!("stockade: {e}");
            report(
                &args.json_report,
                serde_json::json!({"outcome": "not-found", "exit_code": codes::NOT_FOUND, "error": e.to_string()}),
            );
            return codes::NOT_FOUND;
        }
        Err(e) => {
            eprintln!("stockade: {e}");
            report(
                &args.json_report,
                serde_json::json!({"outcome": "setup-failed", "exit_code": codes::SETUP_FAILED, "error": e.to_string()}),
            );
            return codes::SETUP_FAILED;
        }
    };
    let gateway = if gateway_plan.routes.is_empty() {
        None
    } else {
        let started = gateway_plan
            .tag_listeners(worker.take_listeners())
            .and_then(|tagged| {
                stockade_gateway::BlockingGateway::start(
                    stockade_gateway::GatewayConfig::new(gateway_plan.routes.clone()),
                    tagged,
                )
            });
        match started {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!("stockade: gateway: {e}; killing the program");
                let _ = worker.kill();
                None
            }
        }
    };
    let watchdog_armed = ceilings.started();
    // With a cgroup the watchdog kills the whole tree at the budget; without one, kill PID 1.
    let waited = match args.wall.filter(|_| !watchdog_armed) {
        Some(budget) => match worker.wait_timeout(budget) {
            Ok(Some(s)) => Ok((s, false)),
            Ok(None) => {
                let _ = worker.kill();
                worker.wait().map(|s| (s, true))
            }
            Err(e) => Err(e),
        },
        None => worker.wait().map(|s| (s, false)),
    };
    let wall = start.elapsed();
    let wall_ms = wall.as_millis();
    let gateway_audit = gateway
        .map(stockade_gateway::BlockingGateway::shutdown)
        .unwrap_or_default();
    let gateway_denied = gateway_audit
        .iter()
        .filter(|r| r.decision != stockade_gateway::Decision::Allowed)
        .count();
    if !gateway_plan.routes.is_empty() {
        eprintln!(
            "stockade: gateway: {} requests, {gateway_denied} denied or failed",
            gateway_audit.len()
        );
    }
    match waited {
        Ok((status, timed_out)) => {
            let timed_out = timed_out || ceilings.wall_fired();
            let (run_report, cleanup_errors) =
                ceilings.finish(ExitOutcome::from(status), wall, timed_out);
            for e in &cleanup_errors {
                eprintln!("stockade: cleanup: {e}");
            }
            let was_cancelled = cancelled.load(std::sync::atomic::Ordering::SeqCst);
            let code = if was_cancelled {
                130
            } else if timed_out {
                codes::WALL_TIME
            } else {
                status.code()
            };
            if was_cancelled {
                eprintln!("stockade: cancelled; the process tree was killed");
            } else if timed_out {
                eprintln!("stockade: wall-time budget exhausted; the process tree was killed");
            } else if let Some(limit) = run_report.ended_by {
                eprintln!(
                    "stockade: the {} ceiling ended the run",
                    serde_json::to_value(limit)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                );
            }
            let (exit_code, signal) = match status {
                ExitStatus::Exited(c) => (Some(c), None),
                ExitStatus::Signaled(s) => (None, Some(s)),
                _ => (None, None),
            };
            let mut value = serde_json::to_value(&run_report).unwrap_or_default();
            if let Some(obj) = value.as_object_mut() {
                let extra = serde_json::json!({
                    "outcome": if was_cancelled { "cancelled" } else if timed_out { "wall-time" } else { "exited" },
                    "exit_code": code,
                    "program_exit_code": exit_code,
                    "signal": signal,
                    "limit": if timed_out { Some("wall-time") } else { None },
                    "wall_ms": wall_ms,
                    "limits_requested": limits,
                    "not_in_force": not_in_force,
                    "cleanup_errors": cleanup_errors,
                    "attestation": attestation,
                    "gateway": if gateway_plan.routes.is_empty() { serde_json::Value::Null } else { serde_json::json!({"origins": gateway_plan.lines, "requests": gateway_audit}) },
                });
                if let Some(extra) = extra.as_object() {
                    for (k, v) in extra {
                        obj.insert(k.clone(), v.clone());
                    }
                }
            }
            report(&args.json_report, value);
            code
        }
        Err(e) => {
            eprintln!("stockade: waiting for the program failed: {e}");
            codes::SETUP_FAILED
        }
    }
}

/// The hidden `__bench-launch` loop (see `main.rs`). Refuses like `exec` when isolation is not
/// attested.
pub fn bench_launch() -> i32 {
    let caps = stockade_sandbox_linux::probe_isolation().capabilities;
    if let Err(refusal) = admit_protections(&caps, &BTreeSet::new()) {
        eprintln!("stockade: refused: {refusal}");
        return codes::REFUSED;
    }
    let ws = std::env::temp_dir();
    let ws = ws.join(format!("stockade-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&ws) {
        eprintln!("stockade: {e}");
        return codes::SETUP_FAILED;
    }
    let mut line = String::new();
    let code = loop {
        line.clear();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => break 0,
            Ok(_) => {}
            Err(e) => {
                eprintln!("stockade: {e}");
                break codes::SETUP_FAILED;
            }
        }
        let start = Instant::now();
        let spec = LaunchSpec::new("/bin/true", vec![], ws.clone());
        let status = launch(spec).and_then(|mut w| {
            w.wait().map_err(|e| LaunchError::Sys {
                what: "wait",
                source: e,
            })
        });
        match status {
            Ok(ExitStatus::Exited(0)) => println!("{}", start.elapsed().as_nanos()),
            Ok(s) => {
                eprintln!("stockade: /bin/true ended with {s:?}");
                break codes::SETUP_FAILED;
            }
            Err(e) => {
                eprintln!("stockade: {e}");
                break codes::SETUP_FAILED;
            }
        }
    };
    let _ = std::fs::remove_dir(&ws);
    code
}
