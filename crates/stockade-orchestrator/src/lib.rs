//! # stockade-orchestrator — layer 4: one attempt, end to end
//!
//! What this crate does: it runs an attempt in order, failing closed at every step — resolve
//! the policy, probe and admit (no admission, no worker), create the exact-SHA workspace,
//! create the sandbox session, start the gateway, deliver the prompt, run the agent under its
//! wall-time budget, contain the process tree, capture, and write the manifest last.
//! It also holds the pieces of `stockade demo`: a scripted model server on host loopback and a
//! bundled demo agent that runs inside the sandbox.
//!
//! What this crate does **not** do: it never starts a process itself (only
//! `stockade-sandbox-linux` may), it never falls back to a raw process when a protection is
//! missing, and nothing in it merges, accepts or verifies a candidate.
#![forbid(unsafe_code)]

mod attempt;
pub mod demo;
pub mod model_server;
mod outcome;
pub mod plan;
pub mod progress;

pub use attempt::{
    AttemptRequest, Cancel, CancelHandle, LoadInputError, MAX_LOG_BYTES, Orchestrator,
    OrchestratorConfig, load_inputs,
};
pub use outcome::{
    AgentExit, AttemptError, AttemptOutcome, AttemptStatus, EXIT_AGENT_FAILED, EXIT_CAPTURED,
    EXIT_INCOMPLETE, EXIT_REFUSED,
};
