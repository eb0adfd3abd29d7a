//! End to end: a process inside the Linux sandbox reaches an allowed origin only through the
//! host-side gateway, and the local upstream sees a credential the process never saw.
//!
//! The sandbox (namespaces, Landlock, the listener inside the sandbox's network namespace) is
//! `stockade-sandbox-linux`; the gateway is `stockade-gateway`. Traffic stays on loopback: the
//! upstream listens on the host's 127.0.0.1, which the sandbox cannot reach directly.

// Helpers outside #[test] functions (the upstream) unwrap too.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stockade_gateway::{
    BlockingGateway, Decision, Endpoint, GatewayConfig, HeaderName, Route, SecretSource,
    env_for_sandbox,
};
use stockade_sandbox_linux::{DEFAULT_PATH, LaunchSpec, launch};

const SECRET: &str = "sk-e2e-gateway-5be2c1d0-never-inside";
const PORT: u16 = 41000;

/// A tiny HTTP/1.1 upstream recording every request head it receives.
fn upstream() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h2 = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let heads = h2.clone();
            std::thread::spawn(move || {
                let mut w = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                heads.lock().unwrap().push(head);
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: close\r\n\r\nupstream-ok\n");
            });
        }
    });
    (addr, heads)
}

fn skip_or_fail(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "gateway e2e cannot run under CI: {why}"
    );
    eprintln!("SKIPPED gateway e2e: {why}");
}

#[test]
fn sandboxed_process_reaches_only_the_gateway_and_never_sees_the_credential() {
    if !std::path::Path::new("/usr/bin/curl").exists() {
        return skip_or_fail("/usr/bin/curl is not installed");
    }
    let (up_addr, heads) = upstream();
    let secrets = tempfile::tempdir().unwrap();
    let secret_path = secrets.path().join("openai-auth");
    std::fs::write(&secret_path, format!("Bearer {SECRET}\n")).unwrap();
    let workspace = tempfile::tempdir().unwrap();

    let route = Route::new(
        "e2e",
        format!("http://127.0.0.1:{}", up_addr.port())
            .parse()
            .unwrap(),
    )
    .inject(
        HeaderName::from_static("authorization"),
        SecretSource::File(secret_path.clone()),
    )
    .env("OPENAI_BASE_URL", "/v1");
    let planned = [Endpoint {
        rule_id: "e2e".into(),
        origin: route.origin.clone(),
        local_addr: SocketAddr::from(([127, 0, 0, 1], PORT)),
    }];
    let script = format!(
        "curl -sS -m 5 -H 'Authorization: Bearer worker-fake' \"$OPENAI_BASE_URL/models\" > via-gateway.txt 2>&1; echo \"rc=$?\" >> via-gateway.txt\n\
         curl -sS -m 3 http://127.0.0.1:{up}/direct > direct.txt 2>&1; echo \"rc=$?\" >> direct.txt\n\
         curl -sS -m 3 -x \"$STOCKADE_ORIGIN_E2E\" http://127.0.0.1:{up}/proxied > proxied.txt 2>&1; echo \"rc=$?\" >> proxied.txt\n\
         cat {secret} > secret-read.txt 2>&1; echo \"rc=$?\" >> secret-read.txt\n\
         env > env.txt; cat /proc/self/environ > environ.txt\n\
         for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat \"$f\"; echo; done > proc.txt 2>/dev/null; ls /proc > proc-list.txt\n",
        up = up_addr.port(),
        secret = secret_path.display(),
    );
    let mut spec = LaunchSpec::new(
        "/bin/sh",
        vec!["-c".into(), script.into()],
        workspace.path(),
    )
    .with_env("PATH", DEFAULT_PATH)
    .with_listener(PORT);
    for (k, v) in env_for_sandbox(std::slice::from_ref(&route), &planned) {
        spec = spec.with_env(k, v);
    }
    let mut worker = match launch(spec) {
        Ok(w) => w,
        Err(e) => return skip_or_fail(&format!("the sandbox cannot launch here: {e}")),
    };
    let listeners = worker.take_listeners();
    assert_eq!(listeners.len(), 1);
    let listener = listeners.into_iter().next().unwrap();
    assert_eq!(listener.local_addr().unwrap().port(), PORT);
    let gateway = BlockingGateway::start(
        GatewayConfig::new(vec![route]),
        vec![(listener, "e2e".into())],
    )
    .unwrap();
    let status = worker.wait_timeout(Duration::from_secs(60)).unwrap();
    if status.is_none() {
        let _ = worker.kill();
        panic!("sandboxed script did not finish");
    }
    let audit = gateway.shutdown();

    let read = |name: &str| {
        std::fs::read_to_string(workspace.path().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let via = read("via-gateway.txt");
    assert!(
        via.contains("upstream-ok") && via.contains("rc=0"),
        "through the gateway: {via}"
    );
    let direct = read("direct.txt");
    assert!(
        !direct.contains("upstream-ok") && !direct.contains("rc=0"),
        "direct connection must fail: {direct}"
    );
    let proxied = read("proxied.txt");
    assert!(
        !proxied.contains("upstream-ok"),
        "the gateway is not a forward proxy: {proxied}"
    );
    let secret_read = read("secret-read.txt");
    assert!(
        !secret_read.contains(SECRET) && !secret_read.contains("rc=0"),
        "host secret file visible: {secret_read}"
    );

    let heads = heads.lock().unwrap().clone();
    assert_eq!(
        heads.len(),
        1,
        "exactly the gateway's request reached the upstream: {heads:?}"
    );
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("get /v1/models http/1.1"), "{head}");
    assert!(
        head.contains(&format!(
            "authorization: bearer {}",
            SECRET.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(!head.contains("worker-fake"), "{head}");

    // The credential is nowhere the process could see or write.
    for entry in std::fs::read_dir(workspace.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }
    assert!(read("env.txt").contains(&format!("OPENAI_BASE_URL=http://127.0.0.1:{PORT}/v1")));
    assert!(
        read("proc.txt").contains("OPENAI_BASE_URL"),
        "the /proc scan read the sandbox's own processes"
    );
    let json = serde_json::to_string(&audit).unwrap();
    assert!(!json.contains(SECRET));
    assert!(
        audit
            .iter()
            .any(|r| r.decision == Decision::Allowed && r.path == "/v1/models" && r.status == 200),
        "{audit:?}"
    );
    assert!(
        audit.iter().any(|r| r.decision == Decision::Denied
            && r.reason.as_deref() == Some("absolute_form_target")),
        "proxy attempt audited: {audit:?}"
    );
}

#[test]
fn stockade_exec_allow_origin_injects_a_header_the_program_never_sees() {
    if !std::path::Path::new("/usr/bin/curl").exists() {
        return skip_or_fail("/usr/bin/curl is not installed");
    }
    let (up_addr, heads) = upstream();
    let origin = format!("http://127.0.0.1:{}", up_addr.port());
    let workspace = tempfile::tempdir().unwrap();
    let report = workspace.path().join("report.json");
    let script = format!(
        "curl -sS -m 5 \"$STOCKADE_ORIGIN_ORIGIN_1/v1/models\"; echo \"rc=$?\"; \
         curl -sS -m 3 {origin}/direct || echo direct-failed; \
         env; cat /proc/self/environ"
    );
    let out = std::process::Command::new(crate::escape::stockade())
        .current_dir(workspace.path())
        .env("STOCKADE_E2E_AUTH", format!("Bearer {SECRET}"))
        .args([
            "exec",
            "--allow-origin",
            &origin,
            "--origin-header",
            &origin,
            "authorization=env:STOCKADE_E2E_AUTH",
            "--json-report",
        ])
        .arg(&report)
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("refused") && !out.status.success() && heads.lock().unwrap().is_empty() {
        return skip_or_fail(&format!("stockade exec refused here: {stderr}"));
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("upstream-ok") && stdout.contains("rc=0"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("direct-failed"),
        "direct egress must fail: {stdout}"
    );
    assert!(
        !stdout.contains(SECRET) && !stderr.contains(SECRET),
        "the credential reached the program or the terminal"
    );
    assert!(
        stderr.contains(&format!(
            "stockade: {origin} is served at http://127.0.0.1:41000"
        )),
        "{stderr}"
    );
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].to_ascii_lowercase().contains(&format!(
            "authorization: bearer {}",
            SECRET.to_ascii_lowercase()
        )),
        "{heads:?}"
    );
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(!report.contains(SECRET));
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        v["gateway"]["requests"][0]["path"], "/v1/models",
        "{report}"
    );

    // A header for an origin that is not allowed is a usage error before anything runs.
    let out = std::process::Command::new(crate::escape::stockade())
        .current_dir(workspace.path())
        .args([
            "exec",
            "--origin-header",
            &origin,
            "authorization=env:STOCKADE_E2E_AUTH",
            "--",
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not allowed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
