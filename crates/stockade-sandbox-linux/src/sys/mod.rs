//! The one place with `unsafe`: thin wrappers over raw system calls, the `clone` that starts a
//! worker, and the post-fork child routine (in [`child`]).
//!
//! **Architecture Invariant:** every `unsafe` block of the crate lives under this module and
//! carries a `// SAFETY:` comment; everything above it is safe Rust.
//!
//! The wrappers return `Result<_, Errno>` and never allocate, so the child routine can call them
//! between `clone` and `execve`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub(crate) mod child;

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A raw `errno` value (no allocation, `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl Errno {
    fn last() -> Self {
        Errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
    /// Converts to a `std::io::Error` (parent side only: may allocate nothing, but callers format it).
    pub(crate) fn io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.0)
    }
}

fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

fn check_int(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(ret) }
}

// ---------------------------------------------------------------------------------------------
// Process creation and reaping (parent side)
// ---------------------------------------------------------------------------------------------

/// Namespaces every worker gets.
pub(crate) const NAMESPACE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;
// CLONE_NEWCGROUP is entered by the child itself with `unshare`, after its cgroup placement,
// so the namespace is rooted at the worker's own cgroup (`child::run`).

/// Result of [`clone_worker`] in the parent.
pub(crate) struct Cloned {
    pub(crate) pid: libc::pid_t,
    pub(crate) pidfd: OwnedFd,
}

/// Clones the calling thread into fresh namespaces (fork semantics: NULL stack) and runs
/// [`child::run`] in the child, which never returns.
///
/// The caller must pass a fully precomputed context: the child does not allocate, panic or
/// unwind, and ends in `execve` or `_exit`.
pub(crate) fn clone_worker(ctx: &child::ChildCtx) -> Result<Cloned, Errno> {
    let mut pidfd: libc::c_int = -1;
    let flags =
        (NAMESPACE_FLAGS | libc::CLONE_PIDFD) as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: raw clone with a NULL stack behaves like fork: the child gets a copy of the
    // address space and continues here with return value 0. `pidfd` is a valid out pointer for
    // CLONE_PIDFD (x86_64/aarch64 argument order: flags, stack, parent_tid, child_tid, tls).
    // In the child we only call `child::run`, which never returns and performs only
    // async-signal-safe system calls on memory precomputed by the parent.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            &mut pidfd as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_void>(),
            0usize,
        )
    };
    if ret < 0 {
        return Err(Errno::last());
    }
    if ret == 0 {
        child::run(ctx);
    }
    // SAFETY: on success the kernel stored a fresh pidfd owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Cloned {
        pid: ret as libc::pid_t,
        pidfd,
    })
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawExit {
    Exited(i32),
    Signaled(i32),
}

/// `waitpid` for a specific child, retrying on `EINTR`.
pub(crate) fn wait_pid(pid: libc::pid_t) -> Result<RawExit, Errno> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out pointer; `pid` is our own child.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if ret < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        if libc::WIFEXITED(status) {
            return Ok(RawExit::Exited(libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(RawExit::Signaled(libc::WTERMSIG(status)));
        }
    }
}

/// Waits until `fd` is readable (or hung up) for at most `timeout_ms` (-1 = forever).
/// Returns whether it became ready.
pub(crate) fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool, Errno> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd structure.
        let ret = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if ret < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok(ret > 0);
    }
}

/// Sends `sig` through a pidfd (no pid-reuse race).
pub(crate) fn pidfd_send_signal(pidfd: RawFd, sig: i32) -> Result<(), Errno> {
    // SAFETY: plain system call on an fd we own; null siginfo is allowed.
    check(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            sig,
            std::ptr::null::<u8>(),
            0u32,
        )
    })
    .map(|_| ())
}

/// `pipe2(O_CLOEXEC)` returning (read, write).
pub(crate) fn pipe_cloexec() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check_int(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors are fresh and owned by us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
pub(crate) fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for two descriptors.
    check_int(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors are fresh and owned by us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `read` retrying on `EINTR`.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        let ret = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if ret < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return Ok(ret as usize);
    }
}

/// `write` retrying on `EINTR` until everything is written.
pub(crate) fn write_all(fd: RawFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` readable bytes.
        let ret = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if ret < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        buf = &buf[ret as usize..];
    }
    Ok(())
}

/// Receives one descriptor sent with `SCM_RIGHTS` (the launcher's listener hand-over).
pub(crate) fn recv_fd(sock: RawFd) -> Result<OwnedFd, Errno> {
    let mut data = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg_buf = [0u64; 8];
    // SAFETY: msghdr is plain data; zeroed is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg_buf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg_buf);
    // SAFETY: `msg` points at live buffers for the duration of the call.
    let ret = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if ret < 0 {
        return Err(Errno::last());
    }
    if ret == 0 {
        return Err(Errno(libc::ENOMSG));
    }
    // SAFETY: the control buffer was filled by the kernel; CMSG_FIRSTHDR/CMSG_DATA walk it
    // within `msg_controllen`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(Errno(libc::EPROTO));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Landlock ABI version offered by the running kernel (0 when Landlock is unavailable).
pub(crate) fn landlock_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a NULL attribute and size 0 only queries.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if ret < 0 { 0 } else { ret as i32 }
}

/// Mounts a filesystem (used on the supervisor side for session overlays).
pub(crate) fn mount(
    source: &CStr,
    target: &CStr,
    fstype: &CStr,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), Errno> {
    let data_ptr = data.map_or(std::ptr::null(), |d| d.as_ptr().cast::<libc::c_void>());
    // SAFETY: all pointers are valid NUL-terminated strings or NULL.
    check_int(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data_ptr,
        )
    })
    .map(|_| ())
}

/// Detaches a mount (`umount2(MNT_DETACH)`).
pub(crate) fn umount_detach(target: &CStr) -> Result<(), Errno> {
    // SAFETY: valid NUL-terminated path.
    check_int(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(|_| ())
}

/// Effective uid and gid of the caller.
pub(crate) fn ids() -> (u32, u32) {
    // SAFETY: getuid/getgid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The raw fd number of an owned descriptor (convenience).
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

// ---------------------------------------------------------------------------------------------
// Canary attempts: forbidden system calls with arguments chosen so that, if the filter did not
// stop them, the kernel would fail them with a *different* errno (bad pointers, bad fds, bad
// flags) without touching any memory or state. The errno therefore tells who refused.
// ---------------------------------------------------------------------------------------------

/// One forbidden call the canary tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    PtraceAttach,
    ProcessVmReadv,
    Mount,
    Umount,
    PivotRoot,
    OpenTree,
    Fsopen,
    MoveMount,
    MountSetattr,
    UnshareUser,
    CloneNewUser,
    Setns,
    IoUringSetup,
    Bpf,
    PerfEventOpen,
    Userfaultfd,
    Keyctl,
    AddKey,
    SocketNetlink,
    SocketPacket,
    IoctlTiocsti,
    IoctlTiocstiHighBits,
    IoctlTioclinux,
    Clone3,
    X32Getpid,
    Personality,
    Settimeofday,
    ClockSettime,
    PidfdGetfd,
    Chroot,
}

impl Attempt {
    /// Every attempt, with the errno the filter must produce.
    pub(crate) const ALL: [(Attempt, &'static str, i32); 30] = [
        (Attempt::PtraceAttach, "ptrace", libc::EPERM),
        (Attempt::ProcessVmReadv, "process_vm_readv", libc::EPERM),
        (Attempt::Mount, "mount", libc::EPERM),
        (Attempt::Umount, "umount2", libc::EPERM),
        (Attempt::PivotRoot, "pivot_root", libc::EPERM),
        (Attempt::OpenTree, "open_tree", libc::EPERM),
        (Attempt::Fsopen, "fsopen", libc::EPERM),
        (Attempt::MoveMount, "move_mount", libc::EPERM),
        (Attempt::MountSetattr, "mount_setattr", libc::EPERM),
        (Attempt::UnshareUser, "unshare(CLONE_NEWUSER)", libc::EPERM),
        (Attempt::CloneNewUser, "clone(CLONE_NEWUSER)", libc::EPERM),
        (Attempt::Setns, "setns", libc::EPERM),
        (Attempt::IoUringSetup, "io_uring_setup", libc::EPERM),
        (Attempt::Bpf, "bpf", libc::EPERM),
        (Attempt::PerfEventOpen, "perf_event_open", libc::EPERM),
        (Attempt::Userfaultfd, "userfaultfd", libc::EPERM),
        (Attempt::Keyctl, "keyctl", libc::EPERM),
        (Attempt::AddKey, "add_key", libc::EPERM),
        (Attempt::SocketNetlink, "socket(AF_NETLINK)", libc::EPERM),
        (Attempt::SocketPacket, "socket(AF_PACKET)", libc::EPERM),
        (Attempt::IoctlTiocsti, "ioctl(TIOCSTI)", libc::EPERM),
        (
            Attempt::IoctlTiocstiHighBits,
            "ioctl(TIOCSTI|1<<32)",
            libc::EPERM,
        ),
        (Attempt::IoctlTioclinux, "ioctl(TIOCLINUX)", libc::EPERM),
        (Attempt::Clone3, "clone3", libc::ENOSYS),
        (Attempt::X32Getpid, "x32 getpid", libc::ENOSYS),
        (
            Attempt::Personality,
            "personality(PER_LINUX32)",
            libc::EPERM,
        ),
        (Attempt::Settimeofday, "settimeofday", libc::EPERM),
        (Attempt::ClockSettime, "clock_settime", libc::EPERM),
        (Attempt::PidfdGetfd, "pidfd_getfd", libc::EPERM),
        (Attempt::Chroot, "chroot", libc::EPERM),
    ];

    /// Runs the attempt; returns the errno (0 if the call succeeded).
    pub(crate) fn run(self) -> i32 {
        const BAD: usize = 1; // an unmapped address: the kernel faults, never touches memory
        // SAFETY: raw system calls whose pointer arguments are NULL or the unmapped address 1
        // and whose fd arguments are -1; none can read or write our memory, and flag values
        // are chosen so that the kernel rejects them before creating anything.
        let r: libc::c_long = unsafe {
            match self {
                Attempt::PtraceAttach => {
                    libc::syscall(libc::SYS_ptrace, libc::PTRACE_ATTACH, -1, 0, 0)
                }
                Attempt::ProcessVmReadv => {
                    libc::syscall(libc::SYS_process_vm_readv, -1, BAD, 1, BAD, 1, 0)
                }
                Attempt::Mount => libc::syscall(libc::SYS_mount, BAD, BAD, BAD, 0, 0),
                Attempt::Umount => libc::syscall(libc::SYS_umount2, BAD, 0),
                Attempt::PivotRoot => libc::syscall(libc::SYS_pivot_root, BAD, BAD),
                Attempt::OpenTree => libc::syscall(libc::SYS_open_tree, -1, BAD, 0),
                Attempt::Fsopen => libc::syscall(libc::SYS_fsopen, BAD, 0),
                Attempt::MoveMount => libc::syscall(libc::SYS_move_mount, -1, BAD, -1, BAD, 0),
                Attempt::MountSetattr => {
                    libc::syscall(libc::SYS_mount_setattr, -1, BAD, 0, BAD, 32)
                }
                Attempt::UnshareUser => libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER | 0x1),
                // CLONE_THREAD without CLONE_SIGHAND is EINVAL in the kernel: no process is created.
                Attempt::CloneNewUser => libc::syscall(
                    libc::SYS_clone,
                    libc::CLONE_NEWUSER | libc::CLONE_THREAD,
                    0,
                    0,
                    0,
                    0,
                ),
                Attempt::Setns => libc::syscall(libc::SYS_setns, -1, 0),
                Attempt::IoUringSetup => libc::syscall(libc::SYS_io_uring_setup, 0, BAD),
                Attempt::Bpf => libc::syscall(libc::SYS_bpf, -1, BAD, 0),
                Attempt::PerfEventOpen => {
                    libc::syscall(libc::SYS_perf_event_open, BAD, 0, -1, -1, 0)
                }
                Attempt::Userfaultfd => libc::syscall(libc::SYS_userfaultfd, -1),
                Attempt::Keyctl => libc::syscall(libc::SYS_keyctl, -1, 0, 0, 0, 0),
                Attempt::AddKey => libc::syscall(libc::SYS_add_key, BAD, BAD, BAD, 0, 0),
                Attempt::SocketNetlink => libc::syscall(
                    libc::SYS_socket,
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    0,
                ),
                Attempt::SocketPacket => libc::syscall(
                    libc::SYS_socket,
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    0,
                ),
                Attempt::IoctlTiocsti => libc::syscall(libc::SYS_ioctl, -1, libc::TIOCSTI, BAD),
                Attempt::IoctlTiocstiHighBits => {
                    libc::syscall(libc::SYS_ioctl, -1, (1u64 << 32) | libc::TIOCSTI, BAD)
                }
                Attempt::IoctlTioclinux => libc::syscall(libc::SYS_ioctl, -1, libc::TIOCLINUX, BAD),
                Attempt::Clone3 => libc::syscall(libc::SYS_clone3, BAD, 0),
                Attempt::X32Getpid => libc::syscall(libc::SYS_getpid | 0x4000_0000),
                Attempt::Personality => libc::syscall(libc::SYS_personality, 0x0008),
                Attempt::Settimeofday => libc::syscall(libc::SYS_settimeofday, BAD, BAD),
                Attempt::ClockSettime => libc::syscall(libc::SYS_clock_settime, -1, BAD),
                Attempt::PidfdGetfd => libc::syscall(libc::SYS_pidfd_getfd, -1, -1, 0),
                Attempt::Chroot => libc::syscall(libc::SYS_chroot, BAD),
            }
        };
        if r < 0 {
            Errno::last().0
        } else {
            // A descriptor may have been created (socket): close it.
            if matches!(self, Attempt::SocketNetlink | Attempt::SocketPacket) {
                // SAFETY: closing the descriptor the call just returned.
                unsafe { libc::close(r as libc::c_int) };
            }
            0
        }
    }
}

/// Canary helper: leaves a detached (`setsid`) shell daemon that ignores TERM, HUP and INT,
/// for the process-tree self-test. Runs only inside a sandbox.
pub(crate) fn spawn_detached_daemon() -> std::io::Result<()> {
    let st = std::process::Command::new("/bin/sh")
        .args(["-c", "setsid sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &"])
        .status()?;
    if st.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("sh exited with {st}")))
    }
}
