//! What one backend attests on one host.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Protection;
use crate::admission::printable;

/// What a backend says about one protection on this host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status", deny_unknown_fields)]
pub enum ProtectionStatus {
    /// The backend proved the protection on this host with a live self-test.
    Enforced {
        /// What the self-test observed (for example "child in new pid ns saw 1 process").
        /// Blank evidence counts as not enforced.
        evidence: String,
    },
    /// The backend cannot enforce the protection here.
    Unavailable {
        /// Why not (what the self-test observed).
        reason: String,
        /// How to fix the host.
        remedy: String,
    },
    /// Nothing was attested. Counts as not enforced.
    Unknown,
}

impl ProtectionStatus {
    /// True only for [`Enforced`](ProtectionStatus::Enforced) with non-blank evidence.
    pub fn is_enforced(&self) -> bool {
        matches!(self, ProtectionStatus::Enforced { evidence } if !evidence.trim().is_empty())
    }
}

impl fmt::Display for ProtectionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtectionStatus::Enforced { evidence } if evidence.trim().is_empty() => {
                f.write_str("not enforced: attested without evidence")
            }
            ProtectionStatus::Enforced { evidence } => {
                write!(f, "enforced: {}", printable(evidence))
            }
            ProtectionStatus::Unavailable { reason, remedy } => {
                write!(
                    f,
                    "unavailable: {} (fix: {})",
                    printable(reason),
                    printable(remedy)
                )
            }
            ProtectionStatus::Unknown => f.write_str("unknown: not attested"),
        }
    }
}

/// Which sandbox backend made the attestation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendIdentity {
    /// The backend's stable name (it also keys prewarmed templates).
    pub name: String,
    /// The backend's version.
    pub version: String,
}

impl BackendIdentity {
    /// Builds an identity.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        BackendIdentity {
            name: name.into(),
            version: version.into(),
        }
    }
}

impl fmt::Display for BackendIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// Which cgroup hierarchy the host offers for resource ceilings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies (`/sys/fs/cgroup/<controller>`).
    V1,
    /// The unified hierarchy.
    V2,
    /// No usable cgroup hierarchy.
    None,
}

/// Facts about the host that the attestation was made on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The Landlock ABI version, `None` when Landlock is unavailable.
    pub landlock_abi: Option<u32>,
    /// The cgroup hierarchy used for ceilings.
    pub cgroup: CgroupVersion,
}

/// Everything one backend attests on one host: for each [`Protection`], a [`ProtectionStatus`].
///
/// A protection never [`set`](SandboxCapabilities::set) is [`ProtectionStatus::Unknown`], which
/// counts as not enforced, so a backend that forgets a protection fails closed.
///
/// This value is *evidence*, not authority: whoever builds it is trusted to have run the
/// self-tests it reports. Only the backend's own self-test should construct one that is handed
/// to [`admit`](crate::admit): live in this process, or shared by an earlier process of the
/// same boot through the backend's private store under the rules of ADR-0015 (same host key,
/// fresh, only successes, only the caller's uid could have written it). Never admit from a
/// report that came from anywhere else (a file a user passes, a network peer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxCapabilities {
    backend: BackendIdentity,
    host: HostFacts,
    protections: BTreeMap<Protection, ProtectionStatus>,
}

static UNKNOWN: ProtectionStatus = ProtectionStatus::Unknown;

impl SandboxCapabilities {
    /// Starts an attestation in which every protection is unknown.
    pub fn new(backend: BackendIdentity, host: HostFacts) -> Self {
        SandboxCapabilities {
            backend,
            host,
            protections: BTreeMap::new(),
        }
    }

    /// Records the status of one protection, replacing any earlier one.
    pub fn set(&mut self, protection: Protection, status: ProtectionStatus) {
        if status == ProtectionStatus::Unknown {
            self.protections.remove(&protection);
        } else {
            self.protections.insert(protection, status);
        }
    }

    /// The status of one protection ([`ProtectionStatus::Unknown`] if never set).
    pub fn status(&self, protection: Protection) -> &ProtectionStatus {
        self.protections.get(&protection).unwrap_or(&UNKNOWN)
    }

    /// True when the protection is enforced with evidence.
    pub fn is_enforced(&self, protection: Protection) -> bool {
        self.status(protection).is_enforced()
    }

    /// Every protection (all of [`Protection::ALL`], in order) with its status.
    pub fn iter(&self) -> impl Iterator<Item = (Protection, &ProtectionStatus)> + '_ {
        Protection::ALL
            .into_iter()
            .map(move |p| (p, self.status(p)))
    }

    /// The backend that made the attestation.
    pub fn backend(&self) -> &BackendIdentity {
        &self.backend
    }

    /// The host the attestation was made on.
    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// A stable, human-readable report: one line per protection.
    pub fn report(&self) -> String {
        let mut out = format!(
            "backend {} on kernel {} (landlock abi {}, cgroup {})\n",
            printable(&self.backend.to_string()),
            printable(&self.host.kernel),
            self.host
                .landlock_abi
                .map_or_else(|| "none".to_owned(), |v| v.to_string()),
            match self.host.cgroup {
                CgroupVersion::V1 => "v1",
                CgroupVersion::V2 => "v2",
                CgroupVersion::None => "none",
            }
        );
        for (p, s) in self.iter() {
            out.push_str(&format!("  {:<24} {}\n", p.as_str(), s));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> SandboxCapabilities {
        SandboxCapabilities::new(
            BackendIdentity::new("linux", "0.1.0"),
            HostFacts {
                kernel: "6.18.0".into(),
                landlock_abi: Some(7),
                cgroup: CgroupVersion::V1,
            },
        )
    }

    #[test]
    fn unset_is_unknown_and_not_enforced() {
        let c = caps();
        for (p, s) in c.iter() {
            assert_eq!(s, &ProtectionStatus::Unknown, "{p}");
            assert!(!c.is_enforced(p));
        }
    }

    #[test]
    fn blank_evidence_is_not_enforced() {
        let mut c = caps();
        c.set(
            Protection::Cpu,
            ProtectionStatus::Enforced {
                evidence: "  ".into(),
            },
        );
        assert!(!c.is_enforced(Protection::Cpu));
        c.set(
            Protection::Cpu,
            ProtectionStatus::Enforced {
                evidence: "cpu.cfs_quota_us=50000".into(),
            },
        );
        assert!(c.is_enforced(Protection::Cpu));
        c.set(Protection::Cpu, ProtectionStatus::Unknown);
        assert!(!c.is_enforced(Protection::Cpu));
    }

    #[test]
    fn report_snapshot() {
        let mut c = caps();
        c.set(
            Protection::ProcessTree,
            ProtectionStatus::Enforced {
                evidence: "child saw pid 1; tree reaped".into(),
            },
        );
        c.set(
            Protection::Memory,
            ProtectionStatus::Enforced {
                evidence: "oom-killed at 64 MiB".into(),
            },
        );
        c.set(
            Protection::Cpu,
            ProtectionStatus::Enforced {
                evidence: " ".into(),
            },
        );
        c.set(
            Protection::WritableDisk,
            ProtectionStatus::Unavailable {
                reason: "no size-limited upper layer".into(),
                remedy: "mount a tmpfs".into(),
            },
        );
        insta::assert_snapshot!("capability_report", c.report());
    }

    #[test]
    fn serde_round_trip() {
        let mut c = caps();
        c.set(
            Protection::Memory,
            ProtectionStatus::Enforced {
                evidence: "oom at 64 MiB".into(),
            },
        );
        c.set(
            Protection::Landlock,
            ProtectionStatus::Unavailable {
                reason: "abi 0".into(),
                remedy: "enable".into(),
            },
        );
        let json = serde_json::to_string(&c).unwrap();
        assert!(
            json.contains(r#""memory":{"status":"enforced","evidence":"oom at 64 MiB"}"#),
            "{json}"
        );
        let back: SandboxCapabilities = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
    }
}
