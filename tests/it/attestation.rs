//! The attestation shared within a boot (ADR-0015), driven through `stockade exec` and
//! `stockade probe` as a user would, with a private store per test (`STOCKADE_ATTESTATION_DIR`).
//! Judged from the host: which source the report names, what the store holds, what stderr warns.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::escape::{isolation_available, stockade, ws};

/// `stockade exec --json-report` of `/bin/true` with the store at `store`: (exit code, report,
/// stderr).
fn exec_true(store: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let ws = ws();
    let report = ws.path().join("report.json");
    let out = Command::new(stockade())
        .env("STOCKADE_ATTESTATION_DIR", store)
        .arg("exec")
        .arg("--workspace")
        .arg(ws.path())
        .arg("--json-report")
        .arg(&report)
        .args(extra)
        .args(["--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .expect("run stockade exec");
    let v = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn store() -> tempfile::TempDir {
    let t = tempfile::Builder::new()
        .prefix("stockade-attest-it")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    t
}

fn edit(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, serde_json::to_string(&v).unwrap()).unwrap();
}

#[test]
fn exec_shares_a_live_probe_and_the_next_call_reuses_it() {
    if !isolation_available() {
        return;
    }
    let s = store();
    let (code, first, err) = exec_true(s.path(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first["attestation"]["source"], "live", "{first}");
    let record = s.path().join("isolation.json");
    assert_eq!(
        first["attestation"]["shared_at"].as_str(),
        record.to_str(),
        "{first}"
    );
    let mode = std::fs::metadata(&record).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the record must be private");
    let (code, second, err) = exec_true(s.path(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second["attestation"]["source"], "shared", "{second}");
    assert_eq!(second["attestation"]["scope"], "isolation", "{second}");
    // --live-probe proves again and refreshes the record.
    let (code, third, err) = exec_true(s.path(), &["--live-probe"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(third["attestation"]["source"], "live", "{third}");
    // An isolation record never answers a request for a ceiling.
    let (code, limited, err) = exec_true(s.path(), &["--pids", "64"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(limited["attestation"]["source"], "live", "{limited}");
    assert!(s.path().join("full.json").exists());
    let (_, again, _) = exec_true(s.path(), &["--pids", "64"]);
    assert_eq!(again["attestation"]["source"], "shared", "{again}");
    assert_eq!(again["attestation"]["scope"], "full", "{again}");
}

#[test]
fn stockade_probe_always_probes_live_and_refreshes_the_record() {
    if !isolation_available() {
        return;
    }
    let s = store();
    let out = Command::new(stockade())
        .env("STOCKADE_ATTESTATION_DIR", s.path())
        .args(["probe", "--json"])
        .output()
        .expect("run stockade probe");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe --json");
    if v["all_adr_0017_enforced"] == true {
        assert_eq!(
            v["shared_at"].as_str(),
            s.path().join("full.json").to_str(),
            "{v}"
        );
        let (_, r, _) = exec_true(s.path(), &["--memory", "256M"]);
        assert_eq!(r["attestation"]["source"], "shared", "{r}");
    } else {
        assert!(
            v["shared_at"].is_null() || v["checks"].as_array().is_some(),
            "{v}"
        );
    }
}

/// A record that another user could have written, or that claims something the live probe
/// never said, is not used: the call probes live, says why on stderr, and overwrites nothing.
#[test]
fn records_an_attacker_could_plant_are_refused() {
    if !isolation_available() {
        return;
    }
    let s = store();
    let (code, _, err) = exec_true(s.path(), &[]);
    assert_eq!(code, 0, "{err}");
    let record = s.path().join("isolation.json");

    // World-readable record.
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, r, err) = exec_true(s.path(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["attestation"]["source"], "live", "{r}");
    assert!(err.contains("attestation not shared"), "{err}");
    assert_eq!(
        std::fs::metadata(&record).unwrap().permissions().mode() & 0o777,
        0o644,
        "a refused record must not be overwritten"
    );

    // A record whose failed self-test was edited into a pass is re-proven; one with a failure
    // planted is refused loudly.
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o600)).unwrap();
    edit(&record, |v| {
        let checks = v["checks"].as_array_mut().unwrap();
        checks.push("seccomp FAIL planted".into());
    });
    let (_, r, err) = exec_true(s.path(), &[]);
    assert_eq!(r["attestation"]["source"], "live", "{r}");
    assert!(err.contains("failed self-test"), "{err}");

    // A record from another boot: quietly re-proven and replaced.
    std::fs::remove_file(&record).unwrap();
    let _ = exec_true(s.path(), &[]);
    edit(&record, |v| {
        v["key"]["boot_id"] = "00000000-0000-0000-0000-000000000000".into();
    });
    let (_, r, err) = exec_true(s.path(), &[]);
    assert_eq!(r["attestation"]["source"], "live", "{r}");
    assert!(!err.contains("warning"), "{err}");
    let (_, r, _) = exec_true(s.path(), &[]);
    assert_eq!(r["attestation"]["source"], "shared", "{r}");

    // A store another user owns (needs root to plant).
    if crate::support::is_root() {
        let foreign = store();
        std::os::unix::fs::chown(foreign.path(), Some(65534), Some(65534)).unwrap();
        let (code, r, err) = exec_true(foreign.path(), &[]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(r["attestation"]["source"], "live", "{r}");
        assert!(err.contains("owned by uid 65534"), "{err}");
        assert!(!foreign.path().join("isolation.json").exists());
        std::os::unix::fs::chown(foreign.path(), Some(0), Some(0)).unwrap();
    }
}

/// With a ceiling the worker joins its own cgroups from the inside and gets a cgroup namespace
/// rooted there: it sees `/` in every hierarchy, never the supervisor's pid or host paths.
#[test]
fn the_worker_sees_only_its_own_cgroup_root() {
    if !isolation_available() {
        return;
    }
    let ws = ws();
    let r = crate::escape::exec_in(
        ws.path(),
        &["--pids", "64", "--memory", "256M"],
        &["/bin/cat", "/proc/self/cgroup"],
    );
    if r.code == 125 && !crate::support::is_root() {
        eprintln!("SKIPPED: ceilings are not attested for this user");
        return;
    }
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in r.stdout.lines() {
        let path = line.splitn(3, ':').nth(2).unwrap_or("");
        assert_eq!(path, "/", "a cgroup path leaks: {line}\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("stockade"), "{}", r.stdout);
}
