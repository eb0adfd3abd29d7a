//! # stockade-sandbox — layer 2: the sandbox backend contract
//!
//! What this crate does: it defines the small contract every sandbox backend implements
//! (ADR 0181, ADR-0017) and builds the public session API **once** on top of it.
//!
//! - **Two phases.** [`Backend::prewarm`] turns a [`TemplateSpec`] into a content-keyed
//!   [`Template`] (the key covers the backend's name, the template source's identity and the
//!   bytes of every supplied file); [`Backend::create`] opens a live session from a template,
//!   and only with an [`Admission`](stockade_capabilities::Admission) witness, so no code path
//!   can start a worker that admission refused.
//! - **A minimal backend surface.** A backend implements [`RawSession`] (byte I/O on session
//!   paths, `lstat`, spawn, lifecycle) and [`RawProcess`]; [`Session`] adds path resolution
//!   that cannot escape through `..` or symlinks, text and byte reads, writes, and
//!   [`Session::run`] with a deadline and bounded output.
//! - **Lifecycle named for what it destroys.** `stop` ends compute and keeps the session
//!   reattachable; `shutdown` ends compute and leaves nothing running; `delete` removes compute
//!   and disposable state but never a template.
//! - **Exclusive leases.** A session is held under a [`Lease`]; reattaching needs the same
//!   backend and template and the lease; a lease left by a crashed host is only removed by
//!   [`LeaseStore::break_stale`] with an explicit [`OperatorVerification`].
//! - **Revision fences.** A launch prepared under an older policy revision is refused
//!   ([`Session::prepare_launch`], [`Session::launch`]).
//!
//! What this crate does **not** do: it starts no process and touches no kernel interface
//! itself (only `stockade-sandbox-linux` may), it decides no policy (`stockade-policy`) and
//! attests nothing (`stockade-capabilities`).
#![forbid(unsafe_code)]

mod error;
mod lease;
mod path;
mod raw;
mod run;
mod session;
mod template;

pub use error::SandboxError;
pub use lease::{Lease, LeaseError, LeaseHolder, LeaseStore, OperatorVerification, SessionRecord};
pub use path::{PathError, SessionPath};
pub use raw::{Backend, EntryKind, ExitStatus, Launch, RawProcess, RawSession, StdinMode};
pub use run::{RunOptions, RunOutput, StreamCapture};
pub use session::{PreparedLaunch, Revision, Session, SessionId, SessionState};
pub use template::{Template, TemplateKey, TemplateSpec};
