//! `cargo xtask bench capture [--rounds N] [--files N] [--changes N]`: candidate capture against
//! `git status --porcelain -uall` + `git diff` on the same tree.
//!
//! A repository of 100k files is generated once with `git fast-import` (cached under
//! `target/bench-fixtures/capture-<files>`). Each run clones it twice: one clone is the full
//! tree (and git's work tree), the other is the lower layer of a real overlay mount; the same 1k
//! changes (modifications, additions, deletions, mode changes) are made in the full tree and
//! through the overlay's merged directory, the overlay is unmounted, and then the contenders
//! alternate round by round:
//!
//! * `git status+diff` — `git status --porcelain -uall` then `git diff` in the full tree;
//! * `capture layer` — `stockade_capture::capture` from the overlay upper directory;
//! * `capture full+cache` — from the full tree with a stat cache taken before the changes;
//! * `capture full` — from the full tree, hashing every file.
//!
//! Every capture enumerates, diffs and stores (patch, blobs, manifest) into an artifact store.
//! Peak memory is measured once per contender in a child process with `/usr/bin/time -f %M`.
//! Needs root (overlay mount) and `git`.

use super::stats;
use anyhow::{Context, bail};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use stockade_capture::{
    ArtifactStore, BaseRef, CaptureInput, CaptureMeta, DEFAULT_BOUNDS, StatCache, capture,
};
use stockade_policy::{PathPattern, PathScope};

fn file_path(i: usize) -> String {
    format!("d{:03}/s{}/f{:02}.txt", i / 1000, (i / 100) % 10, i % 100)
}

fn file_content(i: usize) -> String {
    format!("file {i}\n{}\nend\n", "x".repeat(i % 200))
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .with_context(|| format!("running git {args:?}"))?;
    if !out.status.success() {
        bail!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Generates (or reuses) the fixture repository; returns (repo, commit).
fn fixture(root: &Path, files: usize) -> anyhow::Result<(PathBuf, String)> {
    let dir = root.join(format!("target/bench-fixtures/capture-{files}"));
    let repo = dir.join("repo");
    let done = dir.join("done");
    if done.exists() {
        let commit = std::fs::read_to_string(&done)?.trim().to_owned();
        return Ok((repo, commit));
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q", "--bare"])?;
    eprintln!("generating {files}-file fixture with git fast-import ...");
    let mut child = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["fast-import", "--quiet"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::piped())
        .spawn()
        .context("spawning git fast-import")?;
    {
        let stdin = child.stdin.as_mut().context("fast-import stdin")?;
        let mut w = std::io::BufWriter::new(stdin);
        for i in 0..files {
            let c = file_content(i);
            write!(w, "blob\nmark :{}\ndata {}\n{c}\n", i + 1, c.len())?;
        }
        write!(
            w,
            "commit refs/heads/main\ncommitter bench <bench@example.invalid> 946684800 +0000\ndata 5\nbase\n"
        )?;
        for i in 0..files {
            let mode = if i % 50 == 0 { "100755" } else { "100644" };
            writeln!(w, "M {mode} :{} {}", i + 1, file_path(i))?;
        }
        w.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("git fast-import failed");
    }
    let commit = String::from_utf8(git(&repo, &["rev-parse", "refs/heads/main"])?)?
        .trim()
        .to_owned();
    std::fs::write(&done, &commit)?;
    Ok((repo, commit))
}

fn clone(repo: &Path, commit: &str, into: &Path) -> anyhow::Result<()> {
    let out = Command::new("git")
        .args(["clone", "-q", "--no-hardlinks", "--no-checkout"])
        .arg(repo)
        .arg(into)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()?;
    if !out.status.success() {
        bail!("git clone failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    git(into, &["checkout", "-q", commit])?;
    Ok(())
}

/// The same deterministic changes, made in `root` (a tree or an overlay's merged directory).
fn make_changes(root: &Path, files: usize, changes: usize) -> anyhow::Result<()> {
    let modify = changes * 7 / 10;
    let chmod = changes / 20;
    let delete = changes / 10;
    let add = changes - modify - chmod - delete;
    let stride = (files / (modify + chmod + delete + 1)).max(1);
    let mut idx = (0..).map(|k| (k * stride + 1) % files);
    for _ in 0..modify {
        let i = idx.next().context("index")?;
        let p = root.join(file_path(i));
        let mut c = std::fs::read(&p)?;
        c.extend_from_slice(b"changed by the worker\n");
        std::fs::write(&p, c)?;
    }
    for _ in 0..chmod {
        let i = idx.next().context("index")?;
        let p = root.join(file_path(i));
        let mode = if i % 50 == 0 { 0o644 } else { 0o755 };
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    }
    for _ in 0..delete {
        let i = idx.next().context("index")?;
        std::fs::remove_file(root.join(file_path(i)))?;
    }
    for k in 0..add {
        let p = if k % 3 == 0 {
            root.join(format!("newdir/n{:02}/new{k}.txt", k % 10))
        } else {
            root.join(format!("d{:03}/new{k}.txt", k % 100))
        };
        std::fs::create_dir_all(p.parent().context("parent")?)?;
        std::fs::write(&p, format!("new file {k}\n"))?;
    }
    Ok(())
}

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount_overlay(lower: &Path, upper: &Path, work: &Path, merged: &Path) -> anyhow::Result<Mount> {
    for d in [upper, work, merged] {
        std::fs::create_dir_all(d)?;
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={},metacopy=off,redirect_dir=off,index=off",
        lower.display(),
        upper.display(),
        work.display()
    );
    let out = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &opts])
        .arg(merged)
        .output()?;
    if !out.status.success() {
        bail!(
            "overlay mount failed (needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(Mount(merged.to_path_buf()))
}

fn scope() -> anyhow::Result<PathScope> {
    Ok(PathScope::new(vec![PathPattern::parse("**")?], vec![])?)
}

fn meta(attempt: String) -> CaptureMeta {
    CaptureMeta {
        attempt_id: attempt,
        work_unit_id: "bench".into(),
        preset_id: "bench".into(),
        policy_id: "bench".into(),
        capability_attestation: serde_json::Value::Null,
        exit_report: serde_json::Value::Null,
        logs: vec![],
    }
}

fn arg(args: &[String], name: &str, default: usize) -> anyhow::Result<usize> {
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args
            .get(i + 1)
            .with_context(|| format!("{name} needs a value"))?
            .parse()?),
        None => Ok(default),
    }
}

/// Child mode for peak-memory measurement: one capture, then exit.
fn child(args: &[String]) -> anyhow::Result<()> {
    let [mode, input, repo, commit, store] = args else {
        bail!("usage: --child <layer|full|full-cache> <input> <repo> <commit> <store>");
    };
    let store = ArtifactStore::open(Path::new(store))?;
    let cache;
    let input_ref = match mode.as_str() {
        "layer" => CaptureInput::ChangeLayer {
            upper: Path::new(input),
        },
        "full" => CaptureInput::FullTree {
            dir: Path::new(input),
            stat_cache: None,
        },
        _ => {
            // The cache cannot be taken before the changes in a child; this measures the cache's
            // memory on the changed tree (the same entries), not its hit rate.
            cache = StatCache::build(Path::new(input))?;
            CaptureInput::FullTree {
                dir: Path::new(input),
                stat_cache: Some(&cache),
            }
        }
    };
    let base = BaseRef {
        repo: Path::new(repo),
        commit,
    };
    capture(
        input_ref,
        base,
        &scope()?,
        DEFAULT_BOUNDS,
        &store,
        &meta(format!("child-{mode}-{}", std::process::id())),
    )?;
    Ok(())
}

/// Runs one child under `/usr/bin/time`; returns (peak KiB, user+system CPU seconds).
fn child_usage(program: &Path, args: &[&str]) -> anyhow::Result<(u64, f64)> {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M %U %S"])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
        .context("running /usr/bin/time (apt-get install time)")?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text.lines().last().unwrap_or("").trim();
    let f: Vec<&str> = last.split_whitespace().collect();
    let [kib, user, sys] = f[..] else {
        bail!("cannot parse /usr/bin/time output {last:?}");
    };
    Ok((kib.parse()?, user.parse::<f64>()? + sys.parse::<f64>()?))
}

/// CPU seconds (user + system) of this process and its waited-for children, from
/// `/proc/self/stat` (clock ticks of 10 ms; summed over all rounds, so the mean is meaningful).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields after the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12) + tick(13) + tick(14)) / 100.0
}

/// Wraps a contender so its CPU time is added to `acc`.
fn with_cpu<'a>(
    acc: &'a Cell<f64>,
    f: &'a dyn Fn() -> anyhow::Result<Duration>,
) -> impl Fn() -> anyhow::Result<Duration> + 'a {
    move || {
        let c0 = cpu_seconds();
        let d = f()?;
        acc.set(acc.get() + cpu_seconds() - c0);
        Ok(d)
    }
}

/// Runs the `capture` benchmark.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    if args.first().map(String::as_str) == Some("--child") {
        return child(&args[1..]);
    }
    let rounds = arg(args, "--rounds", 7)?;
    let files = arg(args, "--files", 100_000)?;
    let changes = arg(args, "--changes", 1_000)?;
    stats::require("git", "apt-get install git")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?
        .to_path_buf();
    let (repo, commit) = fixture(&root, files)?;
    let tmp = tempfile::tempdir()?;
    let full = tmp.path().join("full");
    let lower = tmp.path().join("lower");
    let upper = tmp.path().join("upper");
    let t = Instant::now();
    clone(&repo, &commit, &full)?;
    clone(&repo, &commit, &lower)?;
    eprintln!("checked out twice in {:.1?}", t.elapsed());
    // The stat cache must be older than the racy window before it is taken.
    std::thread::sleep(Duration::from_millis(2100));
    let t = Instant::now();
    let cache = StatCache::build(&full)?;
    eprintln!(
        "stat cache of {} files taken in {:.1?} (once per session, before the worker starts)",
        cache.len(),
        t.elapsed()
    );
    make_changes(&full, files, changes)?;
    {
        let _mount = mount_overlay(
            &lower,
            &upper,
            &tmp.path().join("work"),
            &tmp.path().join("merged"),
        )?;
        make_changes(&tmp.path().join("merged"), files, changes)?;
    }
    let store = ArtifactStore::open(&tmp.path().join("store"))?;
    let scope = scope()?;
    let base = BaseRef {
        repo: &repo,
        commit: &commit,
    };
    let counter = Cell::new(0u64);
    let next = || {
        counter.set(counter.get() + 1);
        format!("attempt-{}", counter.get())
    };
    let accepted = Cell::new(0usize);

    let git_run = || -> anyhow::Result<Duration> {
        stats::timed(|| {
            git(&full, &["status", "--porcelain", "-uall"])?;
            git(&full, &["diff"])?;
            Ok(())
        })
    };
    let layer_run = || -> anyhow::Result<Duration> {
        stats::timed(|| {
            let c = capture(
                CaptureInput::ChangeLayer { upper: &upper },
                base,
                &scope,
                DEFAULT_BOUNDS,
                &store,
                &meta(next()),
            )?;
            accepted.set(c.manifest.accepted.len());
            Ok(())
        })
    };
    let full_cache_run = || -> anyhow::Result<Duration> {
        stats::timed(|| {
            let c = capture(
                CaptureInput::FullTree {
                    dir: &full,
                    stat_cache: Some(&cache),
                },
                base,
                &scope,
                DEFAULT_BOUNDS,
                &store,
                &meta(next()),
            )?;
            if c.manifest.accepted.len() != accepted.get() && accepted.get() != 0 {
                bail!(
                    "full tree accepted {} changes, change layer {}",
                    c.manifest.accepted.len(),
                    accepted.get()
                );
            }
            Ok(())
        })
    };
    let full_run = || -> anyhow::Result<Duration> {
        stats::timed(|| {
            capture(
                CaptureInput::FullTree {
                    dir: &full,
                    stat_cache: None,
                },
                base,
                &scope,
                DEFAULT_BOUNDS,
                &store,
                &meta(next()),
            )?;
            Ok(())
        })
    };
    let cpu = [
        Cell::new(0.0),
        Cell::new(0.0),
        Cell::new(0.0),
        Cell::new(0.0),
    ];
    let (c0, c1, c2, c3) = (
        with_cpu(&cpu[0], &git_run),
        with_cpu(&cpu[1], &layer_run),
        with_cpu(&cpu[2], &full_cache_run),
        with_cpu(&cpu[3], &full_run),
    );
    let samples = stats::alternate(
        &[
            ("git status+diff", &c0),
            ("capture layer", &c1),
            ("capture full+cache", &c2),
            ("capture full", &c3),
        ],
        1,
        rounds,
    )?;
    println!(
        "capture: {files} files, {changes} changes ({} accepted), {rounds} rounds",
        accepted.get()
    );
    print!("{}", stats::report(&samples, "git status+diff"));
    // CPU includes the warmup round; wall time on a loaded machine is mostly waiting for a core.
    let per_round = |c: &Cell<f64>| c.get() / (rounds + 1) as f64;
    let git_cpu = per_round(&cpu[0]).max(1e-9);
    println!("cpu (user+sys, mean per round incl. children):");
    for (i, name) in [
        "git status+diff",
        "capture layer",
        "capture full+cache",
        "capture full",
    ]
    .iter()
    .enumerate()
    {
        let c = per_round(&cpu[i]);
        println!("  {name:<20} {:>8.1} ms   {:.2}x", c * 1000.0, c / git_cpu);
    }
    let med = |n: &str| {
        samples
            .iter()
            .find(|s| s.name == n)
            .map(stats::Samples::median)
    };
    if let (Some(g), Some(l), Some(fc)) = (
        med("git status+diff"),
        med("capture layer"),
        med("capture full+cache"),
    ) {
        let rl = l.as_secs_f64() / g.as_secs_f64();
        let rf = fc.as_secs_f64() / g.as_secs_f64();
        println!(
            "goal change layer <= 0.20x git: {rl:.2}x {}",
            if rl <= 0.2 { "MET" } else { "NOT MET" }
        );
        println!(
            "goal full tree <= 1.00x git: {rf:.2}x (with stat cache) {}",
            if rf <= 1.0 { "MET" } else { "NOT MET" }
        );
    }

    if stats::which("time").is_some() || Path::new("/usr/bin/time").exists() {
        let exe = std::env::current_exe()?;
        let store_dir = tmp.path().join("store");
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let (u, f, r, sd) = (s(&upper), s(&full), s(&repo), s(&store_dir));
        let mut rows = Vec::new();
        let (a_kib, _) = child_usage(
            Path::new("git"),
            &["-C", &f, "status", "--porcelain", "-uall"],
        )?;
        let (b_kib, _) = child_usage(Path::new("git"), &["-C", &f, "diff"])?;
        rows.push(("git status+diff", a_kib.max(b_kib)));
        for (name, mode, input) in [
            ("capture layer", "layer", &u),
            ("capture full+cache", "full-cache", &f),
            ("capture full", "full", &f),
        ] {
            let (kib, _) = child_usage(
                &exe,
                &["bench", "capture", "--child", mode, input, &r, &commit, &sd],
            )?;
            rows.push((name, kib));
        }
        println!("peak memory (maxrss of one child run, incl. the xtask binary's own baseline):");
        for (name, kib) in rows {
            println!("  {name:<20} {:>8.1} MiB", kib as f64 / 1024.0);
        }
    } else {
        println!("peak memory: SKIPPED (/usr/bin/time missing: apt-get install time)");
    }
    Ok(())
}
