//! `cargo xtask bench workspace [--files N] [--rounds R] [--warmup W]`: prewarming an exact-SHA
//! template (`stockade_workspace::Template::prewarm`) against `git worktree add --detach` of the
//! same commit, alternating in one run, medians, p99 and ratio.
//!
//! The fixture (default 100k files, a few executables and symlinks, 100 files per directory) is
//! generated once with `git fast-import` and cached under
//! `target/bench-fixtures/workspace-<files>-v1`. Each round writes to a fresh destination and
//! is followed by a `sync` outside the measurement, so no round pays for another's write-back.
//! Outputs are removed only after the last round: on a filesystem mounted with `discard`,
//! unlinking 100k files issues discards for minutes and would slow whichever contender runs
//! next (it needs about 1 GB of free space per round at 100k files). Prewarm's measurement includes everything it does to publish a template: the
//! files, the workspace's pack and index, and the `syncfs` before the atomic rename (git does
//! not fsync checked-out files, so the comparison is conservative for prewarm).
//!
//! Prewarm hashes and deflates; unoptimized that is 10-30x slower, so a debug build of xtask
//! re-runs itself with `--release` first.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};

use super::stats;

const FIXTURE_VERSION: u32 = 1;

struct Args {
    files: usize,
    rounds: usize,
    warmup: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let mut out = Args {
        files: 100_000,
        rounds: 5,
        warmup: 1,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = |it: &mut std::slice::Iter<'_, String>| -> anyhow::Result<usize> {
            it.next()
                .with_context(|| format!("{flag} needs a value"))?
                .parse()
                .with_context(|| format!("{flag} needs a number"))
        };
        match flag.as_str() {
            "--files" => out.files = value(&mut it)?,
            "--rounds" => out.rounds = value(&mut it)?,
            "--warmup" => out.warmup = value(&mut it)?,
            other => bail!(
                "unknown argument {other}; usage: bench workspace [--files N] [--rounds R] [--warmup W]"
            ),
        }
    }
    ensure!(
        out.files > 0 && out.rounds > 0,
        "--files and --rounds must be positive"
    );
    Ok(out)
}

pub(super) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

pub(super) fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .stdin(Stdio::null());
    cmd
}

pub(super) fn run_ok(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    ensure!(
        out.status.success(),
        "{:?} {:?} failed: {}",
        cmd.get_program(),
        cmd.get_args().collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Deterministic file content of roughly 200..2200 bytes.
fn content(i: usize) -> Vec<u8> {
    let len = 200 + (i.wrapping_mul(2_654_435_761) % 2000);
    let mut out = Vec::with_capacity(len + 64);
    let mut line = 0usize;
    while out.len() < len {
        let _ = writeln!(
            out,
            "// file {i} line {line}: the quick brown fox {}",
            i ^ line
        );
        line += 1;
    }
    out
}

/// Build (or reuse) the fixture repository; returns its path and the commit.
pub(super) fn fixture(files: usize) -> anyhow::Result<(PathBuf, String)> {
    let dir = workspace_root()
        .join("target/bench-fixtures")
        .join(format!("workspace-{files}-v{FIXTURE_VERSION}"));
    let repo = dir.join("repo");
    let done = dir.join("commit");
    if let Ok(commit) = std::fs::read_to_string(&done) {
        return Ok((repo, commit.trim().to_owned()));
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&repo)?;
    eprintln!("bench workspace: generating a {files}-file fixture with git fast-import (cached)");
    run_ok(git(&repo).args(["init", "-q", "-b", "main"]))?;
    let mut child = git(&repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .context("starting git fast-import")?;
    {
        let stdin = child.stdin.as_mut().context("fast-import stdin")?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdin);
        for i in 0..files {
            let data = content(i);
            write!(out, "blob\nmark :{}\ndata {}\n", i + 1, data.len())?;
            out.write_all(&data)?;
            out.write_all(b"\n")?;
        }
        write!(
            out,
            "commit refs/heads/main\nmark :{}\ncommitter bench <bench@example.invalid> 1767225600 +0000\ndata 7\nfixture\n",
            files + 1
        )?;
        for i in 0..files {
            let mode = if i % 97 == 0 { "100755" } else { "100644" };
            writeln!(
                out,
                "M {mode} :{} d{:03}/d{:03}/f{i}.txt",
                i + 1,
                i / 10_000,
                (i / 100) % 100
            )?;
        }
        for s in 0..(files / 1000).max(1) {
            let target = format!("../d000/d000/f{}.txt", s % 100);
            writeln!(
                out,
                "M 120000 inline links/l{s}\ndata {}\n{target}",
                target.len()
            )?;
        }
        out.flush()?;
    }
    let status = child.wait()?;
    ensure!(status.success(), "git fast-import failed");
    let commit = run_ok(git(&repo).args(["rev-parse", "refs/heads/main"]))?;
    std::fs::write(&done, &commit)?;
    Ok((repo, commit))
}

fn sync_all() -> anyhow::Result<()> {
    run_ok(&mut Command::new("sync")).map(|_| ())
}

/// Runs the `workspace` benchmark.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    if cfg!(debug_assertions) && std::env::var_os("STOCKADE_BENCH_NO_RELEASE").is_none() {
        eprintln!(
            "bench workspace: re-running with --release (prewarm is 10-30x slower unoptimized)"
        );
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .current_dir(workspace_root())
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                "xtask",
                "--",
                "bench",
                "workspace",
            ])
            .args(args)
            .env("STOCKADE_BENCH_NO_RELEASE", "1")
            .status()
            .context("starting cargo run --release")?;
        ensure!(status.success(), "release run failed");
        return Ok(());
    }
    let args = parse(args)?;
    stats::require("git", "apt-get install git")?;
    let (repo, commit) = fixture(args.files)?;
    let scratch = workspace_root().join("target/bench-fixtures/workspace-scratch");
    if scratch.exists() {
        // Worktrees of an interrupted run: forget them, then remove the files.
        let _ = run_ok(git(&repo).args(["worktree", "prune"]));
        std::fs::remove_dir_all(&scratch)?;
    }
    std::fs::create_dir_all(&scratch)?;
    let counter = std::cell::Cell::new(0usize);
    let next = |prefix: &str| {
        counter.set(counter.get() + 1);
        scratch.join(format!("{prefix}-{}", counter.get()))
    };

    let worktree = || -> anyhow::Result<Duration> {
        let dest = next("wt");
        let dest_s = dest.to_str().context("utf-8 scratch path")?;
        let start = Instant::now();
        run_ok(git(&repo).args(["worktree", "add", "-q", "--detach", dest_s, &commit]))?;
        let took = start.elapsed();
        sync_all()?;
        Ok(took)
    };
    let prewarm = || -> anyhow::Result<Duration> {
        let dest = next("tpl");
        let start = Instant::now();
        let template = stockade_workspace::Template::prewarm(&repo, &commit, &dest)?;
        let took = start.elapsed();
        ensure!(
            !template.was_reused(),
            "prewarm reused a template in a fresh destination"
        );
        ensure!(
            template.counts().files as usize == args.files,
            "prewarm wrote {} files, expected {}",
            template.counts().files,
            args.files
        );
        sync_all()?;
        Ok(took)
    };

    println!(
        "bench workspace: {} files + {} symlinks at {commit}, {} rounds after {} warm-up, alternating",
        args.files,
        (args.files / 1000).max(1),
        args.rounds,
        args.warmup
    );
    let samples = stats::alternate(
        &[
            ("git worktree add --detach", &worktree),
            ("stockade prewarm", &prewarm),
        ],
        args.warmup,
        args.rounds,
    )?;
    print!("{}", stats::report(&samples, "git worktree add --detach"));

    // Reuse and the copy fallback, for information.
    let dest = next("tpl");
    let template = stockade_workspace::Template::prewarm(&repo, &commit, &dest)?;
    let start = Instant::now();
    let again = stockade_workspace::Template::prewarm(&repo, &commit, &dest)?;
    let reuse = start.elapsed();
    ensure!(again.was_reused(), "second prewarm did not reuse");
    let copy_dest = next("copy");
    let start = Instant::now();
    template.materialize_copy(&copy_dest)?;
    let copy = start.elapsed();
    println!(
        "prewarm of an existing template (reuse): {}; materialize_copy fallback: {}",
        stats::fmt_duration(reuse),
        stats::fmt_duration(copy)
    );
    eprintln!("bench workspace: removing the scratch directory");
    std::fs::remove_dir_all(&scratch)?;
    run_ok(git(&repo).args(["worktree", "prune"]))?;
    Ok(())
}
