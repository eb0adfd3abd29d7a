//! # stockade-policy — layer 0: pure policy values
//!
//! What this crate does: it defines the values every other Stockade crate reasons about —
//! maintainer-owned [`AgentPreset`]s, task-level [`WorkUnit`]s, the separately trusted
//! [`TrustedModelConnections`] allow-list, exact network [`Origin`]s, [`ResourceLimits`] — and
//! resolves them into one immutable per-attempt [`SandboxPolicy`] (ADR-0017).
//!
//! What this crate does **not** do: no I/O, no clock, no environment, no processes. Loading
//! helpers take bytes and a file name for error messages; reading the file is the caller's job.
//! Secret *values* never live here: headers are referenced by name and resolved on the host by
//! the gateway.
#![forbid(unsafe_code)]

mod limits;
mod origin;
mod scope;

pub use limits::*;
pub use origin::*;
pub use scope::*;
