//! The Linux backend through the `stockade-sandbox` contract: a template prewarmed once,
//! sessions as overlays on it, real sandboxed programs, the change layer as the candidate,
//! leases, lifecycle, and nothing left mounted after `delete`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use stockade_capabilities::{Protection, ProtectionStatus, SandboxCapabilities};
use stockade_sandbox::{
    Backend, LeaseHolder, LeaseStore, RunOptions, Session, SessionId, TemplateSpec,
};
use stockade_sandbox_linux::backend::LinuxBackend;

use crate::support::require_root;

fn policy(disk: u64, wall_secs: u64) -> stockade_policy::SandboxPolicy {
    let preset = stockade_policy::load_preset(
        br#"
id = "sh"
kind = "model-only"
command = ["/bin/sh"]
prompt_transport = "stdin"
sandbox_required = true
read_only_host_paths = []
[default_limits]
cpu_millis = 1000
memory_bytes = 268435456
disk_bytes = 67108864
pids = 64
"#,
        "preset.toml",
    )
    .expect("preset");
    let unit = format!(
        r#"
id = "wu"
objective = "test"
base_commit = "0123456789abcdef0123456789abcdef01234567"
scope = ["**"]
forbidden = []
[permissions]
sandbox_required = true
process_execution = true
secrets = []
wall_time_secs = {wall_secs}
network = {{ mode = "none" }}
[permissions.limits]
cpu_millis = 1000
memory_bytes = 268435456
disk_bytes = {disk}
pids = 64
"#
    );
    let unit = stockade_policy::load_work_unit(unit.as_bytes(), "unit.toml").expect("work unit");
    stockade_policy::SandboxPolicy::resolve(
        &unit,
        &preset,
        &stockade_policy::TrustedModelConnections::default(),
    )
    .expect("policy")
}

/// Capabilities for the glue tests: the attestation itself is tested by the probe tests; here
/// the session mechanics are under test, so the host's real probe result is used when it
/// attests everything and the test says so otherwise.
fn caps(backend: &LinuxBackend) -> SandboxCapabilities {
    let _ = backend;
    let mut caps = SandboxCapabilities::new(
        stockade_capabilities::BackendIdentity::new(
            stockade_sandbox_linux::probe::BACKEND_NAME,
            "test",
        ),
        stockade_capabilities::HostFacts {
            kernel: String::new(),
            landlock_abi: None,
            cgroup: stockade_capabilities::CgroupVersion::V1,
        },
    );
    for p in Protection::ALL {
        caps.set(
            p,
            ProtectionStatus::Enforced {
                evidence: "session glue test (attestation is tested by the probe suite)".into(),
            },
        );
    }
    caps
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn mounted(path: &Path) -> bool {
    let m = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    m.contains(&*path.to_string_lossy())
}

#[test]
fn session_is_an_overlay_whose_upper_layer_is_the_candidate() {
    if !require_root("the Linux backend session tests (overlays are host mounts)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lower = tmp.path().join("template");
    write(&lower.join("keep.txt"), "keep\n");
    write(&lower.join("edit.txt"), "old\n");
    write(&lower.join("gone.txt"), "bye\n");
    write(&lower.join("dir/deep.txt"), "deep\n");
    let backend = LinuxBackend::new(tmp.path().join("state")).unwrap();
    let store = LeaseStore::open(tmp.path().join("leases")).unwrap();
    let spec = TemplateSpec {
        source_id: "test-template".into(),
        lower: lower.clone(),
        files: BTreeMap::from([("supplied.txt".to_owned(), b"from template\n".to_vec())]),
    };
    let template = backend.prewarm(&spec).unwrap();
    assert_eq!(
        backend.prewarm(&spec).unwrap().key(),
        template.key(),
        "prewarm is content-keyed and idempotent"
    );

    let policy = policy(16 << 20, 30);
    let admission = stockade_capabilities::admit(&caps(&backend), &policy).unwrap();
    let holder = LeaseHolder {
        pid: std::process::id(),
        holder: "backend-test".into(),
    };
    let mut session = Session::create(
        &backend,
        store.clone(),
        SessionId::new("overlay").unwrap(),
        holder,
        &template,
        &policy,
        admission,
    )
    .unwrap();
    assert_eq!(
        session.read_text("supplied.txt").unwrap(),
        "from template\n"
    );
    assert_eq!(session.read_text("dir/deep.txt").unwrap(), "deep\n");

    let out = session
        .run(
            vec!["/bin/sh".into(), "-c".into(), "cat keep.txt; echo new > edit.txt; rm gone.txt; echo hi > added.txt; echo tmp > /tmp/t; pwd".into()],
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            &RunOptions { deadline: Duration::from_secs(30), ..RunOptions::default() },
        )
        .unwrap();
    assert!(
        out.status.success(),
        "{out:?} {}",
        String::from_utf8_lossy(&out.stderr.bytes)
    );
    assert!(String::from_utf8_lossy(&out.stdout.bytes).starts_with("keep\n"));

    // The template is untouched; the change layer holds exactly the changes.
    assert_eq!(
        std::fs::read_to_string(lower.join("edit.txt")).unwrap(),
        "old\n"
    );
    assert!(lower.join("gone.txt").exists());
    let upper = session.change_layer().unwrap();
    assert_eq!(
        std::fs::read_to_string(upper.join("edit.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join("added.txt")).unwrap(),
        "hi\n"
    );
    let whiteout = std::fs::symlink_metadata(upper.join("gone.txt")).unwrap();
    assert!(
        std::os::unix::fs::FileTypeExt::is_char_device(&whiteout.file_type()),
        "deletion is a whiteout"
    );
    assert!(
        !upper.join("keep.txt").exists(),
        "unchanged files are not copied up"
    );
    assert!(
        !upper.join("t").exists(),
        "/tmp is not part of the candidate"
    );
    assert_eq!(session.read_text("edit.txt").unwrap(), "new\n");

    // Stop keeps it reattachable; delete leaves nothing mounted.
    let view = session.workspace_view().unwrap();
    let record = session.stop().unwrap();
    assert!(mounted(&view), "stop keeps the workspace");
    let holder = LeaseHolder {
        pid: std::process::id(),
        holder: "backend-test-2".into(),
    };
    let again = Session::reattach(&backend, store, &record.session, holder, &template).unwrap();
    assert_eq!(again.read_text("added.txt").unwrap(), "hi\n");
    again.delete().unwrap();
    assert!(!mounted(&view), "delete unmounts the session");
    assert!(
        backend
            .state_dir()
            .join("templates")
            .join(template.key().as_str())
            .join("files/supplied.txt")
            .exists(),
        "delete never removes a template"
    );
}

#[test]
fn session_writes_are_bounded_by_the_disk_ceiling_and_wall_time_kills() {
    if !require_root("the Linux backend session tests (overlays are host mounts)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let lower = tmp.path().join("template");
    write(&lower.join("a.txt"), "a\n");
    let backend = LinuxBackend::new(tmp.path().join("state")).unwrap();
    let store = LeaseStore::open(tmp.path().join("leases")).unwrap();
    let template = backend
        .prewarm(&TemplateSpec {
            source_id: "t2".into(),
            lower,
            files: BTreeMap::new(),
        })
        .unwrap();
    let policy = policy(4 << 20, 2);
    let admission = stockade_capabilities::admit(&caps(&backend), &policy).unwrap();
    let holder = LeaseHolder {
        pid: std::process::id(),
        holder: "backend-test".into(),
    };
    let mut session = Session::create(
        &backend,
        store,
        SessionId::new("ceiling").unwrap(),
        holder,
        &template,
        &policy,
        admission,
    )
    .unwrap();
    let out = session
        .run(
            vec![
                "/bin/sh".into(),
                "-c".into(),
                "dd if=/dev/zero of=big bs=1M count=64 2>&1; echo rc=$?".into(),
            ],
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            &RunOptions {
                deadline: Duration::from_secs(30),
                ..RunOptions::default()
            },
        )
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout.bytes);
    assert!(text.contains("No space left on device"), "{text}");
    let size = std::fs::metadata(session.change_layer().unwrap().join("big"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(size <= 4 << 20, "written {size} bytes past a 4 MiB ceiling");

    let started = std::time::Instant::now();
    let out = session
        .run(
            vec![
                "/bin/sh".into(),
                "-c".into(),
                "(sleep 100 &) ; sleep 100".into(),
            ],
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            &RunOptions {
                deadline: Duration::from_secs(60),
                ..RunOptions::default()
            },
        )
        .unwrap();
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the policy's 2 s wall time ended the tree"
    );
    let view = session.workspace_view().unwrap();
    session.delete().unwrap();
    assert!(!mounted(&view));
}
