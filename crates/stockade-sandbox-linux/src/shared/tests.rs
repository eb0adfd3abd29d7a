use std::cell::Cell;
use std::os::unix::fs::PermissionsExt;

use stockade_capabilities::{
    BackendIdentity, CgroupVersion, HostFacts, Protection, ProtectionStatus,
};

use super::*;

fn outcome(tag: &str, pass: bool) -> ProbeOutcome {
    let mut caps = SandboxCapabilities::new(
        BackendIdentity::new("linux-namespaces", "test"),
        HostFacts {
            kernel: "6.18".into(),
            landlock_abi: Some(7),
            cgroup: CgroupVersion::V1,
        },
    );
    caps.set(
        Protection::FilesystemIsolation,
        ProtectionStatus::Enforced {
            evidence: format!("canary {tag}"),
        },
    );
    ProbeOutcome {
        capabilities: caps,
        checks: vec![
            format!("fs PASS {tag}"),
            format!("net {} {tag}", if pass { "PASS" } else { "FAIL" }),
        ],
    }
}

/// A private store directory (mode 700) inside a temporary directory.
fn store() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("attestation");
    DirBuilder::new().mode(0o700).create(&d).unwrap();
    (t, d)
}

/// Runs a shared probe whose live probe is `live`, counting live probes.
fn run(
    dir: &Path,
    scope: Scope,
    max_age: Duration,
    live: &ProbeOutcome,
    n: &Cell<u32>,
) -> SharedProbe {
    probe_shared_in(Some(dir), scope, max_age, || {
        n.set(n.get() + 1);
        live.clone()
    })
}

fn edit_record(dir: &Path, scope: Scope, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(scope.file_name());
    let mut v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut v);
    fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
}

#[test]
fn a_live_probe_is_shared_and_reused() {
    let (_t, d) = store();
    let n = Cell::new(0);
    let first = run(
        &d,
        Scope::Isolation,
        DEFAULT_MAX_AGE,
        &outcome("one", true),
        &n,
    );
    assert_eq!(n.get(), 1);
    assert!(
        matches!(&first.source, Source::Live { shared_at: Some(p) } if p.ends_with("isolation.json"))
    );
    assert!(first.warning.is_none());
    let md = fs::metadata(d.join("isolation.json")).unwrap();
    assert_eq!(md.mode() & 0o777, 0o600);
    let second = run(
        &d,
        Scope::Isolation,
        DEFAULT_MAX_AGE,
        &outcome("two", true),
        &n,
    );
    assert_eq!(n.get(), 1, "the second process must reuse the record");
    assert!(matches!(
        second.source,
        Source::Shared {
            scope: Scope::Isolation,
            ..
        }
    ));
    assert_eq!(second.outcome.capabilities, first.outcome.capabilities);
    assert_eq!(second.outcome.checks, first.outcome.checks);
}

#[test]
fn zero_max_age_always_probes_live_and_refreshes() {
    let (_t, d) = store();
    let n = Cell::new(0);
    run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("old", true), &n);
    let live = run(&d, Scope::Full, Duration::ZERO, &outcome("new", true), &n);
    assert_eq!(n.get(), 2);
    assert!(matches!(live.source, Source::Live { shared_at: Some(_) }));
    let again = run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("x", true), &n);
    assert_eq!(n.get(), 2);
    assert!(
        again.outcome.checks[0].ends_with("new"),
        "{:?}",
        again.outcome.checks
    );
}

#[test]
fn a_failed_probe_is_never_shared_or_reused() {
    let (_t, d) = store();
    let n = Cell::new(0);
    let r = run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("bad", false), &n);
    assert!(matches!(r.source, Source::Live { shared_at: None }));
    assert!(!d.join("full.json").exists());
    // A record holding a failure (written by hand) is refused loudly.
    run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("good", true), &n);
    edit_record(&d, Scope::Full, |v| {
        v["checks"][1] = "net FAIL planted".into();
    });
    let r = run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("live", true), &n);
    assert_eq!(n.get(), 3);
    assert!(
        r.warning
            .as_deref()
            .is_some_and(|w| w.contains("failed self-test")),
        "{:?}",
        r.warning
    );
}

#[test]
fn expired_future_or_foreign_records_are_probed_again() {
    let (_t, d) = store();
    let n = Cell::new(0);
    let live = outcome("live", true);
    run(&d, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 6] = [
        ("expired", |v| {
            v["created_unix_ms"] = (now_ms() - 601_000).into()
        }),
        ("future", |v| {
            v["created_unix_ms"] = (now_ms() + 60_000).into()
        }),
        ("other boot", |v| {
            v["key"]["boot_id"] = "00000000-0000-0000-0000-000000000000".into()
        }),
        ("other binary", |v| v["key"]["exe"]["ino"] = 1.into()),
        ("other cgroup", |v| {
            v["key"]["cgroup_membership"] = "0::/elsewhere".into()
        }),
        ("other format", |v| v["format"] = 0.into()),
    ];
    for (what, edit) in edits {
        let before = n.get();
        edit_record(&d, Scope::Full, edit);
        let r = run(&d, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
        assert_eq!(n.get(), before + 1, "{what}: must probe live");
        assert!(r.warning.is_none(), "{what}: {:?}", r.warning);
        assert!(
            matches!(r.source, Source::Live { shared_at: Some(_) }),
            "{what}"
        );
    }
}

#[test]
fn scopes_answer_only_what_they_proved() {
    let (_t, d) = store();
    let n = Cell::new(0);
    run(
        &d,
        Scope::Isolation,
        DEFAULT_MAX_AGE,
        &outcome("iso", true),
        &n,
    );
    // An isolation record cannot answer a request for ceilings.
    let full = run(&d, Scope::Full, DEFAULT_MAX_AGE, &outcome("full", true), &n);
    assert_eq!(n.get(), 2);
    assert!(matches!(full.source, Source::Live { .. }));
    // A full record answers an isolation request.
    let iso = run(
        &d,
        Scope::Isolation,
        DEFAULT_MAX_AGE,
        &outcome("x", true),
        &n,
    );
    assert_eq!(n.get(), 2);
    assert!(matches!(
        iso.source,
        Source::Shared {
            scope: Scope::Full,
            ..
        }
    ));
}

#[test]
fn records_others_could_have_written_are_refused_loudly() {
    let n = Cell::new(0);
    let live = outcome("live", true);
    type Plant = fn(&Path);
    let cases: [(&str, Plant); 5] = [
        ("group-readable record", |d| {
            fs::set_permissions(d.join("full.json"), fs::Permissions::from_mode(0o640)).unwrap()
        }),
        ("symlinked record", |d| {
            fs::rename(d.join("full.json"), d.join("real.json")).unwrap();
            std::os::unix::fs::symlink(d.join("real.json"), d.join("full.json")).unwrap();
        }),
        ("hard-linked record", |d| {
            fs::hard_link(d.join("full.json"), d.join("other.json")).unwrap()
        }),
        ("garbage record", |d| {
            fs::write(d.join("full.json"), "{not json").unwrap()
        }),
        ("record with an unknown field", |d| {
            edit_record(d, Scope::Full, |v| v["admit_anyway"] = true.into())
        }),
    ];
    for (what, plant) in cases {
        let (_t, d) = store();
        run(&d, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
        let before = n.get();
        plant(&d);
        let r = run(&d, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
        assert_eq!(n.get(), before + 1, "{what}: must probe live");
        assert!(r.warning.is_some(), "{what}: no warning");
        assert!(
            matches!(r.source, Source::Live { shared_at: None }),
            "{what}: must not overwrite"
        );
    }
}

#[test]
fn a_store_others_can_enter_is_not_used() {
    let n = Cell::new(0);
    let live = outcome("live", true);
    let (_t, d) = store();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    let r = run(&d, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
    assert!(
        r.warning
            .as_deref()
            .is_some_and(|w| w.contains("chmod 700")),
        "{:?}",
        r.warning
    );
    assert!(
        !d.join("full.json").exists(),
        "nothing may be written there"
    );
    // A symlink in place of the directory.
    let (t2, d2) = store();
    let link = t2.path().join("link");
    std::os::unix::fs::symlink(&d2, &link).unwrap();
    let r = run(&link, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
    assert!(
        r.warning
            .as_deref()
            .is_some_and(|w| w.contains("not a directory")),
        "{:?}",
        r.warning
    );
    assert!(!d2.join("full.json").exists());
    // Owned by another user (needs root to plant).
    if crate::sys::ids().0 == 0 {
        let (_t3, d3) = store();
        std::os::unix::fs::chown(&d3, Some(65534), Some(65534)).unwrap();
        let r = run(&d3, Scope::Full, DEFAULT_MAX_AGE, &live, &n);
        assert!(
            r.warning
                .as_deref()
                .is_some_and(|w| w.contains("owned by uid 65534")),
            "{:?}",
            r.warning
        );
        assert!(!d3.join("full.json").exists());
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the foreign-owner case needs root under CI=true"
        );
        eprintln!("SKIPPED: the foreign-owner store case needs root");
    }
}

#[test]
fn a_missing_store_is_created_private() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("stockade").join("attestation");
    let n = Cell::new(0);
    let r = run(
        &d,
        Scope::Isolation,
        DEFAULT_MAX_AGE,
        &outcome("x", true),
        &n,
    );
    assert!(r.warning.is_none(), "{:?}", r.warning);
    assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
    assert!(d.join("isolation.json").exists());
}

#[test]
fn the_host_key_is_stable_within_a_process() {
    let a = HostKey::current().unwrap();
    let b = HostKey::current().unwrap();
    assert_eq!(a, b);
    assert!(!a.boot_id.is_empty());
}
