//! `stockade run` through the real Linux backend, judged from the host: a scripted shell agent
//! with no network edits the demo repository; the candidate is captured from outside, rejected
//! paths carry reasons, the patch applies to a fresh clone and passes the test; refusals exit 10
//! before any worker starts; the wall-time budget kills the tree (exit 11); SIGTERM cancels, kills
//! the tree and leaves an incomplete record (exit 12).
//!
//! Sessions mount overlays on the host, which needs root here: without root the tests say
//! SKIPPED loudly; under `CI=true` they fail instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use stockade_orchestrator::demo::{DemoRepo, build_demo_repo};

use crate::support::{git, require_root};

struct Env {
    dir: tempfile::TempDir,
    repo: DemoRepo,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let repo = build_demo_repo(&dir.path().join("canonical.git")).unwrap();
        std::fs::write(dir.path().join("trusted.toml"), "").unwrap();
        Env { dir, repo }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn preset(&self, name: &str, transport: &str, command: &str) -> PathBuf {
        let p = self.path(&format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                r#"id = "{name}"
kind = "model-only"
prompt_transport = "{transport}"
command = {command}
sandbox_required = true
[default_limits]
cpu_millis = 1000
memory_bytes = 536870912
disk_bytes = 268435456
pids = 128
[env]
PATH = "/usr/bin:/bin"
PYTHONDONTWRITEBYTECODE = "1"
"#
            ),
        )
        .unwrap();
        p
    }

    fn work_unit(&self, wall: u64, network: &str) -> PathBuf {
        let p = self.path(&format!("wu-{wall}.toml"));
        std::fs::write(
            &p,
            format!(
                r#"id = "fix-calc"
objective = "fix calc.py"
base_commit = "{}"
scope = ["calc.py"]
forbidden = ["test_calc.py"]
[permissions]
sandbox_required = true
process_execution = true
wall_time_secs = {wall}
network = {network}
"#,
                self.repo.commit
            ),
        )
        .unwrap();
        p
    }

    fn command(&self, preset: &Path, work_unit: &Path) -> Command {
        let mut c = Command::new(crate::escape::stockade());
        c.arg("run")
            .arg("--preset")
            .arg(preset)
            .arg("--work-unit")
            .arg(work_unit)
            .arg("--trusted")
            .arg(self.path("trusted.toml"))
            .arg("--repo")
            .arg(&self.repo.path)
            .arg("--state")
            .arg(self.path("state"))
            .arg("--json");
        c
    }

    fn run(&self, preset: &Path, work_unit: &Path) -> (Output, serde_json::Value) {
        let out = self.command(preset, work_unit).output().unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (out, json)
    }
}

fn context(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const NO_NET: &str = r#"{ mode = "none" }"#;

#[test]
fn a_scripted_agent_is_captured_from_outside_and_the_patch_applies() {
    if !require_root("stockade run tests (session overlays)") {
        return;
    }
    let env = Env::new();
    let preset = env.preset(
        "sh-fixer",
        "stdin",
        r#"["/bin/sh", "-c", "cat > prompt-echo.txt; sed -i 's/return a - b/return a + b/' calc.py && echo hi > test_calc.py.bak && echo x >> test_calc.py; python3 -c 'import calc; assert calc.add(2, 3) == 5'"]"#,
    );
    let (out, json) = env.run(&preset, &env.work_unit(60, NO_NET));
    assert_eq!(out.status.code(), Some(0), "{}", context(&out));
    assert_eq!(
        json["accepted"],
        serde_json::json!(["calc.py"]),
        "{}",
        context(&out)
    );
    let rejected: Vec<(String, String)> = json["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["reason"]["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(
        rejected.contains(&("test_calc.py".into(), "forbidden".into())),
        "{rejected:?}"
    );
    assert!(
        rejected.contains(&("prompt-echo.txt".into(), "out_of_scope".into())),
        "{rejected:?}"
    );
    // The agent saw its prompt on stdin (the rejected file holds it; it never reaches the patch).
    let manifest = PathBuf::from(json["manifest_path"].as_str().unwrap());
    let verify = Command::new(crate::escape::stockade())
        .args(["manifest", "verify"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", context(&verify));
    let patch = PathBuf::from(json["patch"].as_str().unwrap());
    let patch_text = std::fs::read_to_string(&patch).unwrap();
    assert!(
        patch_text.contains("+    return a + b") && !patch_text.contains("test_calc.py"),
        "{patch_text}"
    );
    let clone = env.path("clone");
    git(
        env.dir.path(),
        &[
            "clone",
            "-q",
            env.repo.path.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(&clone, &["apply", patch.to_str().unwrap()]);
    let test = Command::new("/usr/bin/python3")
        .arg("test_calc.py")
        .current_dir(&clone)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stderr)
    );
    // The canonical repository was never written.
    git(&env.repo.path, &["fsck", "--strict", "--no-dangling"]);
    let head = std::fs::read_to_string(env.repo.path.join("refs/heads/main")).unwrap();
    assert_eq!(head.trim(), env.repo.commit);
}

#[test]
fn refusals_exit_10_before_any_worker_starts() {
    if !require_root("stockade run tests (session overlays)") {
        return;
    }
    let env = Env::new();
    let marker = env.path("worker-ran");
    let touch = format!(
        r#"["/bin/sh", "-c", "touch {} {{prompt}}"]"#,
        marker.display()
    );
    // Unrestricted network: a policy violation.
    let preset = env.preset("toucher", "argument", &touch);
    let (out, json) = env.run(&preset, &env.work_unit(61, r#"{ mode = "unrestricted" }"#));
    assert_eq!(out.status.code(), Some(10), "{}", context(&out));
    assert!(
        json["error"]
            .as_str()
            .unwrap_or("")
            .contains("unrestricted"),
        "{}",
        context(&out)
    );
    // A destination nobody trusted.
    let (out, _) = env.run(
        &preset,
        &env.work_unit(
            62,
            r#"{ mode = "bounded", destinations = ["https://evil.example"] }"#,
        ),
    );
    assert_eq!(out.status.code(), Some(10), "{}", context(&out));
    assert!(!marker.exists(), "no worker may have run");
    // Every refusal still left an honest, incomplete record.
    let manifests = std::fs::read_dir(env.path("state/artifacts/manifests"))
        .unwrap()
        .count();
    assert_eq!(manifests, 2);
}

/// `file` prompt transport works only through the isolated input mount: the agent reads its
/// prompt from a read-only file outside the workspace, cannot change it, and the prompt never
/// becomes part of the candidate.
#[test]
fn file_prompt_arrives_through_the_isolated_input_mount() {
    if !require_root("stockade run tests (session overlays)") {
        return;
    }
    let env = Env::new();
    let preset = env.preset(
        "file-agent",
        "file",
        r#"["/bin/sh", "-c", "case \"$1\" in \"$PWD\"/*) exit 3;; esac; grep -q 'fix calc.py' \"$1\" || exit 4; if echo tampered > \"$1\" 2>/dev/null; then exit 5; fi; sed -i 's/- b/+ b/' calc.py", "sh", "{prompt_file}"]"#,
    );
    let (out, json) = env.run(&preset, &env.work_unit(60, NO_NET));
    assert_eq!(out.status.code(), Some(0), "{}", context(&out));
    assert_eq!(
        json["accepted"],
        serde_json::json!(["calc.py"]),
        "{}",
        context(&out)
    );
    assert_eq!(json["rejected"], serde_json::json!([]), "{}", context(&out));
    // Exit codes 3 (prompt inside the workspace), 4 (prompt missing) and 5 (prompt writable)
    // would have made the agent fail; it succeeded, so none of those happened.
    assert_eq!(json["agent_exit"]["code"], 0, "{}", context(&out));
}

#[test]
fn the_wall_time_budget_kills_the_whole_tree() {
    if !require_root("stockade run tests (session overlays)") {
        return;
    }
    let env = Env::new();
    // A daemonised grandchild that ignores SIGTERM must die with the tree.
    let preset = env.preset(
        "sleeper",
        "stdin",
        r#"["/bin/sh", "-c", "trap '' TERM; (setsid sh -c 'trap \"\" TERM; exec sleep 8117' &); sed -i 's/- b/+ b/' calc.py; exec sleep 8118"]"#,
    );
    let start = Instant::now();
    let (out, json) = env.run(&preset, &env.work_unit(2, NO_NET));
    assert_eq!(out.status.code(), Some(11), "{}", context(&out));
    assert_eq!(json["agent_exit"]["how"], "timed-out", "{}", context(&out));
    assert!(start.elapsed() < Duration::from_secs(60));
    // What it changed before the budget ran out was still captured.
    assert_eq!(
        json["accepted"],
        serde_json::json!(["calc.py"]),
        "{}",
        context(&out)
    );
    let left = Command::new("pgrep")
        .args(["-f", "sleep 811[78]"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "processes survived the attempt: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn sigterm_cancels_kills_the_tree_and_leaves_an_incomplete_record() {
    if !require_root("stockade run tests (session overlays)") {
        return;
    }
    let env = Env::new();
    let preset = env.preset(
        "hanger",
        "stdin",
        r#"["/bin/sh", "-c", "sed -i 's/- b/+ b/' calc.py; exec sleep 8119"]"#,
    );
    let child = env
        .command(&preset, &env.work_unit(300, NO_NET))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the agent runs, then stop the supervisor as a scheduler would.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = Command::new("pgrep")
            .args(["-f", "sleep 8119"])
            .output()
            .unwrap();
        if !found.stdout.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the agent never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(12), "{}", context(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["completion"]["status"],
        "incomplete",
        "{}",
        context(&out)
    );
    assert_eq!(
        json["accepted"],
        serde_json::json!([]),
        "a cancelled attempt records no candidate"
    );
    let left = Command::new("pgrep")
        .args(["-f", "sleep 8119"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "processes survived cancellation");
}
