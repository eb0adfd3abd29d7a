//! # stockade-sandbox-linux — layer 3: the Linux backend
//!
//! Starts untrusted programs inside a boundary the kernel enforces, and proves on the running
//! host that each protection holds before claiming it.
//!
//! What it does:
//! - [`launch`] runs one program as PID 1 of fresh user, PID, mount, network, IPC, UTS and
//!   cgroup namespaces, in a root assembled from nothing with `pivot_root` (read-only system
//!   directories, a synthesized `/etc`, private `/proc`, minimal `/dev`, private `/tmp`, the
//!   workspace read-write, caller-named paths read-only), with every capability dropped,
//!   `no_new_privs`, Landlock, a seccomp deny-list, an allow-listed environment, no inherited
//!   descriptors, its own session, and a network namespace with only loopback.
//! - [`probe()`] attests protections by running a canary inside a real sandbox.
//! - [`overlay`] mounts a session's copy-on-write workspace view on the supervisor side.
//!
//! What it does not do: resource ceilings and cgroups (the `cgroup` and `disk` modules, issue
//! 4), HTTP egress (the gateway crate serves the listeners this crate creates), policy
//! resolution or admission decisions (the capabilities crate).
//!
//! **Architecture Invariant:** this is the only crate that starts processes, and its only
//! `unsafe` is in `sys`; nothing between `clone` and `execve` allocates or panics.
#![deny(unsafe_code)]

pub mod backend;
pub mod canary;
pub mod cgroup;
pub mod disk;
mod error;
mod landlock;
mod launch;
pub mod overlay;
mod plan;
pub mod probe;
pub mod seccomp;
pub mod shared;
mod spec;
#[allow(unsafe_code)]
mod sys;
pub mod usage;

pub use error::LaunchError;
pub use landlock::{LandlockSupport, describe as describe_landlock};
pub use launch::{DEFAULT_PATH, ExitStatus, Worker, launch, launch_from_main_thread};
pub use probe::{probe, probe_isolation};
pub use spec::{BeforeRelease, LaunchSpec, Placement, Stdio, TmpDir, WorkspaceView};

/// Home directory of the sandbox user (inside the private `/tmp`).
pub const SANDBOX_HOME: &str = plan::SANDBOX_HOME;
