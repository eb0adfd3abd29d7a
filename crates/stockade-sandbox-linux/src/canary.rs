//! The canary: a program run *inside* a real sandbox by [`crate::probe()`] (and by the
//! adversarial suite) that tries forbidden things and reports what the kernel answered.
//!
//! A binary that wants to serve as canary calls [`run_if_requested`] first thing in `main`
//! (the `stockade` binary does). The canary prints one line per check:
//! `CHECK <area> <PASS|FAIL> <detail>`; the probe on the host side parses these lines and
//! also judges host-side effects itself (listeners untouched, datagrams not received).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use crate::sys::Attempt;

/// First argument that selects canary mode.
pub const ARG: &str = "__stockade-canary";

/// If `argv[1]` is [`ARG`], runs the canary and exits; otherwise returns.
pub fn run_if_requested() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(ARG) {
        return;
    }
    let code = match args.get(2).map(String::as_str) {
        Some("syscalls") => syscalls(),
        Some("probe") => probe_checks(&args[3..]),
        _ => {
            eprintln!("usage: {ARG} syscalls | probe KEY=VALUE...");
            2
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

fn check(area: &str, ok: bool, detail: impl std::fmt::Display) -> bool {
    println!("CHECK {area} {} {detail}", if ok { "PASS" } else { "FAIL" });
    ok
}

fn errno_name(e: i32) -> String {
    match e {
        0 => "success".into(),
        libc::EPERM => "EPERM".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EACCES => "EACCES".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EROFS => "EROFS".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EBADF => "EBADF".into(),
        libc::ESRCH => "ESRCH".into(),
        libc::ECONNREFUSED => "ECONNREFUSED".into(),
        libc::ENETUNREACH => "ENETUNREACH".into(),
        other => format!("errno {other}"),
    }
}

/// Tries every forbidden system call; exit 0 only when each was refused as expected.
fn syscalls() -> i32 {
    let mut all = true;
    for (a, name, want) in Attempt::ALL {
        let got = a.run();
        all &= check(
            "seccomp",
            got == want,
            format!("{name} -> {} (want {})", errno_name(got), errno_name(want)),
        );
    }
    if all { 0 } else { 1 }
}

fn io_errno(e: &std::io::Error) -> String {
    e.raw_os_error().map_or_else(|| e.to_string(), errno_name)
}

/// One thing the canary must not manage: PASS, naming the errno, when `attempt` failed.
fn denied<T>(
    area: &str,
    attempt: std::io::Result<T>,
    done: impl std::fmt::Display,
    refused: impl std::fmt::Display,
) -> bool {
    match attempt {
        Ok(_) => check(area, false, done),
        Err(e) => check(area, true, format!("{refused} ({})", io_errno(&e))),
    }
}

fn status_field(name: &str) -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    })
}

fn probe_checks(args: &[String]) -> i32 {
    let get = |k: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
            .unwrap_or("")
            .to_owned()
    };
    let mut all = true;

    // --- filesystem isolation ---
    let secret = get("secret");
    all &= denied(
        "fs",
        std::fs::read(&secret),
        format!("read planted host file {secret}"),
        format!("planted host file {secret} unreadable"),
    );
    let secret_dir = get("secret_dir");
    let escape = format!("{secret_dir}/written-from-sandbox");
    all &= denied(
        "fs",
        std::fs::write(&escape, b"x"),
        format!("wrote {escape}"),
        "write into host dir refused",
    );
    for p in [
        "/usr/stockade-canary",
        "/etc/stockade-canary",
        "/stockade-canary",
    ] {
        all &= denied(
            "fs",
            std::fs::write(p, b"x"),
            format!("wrote {p}"),
            format!("write {p} refused"),
        );
    }
    let ws = get("workspace");
    let probe_file = format!("{ws}/.stockade-canary");
    match std::fs::write(&probe_file, b"ok").and_then(|()| std::fs::remove_file(&probe_file)) {
        Ok(()) => all &= check("fs", true, "workspace writable (positive control)"),
        Err(e) => all &= check("fs", false, format!("workspace not writable: {e}")),
    }
    for p in [
        "/etc/shadow",
        "/etc/gshadow",
        "/root",
        "/home",
        "/var",
        "/run",
        "/sys",
        "/boot",
    ] {
        let exists = std::fs::symlink_metadata(p).is_ok();
        all &= check(
            "fs",
            !exists,
            format!("{p} {}", if exists { "visible" } else { "absent" }),
        );
    }

    // --- credential isolation ---
    let host_home = get("host_home");
    if !host_home.is_empty() && host_home != ws && !ws.starts_with(&format!("{host_home}/")) {
        let visible = std::fs::read_dir(&host_home).is_ok();
        all &= check(
            "cred",
            !visible,
            format!(
                "host home {host_home} {}",
                if visible { "visible" } else { "absent" }
            ),
        );
    }
    let allowed: Vec<String> = get("env")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    let extra: Vec<&String> = names.iter().filter(|n| !allowed.contains(n)).collect();
    all &= check(
        "cred",
        extra.is_empty(),
        format!("environment names {names:?} (unexpected: {extra:?})"),
    );
    let mut leaked = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            if let Ok(env) = std::fs::read(format!("/proc/{name}/environ")) {
                for var in env.split(|&b| b == 0).filter(|v| !v.is_empty()) {
                    let k =
                        String::from_utf8_lossy(var.split(|&b| b == b'=').next().unwrap_or(b""))
                            .into_owned();
                    if !allowed.contains(&k) {
                        leaked.push(format!("{name}:{k}"));
                    }
                }
            }
        }
    }
    all &= check(
        "cred",
        leaked.is_empty(),
        format!("/proc/*/environ holds only allow-listed names (extra: {leaked:?})"),
    );
    let abstract_name = get("abstract");
    if !abstract_name.is_empty() {
        use std::os::linux::net::SocketAddrExt;
        let r = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .and_then(|a| std::os::unix::net::UnixStream::connect_addr(&a));
        all &= check(
            "cred",
            r.is_err(),
            format!(
                "host abstract unix socket @{abstract_name} {}",
                r.as_ref().map_or_else(io_errno, |_| "CONNECTED".into())
            ),
        );
    }

    // --- network ---
    for key in ["tcp_loopback", "tcp_host"] {
        let addr = get(key);
        if let Ok(a) = addr.parse::<SocketAddr>() {
            let r = TcpStream::connect_timeout(&a, Duration::from_millis(500));
            all &= check(
                "net",
                r.is_err(),
                format!(
                    "tcp connect {a}: {}",
                    r.as_ref().map_or_else(io_errno, |_| "CONNECTED".into())
                ),
            );
        }
    }
    for key in ["udp_loopback", "udp_host"] {
        let addr = get(key);
        if let Ok(a) = addr.parse::<SocketAddr>() {
            // Sending may "succeed" locally (loopback of the sandbox): the host side judges receipt.
            let r = UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"stockade-canary", a));
            check(
                "net",
                true,
                format!(
                    "udp send {a}: {} (host judges receipt)",
                    r.as_ref().map_or_else(io_errno, |_| "sent".into())
                ),
            );
        }
    }
    let dns = std::net::ToSocketAddrs::to_socket_addrs("stockade-probe.invalid:80");
    all &= check(
        "net",
        dns.is_err(),
        format!(
            "name resolution {}",
            if dns.is_err() { "fails" } else { "RESOLVED" }
        ),
    );
    let ifaces = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let names: Vec<&str> = ifaces
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    all &= check("net", names == ["lo"], format!("interfaces {names:?}"));

    // --- isolated input mount: readable, not writable, outside the workspace ---
    let input = get("input");
    if !input.is_empty() {
        let prompt = format!("{input}/prompt");
        let nonce = get("input_nonce");
        match std::fs::read(&prompt) {
            Ok(b) => {
                all &= check(
                    "input",
                    b == nonce.as_bytes(),
                    format!(
                        "read {prompt}: content matches the host's nonce: {}",
                        b == nonce.as_bytes()
                    ),
                )
            }
            Err(e) => all &= check("input", false, format!("read {prompt}: {}", io_errno(&e))),
        }
        all &= denied(
            "input",
            std::fs::OpenOptions::new().write(true).open(&prompt),
            format!("opened {prompt} for writing"),
            format!("{prompt} not writable"),
        );
        let extra = format!("{input}/written-from-sandbox");
        all &= denied(
            "input",
            std::fs::write(&extra, b"x"),
            format!("created {extra}"),
            format!("cannot create files in {input}"),
        );
        let workspace = get("workspace");
        let outside =
            !workspace.is_empty() && !std::path::Path::new(&input).starts_with(&workspace);
        all &= check(
            "input",
            outside,
            format!("input mount {input} is outside the workspace {workspace}"),
        );
    }

    // --- gateway listener: the one port the host serves inside our network namespace ---
    if let Ok(port) = get("gateway").parse::<u16>() {
        let r = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(2),
        )
        .and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"ping\n")?;
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf)?;
            Ok(buf)
        });
        let ok = matches!(&r, Ok(b) if b == b"pong\n");
        all &= check(
            "gateway",
            ok,
            format!(
                "127.0.0.1:{port} (gateway listener) {}",
                match &r {
                    Ok(_) => "answered by the host side".into(),
                    Err(e) => io_errno(e),
                }
            ),
        );
    }

    // --- seccomp ---
    let mut sc_ok = true;
    let mut refused = 0;
    for (a, name, want) in Attempt::ALL {
        let got = a.run();
        if got == want {
            refused += 1;
        } else {
            sc_ok = false;
            check(
                "seccomp",
                false,
                format!("{name} -> {} (want {})", errno_name(got), errno_name(want)),
            );
        }
    }
    all &= check(
        "seccomp",
        sc_ok,
        format!(
            "{refused}/{} forbidden calls refused by the filter",
            Attempt::ALL.len()
        ),
    );
    let mode = status_field("Seccomp").unwrap_or_default();
    all &= check("seccomp", mode == "2", format!("Seccomp: {mode}"));

    // --- no_new_privs and capabilities ---
    let nnp = status_field("NoNewPrivs").unwrap_or_default();
    all &= check("nnp", nnp == "1", format!("NoNewPrivs: {nnp}"));
    for f in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let v = status_field(f).unwrap_or_default();
        all &= check(
            "nnp",
            v.chars().all(|c| c == '0') && !v.is_empty(),
            format!("{f}: {v}"),
        );
    }

    // --- landlock ---
    // /proc/self/comm is writable by its owner; only Landlock (procfs read-only) refuses it.
    match std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/comm")
        .and_then(|mut f| f.write_all(b"canary"))
    {
        Ok(()) => {
            all &= check(
                "landlock",
                false,
                "wrote /proc/self/comm (landlock did not refuse)",
            )
        }
        Err(e) => {
            all &= check(
                "landlock",
                e.raw_os_error() == Some(libc::EACCES),
                format!("write /proc/self/comm refused ({})", io_errno(&e)),
            )
        }
    }
    if get("landlock_tcp") == "1" {
        // A listener of our own inside the sandbox: connecting must still be refused.
        match TcpListener::bind("127.0.0.1:0") {
            Ok(l) => {
                let a = l.local_addr().ok();
                let r = a.map(|a| TcpStream::connect_timeout(&a, Duration::from_millis(500)));
                let ok = matches!(&r, Some(Err(e)) if e.raw_os_error() == Some(libc::EACCES));
                all &= check(
                    "landlock",
                    ok,
                    format!(
                        "tcp connect to own listener {a:?}: {}",
                        match &r {
                            Some(Err(e)) => io_errno(e),
                            Some(Ok(_)) => "CONNECTED".into(),
                            None => "no address".into(),
                        }
                    ),
                );
            }
            Err(e) => {
                all &= check(
                    "landlock",
                    false,
                    format!("bind inside sandbox failed: {e}"),
                )
            }
        }
    }

    // --- process tree: leave a detached daemon behind, then wait for the host to kill us ---
    if get("tree") == "1" {
        match crate::sys::spawn_detached_daemon() {
            Ok(()) => {
                check(
                    "tree",
                    true,
                    "spawned a setsid daemon ignoring TERM/HUP/INT",
                );
            }
            Err(e) => all &= check("tree", false, format!("could not spawn daemon: {e}")),
        }
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut b = [0u8; 1];
        let _ = std::io::stdin().read(&mut b);
    }
    if all { 0 } else { 1 }
}
