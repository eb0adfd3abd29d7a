//! Repository automation for Stockade: `cargo xtask <lint|ci|codegen|bench>`.
//!
//! Tooling, outside the layering: it may run programs (cargo, peers in benchmarks), so it opts out
//! of the workspace's process bans here, and only here.
#![forbid(unsafe_code)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod bench;
mod ci;
mod codegen;
mod layers;
mod lint;
mod metadata;
#[cfg(test)]
mod tooling_tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  lint              layering and source rules L001-L006 (rustc-like output)
  codegen           regenerate docs/protections-status.md and the ARCHITECTURE.md edge table
  ci                the whole test suite: fmt, clippy, lint, cargo-deny, tests
  bench <area> ...  side-by-side benchmarks; areas: exec, capture, gateway";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("lint") => {
            let report = lint::run(&root)?;
            print!("{report}");
            Ok(if report.diagnostics.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some("codegen") => {
            let changed = codegen::write(&root)?;
            if changed.is_empty() {
                println!("codegen: everything is current");
            }
            for c in changed {
                println!("codegen: wrote {c}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("ci") => ci::run(&root, &args[1..]).map(|()| ExitCode::SUCCESS),
        Some("bench") => bench::run(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            eprintln!("{USAGE}");
            Ok(ExitCode::from(2))
        }
    }
}

/// The workspace root: the parent of this crate's folder.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
