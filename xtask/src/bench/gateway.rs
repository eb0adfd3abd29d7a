//! `cargo xtask bench gateway`: not written yet.

/// Runs the `gateway` benchmark. Not written yet: fails rather than pretend.
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("bench gateway: not written yet")
}
