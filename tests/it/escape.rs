//! Adversarial suite against `stockade exec`, judged from the host side.
//!
//! How the binary is found: `STOCKADE_BIN` if set; otherwise the tests run
//! `cargo build -p stockade-cli --bin stockade` once (a no-op when up to date) into the same
//! target directory and profile as this test binary (derived from `current_exe()`:
//! `<target>/<profile>/deps/it-*`), and use `<target>/<profile>/stockade`. This keeps the
//! binary under test in sync with the sources without a dev-dependency on a binary crate.
//!
//! A host without the kernel features makes every case print a loud `SKIP`; under `CI=true`
//! the same condition fails the suite instead.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// Path of the `stockade` binary under test.
pub fn stockade() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("STOCKADE_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps layout");
        let target_dir = profile_dir.parent().expect("target dir");
        let profile = profile_dir
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("debug");
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(workspace)
            .args([
                "build",
                "--quiet",
                "-p",
                "stockade-cli",
                "--bin",
                "stockade",
            ])
            .env("CARGO_TARGET_DIR", target_dir);
        if profile == "release" {
            cmd.arg("--release");
        }
        let st = cmd
            .status()
            .expect("run cargo build for the stockade binary");
        assert!(st.success(), "building the stockade binary failed");
        profile_dir.join("stockade")
    })
    .clone()
}

/// True when the host attests the isolation floor; otherwise a loud SKIP (or a failure under CI).
pub fn isolation_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let out = Command::new(stockade())
            .args(["probe", "--json"])
            .output()
            .expect("run stockade probe");
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("probe --json output");
        let caps = &v["capabilities"]["protections"];
        let floor = [
            "process-tree",
            "filesystem-isolation",
            "credential-isolation",
            "network-enforcement",
        ];
        let missing: Vec<&str> = floor
            .iter()
            .copied()
            .filter(|p| caps[*p]["status"].as_str() != Some("enforced"))
            .collect();
        if missing.is_empty() {
            return true;
        }
        let msg = format!(
            "kernel features missing on this host: {missing:?}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true and the sandbox is unavailable: {msg}");
        }
        eprintln!("\n!!!!!!!!!! SKIP: escape suite not run: {msg} !!!!!!!!!!\n");
        false
    })
}

/// One finished `stockade exec`.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// `stockade exec --workspace ws [extra...] -- argv...`
pub fn exec_in(ws: &Path, extra: &[&str], argv: &[&str]) -> Run {
    let mut c = Command::new(stockade());
    c.arg("exec")
        .arg("--workspace")
        .arg(ws)
        .args(extra)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null());
    c.output().expect("run stockade exec").into()
}

/// `stockade exec` running `/bin/sh -c script` in `ws`.
pub fn sh(ws: &Path, script: &str) -> Run {
    exec_in(ws, &[], &["/bin/sh", "-c", script])
}

/// A host secret outside every mount: (dir, file, content).
pub fn plant_secret() -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::Builder::new()
        .prefix("stockade-escape-secret")
        .tempdir()
        .expect("tempdir");
    let content = format!("TOPSECRET-{}-{}", std::process::id(), dir.path().display());
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, &content).expect("plant secret");
    (dir, file, content)
}

pub fn ws() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-escape-ws")
        .tempdir()
        .expect("workspace tempdir")
}

macro_rules! need_sandbox {
    () => {
        if !crate::escape::isolation_available() {
            return;
        }
    };
}
pub(crate) use need_sandbox;

// ------------------------------------------------------------------------------------------
// Filesystem
// ------------------------------------------------------------------------------------------

#[test]
fn host_file_outside_mounts_is_unreadable() {
    need_sandbox!();
    let (_d, file, content) = plant_secret();
    let w = ws();
    let r = sh(
        w.path(),
        &format!(
            "cat {0}; cat {0}/../secret.txt; ls {1}; echo done",
            file.display(),
            file.parent().unwrap().display()
        ),
    );
    assert!(!r.stdout.contains(&content), "secret leaked: {r:?}");
    assert!(r.stdout.contains("done"), "sandbox did not run: {r:?}");
}

#[test]
fn secret_in_root_home_is_unreadable() {
    need_sandbox!();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let path = Path::new(&home).join(format!(".stockade-escape-{}", std::process::id()));
    if std::fs::write(&path, "HOME-SECRET-VALUE").is_err() {
        eprintln!("SKIP secret_in_root_home_is_unreadable: cannot write into {home}");
        return;
    }
    let w = ws();
    let r = sh(
        w.path(),
        &format!(
            "cat {0}; ls -la {1}; cat ~/.ssh/id_rsa; echo done",
            path.display(),
            home
        ),
    );
    let _ = std::fs::remove_file(&path);
    assert!(!r.stdout.contains("HOME-SECRET-VALUE"), "{r:?}");
    assert!(r.stdout.contains("done"));
}

#[test]
fn writes_outside_workspace_never_reach_the_host() {
    need_sandbox!();
    let (d, _f, _) = plant_secret();
    let w = ws();
    let target = d.path().join("planted-by-sandbox");
    let r = sh(
        w.path(),
        &format!(
            "echo x > {0}; mkdir -p {1}; echo x > {1}/f; echo x > /etc/evil; echo x > /usr/evil; echo x > /evil; touch /bin/evil; echo done",
            target.display(),
            d.path().display()
        ),
    );
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!target.exists(), "sandbox wrote into a host directory");
    for p in ["/etc/evil", "/usr/evil", "/evil", "/bin/evil"] {
        assert!(!Path::new(p).exists(), "{p} appeared on the host");
    }
}

#[test]
fn workspace_is_writable_and_changes_reach_the_host() {
    need_sandbox!();
    let w = ws();
    let r = sh(
        w.path(),
        "echo hello > out.txt && mkdir -p sub && echo x > sub/y && pwd",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(w.path().join("out.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        r.stdout.trim(),
        std::fs::canonicalize(w.path())
            .unwrap()
            .display()
            .to_string()
    );
}

#[test]
fn symlinks_in_workspace_do_not_reach_host_files() {
    need_sandbox!();
    let (_d, file, content) = plant_secret();
    let w = ws();
    std::os::unix::fs::symlink(&file, w.path().join("link")).unwrap();
    std::os::unix::fs::symlink(file.parent().unwrap(), w.path().join("dirlink")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", w.path().join("shadow")).unwrap();
    std::os::unix::fs::symlink("../../../../../../../../", w.path().join("up")).unwrap();
    let r = sh(
        w.path(),
        &format!(
            "cat link; cat dirlink/secret.txt; cat shadow; cat up{}; ls up/; echo done",
            file.display()
        ),
    );
    assert!(!r.stdout.contains(&content), "{r:?}");
    assert!(!r.stdout.contains("root:"), "shadow leaked: {r:?}");
    assert!(r.stdout.contains("done"));
}

#[test]
fn proc_root_links_show_only_the_sandbox() {
    need_sandbox!();
    let (_d, file, content) = plant_secret();
    let w = ws();
    let r = sh(
        w.path(),
        &format!(
            "cat /proc/1/root{0}; cat /proc/self/root{0}; cat /proc/1/cwd/../../..{0}; ls /proc/1/root/; echo done",
            file.display()
        ),
    );
    assert!(!r.stdout.contains(&content), "{r:?}");
    assert!(
        !r.stdout.contains("home\n") && !r.stdout.contains("root\n"),
        "host root listed: {r:?}"
    );
    assert!(r.stdout.contains("done"));
}

#[test]
fn mountinfo_reveals_no_unrelated_host_paths() {
    need_sandbox!();
    let (d, _f, _) = plant_secret();
    let w = ws();
    let r = sh(w.path(), "cat /proc/self/mountinfo");
    assert_eq!(r.code, 0, "{r:?}");
    let dir = d.path().display().to_string();
    assert!(
        !r.stdout.contains(&dir),
        "secret dir visible in mountinfo: {}",
        r.stdout
    );
    assert!(
        !r.stdout.contains(" /root "),
        "host home in mountinfo: {}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("/oldroot"),
        "staging root left behind: {}",
        r.stdout
    );
}

#[test]
fn etc_holds_no_host_credentials() {
    need_sandbox!();
    let w = ws();
    let r = sh(
        w.path(),
        "ls /etc; echo ---; cat /etc/passwd; cat /etc/shadow /etc/gshadow /etc/sudoers /etc/ssh/ssh_host_rsa_key; echo done",
    );
    assert!(r.stdout.contains("done"), "{r:?}");
    for f in ["shadow", "gshadow", "sudoers", "ssh\n", "machine-id"] {
        assert!(
            !r.stdout.split("---").next().unwrap().contains(f),
            "/etc/{f} present: {r:?}"
        );
    }
    let host_passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if host_passwd.contains("daemon:") {
        assert!(!r.stdout.contains("daemon:"), "host passwd leaked: {r:?}");
    }
}

#[test]
fn host_directories_are_absent() {
    need_sandbox!();
    let w = ws();
    let r = sh(
        w.path(),
        "for p in /home /root /var /run /sys /boot /mnt /srv /opt /media /var/run/docker.sock /run/user; do test -e $p && echo PRESENT $p; done; echo done",
    );
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!r.stdout.contains("PRESENT"), "{r:?}");
}

#[test]
fn read_only_binds_are_read_only() {
    need_sandbox!();
    let ro = tempfile::tempdir().unwrap();
    std::fs::write(ro.path().join("data"), "original").unwrap();
    let w = ws();
    let ro_s = ro.path().display().to_string();
    let r = exec_in(
        w.path(),
        &["--ro", &ro_s],
        &[
            "/bin/sh",
            "-c",
            &format!(
                "cat {ro_s}/data; echo tampered > {ro_s}/data; rm -f {ro_s}/data; touch {ro_s}/new; echo done"
            ),
        ],
    );
    assert!(
        r.stdout.contains("original") && r.stdout.contains("done"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ro.path().join("data")).unwrap(),
        "original"
    );
    assert!(!ro.path().join("new").exists());
}

// ------------------------------------------------------------------------------------------
// Credentials, environment, descriptors
// ------------------------------------------------------------------------------------------

#[test]
fn host_environment_never_leaks() {
    need_sandbox!();
    let w = ws();
    let out = Command::new(stockade())
        .args(["exec", "--workspace"])
        .arg(w.path())
        .args(["--", "/bin/sh", "-c", "env; cat /proc/1/environ | tr '\\0' '\\n'; cat /proc/self/environ | tr '\\0' '\\n'; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\\0' '\\n'; done"])
        .env("STOCKADE_ESCAPE_SECRET", "ENV-SECRET-VALUE")
        .env("AWS_SECRET_ACCESS_KEY", "AWS-SECRET-VALUE")
        .env("SSH_AUTH_SOCK", "/tmp/agent.sock")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let r: Run = out.into();
    assert_eq!(r.code, 0, "{r:?}");
    for s in [
        "ENV-SECRET-VALUE",
        "AWS-SECRET-VALUE",
        "SSH_AUTH_SOCK",
        "STOCKADE_ESCAPE_SECRET",
    ] {
        assert!(!r.stdout.contains(s), "{s} leaked: {r:?}");
    }
    assert!(r.stdout.contains("PATH="), "{r:?}");
}

#[test]
fn only_allow_listed_and_explicit_env_pass() {
    need_sandbox!();
    let w = ws();
    let r = exec_in(w.path(), &["--env", "FOO=bar"], &["/usr/bin/env"]);
    assert_eq!(r.code, 0, "{r:?}");
    let names: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    for n in &names {
        assert!(
            ["PATH", "HOME", "TERM", "LANG", "FOO"].contains(n),
            "unexpected variable {n}: {r:?}"
        );
    }
    assert!(r.stdout.contains("FOO=bar"));
}

#[test]
fn inherited_descriptors_are_closed() {
    need_sandbox!();
    let (_d, file, content) = plant_secret();
    let w = ws();
    // The shell opens fd 7 and 9 without close-on-exec, then runs stockade: a leaky launcher
    // would hand them to the sandbox.
    let script = format!(
        "exec 7<{} 9>>{}/leak; exec {} exec --workspace {} -- /bin/sh -c 'ls /proc/self/fd; cat <&7; echo pwn >&9; echo done'",
        file.display(),
        file.parent().unwrap().display(),
        stockade().display(),
        w.path().display()
    );
    let r: Run = Command::new("/bin/sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into();
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!r.stdout.contains(&content), "inherited fd readable: {r:?}");
    let fds: Vec<&str> = r
        .stdout
        .lines()
        .take_while(|l| *l != "done")
        .filter(|l| l.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert!(
        fds.iter().all(|f| ["0", "1", "2", "3"].contains(f)),
        "unexpected fds {fds:?}"
    );
    let leak = std::fs::read_to_string(file.parent().unwrap().join("leak")).unwrap_or_default();
    assert!(!leak.contains("pwn"), "wrote through an inherited fd");
}

#[test]
fn host_unix_sockets_unreachable() {
    need_sandbox!();
    use std::os::linux::net::SocketAddrExt;
    let name = format!("stockade-escape-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_l.set_nonblocking(true).unwrap();
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("agent.sock");
    let path_l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    path_l.set_nonblocking(true).unwrap();
    let w = ws();
    let py = format!(
        "import socket\nfor a in ['\\0{name}', '{}']:\n  s=socket.socket(socket.AF_UNIX)\n  try:\n    s.connect(a); print('CONNECTED', a)\n  except OSError as e: print('refused', e)\nprint('done')",
        path.display()
    );
    let r = exec_in(w.path(), &[], &["/usr/bin/python3", "-c", &py]);
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!r.stdout.contains("CONNECTED"), "{r:?}");
    assert!(
        abstract_l.accept().is_err() && path_l.accept().is_err(),
        "host socket got a connection"
    );
}

// ------------------------------------------------------------------------------------------
// Processes
// ------------------------------------------------------------------------------------------

#[test]
fn host_processes_unseen_and_unkillable() {
    need_sandbox!();
    let mut victim = Command::new("/bin/sleep").arg("300").spawn().unwrap();
    let vpid = victim.id();
    let me = std::process::id();
    let w = ws();
    let r = sh(
        w.path(),
        &format!(
            "ls -d /proc/[0-9]* | wc -l; ps -e -o pid,comm; kill -9 {vpid}; kill -9 {me}; kill -9 -1; ls /proc/{vpid} ; echo done"
        ),
    );
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(alive, "host process was killed from the sandbox: {r:?}");
    assert!(r.stdout.contains("done") || r.code == 137, "{r:?}");
    assert!(!r.stdout.contains("sleep"), "host process visible: {r:?}");
    let n: usize = r
        .stdout
        .lines()
        .next()
        .unwrap_or("99")
        .trim()
        .parse()
        .unwrap_or(99);
    assert!(n <= 6, "sandbox sees {n} processes: {r:?}");
}

#[test]
fn worker_is_pid_one_and_tree_dies_with_it() {
    need_sandbox!();
    let w = ws();
    // A daemon that ignores signals and detaches; stockade must still return promptly when
    // the main program exits (PID-namespace teardown kills it).
    let start = std::time::Instant::now();
    let r = sh(
        w.path(),
        "setsid sh -c 'trap \"\" TERM HUP INT; sleep 313.25' >/dev/null 2>&1 & echo $$",
    );
    assert_eq!(r.stdout.trim(), "1", "{r:?}");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "tree outlived the worker"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = Command::new("pgrep")
        .args(["-f", "sleep 313.25"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).trim().is_empty(),
        "sandboxed daemon survived the worker"
    );
}

#[test]
fn wall_time_budget_kills_the_tree() {
    need_sandbox!();
    let w = ws();
    let start = std::time::Instant::now();
    let r = exec_in(
        w.path(),
        &["--wall", "1s"],
        &["/bin/sh", "-c", "sleep 100 & sleep 100"],
    );
    assert_eq!(r.code, 124, "{r:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

// ------------------------------------------------------------------------------------------
// Network (only loopback and namespaces this test creates are ever addressed)
// ------------------------------------------------------------------------------------------

fn primary_ip() -> Option<std::net::IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?; // selects a route; sends nothing
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback()).then_some(ip)
}

#[test]
fn host_tcp_listeners_never_get_a_connection() {
    need_sandbox!();
    let lo = TcpListener::bind("127.0.0.1:0").unwrap();
    lo.set_nonblocking(true).unwrap();
    let mut targets = vec![lo.local_addr().unwrap().to_string()];
    let host = primary_ip().and_then(|ip| TcpListener::bind((ip, 0)).ok());
    if let Some(h) = &host {
        h.set_nonblocking(true).unwrap();
        targets.push(h.local_addr().unwrap().to_string());
    }
    let w = ws();
    let mut py = String::from("import socket\n");
    for t in &targets {
        let (h, p) = t.rsplit_once(':').unwrap();
        py.push_str(&format!(
            "try:\n  socket.create_connection(('{h}', {p}), timeout=1); print('CONNECTED {t}')\nexcept OSError as e: print('refused {t}', e)\n"
        ));
    }
    py.push_str("try:\n  socket.create_connection(('::1', 1), timeout=1)\nexcept OSError as e: print('v6 refused', e)\nprint('done')\n");
    let r = exec_in(w.path(), &[], &["/usr/bin/python3", "-c", &py]);
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!r.stdout.contains("CONNECTED"), "{r:?}");
    assert!(lo.accept().is_err(), "loopback listener got a connection");
    if let Some(h) = host {
        assert!(
            h.accept().is_err(),
            "host-address listener got a connection"
        );
    }
}

#[test]
fn udp_and_dns_fail() {
    need_sandbox!();
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_nonblocking(true).unwrap();
    let port = u.local_addr().unwrap().port();
    let host_u = primary_ip().and_then(|ip| UdpSocket::bind((ip, 0)).ok());
    let host_target = host_u.as_ref().map(|h| h.local_addr().unwrap());
    let w = ws();
    let mut py = format!(
        "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor i in range(5):\n  s.sendto(b'x', ('127.0.0.1', {port}))\n"
    );
    if let Some(t) = host_target {
        py.push_str(&format!("try:\n  s.sendto(b'x', ('{}', {}))\nexcept OSError as e: print('udp host refused', e)\n", t.ip(), t.port()));
    }
    py.push_str("try:\n  print('RESOLVED', socket.getaddrinfo('example.com', 80))\nexcept OSError as e: print('dns failed', e)\nprint('done')\n");
    let r = exec_in(w.path(), &[], &["/usr/bin/python3", "-c", &py]);
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!r.stdout.contains("RESOLVED"), "{r:?}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut b = [0u8; 16];
    assert!(
        u.recv_from(&mut b).is_err(),
        "host udp socket received a datagram"
    );
    if let Some(h) = host_u {
        h.set_nonblocking(true).unwrap();
        assert!(
            h.recv_from(&mut b).is_err(),
            "host-address udp socket received a datagram"
        );
    }
    let g = sh(
        w.path(),
        "getent hosts example.com && echo RESOLVED; cat /proc/net/dev | tail -n +3 | cut -d: -f1",
    );
    assert!(!g.stdout.contains("RESOLVED"), "{g:?}");
    assert_eq!(
        g.stdout.split_whitespace().collect::<Vec<_>>(),
        vec!["lo"],
        "{g:?}"
    );
}
