//! Pure parsers for the kernel's cgroup text files.
//!
//! Every function here takes bytes the kernel wrote and returns values; none touches the
//! filesystem, so each is unit-tested against literal kernel output.

use std::path::PathBuf;

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controller-list:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcCgroupLine {
    /// Hierarchy id; `0` is the cgroup v2 unified hierarchy.
    pub(crate) hierarchy: u32,
    /// Controllers bound to this v1 hierarchy (`name=systemd` kept verbatim); empty for v2.
    pub(crate) controllers: Vec<String>,
    /// Path of the process's cgroup relative to the hierarchy's root (as the process sees it).
    pub(crate) path: String,
}

/// Parses `/proc/<pid>/cgroup`, skipping malformed lines.
pub(crate) fn parse_proc_cgroup(text: &str) -> Vec<ProcCgroupLine> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy = parts.next()?.trim().parse().ok()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            if !path.starts_with('/') {
                return None;
            }
            Some(ProcCgroupLine {
                hierarchy,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            })
        })
        .collect()
}

/// Which cgroup version a mount carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MountKind {
    /// `cgroup` (v1), one or more controllers per mount.
    V1,
    /// `cgroup2`, the unified hierarchy.
    V2,
}

/// A cgroup filesystem mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupMount {
    /// v1 or v2.
    pub(crate) kind: MountKind,
    /// Path of the hierarchy's directory that is mounted (`/` unless bind-mounted or namespaced).
    pub(crate) root: String,
    /// Where it is mounted.
    pub(crate) mount_point: PathBuf,
    /// v1: the controllers named in the super options; v2: empty (read `cgroup.controllers`).
    pub(crate) controllers: Vec<String>,
}

/// Decodes the octal escapes (`\040` for space, ...) mountinfo uses in paths.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(oct) = field.get(i + 1..i + 4)
            && let Ok(v) = u8::from_str_radix(oct, 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `/proc/self/mountinfo` and keeps the cgroup (v1) and cgroup2 mounts.
///
/// A v1 super-option list also carries `rw`, `relatime` and friends; only names that are
/// controllers we know of (or `name=...`) are kept.
pub(crate) fn parse_mountinfo_cgroups(text: &str) -> Vec<CgroupMount> {
    const KNOWN: &[&str] = &[
        "cpu",
        "cpuacct",
        "cpuset",
        "memory",
        "devices",
        "freezer",
        "net_cls",
        "blkio",
        "perf_event",
        "net_prio",
        "hugetlb",
        "pids",
        "rdma",
        "misc",
    ];
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let _source = post.next()?;
            let super_opts = post.next().unwrap_or("");
            let kind = match fstype {
                "cgroup" => MountKind::V1,
                "cgroup2" => MountKind::V2,
                _ => return None,
            };
            let root = unescape_mountinfo(pre.get(3)?);
            let mount_point = PathBuf::from(unescape_mountinfo(pre.get(4)?));
            let controllers = if kind == MountKind::V1 {
                super_opts
                    .split(',')
                    .filter(|o| KNOWN.contains(o) || o.starts_with("name="))
                    .map(str::to_owned)
                    .collect()
            } else {
                Vec::new()
            };
            Some(CgroupMount {
                kind,
                root,
                mount_point,
                controllers,
            })
        })
        .collect()
}

/// Maps a cgroup path from `/proc/self/cgroup` to a directory under `mount`.
///
/// Returns `None` when the process's cgroup lies outside the mounted part of the hierarchy.
pub(crate) fn cgroup_dir(mount: &CgroupMount, path: &str) -> Option<PathBuf> {
    let rel = if mount.root == "/" {
        path
    } else {
        let rest = path.strip_prefix(mount.root.as_str())?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(rel)
    })
}

/// Parses a space-separated controller list (`cgroup.controllers`, `cgroup.subtree_control`).
pub(crate) fn parse_controller_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Reads `key value` pairs (`memory.events`, `pids.events`, `cpu.stat`, `memory.oom_control`).
pub(crate) fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut it = line.split_whitespace();
        (it.next()? == key).then_some(())?;
        it.next()?.parse().ok()
    })
}

/// Parses a single-value file such as `pids.current` or `memory.peak` (`max` gives `None`).
pub(crate) fn single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Parses the pid list of `cgroup.procs` / `tasks`.
pub(crate) fn parse_pids(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| *p > 0)
        .collect()
}

/// Field 22 (`starttime`, in clock ticks since boot) of `/proc/<pid>/stat`.
///
/// The command name (field 2) may contain spaces and parentheses, so fields are counted from
/// the last `)`.
pub(crate) fn stat_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // After ")" come field 3 (state) onwards; starttime is field 22 → index 19 here.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// A worker cgroup directory name: `<supervisor pid>-<supervisor start time>-<sequence>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerName {
    /// Pid of the supervisor that created the cgroup.
    pub(crate) pid: i32,
    /// The supervisor's start time (`/proc/<pid>/stat` field 22), to tell a reused pid apart.
    pub(crate) start_time: u64,
    /// Sequence number within that supervisor.
    pub(crate) seq: u64,
}

impl WorkerName {
    /// Formats the directory name; the optional label is a caller-chosen suffix.
    pub(crate) fn render(&self, label: &str) -> String {
        if label.is_empty() {
            format!("{}-{}-{}", self.pid, self.start_time, self.seq)
        } else {
            format!("{}-{}-{}-{label}", self.pid, self.start_time, self.seq)
        }
    }

    /// Parses a directory name written by [`WorkerName::render`]; other names give `None`.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let mut it = name.splitn(4, '-');
        let pid = it.next()?.parse().ok().filter(|p: &i32| *p > 0)?;
        let start_time = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        Some(Self {
            pid,
            start_time,
            seq,
        })
    }
}

/// Is `label` acceptable as part of a cgroup directory name?
pub(crate) fn valid_label(label: &str) -> bool {
    label.len() <= 64
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        && label != "."
        && label != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS_HOST: &str = "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n\
        4:memory:/process_api/207cc865ac44376713bb62848182ec61\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn proc_cgroup_v1_hybrid() {
        let lines = parse_proc_cgroup(THIS_HOST);
        assert_eq!(lines.len(), 10);
        assert_eq!(lines[0].controllers, vec!["name=systemd"]);
        assert_eq!(lines[5].controllers, vec!["memory"]);
        assert_eq!(
            lines[5].path,
            "/process_api/207cc865ac44376713bb62848182ec61"
        );
        assert_eq!(lines[9].hierarchy, 0);
        assert!(lines[9].controllers.is_empty());
    }

    #[test]
    fn proc_cgroup_v2_and_garbage() {
        let lines =
            parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\nbogus\n1:x:rel\n");
        assert_eq!(
            lines,
            vec![ProcCgroupLine {
                hierarchy: 0,
                controllers: vec![],
                path: "/user.slice/user-1000.slice/session-2.scope".into()
            }]
        );
    }

    #[test]
    fn proc_cgroup_combined_v1_controllers() {
        let lines = parse_proc_cgroup("3:cpu,cpuacct:/a/b\n");
        assert_eq!(lines[0].controllers, vec!["cpu", "cpuacct"]);
    }

    #[test]
    fn mountinfo_this_host() {
        let text = "\
30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
34 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
";
        let m = parse_mountinfo_cgroups(text);
        assert_eq!(m.len(), 5);
        assert_eq!(m[0].controllers, vec!["cpu"]);
        assert_eq!(m[2].kind, MountKind::V2);
        assert_eq!(m[3].controllers, vec!["name=systemd"]);
        assert_eq!(m[4].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(
            m[4].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
    }

    #[test]
    fn mountinfo_escapes() {
        let m = parse_mountinfo_cgroups("1 2 0:3 / /tmp/a\\040b rw - cgroup2 none rw\n");
        assert_eq!(m[0].mount_point, PathBuf::from("/tmp/a b"));
    }

    #[test]
    fn cgroup_dir_maps_paths() {
        let m = CgroupMount {
            kind: MountKind::V2,
            root: "/".into(),
            mount_point: "/sys/fs/cgroup".into(),
            controllers: vec![],
        };
        assert_eq!(cgroup_dir(&m, "/"), Some("/sys/fs/cgroup".into()));
        assert_eq!(cgroup_dir(&m, "/a/b"), Some("/sys/fs/cgroup/a/b".into()));
        assert_eq!(cgroup_dir(&m, "/a/../b"), None);
        let bound = CgroupMount {
            root: "/user.slice".into(),
            ..m
        };
        assert_eq!(
            cgroup_dir(&bound, "/user.slice/x"),
            Some("/sys/fs/cgroup/x".into())
        );
        assert_eq!(cgroup_dir(&bound, "/user.slicex"), None);
        assert_eq!(cgroup_dir(&bound, "/other"), None);
    }

    #[test]
    fn keyed_files() {
        assert_eq!(flat_keyed("max 3\n", "max"), Some(3));
        assert_eq!(
            flat_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill"),
            Some(2)
        );
        assert_eq!(
            flat_keyed("usage_usec 12\nuser_usec 10\n", "usage_usec"),
            Some(12)
        );
        assert_eq!(
            flat_keyed("low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n", "oom"),
            Some(1)
        );
        assert_eq!(flat_keyed("", "max"), None);
        assert_eq!(single_u64("max\n"), None);
        assert_eq!(single_u64("4096\n"), Some(4096));
        assert_eq!(parse_pids("12\n13\n0\nx\n"), vec![12, 13]);
    }

    #[test]
    fn stat_start_time_with_hostile_comm() {
        let stat =
            "1234 (a) b) (c) S 1 1234 1234 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 50";
        assert_eq!(stat_start_time(stat), Some(98765));
        assert_eq!(stat_start_time("garbage"), None);
    }

    #[test]
    fn worker_names_round_trip() {
        let n = WorkerName {
            pid: 42,
            start_time: 777,
            seq: 3,
        };
        assert_eq!(n.render(""), "42-777-3");
        assert_eq!(WorkerName::parse("42-777-3"), Some(n));
        assert_eq!(WorkerName::parse(&n.render("probe-mem")), Some(n));
        assert_eq!(WorkerName::parse("supervisor"), None);
        assert_eq!(WorkerName::parse("0-1-2"), None);
        assert!(valid_label("probe-mem_1"));
        assert!(!valid_label("../x"));
        assert!(!valid_label("a/b"));
    }
}
