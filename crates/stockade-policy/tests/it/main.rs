//! Integration tests for stockade-policy: loading, resolution rules, laws and snapshots.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, missing_docs)] // test binary: helpers may unwrap

mod laws;
mod load;
mod resolve;
mod seeds;

use stockade_policy::{
    AgentPreset, TrustedModelConnections, WorkUnit, load_preset, load_trusted_connections,
    load_work_unit,
};

pub fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

pub fn codex() -> AgentPreset {
    load_preset(&data("codex.preset.toml"), "codex.preset.toml").unwrap()
}

pub fn claude() -> AgentPreset {
    load_preset(&data("claude.preset.json"), "claude.preset.json").unwrap()
}

pub fn fix_parser() -> WorkUnit {
    load_work_unit(&data("fix-parser.work.toml"), "fix-parser.work.toml").unwrap()
}

pub fn no_network() -> WorkUnit {
    load_work_unit(&data("no-network.work.json"), "no-network.work.json").unwrap()
}

pub fn trusted() -> TrustedModelConnections {
    load_trusted_connections(&data("trusted.toml"), "trusted.toml").unwrap()
}
