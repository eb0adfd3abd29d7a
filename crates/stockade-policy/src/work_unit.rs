//! Task-level work units and the separately trusted model-connection allow-list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{HeaderRef, Origin, PathPattern, ResourceLimits};

/// The network a work unit asks for.
///
/// Serialized as `{ mode = "none" }`, `{ mode = "bounded", destinations = [...] }` or
/// `{ mode = "unrestricted" }`; `destinations` is required with `bounded` and refused otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode", try_from = "NetworkRepr")]
pub enum NetworkPermission {
    /// No network at all.
    None,
    /// Only these exact origins (still bounded by the preset and the trusted allow-list).
    Bounded {
        /// The exact origins.
        destinations: Vec<Origin>,
    },
    /// Any destination: always refused on this path (ADR-0017).
    Unrestricted,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum NetworkModeRepr {
    None,
    Bounded,
    Unrestricted,
}

// serde's internally tagged enums ignore `deny_unknown_fields` on unit variants, so the
// network permission goes through a flat representation that refuses every stray field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkRepr {
    mode: NetworkModeRepr,
    destinations: Option<Vec<Origin>>,
}

impl TryFrom<NetworkRepr> for NetworkPermission {
    type Error = &'static str;

    fn try_from(r: NetworkRepr) -> Result<Self, Self::Error> {
        match (r.mode, r.destinations) {
            (NetworkModeRepr::None, None) => Ok(NetworkPermission::None),
            (NetworkModeRepr::Unrestricted, None) => Ok(NetworkPermission::Unrestricted),
            (NetworkModeRepr::Bounded, Some(destinations)) => {
                Ok(NetworkPermission::Bounded { destinations })
            }
            (NetworkModeRepr::Bounded, None) => Err("network mode `bounded` needs `destinations`"),
            (_, Some(_)) => Err("`destinations` is only allowed with network mode `bounded`"),
        }
    }
}

/// What a work unit is permitted to do.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Must be `true`.
    pub sandbox_required: bool,
    /// Must be `true` (a coding agent executes processes).
    pub process_execution: bool,
    /// Secret names the work unit asks for; must be empty on this path.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// The network the work unit asks for; never unrestricted.
    pub network: NetworkPermission,
    /// Wall-time budget in seconds; must be positive.
    pub wall_time_secs: u64,
    /// Resource limits; `None` takes the preset's defaults. Each field is capped by the
    /// preset's default (a work unit may lower a limit, never raise it).
    #[serde(default)]
    pub limits: Option<ResourceLimits>,
}

/// One unit of work for one agent attempt.
///
/// Plain data: every rule is checked by [`SandboxPolicy::resolve`](crate::SandboxPolicy::resolve),
/// which reports all violations at once. The objective is opaque text handed to the agent: it
/// is never parsed for authority.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkUnit {
    /// Stable id (`[A-Za-z0-9._-]`, 1 to 128 bytes).
    pub id: String,
    /// What the agent is asked to do.
    pub objective: String,
    /// The exact base commit: a full hex object id (40 for SHA-1, 64 for SHA-256).
    pub base_commit: String,
    /// Candidate path scope: the paths the agent's changes may touch; non-empty.
    pub scope: Vec<PathPattern>,
    /// Paths the candidate must not change, even inside the scope.
    #[serde(default)]
    pub forbidden: Vec<PathPattern>,
    /// What the work unit is permitted to do.
    pub permissions: Permissions,
}

/// One trusted model connection: an exact origin and the headers the gateway injects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedConnection {
    /// The exact origin.
    pub origin: Origin,
    /// Headers injected by the host-side gateway, values referenced by name.
    #[serde(default)]
    pub headers: Vec<HeaderRef>,
}

/// The separately resolved allow-list of model connections (owned by the host operator, not by
/// the task): model-only presets reach only these origins.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedModelConnections {
    /// Connections by name.
    #[serde(default, deserialize_with = "crate::de::unique_map")]
    pub connections: BTreeMap<String, TrustedConnection>,
}

impl TrustedModelConnections {
    /// The connection with this name.
    pub fn get(&self, name: &str) -> Option<&TrustedConnection> {
        self.connections.get(name)
    }
}
