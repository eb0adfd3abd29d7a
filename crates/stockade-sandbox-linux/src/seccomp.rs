//! The seccomp filter: a deny-list of kernel surface agents never need, built with
//! `seccompiler`, plus a hand-written prologue `seccompiler` lacks (x32 guard, `clone3`).
//!
//! Denied calls fail with `EPERM` (the process keeps running and sees an ordinary error);
//! `clone3` fails with `ENOSYS` so libc falls back to `clone`, whose flags the filter can
//! inspect. Argument checks compare exact values (`Eq`/`Ne` on the 32-bit argument the kernel
//! reads), never bit masks — except `clone`/`unshare` flags, where each namespace bit is
//! tested on its own (a flags word is a bit set by definition).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

/// Why a rule is in the filter (for the listing and docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleDoc {
    /// System call name.
    pub syscall: &'static str,
    /// When it is denied (`always` or the argument condition).
    pub when: String,
    /// Errno returned.
    pub errno: &'static str,
}

const X32_BIT: u32 = 0x4000_0000;
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Namespace flags refused in `clone` and `unshare`.
const NS_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", libc::CLONE_NEWNS as u64),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS as u64),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC as u64),
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER as u64),
    ("CLONE_NEWPID", libc::CLONE_NEWPID as u64),
    ("CLONE_NEWNET", libc::CLONE_NEWNET as u64),
];
const CLONE_NEWTIME: u64 = 0x80;

/// Always-denied system calls.
fn always_denied() -> Vec<(&'static str, i64)> {
    vec![
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("process_madvise", libc::SYS_process_madvise),
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        ("kcmp", libc::SYS_kcmp),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("chroot", libc::SYS_chroot),
        ("open_tree", libc::SYS_open_tree),
        ("open_tree_attr", SYS_OPEN_TREE_ATTR),
        ("move_mount", libc::SYS_move_mount),
        ("fsopen", libc::SYS_fsopen),
        ("fsconfig", libc::SYS_fsconfig),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("setns", libc::SYS_setns),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("keyctl", libc::SYS_keyctl),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("reboot", libc::SYS_reboot),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("clock_adjtime", libc::SYS_clock_adjtime),
        ("adjtimex", libc::SYS_adjtimex),
        ("acct", libc::SYS_acct),
        ("quotactl", libc::SYS_quotactl),
        ("quotactl_fd", libc::SYS_quotactl_fd),
        ("syslog", libc::SYS_syslog),
        ("vhangup", libc::SYS_vhangup),
        ("iopl", libc::SYS_iopl),
        ("ioperm", libc::SYS_ioperm),
        ("uselib", libc::SYS_uselib),
        ("lookup_dcookie", libc::SYS_lookup_dcookie),
        ("fanotify_init", libc::SYS_fanotify_init),
    ]
}

fn dword(arg: u8, op: Op, v: u64) -> Result<Cond, seccompiler::BackendError> {
    Cond::new(arg, Len::Dword, op, v)
}

/// Builds the rule map and its documentation.
type RuleMap = BTreeMap<i64, Vec<SeccompRule>>;

fn rules() -> Result<(RuleMap, Vec<RuleDoc>), seccompiler::BackendError> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut docs = Vec::new();
    for (name, nr) in always_denied() {
        map.insert(nr, vec![]);
        docs.push(RuleDoc {
            syscall: name,
            when: "always".into(),
            errno: "EPERM",
        });
    }
    // Terminal injection: exact 32-bit comparison of the ioctl request (the kernel reads an
    // unsigned int, so a 64-bit compare could be bypassed with high bits set).
    let mut ioctl = Vec::new();
    for (n, v) in [("TIOCSTI", libc::TIOCSTI), ("TIOCLINUX", libc::TIOCLINUX)] {
        ioctl.push(SeccompRule::new(vec![dword(1, Op::Eq, v)?])?);
        docs.push(RuleDoc {
            syscall: "ioctl",
            when: format!("request == {n} ({v:#x})"),
            errno: "EPERM",
        });
    }
    map.insert(libc::SYS_ioctl, ioctl);
    // Socket families other than unix, inet, inet6 (exact comparisons on the int domain).
    let allowed = [
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
    ];
    for (name, nr) in [
        ("socket", libc::SYS_socket),
        ("socketpair", libc::SYS_socketpair),
    ] {
        let conds = allowed
            .iter()
            .map(|&f| dword(0, Op::Ne, f))
            .collect::<Result<Vec<_>, _>>()?;
        map.insert(nr, vec![SeccompRule::new(conds)?]);
        docs.push(RuleDoc {
            syscall: name,
            when: "domain not in {AF_UNIX, AF_INET, AF_INET6}".into(),
            errno: "EPERM",
        });
    }
    // personality: only queries (0xffffffff) and PER_LINUX (0) pass.
    map.insert(
        libc::SYS_personality,
        vec![SeccompRule::new(vec![
            dword(0, Op::Ne, 0)?,
            dword(0, Op::Ne, 0xffff_ffff)?,
        ])?],
    );
    docs.push(RuleDoc {
        syscall: "personality",
        when: "persona not in {PER_LINUX, query}".into(),
        errno: "EPERM",
    });
    // Namespace creation (nested user namespaces and friends).
    let mut clone_rules = Vec::new();
    let mut unshare_rules = Vec::new();
    for (n, bit) in NS_FLAGS {
        clone_rules.push(SeccompRule::new(vec![Cond::new(
            0,
            Len::Qword,
            Op::MaskedEq(*bit),
            *bit,
        )?])?);
        unshare_rules.push(SeccompRule::new(vec![Cond::new(
            0,
            Len::Qword,
            Op::MaskedEq(*bit),
            *bit,
        )?])?);
        docs.push(RuleDoc {
            syscall: "clone",
            when: format!("flags has {n}"),
            errno: "EPERM",
        });
        docs.push(RuleDoc {
            syscall: "unshare",
            when: format!("flags has {n}"),
            errno: "EPERM",
        });
    }
    unshare_rules.push(SeccompRule::new(vec![Cond::new(
        0,
        Len::Qword,
        Op::MaskedEq(CLONE_NEWTIME),
        CLONE_NEWTIME,
    )?])?);
    docs.push(RuleDoc {
        syscall: "unshare",
        when: "flags has CLONE_NEWTIME".into(),
        errno: "EPERM",
    });
    map.insert(libc::SYS_clone, clone_rules);
    map.insert(libc::SYS_unshare, unshare_rules);
    docs.sort_by(|a, b| (a.syscall, &a.when).cmp(&(b.syscall, &b.when)));
    Ok((map, docs))
}

/// Error building the filter (a bug in the rule table, never a host condition).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct SeccompBuildError(String);

/// The full BPF program installed in every worker (x32 guard and `clone3` prologue first).
pub fn program() -> Result<Vec<libc::sock_filter>, SeccompBuildError> {
    let (map, _) = rules().map_err(|e| SeccompBuildError(e.to_string()))?;
    let filter = SeccompFilter::new(
        map,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::x86_64,
    )
    .map_err(|e| SeccompBuildError(e.to_string()))?;
    let bpf: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompBuildError(e.to_string()))?;
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA);
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut out = vec![
        // A = seccomp_data.nr
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        // x32 ABI numbers carry bit 30: refuse them all (seccompiler has no guard for this).
        jump(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, X32_BIT, 0, 1),
        stmt(libc::BPF_RET | libc::BPF_K, errno(libc::ENOSYS)),
        // clone3 passes flags in memory the filter cannot read: make libc fall back to clone.
        jump(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            libc::SYS_clone3 as u32,
            0,
            1,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, errno(libc::ENOSYS)),
    ];
    out.extend(bpf.into_iter().map(|i| libc::sock_filter {
        code: i.code,
        jt: i.jt,
        jf: i.jf,
        k: i.k,
    }));
    Ok(out)
}

/// The rule listing (stable, sorted): what the filter refuses and how.
pub fn listing() -> Result<Vec<RuleDoc>, SeccompBuildError> {
    let (_, mut docs) = rules().map_err(|e| SeccompBuildError(e.to_string()))?;
    docs.insert(
        0,
        RuleDoc {
            syscall: "clone3",
            when: "always".into(),
            errno: "ENOSYS",
        },
    );
    docs.insert(
        0,
        RuleDoc {
            syscall: "<x32 abi>",
            when: "nr & 0x40000000".into(),
            errno: "ENOSYS",
        },
    );
    Ok(docs)
}

/// The listing as text, one rule per line (for snapshots and `stockade probe`).
pub fn listing_text() -> Result<String, SeccompBuildError> {
    let mut s = String::new();
    for d in listing()? {
        s.push_str(&format!("{:<20} {:<6} {}\n", d.syscall, d.errno, d.when));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_builds_and_starts_with_guards() {
        let p = program().unwrap();
        assert!(p.len() > 60, "program too short: {}", p.len());
        assert_eq!(p[1].k, X32_BIT);
        assert_eq!(p[3].k, libc::SYS_clone3 as u32);
    }

    #[test]
    fn listing_snapshot() {
        insta::assert_snapshot!(listing_text().unwrap());
    }
}
