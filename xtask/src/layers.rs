//! The layering of the workspace: the ONE place the allowed-edge table lives.
//!
//! `cargo xtask lint` (rules L001 and L002) enforces it, and `cargo xtask codegen` mirrors it into
//! `docs/ARCHITECTURE.md`.

/// What a crate may depend on among the workspace crates.
#[derive(Debug, Clone, Copy)]
pub enum Allowed {
    /// Only these workspace crates.
    Only(&'static [&'static str]),
    /// Any workspace crate (test and tooling crates outside the layering).
    Anything,
}

/// One row of the layering table.
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    /// The layer number; `None` for crates outside the layering (tests, tooling).
    pub layer: Option<u8>,
    /// Package name.
    pub name: &'static str,
    /// What the crate is, in a few words.
    pub role: &'static str,
    /// The workspace crates it may depend on.
    pub may_depend_on: Allowed,
}

/// The one backend allowed to spawn processes and to contain `unsafe`.
pub const BACKEND: &str = "stockade-sandbox-linux";

/// Crates exempt from the spawning rules (L002, L003): test and tooling code.
pub const SPAWN_EXEMPT: &[&str] = &["stockade-tests", "xtask"];

const POLICY: &str = "stockade-policy";
const MANIFEST: &str = "stockade-manifest";
const CAPABILITIES: &str = "stockade-capabilities";
const SANDBOX: &str = "stockade-sandbox";
const GATEWAY: &str = "stockade-gateway";
const WORKSPACE: &str = "stockade-workspace";
const CAPTURE: &str = "stockade-capture";
const ORCHESTRATOR: &str = "stockade-orchestrator";

/// The allowed-edge table.
pub const TABLE: &[Layer] = &[
    Layer {
        layer: Some(0),
        name: POLICY,
        role: "pure values: presets, work units, resolved policy, origins, limits",
        may_depend_on: Allowed::Only(&[]),
    },
    Layer {
        layer: Some(0),
        name: MANIFEST,
        role: "pure ResultManifest types and their verifier (no gix, no tokio)",
        may_depend_on: Allowed::Only(&[]),
    },
    Layer {
        layer: Some(1),
        name: CAPABILITIES,
        role: "protections, evidence, fail-closed admission",
        may_depend_on: Allowed::Only(&[POLICY]),
    },
    Layer {
        layer: Some(2),
        name: SANDBOX,
        role: "backend contract, session API built once on top",
        may_depend_on: Allowed::Only(&[POLICY, CAPABILITIES]),
    },
    Layer {
        layer: Some(2),
        name: GATEWAY,
        role: "host-side HTTP gateway, credential headers",
        may_depend_on: Allowed::Only(&[POLICY]),
    },
    Layer {
        layer: Some(2),
        name: WORKSPACE,
        role: "exact-SHA checkout, prewarmed templates",
        may_depend_on: Allowed::Only(&[POLICY]),
    },
    Layer {
        layer: Some(2),
        name: CAPTURE,
        role: "candidate capture, artifacts, manifest writing",
        may_depend_on: Allowed::Only(&[POLICY, MANIFEST]),
    },
    Layer {
        layer: Some(3),
        name: BACKEND,
        role: "the only spawner, the only `unsafe`",
        may_depend_on: Allowed::Only(&[POLICY, CAPABILITIES, SANDBOX]),
    },
    Layer {
        layer: Some(4),
        name: ORCHESTRATOR,
        role: "runs an attempt end to end (tokio)",
        may_depend_on: Allowed::Only(&[
            POLICY,
            MANIFEST,
            CAPABILITIES,
            SANDBOX,
            GATEWAY,
            WORKSPACE,
            CAPTURE,
            BACKEND,
        ]),
    },
    Layer {
        layer: Some(5),
        name: "stockade-cli",
        role: "the `stockade` binary",
        may_depend_on: Allowed::Only(&[
            POLICY,
            MANIFEST,
            CAPABILITIES,
            SANDBOX,
            GATEWAY,
            WORKSPACE,
            CAPTURE,
            BACKEND,
            ORCHESTRATOR,
        ]),
    },
    Layer {
        layer: None,
        name: "stockade-tests",
        role: "workspace end-to-end and adversarial tests",
        may_depend_on: Allowed::Anything,
    },
    Layer {
        layer: None,
        name: "xtask",
        role: "repository automation: lint, ci, bench, codegen",
        may_depend_on: Allowed::Anything,
    },
];

/// The table row of a crate, if it has one.
pub fn lookup(name: &str) -> Option<&'static Layer> {
    TABLE.iter().find(|l| l.name == name)
}

/// Whether `from` may depend on the workspace crate `to`.
pub fn edge_allowed(from: &Layer, to: &str) -> bool {
    match from.may_depend_on {
        Allowed::Anything => true,
        Allowed::Only(list) => list.contains(&to),
    }
}

/// Whether `name` may depend on the backend (and so reach what it wraps).
pub fn may_reach_backend(name: &str) -> bool {
    lookup(name).is_some_and(|l| edge_allowed(l, BACKEND))
}

/// A crate that can start processes, and the feature that makes it so (`None`: any use).
#[derive(Debug, Clone, Copy)]
pub struct SpawnCapable {
    /// Package name.
    pub name: &'static str,
    /// The feature that gives it process creation, if only a feature does.
    pub feature: Option<&'static str>,
    /// Why it counts.
    pub why: &'static str,
}

/// Crates that can start processes (L002).
pub const SPAWN_CAPABLE: &[SpawnCapable] = &[
    SpawnCapable {
        name: "tokio",
        feature: Some("process"),
        why: "tokio::process spawns child processes",
    },
    SpawnCapable {
        name: "rustix",
        feature: Some("runtime"),
        why: "rustix::runtime exposes fork and execve",
    },
    SpawnCapable {
        name: "nix",
        feature: None,
        why: "nix wraps fork, clone and exec",
    },
    SpawnCapable {
        name: "duct",
        feature: None,
        why: "duct runs pipelines of child processes",
    },
    SpawnCapable {
        name: "subprocess",
        feature: None,
        why: "subprocess spawns child processes",
    },
    SpawnCapable {
        name: "async-process",
        feature: None,
        why: "async-process spawns child processes",
    },
    SpawnCapable {
        name: "command-group",
        feature: None,
        why: "command-group spawns process groups",
    },
    SpawnCapable {
        name: "process-wrap",
        feature: None,
        why: "process-wrap spawns child processes",
    },
    SpawnCapable {
        name: "shared_child",
        feature: None,
        why: "shared_child waits on and kills child processes",
    },
    SpawnCapable {
        name: "xshell",
        feature: None,
        why: "xshell runs commands",
    },
    SpawnCapable {
        name: "cmd_lib",
        feature: None,
        why: "cmd_lib runs shell-like commands",
    },
    SpawnCapable {
        name: "fork",
        feature: None,
        why: "fork wraps fork(2)",
    },
    SpawnCapable {
        name: "daemonize",
        feature: None,
        why: "daemonize forks",
    },
    SpawnCapable {
        name: "portable-pty",
        feature: None,
        why: "portable-pty spawns commands on a pty",
    },
    SpawnCapable {
        name: "pty-process",
        feature: None,
        why: "pty-process spawns commands on a pty",
    },
    SpawnCapable {
        name: "gix-command",
        feature: None,
        why: "gix-command runs programs a repository configures (hooks, filters, credential helpers)",
    },
];

/// The spawn-capable entry for a package name.
pub fn spawn_capable(name: &str) -> Option<&'static SpawnCapable> {
    SPAWN_CAPABLE.iter().find(|s| s.name == name)
}
