//! `cargo xtask bench <area>`: side-by-side benchmarks against named peers.
//!
//! Each area lives in its own file exposing `pub fn run(args: &[String]) -> anyhow::Result<()>`;
//! [`stats`] holds the shared measuring and reporting helpers. Benchmarks alternate the
//! contenders in one run and report medians, p99 and ratios; they are never timed tests.

mod capture;
mod exec;
mod gateway;
mod session;
pub mod stats;
mod workspace;

use anyhow::bail;

/// The benchmark areas.
const AREAS: &[&str] = &["exec", "capture", "gateway", "workspace", "session"];

/// Dispatches `cargo xtask bench <area> [args...]`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let Some(area) = args.first() else {
        bail!(
            "usage: cargo xtask bench <area> [args...]; areas: {}",
            AREAS.join(", ")
        );
    };
    let rest = &args[1..];
    match area.as_str() {
        "exec" => exec::run(rest),
        "capture" => capture::run(rest),
        "gateway" => gateway::run(rest),
        "workspace" => workspace::run(rest),
        "session" => session::run(rest),
        other => bail!("unknown bench area `{other}`; areas: {}", AREAS.join(", ")),
    }
}
