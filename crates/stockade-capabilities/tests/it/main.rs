//! Integration tests: admission of resolved policies.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, missing_docs)] // test binary: helpers may unwrap

use std::collections::{BTreeMap, BTreeSet};

use stockade_capabilities::{
    BackendIdentity, CgroupVersion, HostFacts, Protection, ProtectionStatus, SandboxCapabilities,
    admit, admit_protections, required_protections,
};
use stockade_policy::{
    AgentKind, AgentPreset, HeaderRef, NetworkPermission, PathPattern, Permissions,
    PresetConnection, PromptTransport, ResourceLimits, SandboxPolicy, SecretRef, TrustedConnection,
    TrustedModelConnections, WorkUnit,
};

fn limits() -> ResourceLimits {
    ResourceLimits {
        cpu_millis: 1000,
        memory_bytes: 1 << 30,
        disk_bytes: 1 << 29,
        pids: 128,
    }
}

fn preset(transport: PromptTransport) -> AgentPreset {
    AgentPreset {
        id: "demo".into(),
        kind: AgentKind::ModelOnly,
        command: match transport {
            PromptTransport::Stdin => vec!["agent".into()],
            PromptTransport::Argument => vec!["agent".into(), "{prompt}".into()],
            PromptTransport::File => vec!["agent".into(), "--file".into(), "{prompt_file}".into()],
        },
        prompt_transport: transport,
        default_limits: limits(),
        connections: vec![PresetConnection {
            name: "model".into(),
            base_url_env: vec!["OPENAI_BASE_URL".into()],
        }],
        read_only_host_paths: vec![],
        env: BTreeMap::new(),
        sandbox_required: true,
    }
}

fn work_unit(network: NetworkPermission) -> WorkUnit {
    WorkUnit {
        id: "wu-1".into(),
        objective: "do it".into(),
        base_commit: "a".repeat(40),
        scope: vec![PathPattern::parse("src").unwrap()],
        forbidden: vec![],
        permissions: Permissions {
            sandbox_required: true,
            process_execution: true,
            secrets: vec![],
            network,
            wall_time_secs: 60,
            limits: None,
        },
    }
}

fn trusted() -> TrustedModelConnections {
    let mut t = TrustedModelConnections::default();
    t.connections.insert(
        "model".into(),
        TrustedConnection {
            origin: "http://127.0.0.1:9".parse().unwrap(),
            headers: vec![HeaderRef {
                header: "authorization".into(),
                secret: SecretRef::parse("env:KEY").unwrap(),
            }],
        },
    );
    t
}

fn policy(network: NetworkPermission, transport: PromptTransport) -> SandboxPolicy {
    SandboxPolicy::resolve(&work_unit(network), &preset(transport), &trusted()).unwrap()
}

fn gateway() -> NetworkPermission {
    NetworkPermission::Bounded {
        destinations: vec!["http://127.0.0.1:9".parse().unwrap()],
    }
}

fn caps(except: &[Protection]) -> SandboxCapabilities {
    let mut c = SandboxCapabilities::new(
        BackendIdentity::new("linux-namespaces", "0.1.0"),
        HostFacts {
            kernel: "6.18.0".into(),
            landlock_abi: Some(7),
            cgroup: CgroupVersion::V1,
        },
    );
    for p in Protection::ALL {
        if !except.contains(&p) {
            c.set(
                p,
                ProtectionStatus::Enforced {
                    evidence: format!("self-test: {p}"),
                },
            );
        }
    }
    c
}

#[test]
fn required_set_follows_the_policy() {
    let deny = required_protections(&policy(NetworkPermission::None, PromptTransport::Stdin));
    assert!(Protection::ADR_0017.iter().all(|p| deny.contains(p)));
    assert!(deny.contains(&Protection::NetworkDenyAll));
    assert!(!deny.contains(&Protection::NetworkGatewayOrigins));
    assert!(!deny.contains(&Protection::IsolatedInputMount));
    for p in [
        Protection::SeccompFilter,
        Protection::NoNewPrivs,
        Protection::Landlock,
    ] {
        assert!(deny.contains(&p));
    }
    let gw = required_protections(&policy(gateway(), PromptTransport::Argument));
    assert!(gw.contains(&Protection::NetworkGatewayOrigins));
    assert!(!gw.contains(&Protection::NetworkDenyAll));
    let file = required_protections(&policy(NetworkPermission::None, PromptTransport::File));
    assert!(file.contains(&Protection::IsolatedInputMount));
}

#[test]
fn admit_records_policy_id() {
    let p = policy(gateway(), PromptTransport::Argument);
    let a = admit(&caps(&[]), &p).unwrap();
    assert_eq!(a.policy_id(), Some(p.id()));
    assert!(a.covers(Protection::NetworkGatewayOrigins));
    assert!(!a.covers(Protection::IsolatedInputMount));
    assert_eq!(
        a.protections().collect::<BTreeSet<_>>(),
        required_protections(&p)
    );
}

#[test]
fn file_prompt_fails_closed_without_isolated_input_mount() {
    let p = policy(NetworkPermission::None, PromptTransport::File);
    let r = admit(&caps(&[Protection::IsolatedInputMount]), &p).unwrap_err();
    assert_eq!(
        r.missing_protections(),
        BTreeSet::from([Protection::IsolatedInputMount])
    );
    assert_eq!(r.policy_id(), Some(p.id()));
    // The same backend admits the stdin variant.
    assert!(
        admit(
            &caps(&[Protection::IsolatedInputMount]),
            &policy(NetworkPermission::None, PromptTransport::Stdin)
        )
        .is_ok()
    );
}

#[test]
fn gateway_policy_refused_by_deny_all_only_backend() {
    let p = policy(gateway(), PromptTransport::Stdin);
    let mut c = caps(&[Protection::Memory]);
    c.set(
        Protection::NetworkGatewayOrigins,
        ProtectionStatus::Unavailable {
            reason: "no gateway socket configured".into(),
            remedy: "start the host gateway and pass --gateway-socket".into(),
        },
    );
    let r = admit(&c, &p).unwrap_err();
    assert_eq!(
        r.missing_protections(),
        BTreeSet::from([Protection::Memory, Protection::NetworkGatewayOrigins])
    );
    let text = r.to_string().replace(p.id(), "<policy-id>");
    insta::assert_snapshot!("gateway_policy_refusal", text);
}

#[test]
fn exec_style_admission_is_independent_of_policy() {
    let a = admit_protections(
        &caps(&[Protection::Cpu]),
        &BTreeSet::from([Protection::Memory]),
    )
    .unwrap();
    assert_eq!(a.policy_id(), None);
    assert!(!a.is_for_policy(&policy(NetworkPermission::None, PromptTransport::Stdin)));
    assert!(
        admit_protections(
            &caps(&[Protection::Cpu]),
            &BTreeSet::from([Protection::Cpu])
        )
        .is_err()
    );
}
