//! Helpers shared by the test modules.

/// Whether this test process runs as root (uid 0), read from `/proc/self/status`.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// True when running as root. Otherwise a test that needs root says SKIPPED loudly and returns
/// false; under `CI=true` it fails instead. `what` names the tests and why they need root.
pub fn require_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: {what} need root"
    );
    eprintln!("SKIPPED (loudly): {what} need root");
    false
}
