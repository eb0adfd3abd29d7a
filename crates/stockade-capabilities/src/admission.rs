//! Fail-closed admission: a witness that every required protection is attested.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use stockade_policy::{NetworkMode, SandboxPolicy};

use crate::{BackendIdentity, Protection, ProtectionStatus, SandboxCapabilities};

/// Proof that a backend attested every required protection.
///
/// The only constructors are [`admit`](crate::admit) and [`admit_protections`]; the fields are
/// private and the type is neither `Clone` nor `Copy` nor `Deserialize`, so code that needs an
/// `Admission` (the launcher) cannot be reached without passing admission, and one admission
/// cannot be duplicated to start a second worker.
#[derive(Debug, Serialize)]
#[must_use = "an admission is the only way to start a worker; dropping it wastes the check"]
pub struct Admission {
    backend: BackendIdentity,
    policy_id: Option<String>,
    protections: BTreeMap<Protection, String>,
}

impl Admission {
    /// The backend whose attestation was admitted.
    pub fn backend(&self) -> &BackendIdentity {
        &self.backend
    }

    /// The resolved policy's content id, when admitted by [`admit`](crate::admit).
    pub fn policy_id(&self) -> Option<&str> {
        self.policy_id.as_deref()
    }

    /// True only when this admission was made by [`admit`](crate::admit) for exactly this policy
    /// (same content id). An admission from [`admit_protections`] is for no policy.
    pub fn is_for_policy(&self, policy: &SandboxPolicy) -> bool {
        self.policy_id.as_deref() == Some(policy.id())
    }

    /// True when this admission was made from the attestation of the backend called `name`.
    pub fn is_for_backend(&self, name: &str) -> bool {
        self.backend.name == name
    }

    /// The required protections that were admitted (every one was enforced with evidence).
    pub fn protections(&self) -> impl Iterator<Item = Protection> + '_ {
        self.protections.keys().copied()
    }

    /// True when `protection` was required and admitted.
    pub fn covers(&self, protection: Protection) -> bool {
        self.protections.contains_key(&protection)
    }

    /// The evidence the backend gave for an admitted protection.
    pub fn evidence(&self, protection: Protection) -> Option<&str> {
        self.protections.get(&protection).map(String::as_str)
    }
}

/// One required protection the backend did not attest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct MissingProtection {
    /// The protection.
    pub protection: Protection,
    /// Why it is not enforced.
    pub reason: String,
    /// How to fix the host.
    pub remedy: String,
}

/// The backend cannot enforce everything required: the worker must not start.
///
/// Lists *every* missing protection, each with its reason and remedy, not just the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct Refusal {
    backend: BackendIdentity,
    policy_id: Option<String>,
    missing: Vec<MissingProtection>,
}

impl Refusal {
    /// The backend that was refused.
    pub fn backend(&self) -> &BackendIdentity {
        &self.backend
    }

    /// The resolved policy's content id, when refused by [`admit`](crate::admit).
    pub fn policy_id(&self) -> Option<&str> {
        self.policy_id.as_deref()
    }

    /// Every missing protection, in [`Protection`] order; never empty.
    pub fn missing(&self) -> &[MissingProtection] {
        &self.missing
    }

    /// The missing protections only.
    pub fn missing_protections(&self) -> BTreeSet<Protection> {
        self.missing.iter().map(|m| m.protection).collect()
    }
}

/// Escapes control characters so backend-supplied text cannot rewrite the operator's terminal.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.missing.len();
        write!(
            f,
            "sandbox backend `{}` cannot enforce {} required protection{}",
            self.backend,
            n,
            if n == 1 { "" } else { "s" }
        )?;
        if let Some(id) = &self.policy_id {
            write!(f, " for policy {id}")?;
        }
        f.write_str("; refusing to start the worker (there is no unsandboxed fallback)")?;
        for m in &self.missing {
            write!(
                f,
                "\n  - {} ({}): {}\n    fix: {}",
                m.protection,
                m.protection.description(),
                printable(&m.reason),
                printable(&m.remedy)
            )?;
        }
        Ok(())
    }
}

/// Admits a worker that needs `required` protections, plus [`Protection::ISOLATION_FLOOR`]
/// which is always required (used by `stockade exec`, which asks for isolation and one ceiling
/// per limit flag).
///
/// Returns an [`Admission`] only when every required protection is enforced with evidence;
/// otherwise a [`Refusal`] listing every one that is not.
pub fn admit_protections(
    caps: &SandboxCapabilities,
    required: &BTreeSet<Protection>,
) -> Result<Admission, Refusal> {
    decide(caps, required, None)
}

/// The protections a resolved policy requires of a backend: the eight ADR-0017 bits, the
/// network mode the policy needs ([`Protection::NetworkDenyAll`] or
/// [`Protection::NetworkGatewayOrigins`]), [`Protection::IsolatedInputMount`] when the policy
/// requires one (file prompt transport), and always [`Protection::SeccompFilter`],
/// [`Protection::NoNewPrivs`] and [`Protection::Landlock`].
pub fn required_protections(policy: &SandboxPolicy) -> BTreeSet<Protection> {
    let mut required: BTreeSet<Protection> = Protection::ADR_0017.into_iter().collect();
    required.insert(match policy.network() {
        NetworkMode::DenyAll => Protection::NetworkDenyAll,
        NetworkMode::GatewayOrigins => Protection::NetworkGatewayOrigins,
    });
    if policy.requires_isolated_input_mount() {
        required.insert(Protection::IsolatedInputMount);
    }
    required.extend([
        Protection::SeccompFilter,
        Protection::NoNewPrivs,
        Protection::Landlock,
    ]);
    required
}

/// Admits a worker for one resolved policy: every protection of [`required_protections`] must
/// be enforced with evidence. The [`Admission`] records the policy's id; the [`Refusal`] lists
/// every missing protection.
pub fn admit(caps: &SandboxCapabilities, policy: &SandboxPolicy) -> Result<Admission, Refusal> {
    decide(caps, &required_protections(policy), Some(policy.id()))
}

pub(crate) fn decide(
    caps: &SandboxCapabilities,
    required: &BTreeSet<Protection>,
    policy_id: Option<&str>,
) -> Result<Admission, Refusal> {
    let mut all: BTreeSet<Protection> = required.clone();
    all.extend(Protection::ISOLATION_FLOOR);
    let mut admitted = BTreeMap::new();
    let mut missing = Vec::new();
    for p in all {
        match caps.status(p) {
            ProtectionStatus::Enforced { evidence } if !evidence.trim().is_empty() => {
                admitted.insert(p, evidence.clone());
            }
            ProtectionStatus::Enforced { .. } => missing.push(MissingProtection {
                protection: p,
                reason: "the backend claimed it without evidence from a self-test".to_owned(),
                remedy: p.default_remedy().to_owned(),
            }),
            ProtectionStatus::Unavailable { reason, remedy } => missing.push(MissingProtection {
                protection: p,
                reason: reason.clone(),
                remedy: if remedy.trim().is_empty() {
                    p.default_remedy().to_owned()
                } else {
                    remedy.clone()
                },
            }),
            ProtectionStatus::Unknown => missing.push(MissingProtection {
                protection: p,
                reason: "the backend did not attest it".to_owned(),
                remedy: p.default_remedy().to_owned(),
            }),
        }
    }
    if missing.is_empty() {
        Ok(Admission {
            backend: caps.backend().clone(),
            policy_id: policy_id.map(str::to_owned),
            protections: admitted,
        })
    } else {
        Err(Refusal {
            backend: caps.backend().clone(),
            policy_id: policy_id.map(str::to_owned),
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CgroupVersion, HostFacts};
    use proptest::prelude::*;

    fn empty() -> SandboxCapabilities {
        SandboxCapabilities::new(
            BackendIdentity::new("linux-namespaces", "0.1.0"),
            HostFacts {
                kernel: "6.18.0".into(),
                landlock_abi: Some(7),
                cgroup: CgroupVersion::V1,
            },
        )
    }

    fn full() -> SandboxCapabilities {
        let mut c = empty();
        for p in Protection::ALL {
            c.set(
                p,
                ProtectionStatus::Enforced {
                    evidence: format!("self-test proved {p}"),
                },
            );
        }
        c
    }

    fn set(ps: &[Protection]) -> BTreeSet<Protection> {
        ps.iter().copied().collect()
    }

    #[test]
    fn full_caps_admit_and_record_evidence() {
        let a = admit_protections(&full(), &set(&[Protection::Memory])).unwrap();
        assert_eq!(a.backend().name, "linux-namespaces");
        assert_eq!(a.policy_id(), None);
        assert!(a.covers(Protection::Memory));
        assert!(
            a.covers(Protection::ProcessTree),
            "the isolation floor is always required"
        );
        assert!(
            !a.covers(Protection::Cpu),
            "only what was required is recorded"
        );
        assert_eq!(
            a.evidence(Protection::Memory),
            Some("self-test proved memory")
        );
        assert_eq!(a.protections().count(), 5);
    }

    #[test]
    fn empty_request_still_requires_isolation_floor() {
        let err = admit_protections(&empty(), &BTreeSet::new()).unwrap_err();
        assert_eq!(err.missing_protections(), set(&Protection::ISOLATION_FLOOR));
    }

    #[test]
    fn refusal_lists_every_missing_protection() {
        let mut c = full();
        c.set(
            Protection::Memory,
            ProtectionStatus::Unavailable {
                reason: "/sys/fs/cgroup/memory is not writable".into(),
                remedy: "run as root or chown a delegated memory subtree to the stockade user"
                    .into(),
            },
        );
        c.set(Protection::Pids, ProtectionStatus::Unknown);
        c.set(
            Protection::Cpu,
            ProtectionStatus::Enforced {
                evidence: String::new(),
            },
        );
        c.set(
            Protection::Landlock,
            ProtectionStatus::Unavailable {
                reason: "landlock abi 0".into(),
                remedy: " ".into(),
            },
        );
        let required = set(&[
            Protection::Cpu,
            Protection::Memory,
            Protection::Pids,
            Protection::Landlock,
            Protection::SeccompFilter,
        ]);
        let err = admit_protections(&c, &required).unwrap_err();
        assert_eq!(
            err.missing_protections(),
            set(&[
                Protection::Cpu,
                Protection::Memory,
                Protection::Pids,
                Protection::Landlock
            ])
        );
        insta::assert_snapshot!("refusal_four_missing", err.to_string());
        c.set(
            Protection::Landlock,
            ProtectionStatus::Unavailable {
                reason: "\x1b[2Jgone\nfix: nothing".into(),
                remedy: "r".into(),
            },
        );
        let text = admit_protections(&c, &required).unwrap_err().to_string();
        assert!(text.contains("\\u{1b}[2Jgone\\nfix: nothing"), "{text}");
    }

    #[test]
    fn refusal_of_an_empty_backend() {
        let mut required = set(&Protection::ADR_0017);
        required.insert(Protection::NetworkDenyAll);
        let err = admit_protections(&empty(), &required).unwrap_err();
        assert_eq!(err.missing().len(), 9);
        insta::assert_snapshot!("refusal_empty_backend", err.to_string());
    }

    fn status() -> impl Strategy<Value = ProtectionStatus> {
        prop_oneof![
            3 => "[a-z ]{0,6}".prop_map(|evidence| ProtectionStatus::Enforced { evidence }),
            1 => ("[a-z]{1,4}", "[a-z ]{0,4}").prop_map(|(reason, remedy)| ProtectionStatus::Unavailable { reason, remedy }),
            1 => Just(ProtectionStatus::Unknown),
        ]
    }

    fn caps() -> impl Strategy<Value = SandboxCapabilities> {
        prop::collection::vec(status(), Protection::ALL.len()).prop_map(|statuses| {
            let mut c = empty();
            for (p, s) in Protection::ALL.into_iter().zip(statuses) {
                c.set(p, s);
            }
            c
        })
    }

    fn required() -> impl Strategy<Value = BTreeSet<Protection>> {
        prop::collection::btree_set(
            prop::sample::select(Protection::ALL.to_vec()),
            0..Protection::ALL.len(),
        )
    }

    proptest! {
        #[test]
        fn admission_is_monotone(c in caps(), req in required(), drop in prop::sample::select(Protection::ALL.to_vec()), unavailable in any::<bool>()) {
            let before = admit_protections(&c, &req);
            let mut weaker = c.clone();
            weaker.set(drop, if unavailable {
                ProtectionStatus::Unavailable { reason: "gone".into(), remedy: "fix".into() }
            } else {
                ProtectionStatus::Unknown
            });
            let after = admit_protections(&weaker, &req);
            // Removing an enforced protection never turns a refusal into an admission.
            if before.is_err() {
                prop_assert!(after.is_err());
            }
            // And asking for more never turns a refusal into an admission either.
            let mut more = req.clone();
            more.insert(drop);
            if before.is_err() {
                prop_assert!(admit_protections(&c, &more).is_err());
            }
        }

        #[test]
        fn refusal_is_exactly_the_unenforced_required(c in caps(), req in required()) {
            let mut all = req.clone();
            all.extend(Protection::ISOLATION_FLOOR);
            let unenforced: BTreeSet<Protection> = all.iter().copied().filter(|p| !c.is_enforced(*p)).collect();
            match admit_protections(&c, &req) {
                Ok(a) => {
                    prop_assert!(unenforced.is_empty());
                    prop_assert_eq!(a.protections().collect::<BTreeSet<_>>(), all);
                }
                Err(r) => {
                    prop_assert_eq!(r.missing_protections(), unenforced);
                    prop_assert!(r.missing().iter().all(|m| !m.reason.trim().is_empty() && !m.remedy.trim().is_empty()));
                }
            }
        }
    }
}
