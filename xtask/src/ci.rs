//! `cargo xtask ci`: the one test command (the README's and `.ci/run`'s).
//!
//! Steps, in order; every step runs even when an earlier one failed, so one run shows every
//! failure and every step's time, and the command fails at the end if any step failed:
//! 1. `cargo fmt --all -- --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`
//! 3. `cargo xtask lint` (in process)
//! 4. `cargo deny check bans licenses sources` (advisories need a network this machine lacks)
//! 5. `cargo test --workspace --no-fail-fast`
//!
//! The environment passes through unchanged, so `CI=true` keeps turning skipped kernel checks into
//! failures. Each step prints its wall time; `--skip <step>` exists for local iteration only and
//! is refused under `CI=true`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::metadata::cargo;

/// Step names, in order.
const STEPS: &[&str] = &["fmt", "clippy", "lint", "deny", "test"];

pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut skip: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--skip" => {
                let s = it.next().context("--skip needs a step name")?;
                let Some(step) = STEPS.iter().find(|x| **x == s.as_str()) else {
                    bail!("unknown step `{s}`; steps: {}", STEPS.join(", "));
                };
                skip.push(step);
            }
            other => bail!("unknown argument `{other}`; usage: cargo xtask ci [--skip <step>]..."),
        }
    }
    if in_ci() && !skip.is_empty() {
        bail!("--skip is refused under CI=true: CI runs every step");
    }
    let mut results: Vec<(&str, Duration, Result<(), String>)> = Vec::new();
    for step in STEPS {
        if skip.contains(step) {
            println!("==> ci: SKIPPED {step} (asked with --skip; this run is not a full CI run)");
            continue;
        }
        println!("==> ci: {step}");
        let start = Instant::now();
        let outcome = run_step(root, step).map_err(|e| format!("{e:#}"));
        let took = start.elapsed();
        match &outcome {
            Ok(()) => println!("==> ci: {step} passed in {:.1}s", took.as_secs_f64()),
            Err(e) => println!("==> ci: {step} FAILED in {:.1}s: {e}", took.as_secs_f64()),
        }
        results.push((step, took, outcome));
    }
    println!("==> ci: summary");
    for (step, t, outcome) in &results {
        let verdict = if outcome.is_ok() { "ok" } else { "FAILED" };
        println!("    {step:<7} {verdict:<6} {:>8.1}s", t.as_secs_f64());
    }
    let total: Duration = results.iter().map(|(_, t, _)| *t).sum();
    println!("    total          {:>8.1}s", total.as_secs_f64());
    if !skip.is_empty() {
        println!("==> ci: NOT a full run: skipped {}", skip.join(", "));
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, _, o)| o.is_err())
        .map(|(s, _, _)| *s)
        .collect();
    if !failed.is_empty() {
        bail!("ci failed: {}", failed.join(", "));
    }
    Ok(())
}

fn run_step(root: &Path, step: &str) -> anyhow::Result<()> {
    match step {
        "fmt" => cargo_step(root, &["fmt", "--all", "--", "--check"]),
        "clippy" => cargo_step(
            root,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        "lint" => {
            let report = crate::lint::run(root)?;
            print!("{report}");
            if !report.diagnostics.is_empty() {
                bail!("{}", report.summary());
            }
            Ok(())
        }
        "deny" => cargo_step(root, &["deny", "check", "bans", "licenses", "sources"]),
        // --no-fail-fast: one run reports every failing test binary, not the first.
        "test" => cargo_step(root, &["test", "--workspace", "--no-fail-fast"]),
        _ => bail!("unknown step {step}"),
    }
}

/// Whether this is a CI run (`CI=true` or `CI=1`): skips become failures.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn cargo_step(root: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(cargo())
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("ci step `cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}
