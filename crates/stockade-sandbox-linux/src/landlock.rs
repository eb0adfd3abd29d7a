//! The Landlock ruleset, defence in depth under the mount namespace.
//!
//! The access masks for the host's ABI come from the `landlock` crate's compatibility tables;
//! the ruleset itself is created in the child after the final `pivot_root` with raw system
//! calls (see `sys::child`), because the crate's builder allocates and would open host paths
//! instead of sandbox paths. Rules:
//!
//! | path | access |
//! | --- | --- |
//! | `/` | read directories |
//! | `/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, read-only binds | read, execute |
//! | `/proc` | read |
//! | `/dev` | read, write, truncate, device ioctl (no execute, no create) |
//! | workspace, `/tmp`, `/dev/shm` | everything |
//! | TCP | `connect` only to the listener ports (ABI 4+) |
//! | scopes | abstract unix sockets and signals stay inside the sandbox (ABI 6+) |

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use landlock::{ABI, Access, AccessFs, AccessNet, BitFlags, Scope};

fn fs(a: AccessFs) -> u64 {
    BitFlags::from_flag(a).bits()
}

use crate::error::LaunchError;
use crate::plan::cstr;
use crate::sys::child::LandlockCtx;

/// What Landlock can do on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LandlockSupport {
    /// ABI version (0: unavailable).
    pub abi: i32,
}

impl LandlockSupport {
    /// Queries the running kernel.
    pub fn detect() -> Self {
        LandlockSupport {
            abi: crate::sys::landlock_abi(),
        }
    }
    /// Filesystem rules are available (ABI 1+).
    pub fn fs(&self) -> bool {
        self.abi >= 1
    }
    /// TCP bind/connect rules are available (ABI 4+).
    pub fn tcp(&self) -> bool {
        self.abi >= 4
    }
    /// Abstract-unix-socket and signal scoping are available (ABI 6+).
    pub fn scopes(&self) -> bool {
        self.abi >= 6
    }
}

fn abi_of(v: i32) -> ABI {
    // The launcher must use the kernel's ABI, not a compile-time guess: the masks below then
    // cover every right this kernel can enforce.
    ABI::from(v)
}

/// Builds the child's Landlock context, or `None` when the kernel has no Landlock.
pub(crate) fn plan(
    support: LandlockSupport,
    workspace: &Path,
    ro_paths: &[std::path::PathBuf],
    restrict_connect: bool,
) -> Result<Option<LandlockCtx>, LaunchError> {
    if !support.fs() {
        return Ok(None);
    }
    let abi = abi_of(support.abi);
    let all = AccessFs::from_all(abi).bits();
    let read = (fs(AccessFs::ReadFile) | fs(AccessFs::ReadDir)) & all;
    let read_exec = read | fs(AccessFs::Execute);
    let dev = read
        | fs(AccessFs::WriteFile)
        | (fs(AccessFs::Truncate) & all)
        | (fs(AccessFs::IoctlDev) & all);
    let stdio = (fs(AccessFs::ReadFile) | fs(AccessFs::WriteFile))
        | (fs(AccessFs::Truncate) & all)
        | (fs(AccessFs::IoctlDev) & all);
    let mut rules: Vec<(CString, u64)> = vec![(cstr(b"/")?, fs(AccessFs::ReadDir))];
    for p in [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
    ] {
        rules.push((cstr(p.as_bytes())?, read_exec));
    }
    rules.push((cstr(b"/proc")?, read));
    rules.push((cstr(b"/dev")?, dev));
    for p in ro_paths {
        rules.push((cstr(p.as_os_str().as_bytes())?, read_exec));
    }
    rules.push((cstr(workspace.as_os_str().as_bytes())?, all));
    rules.push((cstr(b"/tmp")?, all));
    rules.push((cstr(b"/dev/shm")?, all));
    let (handled_net, restrict_connect) = if support.tcp() && restrict_connect {
        (BitFlags::from_flag(AccessNet::ConnectTcp).bits(), true)
    } else {
        (0, false)
    };
    let scoped = if support.scopes() {
        Scope::from_all(abi).bits()
    } else {
        0
    };
    Ok(Some(LandlockCtx {
        abi: support.abi,
        handled_fs: all,
        handled_net,
        scoped,
        rules,
        stdio_access: stdio,
        restrict_connect,
    }))
}

/// A stable text rendering of the ruleset for snapshots.
pub fn describe(abi: i32, workspace: &Path) -> String {
    let support = LandlockSupport { abi };
    match plan(support, workspace, &[], true) {
        Ok(Some(ctx)) => {
            let mut s = format!(
                "abi {}\nhandled_fs {:#x}\nhandled_net {:#x}\nscoped {:#x}\n",
                ctx.abi, ctx.handled_fs, ctx.handled_net, ctx.scoped
            );
            for (p, a) in &ctx.rules {
                s.push_str(&format!("{:<12} {:#07x}\n", p.to_string_lossy(), a));
            }
            s.push_str(&format!("stdio fds    {:#07x}\n", ctx.stdio_access));
            s
        }
        Ok(None) => "landlock unavailable\n".into(),
        Err(e) => format!("error: {e}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruleset_snapshot_abi7() {
        insta::assert_snapshot!(describe(7, Path::new("/work/ws")));
    }

    #[test]
    fn old_abi_masks_shrink() {
        let s = describe(1, Path::new("/w"));
        assert!(s.contains("handled_net 0x0"));
        assert!(s.contains("scoped 0x0"));
    }
}
