//! Detection against fake cgroup trees, and real cgroup creation on this host (no processes:
//! tests that run processes live in the workspace `tests/it/ceilings.rs`).

use std::fs;
use std::path::Path;

use super::*;

const ME: Supervisor = Supervisor {
    pid: 4242,
    start_time: 99,
};

fn mountinfo_line(kind: &str, mp: &Path, opts: &str) -> String {
    format!(
        "40 30 0:50 / {} rw,relatime - {kind} {kind} {opts}\n",
        mp.display()
    )
}

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

#[test]
fn this_hosts_shape_selects_v1() {
    // cgroup2 with only hugetlb + a full set of v1 hierarchies, as on the development VM.
    let t = tempfile::tempdir().unwrap();
    let uni = t.path().join("unified");
    write(&uni.join("cgroup.controllers"), "hugetlb\n");
    let mut mi = mountinfo_line("cgroup2", &uni, "rw");
    for c in ["cpu", "cpuacct", "memory", "pids", "freezer", "devices"] {
        let d = t.path().join(c);
        fs::create_dir_all(&d).unwrap();
        mi.push_str(&mountinfo_line("cgroup", &d, &format!("rw,{c}")));
    }
    let host = CgroupHost::detect_from("4:memory:/x\n0::/\n", &mi, true, ME).unwrap();
    assert_eq!(host.version(), CgroupVersion::V1);
    let bases = host.base_dirs();
    assert_eq!(bases.len(), 5);
    assert_eq!(bases[0], t.path().join("memory/stockade"));
    assert_eq!(bases[4], t.path().join("freezer/stockade"));
}

#[test]
fn comounted_cpu_cpuacct_shares_one_dir() {
    let t = tempfile::tempdir().unwrap();
    let mut mi = String::new();
    for (dir, opts) in [
        ("cpu,cpuacct", "rw,cpu,cpuacct"),
        ("memory", "rw,memory"),
        ("pids", "rw,pids"),
        ("freezer", "rw,freezer"),
    ] {
        mi.push_str(&mountinfo_line("cgroup", &t.path().join(dir), opts));
    }
    let host = CgroupHost::detect_from("", &mi, true, ME).unwrap();
    assert_eq!(host.base_dirs().len(), 4);
}

#[test]
fn v2_root_uses_top_level_stockade_and_enables_controllers() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path();
    write(
        &top.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    write(&top.join("cgroup.subtree_control"), "memory\n");
    let mi = mountinfo_line("cgroup2", top, "rw,nsdelegate");
    let host = CgroupHost::detect_from("0::/init.scope\n", &mi, true, ME).unwrap();
    assert_eq!(host.version(), CgroupVersion::V2);
    assert_eq!(host.base_dirs(), vec![top.join("stockade")]);
    // A real cgroupfs creates the interface files on mkdir; fake them so `create` sees swap.
    host.prepare().unwrap();
    // Only the missing controllers are requested (a plain file keeps the last write).
    assert_eq!(
        fs::read_to_string(top.join("cgroup.subtree_control")).unwrap(),
        "+pids +cpu"
    );
    assert_eq!(
        fs::read_to_string(top.join("stockade/cgroup.subtree_control")).unwrap(),
        "+memory +pids +cpu"
    );
    let limits = ResourceLimits {
        cpu_millis: 1500,
        memory_bytes: 512 << 20,
        disk_bytes: 0,
        pids: 64,
    };
    let w = host.create("job", &limits).unwrap();
    assert_eq!(w.name(), "4242-99-0-job");
    let d = top.join("stockade/4242-99-0-job");
    assert_eq!(w.v2_dir(), Some(d.as_path()));
    assert_eq!(
        fs::read_to_string(d.join("memory.max")).unwrap(),
        "536870912"
    );
    assert_eq!(fs::read_to_string(d.join("pids.max")).unwrap(), "64");
    assert_eq!(
        fs::read_to_string(d.join("cpu.max")).unwrap(),
        "150000 100000"
    );
    // No memory.swap.max file in the fake tree (no swap accounting): not invented.
    assert!(!d.join("memory.swap.max").exists());
    // Usage parsing from v2 files.
    write(&d.join("memory.peak"), "1234\n");
    write(
        &d.join("memory.events"),
        "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n",
    );
    write(
        &d.join("cpu.stat"),
        "usage_usec 777\nuser_usec 700\nsystem_usec 77\nnr_periods 9\nnr_throttled 4\nthrottled_usec 10\n",
    );
    write(&d.join("pids.events"), "max 3\n");
    write(&d.join("pids.current"), "5\n");
    w.sample();
    let u = w.usage();
    assert_eq!(
        u,
        ResourceUsage {
            memory_peak_bytes: Some(1234),
            cpu_time_us: 777,
            pids_peak: Some(5),
            oom_kills: 1,
            pids_limit_hits: 3,
            cpu_throttled_periods: 4,
        }
    );
    write(&d.join("pids.peak"), "9\n");
    assert_eq!(w.usage().pids_peak, Some(9));
    // The second worker gets the next sequence number.
    let w2 = host.create_with("", &CgroupLimits::default()).unwrap();
    assert_eq!(w2.name(), "4242-99-1");
    drop(w2);
    drop(w);
}

#[test]
fn v2_root_without_controllers_falls_back_or_explains() {
    let t = tempfile::tempdir().unwrap();
    write(&t.path().join("cgroup.controllers"), "hugetlb\n");
    let mi = mountinfo_line("cgroup2", t.path(), "rw");
    let err = CgroupHost::detect_from("0::/\n", &mi, true, ME).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("offers no memory, pids, cpu"), "{msg}");
    assert!(
        msg.contains("cgroup v1: no memory, pids, cpu, cpuacct, freezer hierarchy"),
        "{msg}"
    );
    assert!(msg.contains("remedy:"), "{msg}");
    assert!(msg.contains("Delegate=yes"), "{msg}");
}

#[test]
fn v2_delegated_subtree_moves_supervisor_to_a_leaf() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path();
    let own = top.join("user.slice/user-1000.slice/run-u7.scope");
    write(&own.join("cgroup.controllers"), "cpu memory pids\n");
    write(&own.join("cgroup.subtree_control"), "");
    write(&own.join("cgroup.procs"), "4242\n");
    let mi = mountinfo_line("cgroup2", top, "rw");
    // Not root: uses its own delegated cgroup (writable here because tests run as root, which
    // is exactly what `access(W_OK)` answers for a delegated, chowned subtree).
    let host = CgroupHost::detect_from(
        "0::/user.slice/user-1000.slice/run-u7.scope\n",
        &mi,
        false,
        ME,
    )
    .unwrap();
    assert_eq!(host.base_dirs(), vec![own.join("stockade")]);
    assert!(host.describe().contains("delegated"));
    host.prepare().unwrap();
    assert_eq!(
        fs::read_to_string(own.join("supervisor/cgroup.procs")).unwrap(),
        "4242"
    );
    assert_eq!(
        fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
        "+memory +pids +cpu"
    );
}

#[test]
fn v2_delegated_subtree_shared_with_other_processes_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let own = t.path().join("session.scope");
    write(&own.join("cgroup.controllers"), "cpu memory pids\n");
    write(&own.join("cgroup.subtree_control"), "");
    write(&own.join("cgroup.procs"), "4242\n1777\n");
    let mi = mountinfo_line("cgroup2", t.path(), "rw");
    let host = CgroupHost::detect_from("0::/session.scope\n", &mi, false, ME).unwrap();
    let err = host.prepare().unwrap_err().to_string();
    assert!(err.contains("[1777]"), "{err}");
    assert!(err.contains("remedy:"), "{err}");
}

#[test]
fn v2_not_root_without_controllers_in_own_cgroup() {
    let t = tempfile::tempdir().unwrap();
    let own = t.path().join("user.slice/session-3.scope");
    write(&own.join("cgroup.controllers"), "memory\n");
    let mi = mountinfo_line("cgroup2", t.path(), "rw");
    let err = CgroupHost::detect_from("0::/user.slice/session-3.scope\n", &mi, false, ME)
        .unwrap_err()
        .to_string();
    assert!(err.contains("offers no pids, cpu"), "{err}");
    assert!(
        err.contains("systemd-run --user --scope -p Delegate=yes"),
        "{err}"
    );
}

#[test]
fn nothing_mounted_is_a_named_error() {
    let err = CgroupHost::detect_from("", "", true, ME)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("no usable cgroup hierarchy"), "{err}");
    assert!(err.contains("cgroup v2: not mounted"), "{err}");
}

#[test]
fn limits_are_validated() {
    let bad = [
        CgroupLimits {
            memory_bytes: Some(1000),
            ..Default::default()
        },
        CgroupLimits {
            cpu_millis: Some(5),
            ..Default::default()
        },
        CgroupLimits {
            pids: Some(0),
            ..Default::default()
        },
    ];
    for b in bad {
        assert!(matches!(
            b.validate(),
            Err(CgroupError::InvalidLimit { .. })
        ));
    }
    assert_eq!(
        CgroupLimits {
            cpu_millis: Some(250),
            ..Default::default()
        }
        .cpu_quota_us(),
        Some(25_000)
    );
}

#[test]
fn sweep_in_fake_tree_spares_live_and_foreign_names() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path();
    write(&top.join("cgroup.controllers"), "cpu memory pids\n");
    let mi = mountinfo_line("cgroup2", top, "rw");
    let host = CgroupHost::detect_from("0::/\n", &mi, true, ME).unwrap();
    let base = top.join("stockade");
    // Live: this supervisor. Foreign: not our naming. Stale: pid that cannot exist.
    for n in ["4242-99-7", "not-ours", "2147483000-5-0"] {
        fs::create_dir_all(base.join(n)).unwrap();
    }
    let swept = host.sweep_stale().unwrap();
    assert_eq!(swept, vec!["2147483000-5-0".to_owned()]);
    assert!(base.join("4242-99-7").exists());
    assert!(base.join("not-ours").exists());
    assert!(!base.join("2147483000-5-0").exists());
}

/// Real cgroups on this host (root required); skipped loudly otherwise, failing under CI.
fn real_host() -> Option<CgroupHost> {
    match CgroupHost::detect() {
        Ok(h) if rustix::process::geteuid().is_root() => Some(h),
        other => {
            let why = match other {
                Ok(_) => "not root".to_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "real cgroup test cannot run under CI: {why}"
            );
            eprintln!("SKIPPED: real cgroup test: {why}");
            None
        }
    }
}

#[test]
fn real_create_writes_limits_and_remove_leaves_nothing() {
    let Some(host) = real_host() else { return };
    let limits = ResourceLimits {
        cpu_millis: 500,
        memory_bytes: 64 << 20,
        disk_bytes: 0,
        pids: 20,
    };
    let w = host.create("unit-limits", &limits).unwrap();
    let paths = w.paths();
    assert!(paths.iter().all(|p| p.is_dir()));
    match host.version() {
        CgroupVersion::V1 => {
            let mem = paths
                .iter()
                .find(|p| p.starts_with("/sys/fs/cgroup/memory"))
                .unwrap();
            assert_eq!(
                fs::read_to_string(mem.join("memory.limit_in_bytes"))
                    .unwrap()
                    .trim(),
                (64u64 << 20).to_string()
            );
            if mem.join("memory.memsw.limit_in_bytes").exists() {
                assert_eq!(
                    fs::read_to_string(mem.join("memory.memsw.limit_in_bytes"))
                        .unwrap()
                        .trim(),
                    (64u64 << 20).to_string()
                );
            }
            let pids = paths
                .iter()
                .find(|p| p.starts_with("/sys/fs/cgroup/pids"))
                .unwrap();
            assert_eq!(
                fs::read_to_string(pids.join("pids.max")).unwrap().trim(),
                "20"
            );
            let cpu = paths
                .iter()
                .find(|p| p.starts_with("/sys/fs/cgroup/cpu/"))
                .unwrap();
            assert_eq!(
                fs::read_to_string(cpu.join("cpu.cfs_quota_us"))
                    .unwrap()
                    .trim(),
                "50000"
            );
        }
        CgroupVersion::V2 => {
            let d = w.v2_dir().unwrap();
            assert_eq!(fs::read_to_string(d.join("pids.max")).unwrap().trim(), "20");
            assert_eq!(
                fs::read_to_string(d.join("cpu.max")).unwrap().trim(),
                "50000 100000"
            );
        }
    }
    assert!(w.pids().is_empty());
    let u = w.usage();
    assert_eq!(u.oom_kills, 0);
    assert_eq!(u.cpu_time_us, 0);
    w.kill_all().unwrap();
    w.remove().unwrap();
    assert!(paths.iter().all(|p| !p.exists()));
}

#[test]
fn real_drop_removes_and_failed_create_cleans_up() {
    let Some(host) = real_host() else { return };
    let w = host
        .create_with("unit-drop", &CgroupLimits::default())
        .unwrap();
    let paths = w.paths();
    drop(w);
    assert!(paths.iter().all(|p| !p.exists()));
    assert!(matches!(
        host.create_with("bad/label", &CgroupLimits::default()),
        Err(CgroupError::InvalidLabel(_))
    ));
}

#[test]
fn real_sweep_removes_a_dead_supervisors_cgroup() {
    let Some(host) = real_host() else { return };
    host.prepare().unwrap();
    // A name whose supervisor pid cannot be running (above pid_max).
    let stale = "2147483000-1-0-unit-stale";
    let dirs = host.dirs_for(stale);
    for d in dirs.all() {
        fs::create_dir(d).unwrap();
    }
    let swept = host.sweep_stale().unwrap();
    assert!(swept.iter().any(|s| s == stale), "{swept:?}");
    assert!(dirs.all().iter().all(|p| !p.exists()));
}
