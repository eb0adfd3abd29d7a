//! # stockade-capabilities — layer 1: protections, evidence, fail-closed admission
//!
//! What this crate does: it names every [`Protection`] a sandbox backend can attest (the eight
//! ADR-0017 enforcement bits plus seccomp, `no_new_privs`, Landlock, the isolated input mount
//! and the two network modes), records what one backend attests on one host
//! ([`SandboxCapabilities`]: `Enforced { evidence }`, `Unavailable { reason, remedy }` or
//! unknown), and decides admission. [`admit`] (for a resolved `SandboxPolicy`, requiring
//! [`required_protections`]) and [`admit_protections`] (for an explicit set, used by
//! `stockade exec`) return an [`Admission`] witness — a value with a private constructor, not
//! `Clone` — only when every required protection is enforced with evidence; otherwise a
//! [`Refusal`] that lists every missing protection with its reason and remedy.
//!
//! What this crate does **not** do: it runs no self-test and touches no kernel interface; it
//! cannot tell whether a backend told the truth. Backends (layer 3) prove each protection
//! on the host and build the [`SandboxCapabilities`]; this crate only refuses to admit what
//! was not attested. Unknown counts as not enforced. There is no override and no fallback.
#![forbid(unsafe_code)]

mod admission;
mod capabilities;
mod protection;

pub use admission::*;
pub use capabilities::*;
pub use protection::*;
