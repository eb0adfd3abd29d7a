//! Workspace end-to-end and adversarial tests, judged from the host side.
//!
//! This crate may start programs (the `stockade` binary, `git`, peers): it is test code, outside
//! the layering that reserves spawning for `stockade-sandbox-linux`.
#![forbid(unsafe_code)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod workspace;
mod capture;
mod ceilings;
mod agent_e2e;
mod gateway_e2e;
mod escape;
mod escape_kernel;
mod compat;
