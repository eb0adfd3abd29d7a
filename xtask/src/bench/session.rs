//! `cargo xtask bench session [--files N] [--rounds R] [--warmup W]`: creating a sandbox
//! session on a prewarmed exact-SHA template (an overlay on a size-limited writable area,
//! ADR 0070) against `git worktree add --detach` of the same commit, alternating in one run,
//! medians, p99 and ratio. Also reports session creation on a 10-file template, to show the
//! cost does not grow with the template.
//!
//! Needs root (the overlay and the writable area are host mounts). The measured part of a
//! session round is `Session::create`; `delete` (unmounts) happens outside the measurement,
//! as `git worktree remove` does for the peer.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use stockade_capabilities::{
    BackendIdentity, CgroupVersion, HostFacts, Protection, ProtectionStatus, SandboxCapabilities,
};
use stockade_sandbox::{Backend, LeaseHolder, LeaseStore, Session, SessionId, TemplateSpec};
use stockade_sandbox_linux::backend::LinuxBackend;

use super::stats;
use super::workspace::{fixture, git, run_ok, workspace_root};

fn policy() -> anyhow::Result<stockade_policy::SandboxPolicy> {
    let preset = stockade_policy::load_preset(
        br#"
id = "bench"
kind = "model-only"
command = ["/bin/true"]
prompt_transport = "stdin"
sandbox_required = true
read_only_host_paths = []
[default_limits]
cpu_millis = 1000
memory_bytes = 268435456
disk_bytes = 268435456
pids = 64
"#,
        "bench-preset.toml",
    )?;
    let unit = stockade_policy::load_work_unit(
        br#"
id = "bench"
objective = "bench"
base_commit = "0123456789abcdef0123456789abcdef01234567"
scope = ["**"]
forbidden = []
[permissions]
sandbox_required = true
process_execution = true
secrets = []
wall_time_secs = 60
network = { mode = "none" }
[permissions.limits]
cpu_millis = 1000
memory_bytes = 268435456
disk_bytes = 268435456
pids = 64
"#,
        "bench-unit.toml",
    )?;
    Ok(stockade_policy::SandboxPolicy::resolve(
        &unit,
        &preset,
        &stockade_policy::TrustedModelConnections::default(),
    )?)
}

/// Session creation is measured, not attestation: the benchmark admits with a capability set
/// it states itself (the probe has its own tests and timings).
fn bench_caps() -> SandboxCapabilities {
    let mut caps = SandboxCapabilities::new(
        BackendIdentity::new(stockade_sandbox_linux::probe::BACKEND_NAME, "bench"),
        HostFacts {
            kernel: String::new(),
            landlock_abi: None,
            cgroup: CgroupVersion::V1,
        },
    );
    for p in Protection::ALL {
        caps.set(
            p,
            ProtectionStatus::Enforced {
                evidence: "benchmark of session creation only".into(),
            },
        );
    }
    caps
}

struct Args {
    files: usize,
    rounds: usize,
    warmup: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let mut out = Args {
        files: 100_000,
        rounds: 11,
        warmup: 2,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || -> anyhow::Result<usize> {
            it.next()
                .with_context(|| format!("{flag} needs a value"))?
                .parse()
                .with_context(|| format!("{flag} needs a number"))
        };
        match flag.as_str() {
            "--files" => out.files = value()?,
            "--rounds" => out.rounds = value()?,
            "--warmup" => out.warmup = value()?,
            other => bail!(
                "unknown argument {other}; usage: bench session [--files N] [--rounds R] [--warmup W]"
            ),
        }
    }
    ensure!(
        out.files > 0 && out.rounds > 0,
        "--files and --rounds must be positive"
    );
    Ok(out)
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let args = parse(args)?;
    stats::require("git", "apt-get install git")?;
    let (repo, commit) = fixture(args.files)?;
    let scratch = workspace_root().join("target/bench-fixtures/session-scratch");
    if scratch.exists() {
        // Leftovers of an interrupted run: remove the files first, then let git forget the
        // worktrees whose directories are now gone.
        std::fs::remove_dir_all(&scratch)?;
    }
    let _ = run_ok(git(&repo).args(["worktree", "prune"]));
    std::fs::create_dir_all(&scratch)?;
    let template_tree =
        stockade_workspace::Template::prewarm(&repo, &commit, &scratch.join("templates"))?;
    let small = scratch.join("small");
    for i in 0..10 {
        std::fs::create_dir_all(&small)?;
        std::fs::write(small.join(format!("f{i}")), b"x")?;
    }
    let backend = LinuxBackend::new(scratch.join("state"))?;
    let store = LeaseStore::open(scratch.join("leases"))?;
    let big = backend.prewarm(&TemplateSpec {
        source_id: template_tree.key().as_str().to_owned(),
        lower: template_tree.tree_dir().to_path_buf(),
        files: BTreeMap::new(),
    })?;
    let tiny = backend.prewarm(&TemplateSpec {
        source_id: "ten-files".into(),
        lower: small.clone(),
        files: BTreeMap::new(),
    })?;
    let policy = policy()?;
    let caps = bench_caps();
    let counter = std::cell::Cell::new(0usize);
    let create = |template: &stockade_sandbox::Template| -> anyhow::Result<Duration> {
        counter.set(counter.get() + 1);
        let admission =
            stockade_capabilities::admit(&caps, &policy).map_err(|r| anyhow::anyhow!("{r}"))?;
        let id = SessionId::new(format!("bench-{}", counter.get()))?;
        let holder = LeaseHolder {
            pid: std::process::id(),
            holder: "bench".into(),
        };
        let start = Instant::now();
        let session = Session::create(
            &backend,
            store.clone(),
            id,
            holder,
            template,
            &policy,
            admission,
        )?;
        let took = start.elapsed();
        session.delete()?;
        Ok(took)
    };
    let big_session = || create(&big);
    let tiny_session = || create(&tiny);
    let wt_counter = std::cell::Cell::new(0usize);
    let worktree = || -> anyhow::Result<Duration> {
        wt_counter.set(wt_counter.get() + 1);
        let dest = scratch.join(format!("wt-{}", wt_counter.get()));
        let dest_s = dest.to_str().context("utf-8 scratch path")?;
        let start = Instant::now();
        run_ok(git(&repo).args(["worktree", "add", "-q", "--detach", dest_s, &commit]))?;
        let took = start.elapsed();
        run_ok(git(&repo).args(["worktree", "remove", "--force", dest_s]))?;
        if dest.exists() {
            std::fs::remove_dir_all(&dest)?;
        }
        Ok(took)
    };
    println!(
        "bench session: template of {} files at {commit}; {} rounds after {} warm-up, alternating",
        args.files, args.rounds, args.warmup
    );
    let samples = stats::alternate(
        &[
            ("git worktree add --detach", &worktree),
            ("stockade session create (100k-file template)", &big_session),
            ("stockade session create (10-file template)", &tiny_session),
        ],
        args.warmup,
        args.rounds,
    )?;
    print!("{}", stats::report(&samples, "git worktree add --detach"));
    let goal = Duration::from_millis(10);
    let median = samples[1].median();
    println!(
        "goal: session creation under {} on the large template: median {} ({})",
        stats::fmt_duration(goal),
        stats::fmt_duration(median),
        if median < goal { "met" } else { "NOT met" }
    );
    let _ = run_ok(git(&repo).args(["worktree", "prune"]));
    std::fs::remove_dir_all(Path::new(&scratch))?;
    Ok(())
}
