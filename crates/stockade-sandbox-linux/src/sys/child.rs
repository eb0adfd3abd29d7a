//! The post-fork child routine: everything between `clone` and `execve`.
//!
//! **Architecture Invariant:** nothing here allocates, panics or unwinds. Every input is
//! precomputed by the parent in [`ChildCtx`]; failures are reported as a fixed-size
//! [`SetupFailure`] over a close-on-exec pipe and end in `_exit`.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use super::Errno;
use crate::plan::{SetupFailure, Stage, Step};

/// Maximum number of listeners a launch may request (fixed so the child needs no allocation).
pub(crate) const MAX_LISTENERS: usize = 16;

/// Landlock ruleset, precomputed for the host's ABI.
pub(crate) struct LandlockCtx {
    pub(crate) abi: i32,
    pub(crate) handled_fs: u64,
    pub(crate) handled_net: u64,
    pub(crate) scoped: u64,
    /// Paths inside the final root with the access granted beneath them.
    pub(crate) rules: Vec<(CString, u64)>,
    /// Access granted on the stdio descriptors themselves (file rights only).
    pub(crate) stdio_access: u64,
    /// Whether TCP connect is restricted to the listener ports.
    pub(crate) restrict_connect: bool,
}

/// Everything the child needs, precomputed by the parent.
pub(crate) struct ChildCtx {
    pub(crate) go_read: RawFd,
    pub(crate) go_write: RawFd,
    pub(crate) status_read: RawFd,
    pub(crate) status_write: RawFd,
    pub(crate) fd_sock: Option<RawFd>,
    pub(crate) fd_sock_parent: Option<RawFd>,
    pub(crate) stdio: [Option<RawFd>; 3],
    pub(crate) steps: Vec<Step>,
    pub(crate) hostname: CString,
    pub(crate) cwd: CString,
    pub(crate) listen_ports: Vec<u16>,
    pub(crate) landlock: Option<LandlockCtx>,
    pub(crate) seccomp: Vec<libc::sock_filter>,
    /// Open v1 `tasks` files to join (write `0`) right after release (see `Placement`).
    pub(crate) cgroup_tasks: Vec<RawFd>,
    pub(crate) exec_paths: Vec<CString>,
    /// NULL-terminated argument vector (points into strings the parent keeps alive).
    pub(crate) argv: Vec<*const libc::c_char>,
    /// NULL-terminated environment (points into strings the parent keeps alive).
    pub(crate) envp: Vec<*const libc::c_char>,
}

const FILE_RIGHTS: u64 = 1 | 2 | 4 | (1 << 14) | (1 << 15);

fn fail(status_fd: RawFd, stage: Stage, index: u32, errno: Errno) -> ! {
    let msg = SetupFailure {
        stage,
        index,
        errno: errno.0,
    }
    .encode();
    let _ = super::write_all(status_fd, &msg);
    // SAFETY: `_exit` ends the process without running destructors or atexit handlers.
    unsafe { libc::_exit(127) }
}

macro_rules! sys {
    ($e:expr) => {{
        let r = $e;
        if r < 0 { Err(Errno::last()) } else { Ok(r) }
    }};
}

fn close(fd: RawFd) {
    // SAFETY: closing a descriptor number this process owns; errors are irrelevant here.
    unsafe { libc::close(fd) };
}

/// Entry point of the cloned child. Never returns.
pub(crate) fn run(ctx: &ChildCtx) -> ! {
    let st = ctx.status_write;
    // Drop the parent's ends first so a dead parent shows up as EOF on the go pipe.
    close(ctx.go_write);
    close(ctx.status_read);
    if let Some(p) = ctx.fd_sock_parent {
        close(p);
    }
    // SAFETY: prctl with integer arguments.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } < 0
    {
        fail(st, Stage::Pdeathsig, 0, Errno::last());
    }
    // Wait until the parent wrote our uid/gid maps and placed us (cgroup hook).
    let mut b = [0u8; 1];
    match super::read(ctx.go_read, &mut b) {
        Ok(1) => {}
        // Parent gone or aborted: nothing to report to.
        _ => {
            // SAFETY: immediate exit.
            unsafe { libc::_exit(127) }
        }
    }
    close(ctx.go_read);

    // Cgroup placement from the inside: a single-threaded process writing `0` to a v1 `tasks`
    // file moves itself without the kernel's global threadgroup lock (see `Placement`). The
    // descriptors were opened by the launcher, whose credentials the kernel checks.
    for (i, fd) in ctx.cgroup_tasks.iter().enumerate() {
        if let Err(e) = super::write_all(*fd, b"0") {
            fail(st, Stage::Cgroup, i as u32, e);
        }
        close(*fd);
    }
    // Our own cgroup namespace, rooted at the cgroups we are now in.
    // SAFETY: unshare with integer flags.
    if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } < 0 {
        fail(st, Stage::Cgroup, 100, Errno::last());
    }

    // SAFETY: setsid has no memory arguments.
    if unsafe { libc::setsid() } < 0 {
        fail(st, Stage::Setsid, 0, Errno::last());
    }

    for (i, step) in ctx.steps.iter().enumerate() {
        if let Err(e) = run_step(step)
            && !(step.optional() && (e.0 == libc::ENOENT))
        {
            fail(st, Stage::Mount, i as u32, e);
        }
    }

    // SAFETY: valid buffer and length.
    if unsafe { libc::sethostname(ctx.hostname.as_ptr(), ctx.hostname.as_bytes().len()) } < 0 {
        fail(st, Stage::Hostname, 0, Errno::last());
    }
    if let Err(e) = loopback_up() {
        fail(st, Stage::Loopback, 0, e);
    }
    let mut bound_ports = [0u16; MAX_LISTENERS];
    for (i, port) in ctx.listen_ports.iter().enumerate().take(MAX_LISTENERS) {
        match make_listener(*port) {
            Ok((fd, actual)) => {
                bound_ports[i] = actual;
                let sent = match ctx.fd_sock {
                    Some(s) => send_fd(s, fd),
                    None => Err(Errno(libc::EBADF)),
                };
                close(fd);
                if let Err(e) = sent {
                    fail(st, Stage::Listener, i as u32, e);
                }
            }
            Err(e) => fail(st, Stage::Listener, i as u32, e),
        }
    }
    if let Some(s) = ctx.fd_sock {
        close(s);
    }

    // SAFETY: valid NUL-terminated path.
    if unsafe { libc::chdir(ctx.cwd.as_ptr()) } < 0 {
        fail(st, Stage::Chdir, 0, Errno::last());
    }

    for (target, src) in ctx.stdio.iter().enumerate() {
        if let Some(src) = *src {
            let target = target as RawFd;
            let r = if src == target {
                // SAFETY: fcntl on a descriptor number.
                unsafe { libc::fcntl(src, libc::F_SETFD, 0) }
            } else {
                // SAFETY: dup2 on descriptor numbers.
                unsafe { libc::dup2(src, target) }
            };
            if r < 0 {
                fail(st, Stage::Stdio, target as u32, Errno::last());
            }
        }
    }

    // Securebits: root inside the namespace gets no capabilities from exec or setuid.
    let bits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) } < 0 {
        fail(st, Stage::Securebits, 0, Errno::last());
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
        fail(st, Stage::NoNewPrivs, 0, Errno::last());
    }
    if let Some(ll) = &ctx.landlock
        && let Err((i, e)) = apply_landlock(
            ll,
            &bound_ports[..ctx.listen_ports.len().min(MAX_LISTENERS)],
        )
    {
        fail(st, Stage::Landlock, i, e);
    }
    if let Err((i, e)) = drop_capabilities() {
        fail(st, Stage::Capabilities, i, e);
    }
    if !ctx.seccomp.is_empty() {
        let prog = libc::sock_fprog {
            len: ctx.seccomp.len() as libc::c_ushort,
            filter: ctx.seccomp.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at the parent-built BPF program, alive for the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if r < 0 {
            fail(st, Stage::Seccomp, 0, Errno::last());
        }
    }
    // The seal: the child proves on itself that what it just applied is in force, so a
    // worker never starts under a boundary weaker than the one attested (ADR-0015).
    if let Err((i, e)) = seal(ctx) {
        fail(st, Stage::Seal, i, e);
    }
    // Every inherited descriptor beyond stdio closes at exec (our status pipe included).
    // SAFETY: close_range with integer arguments.
    if unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } < 0
    {
        fail(st, Stage::CloseFds, 0, Errno::last());
    }
    // The parent-death signal again, right before exec.
    // SAFETY: prctl with integer arguments.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } < 0
    {
        fail(st, Stage::Pdeathsig, 1, Errno::last());
    }
    let mut last = Errno(libc::ENOENT);
    for path in &ctx.exec_paths {
        // SAFETY: `path`, `argv` and `envp` are NUL-terminated and NULL-terminated arrays
        // built by the parent and alive (copied address space).
        unsafe { libc::execve(path.as_ptr(), ctx.argv.as_ptr(), ctx.envp.as_ptr()) };
        let e = Errno::last();
        // Like execvp: keep the most telling error (EACCES beats ENOENT).
        if e.0 != libc::ENOENT && e.0 != libc::ENOTDIR {
            last = e;
            if e.0 != libc::EACCES {
                break;
            }
        }
    }
    fail(st, Stage::Exec, 0, last)
}

fn run_step(step: &Step) -> Result<(), Errno> {
    let null = std::ptr::null::<libc::c_char>();
    match step {
        Step::MakeRootPrivate => {
            // SAFETY: valid strings / NULL per mount(2).
            sys!(unsafe {
                libc::mount(
                    null,
                    c"/".as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            })?;
        }
        Step::Tmpfs {
            target,
            flags,
            data,
        } => {
            // SAFETY: valid NUL-terminated strings.
            sys!(unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    *flags,
                    data.as_ptr().cast(),
                )
            })?;
        }
        Step::Mkdir { path, .. } => {
            // SAFETY: valid path.
            let r = unsafe { libc::mkdir(path.as_ptr(), 0o755) };
            if r < 0 {
                let e = Errno::last();
                if e.0 != libc::EEXIST {
                    return Err(e);
                }
            }
        }
        Step::Touch { path } => {
            // SAFETY: valid path; the descriptor is closed right away.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                )
            };
            if fd < 0 {
                let e = Errno::last();
                if e.0 != libc::EEXIST && e.0 != libc::EROFS {
                    return Err(e);
                }
            } else {
                close(fd);
            }
        }
        Step::Symlink { target, link } => {
            // SAFETY: valid paths.
            sys!(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })?;
        }
        Step::WriteFile { path, contents } => {
            // SAFETY: valid path.
            let fd = sys!(unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                    0o644,
                )
            })?;
            let r = super::write_all(fd, contents);
            close(fd);
            r?;
        }
        Step::Bind { src, dst, attr, .. } => {
            // SAFETY: valid strings / NULL per mount(2).
            sys!(unsafe {
                libc::mount(
                    src.as_ptr(),
                    dst.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            })?;
            set_attr(dst, *attr, true)?;
        }
        Step::Proc { target } => {
            // SAFETY: valid strings.
            sys!(unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    target.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            })?;
        }
        Step::Devpts { target } => {
            // SAFETY: valid strings.
            sys!(unsafe {
                libc::mount(
                    c"devpts".as_ptr(),
                    target.as_ptr(),
                    c"devpts".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NOEXEC,
                    c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
                )
            })?;
        }
        Step::Overlay { target, data } => {
            // SAFETY: valid strings.
            sys!(unsafe {
                libc::mount(
                    c"overlay".as_ptr(),
                    target.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    data.as_ptr().cast(),
                )
            })?;
        }
        Step::PivotStaging { new_root, put_old } => {
            // SAFETY: valid paths.
            sys!(unsafe {
                libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr())
            })?;
            // SAFETY: valid path.
            sys!(unsafe { libc::chdir(c"/".as_ptr()) })?;
        }
        Step::PivotFinal { new_root } => {
            // SAFETY: valid paths; pivot_root(".", ".") stacks the old root on top of the new
            // one, and the lazy unmount then detaches it (and the whole host tree) for good.
            sys!(unsafe { libc::chdir(new_root.as_ptr()) })?;
            // SAFETY: valid paths.
            sys!(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) })?;
            // SAFETY: valid path.
            sys!(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) })?;
            // SAFETY: valid path.
            sys!(unsafe { libc::chdir(c"/".as_ptr()) })?;
        }
        Step::SetAttr {
            path,
            attr,
            recursive,
        } => set_attr(path, *attr, *recursive)?,
    }
    Ok(())
}

/// `mount_setattr`: only ever adds restrictions (read-only, nosuid, nodev, noexec).
fn set_attr(path: &CStr, attr: u64, recursive: bool) -> Result<(), Errno> {
    if attr == 0 {
        return Ok(());
    }
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let ma = MountAttr {
        attr_set: attr,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags: libc::c_uint = if recursive {
        libc::AT_RECURSIVE as libc::c_uint
    } else {
        0
    };
    // SAFETY: `ma` is a valid mount_attr of the size passed.
    sys!(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &ma as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    Ok(())
}

fn loopback_up() -> Result<(), Errno> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    // SAFETY: socket with integer arguments.
    let s = sys!(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    let mut req = IfReq {
        name: [0; 16],
        flags: 0,
        _pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    req.flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: `req` is a valid ifreq-sized buffer for SIOCSIFFLAGS.
    let r = sys!(unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS, &mut req as *mut IfReq) });
    close(s);
    r.map(|_| ())
}

fn make_listener(port: u16) -> Result<(RawFd, u16), Errno> {
    let fd =
        // SAFETY: socket with integer arguments.
        sys!(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    let res = (|| {
        let one: libc::c_int = 1;
        // SAFETY: valid option buffer.
        sys!(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })?;
        // SAFETY: sockaddr_in is plain data.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr = libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        };
        // SAFETY: valid sockaddr_in of the size passed.
        sys!(unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        // SAFETY: integer arguments.
        sys!(unsafe { libc::listen(fd, 128) })?;
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: valid out buffers.
        sys!(unsafe {
            libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len)
        })?;
        Ok(u16::from_be(addr.sin_port))
    })();
    match res {
        Ok(p) => Ok((fd, p)),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), Errno> {
    let mut data = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg_buf = [0u64; 8];
    // SAFETY: msghdr is plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg_buf.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen =
        unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    // SAFETY: the control buffer is large enough for one descriptor (checked by CMSG_SPACE
    // fitting in 64 bytes) and the CMSG macros stay within it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
    }
    // SAFETY: `msg` points at live buffers.
    sys!(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) })?;
    Ok(())
}

fn apply_landlock(ll: &LandlockCtx, ports: &[u16]) -> Result<(), (u32, Errno)> {
    #[repr(C)]
    struct RulesetAttr {
        fs: u64,
        net: u64,
        scoped: u64,
    }
    #[repr(C, packed)]
    struct PathBeneath {
        allowed: u64,
        parent_fd: i32,
    }
    #[repr(C)]
    struct NetPort {
        allowed: u64,
        port: u64,
    }
    const RULE_PATH_BENEATH: u32 = 1;
    const RULE_NET_PORT: u32 = 2;
    const CONNECT_TCP: u64 = 2;
    let attr = RulesetAttr {
        fs: ll.handled_fs,
        net: ll.handled_net,
        scoped: ll.scoped,
    };
    let size = match ll.abi {
        ..=3 => 8usize,
        4 | 5 => 16,
        _ => 24,
    };
    // SAFETY: `attr` is valid for `size` bytes (size never exceeds the struct).
    let rs = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if rs < 0 {
        return Err((0, Errno::last()));
    }
    let rs = rs as RawFd;
    let add_fd = |fd: RawFd, access: u64| -> Result<(), Errno> {
        let pb = PathBeneath {
            allowed: access,
            parent_fd: fd,
        };
        // SAFETY: `pb` is a valid landlock_path_beneath_attr.
        sys!(unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                rs,
                RULE_PATH_BENEATH,
                &pb as *const PathBeneath,
                0u32,
            )
        })
        .map(|_| ())
    };
    for (i, (path, access)) in ll.rules.iter().enumerate() {
        // SAFETY: valid path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = Errno::last();
            if e.0 == libc::ENOENT {
                continue;
            }
            close(rs);
            return Err((1 + i as u32, e));
        }
        // SAFETY: stat is plain data; fstat fills it.
        let mut stbuf: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid out pointer.
        let is_dir = unsafe { libc::fstat(fd, &mut stbuf) } == 0
            && (stbuf.st_mode & libc::S_IFMT) == libc::S_IFDIR;
        let access = if is_dir {
            *access
        } else {
            *access & FILE_RIGHTS
        };
        let r = add_fd(fd, access & ll.handled_fs);
        close(fd);
        if let Err(e) = r {
            close(rs);
            return Err((1 + i as u32, e));
        }
    }
    // The stdio descriptors themselves (so `/dev/stdout` re-opens keep working): best effort,
    // pipes and sockets are not path-based and are refused by the kernel, which is fine.
    for fd in 0..3 {
        let _ = add_fd(fd, ll.stdio_access & ll.handled_fs);
    }
    if ll.restrict_connect {
        for (i, p) in ports.iter().enumerate() {
            let np = NetPort {
                allowed: CONNECT_TCP,
                port: u64::from(*p),
            };
            // SAFETY: valid landlock_net_port_attr.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    rs,
                    RULE_NET_PORT,
                    &np as *const NetPort,
                    0u32,
                )
            };
            if r < 0 {
                let e = Errno::last();
                close(rs);
                return Err((100 + i as u32, e));
            }
        }
    }
    // SAFETY: integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, rs, 0u32) };
    let e = Errno::last();
    close(rs);
    if r < 0 {
        return Err((200, e));
    }
    Ok(())
}

fn drop_capabilities() -> Result<(), (u32, Errno)> {
    // Bounding set: every capability the kernel knows (stop at the first EINVAL).
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if r < 0 {
            let e = Errno::last();
            if e.0 == libc::EINVAL {
                break;
            }
            return Err((cap, e));
        }
    }
    // SAFETY: prctl with integer arguments.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    } < 0
    {
        return Err((100, Errno::last()));
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset v3 takes one header and two data structures.
    if unsafe { libc::syscall(libc::SYS_capset, &hdr as *const Header, data.as_ptr()) } < 0 {
        return Err((101, Errno::last()));
    }
    Ok(())
}

/// Errno reported when a seal check ran but observed the wrong state.
const SEAL_BROKEN: Errno = Errno(libc::ENOTRECOVERABLE);

/// Seal check numbers (the `index` of a [`Stage::Seal`] failure); names in
/// [`crate::plan::seal_check_name`].
pub(crate) mod seal_check {
    pub(crate) const NO_NEW_PRIVS: u32 = 1;
    pub(crate) const SECCOMP_MODE: u32 = 2;
    pub(crate) const CAPABILITY_SETS: u32 = 3;
    pub(crate) const AMBIENT_SET: u32 = 4;
    pub(crate) const FILTER_ANSWERS: u32 = 5;
    pub(crate) const LANDLOCK_DENIES: u32 = 6;
    /// `BOUNDING_SET + cap`: capability `cap` is still in the bounding set.
    pub(crate) const BOUNDING_SET: u32 = 100;
}

/// Checks, on the calling process, that the restrictions [`run`] applied are in force:
/// `no_new_privs`, seccomp in filter mode and answering a denied call with its errno, every
/// capability set (bounding and ambient included) empty, and Landlock refusing a write only it
/// forbids. Only system calls on stack data: safe between `clone` and `execve`.
pub(crate) fn seal(ctx: &ChildCtx) -> Result<(), (u32, Errno)> {
    use seal_check::*;
    let expect = |check: u32, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err((check, SEAL_BROKEN))
        }
    };
    // SAFETY: prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    expect(NO_NEW_PRIVS, r == 1)?;
    if !ctx.seccomp.is_empty() {
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        expect(SECCOMP_MODE, r == 2)?;
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data {
        effective: u32::MAX,
        permitted: u32::MAX,
        inheritable: u32::MAX,
    }; 2];
    // SAFETY: capget v3 writes two data structures into `data`.
    if unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) } < 0 {
        return Err((CAPABILITY_SETS, Errno::last()));
    }
    expect(
        CAPABILITY_SETS,
        data.iter()
            .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0),
    )?;
    for cap in 0..64u32 {
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) };
        if r < 0 {
            // EINVAL: past the last capability the kernel knows.
            break;
        }
        expect(BOUNDING_SET + cap, r == 0)?;
        // SAFETY: prctl with integer arguments.
        let r = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_IS_SET as libc::c_ulong,
                cap as libc::c_ulong,
                0,
                0,
            )
        };
        expect(AMBIENT_SET, r == 0)?;
    }
    if !ctx.seccomp.is_empty() {
        // perf_event_open with a NULL attribute: the kernel alone answers EFAULT, the filter
        // answers EPERM before the kernel looks at the arguments.
        // SAFETY: a NULL attribute pointer is rejected without being dereferenced.
        let r = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                std::ptr::null::<u8>(),
                0,
                -1,
                -1,
                0,
            )
        };
        let e = Errno::last();
        if r >= 0 {
            close(r as RawFd);
        }
        expect(FILTER_ANSWERS, r < 0 && e.0 == libc::EPERM)?;
    }
    if let Some(ll) = &ctx.landlock
        && ll.handled_fs & 2 != 0
    {
        // Writing one's own /proc/self/comm is allowed by every other layer; only Landlock
        // (no write right under /proc) refuses it.
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/proc/self/comm".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            )
        };
        let e = Errno::last();
        if fd >= 0 {
            close(fd);
        }
        expect(LANDLOCK_DENIES, fd < 0 && e.0 == libc::EACCES)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(seccomp: Vec<libc::sock_filter>) -> ChildCtx {
        ChildCtx {
            go_read: -1,
            go_write: -1,
            status_read: -1,
            status_write: -1,
            fd_sock: None,
            fd_sock_parent: None,
            stdio: [None; 3],
            steps: Vec::new(),
            hostname: CString::default(),
            cwd: CString::default(),
            listen_ports: Vec::new(),
            landlock: None,
            seccomp,
            cgroup_tasks: Vec::new(),
            exec_paths: Vec::new(),
            argv: Vec::new(),
            envp: Vec::new(),
        }
    }

    /// Runs `prepare` then [`seal`] in a forked child; returns the failing check (0: sealed).
    fn seal_in_child(ctx: &ChildCtx, prepare: fn(&ChildCtx)) -> u32 {
        let (r, w) = super::super::pipe_cloexec().expect("pipe");
        // SAFETY: the child only makes system calls on stack data and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            prepare(ctx);
            let code = match seal(ctx) {
                Ok(()) => 0u32,
                Err((i, _)) => i,
            };
            let _ = super::super::write_all(super::super::raw(&w), &code.to_ne_bytes());
            // SAFETY: immediate exit of the forked child.
            unsafe { libc::_exit(0) }
        }
        drop(w);
        let mut b = [0u8; 4];
        let n = super::super::read(super::super::raw(&r), &mut b).expect("read");
        let _ = super::super::wait_pid(pid);
        assert_eq!(n, 4, "the child reported nothing");
        u32::from_ne_bytes(b)
    }

    fn no_new_privs() {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    }

    fn install_filter(c: &ChildCtx) {
        let prog = libc::sock_fprog {
            len: c.seccomp.len() as libc::c_ushort,
            filter: c.seccomp.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at a live BPF program.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
    }

    /// The seal is not decoration: each layer missing from a process is caught, in order.
    #[test]
    fn seal_catches_each_missing_layer() {
        let c = ctx(crate::seccomp::program().expect("filter"));
        assert_eq!(seal_in_child(&c, |_| {}), seal_check::NO_NEW_PRIVS);
        assert_eq!(
            seal_in_child(&c, |_| no_new_privs()),
            seal_check::SECCOMP_MODE
        );
        // A filter that allows everything: filter mode, but the denied call is not answered.
        let allow_all = ctx(vec![libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        }]);
        let permissive = |c: &ChildCtx| {
            no_new_privs();
            let _ = drop_capabilities();
            install_filter(c);
        };
        assert_eq!(
            seal_in_child(&allow_all, permissive),
            seal_check::FILTER_ANSWERS
        );
        if super::super::ids().0 == 0 {
            // The same steps with the real filter seal (Landlock is not in this ctx).
            assert_eq!(seal_in_child(&c, permissive), 0);
            // The real filter, capabilities kept (this test runs as root): caught.
            let kept = |c: &ChildCtx| {
                no_new_privs();
                install_filter(c);
            };
            assert_eq!(seal_in_child(&c, kept), seal_check::CAPABILITY_SETS);
        } else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the sealed and kept-capabilities cases need root under CI=true"
            );
            eprintln!("SKIPPED: the sealed and kept-capabilities seal cases need root");
        }
    }
}
