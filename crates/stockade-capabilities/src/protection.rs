//! The protections a sandbox backend can attest.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One protection a sandbox backend may attest to enforce on this host.
///
/// The first eight are the enforcement bits ADR-0017 requires before any worker starts
/// ([`Protection::ADR_0017`]); the rest are the mechanisms and network modes that the policy
/// asks for on top. The enum is deliberately *not* `#[non_exhaustive]`: adding a protection
/// must make every backend's exhaustive `match` fail to compile until it says something about
/// the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    /// The worker and every descendant live in one contained process tree that is killed and
    /// reaped as a whole (nothing survives the session).
    ProcessTree,
    /// A CPU ceiling is enforced.
    Cpu,
    /// A memory ceiling is enforced.
    Memory,
    /// A ceiling on every writable place of the sandbox is enforced.
    WritableDisk,
    /// A ceiling on the number of processes and threads is enforced.
    Pids,
    /// The worker sees only its workspace and explicitly mounted read-only host paths.
    FilesystemIsolation,
    /// No host credential, secret, socket or key material is reachable from the worker.
    CredentialIsolation,
    /// Network access is enforced by the kernel, compatible with the policy's network mode.
    NetworkEnforcement,
    /// A seccomp filter denies dangerous system calls.
    SeccompFilter,
    /// `no_new_privs` is set: no set-uid or file-capability escalation.
    NoNewPrivs,
    /// A Landlock ruleset restricts filesystem access (defence in depth).
    Landlock,
    /// Input files (a prompt file) are mounted from outside the candidate workspace, excluded
    /// by construction from what capture reads.
    IsolatedInputMount,
    /// Network mode: no network at all (only loopback inside the sandbox).
    NetworkDenyAll,
    /// Network mode: only exact origins, through the host-side gateway; direct TCP, UDP and DNS
    /// stay denied.
    NetworkGatewayOrigins,
}

impl Protection {
    /// Every protection, in declaration order.
    pub const ALL: [Protection; 14] = [
        Protection::ProcessTree,
        Protection::Cpu,
        Protection::Memory,
        Protection::WritableDisk,
        Protection::Pids,
        Protection::FilesystemIsolation,
        Protection::CredentialIsolation,
        Protection::NetworkEnforcement,
        Protection::SeccompFilter,
        Protection::NoNewPrivs,
        Protection::Landlock,
        Protection::IsolatedInputMount,
        Protection::NetworkDenyAll,
        Protection::NetworkGatewayOrigins,
    ];

    /// The eight enforcement bits ADR-0017 requires before a local coding agent may start.
    pub const ADR_0017: [Protection; 8] = [
        Protection::ProcessTree,
        Protection::Cpu,
        Protection::Memory,
        Protection::WritableDisk,
        Protection::Pids,
        Protection::FilesystemIsolation,
        Protection::CredentialIsolation,
        Protection::NetworkEnforcement,
    ];

    /// The isolation every admission requires, whatever else the caller asks for
    /// (see [`admit_protections`](crate::admit_protections)).
    pub const ISOLATION_FLOOR: [Protection; 4] = [
        Protection::ProcessTree,
        Protection::FilesystemIsolation,
        Protection::CredentialIsolation,
        Protection::NetworkEnforcement,
    ];

    /// The stable kebab-case id (used in reports, serialized capabilities and the CLI).
    pub const fn as_str(self) -> &'static str {
        match self {
            Protection::ProcessTree => "process-tree",
            Protection::Cpu => "cpu",
            Protection::Memory => "memory",
            Protection::WritableDisk => "writable-disk",
            Protection::Pids => "pids",
            Protection::FilesystemIsolation => "filesystem-isolation",
            Protection::CredentialIsolation => "credential-isolation",
            Protection::NetworkEnforcement => "network-enforcement",
            Protection::SeccompFilter => "seccomp-filter",
            Protection::NoNewPrivs => "no-new-privs",
            Protection::Landlock => "landlock",
            Protection::IsolatedInputMount => "isolated-input-mount",
            Protection::NetworkDenyAll => "network-deny-all",
            Protection::NetworkGatewayOrigins => "network-gateway-origins",
        }
    }

    /// A one-line human description of what the protection guarantees.
    pub const fn description(self) -> &'static str {
        match self {
            Protection::ProcessTree => "process-tree isolation and cleanup",
            Protection::Cpu => "cpu limit enforcement",
            Protection::Memory => "memory limit enforcement",
            Protection::WritableDisk => "writable-disk limit enforcement",
            Protection::Pids => "process/pid limit enforcement",
            Protection::FilesystemIsolation => "filesystem isolation",
            Protection::CredentialIsolation => "credential isolation",
            Protection::NetworkEnforcement => "network enforcement",
            Protection::SeccompFilter => "seccomp system-call filter",
            Protection::NoNewPrivs => "no_new_privs (no privilege escalation on exec)",
            Protection::Landlock => "landlock filesystem ruleset",
            Protection::IsolatedInputMount => {
                "isolated input mount outside the candidate workspace"
            }
            Protection::NetworkDenyAll => "deny-all network mode",
            Protection::NetworkGatewayOrigins => {
                "exact-origin network mode through the host gateway"
            }
        }
    }

    /// The generic fix for a host where the protection is not attested, used when a backend
    /// gave no specific remedy (the protection is unknown).
    pub const fn default_remedy(self) -> &'static str {
        match self {
            Protection::ProcessTree => {
                "use a backend that runs the worker in its own pid namespace and kills and reaps the whole tree; unprivileged user namespaces must be enabled (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)"
            }
            Protection::Cpu => {
                "make the cgroup cpu controller available and writable to stockade (cgroup v1: /sys/fs/cgroup/cpu; cgroup v2: enable +cpu in cgroup.subtree_control of a delegated subtree)"
            }
            Protection::Memory => {
                "make the cgroup memory controller available and writable to stockade (cgroup v1: /sys/fs/cgroup/memory; cgroup v2: enable +memory in cgroup.subtree_control of a delegated subtree)"
            }
            Protection::WritableDisk => {
                "give the backend a size-limited writable layer (a tmpfs or loop-mounted upper directory with a size= ceiling)"
            }
            Protection::Pids => {
                "make the cgroup pids controller available and writable to stockade (cgroup v1: /sys/fs/cgroup/pids; cgroup v2: enable +pids in cgroup.subtree_control of a delegated subtree)"
            }
            Protection::FilesystemIsolation => {
                "enable unprivileged user and mount namespaces so the backend can build a private root with only the workspace and read-only host paths"
            }
            Protection::CredentialIsolation => {
                "run the worker in fresh user, mount and ipc namespaces with a scrubbed environment and no host home, sockets or key material mounted"
            }
            Protection::NetworkEnforcement => {
                "enable unprivileged network namespaces so the worker gets its own network stack"
            }
            Protection::SeccompFilter => "use a kernel built with CONFIG_SECCOMP_FILTER=y",
            Protection::NoNewPrivs => {
                "use a kernel that supports prctl(PR_SET_NO_NEW_PRIVS) (linux 3.5 or newer)"
            }
            Protection::Landlock => {
                "use a kernel with landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter)"
            }
            Protection::IsolatedInputMount => {
                "use a backend that mounts prompt files read-only from outside the workspace, or switch the preset to stdin or argument prompt transport"
            }
            Protection::NetworkDenyAll => {
                "enable unprivileged network namespaces (an empty namespace has only loopback)"
            }
            Protection::NetworkGatewayOrigins => {
                "use a backend that connects the worker's empty network namespace to the host gateway over a unix socket, or give the work unit no network"
            }
        }
    }

    /// True for the eight ADR-0017 enforcement bits.
    pub fn is_adr_0017(self) -> bool {
        Protection::ADR_0017.contains(&self)
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not the id of any [`Protection`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protection `{0}`")]
pub struct UnknownProtection(pub String);

impl FromStr for Protection {
    type Err = UnknownProtection;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protection::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProtection(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for p in Protection::ALL {
            assert_eq!(p.as_str().parse::<Protection>().unwrap(), p);
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                format!("\"{}\"", p.as_str())
            );
            assert!(seen.insert(p.as_str()));
            assert!(!p.description().is_empty());
            assert!(!p.default_remedy().is_empty());
        }
        assert!("memory ".parse::<Protection>().is_err());
    }

    #[test]
    fn adr_bits_are_the_first_eight() {
        assert_eq!(&Protection::ALL[..8], &Protection::ADR_0017[..]);
        assert!(Protection::ISOLATION_FLOOR.iter().all(|p| p.is_adr_0017()));
        assert!(!Protection::Landlock.is_adr_0017());
    }
}
