//! Probed attestation: every protection is claimed only after a canary inside a real sandbox
//! tried the forbidden thing on this host and failed, and the host side saw no effect.
//!
//! [`probe()`] runs once per process (cached) with the current executable as canary, which
//! must call [`crate::canary::run_if_requested`] first thing in `main` (the `stockade` binary
//! does). [`probe_with`] takes an explicit canary binary. Every step is bounded by a timeout:
//! a probe never hangs; a step that times out makes its protections unavailable.
//! [`crate::shared`] shares a successful outcome with later processes of the same boot and
//! host key (ADR-0015).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use stockade_capabilities::{
    BackendIdentity, HostFacts, Protection, ProtectionStatus, SandboxCapabilities,
};

use crate::landlock::LandlockSupport;
use crate::spec::{LaunchSpec, Stdio};

/// Backend name used in attestations and template keys.
pub const BACKEND_NAME: &str = "linux-namespaces";

/// The outcome of one probe: the attestation plus every raw check line (for `--json`).
#[derive(Clone, Debug)]
pub struct ProbeOutcome {
    /// What is attested.
    pub capabilities: SandboxCapabilities,
    /// Raw `area PASS|FAIL detail` lines from the canary and the host-side judge.
    pub checks: Vec<String>,
}

/// Probes once per process with the current executable as canary; later calls return the
/// cached outcome. Covers every protection, resource ceilings included.
pub fn probe() -> ProbeOutcome {
    static CACHE: OnceLock<ProbeOutcome> = OnceLock::new();
    CACHE
        .get_or_init(|| match std::env::current_exe() {
            Ok(exe) => probe_with(&exe),
            Err(e) => failed_outcome(&format!("cannot locate the canary executable: {e}")),
        })
        .clone()
}

/// Like [`probe()`] but without the resource-ceiling canaries (which take the longest): the
/// isolation protections, seccomp, `no_new_privs`, Landlock and the process tree's
/// pid-namespace half are proven; cpu, memory, writable disk and pids are reported
/// unavailable with the reason "not probed". For callers that request no ceiling
/// (`stockade exec` without limit flags). Cached per process.
pub fn probe_isolation() -> ProbeOutcome {
    static CACHE: OnceLock<ProbeOutcome> = OnceLock::new();
    CACHE
        .get_or_init(|| match std::env::current_exe() {
            Ok(exe) => match run_probe(&exe, false) {
                Ok(o) => o,
                Err(e) => failed_outcome(&e),
            },
            Err(e) => failed_outcome(&format!("cannot locate the canary executable: {e}")),
        })
        .clone()
}

fn host_facts() -> HostFacts {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let abi = LandlockSupport::detect().abi;
    let cgroup = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        && std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|s| s.contains("memory"))
    {
        stockade_capabilities::CgroupVersion::V2
    } else if Path::new("/sys/fs/cgroup/memory").is_dir() {
        stockade_capabilities::CgroupVersion::V1
    } else {
        stockade_capabilities::CgroupVersion::None
    };
    HostFacts {
        kernel,
        landlock_abi: u32::try_from(abi).ok().filter(|v| *v > 0),
        cgroup,
    }
}

fn identity() -> BackendIdentity {
    BackendIdentity::new(BACKEND_NAME, env!("CARGO_PKG_VERSION"))
}

fn unavailable(reason: impl Into<String>, remedy: impl Into<String>) -> ProtectionStatus {
    ProtectionStatus::Unavailable {
        reason: reason.into(),
        remedy: remedy.into(),
    }
}

/// Resource ceilings (issue 4): each of cpu, memory, pids and writable-disk is attested only
/// after its own canary hit the limit inside a real sandbox on this host
/// ([`crate::cgroup::attest_ceilings`]). The process tree needs both halves: the PID-namespace
/// teardown proven above and the cgroup kill / wall-time canaries.
fn resource_ceilings(caps: &mut SandboxCapabilities, checks: &mut Vec<(String, bool, String)>) {
    let scratch = std::env::temp_dir();
    let att = crate::cgroup::attest_ceilings(&scratch);
    for line in &att.checks {
        let mut it = line.splitn(3, ' ');
        let area = it.next().unwrap_or("").to_owned();
        let ok = it.next() == Some("PASS");
        checks.push((area, ok, it.next().unwrap_or("").to_owned()));
    }
    for (p, s) in att.statuses {
        caps.set(p, s);
    }
    let tree = match (
        caps.status(Protection::ProcessTree).clone(),
        att.process_tree,
    ) {
        (
            ProtectionStatus::Enforced { evidence: a },
            ProtectionStatus::Enforced { evidence: b },
        ) => ProtectionStatus::Enforced {
            evidence: format!("{a}; {b}"),
        },
        (s @ ProtectionStatus::Unavailable { .. }, _) | (s @ ProtectionStatus::Unknown, _) => s,
        (_, s) => s,
    };
    caps.set(Protection::ProcessTree, tree);
}

fn failed_outcome(reason: &str) -> ProbeOutcome {
    let mut caps = SandboxCapabilities::new(identity(), host_facts());
    for p in Protection::ALL {
        caps.set(p, unavailable(reason, p.default_remedy()));
    }
    ProbeOutcome {
        capabilities: caps,
        checks: vec![format!("probe FAIL {reason}")],
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "stockade-probe-{tag}-{}-{nanos:x}",
            std::process::id()
        ));
        std::fs::create_dir(&p)?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Host-side bait the canary must not reach.
struct Bait {
    tcp_loopback: TcpListener,
    tcp_host: Option<TcpListener>,
    udp_loopback: UdpSocket,
    udp_host: Option<UdpSocket>,
    abstract_listener: Option<(String, UnixListener)>,
}

fn primary_ip() -> Option<IpAddr> {
    // connect() on UDP sends nothing; it only selects the route and source address.
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

impl Bait {
    fn new() -> std::io::Result<Self> {
        let tcp_loopback = TcpListener::bind("127.0.0.1:0")?;
        tcp_loopback.set_nonblocking(true)?;
        let udp_loopback = UdpSocket::bind("127.0.0.1:0")?;
        udp_loopback.set_nonblocking(true)?;
        let ip = primary_ip();
        let tcp_host = ip.and_then(|ip| TcpListener::bind((ip, 0)).ok());
        if let Some(l) = &tcp_host {
            l.set_nonblocking(true)?;
        }
        let udp_host = ip.and_then(|ip| UdpSocket::bind((ip, 0)).ok());
        if let Some(u) = &udp_host {
            u.set_nonblocking(true)?;
        }
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("stockade-probe-{}", std::process::id());
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                .and_then(|a| UnixListener::bind_addr(&a))
                .ok()
                .map(|l| {
                    let _ = l.set_nonblocking(true);
                    (name, l)
                })
        };
        Ok(Bait {
            tcp_loopback,
            tcp_host,
            udp_loopback,
            udp_host,
            abstract_listener,
        })
    }

    /// Host-side judgement: nothing may have arrived.
    fn judge(&self, checks: &mut Vec<(String, bool, String)>) {
        let mut push = |area: &str, ok: bool, d: String| checks.push((area.into(), ok, d));
        let tcp = |l: &TcpListener| matches!(l.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        let udp = |u: &UdpSocket| {
            let mut b = [0u8; 64];
            matches!(u.recv_from(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        };
        push(
            "net",
            tcp(&self.tcp_loopback),
            "host loopback tcp listener saw no connection".into(),
        );
        if let Some(l) = &self.tcp_host {
            push(
                "net",
                tcp(l),
                "host-address tcp listener saw no connection".into(),
            );
        }
        push(
            "net",
            udp(&self.udp_loopback),
            "host loopback udp socket received nothing".into(),
        );
        if let Some(u) = &self.udp_host {
            push(
                "net",
                udp(u),
                "host-address udp socket received nothing".into(),
            );
        }
        if let Some((_, l)) = &self.abstract_listener {
            let ok = matches!(l.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
            push(
                "cred",
                ok,
                "host abstract unix listener saw no connection".into(),
            );
        }
    }
}

fn children_of(pid: i32, out: &mut Vec<(i32, String)>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        for c in list
            .split_whitespace()
            .filter_map(|c| c.parse::<i32>().ok())
        {
            let start = start_time(c).unwrap_or_default();
            out.push((c, start));
            children_of(c, out);
        }
    }
}

fn start_time(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the parenthesised command name.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19).map(str::to_owned)
}

/// Port of the gateway-style listener the probe opens inside the canary's network namespace
/// (the namespace is empty, so any port is free there).
const GATEWAY_PROBE_PORT: u16 = 18_080;

/// Accepts one connection on the in-sandbox listener from the host side, expects `ping`,
/// answers `pong` (bounded by `deadline`).
fn serve_gateway_probe(
    mut listeners: Vec<TcpListener>,
    deadline: Instant,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let l = listeners.pop().ok_or("no listener was handed over")?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (mut conn, _) = loop {
            match l.accept() {
                Ok(c) => break c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err("the canary never connected".into());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        conn.set_nonblocking(false).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 5];
        std::io::Read::read_exact(&mut conn, &mut buf).map_err(|e| e.to_string())?;
        if &buf != b"ping\n" {
            return Err("unexpected request".into());
        }
        conn.write_all(b"pong\n").map_err(|e| e.to_string())
    })
}

/// Runs the full self-test with `canary` as the canary binary.
pub fn probe_with(canary: &Path) -> ProbeOutcome {
    match run_probe(canary, true) {
        Ok(o) => o,
        Err(e) => failed_outcome(&e),
    }
}

fn run_probe(canary: &Path, ceilings: bool) -> Result<ProbeOutcome, String> {
    let canary =
        std::fs::canonicalize(canary).map_err(|e| format!("canary {}: {e}", canary.display()))?;
    let secret_dir = TempDir::new("secret").map_err(|e| format!("temp dir: {e}"))?;
    let ws = TempDir::new("ws").map_err(|e| format!("temp dir: {e}"))?;
    let secret = secret_dir.0.join("secret");
    std::fs::write(
        &secret,
        format!("stockade-probe-secret-{}", std::process::id()),
    )
    .map_err(|e| format!("plant secret: {e}"))?;
    let bait = Bait::new().map_err(|e| format!("host bait listeners: {e}"))?;
    let ll = LandlockSupport::detect();
    let host_home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());

    let mut args: Vec<std::ffi::OsString> = vec![crate::canary::ARG.into(), "probe".into()];
    let mut kv = |k: &str, v: String| args.push(format!("{k}={v}").into());
    kv("secret", secret.display().to_string());
    kv("secret_dir", secret_dir.0.display().to_string());
    kv("workspace", ws.0.display().to_string());
    kv("host_home", host_home);
    kv("env", "PATH,HOME".into());
    kv(
        "tcp_loopback",
        bait.tcp_loopback
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
    );
    if let Some(l) = &bait.tcp_host {
        kv(
            "tcp_host",
            l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        );
    }
    kv(
        "udp_loopback",
        bait.udp_loopback
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
    );
    if let Some(u) = &bait.udp_host {
        kv(
            "udp_host",
            u.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        );
    }
    if let Some((name, _)) = &bait.abstract_listener {
        kv("abstract", name.clone());
    }
    kv(
        "landlock_tcp",
        if ll.tcp() { "1".into() } else { "0".into() },
    );
    kv("tree", "1".into());
    kv("gateway", GATEWAY_PROBE_PORT.to_string());
    // The isolated input mount: a host directory bound read-only outside the workspace, as the
    // backend does for launch input files (a `file` prompt).
    let input_dir = TempDir::new("input").map_err(|e| format!("temp dir: {e}"))?;
    let input_nonce = format!("stockade-probe-input-{}", std::process::id());
    std::fs::write(input_dir.0.join("prompt"), &input_nonce)
        .map_err(|e| format!("plant input: {e}"))?;
    kv("input", input_dir.0.display().to_string());
    kv("input_nonce", input_nonce.clone());

    let (out_r, out_w) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let (in_r, mut in_w) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let err_w = out_w.try_clone().map_err(|e| format!("pipe: {e}"))?;
    let mut spec = LaunchSpec::new(canary.clone().into_os_string(), args, &ws.0)
        .with_ro(canary.clone())
        .with_ro(input_dir.0.clone())
        .with_env("HOME", crate::SANDBOX_HOME)
        .with_env("PATH", crate::DEFAULT_PATH)
        .with_listener(GATEWAY_PROBE_PORT)
        .with_stdio(Stdio::Fds {
            stdin: Some(OwnedFd::from(in_r)),
            stdout: Some(OwnedFd::from(out_w)),
            stderr: Some(OwnedFd::from(err_w)),
        });
    spec.setup_timeout = Duration::from_secs(10);
    let started = Instant::now();
    let mut worker =
        crate::launch(spec).map_err(|e| format!("cannot start the canary sandbox: {e}"))?;
    // The gateway half: serve the in-sandbox listener from the host, as the gateway would.
    let gateway_served =
        serve_gateway_probe(worker.take_listeners(), started + Duration::from_secs(20));

    // Read the canary's report in a helper thread so every wait is bounded.
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(out_r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = started + Duration::from_secs(20);
    let mut lines = Vec::new();
    let mut ready = false;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l == "READY" => {
                ready = true;
                break;
            }
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    let mut checks: Vec<(String, bool, String)> = Vec::new();
    for l in &lines {
        let mut it = l.splitn(4, ' ');
        if it.next() != Some("CHECK") {
            continue;
        }
        let area = it.next().unwrap_or("").to_owned();
        let ok = it.next() == Some("PASS");
        checks.push((area, ok, it.next().unwrap_or("").to_owned()));
    }

    // Process tree: the detached daemon must die with the worker.
    let mut descendants = Vec::new();
    children_of(worker.pid(), &mut descendants);
    let pid = worker.pid();
    let _ = worker.kill();
    let _ = in_w.write_all(b"x");
    let exited = worker.wait_timeout(Duration::from_secs(5)).ok().flatten();
    let mut survivors: Vec<i32>;
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        survivors = descendants
            .iter()
            .filter(|(p, st)| start_time(*p).as_deref() == Some(st.as_str()))
            .map(|(p, _)| *p)
            .collect::<Vec<_>>();
        if survivors.is_empty() || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let tree_ok = ready && exited.is_some() && !descendants.is_empty() && survivors.is_empty();
    checks.push((
        "tree".into(),
        tree_ok,
        format!(
            "worker pid {pid} (pid 1 of its namespace) killed; {} descendant(s) incl. a setsid daemon, survivors {survivors:?}",
            descendants.len()
        ),
    ));
    if !ready {
        checks.push((
            "probe".into(),
            false,
            "canary did not finish its checks within 20s".into(),
        ));
    }
    bait.judge(&mut checks);
    match gateway_served.join() {
        Ok(Ok(())) => checks.push((
            "gateway".into(),
            true,
            "host side served the in-sandbox listener".into(),
        )),
        Ok(Err(e)) => checks.push((
            "gateway".into(),
            false,
            format!("host side could not serve the in-sandbox listener: {e}"),
        )),
        Err(_) => checks.push((
            "gateway".into(),
            false,
            "gateway probe thread panicked".into(),
        )),
    }
    let input_intact = std::fs::read(input_dir.0.join("prompt"))
        .is_ok_and(|b| b == input_nonce.as_bytes())
        && !input_dir.0.join("written-from-sandbox").exists();
    checks.push((
        "input".into(),
        input_intact,
        "host input directory unchanged".into(),
    ));
    let wrote = secret_dir.0.join("written-from-sandbox").exists();
    checks.push(("fs".into(), !wrote, "host secret dir unchanged".into()));

    Ok(assemble(checks, ll, ceilings))
}

fn assemble(
    mut checks: Vec<(String, bool, String)>,
    ll: LandlockSupport,
    ceilings: bool,
) -> ProbeOutcome {
    let mut by_area: BTreeMap<&str, (usize, Vec<&str>)> = BTreeMap::new();
    let mut total: BTreeMap<&str, usize> = BTreeMap::new();
    for (area, ok, detail) in &checks {
        *total.entry(area.as_str()).or_default() += 1;
        let e = by_area.entry(area.as_str()).or_default();
        if *ok {
            e.0 += 1;
        } else {
            e.1.push(detail.as_str());
        }
    }
    let probe_failed = by_area.get("probe").is_some_and(|(_, f)| !f.is_empty());
    let status = |area: &str, what: &str, remedy: &str| -> ProtectionStatus {
        let n = total.get(area).copied().unwrap_or(0);
        match by_area.get(area) {
            Some((passed, failed)) if failed.is_empty() && n > 0 && !probe_failed => {
                ProtectionStatus::Enforced {
                    evidence: format!("canary in a live sandbox: {passed}/{n} {what} checks held"),
                }
            }
            Some((_, failed)) if !failed.is_empty() => {
                unavailable(format!("self-test failed: {}", failed.join("; ")), remedy)
            }
            _ => unavailable("self-test did not run to completion", remedy),
        }
    };
    let mut caps = SandboxCapabilities::new(identity(), host_facts());
    caps.set(
        Protection::FilesystemIsolation,
        status(
            "fs",
            "filesystem",
            Protection::FilesystemIsolation.default_remedy(),
        ),
    );
    let cred = match (
        status(
            "cred",
            "credential",
            Protection::CredentialIsolation.default_remedy(),
        ),
        caps.status(Protection::FilesystemIsolation).is_enforced(),
    ) {
        (s @ ProtectionStatus::Enforced { .. }, true) => s,
        (ProtectionStatus::Enforced { .. }, false) => unavailable(
            "credential isolation depends on filesystem isolation, which is not proven",
            Protection::CredentialIsolation.default_remedy(),
        ),
        (s, _) => s,
    };
    caps.set(Protection::CredentialIsolation, cred);
    let net = status(
        "net",
        "network",
        Protection::NetworkEnforcement.default_remedy(),
    );
    caps.set(Protection::NetworkEnforcement, net.clone());
    caps.set(Protection::NetworkDenyAll, net);
    let gateway = match (
        status(
            "gateway",
            "gateway-listener",
            Protection::NetworkGatewayOrigins.default_remedy(),
        ),
        caps.is_enforced(Protection::NetworkEnforcement),
    ) {
        (ProtectionStatus::Enforced { evidence }, true) => ProtectionStatus::Enforced {
            evidence: format!(
                "{evidence}: a listener created inside the sandbox network namespace was served from the host and reached by the canary, while direct tcp, udp and dns stayed denied{}",
                if ll.tcp() {
                    " and landlock limited tcp connect to the listener ports"
                } else {
                    ""
                }
            ),
        },
        (ProtectionStatus::Enforced { .. }, false) => unavailable(
            "gateway listeners work, but network enforcement is not proven",
            Protection::NetworkGatewayOrigins.default_remedy(),
        ),
        (s, _) => s,
    };
    caps.set(Protection::NetworkGatewayOrigins, gateway);
    caps.set(
        Protection::SeccompFilter,
        status(
            "seccomp",
            "seccomp",
            Protection::SeccompFilter.default_remedy(),
        ),
    );
    caps.set(
        Protection::NoNewPrivs,
        status(
            "nnp",
            "no_new_privs and capability",
            Protection::NoNewPrivs.default_remedy(),
        ),
    );
    let landlock = if ll.fs() {
        match status(
            "landlock",
            "landlock",
            Protection::Landlock.default_remedy(),
        ) {
            ProtectionStatus::Enforced { evidence } => ProtectionStatus::Enforced {
                evidence: format!(
                    "{evidence} (abi {}: filesystem{}{})",
                    ll.abi,
                    if ll.tcp() { ", tcp connect" } else { "" },
                    if ll.scopes() {
                        ", abstract-unix and signal scopes"
                    } else {
                        ""
                    }
                ),
            },
            s => s,
        }
    } else {
        unavailable(
            "the kernel offers no landlock abi",
            Protection::Landlock.default_remedy(),
        )
    };
    caps.set(Protection::Landlock, landlock);
    caps.set(
        Protection::ProcessTree,
        match status(
            "tree",
            "process-tree",
            Protection::ProcessTree.default_remedy(),
        ) {
            ProtectionStatus::Enforced { .. } => ProtectionStatus::Enforced {
                evidence: checks
                    .iter()
                    .rev()
                    .find(|(a, _, _)| a == "tree")
                    .map(|(_, _, d)| format!("pid-namespace teardown: {d}"))
                    .unwrap_or_default(),
            },
            s => s,
        },
    );
    let input = match (
        status(
            "input",
            "isolated-input-mount",
            Protection::IsolatedInputMount.default_remedy(),
        ),
        caps.is_enforced(Protection::FilesystemIsolation),
    ) {
        (ProtectionStatus::Enforced { evidence }, true) => ProtectionStatus::Enforced {
            evidence: format!(
                "{evidence}: a host directory bound read-only outside the workspace was readable, not writable, and unchanged on the host afterwards"
            ),
        },
        (ProtectionStatus::Enforced { .. }, false) => unavailable(
            "the input mount held, but filesystem isolation is not proven",
            Protection::IsolatedInputMount.default_remedy(),
        ),
        (s, _) => s,
    };
    caps.set(Protection::IsolatedInputMount, input);
    if ceilings {
        resource_ceilings(&mut caps, &mut checks);
    } else {
        for p in [
            Protection::Cpu,
            Protection::Memory,
            Protection::WritableDisk,
            Protection::Pids,
        ] {
            caps.set(
                p,
                unavailable(
                    "not probed: this caller requested no resource ceiling",
                    p.default_remedy(),
                ),
            );
        }
    }
    let lines = checks
        .iter()
        .map(|(a, ok, d)| format!("{a} {} {d}", if *ok { "PASS" } else { "FAIL" }))
        .collect();
    ProbeOutcome {
        capabilities: caps,
        checks: lines,
    }
}
