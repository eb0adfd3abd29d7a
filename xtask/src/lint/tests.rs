//! The lint on the real tree, and one planted violation per rule in a fixture workspace.

use std::path::{Path, PathBuf};

use super::{Report, Rule, run};

/// A throwaway workspace shaped like ours: a few crates with the real names, fresh generated docs.
pub(crate) struct Fixture {
    dir: tempfile::TempDir,
}

const ARCH: &str = "# Architecture\n\n<!-- BEGIN GENERATED: layering (cargo xtask codegen; edit xtask/src/layers.rs) -->\n<!-- END GENERATED: layering -->\n";

impl Fixture {
    /// policy (layer 0), gateway (layer 2) and the backend, all clean.
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir };
        f.write(
            "Cargo.toml",
            "[workspace]\nresolver = \"3\"\nmembers = [\"crates/*\"]\nexclude = [\"vendor\"]\n\n[workspace.package]\nversion = \"0.1.0\"\nedition = \"2024\"\nlicense = \"Apache-2.0 OR MIT\"\npublish = false\n",
        );
        // Pin external crates to the versions the real workspace already resolved.
        std::fs::copy(
            crate::workspace_root().join("Cargo.lock"),
            f.path().join("Cargo.lock"),
        )
        .unwrap();
        f.krate(
            "stockade-policy",
            "",
            "//! Layer 0.\n#![forbid(unsafe_code)]\n",
        );
        f.krate(
            "stockade-gateway",
            "stockade-policy = { path = \"../stockade-policy\" }\n",
            "//! Layer 2.\n#![forbid(unsafe_code)]\n",
        );
        f.krate(
            "stockade-sandbox-linux",
            "stockade-policy = { path = \"../stockade-policy\" }\n",
            "//! The backend.\n#![deny(unsafe_code)]\n#[allow(unsafe_code)]\nmod sys;\n",
        );
        f.write(
            "crates/stockade-sandbox-linux/src/sys.rs",
            "//! Raw calls.\npub fn pid() -> i32 {\n    // SAFETY: getpid has no preconditions.\n    unsafe { getpid() }\n}\n// SAFETY: declared with the libc signature.\nunsafe extern \"C\" {\n    fn getpid() -> i32;\n}\n",
        );
        f.write("docs/ARCHITECTURE.md", ARCH);
        crate::codegen::write(f.path()).unwrap();
        f
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, rel: &str, text: &str) {
        let p: PathBuf = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A library crate `name` with extra `[dependencies]` lines and a `src/lib.rs`.
    pub(crate) fn krate(&self, name: &str, deps: &str, lib: &str) {
        self.write(
            &format!("crates/{name}/Cargo.toml"),
            &format!(
                "[package]\nname = \"{name}\"\nversion.workspace = true\nedition.workspace = true\nlicense.workspace = true\npublish.workspace = true\n\n[dependencies]\n{deps}"
            ),
        );
        self.write(&format!("crates/{name}/src/lib.rs"), lib);
    }

    fn lint(&self) -> Report {
        let r = run(self.path()).unwrap();
        eprintln!("{r}");
        r
    }
}

fn assert_only(r: &Report, rule: Rule, count: usize) {
    assert_eq!(r.rules(), vec![rule], "{r}");
    assert_eq!(r.diagnostics.len(), count, "{r}");
    let text = r.to_string();
    assert!(text.contains(&format!("error[{rule}]: ")), "{text}");
    assert!(text.contains("  --> "), "{text}");
    assert!(text.contains("  = fix: "), "{text}");
    assert!(
        text.contains(&format!("{rule}: {count}")),
        "summary: {text}"
    );
}

#[test]
fn real_tree_passes() {
    let r = run(&crate::workspace_root()).unwrap();
    assert!(
        r.diagnostics.is_empty(),
        "cargo xtask lint fails on the real tree:\n{r}"
    );
    assert!(r.files > 10, "{r}");
}

#[test]
fn clean_fixture_passes() {
    let r = Fixture::new().lint();
    assert!(r.diagnostics.is_empty(), "{r}");
    assert!(r.summary().starts_with("lint: ok"), "{}", r.summary());
}

#[test]
fn l001_forbidden_edge() {
    let f = Fixture::new();
    // Layer 0 reaching up to layer 2.
    f.krate(
        "stockade-policy",
        "stockade-gateway = { path = \"../stockade-gateway\" }\n",
        "//! Layer 0.\n#![forbid(unsafe_code)]\n",
    );
    f.krate(
        "stockade-gateway",
        "",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L001, 1);
    let d = &r.diagnostics[0];
    assert!(
        d.message
            .contains("`stockade-policy` (layer 0) -> `stockade-gateway` (layer 2)"),
        "{d}"
    );
    assert_eq!(d.file, Path::new("crates/stockade-policy/Cargo.toml"));
    assert_eq!(d.line, Some(9));
}

#[test]
fn l001_unknown_crate() {
    let f = Fixture::new();
    f.krate("stockade-extra", "", "//! Who?\n#![forbid(unsafe_code)]\n");
    let r = f.lint();
    assert_only(&r, Rule::L001, 1);
    assert!(
        r.diagnostics[0]
            .message
            .contains("not in the layering table")
    );
}

#[test]
fn l002_spawn_capable_feature_with_path() {
    let f = Fixture::new();
    f.krate(
        "stockade-gateway",
        "stockade-policy = { path = \"../stockade-policy\" }\ntokio = { version = \"1\", default-features = false, features = [\"rt\", \"process\"] }\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L002, 1);
    let text = r.to_string();
    assert!(text.contains("spawn-capable crate `tokio` with feature `process` is reachable from non-backend crate `stockade-gateway`"), "{text}");
    assert!(
        text.contains("= note: path: stockade-gateway -> tokio"),
        "{text}"
    );
    assert!(
        text.contains("hop: stockade-gateway -> tokio: normal dependency, features [rt, process]"),
        "{text}"
    );
    assert!(
        text.contains(
            "enabled by `stockade-gateway` (features on its dependency declaration: `process`)"
        ),
        "{text}"
    );
    assert_eq!(r.diagnostics[0].line, Some(10));
}

#[test]
fn l002_backend_may_wrap_and_unification_does_not_blame_others() {
    let f = Fixture::new();
    // The backend asks for tokio's `process`; the gateway uses tokio without it. Cargo unifies the
    // features, but a build of the gateway alone has no `process`: only the backend is allowed.
    f.krate(
        "stockade-sandbox-linux",
        "tokio = { version = \"1\", default-features = false, features = [\"process\"] }\n",
        "//! The backend.\n#![deny(unsafe_code)]\n",
    );
    f.krate(
        "stockade-gateway",
        "tokio = { version = \"1\", default-features = false, features = [\"rt\"] }\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let r = f.lint();
    assert!(r.diagnostics.is_empty(), "{r}");
}

#[test]
fn l002_transitive_hop_names_the_enabling_feature() {
    let f = Fixture::new();
    // gateway -> (its own feature `spawn`) -> helper crate outside the layering? Use a vendored
    // path crate named like a spawn-capable one, reached through an optional dependency.
    f.write(
        "vendor/duct/Cargo.toml",
        "[package]\nname = \"duct\"\nversion = \"0.13.99\"\nedition = \"2021\"\nlicense = \"MIT\"\n",
    );
    f.write("vendor/duct/src/lib.rs", "");
    f.krate(
        "stockade-gateway",
        "duct = { path = \"../../vendor/duct\", optional = true }\n\n[features]\ndefault = [\"spawn\"]\nspawn = [\"dep:duct\"]\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L002, 1);
    let text = r.to_string();
    assert!(text.contains("spawn-capable crate `duct`"), "{text}");
    assert!(
        text.contains("optional, turned on by `stockade-gateway` feature `spawn`"),
        "{text}"
    );
}

#[test]
fn l002_backend_reachable_from_a_sibling() {
    let f = Fixture::new();
    f.krate(
        "stockade-gateway",
        "stockade-sandbox-linux = { path = \"../stockade-sandbox-linux\" }\n",
        "//! Layer 2.\n#![forbid(unsafe_code)]\n",
    );
    let r = f.lint();
    // The edge itself is forbidden (L001) and reaches the only spawner (L002).
    assert_eq!(r.rules(), vec![Rule::L001, Rule::L002], "{r}");
    assert!(
        r.to_string()
            .contains("the backend `stockade-sandbox-linux` (the only spawner) is reachable")
    );
}

#[test]
fn l003_raw_process_api() {
    let f = Fixture::new();
    f.krate(
        "stockade-gateway",
        "stockade-policy = { path = \"../stockade-policy\" }\n",
        r##"//! Layer 2. Never call std::process::Command or libc::fork here.
#![forbid(unsafe_code)]
/// Says "std::process::Command::new" in a doc and a string: neither is code.
pub fn doc() -> &'static str {
    /* libc::execve(...) in a comment */
    r#"tokio::process::Command pre_exec"#
}
pub fn exit_is_fine() -> ! {
    std::process::exit(0)
}
pub fn run() {
    let _ = std::process::Command::new("sh");
}
"##,
    );
    f.write(
        "crates/stockade-gateway/src/more.rs",
        "use std::os::unix::process::CommandExt;\nuse libc::{c_int, fork};\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L003, 3);
    let lines: Vec<_> = r
        .diagnostics
        .iter()
        .map(|d| (d.file.display().to_string(), d.line))
        .collect();
    assert_eq!(
        lines,
        vec![
            ("crates/stockade-gateway/src/lib.rs".to_owned(), Some(12)),
            ("crates/stockade-gateway/src/more.rs".to_owned(), Some(1)),
            ("crates/stockade-gateway/src/more.rs".to_owned(), Some(2)),
        ]
    );
}

#[test]
fn l003_allows_the_backend_sys_module_only() {
    let f = Fixture::new();
    f.write(
        "crates/stockade-sandbox-linux/src/sys/spawn.rs",
        "pub fn run() { let _ = std::process::Command::new(\"sh\"); }\n",
    );
    assert!(f.lint().diagnostics.is_empty());
    f.write(
        "crates/stockade-sandbox-linux/src/session.rs",
        "pub fn run() { let _ = std::process::Command::new(\"sh\"); }\n",
    );
    assert_only(&f.lint(), Rule::L003, 1);
}

#[test]
fn l004_missing_forbid() {
    let f = Fixture::new();
    f.krate(
        "stockade-policy",
        "",
        "//! Layer 0. Mentions #![forbid(unsafe_code)] only in a doc.\n#![deny(missing_docs)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L004, 1);
    assert!(
        r.diagnostics[0]
            .message
            .contains("lacks `#![forbid(unsafe_code)]`")
    );
}

#[test]
fn l004_backend_needs_deny() {
    let f = Fixture::new();
    f.krate(
        "stockade-sandbox-linux",
        "",
        "//! The backend.\n#![warn(unsafe_code)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L004, 1);
    assert!(
        r.diagnostics[0]
            .message
            .contains("lacks `#![deny(unsafe_code)]`")
    );
}

#[test]
fn l005_unsafe_outside_sys() {
    let f = Fixture::new();
    f.krate(
        "stockade-gateway",
        "",
        "//! Layer 2: no unsafe here (this doc says unsafe).\n#![forbid(unsafe_code)]\npub fn f() -> u8 {\n    // SAFETY: a comment does not make it allowed here.\n    unsafe { *(&1u8 as *const u8) }\n}\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L005, 1);
    assert_eq!(r.diagnostics[0].line, Some(5));
}

#[test]
fn l005_unsafe_block_without_safety_comment() {
    let f = Fixture::new();
    f.write(
        "crates/stockade-sandbox-linux/src/sys.rs",
        "//! Raw calls.\npub fn pid() -> i32 {\n    // the pid\n    unsafe { getpid() }\n}\npub fn pid2() -> i32 {\n    unsafe {\n        // SAFETY: getpid has no preconditions.\n        getpid()\n    }\n}\nunsafe extern \"C\" {\n    // SAFETY: declared with the libc signature.\n    fn getpid() -> i32;\n}\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L005, 2);
    assert_eq!(r.diagnostics[0].line, Some(4));
    // `unsafe extern` at line 12 lacks it too (the SAFETY comment is inside, not above it).
    assert_eq!(r.diagnostics[1].line, Some(12));
}

#[test]
fn l006_stale_generated_docs() {
    let f = Fixture::new();
    let arch = std::fs::read_to_string(f.path().join("docs/ARCHITECTURE.md")).unwrap();
    f.write(
        "docs/ARCHITECTURE.md",
        &arch.replace("| 0 | `stockade-policy`", "| 9 | `stockade-policy`"),
    );
    f.write("docs/protections-status.md", "hand edited\n");
    let r = f.lint();
    assert_only(&r, Rule::L006, 2);
    crate::codegen::write(f.path()).unwrap();
    assert!(f.lint().diagnostics.is_empty());
}

#[test]
fn l004_integration_test_roots_count() {
    let f = Fixture::new();
    f.write(
        "crates/stockade-policy/tests/it.rs",
        "//! Integration tests.\n#![allow(missing_docs)]\n",
    );
    let r = f.lint();
    assert_only(&r, Rule::L004, 1);
    assert_eq!(
        r.diagnostics[0].file,
        Path::new("crates/stockade-policy/tests/it.rs")
    );
    assert!(r.to_string().contains("are crate roots too"), "{r}");
}
