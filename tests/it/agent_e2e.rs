//! A real agent, end to end: mini-SWE-agent (PyPI `mini-swe-agent`, installed by
//! `.ci/install-agents.sh` into `/opt/stockade-venvs/mini-swe-agent`) runs inside
//! `stockade run` with the unmodified `presets/mini-swe-agent.toml`, on a small repository whose
//! test fails.
//!
//! Its model calls go through the gateway to a local OpenAI-compatible server owned by this
//! test, which refuses any request without the key only the host holds and scripts the replies
//! (tool calls): look at the code, fix it with `sed`, run the test, submit. The agent edits the
//! file with its own shell commands inside the sandbox. Judged from the host: every model
//! request carried the injected key, the key never reached the agent, the second request
//! carries the output of commands that ran inside, and the captured patch applies with
//! `git apply` to a fresh clone of the base commit and makes the repository's test pass.
//!
//! Without the agent installed (or without root for the session overlays) the test says
//! SKIPPED loudly; under `CI=true` it fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use stockade_orchestrator::demo::build_demo_repo;
use stockade_orchestrator::model_server::{ModelServerConfig, ScriptedModelServer, ScriptedReply};

use crate::support::{git, is_root};

const MINI: &str = "/opt/stockade-venvs/mini-swe-agent/bin/mini";

fn skip_or_fail(why: &str) -> bool {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: agent_e2e cannot run: {why}"
    );
    eprintln!("SKIPPED (loudly): agent_e2e: {why}");
    false
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn script() -> Vec<ScriptedReply> {
    vec![
        ScriptedReply::bash(
            "Let me look at the code and the test.",
            "ls && cat calc.py test_calc.py",
        ),
        ScriptedReply::bash(
            "add() subtracts; fix it and run the test.",
            "sed -i 's/return a - b/return a + b/' calc.py && python3 test_calc.py",
        ),
        ScriptedReply::bash(
            "The test passes; submitting.",
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
        ),
    ]
}

#[test]
fn mini_swe_agent_fixes_a_repository_inside_stockade_run() {
    if !Path::new(MINI).is_file() {
        skip_or_fail(&format!("{MINI} is missing; run .ci/install-agents.sh"));
        return;
    }
    if !is_root() {
        skip_or_fail("stockade run mounts session overlays, which needs root here");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = build_demo_repo(&dir.path().join("canonical.git")).unwrap();
    let key = format!(
        "sk-agent-e2e-{}",
        stockade_orchestrator::demo::unique_token("e2e")
    );
    let server = rt
        .block_on(ScriptedModelServer::start(ModelServerConfig {
            api_key: key.clone(),
            model: "gpt-4o-mini".into(),
            replies: script(),
        }))
        .unwrap();
    let origin = server.origin().unwrap();

    let key_file = dir.path().join("openai-authorization");
    std::fs::write(&key_file, format!("Bearer {key}\n")).unwrap();
    let trusted = dir.path().join("trusted.toml");
    std::fs::write(
        &trusted,
        format!("[connections.openai]\norigin = \"{origin}\"\nheaders = [{{ header = \"authorization\", secret = \"file:{}\" }}]\n", key_file.display()),
    )
    .unwrap();
    let work_unit = dir.path().join("fix-calc.toml");
    std::fs::write(
        &work_unit,
        format!(
            r#"id = "fix-calc-e2e"
objective = "The test in test_calc.py fails: fix calc.py so that `python3 test_calc.py` passes."
base_commit = "{}"
scope = ["calc.py"]
forbidden = ["test_calc.py"]
[permissions]
sandbox_required = true
process_execution = true
wall_time_secs = 300
network = {{ mode = "bounded", destinations = ["{origin}"] }}
"#,
            repo.commit
        ),
    )
    .unwrap();
    let artifacts = dir.path().join("artifacts");
    let state = dir.path().join("state");

    let output = Command::new(crate::escape::stockade())
        .arg("run")
        .arg("--preset")
        .arg(workspace_root().join("presets/mini-swe-agent.toml"))
        .arg("--work-unit")
        .arg(&work_unit)
        .arg("--trusted")
        .arg(&trusted)
        .arg("--repo")
        .arg(&repo.path)
        .arg("--artifacts")
        .arg(&artifacts)
        .arg("--state")
        .arg(&state)
        .arg("--json")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run stockade");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let requests = server.requests();
    let context = format!(
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}\nmodel requests: {}",
        output.status.code(),
        requests.len()
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "stockade run must capture a candidate\n{context}"
    );

    // Every model request came through the gateway with the injected key.
    assert!(requests.len() >= 3, "{context}");
    assert!(
        requests.iter().all(|r| r.authorized),
        "a request reached the model without the key\n{context}"
    );
    // The second request carries what `cat calc.py` printed inside the sandbox.
    let second = requests[1]
        .body
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        second.contains("return a - b"),
        "the agent did not send back the output of its own command\n{context}"
    );

    let summary: serde_json::Value = serde_json::from_str(&stdout).expect("--json summary");
    assert_eq!(
        summary["status"]["status"], "candidate-captured",
        "{context}"
    );
    assert_eq!(
        summary["accepted"],
        serde_json::json!(["calc.py"]),
        "{context}"
    );
    let manifest_path = PathBuf::from(summary["manifest_path"].as_str().expect("manifest path"));
    stockade_manifest::verify(&manifest_path).expect("manifest verifies");
    let patch = PathBuf::from(summary["patch"].as_str().expect("patch path"));

    // The key never reached the agent or the record.
    for log in summary["logs"].as_array().unwrap() {
        let text = std::fs::read_to_string(log.as_str().unwrap()).unwrap_or_default();
        assert!(!text.contains(&key), "the key appears in {log}");
    }
    assert!(
        !std::fs::read_to_string(&manifest_path)
            .unwrap()
            .contains(&key)
    );

    // The patch applies to a fresh checkout of the base commit and the test passes.
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            repo.path.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(&clone, &["checkout", "-q", &repo.commit]);
    let before = Command::new("/usr/bin/python3")
        .arg("test_calc.py")
        .current_dir(&clone)
        .output()
        .unwrap();
    assert!(!before.status.success(), "the base commit's test must fail");
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    let after = Command::new("/usr/bin/python3")
        .arg("test_calc.py")
        .current_dir(&clone)
        .output()
        .unwrap();
    assert!(
        after.status.success(),
        "the captured patch must make the test pass: {}",
        String::from_utf8_lossy(&after.stderr)
    );
    rt.block_on(server.shutdown());
}
