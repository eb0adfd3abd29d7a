//! Integration tests of the launcher (kernel-touching; the adversarial suite is in `tests/`).
#![allow(clippy::unwrap_used)]

use std::os::fd::OwnedFd;

use stockade_sandbox_linux::{launch, ExitStatus, LaunchSpec, Stdio};

fn pipe() -> (std::fs::File, OwnedFd) {
    let (r, w) = std::io::pipe().unwrap();
    (std::fs::File::from(OwnedFd::from(r)), OwnedFd::from(w))
}

fn run_sh(script: &str) -> (ExitStatus, String) {
    let ws = tempfile::tempdir().unwrap();
    let (mut r, w) = pipe();
    let spec = LaunchSpec::new("/bin/sh", vec!["-c".into(), script.into()], ws.path())
        .with_stdio(Stdio::Fds { stdin: None, stdout: Some(w.try_clone().unwrap()), stderr: Some(w) });
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
    let (st, out) = run_sh("echo pid=$$; ls /; cat /proc/self/status | grep -E 'Cap|NoNew|Seccomp'; id; exit 7");
    eprintln!("{out}");
    assert_eq!(st, ExitStatus::Exited(7));
    assert!(out.contains("pid=1"));
}
