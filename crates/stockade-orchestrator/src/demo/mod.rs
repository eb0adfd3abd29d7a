//! The pieces of `stockade demo`: a small repository with a failing test, the scripted model
//! replies that fix it, and the bundled demo agent.
//!
//! The demo agent is a python3 standard-library script ([`DEMO_AGENT_PY`]) that runs **inside
//! the sandbox** through the backend like any other agent; nothing here starts a process.
//! The demo repository is written with gitoxide's plumbing (loose objects through gix-odb; no
//! `git` process, no repository-configured program can run).

use std::path::{Path, PathBuf};

use gix_object::Write as _;
use gix_object::bstr::BString;
use gix_object::tree::{Entry, EntryKind};

use serde_json::json;
use stockade_policy::{
    AgentPreset, LoadError, TrustedModelConnections, WorkUnit, load_preset,
    load_trusted_connections, load_work_unit,
};

use crate::model_server::ScriptedReply;

/// The demo agent's source; run as `/usr/bin/python3 -c DEMO_AGENT_PY` inside the sandbox.
pub const DEMO_AGENT_PY: &str = include_str!("agent.py");

/// The objective the demo hands to the agent on stdin.
pub const DEMO_OBJECTIVE: &str = "The test in test_calc.py fails: fix calc.py so that `python3 test_calc.py` passes. Change nothing else.";

/// The buggy module of the demo repository.
pub const CALC_PY: &str = "\"\"\"Tiny calculator used by the Stockade demo.\"\"\"\n\n\ndef add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a - b\n";

/// The fixed module the scripted model proposes.
pub const CALC_PY_FIXED: &str = "\"\"\"Tiny calculator used by the Stockade demo.\"\"\"\n\n\ndef add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n";

/// The repository's test (standard library `unittest`).
pub const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

const README_MD: &str = "# Stockade demo repository\n\nRun `python3 test_calc.py`. It fails until `add` in `calc.py` is fixed.\n";

/// The files of the demo repository's single commit, sorted by name.
pub fn demo_files() -> [(&'static str, &'static str); 3] {
    [
        ("README.md", README_MD),
        ("calc.py", CALC_PY),
        ("test_calc.py", TEST_CALC_PY),
    ]
}

/// The scripted model's reply: the fixed `calc.py` in the format the demo agent applies.
pub fn demo_model_script() -> Vec<ScriptedReply> {
    vec![ScriptedReply::text(format!(
        "FILE calc.py\n```python\n{CALC_PY_FIXED}```\n"
    ))]
}

/// A hard-to-guess token (32 hex digits) for the demo's planted secret and model key: blake3 of
/// the label, the time, the process id and a counter. Not a cryptographic key generator; it
/// only has to be unguessable by the demo agent and unique per run.
pub fn unique_token(label: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h = blake3::Hasher::new();
    h.update(label.as_bytes());
    h.update(&nanos.to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(
        &COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    h.finalize().to_hex()[..32].to_owned()
}

/// Where the demo's host-side pieces are, for [`demo_inputs`].
#[derive(Debug, Clone, Copy)]
pub struct DemoHost<'a> {
    /// The demo repository.
    pub repo: &'a DemoRepo,
    /// The scripted model server's port on host loopback.
    pub model_port: u16,
    /// Host file holding the whole `Authorization` header value (read by the gateway only).
    pub key_file: &'a Path,
    /// The host secret the demo planted outside the workspace (the agent tries to read it).
    pub secret_path: &'a Path,
}

/// The demo's preset, work unit and trusted connections, built as JSON and loaded with
/// stockade-policy's loader like any user's files. The agent runs as
/// `/usr/bin/python3 -c DEMO_AGENT_PY` with the objective on stdin; its only network is the
/// scripted model server's origin, through the gateway.
pub fn demo_inputs(
    host: DemoHost<'_>,
) -> Result<(AgentPreset, WorkUnit, TrustedModelConnections), LoadError> {
    let origin = format!("http://127.0.0.1:{}", host.model_port);
    let preset = json!({
        "id": "stockade-demo-agent",
        "kind": "model-only",
        "command": ["/usr/bin/python3", "-c", DEMO_AGENT_PY],
        "prompt_transport": "stdin",
        "sandbox_required": true,
        "default_limits": { "cpu_millis": 1000, "memory_bytes": 536_870_912u64, "disk_bytes": 268_435_456u64, "pids": 128 },
        "connections": [{ "name": "demo-model", "base_url_env": ["OPENAI_BASE_URL"] }],
        "env": {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENAI_API_KEY": "stockade-placeholder-not-a-key",
            "STOCKADE_DEMO_SECRET_PATH": host.secret_path.display().to_string(),
            "STOCKADE_DEMO_MODEL_PORT": host.model_port.to_string(),
            "STOCKADE_DEMO_REPO_PATH": host.repo.path.display().to_string(),
        },
    });
    let work_unit = json!({
        "id": "stockade-demo",
        "objective": DEMO_OBJECTIVE,
        "base_commit": host.repo.commit,
        "scope": ["calc.py"],
        "forbidden": ["test_calc.py"],
        "permissions": {
            "sandbox_required": true,
            "process_execution": true,
            "wall_time_secs": 120,
            "network": { "mode": "bounded", "destinations": [origin] },
        },
    });
    let trusted = json!({
        "connections": { "demo-model": {
            "origin": origin,
            "headers": [{ "header": "authorization", "secret": format!("file:{}", host.key_file.display()) }],
        }},
    });
    let bytes = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_default();
    Ok((
        load_preset(&bytes(&preset), "demo-preset.json")?,
        load_work_unit(&bytes(&work_unit), "demo-work-unit.json")?,
        load_trusted_connections(&bytes(&trusted), "demo-trusted.json")?,
    ))
}

/// A demo repository on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoRepo {
    /// The bare repository's directory.
    pub path: PathBuf,
    /// The full hex id of the one commit (`HEAD` and `refs/heads/main`).
    pub commit: String,
}

/// Why the demo repository could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The destination exists and is not an empty directory.
    #[error("demo repository destination {0} exists and is not empty")]
    DestinationNotEmpty(PathBuf),
    /// Creating the directory failed.
    #[error("cannot create demo repository directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A gix operation failed.
    #[error("cannot write the demo repository at {path}: {message}")]
    Git {
        /// The repository directory.
        path: PathBuf,
        /// What gix said.
        message: String,
    },
}

/// Builds a bare repository at `dest` (created if missing, must be empty) holding one commit
/// with [`demo_files`]. The commit's author, committer and time are fixed, so the commit id
/// is the same on every machine.
pub fn build_demo_repo(dest: &Path) -> Result<DemoRepo, DemoError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DemoError::Io { path, source }
    };
    if dest.exists() {
        let mut entries = std::fs::read_dir(dest).map_err(io(dest))?;
        if entries.next().is_some() {
            return Err(DemoError::DestinationNotEmpty(dest.to_owned()));
        }
    }
    let git = |e: &dyn std::fmt::Display| DemoError::Git {
        path: dest.to_owned(),
        message: e.to_string(),
    };
    // A bare repository laid out as `git init --bare` lays it out, written by hand.
    for dir in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
        let d = dest.join(dir);
        std::fs::create_dir_all(&d).map_err(io(&d))?;
    }
    let write = |name: &str, text: &str| {
        let p = dest.join(name);
        std::fs::write(&p, text).map_err(io(&p))
    };
    write("HEAD", "ref: refs/heads/main\n")?;
    write(
        "config",
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
    )?;
    write("description", "Stockade demo repository\n")?;
    let odb = gix_odb::loose::Store::at(dest.join("objects"), gix_hash::Kind::Sha1);
    let mut entries = Vec::new();
    for (name, content) in demo_files() {
        let blob = gix_object::Blob {
            data: content.as_bytes().to_vec(),
        };
        let oid = odb.write(&blob).map_err(|e| git(&e))?;
        entries.push(Entry {
            mode: EntryKind::Blob.into(),
            filename: BString::from(name),
            oid,
        });
    }
    entries.sort_by(|a, b| a.filename.cmp(&b.filename));
    let tree = odb
        .write(&gix_object::Tree { entries })
        .map_err(|e| git(&e))?;
    let signature = gix_actor::Signature {
        name: "Stockade Demo".into(),
        email: "demo@stockade.invalid".into(),
        time: gix_object::date::Time {
            seconds: 1_764_460_800,
            offset: 0,
        },
    };
    let commit = odb
        .write(&gix_object::Commit {
            tree,
            parents: Default::default(),
            author: signature.clone(),
            committer: signature,
            encoding: None,
            message: "Demo: a calculator whose test fails".into(),
            extra_headers: Vec::new(),
        })
        .map_err(|e| git(&e))?;
    write("refs/heads/main", &format!("{commit}\n"))?;
    Ok(DemoRepo {
        path: dest.to_owned(),
        commit: commit.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_repo_has_one_reproducible_commit_with_the_three_files() {
        use gix_object::FindExt as _;
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ra = build_demo_repo(&a.path().join("demo.git")).unwrap();
        let rb = build_demo_repo(&b.path().join("demo.git")).unwrap();
        assert_eq!(
            ra.commit, rb.commit,
            "commit id must not depend on the machine or the clock"
        );
        assert_eq!(
            ra.commit, "173c806a135aa5b8e34da064d6f71003ef1a75ba",
            "examples/ name this commit"
        );
        let head = std::fs::read_to_string(ra.path.join("refs/heads/main")).unwrap();
        assert_eq!(head.trim(), ra.commit);
        let odb = gix_odb::at(ra.path.join("objects"), gix_hash::Kind::Sha1).unwrap();
        let id = gix_hash::ObjectId::from_hex(ra.commit.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let tree_id = odb.find_commit(&id, &mut buf).unwrap().tree();
        let mut tbuf = Vec::new();
        let tree = odb.find_tree(&tree_id, &mut tbuf).unwrap();
        let names: Vec<String> = tree
            .entries
            .iter()
            .map(|e| e.filename.to_string())
            .collect();
        assert_eq!(names, ["README.md", "calc.py", "test_calc.py"]);
    }

    #[test]
    fn the_demo_inputs_resolve_into_a_policy_with_one_gateway_destination() {
        let d = tempfile::tempdir().unwrap();
        let repo = build_demo_repo(&d.path().join("demo.git")).unwrap();
        let (preset, wu, trusted) = demo_inputs(DemoHost {
            repo: &repo,
            model_port: 4242,
            key_file: &d.path().join("key"),
            secret_path: &d.path().join("secret"),
        })
        .unwrap();
        let policy = stockade_policy::SandboxPolicy::resolve(&wu, &preset, &trusted).unwrap();
        assert_eq!(policy.destinations().len(), 1);
        assert_eq!(
            policy.destinations()[0].origin.to_string(),
            "http://127.0.0.1:4242"
        );
        assert_eq!(policy.command()[2], DEMO_AGENT_PY);
        let plan = crate::plan::plan_launch(&policy).unwrap();
        assert_eq!(plan.stdin.as_deref(), Some(DEMO_OBJECTIVE.as_bytes()));
    }

    #[test]
    fn refuses_a_non_empty_destination() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("x"), "x").unwrap();
        assert!(matches!(
            build_demo_repo(d.path()),
            Err(DemoError::DestinationNotEmpty(_))
        ));
    }

    #[test]
    fn the_scripted_fix_is_the_fixed_module() {
        let reply = &demo_model_script()[0];
        assert!(reply.content.as_deref().unwrap().contains("return a + b"));
        assert!(CALC_PY.contains("return a - b"));
        assert!(DEMO_AGENT_PY.contains("def main()"));
    }
}
