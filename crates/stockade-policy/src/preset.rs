//! Maintainer-owned agent presets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ResourceLimits;

/// The placeholder in a command template replaced by the prompt text
/// ([`PromptTransport::Argument`]).
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";

/// The placeholder in a command template replaced by the in-sandbox path of the prompt file
/// ([`PromptTransport::File`]).
pub const PROMPT_FILE_PLACEHOLDER: &str = "{prompt_file}";

/// What kind of agent a preset runs, which decides the rules its network must obey.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum AgentKind {
    /// The agent only talks to model APIs: every destination must be on the separately trusted
    /// model-connection allow-list.
    ModelOnly,
}

/// How the prompt (the work unit's objective) reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptTransport {
    /// On the agent's standard input.
    Stdin,
    /// In place of [`PROMPT_PLACEHOLDER`] in one or more command arguments.
    Argument,
    /// As a file whose in-sandbox path replaces [`PROMPT_FILE_PLACEHOLDER`]; needs an isolated
    /// input mount (ADR-0017: never written into the candidate workspace).
    File,
}

impl PromptTransport {
    /// The serialized name: `stdin`, `argument` or `file`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PromptTransport::Stdin => "stdin",
            PromptTransport::Argument => "argument",
            PromptTransport::File => "file",
        }
    }
}

/// A model connection a preset needs, by name in the trusted allow-list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetConnection {
    /// The connection's name in [`TrustedModelConnections`](crate::TrustedModelConnections).
    pub name: String,
    /// Environment variables the agent's SDK reads for the base URL (for example
    /// `OPENAI_BASE_URL`); the orchestrator points them at the gateway.
    #[serde(default)]
    pub base_url_env: Vec<String>,
}

/// A maintainer-owned description of how to run one agent.
///
/// Plain data: every rule is checked by [`SandboxPolicy::resolve`](crate::SandboxPolicy::resolve),
/// which reports all violations at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentPreset {
    /// Stable id (`[A-Za-z0-9._-]`, 1 to 128 bytes).
    pub id: String,
    /// The agent kind.
    pub kind: AgentKind,
    /// Program and arguments; may contain [`PROMPT_PLACEHOLDER`] or [`PROMPT_FILE_PLACEHOLDER`].
    pub command: Vec<String>,
    /// How the prompt reaches the agent.
    pub prompt_transport: PromptTransport,
    /// Default resource limits, which are also ceilings: a work unit may lower them, never raise.
    pub default_limits: ResourceLimits,
    /// The model connections the agent needs.
    #[serde(default)]
    pub connections: Vec<PresetConnection>,
    /// Absolute host paths mounted read-only (an interpreter, a virtual environment, a global
    /// npm folder).
    #[serde(default)]
    pub read_only_host_paths: Vec<String>,
    /// Environment variables with fixed values (never secrets: those go through the gateway).
    #[serde(default, deserialize_with = "crate::de::unique_map")]
    pub env: BTreeMap<String, String>,
    /// Must be `true`: a local coding agent never runs outside a sandbox.
    pub sandbox_required: bool,
}
