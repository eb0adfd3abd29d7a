//! `cargo xtask bench capture`: not written yet.

/// Runs the `capture` benchmark. Not written yet: fails rather than pretend.
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("bench capture: not written yet")
}
