//! Session workspace views as overlays, mounted on the supervisor side.
//!
//! A session's workspace is an overlay: the template checkout is the read-only lower layer;
//! the upper and work directories (typically inside a size-limited writable area) receive
//! every write, so the upper directory is exactly the candidate's changes.
//!
//! Two ways to use it:
//! - [`OverlayMount::mount`] mounts the merged view at a host path (needs root on the host;
//!   the supervisor can then read and write session files while no worker runs). Unmounted on
//!   drop (lazy detach).
//! - [`crate::WorkspaceView::Overlay`] asks the launcher to mount the same overlay inside the
//!   worker's private mount namespace (works unprivileged, leaves nothing mounted on the host).
//!
//! Either way the upper directory stays on the host and readable after the worker is gone.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::LaunchError;
use crate::plan::cstr;
use crate::sys;

/// A mounted overlay on the host; unmounted (lazily detached) on drop.
#[derive(Debug)]
pub struct OverlayMount {
    target: PathBuf,
    target_c: CString,
    mounted: bool,
}

/// Escapes a path for an overlayfs mount option (`,`, `:` and `\\` are separators there).
pub(crate) fn opt_escape(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if matches!(b, b',' | b':' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

impl OverlayMount {
    /// Mounts `lower` (read-only) + `upper`/`work` at `target` on the host.
    ///
    /// `upper` and `work` must be empty-or-previous overlay directories on one filesystem;
    /// `target` must exist. Mounted `nosuid,nodev`.
    pub fn mount(
        lower: &Path,
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> Result<Self, LaunchError> {
        let canon = |p: &Path| {
            std::fs::canonicalize(p)
                .map_err(|e| LaunchError::InvalidSpec(format!("overlay path {}: {e}", p.display())))
        };
        let (lower, upper, work, target) =
            (canon(lower)?, canon(upper)?, canon(work)?, canon(target)?);
        let mut data = b"lowerdir=".to_vec();
        data.extend(opt_escape(&lower));
        data.extend_from_slice(b",upperdir=");
        data.extend(opt_escape(&upper));
        data.extend_from_slice(b",workdir=");
        data.extend(opt_escape(&work));
        let data = cstr(&data)?;
        let target_c = cstr(target.as_os_str().as_bytes())?;
        sys::mount(
            c"overlay",
            &target_c,
            c"overlay",
            (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong,
            Some(&data),
        )
        .map_err(|e| LaunchError::Sys {
            what: "mount overlay (needs root on the host)",
            source: e.io(),
        })?;
        Ok(OverlayMount {
            target,
            target_c,
            mounted: true,
        })
    }

    /// Where the merged view is mounted.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Unmounts now (lazy detach), reporting errors.
    pub fn unmount(mut self) -> Result<(), LaunchError> {
        self.mounted = false;
        sys::umount_detach(&self.target_c).map_err(|e| LaunchError::Sys {
            what: "unmount overlay",
            source: e.io(),
        })
    }
}

impl Drop for OverlayMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = sys::umount_detach(&self.target_c);
        }
    }
}
