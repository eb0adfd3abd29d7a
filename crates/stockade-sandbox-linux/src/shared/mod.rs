//! An attestation shared by the processes of one boot (ADR-0015).
//!
//! A live probe proves the host-level facts (namespaces cut the host off, Landlock and the
//! seccomp filter refuse, ceilings stop a canary, the tree dies) in tens to hundreds of
//! milliseconds. Those facts belong to the kernel, its configuration and this binary, not to
//! one process, so [`probe_shared`] reuses a live probe's outcome across processes while
//! nothing it depended on changed:
//!
//! - the record is bound to a [`HostKey`]: boot id, kernel release and build, the identity of
//!   this executable (device, inode, size, modification and change times), effective uid and
//!   gid, Landlock ABI, the caller's cgroup membership and the cgroup hierarchies' devices, the
//!   user-namespace sysctls, the active LSMs, loaded live patches and the scratch directory;
//!   any difference means a new live probe;
//! - it expires after a maximum age ([`DEFAULT_MAX_AGE`]);
//! - only a probe in which every self-test that ran held is shared: a failure is never reused;
//! - the store is a directory only the caller's uid can enter (root: `/run/stockade/attestation`,
//!   otherwise `$XDG_RUNTIME_DIR/stockade/attestation`); a directory or record with another
//!   owner, looser permissions, a symlink or several links is refused and reported;
//! - every launch still ends with the seal (ADR-0015): the worker itself checks, just before
//!   `execve`, that `no_new_privs`, the seccomp filter, the empty capability sets and Landlock
//!   are in force on it, and fails closed otherwise.
//!
//! The per-process [`crate::probe()`] is unchanged; `stockade run` and the backend keep probing
//! live.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use stockade_capabilities::SandboxCapabilities;

use crate::probe::ProbeOutcome;

/// Version of the record format; a record of another format is ignored.
pub const FORMAT: u32 = 1;

/// How long a shared attestation is reused by default.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);

/// Environment variable naming the store directory instead of the default (tests, operators
/// with an unusual layout). The directory must pass the same ownership checks.
pub const DIR_ENV: &str = "STOCKADE_ATTESTATION_DIR";

/// Largest record read back (a real one is a few KiB).
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Which probe a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Isolation only ([`crate::probe_isolation`]): the ceilings are reported "not probed".
    Isolation,
    /// Everything, resource ceilings included ([`crate::probe()`]).
    Full,
}

impl Scope {
    fn file_name(self) -> &'static str {
        match self {
            Scope::Isolation => "isolation.json",
            Scope::Full => "full.json",
        }
    }

    /// Scopes whose record can answer a request for `self`, best first.
    fn answered_by(self) -> &'static [Scope] {
        match self {
            Scope::Isolation => &[Scope::Full, Scope::Isolation],
            Scope::Full => &[Scope::Full],
        }
    }
}

/// Where an attestation came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum Source {
    /// Probed live by this process.
    Live {
        /// Where the outcome was shared for later processes, if it was.
        shared_at: Option<PathBuf>,
    },
    /// A live probe of an earlier process of this boot, on an identical host key.
    Shared {
        /// The record.
        path: PathBuf,
        /// Its age when it was read.
        age_ms: u64,
        /// Which probe it holds.
        scope: Scope,
    },
}

/// What a shared probe returns.
#[derive(Clone, Debug)]
pub struct SharedProbe {
    /// The attestation and its checks.
    pub outcome: ProbeOutcome,
    /// Where it came from.
    pub source: Source,
    /// Why the store could not be used, when that deserves the operator's attention (a record
    /// or directory failing the ownership checks, an unreadable record). Silent reasons
    /// (no record yet, expired, host changed) are not reported.
    pub warning: Option<String>,
}

/// The identity of this executable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExeIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Everything a shared attestation is bound to (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostKey {
    backend_version: String,
    boot_id: String,
    kernel_release: String,
    kernel_build: String,
    exe: ExeIdentity,
    euid: u32,
    egid: u32,
    landlock_abi: i32,
    cgroup_membership: String,
    cgroup_mounts: Vec<String>,
    sysctls: BTreeMap<String, String>,
    lsm: String,
    livepatches: Vec<String>,
    scratch: PathBuf,
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

impl HostKey {
    /// The key of this process on this host now.
    pub fn current() -> Result<HostKey, String> {
        let boot_id = read_trim("/proc/sys/kernel/random/boot_id");
        if boot_id.is_empty() {
            return Err("cannot read the boot id".into());
        }
        let exe = fs::metadata("/proc/self/exe")
            .map_err(|e| format!("cannot stat this executable: {e}"))?;
        let exe = ExeIdentity {
            dev: exe.dev(),
            ino: exe.ino(),
            size: exe.size(),
            mtime: (exe.mtime(), exe.mtime_nsec()),
            ctime: (exe.ctime(), exe.ctime_nsec()),
        };
        // Settings that decide whether unprivileged namespaces may be created. (Any other
        // change that stops a namespace, mount, Landlock or seccomp step from working makes
        // the launch itself fail closed; these are here so such a host is re-probed and
        // refused with a remedy instead.)
        let mut sysctls = BTreeMap::new();
        for f in [
            "/proc/sys/user/max_user_namespaces",
            "/proc/sys/kernel/unprivileged_userns_clone",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ] {
            if let Ok(v) = fs::read_to_string(f) {
                sysctls.insert(f.to_owned(), v.trim().to_owned());
            }
        }
        // The cgroup hierarchies by superblock: remounting or replacing one changes its device.
        let cgroup_mounts = [
            "/sys/fs/cgroup",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup/memory",
            "/sys/fs/cgroup/pids",
            "/sys/fs/cgroup/cpu",
            "/sys/fs/cgroup/cpuacct",
            "/sys/fs/cgroup/freezer",
        ]
        .iter()
        .filter_map(|p| fs::metadata(p).ok().map(|m| format!("{p} {}", m.dev())))
        .collect();
        let mut livepatches: Vec<String> = fs::read_dir("/sys/kernel/livepatch")
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        livepatches.sort();
        let (euid, egid) = crate::sys::ids();
        Ok(HostKey {
            backend_version: env!("CARGO_PKG_VERSION").to_owned(),
            boot_id,
            kernel_release: read_trim("/proc/sys/kernel/osrelease"),
            kernel_build: read_trim("/proc/sys/kernel/version"),
            exe,
            euid,
            egid,
            landlock_abi: crate::sys::landlock_abi(),
            cgroup_membership: read_trim("/proc/self/cgroup"),
            cgroup_mounts,
            sysctls,
            lsm: read_trim("/sys/kernel/security/lsm"),
            livepatches,
            scratch: std::env::temp_dir(),
        })
    }
}

/// One stored attestation.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    format: u32,
    scope: Scope,
    key: HostKey,
    created_unix_ms: u64,
    capabilities: SandboxCapabilities,
    checks: Vec<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// True when every self-test line (`area PASS|FAIL detail`) held (only such outcomes are
/// shared).
pub fn every_check_held(checks: &[String]) -> bool {
    !checks.is_empty() && checks.iter().all(|l| l.split(' ').nth(1) == Some("PASS"))
}

/// The store directory for this caller, or `None` when there is none (an unprivileged caller
/// without `XDG_RUNTIME_DIR`): then nothing is shared.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if crate::sys::ids().0 == 0 {
        return Some(PathBuf::from("/run/stockade/attestation"));
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("stockade").join("attestation"))
}

/// Checks that `dir` is a real directory of this uid that nobody else can enter, and that its
/// parent cannot be used to swap it.
fn check_dir(dir: &Path) -> Result<(), String> {
    let (euid, _) = crate::sys::ids();
    let md = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !md.file_type().is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if md.uid() != euid {
        return Err(format!(
            "{} is owned by uid {}, not {euid}",
            dir.display(),
            md.uid()
        ));
    }
    if md.mode() & 0o077 != 0 {
        return Err(format!(
            "{} has mode {:o}; only its owner may enter it (chmod 700)",
            dir.display(),
            md.mode() & 0o7777
        ));
    }
    if let Some(parent) = dir.parent() {
        let pm = fs::metadata(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        let sticky = pm.mode() & 0o1000 != 0;
        if (pm.uid() != euid && pm.uid() != 0) || (pm.mode() & 0o022 != 0 && !sticky) {
            return Err(format!(
                "{} (the parent of the attestation store) can be changed by another user",
                parent.display()
            ));
        }
    }
    Ok(())
}

/// Creates the store directory (and, for the default root store, `/run/stockade`) with mode 700.
fn ensure_dir(dir: &Path) -> Result<(), String> {
    if fs::symlink_metadata(dir).is_err() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    check_dir(dir)
}

/// Why a stored record was not used.
enum Miss {
    /// Nothing to report: absent, expired, another host key.
    Quiet,
    /// Worth a warning: the record or its directory failed a check.
    Loud(String),
}

fn load(dir: &Path, scope: Scope, key: &HostKey, max_age: Duration) -> Result<Record, Miss> {
    let path = dir.join(scope.file_name());
    let mut f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Quiet),
        Err(e) => return Err(Miss::Loud(format!("{}: {e}", path.display()))),
    };
    let md = f
        .metadata()
        .map_err(|e| Miss::Loud(format!("{}: {e}", path.display())))?;
    let (euid, _) = crate::sys::ids();
    if !md.file_type().is_file()
        || md.uid() != euid
        || md.mode() & 0o077 != 0
        || md.nlink() != 1
        || md.len() > MAX_RECORD_BYTES
    {
        return Err(Miss::Loud(format!(
            "{} is not a private regular file of uid {euid} (owner {}, mode {:o}, {} links, {} bytes)",
            path.display(),
            md.uid(),
            md.mode() & 0o7777,
            md.nlink(),
            md.len()
        )));
    }
    let mut text = String::new();
    Read::by_ref(&mut f)
        .take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| Miss::Loud(format!("{}: {e}", path.display())))?;
    let rec: Record = serde_json::from_str(&text)
        .map_err(|e| Miss::Loud(format!("{} is not a valid record: {e}", path.display())))?;
    if rec.format != FORMAT || rec.scope != scope || &rec.key != key {
        return Err(Miss::Quiet);
    }
    let now = now_ms();
    if rec.created_unix_ms > now
        || Duration::from_millis(now - rec.created_unix_ms) > max_age
        || max_age.is_zero()
    {
        return Err(Miss::Quiet);
    }
    if !every_check_held(&rec.checks) {
        return Err(Miss::Loud(format!(
            "{} holds a failed self-test, which is never shared",
            path.display()
        )));
    }
    Ok(rec)
}

/// Stores `outcome` for later processes with the same host key. Refuses an outcome in which a
/// self-test failed. The record is written to a new private file and renamed into place.
pub fn share(
    dir: &Path,
    scope: Scope,
    key: &HostKey,
    outcome: &ProbeOutcome,
) -> Result<PathBuf, String> {
    if !every_check_held(&outcome.checks) {
        return Err("a self-test failed; a failed probe is never shared".into());
    }
    ensure_dir(dir)?;
    let rec = Record {
        format: FORMAT,
        scope,
        key: key.clone(),
        created_unix_ms: now_ms(),
        capabilities: outcome.capabilities.clone(),
        checks: outcome.checks.clone(),
    };
    let text = serde_json::to_string(&rec).map_err(|e| e.to_string())?;
    let tmp = dir.join(format!(
        ".{}.{}.{:x}.tmp",
        scope.file_name(),
        std::process::id(),
        now_ms()
    ));
    let dest = dir.join(scope.file_name());
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| fs::rename(&tmp, &dest));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", dest.display()));
    }
    Ok(dest)
}

/// The attestation for a request of `scope`: a shared record no older than `max_age` on an
/// identical host key when there is one (a zero `max_age` never reuses), otherwise a live probe
/// of this process, shared for later ones when every self-test held.
pub fn probe_shared(scope: Scope, max_age: Duration) -> SharedProbe {
    probe_shared_in(default_dir().as_deref(), scope, max_age, || match scope {
        Scope::Isolation => crate::probe_isolation(),
        Scope::Full => crate::probe(),
    })
}

/// [`probe_shared`] with an explicit store (`None`: share nothing) and live probe.
pub fn probe_shared_in(
    dir: Option<&Path>,
    scope: Scope,
    max_age: Duration,
    live: impl FnOnce() -> ProbeOutcome,
) -> SharedProbe {
    let key = HostKey::current();
    let mut warning = None;
    if let (Some(dir), Ok(key)) = (dir, &key) {
        match check_dir(dir) {
            Ok(()) => {
                for s in scope.answered_by() {
                    match load(dir, *s, key, max_age) {
                        Ok(rec) => {
                            return SharedProbe {
                                source: Source::Shared {
                                    path: dir.join(s.file_name()),
                                    age_ms: now_ms().saturating_sub(rec.created_unix_ms),
                                    scope: *s,
                                },
                                outcome: ProbeOutcome {
                                    capabilities: rec.capabilities,
                                    checks: rec.checks,
                                },
                                warning: None,
                            };
                        }
                        Err(Miss::Loud(w)) => warning = Some(w),
                        Err(Miss::Quiet) => {}
                    }
                }
            }
            Err(_) if fs::symlink_metadata(dir).is_err() => {}
            Err(w) => warning = Some(w),
        }
    }
    let outcome = live();
    let mut shared_at = None;
    if let (Some(dir), Ok(key), None) = (dir, &key, &warning)
        && every_check_held(&outcome.checks)
    {
        match share(dir, scope, key, &outcome) {
            Ok(p) => shared_at = Some(p),
            Err(w) => warning = Some(w),
        }
    }
    SharedProbe {
        outcome,
        source: Source::Live { shared_at },
        warning,
    }
}

#[cfg(test)]
mod tests;
