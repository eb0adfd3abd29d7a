//! The writable-disk ceiling: one size-limited tmpfs holding every writable place of a session.
//!
//! [`WritableArea::create`] mounts a tmpfs of exactly the ceiling's size (and a bounded number
//! of inodes) at a host directory and creates `upper/` and `work/` (the overlay's writable
//! layer and its work directory, so the session workspace's writes land here) and `tmp/` (the
//! sandbox's private `/tmp`). Because they share one filesystem, one limit bounds the
//! workspace and `/tmp` together; a write past it fails in the worker with `ENOSPC`, enforced
//! by the kernel at the moment of the write. See `docs/adr/0020-writable-disk-limit.md`.
//!
//! The mount lives in the supervisor's mount namespace, so after the worker is gone the
//! supervisor still reads `upper/` (capture does); [`WritableArea::unmount`] is the separate,
//! explicit step after capture.
//!
//! What this module does **not** do: it mounts nothing for unprivileged callers yet (the
//! error names the remedy), and it does not build the overlay (the launcher does, inside the
//! worker's mount namespace, from these directories).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

/// Why a writable area cannot be created or removed; every message names a remedy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiskError {
    /// The ceiling is too small to hold anything.
    #[error(
        "writable-disk ceiling of {0} bytes is below the 64 KiB minimum; remedy: pass --disk 64K or more"
    )]
    TooSmall(u64),
    /// Mounting needs `CAP_SYS_ADMIN` (root).
    #[error(
        "mounting the size-limited tmpfs at {path} was refused ({source}); remedy: run stockade as \
         root (the writable-disk ceiling for unprivileged callers, a tmpfs mounted inside a user \
         namespace and handed back as a mount fd, is described in ADR 0020 but not built yet)"
    )]
    NotPermitted {
        /// The mount point.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Any other filesystem error.
    #[error(
        "cannot {op} {path}: {source}; remedy: check that the directory exists on a local filesystem and is not in use"
    )]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

fn io_err(op: &'static str, path: &Path, source: impl Into<io::Error>) -> DiskError {
    DiskError::Io {
        op,
        path: path.to_owned(),
        source: source.into(),
    }
}

/// Bytes and inodes in use, from `statvfs` of the tmpfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DiskUsage {
    /// Bytes allocated (data and directories), in whole pages.
    pub bytes_used: u64,
    /// The size ceiling as the kernel applies it (page-rounded).
    pub bytes_limit: u64,
    /// Inodes in use.
    pub inodes_used: u64,
    /// The inode ceiling.
    pub inodes_limit: u64,
}

impl DiskUsage {
    /// Is the area full (less than one 4 KiB page, or one inode, left)? A write that failed with
    /// `ENOSPC` leaves it so.
    pub fn exhausted(&self) -> bool {
        self.bytes_limit.saturating_sub(self.bytes_used) < 4096
            || self.inodes_limit.saturating_sub(self.inodes_used) < 1
    }
}

/// A mounted, size-limited tmpfs holding a session's `upper/`, `work/` and `tmp/`.
#[derive(Debug)]
pub struct WritableArea {
    root: PathBuf,
    bytes: u64,
    mounted: bool,
}

/// The inode ceiling for a byte ceiling: one inode per 4 KiB, at least 4096, at most 4 Mi.
///
/// Inodes cost kernel memory that the byte size does not count, so a worker creating empty
/// files without end is stopped by this bound instead.
pub fn inode_limit(bytes: u64) -> u64 {
    (bytes / 4096).clamp(4096, 4 << 20)
}

impl WritableArea {
    /// Mounts a tmpfs of `bytes` at `dir` (created if missing) with `nosuid,nodev`, mode 0755,
    /// and `nr_inodes` from [`inode_limit`], then creates `upper/`, `work/` (0755) and `tmp/`
    /// (1777).
    ///
    /// # Errors
    /// [`DiskError::NotPermitted`] without `CAP_SYS_ADMIN`; [`DiskError::TooSmall`] below 64 KiB;
    /// [`DiskError::Io`] otherwise. On error nothing stays mounted.
    pub fn create(dir: &Path, bytes: u64) -> Result<Self, DiskError> {
        if bytes < 64 << 10 {
            return Err(DiskError::TooSmall(bytes));
        }
        fs::create_dir_all(dir).map_err(|e| io_err("create", dir, e))?;
        let data = format!(
            "size={bytes},nr_inodes={},mode=0755,huge=never",
            inode_limit(bytes)
        );
        let data = std::ffi::CString::new(data)
            .map_err(|e| io_err("encode options for", dir, io::Error::other(e)))?;
        match rustix::mount::mount(
            "stockade-disk",
            dir,
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            data.as_c_str(),
        ) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::PERM || e == rustix::io::Errno::ACCESS => {
                return Err(DiskError::NotPermitted {
                    path: dir.to_owned(),
                    source: e.into(),
                });
            }
            Err(e) => return Err(io_err("mount tmpfs at", dir, e)),
        }
        let area = Self {
            root: dir.to_owned(),
            bytes,
            mounted: true,
        };
        for (sub, mode) in [("upper", 0o755), ("work", 0o755), ("tmp", 0o1777)] {
            let p = dir.join(sub);
            rustix::fs::mkdir(&p, rustix::fs::Mode::from_raw_mode(mode))
                .map_err(|e| io_err("create", &p, e))?;
            // mkdir honours the umask: set the mode exactly.
            rustix::fs::chmod(&p, rustix::fs::Mode::from_raw_mode(mode))
                .map_err(|e| io_err("chmod", &p, e))?;
        }
        Ok(area)
    }

    /// Hands `upper/`, `work/` and `tmp/` to the worker's host uid and gid (when the worker
    /// runs as a mapped non-root user).
    ///
    /// # Errors
    /// [`DiskError::Io`] when `chown` fails.
    pub fn chown_to(&self, uid: u32, gid: u32) -> Result<(), DiskError> {
        for sub in ["upper", "work", "tmp"] {
            let p = self.root.join(sub);
            rustix::fs::chown(
                &p,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(|e| io_err("chown", &p, e))?;
        }
        Ok(())
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The overlay's writable layer: exactly the session's changes (capture reads it).
    pub fn upper(&self) -> PathBuf {
        self.root.join("upper")
    }

    /// The overlay's work directory (same filesystem as `upper/`, as overlayfs requires).
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    /// The sandbox's private `/tmp`.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The ceiling in bytes as requested.
    pub fn limit(&self) -> u64 {
        self.bytes
    }

    /// Bytes and inodes in use now.
    ///
    /// # Errors
    /// [`DiskError::Io`] when `statvfs` fails.
    pub fn usage(&self) -> Result<DiskUsage, DiskError> {
        let s = rustix::fs::statvfs(&self.root).map_err(|e| io_err("statvfs", &self.root, e))?;
        Ok(DiskUsage {
            bytes_used: s.f_blocks.saturating_sub(s.f_bfree) * s.f_frsize,
            bytes_limit: s.f_blocks * s.f_frsize,
            inodes_used: s.f_files.saturating_sub(s.f_ffree),
            inodes_limit: s.f_files,
        })
    }

    /// Bytes in use now (data and directories, page-rounded).
    ///
    /// # Errors
    /// As [`WritableArea::usage`].
    pub fn bytes_used(&self) -> Result<u64, DiskError> {
        self.usage().map(|u| u.bytes_used)
    }

    /// Takes ownership of an area that is already mounted at `dir` (a stopped session being
    /// reattached). Nothing is mounted or checked beyond the caller's word: check
    /// [`is_tmpfs_mount`] first when the mount may be gone (after a reboot).
    pub fn adopt(dir: &Path, bytes: u64) -> Self {
        WritableArea {
            root: dir.to_path_buf(),
            bytes,
            mounted: true,
        }
    }

    /// Gives up ownership without unmounting: the area stays mounted for a later
    /// [`WritableArea::adopt`] (a stopped, reattachable session).
    pub fn keep_mounted(mut self) {
        self.mounted = false;
    }

    /// Unmounts the tmpfs, discarding its content; falls back to a lazy detach when something
    /// still holds it busy (the content is then freed when the last user goes away).
    ///
    /// # Errors
    /// [`DiskError::Io`] when even the lazy detach fails.
    pub fn unmount(mut self) -> Result<(), DiskError> {
        self.mounted = false;
        unmount(&self.root)
    }
}

/// Prefix of the per-run area directories made by [`run_area_dir`].
const RUN_AREA_PREFIX: &str = "stockade-area-";

fn start_time_of(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A fresh directory path under `base` for one run's writable area, named after this
/// supervisor (`stockade-area-<pid>-<start time>-<n>`) so [`sweep_stale_areas`] can tell
/// when its owner is gone.
pub fn run_area_dir(base: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let pid = std::process::id();
    base.join(format!(
        "{RUN_AREA_PREFIX}{pid}-{}-{}",
        start_time_of(pid).unwrap_or(0),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// Unmounts (lazily if busy) and removes the run areas under `base` whose supervisor is gone
/// (SIGKILLed before it could unmount), and returns them. Areas of live supervisors, and
/// anything not named by [`run_area_dir`], are left alone.
pub fn sweep_stale_areas(base: &Path) -> Vec<PathBuf> {
    let Ok(mi) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut swept = Vec::new();
    for line in mi.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        if !post.starts_with("tmpfs stockade-disk ") {
            continue;
        }
        let Some(mp) = pre.split(' ').nth(4) else {
            continue;
        };
        let mp = PathBuf::from(mp);
        if mp.parent() != Some(base) {
            continue;
        }
        let Some(name) = mp.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(rest) = name.strip_prefix(RUN_AREA_PREFIX) else {
            continue;
        };
        let mut it = rest.split('-');
        let (Some(Ok(pid)), Some(Ok(start))) = (
            it.next().map(str::parse::<u32>),
            it.next().map(str::parse::<u64>),
        ) else {
            continue;
        };
        if start_time_of(pid) == Some(start) {
            continue;
        }
        if unmount(&mp).is_ok() {
            let _ = fs::remove_dir(&mp);
            swept.push(mp);
        }
    }
    swept
}

/// Is `dir` the mount point of a tmpfs in this process's mount namespace?
pub fn is_tmpfs_mount(dir: &Path) -> bool {
    let Ok(mi) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = dir.to_string_lossy();
    mi.lines().any(|l| {
        let mut halves = l.splitn(2, " - ");
        let pre = halves.next().unwrap_or("");
        let post = halves.next().unwrap_or("");
        pre.split(' ').nth(4) == Some(want.as_ref()) && post.starts_with("tmpfs ")
    })
}

fn unmount(root: &Path) -> Result<(), DiskError> {
    match rustix::mount::unmount(root, UnmountFlags::NOFOLLOW) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::BUSY) => {
            rustix::mount::unmount(root, UnmountFlags::NOFOLLOW | UnmountFlags::DETACH)
                .map_err(|e| io_err("detach", root, e))
        }
        Err(e) => Err(io_err("unmount", root, e)),
    }
}

impl Drop for WritableArea {
    fn drop(&mut self) {
        if self.mounted {
            let _ = unmount(&self.root);
        }
    }
}

/// What the disk canary showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskEvidence {
    /// What was observed, for the probe report.
    pub detail: String,
}

/// Proves the writable-disk ceiling on this host: in a 1 MiB area under `scratch`, a 4 MiB
/// write split between `upper/` and `tmp/` must fail with `ENOSPC` at the ceiling, usage must
/// stay within it, and a file-creation flood must hit the inode bound. The area is unmounted
/// before returning.
///
/// The write is the kernel's answer to the writing process whoever it is, so the supervisor
/// writes itself; the sandboxed path (overlay over this tmpfs) is exercised by the workspace
/// tests.
///
/// # Errors
/// [`DiskError`] when the area cannot be set up (the message names the remedy), or
/// [`DiskError::Io`] with `ErrorKind::Other` explaining that the ceiling did not hold.
pub fn prove_disk(scratch: &Path) -> Result<DiskEvidence, DiskError> {
    use std::io::Write;
    const LIMIT: u64 = 1 << 20;
    let dir = scratch.join(format!("stockade-disk-probe-{}", std::process::id()));
    let area = WritableArea::create(&dir, LIMIT)?;
    let chunk = vec![0x5au8; 64 << 10];
    let mut written = 0u64;
    let mut enospc = None;
    'outer: for target in [area.upper().join("fill"), area.tmp().join("fill")] {
        let mut f = fs::File::create(&target).map_err(|e| io_err("create", &target, e))?;
        for _ in 0..32 {
            match f.write(&chunk) {
                Ok(n) => written += n as u64,
                Err(e) => {
                    enospc = Some((target.clone(), e));
                    break 'outer;
                }
            }
        }
    }
    let used = area.usage()?;
    let mut inode_err = None;
    let flood = area.tmp().join("flood");
    fs::create_dir(&flood).map_err(|e| io_err("create", &flood, e))?;
    // The bytes are gone; clear them so the inode bound is what stops the flood.
    let _ = fs::remove_file(area.upper().join("fill"));
    let _ = fs::remove_file(area.tmp().join("fill"));
    for i in 0..inode_limit(LIMIT) + 16 {
        if let Err(e) = fs::File::create(flood.join(i.to_string())) {
            inode_err = Some(e);
            break;
        }
    }
    let inodes = area.usage()?;
    area.unmount()?;
    let _ = fs::remove_dir(&dir);
    let ok_bytes = matches!(&enospc, Some((_, e)) if e.raw_os_error() == Some(libc::ENOSPC))
        && written <= LIMIT
        && used.bytes_used <= LIMIT;
    let ok_inodes = matches!(&inode_err, Some(e) if e.raw_os_error() == Some(libc::ENOSPC));
    if !ok_bytes || !ok_inodes {
        return Err(io_err(
            "enforce the writable-disk ceiling in",
            &dir,
            io::Error::other(format!(
                "wrote {written} bytes into a {LIMIT}-byte area (error {:?}, used {}), inode flood error {inode_err:?}",
                enospc.as_ref().map(|(_, e)| e.to_string()),
                used.bytes_used
            )),
        ));
    }
    Ok(DiskEvidence {
        detail: format!(
            "writes into upper/ and tmp/ of a {LIMIT}-byte tmpfs stopped with ENOSPC after {written} bytes (usage {} bytes); an empty-file flood stopped with ENOSPC at {} inodes",
            used.bytes_used, inodes.inodes_used
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_or_skip() -> bool {
        if rustix::process::geteuid().is_root() {
            return true;
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmpfs tests need root under CI"
        );
        eprintln!("SKIPPED: tmpfs mount tests need root");
        false
    }

    fn is_mounted(p: &Path) -> bool {
        let mi = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let p = p.to_string_lossy();
        mi.lines().any(|l| l.split(' ').nth(4) == Some(p.as_ref()))
    }

    #[test]
    fn inode_limits_are_bounded() {
        assert_eq!(inode_limit(0), 4096);
        assert_eq!(inode_limit(1 << 30), 262_144);
        assert_eq!(inode_limit(u64::MAX), 4 << 20);
    }

    #[test]
    fn too_small_is_refused_before_mounting() {
        let t = tempfile::tempdir().unwrap();
        let e = WritableArea::create(t.path(), 1000).unwrap_err();
        assert!(e.to_string().contains("remedy"), "{e}");
    }

    #[test]
    fn area_layout_modes_usage_and_unmount() {
        if !root_or_skip() {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("area");
        let area = WritableArea::create(&dir, 2 << 20).unwrap();
        assert!(is_mounted(&dir));
        assert!(is_tmpfs_mount(&dir));
        assert!(!is_tmpfs_mount(t.path()));
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&area.upper()), 0o755);
        assert_eq!(mode(&area.work()), 0o755);
        assert_eq!(mode(&area.tmp()), 0o1777);
        let u = area.usage().unwrap();
        assert_eq!(u.bytes_limit, 2 << 20);
        assert_eq!(u.inodes_limit, 4096);
        fs::write(area.upper().join("a"), vec![1u8; 100_000]).unwrap();
        assert!(area.bytes_used().unwrap() >= 100_000);
        // The supervisor reads upper/ freely before unmounting (capture's view).
        assert_eq!(fs::read(area.upper().join("a")).unwrap().len(), 100_000);
        area.unmount().unwrap();
        assert!(!is_mounted(&dir));
        assert!(!is_tmpfs_mount(&dir));
    }

    #[test]
    fn busy_area_is_detached_and_drop_unmounts() {
        if !root_or_skip() {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("busy");
        let area = WritableArea::create(&dir, 1 << 20).unwrap();
        let held = fs::File::create(area.tmp().join("held")).unwrap();
        area.unmount().unwrap();
        assert!(!is_mounted(&dir));
        drop(held);
        let dir2 = t.path().join("dropped");
        let a2 = WritableArea::create(&dir2, 1 << 20).unwrap();
        std::mem::forget(a2);
        // A later process adopts the still-mounted area; dropping it unmounts.
        assert!(is_tmpfs_mount(&dir2));
        drop(WritableArea::adopt(&dir2, 1 << 20));
        assert!(!is_mounted(&dir2));
    }

    #[test]
    fn disk_canary_holds() {
        if !root_or_skip() {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let ev = prove_disk(t.path()).unwrap();
        assert!(ev.detail.contains("ENOSPC"), "{}", ev.detail);
    }

    #[test]
    fn stale_run_areas_are_swept_and_live_ones_kept() {
        if !root_or_skip() {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        // A dead owner (pid above pid_max) and this live process.
        let dead = t.path().join("stockade-area-2147483000-1-0");
        let live = run_area_dir(t.path());
        let foreign = t.path().join("other-area");
        for d in [&dead, &live, &foreign] {
            std::mem::forget(WritableArea::create(d, 1 << 20).unwrap());
        }
        let swept = sweep_stale_areas(t.path());
        assert_eq!(swept, vec![dead.clone()]);
        assert!(!is_tmpfs_mount(&dead) && !dead.exists());
        assert!(is_tmpfs_mount(&live));
        assert!(is_tmpfs_mount(&foreign));
        WritableArea::adopt(&live, 1 << 20).unmount().unwrap();
        WritableArea::adopt(&foreign, 1 << 20).unmount().unwrap();
    }
}
