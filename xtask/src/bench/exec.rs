//! `cargo xtask bench exec`: not written yet.

/// Runs the `exec` benchmark. Not written yet: fails rather than pretend.
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("bench exec: not written yet")
}
