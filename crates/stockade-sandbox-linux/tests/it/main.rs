//! Integration tests of the launcher (kernel-touching; the adversarial suite is in `tests/`).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::os::fd::OwnedFd;

use stockade_sandbox_linux::{ExitStatus, LaunchSpec, Stdio, launch};

fn pipe() -> (std::fs::File, OwnedFd) {
    let (r, w) = std::io::pipe().unwrap();
    (std::fs::File::from(OwnedFd::from(r)), OwnedFd::from(w))
}

fn run_sh(script: &str) -> (ExitStatus, String) {
    let ws = tempfile::tempdir().unwrap();
    let (mut r, w) = pipe();
    let spec = LaunchSpec::new("/bin/sh", vec!["-c".into(), script.into()], ws.path()).with_stdio(
        Stdio::Fds {
            stdin: None,
            stdout: Some(w.try_clone().unwrap()),
            stderr: Some(w),
        },
    );
    let mut worker = launch(spec).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut r, &mut out).unwrap();
    (worker.wait().unwrap(), out)
}

#[test]
fn runs_true() {
    let ws = tempfile::tempdir().unwrap();
    let mut w = launch(LaunchSpec::new("/bin/true", vec![], ws.path())).unwrap();
    assert_eq!(w.wait().unwrap(), ExitStatus::Exited(0));
}

#[test]
fn exit_code_and_pid1() {
    let (st, out) = run_sh(
        "echo pid=$$; ls /; cat /proc/self/status | grep -E 'Cap|NoNew|Seccomp'; id; exit 7",
    );
    eprintln!("{out}");
    assert_eq!(st, ExitStatus::Exited(7));
    assert!(out.contains("pid=1"));
}

#[test]
fn overlay_workspace_writes_land_in_upper_only() {
    let base = tempfile::tempdir().unwrap();
    let (lower, upper, work) = (
        base.path().join("lower"),
        base.path().join("upper"),
        base.path().join("work"),
    );
    for d in [&lower, &upper, &work] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(lower.join("kept.txt"), "template").unwrap();
    let target = base.path().join("merged");
    let (mut r, w) = pipe();
    let spec = LaunchSpec::new(
        "/bin/sh",
        vec![
            "-c".into(),
            "cat kept.txt; echo new > new.txt; echo changed > kept.txt; pwd".into(),
        ],
        base.path(),
    )
    .with_workspace(stockade_sandbox_linux::WorkspaceView::Overlay {
        lower: lower.clone(),
        upper: upper.clone(),
        work: work.clone(),
        target: target.clone(),
    })
    .with_stdio(Stdio::Fds {
        stdin: None,
        stdout: Some(w.try_clone().unwrap()),
        stderr: Some(w),
    });
    let mut worker = launch(spec).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut r, &mut out).unwrap();
    assert_eq!(worker.wait().unwrap(), ExitStatus::Exited(0), "{out}");
    assert!(out.starts_with("template/"), "{out}");
    assert_eq!(
        std::fs::read_to_string(lower.join("kept.txt")).unwrap(),
        "template"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join("kept.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(
        !target.exists(),
        "nothing is mounted or created on the host side"
    );
}

#[test]
fn listeners_are_created_inside_the_sandbox_netns() {
    let ws = tempfile::tempdir().unwrap();
    let spec = LaunchSpec::new("/bin/sleep", vec!["5".into()], ws.path()).with_listener(0);
    let mut worker = launch(spec).unwrap();
    let listeners = worker.take_listeners();
    assert_eq!(listeners.len(), 1);
    let addr = listeners[0].local_addr().unwrap();
    assert!(addr.ip().is_loopback());
    // The host's loopback is a different namespace: nothing listens there on this port
    // (unless by coincidence another process does; then the connection is not ours).
    let host = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200));
    if host.is_ok() {
        listeners[0].set_nonblocking(true).unwrap();
        assert!(
            listeners[0].accept().is_err(),
            "a host connection reached the sandbox listener"
        );
    }
    worker.kill().unwrap();
    assert!(matches!(worker.wait().unwrap(), ExitStatus::Signaled(9)));
}

#[test]
fn setup_failure_names_the_stage() {
    let ws = tempfile::tempdir().unwrap();
    let err = launch(LaunchSpec::new("/definitely/not/here", vec![], ws.path())).unwrap_err();
    assert!(
        matches!(err, stockade_sandbox_linux::LaunchError::Exec { .. }),
        "{err}"
    );
    let err =
        launch(LaunchSpec::new("/bin/true", vec![], ws.path()).with_ro("/nonexistent-ro-path"))
            .unwrap_err();
    assert!(
        matches!(err, stockade_sandbox_linux::LaunchError::InvalidSpec(_)),
        "{err}"
    );
}

/// A placement that names anything but a cgroup v1 `tasks` file is refused before `clone`:
/// writing `0` to an ordinary file would "succeed" and leave the worker outside its ceilings.
#[test]
fn placement_outside_cgroupfs_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let fake = ws.path().join("tasks");
    std::fs::write(&fake, "").unwrap();
    for tasks in [fake, ws.path().join("missing/tasks")] {
        let spec = LaunchSpec::new("/bin/true", vec![], ws.path()).with_placement(
            stockade_sandbox_linux::Placement {
                tasks_files: vec![tasks.clone()],
            },
        );
        let Err(err) = launch(spec) else {
            panic!("{tasks:?}: the launch must be refused")
        };
        eprintln!("{err}");
        assert!(
            err.to_string().contains("tasks file") || err.to_string().contains("cgroup"),
            "{tasks:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("tasks")).unwrap(),
        "",
        "nothing was written to the fake tasks file"
    );
}

/// The worker is in the placed cgroup before its program runs (cgroup v1 hosts, root).
#[test]
fn placement_puts_the_worker_in_its_cgroup_before_exec() {
    let base = std::path::Path::new("/sys/fs/cgroup/pids");
    let root = rustix::process::geteuid().is_root();
    if !root || !base.join("tasks").exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true") || !root,
            "CI=true as root needs the v1 pids hierarchy"
        );
        eprintln!("SKIPPED: needs root and a cgroup v1 pids hierarchy");
        return;
    }
    let dir = base.join(format!("stockade-it-placement-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (mut r, w) = pipe();
    let spec = LaunchSpec::new(
        "/bin/sh",
        vec!["-c".into(), "cat /proc/self/cgroup".into()],
        ws.path(),
    )
    .with_stdio(Stdio::Fds {
        stdin: None,
        stdout: Some(w),
        stderr: None,
    })
    .with_placement(stockade_sandbox_linux::Placement {
        tasks_files: vec![dir.join("tasks")],
    });
    let mut worker = launch(spec).unwrap();
    let pid = worker.pid();
    let members = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut r, &mut out).unwrap();
    let st = worker.wait().unwrap();
    let _ = std::fs::remove_dir(&dir);
    assert_eq!(st, ExitStatus::Exited(0));
    assert!(
        members.lines().any(|l| l.trim() == pid.to_string()),
        "worker {pid} not in the placed cgroup: {members:?}"
    );
    // Its own cgroup namespace is rooted there: it sees `/`, not the host path.
    let pids_line = out.lines().find(|l| l.contains(":pids:")).unwrap_or("");
    assert!(pids_line.ends_with(":/"), "{out}");
}
