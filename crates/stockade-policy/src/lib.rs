//! # stockade-policy — layer 0: pure policy values
//!
//! What this crate does: it defines the values every other Stockade crate reasons about —
//! maintainer-owned [`AgentPreset`]s, task-level [`WorkUnit`]s, the separately trusted
//! [`TrustedModelConnections`] allow-list, exact network [`Origin`]s, candidate
//! [`PathScope`]s and [`ResourceLimits`] — and resolves them into one immutable per-attempt
//! [`SandboxPolicy`] (ADR-0017) with [`SandboxPolicy::resolve`], which lists every violated
//! rule in a [`PolicyError`]. It loads presets, work units and allow-lists from TOML or JSON
//! bytes ([`load_preset`], [`load_work_unit`], [`load_trusted_connections`]), refusing unknown
//! fields and naming the file and field path of every error.
//!
//! What this crate does **not** do: no I/O, no clock, no environment, no processes. Loading
//! helpers take bytes and a file name for error messages; reading the file is the caller's job.
//! It enforces nothing at run time: a [`SandboxPolicy`] is a statement of what a backend must
//! enforce, and admission (`stockade-capabilities`) decides whether a backend can.
//! Secret *values* never live here: headers are referenced by name ([`SecretRef`]) and resolved
//! on the host by the gateway, so no `Debug`, `Display` or serialization can leak one.
//! The objective text is opaque: it is never parsed, so it can never create network authority.
#![forbid(unsafe_code)]

mod de;
mod limits;
mod load;
pub mod oracle;
mod origin;
mod policy;
mod preset;
mod scope;
mod secret;
mod work_unit;

pub use limits::*;
pub use load::*;
pub use origin::*;
pub use policy::*;
pub use preset::*;
pub use scope::*;
pub use secret::{HeaderRef, SecretRef, SecretRefError, SecretSource};
pub use work_unit::*;
