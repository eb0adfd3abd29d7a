//! The mount plan and the setup-failure wire format, computed in the parent before `clone`.
//!
//! The child executes [`Step`]s in order; every string is a precomputed `CString`, so the
//! child does not allocate. During the build the host tree is reachable at `/oldroot` and the
//! new root is assembled at `/newroot` (bubblewrap's two-pivot technique), then the final
//! `pivot_root` detaches the host tree entirely.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::LaunchError;
use crate::spec::{LaunchSpec, TmpDir, WorkspaceView};

/// `MOUNT_ATTR_*` bits (uapi `linux/mount.h`).
pub(crate) const ATTR_RDONLY: u64 = 0x1;
pub(crate) const ATTR_NOSUID: u64 = 0x2;
pub(crate) const ATTR_NODEV: u64 = 0x4;
pub(crate) const ATTR_NOEXEC: u64 = 0x8;

/// One mount-plan step executed by the child.
#[derive(Debug)]
pub(crate) enum Step {
    /// Make every mount private so nothing propagates back to the host.
    MakeRootPrivate,
    /// Mount a tmpfs.
    Tmpfs {
        target: CString,
        flags: libc::c_ulong,
        data: CString,
    },
    /// Create a directory (an existing one is fine).
    Mkdir { path: CString, optional: bool },
    /// Create an empty file to bind a file onto.
    Touch { path: CString },
    /// Create a symbolic link.
    Symlink { target: CString, link: CString },
    /// Write a synthesized file.
    WriteFile { path: CString, contents: Vec<u8> },
    /// Recursive bind mount, then `mount_setattr` with `attr` over the whole subtree.
    Bind {
        src: CString,
        dst: CString,
        attr: u64,
        optional: bool,
    },
    /// A fresh procfs for the new PID namespace.
    Proc { target: CString },
    /// A private devpts instance.
    Devpts { target: CString },
    /// An overlay (workspace view).
    Overlay { target: CString, data: CString },
    /// First pivot: the staging tmpfs becomes `/`, the host tree `/oldroot`.
    PivotStaging { new_root: CString, put_old: CString },
    /// Final pivot into the assembled root and lazy detach of everything else.
    PivotFinal { new_root: CString },
    /// Add mount attributes to an existing mount.
    SetAttr {
        path: CString,
        attr: u64,
        recursive: bool,
    },
}

impl Step {
    /// A missing source for this step is not an error.
    pub(crate) fn optional(&self) -> bool {
        matches!(
            self,
            Step::Bind { optional: true, .. } | Step::Mkdir { optional: true, .. }
        )
    }

    /// Human description for error messages (parent side).
    pub(crate) fn describe(&self) -> String {
        let s = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            Step::MakeRootPrivate => "make / private".into(),
            Step::Tmpfs { target, .. } => format!("mount tmpfs on {}", s(target)),
            Step::Mkdir { path, .. } => format!("mkdir {}", s(path)),
            Step::Touch { path } => format!("create {}", s(path)),
            Step::Symlink { target, link } => format!("symlink {} -> {}", s(link), s(target)),
            Step::WriteFile { path, .. } => format!("write {}", s(path)),
            Step::Bind { src, dst, .. } => format!("bind {} on {}", s(src), s(dst)),
            Step::Proc { target } => format!("mount proc on {}", s(target)),
            Step::Devpts { target } => format!("mount devpts on {}", s(target)),
            Step::Overlay { target, .. } => format!("mount overlay on {}", s(target)),
            Step::PivotStaging { .. } => "pivot_root into the staging tmpfs".into(),
            Step::PivotFinal { .. } => "pivot_root into the sandbox root".into(),
            Step::SetAttr { path, .. } => format!("restrict mount {}", s(path)),
        }
    }
}

/// Setup stage reported by a failing child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    Pdeathsig = 1,
    Setsid = 2,
    Mount = 3,
    Hostname = 4,
    Loopback = 5,
    Listener = 6,
    Chdir = 7,
    Stdio = 8,
    Securebits = 9,
    NoNewPrivs = 10,
    Landlock = 11,
    Capabilities = 12,
    Seccomp = 13,
    CloseFds = 14,
    Exec = 15,
    Seal = 16,
    Cgroup = 17,
}

impl Stage {
    fn from_u32(v: u32) -> Option<Stage> {
        Some(match v {
            1 => Stage::Pdeathsig,
            2 => Stage::Setsid,
            3 => Stage::Mount,
            4 => Stage::Hostname,
            5 => Stage::Loopback,
            6 => Stage::Listener,
            7 => Stage::Chdir,
            8 => Stage::Stdio,
            9 => Stage::Securebits,
            10 => Stage::NoNewPrivs,
            11 => Stage::Landlock,
            12 => Stage::Capabilities,
            13 => Stage::Seccomp,
            14 => Stage::CloseFds,
            15 => Stage::Exec,
            16 => Stage::Seal,
            17 => Stage::Cgroup,
            _ => return None,
        })
    }

    /// Stable lowercase name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stage::Pdeathsig => "parent-death signal",
            Stage::Setsid => "new session",
            Stage::Mount => "mount plan",
            Stage::Hostname => "hostname",
            Stage::Loopback => "loopback up",
            Stage::Listener => "listener in sandbox network namespace",
            Stage::Chdir => "chdir to workspace",
            Stage::Stdio => "stdio",
            Stage::Securebits => "securebits",
            Stage::NoNewPrivs => "no_new_privs",
            Stage::Landlock => "landlock",
            Stage::Capabilities => "capability drop",
            Stage::Seccomp => "seccomp filter",
            Stage::CloseFds => "close inherited descriptors",
            Stage::Exec => "execve",
            Stage::Seal => "self-check before exec",
            Stage::Cgroup => "cgroup placement",
        }
    }
}

/// What the seal check numbered `index` verifies (see `sys::child::seal`).
pub(crate) fn seal_check_name(index: u32) -> String {
    use crate::sys::child::seal_check::*;
    match index {
        NO_NEW_PRIVS => "no_new_privs is not set".into(),
        SECCOMP_MODE => "seccomp is not in filter mode".into(),
        CAPABILITY_SETS => "a capability set is not empty".into(),
        AMBIENT_SET => "the ambient capability set is not empty".into(),
        FILTER_ANSWERS => "the seccomp filter did not answer a denied call with EPERM".into(),
        LANDLOCK_DENIES => "landlock did not refuse a write to /proc/self/comm".into(),
        i if i >= BOUNDING_SET => format!(
            "capability {} is still in the bounding set",
            i - BOUNDING_SET
        ),
        i => format!("check #{i}"),
    }
}

/// Fixed-size failure record: 12 bytes over the status pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SetupFailure {
    pub(crate) stage: Stage,
    pub(crate) index: u32,
    pub(crate) errno: i32,
}

impl SetupFailure {
    pub(crate) const LEN: usize = 12;

    pub(crate) fn encode(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&(self.stage as u32).to_ne_bytes());
        b[4..8].copy_from_slice(&self.index.to_ne_bytes());
        b[8..].copy_from_slice(&self.errno.to_ne_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; Self::LEN]) -> Option<SetupFailure> {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        Some(SetupFailure {
            stage: Stage::from_u32(u32::from_ne_bytes(word(0)))?,
            index: u32::from_ne_bytes(word(4)),
            errno: i32::from_ne_bytes(word(8)),
        })
    }
}

pub(crate) fn cstr(bytes: &[u8]) -> Result<CString, LaunchError> {
    CString::new(bytes)
        .map_err(|_| LaunchError::InvalidSpec("a path or string contains a NUL byte".into()))
}

fn under(prefix: &str, p: &Path) -> Result<CString, LaunchError> {
    let mut v = prefix.as_bytes().to_vec();
    v.extend_from_slice(p.as_os_str().as_bytes());
    cstr(&v)
}

/// Directories a program needs, bound read-only when present on the host.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries bound read-only when present (never `shadow`, `gshadow`, credentials).
const ETC_ENTRIES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
];

/// procfs entries made read-only (`/proc/sys` would otherwise be writable by a root caller's
/// unprivileged mapping: sysctl permission checks look at the uid).
const PROC_READONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];
/// procfs entries masked with `/dev/null`.
const PROC_MASKED: &[&str] = &["kcore", "keys", "timer_list", "sched_debug", "kallsyms"];

/// Devices bound from the host.
pub(crate) const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The computed plan plus facts the landlock and exec stages need.
pub(crate) struct MountPlan {
    pub(crate) steps: Vec<Step>,
    /// Paths (inside the final root) bound read-only by the caller, with whether each is a dir.
    pub(crate) ro_inside: Vec<PathBuf>,
    /// Workspace path inside the sandbox.
    pub(crate) workspace_inside: PathBuf,
}

fn mkdir_chain(steps: &mut Vec<Step>, root: &str, p: &Path) -> Result<(), LaunchError> {
    let mut acc = PathBuf::from("/");
    for c in p.components() {
        if let Component::Normal(n) = c {
            acc.push(n);
            steps.push(Step::Mkdir {
                path: under(root, &acc)?,
                optional: false,
            });
        }
    }
    Ok(())
}

fn passwd(uid: u32, gid: u32, home: &str) -> (Vec<u8>, Vec<u8>) {
    let mut pw = String::new();
    let mut gr = String::new();
    if uid == 0 {
        pw.push_str(&format!("root:x:0:{gid}:root:{home}:/bin/sh\n"));
    } else {
        pw.push_str("root:x:0:0:root:/root:/usr/sbin/nologin\n");
        pw.push_str(&format!("sandbox:x:{uid}:{gid}:sandbox:{home}:/bin/sh\n"));
    }
    pw.push_str("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    if gid == 0 {
        gr.push_str("root:x:0:\n");
    } else {
        gr.push_str("root:x:0:\n");
        gr.push_str(&format!("sandbox:x:{gid}:\n"));
    }
    gr.push_str("nogroup:x:65534:\n");
    (pw.into_bytes(), gr.into_bytes())
}

/// Home directory of the sandbox user (inside the private `/tmp`).
pub(crate) const SANDBOX_HOME: &str = "/tmp/home";

/// Builds the mount plan for `spec`. All host paths are already canonical (see `spec`).
pub(crate) fn build(spec: &LaunchSpec, uid: u32, gid: u32) -> Result<MountPlan, LaunchError> {
    let mut steps = Vec::with_capacity(96);
    let nosuid_nodev = (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong;
    steps.push(Step::MakeRootPrivate);
    steps.push(Step::Tmpfs {
        target: cstr(b"/tmp")?,
        flags: nosuid_nodev,
        data: cstr(b"mode=0755,size=64k")?,
    });
    steps.push(Step::Mkdir {
        path: cstr(b"/tmp/newroot")?,
        optional: false,
    });
    steps.push(Step::Mkdir {
        path: cstr(b"/tmp/oldroot")?,
        optional: false,
    });
    steps.push(Step::Tmpfs {
        target: cstr(b"/tmp/newroot")?,
        flags: nosuid_nodev,
        data: cstr(b"mode=0755,size=1m")?,
    });
    steps.push(Step::PivotStaging {
        new_root: cstr(b"/tmp")?,
        put_old: cstr(b"/tmp/oldroot")?,
    });

    // System directories: symlinks stay symlinks (merged /usr), directories are bound read-only.
    for d in SYSTEM_DIRS {
        let p = Path::new(d);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(p)
                    .map_err(|e| LaunchError::Host(format!("readlink {d}: {e}")))?;
                steps.push(Step::Symlink {
                    target: cstr(target.as_os_str().as_bytes())?,
                    link: under("/newroot", p)?,
                });
            }
            Ok(m) if m.is_dir() => {
                steps.push(Step::Mkdir {
                    path: under("/newroot", p)?,
                    optional: false,
                });
                steps.push(Step::Bind {
                    src: under("/oldroot", p)?,
                    dst: under("/newroot", p)?,
                    attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
                    optional: false,
                });
            }
            _ => {}
        }
    }

    // /etc: synthesized identity files plus a few read-only entries.
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/etc")?,
        optional: false,
    });
    let (pw, gr) = passwd(uid, gid, SANDBOX_HOME);
    steps.push(Step::WriteFile {
        path: cstr(b"/newroot/etc/passwd")?,
        contents: pw,
    });
    steps.push(Step::WriteFile {
        path: cstr(b"/newroot/etc/group")?,
        contents: gr,
    });
    steps.push(Step::WriteFile {
        path: cstr(b"/newroot/etc/hosts")?,
        contents: b"127.0.0.1\tlocalhost stockade\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            .to_vec(),
    });
    steps.push(Step::WriteFile {
        path: cstr(b"/newroot/etc/hostname")?,
        contents: b"stockade\n".to_vec(),
    });
    steps.push(Step::WriteFile {
        path: cstr(b"/newroot/etc/nsswitch.conf")?,
        contents: b"passwd: files\ngroup: files\nhosts: files\n".to_vec(),
    });
    for e in ETC_ENTRIES {
        let p = Path::new(e);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(p)
                    .map_err(|err| LaunchError::Host(format!("readlink {e}: {err}")))?;
                steps.push(Step::Symlink {
                    target: cstr(target.as_os_str().as_bytes())?,
                    link: under("/newroot", p)?,
                });
            }
            Ok(m) => {
                if m.is_dir() {
                    steps.push(Step::Mkdir {
                        path: under("/newroot", p)?,
                        optional: false,
                    });
                } else {
                    steps.push(Step::Touch {
                        path: under("/newroot", p)?,
                    });
                }
                steps.push(Step::Bind {
                    src: under("/oldroot", p)?,
                    dst: under("/newroot", p)?,
                    attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
                    optional: true,
                });
            }
            Err(_) => {}
        }
    }

    // /proc for the new PID namespace, with the global knobs read-only or masked.
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/proc")?,
        optional: false,
    });
    steps.push(Step::Proc {
        target: cstr(b"/newroot/proc")?,
    });
    for e in PROC_READONLY {
        let p = under("/newroot/proc/", Path::new(e))?;
        steps.push(Step::Bind {
            src: p.clone(),
            dst: p,
            attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC,
            optional: true,
        });
    }
    for e in PROC_MASKED {
        steps.push(Step::Bind {
            src: cstr(b"/oldroot/dev/null")?,
            dst: under("/newroot/proc/", Path::new(e))?,
            attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NOEXEC,
            optional: true,
        });
    }

    // Minimal /dev.
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/dev")?,
        optional: false,
    });
    steps.push(Step::Tmpfs {
        target: cstr(b"/newroot/dev")?,
        flags: (libc::MS_NOSUID | libc::MS_NOEXEC) as libc::c_ulong,
        data: cstr(b"mode=0755,size=64k")?,
    });
    for d in DEVICES {
        let dst = under("/newroot/dev/", Path::new(d))?;
        steps.push(Step::Touch { path: dst.clone() });
        steps.push(Step::Bind {
            src: under("/oldroot/dev/", Path::new(d))?,
            dst,
            attr: ATTR_NOSUID | ATTR_NOEXEC,
            optional: false,
        });
    }
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/dev/pts")?,
        optional: false,
    });
    steps.push(Step::Devpts {
        target: cstr(b"/newroot/dev/pts")?,
    });
    steps.push(Step::Symlink {
        target: cstr(b"pts/ptmx")?,
        link: cstr(b"/newroot/dev/ptmx")?,
    });
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/dev/shm")?,
        optional: false,
    });
    match &spec.tmp {
        // With a caller-supplied /tmp (the size-limited writable area, ADR 0020), POSIX shared
        // memory lands in the same directory, so one ceiling bounds every writable place.
        TmpDir::Host(dir) => steps.push(Step::Bind {
            src: under("/oldroot", dir)?,
            dst: cstr(b"/newroot/dev/shm")?,
            attr: ATTR_NOSUID | ATTR_NODEV,
            optional: false,
        }),
        TmpDir::Private => steps.push(Step::Tmpfs {
            target: cstr(b"/newroot/dev/shm")?,
            flags: (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong,
            data: cstr(b"mode=1777,size=64m")?,
        }),
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        steps.push(Step::Symlink {
            target: cstr(target.as_bytes())?,
            link: under("/newroot/dev/", Path::new(name))?,
        });
    }

    // Private /tmp (fresh tmpfs, or a caller-supplied host directory such as a size-limited area).
    steps.push(Step::Mkdir {
        path: cstr(b"/newroot/tmp")?,
        optional: false,
    });
    match &spec.tmp {
        TmpDir::Private => steps.push(Step::Tmpfs {
            target: cstr(b"/newroot/tmp")?,
            flags: nosuid_nodev,
            data: cstr(b"mode=1777")?,
        }),
        TmpDir::Host(dir) => steps.push(Step::Bind {
            src: under("/oldroot", dir)?,
            dst: cstr(b"/newroot/tmp")?,
            attr: ATTR_NOSUID | ATTR_NODEV,
            optional: false,
        }),
    }
    steps.push(Step::Mkdir {
        path: under("/newroot", Path::new(SANDBOX_HOME))?,
        optional: false,
    });

    // Caller binds, parents before children.
    let ws_inside = spec.workspace_inside().to_path_buf();
    let mut binds: Vec<(PathBuf, Option<&Path>, bool)> = Vec::new(); // (inside, host src, rw)
    for ro in &spec.ro_paths {
        binds.push((ro.clone(), Some(ro.as_path()), false));
    }
    binds.push((ws_inside.clone(), None, true));
    binds.sort_by_key(|(p, _, _)| p.components().count());
    for (inside, src, rw) in &binds {
        let is_dir = match src {
            Some(s) => std::fs::metadata(s).map(|m| m.is_dir()).unwrap_or(true),
            None => true,
        };
        if is_dir {
            mkdir_chain(&mut steps, "/newroot", inside)?;
        } else {
            if let Some(parent) = inside.parent() {
                mkdir_chain(&mut steps, "/newroot", parent)?;
            }
            steps.push(Step::Touch {
                path: under("/newroot", inside)?,
            });
        }
        let dst = under("/newroot", inside)?;
        if *rw {
            match &spec.workspace {
                WorkspaceView::Bind(host) => steps.push(Step::Bind {
                    src: under("/oldroot", host)?,
                    dst,
                    attr: ATTR_NOSUID | ATTR_NODEV,
                    optional: false,
                }),
                WorkspaceView::Overlay {
                    lower, upper, work, ..
                } => {
                    let mut data = Vec::new();
                    data.extend_from_slice(b"lowerdir=/oldroot");
                    data.extend_from_slice(&escape_overlay(lower));
                    data.extend_from_slice(b",upperdir=/oldroot");
                    data.extend_from_slice(&escape_overlay(upper));
                    data.extend_from_slice(b",workdir=/oldroot");
                    data.extend_from_slice(&escape_overlay(work));
                    data.extend_from_slice(b",userxattr");
                    steps.push(Step::Overlay {
                        target: dst,
                        data: cstr(&data)?,
                    });
                }
            }
        } else if let Some(src) = src {
            steps.push(Step::Bind {
                src: under("/oldroot", src)?,
                dst,
                attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
                optional: false,
            });
        }
    }

    steps.push(Step::PivotFinal {
        new_root: cstr(b"/newroot")?,
    });
    steps.push(Step::SetAttr {
        path: cstr(b"/")?,
        attr: ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV,
        recursive: false,
    });

    Ok(MountPlan {
        steps,
        ro_inside: spec.ro_paths.clone(),
        workspace_inside: ws_inside,
    })
}

/// Overlay options separate with `,` and `:`; escape them with a backslash.
fn escape_overlay(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if b == b',' || b == b':' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_round_trips() {
        let f = SetupFailure {
            stage: Stage::Landlock,
            index: 7,
            errno: libc::EPERM,
        };
        assert_eq!(SetupFailure::decode(&f.encode()), Some(f));
        assert_eq!(SetupFailure::decode(&[0u8; 12]), None);
    }

    #[test]
    fn passwd_never_mentions_shadow_and_maps_uid() {
        let (pw, gr) = passwd(1000, 1000, "/tmp/home");
        let pw = String::from_utf8(pw).unwrap();
        assert!(pw.contains("sandbox:x:1000:1000"));
        assert!(String::from_utf8(gr).unwrap().contains("sandbox:x:1000:"));
    }

    #[test]
    fn overlay_options_are_escaped() {
        assert_eq!(escape_overlay(Path::new("/a,b:c")), b"/a\\,b\\:c".to_vec());
    }
}
