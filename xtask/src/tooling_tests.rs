//! Tests that the other enforcement layers (cargo-deny bans, clippy.toml bans) fire on planted
//! violations, using the workspace's real `deny.toml` and `clippy.toml`.
//!
//! Both run real tools on tiny fixture crates (a few seconds each); they need `cargo-deny` and
//! `cargo clippy` installed. A missing tool is a loud skip, and a failure under `CI=true`.

use std::process::Command;

use crate::ci::in_ci;
use crate::lint::tests::Fixture;
use crate::metadata::cargo;

/// Whether `cargo <sub> --version` works; if not, skip loudly (or fail under CI=true).
fn have(sub: &str) -> bool {
    let ok = Command::new(cargo())
        .args([sub, "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            !in_ci(),
            "`cargo {sub}` is not installed and CI=true: .ci/run must install it"
        );
        eprintln!(
            "SKIPPED: `cargo {sub}` is not installed; this enforcement layer is NOT tested here"
        );
    }
    ok
}

fn deny_bans(f: &Fixture) -> (bool, String) {
    std::fs::copy(
        crate::workspace_root().join("deny.toml"),
        f.path().join("deny.toml"),
    )
    .unwrap();
    let out = Command::new(cargo())
        .args(["deny", "--offline", "check", "bans"])
        .current_dir(f.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    (out.status.success(), text)
}

#[test]
fn deny_bans_caps_outside_the_backend() {
    if !have("deny") {
        return;
    }
    let f = Fixture::new();
    // The backend may wrap `caps`: passes.
    f.krate(
        "stockade-sandbox-linux",
        "caps = \"0.5\"\n",
        "//! The backend.\n#![deny(unsafe_code)]\n",
    );
    let (ok, text) = deny_bans(&f);
    assert!(ok, "caps under the backend must pass:\n{text}");
    // A sibling reaching for it directly: banned.
    f.krate(
        "stockade-gateway",
        "caps = \"0.5\"\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let (ok, text) = deny_bans(&f);
    assert!(!ok, "cargo deny must reject caps in the gateway:\n{text}");
    assert!(text.contains("caps"), "{text}");
    assert!(text.contains("banned"), "{text}");
}

#[test]
fn deny_bans_tokio_process_feature() {
    if !have("deny") {
        return;
    }
    let f = Fixture::new();
    f.krate(
        "stockade-gateway",
        "tokio = { version = \"1\", default-features = false, features = [\"rt\"] }\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let (ok, text) = deny_bans(&f);
    assert!(ok, "tokio without `process` must pass:\n{text}");
    f.krate(
        "stockade-gateway",
        "tokio = { version = \"1\", default-features = false, features = [\"rt\", \"process\"] }\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let (ok, text) = deny_bans(&f);
    assert!(
        !ok,
        "cargo deny must reject tokio's `process` feature:\n{text}"
    );
    assert!(text.contains("process"), "{text}");
}

#[test]
fn clippy_bans_process_command() {
    if !have("clippy") {
        return;
    }
    let f = Fixture::new();
    std::fs::copy(
        crate::workspace_root().join("clippy.toml"),
        f.path().join("clippy.toml"),
    )
    .unwrap();
    let lints = "\n[lints.clippy]\ndisallowed_methods = \"deny\"\ndisallowed_types = \"deny\"\n";
    let clippy = |f: &Fixture| {
        let out = Command::new(cargo())
            .args(["clippy", "--quiet", "-p", "stockade-gateway"])
            .env("CARGO_TARGET_DIR", f.path().join("target"))
            .current_dir(f.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!("{text}");
        (out.status.success(), text)
    };
    f.krate(
        "stockade-gateway",
        lints,
        "//! Layer 2.\n#![forbid(unsafe_code)]\n/// Exits.\npub fn run() {\n    std::process::exit(0);\n}\n",
    );
    let (ok, text) = clippy(&f);
    assert!(ok, "the clean fixture must pass clippy:\n{text}");
    f.krate(
        "stockade-gateway",
        lints,
        "//! Layer 2.\n#![forbid(unsafe_code)]\n/// Spawns.\npub fn run() {\n    let _ = std::process::Command::new(\"sh\").status();\n}\n",
    );
    let (ok, text) = clippy(&f);
    assert!(
        !ok,
        "clippy must reject std::process::Command::new:\n{text}"
    );
    assert!(
        text.contains("clippy::disallowed_methods") || text.contains("disallowed_methods"),
        "{text}"
    );
    assert!(text.contains("std::process::Command::new"), "{text}");
}
