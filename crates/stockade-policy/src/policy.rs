//! The immutable per-attempt sandbox policy and its resolution.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::secret::{is_absolute_normalized, is_env_name};
use crate::{
    AgentKind, AgentPreset, HeaderRef, NetworkPermission, Origin, PROMPT_FILE_PLACEHOLDER,
    PROMPT_PLACEHOLDER, PathPattern, PathScope, PromptTransport, ResourceLimits,
    TrustedModelConnections, WorkUnit,
};

/// The schema tag at the start of every canonical policy serialization.
pub const POLICY_SCHEMA: &str = "stockade.sandbox-policy.v1";

/// Patterns added to every policy's forbidden list: a candidate never changes git metadata,
/// at the top or in a nested repository (`**/.git` covers `.git` too).
pub const ALWAYS_FORBIDDEN: [&str; 1] = ["**/.git"];

/// The longest wall-time budget a work unit may ask for: seven days. Bounding it keeps every
/// deadline computation (`Instant + wall_time`) far from overflow.
pub const MAX_WALL_TIME_SECS: u64 = 7 * 24 * 60 * 60;

/// The network mode a backend must enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// No network: an empty network namespace (loopback only).
    DenyAll,
    /// Only [`SandboxPolicy::destinations`], through the host-side gateway; direct TCP, UDP and
    /// DNS stay denied.
    GatewayOrigins,
}

/// One exact origin the worker may reach through the gateway.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Destination {
    /// The exact origin.
    pub origin: Origin,
    /// The trusted connection it came from.
    pub connection: String,
    /// Headers the gateway injects (values referenced by name only).
    pub headers: Vec<HeaderRef>,
    /// Environment variables the orchestrator points at the gateway for this origin.
    pub base_url_env: Vec<String>,
}

/// One rule a work unit, preset or trusted allow-list breaks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// A work unit, preset or connection id is not `[A-Za-z0-9._-]{1,128}`.
    #[error("{what} id `{id}` must be 1 to 128 characters from [A-Za-z0-9._-]")]
    Id {
        /// `work unit`, `preset` or `connection`.
        what: &'static str,
        /// The id as given.
        id: String,
    },
    /// The work unit does not require a sandbox.
    #[error("work unit must require a sandbox (permissions.sandbox_required = true)")]
    WorkUnitSandboxNotRequired,
    /// The preset does not require a sandbox.
    #[error("preset must require a sandbox (sandbox_required = true)")]
    PresetSandboxNotRequired,
    /// The work unit does not permit process execution.
    #[error("work unit must permit process execution (permissions.process_execution = true)")]
    ProcessExecutionNotPermitted,
    /// The work unit asks for secrets.
    #[error("work unit asks for secrets {0:?}; no secret permission is allowed on this path")]
    SecretsRequested(Vec<String>),
    /// The work unit asks for unrestricted network.
    #[error(
        "work unit asks for unrestricted network; only none or bounded destinations are allowed"
    )]
    UnrestrictedNetwork,
    /// The wall-time budget is zero.
    #[error("work unit wall-time budget must be positive (permissions.wall_time_secs > 0)")]
    WallTimeNotPositive,
    /// The wall-time budget is longer than [`MAX_WALL_TIME_SECS`].
    #[error("work unit wall-time budget of {0} s is longer than the 604800 s (seven-day) maximum")]
    WallTimeTooLong(u64),
    /// The candidate scope is empty.
    #[error("work unit candidate scope is empty; name at least one path")]
    EmptyScope,
    /// The base commit is not a full hex object id.
    #[error("base commit `{0}` must be a full hex object id (40 or 64 hex digits)")]
    BaseCommit(String),
    /// The objective is blank.
    #[error("work unit objective is empty")]
    EmptyObjective,
    /// The objective contains a NUL byte but must travel as a command argument.
    #[error("work unit objective contains a NUL byte, which cannot travel as a command argument")]
    ObjectiveNul,
    /// A resource limit is zero.
    #[error("{origin} limit `{field}` must be positive")]
    LimitNotPositive {
        /// `work unit` or `preset`.
        origin: &'static str,
        /// The field name.
        field: &'static str,
    },
    /// The command is empty or its program is empty.
    #[error("preset command is empty")]
    EmptyCommand,
    /// A command argument contains a NUL byte.
    #[error("preset command argument {0} contains a NUL byte")]
    CommandNul(usize),
    /// The command does not use the placeholder its prompt transport needs, or uses another.
    #[error("preset command and prompt transport disagree: {0}")]
    PromptPlaceholder(String),
    /// The command uses a placeholder that does not exist.
    #[error("preset command uses unknown placeholder `{0}`; known: {{prompt}}, {{prompt_file}}")]
    UnknownPlaceholder(String),
    /// An environment variable name is invalid.
    #[error("preset env name `{0}` must match [A-Za-z_][A-Za-z0-9_]*")]
    EnvName(String),
    /// An environment variable value contains a NUL byte.
    #[error("preset env `{0}` has a value containing a NUL byte")]
    EnvValue(String),
    /// An environment variable is also set by a connection's `base_url_env`.
    #[error(
        "env `{name}` is set both by the preset and by connection `{connection}` (base_url_env)"
    )]
    EnvConflict {
        /// The variable.
        name: String,
        /// The connection that also sets it.
        connection: String,
    },
    /// A read-only host path is refused.
    #[error("read-only host path `{path}` is refused: {reason}")]
    ReadOnlyHostPath {
        /// The path as given.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// A preset connection name is listed twice.
    #[error("preset names connection `{0}` more than once")]
    DuplicateConnection(String),
    /// A `base_url_env` entry is not an environment variable name.
    #[error("connection `{connection}` base_url_env `{name}` must match [A-Za-z_][A-Za-z0-9_]*")]
    BaseUrlEnv {
        /// The connection.
        connection: String,
        /// The bad name.
        name: String,
    },
    /// A connection the preset needs is not on the trusted allow-list.
    #[error("preset connection `{0}` is not on the trusted model-connection allow-list")]
    ConnectionNotTrusted(String),
    /// A work-unit destination is not reachable through any trusted connection the preset names.
    #[error("destination {origin} is not allowed: {reason}")]
    DestinationNotAllowed {
        /// The origin the work unit asked for.
        origin: Origin,
        /// Why.
        reason: String,
    },
    /// Two connections the preset names share one origin: the headers to inject are ambiguous.
    #[error(
        "destination {origin} is served by several connections ({connections:?}); headers would be ambiguous"
    )]
    AmbiguousDestination {
        /// The origin.
        origin: Origin,
        /// The connections.
        connections: Vec<String>,
    },
    /// A header name is not an HTTP token.
    #[error("connection `{connection}` header `{header}` is not a valid http header name")]
    HeaderName {
        /// The connection.
        connection: String,
        /// The header.
        header: String,
    },
    /// A header the gateway must control (framing, hop-by-hop, host).
    #[error(
        "connection `{connection}` may not inject header `{header}` (framing, hop-by-hop or host header)"
    )]
    ReservedHeader {
        /// The connection.
        connection: String,
        /// The header.
        header: String,
    },
    /// The same header is injected twice by one connection.
    #[error("connection `{connection}` injects header `{header}` more than once")]
    DuplicateHeader {
        /// The connection.
        connection: String,
        /// The header.
        header: String,
    },
    /// A forbidden pattern cannot be added (never expected: built-in patterns are valid).
    #[error("internal: {0}")]
    Internal(String),
}

/// The work unit, preset and allow-list cannot be resolved into a policy.
///
/// Lists *every* violated rule, in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    work_unit_id: String,
    preset_id: String,
    violations: Vec<Violation>,
}

impl PolicyError {
    /// Every violated rule; never empty.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// The work unit's id as given.
    pub fn work_unit_id(&self) -> &str {
        &self.work_unit_id
    }

    /// The preset's id as given.
    pub fn preset_id(&self) -> &str {
        &self.preset_id
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.violations.len();
        write!(
            f,
            "work unit `{}` with preset `{}` breaks {} policy rule{}",
            self.work_unit_id.escape_debug(),
            self.preset_id.escape_debug(),
            n,
            if n == 1 { "" } else { "s" }
        )?;
        for v in &self.violations {
            write!(f, "\n  - {}", crate::load::printable(&v.to_string()))?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
struct Resolved {
    schema: &'static str,
    work_unit_id: String,
    preset_id: String,
    kind: AgentKind,
    base_commit: String,
    objective: String,
    scope: PathScope,
    limits: ResourceLimits,
    wall_time_secs: u64,
    network: NetworkMode,
    destinations: Vec<Destination>,
    read_only_host_paths: Vec<String>,
    env: Vec<(String, String)>,
    command: Vec<String>,
    prompt_transport: PromptTransport,
    requires_isolated_input_mount: bool,
}

/// The immutable policy for one attempt, resolved from a [`WorkUnit`], an [`AgentPreset`] and
/// the [`TrustedModelConnections`].
///
/// Fields are private and there is no `Deserialize`: the only way to get one is
/// [`SandboxPolicy::resolve`], which checks every rule. Its [`id`](SandboxPolicy::id) is the
/// blake3 hash (hex) of [`canonical_json`](SandboxPolicy::canonical_json).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SandboxPolicy {
    id: String,
    canonical: String,
    r: Resolved,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn valid_commit(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn valid_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

const RESERVED_HEADERS: [&str; 12] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
    "expect",
];

/// Host locations a preset may never mount into a sandbox, nor any ancestor of them.
const DENIED_HOST_PREFIXES: [&str; 14] = [
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/boot",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/spool/cron",
];

/// Path components that name credential stores.
const DENIED_COMPONENTS: [&str; 10] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    "gcloud",
    "docker.sock",
];

fn host_path_problem(path: &str) -> Option<&'static str> {
    if !is_absolute_normalized(path) {
        return Some(
            "must be an absolute normalized path (no `..`, `.`, empty segments or trailing `/`)",
        );
    }
    if path == "/" {
        return Some("mounting the whole host root would expose host credentials");
    }
    for denied in DENIED_HOST_PREFIXES {
        let under = path == denied
            || path
                .strip_prefix(denied)
                .is_some_and(|r| r.starts_with('/'));
        let ancestor = denied
            .strip_prefix(path)
            .is_some_and(|r| r.starts_with('/'));
        if under || ancestor {
            return Some("it is or contains a host control or credential location");
        }
    }
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    if (segs.first() == Some(&"home") && segs.len() <= 2) || path == "/root" {
        return Some(
            "a whole home directory holds credentials; mount the one folder the agent needs",
        );
    }
    if segs.iter().any(|s| DENIED_COMPONENTS.contains(s)) {
        return Some("it names a credential store");
    }
    None
}

/// Finds `{name}` placeholders: `{` then `[a-z_]+` then `}`.
fn placeholders(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = arg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' {
            let start = i;
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_lowercase() || b[j] == b'_') {
                j += 1;
            }
            if j < b.len() && b[j] == b'}' && j > i + 1 {
                out.push(&arg[start..=j]);
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

fn min_limits(a: ResourceLimits, b: ResourceLimits) -> ResourceLimits {
    ResourceLimits {
        cpu_millis: a.cpu_millis.min(b.cpu_millis),
        memory_bytes: a.memory_bytes.min(b.memory_bytes),
        disk_bytes: a.disk_bytes.min(b.disk_bytes),
        pids: a.pids.min(b.pids),
    }
}

fn check_limits(l: &ResourceLimits, source: &'static str, v: &mut Vec<Violation>) {
    let fields = [
        ("cpu_millis", l.cpu_millis == 0),
        ("memory_bytes", l.memory_bytes == 0),
        ("disk_bytes", l.disk_bytes == 0),
        ("pids", l.pids == 0),
    ];
    for (field, zero) in fields {
        if zero {
            v.push(Violation::LimitNotPositive {
                origin: source,
                field,
            });
        }
    }
}

impl SandboxPolicy {
    /// Resolves one attempt's policy, or lists every rule that the inputs break.
    ///
    /// Rules (ADR-0017): the work unit requires a sandbox, permits process execution, asks for
    /// no secrets, asks for no unrestricted network, has a positive wall-time budget, a
    /// non-empty candidate scope and a full-length base commit; the preset requires a sandbox.
    /// Network destinations are exactly the work unit's bounded destinations that are also the
    /// origin of a connection the preset names *and* that is on the trusted allow-list — any
    /// other destination is a violation, never silently dropped. The objective is never read
    /// for authority. `file` prompt transport makes the policy require an isolated input mount
    /// of the backend. Limits are the preset's defaults, lowered (never raised) by the work
    /// unit. `**/.git` is always forbidden.
    pub fn resolve(
        work_unit: &WorkUnit,
        preset: &AgentPreset,
        trusted: &TrustedModelConnections,
    ) -> Result<SandboxPolicy, PolicyError> {
        let mut v: Vec<Violation> = Vec::new();
        let perms = &work_unit.permissions;

        // Identity and work-unit rules of ADR-0017.
        if !valid_id(&work_unit.id) {
            v.push(Violation::Id {
                what: "work unit",
                id: work_unit.id.clone(),
            });
        }
        if !valid_id(&preset.id) {
            v.push(Violation::Id {
                what: "preset",
                id: preset.id.clone(),
            });
        }
        if !perms.sandbox_required {
            v.push(Violation::WorkUnitSandboxNotRequired);
        }
        if !preset.sandbox_required {
            v.push(Violation::PresetSandboxNotRequired);
        }
        if !perms.process_execution {
            v.push(Violation::ProcessExecutionNotPermitted);
        }
        if !perms.secrets.is_empty() {
            v.push(Violation::SecretsRequested(perms.secrets.clone()));
        }
        if perms.network == NetworkPermission::Unrestricted {
            v.push(Violation::UnrestrictedNetwork);
        }
        if perms.wall_time_secs == 0 {
            v.push(Violation::WallTimeNotPositive);
        } else if perms.wall_time_secs > MAX_WALL_TIME_SECS {
            v.push(Violation::WallTimeTooLong(perms.wall_time_secs));
        }
        if work_unit.scope.is_empty() {
            v.push(Violation::EmptyScope);
        }
        if !valid_commit(&work_unit.base_commit) {
            v.push(Violation::BaseCommit(work_unit.base_commit.clone()));
        }
        if work_unit.objective.trim().is_empty() {
            v.push(Violation::EmptyObjective);
        }
        if preset.prompt_transport == PromptTransport::Argument
            && work_unit.objective.contains('\0')
        {
            v.push(Violation::ObjectiveNul);
        }

        // Limits: preset defaults are ceilings; the work unit may only lower them.
        check_limits(&preset.default_limits, "preset", &mut v);
        let limits = match &perms.limits {
            Some(l) => {
                check_limits(l, "work unit", &mut v);
                min_limits(*l, preset.default_limits)
            }
            None => preset.default_limits,
        };

        // Command template and prompt transport.
        if preset.command.first().is_none_or(|p| p.is_empty()) {
            v.push(Violation::EmptyCommand);
        }
        let mut seen = BTreeSet::new();
        for (i, arg) in preset.command.iter().enumerate() {
            if arg.contains('\0') {
                v.push(Violation::CommandNul(i));
            }
            for ph in placeholders(arg) {
                if ph != PROMPT_PLACEHOLDER && ph != PROMPT_FILE_PLACEHOLDER {
                    v.push(Violation::UnknownPlaceholder(ph.to_owned()));
                } else {
                    seen.insert(ph);
                }
            }
        }
        if preset
            .command
            .first()
            .is_some_and(|p| !placeholders(p).is_empty())
        {
            v.push(Violation::PromptPlaceholder(
                "the program itself may not be a placeholder".into(),
            ));
        }
        let (wanted, other): (Option<&str>, &[&str]) = match preset.prompt_transport {
            PromptTransport::Stdin => (None, &[PROMPT_PLACEHOLDER, PROMPT_FILE_PLACEHOLDER]),
            PromptTransport::Argument => (Some(PROMPT_PLACEHOLDER), &[PROMPT_FILE_PLACEHOLDER]),
            PromptTransport::File => (Some(PROMPT_FILE_PLACEHOLDER), &[PROMPT_PLACEHOLDER]),
        };
        if let Some(w) = wanted
            && !seen.contains(w)
        {
            v.push(Violation::PromptPlaceholder(format!(
                "{} prompt transport needs `{w}` in a command argument",
                preset.prompt_transport.as_str()
            )));
        }
        for o in other {
            if seen.contains(o) {
                v.push(Violation::PromptPlaceholder(format!(
                    "{} prompt transport may not use `{o}`",
                    preset.prompt_transport.as_str()
                )));
            }
        }

        // Environment and read-only host paths.
        for (name, value) in &preset.env {
            if !is_env_name(name) {
                v.push(Violation::EnvName(name.clone()));
            }
            if value.contains('\0') {
                v.push(Violation::EnvValue(name.clone()));
            }
        }
        for path in &preset.read_only_host_paths {
            if let Some(reason) = host_path_problem(path) {
                v.push(Violation::ReadOnlyHostPath {
                    path: path.clone(),
                    reason,
                });
            }
        }

        // Preset connections.
        let mut names = BTreeSet::new();
        let mut base_url_owner: BTreeMap<&str, &str> = BTreeMap::new();
        for c in &preset.connections {
            if !valid_id(&c.name) {
                v.push(Violation::Id {
                    what: "connection",
                    id: c.name.clone(),
                });
            }
            if !names.insert(c.name.as_str()) {
                v.push(Violation::DuplicateConnection(c.name.clone()));
            }
            for e in &c.base_url_env {
                if !is_env_name(e) {
                    v.push(Violation::BaseUrlEnv {
                        connection: c.name.clone(),
                        name: e.clone(),
                    });
                } else if preset.env.contains_key(e) {
                    v.push(Violation::EnvConflict {
                        name: e.clone(),
                        connection: c.name.clone(),
                    });
                } else if let Some(owner) = base_url_owner.insert(e, &c.name)
                    && owner != c.name
                {
                    v.push(Violation::EnvConflict {
                        name: e.clone(),
                        connection: owner.to_owned(),
                    });
                }
            }
        }

        // Network: the intersection of the work unit, the preset and the trusted allow-list.
        // The objective is never consulted.
        let mut destinations: Vec<Destination> = Vec::new();
        if let NetworkPermission::Bounded {
            destinations: wanted,
        } = &perms.network
        {
            // Origins reachable through a trusted connection the preset names.
            let mut offered: BTreeMap<&Origin, Vec<&str>> = BTreeMap::new();
            for c in &preset.connections {
                match trusted.get(&c.name) {
                    Some(t) => offered.entry(&t.origin).or_default().push(&c.name),
                    None if wanted.is_empty() => {}
                    None => v.push(Violation::ConnectionNotTrusted(c.name.clone())),
                }
            }
            let unique: BTreeSet<&Origin> = wanted.iter().collect();
            for origin in unique {
                let names: Vec<&str> = {
                    let mut n = offered.get(origin).cloned().unwrap_or_default();
                    n.sort_unstable();
                    n.dedup();
                    n
                };
                match names.as_slice() {
                    [] => {
                        let reason = match preset.kind {
                            AgentKind::ModelOnly => {
                                if trusted.connections.values().any(|t| &t.origin == origin) {
                                    format!(
                                        "preset `{}` names no trusted connection with this origin",
                                        preset.id.escape_debug()
                                    )
                                } else {
                                    "model-only presets reach only origins on the trusted model-connection allow-list, and this origin is not on it".to_owned()
                                }
                            }
                        };
                        v.push(Violation::DestinationNotAllowed {
                            origin: origin.clone(),
                            reason,
                        });
                    }
                    [name] => {
                        let (Some(t), Some(pc)) = (
                            trusted.get(name),
                            preset.connections.iter().find(|c| c.name == *name),
                        ) else {
                            v.push(Violation::Internal(format!("connection `{name}` vanished")));
                            continue;
                        };
                        let mut headers = Vec::new();
                        let mut header_names = BTreeSet::new();
                        for h in &t.headers {
                            let lower = h.header.to_ascii_lowercase();
                            if !valid_header_name(&h.header) {
                                v.push(Violation::HeaderName {
                                    connection: (*name).to_owned(),
                                    header: h.header.clone(),
                                });
                            } else if RESERVED_HEADERS.contains(&lower.as_str()) {
                                v.push(Violation::ReservedHeader {
                                    connection: (*name).to_owned(),
                                    header: h.header.clone(),
                                });
                            } else if !header_names.insert(lower.clone()) {
                                v.push(Violation::DuplicateHeader {
                                    connection: (*name).to_owned(),
                                    header: lower.clone(),
                                });
                            }
                            headers.push(HeaderRef {
                                header: lower,
                                secret: h.secret.clone(),
                            });
                        }
                        headers.sort();
                        let mut base_url_env = pc.base_url_env.clone();
                        base_url_env.sort();
                        base_url_env.dedup();
                        destinations.push(Destination {
                            origin: origin.clone(),
                            connection: (*name).to_owned(),
                            headers,
                            base_url_env,
                        });
                    }
                    many => v.push(Violation::AmbiguousDestination {
                        origin: origin.clone(),
                        connections: many.iter().map(|s| (*s).to_owned()).collect(),
                    }),
                }
            }
        }
        let network = if destinations.is_empty() {
            NetworkMode::DenyAll
        } else {
            NetworkMode::GatewayOrigins
        };

        // Scope: the work unit's candidate scope; forbidden = the work unit's plus git metadata.
        let mut forbidden = work_unit.forbidden.clone();
        for p in ALWAYS_FORBIDDEN {
            match PathPattern::parse(p) {
                Ok(p) => forbidden.push(p),
                Err(e) => v.push(Violation::Internal(e.to_string())),
            }
        }
        let scope = PathScope::new(work_unit.scope.clone(), forbidden);

        let fail = |v: Vec<Violation>| PolicyError {
            work_unit_id: work_unit.id.clone(),
            preset_id: preset.id.clone(),
            violations: v,
        };
        let scope = match scope {
            Ok(s) if v.is_empty() => s,
            _ => return Err(fail(v)),
        };

        let mut read_only_host_paths = preset.read_only_host_paths.clone();
        read_only_host_paths.sort();
        read_only_host_paths.dedup();
        let r = Resolved {
            schema: POLICY_SCHEMA,
            work_unit_id: work_unit.id.clone(),
            preset_id: preset.id.clone(),
            kind: preset.kind,
            base_commit: work_unit.base_commit.to_ascii_lowercase(),
            objective: work_unit.objective.clone(),
            scope,
            limits,
            wall_time_secs: perms.wall_time_secs,
            network,
            destinations,
            read_only_host_paths,
            env: preset
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            command: preset.command.clone(),
            prompt_transport: preset.prompt_transport,
            requires_isolated_input_mount: preset.prompt_transport == PromptTransport::File,
        };
        let canonical = match serde_json::to_string(&r) {
            Ok(c) => c,
            Err(e) => return Err(fail(vec![Violation::Internal(e.to_string())])),
        };
        let id = blake3::hash(canonical.as_bytes()).to_hex().to_string();
        Ok(SandboxPolicy { id, canonical, r })
    }

    /// The content id: blake3 (hex) of [`canonical_json`](SandboxPolicy::canonical_json).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The canonical serialization (compact JSON, fixed field order, sorted collections), the
    /// input of [`id`](SandboxPolicy::id). Contains secret *references* only.
    pub fn canonical_json(&self) -> &str {
        &self.canonical
    }

    /// The work unit's id.
    pub fn work_unit_id(&self) -> &str {
        &self.r.work_unit_id
    }

    /// The preset's id.
    pub fn preset_id(&self) -> &str {
        &self.r.preset_id
    }

    /// The preset's agent kind.
    pub fn kind(&self) -> AgentKind {
        self.r.kind
    }

    /// The exact base commit, lower-case hex.
    pub fn base_commit(&self) -> &str {
        &self.r.base_commit
    }

    /// The objective text, handed to the agent as its prompt; never a source of authority.
    pub fn objective(&self) -> &str {
        &self.r.objective
    }

    /// Writable (candidate) and forbidden paths; forbidden always includes git metadata.
    pub fn scope(&self) -> &PathScope {
        &self.r.scope
    }

    /// Resource ceilings the backend must enforce.
    pub fn limits(&self) -> &ResourceLimits {
        &self.r.limits
    }

    /// The wall-time budget.
    pub fn wall_time(&self) -> Duration {
        Duration::from_secs(self.r.wall_time_secs)
    }

    /// The network mode the backend must enforce.
    pub fn network(&self) -> NetworkMode {
        self.r.network
    }

    /// The exact destinations (empty for [`NetworkMode::DenyAll`]), sorted by origin.
    pub fn destinations(&self) -> &[Destination] {
        &self.r.destinations
    }

    /// Absolute host paths to mount read-only, sorted.
    pub fn read_only_host_paths(&self) -> &[String] {
        &self.r.read_only_host_paths
    }

    /// Fixed environment variables, sorted by name.
    pub fn env(&self) -> &[(String, String)] {
        &self.r.env
    }

    /// The command template (placeholders still in place).
    pub fn command(&self) -> &[String] {
        &self.r.command
    }

    /// How the prompt reaches the agent.
    pub fn prompt_transport(&self) -> PromptTransport {
        self.r.prompt_transport
    }

    /// True when the backend must provide an isolated input mount (file prompt transport).
    pub fn requires_isolated_input_mount(&self) -> bool {
        self.r.requires_isolated_input_mount
    }
}

impl Serialize for SandboxPolicy {
    /// Serializes as `{"id": …, "policy": <canonical content>}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            id: &'a str,
            policy: &'a Resolved,
        }
        Out {
            id: &self.id,
            policy: &self.r,
        }
        .serialize(s)
    }
}
