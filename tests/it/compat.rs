//! Compatibility: real toolchains work inside `stockade exec` (over-blocking is a bug too).

use crate::escape::{exec_in, need_sandbox, sh, ws};

#[test]
fn shell_pipelines() {
    need_sandbox!();
    let w = ws();
    let r = sh(
        w.path(),
        "seq 1 1000 | sort -rn | head -1; echo hi > /dev/stdout; echo err >&2; ls /dev/fd/ >/dev/null && echo fdok; cat /etc/passwd | wc -l >/dev/null; mktemp; echo done",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("1000\nhi\n"), "{r:?}");
    assert!(
        r.stdout.contains("fdok") && r.stdout.contains("/tmp/tmp."),
        "{r:?}"
    );
}

#[test]
fn git_works() {
    need_sandbox!();
    let w = ws();
    let r = sh(
        w.path(),
        "git init -q . && git config user.email a@b && git config user.name t && echo x > f && git add f && git commit -qm init && git log --oneline | wc -l && git status --short",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with('1'), "{r:?}");
}

#[test]
fn python_works() {
    need_sandbox!();
    let w = ws();
    let py = "import json, subprocess, tempfile, os, socket, threading\n\
              print(json.dumps({'ok': True}))\n\
              print(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())\n\
              s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('listen ok')\n\
              with tempfile.NamedTemporaryFile() as f: print('tmp ok')\n\
              open('written.txt', 'w').write('py')";
    let r = exec_in(w.path(), &[], &["/usr/bin/python3", "-c", py]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("{\"ok\": true}")
            && r.stdout.contains("sub")
            && r.stdout.contains("tmp ok"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.path().join("written.txt")).unwrap(),
        "py"
    );
}

#[test]
fn node_works_if_present() {
    need_sandbox!();
    if !std::path::Path::new("/usr/bin/node").exists() {
        eprintln!("SKIP node_works_if_present: no /usr/bin/node");
        return;
    }
    let w = ws();
    let js = "const fs=require('fs'); const cp=require('child_process'); fs.writeFileSync('n.txt','node'); console.log(cp.execSync('echo child').toString().trim()); console.log(require('os').cpus().length>0)";
    let r = exec_in(w.path(), &[], &["/usr/bin/node", "-e", js]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("child") && r.stdout.contains("true"),
        "{r:?}"
    );
}

#[test]
fn cargo_build_works_if_present() {
    need_sandbox!();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let rustup = format!("{home}/.rustup");
    let cargo_home = format!("{home}/.cargo");
    if !std::path::Path::new(&format!("{cargo_home}/bin/cargo")).exists() {
        eprintln!("SKIP cargo_build_works_if_present: no cargo in {cargo_home}");
        return;
    }
    let w = ws();
    std::fs::create_dir_all(w.path().join("src")).unwrap();
    std::fs::write(
        w.path().join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        w.path().join("src/main.rs"),
        "fn main() { println!(\"hello from cargo\"); }\n",
    )
    .unwrap();
    let path = format!("{cargo_home}/bin:/usr/local/bin:/usr/bin:/bin");
    let r = exec_in(
        w.path(),
        &[
            "--ro",
            &rustup,
            "--ro",
            &format!("{cargo_home}/bin"),
            "--env",
            &format!("PATH={path}"),
            "--env",
            &format!("RUSTUP_HOME={rustup}"),
            "--env",
            "CARGO_HOME=/tmp/home/.cargo",
            "--env",
            "RUSTUP_TOOLCHAIN=stable",
        ],
        &["/bin/sh", "-c", "cargo run --offline -q"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("hello from cargo"), "{r:?}");
}
