//! Workspace end-to-end and adversarial tests, judged from the host side.
//!
//! This crate may start programs (the `stockade` binary, `git`, peers): it is test code, outside
//! the layering that reserves spawning for `stockade-sandbox-linux`. Test helpers outside
//! `#[test]` functions may unwrap: a failed unwrap is a failed test.
#![forbid(unsafe_code)]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::unwrap_used
)]

mod agent_e2e;
mod attestation;
mod backend;
mod capture;
mod ceilings;
mod compat;
mod escape;
mod escape_kernel;
mod gateway_e2e;
mod orchestrator_run;
mod support;
mod workspace;
