//! Integration tests of `stockade-orchestrator` that need no kernel feature.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::panic)]

mod attempt;
mod presets;
