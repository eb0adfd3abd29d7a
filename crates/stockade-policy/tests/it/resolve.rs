use std::time::Duration;

use stockade_policy::{
    HeaderRef, NetworkMode, NetworkPermission, Origin, PathPattern, PolicyError, PromptTransport,
    ResourceLimits, SandboxPolicy, ScopeDecision, SecretRef, TrustedConnection, Violation,
};

use crate::{claude, codex, fix_parser, no_network, trusted};

fn o(s: &str) -> Origin {
    s.parse().unwrap()
}

fn violations(e: PolicyError) -> Vec<Violation> {
    e.violations().to_vec()
}

#[test]
fn codex_resolves_to_exact_gateway_origin() {
    let p = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    assert_eq!(p.work_unit_id(), "wu-0042");
    assert_eq!(p.preset_id(), "codex");
    assert_eq!(p.network(), NetworkMode::GatewayOrigins);
    assert_eq!(p.destinations().len(), 1);
    let d = &p.destinations()[0];
    assert_eq!(d.origin, o("https://api.openai.com:443"));
    assert_eq!(d.connection, "openai");
    assert_eq!(d.base_url_env, ["OPENAI_BASE_URL"]);
    assert_eq!(
        d.headers,
        [HeaderRef {
            header: "authorization".into(),
            secret: SecretRef::parse("env:STOCKADE_OPENAI_AUTHORIZATION").unwrap()
        }]
    );
    // Limits: the preset's defaults lowered, never raised, by the work unit.
    assert_eq!(
        *p.limits(),
        ResourceLimits {
            cpu_millis: 1000,
            memory_bytes: 2147483648,
            disk_bytes: 536870912,
            pids: 128
        }
    );
    assert_eq!(p.wall_time(), Duration::from_secs(1800));
    assert_eq!(p.prompt_transport(), PromptTransport::Argument);
    assert!(!p.requires_isolated_input_mount());
    assert_eq!(p.read_only_host_paths(), ["/usr/local/lib/node_modules"]);
    assert_eq!(
        p.env(),
        [
            (
                "NODE_OPTIONS".to_owned(),
                "--max-old-space-size=1536".to_owned()
            ),
            ("NO_COLOR".to_owned(), "1".to_owned())
        ]
    );
    assert_eq!(p.command()[3], "{prompt}");
    // Scope: forbidden wins, git metadata is always forbidden.
    assert_eq!(p.scope().decide(b"src/parser.rs"), ScopeDecision::Allowed);
    assert_eq!(
        p.scope().decide(b"src/secrets/k"),
        ScopeDecision::Forbidden {
            pattern: "src/secrets".into()
        }
    );
    assert_eq!(
        p.scope().decide(b"src/vendor/.git/config"),
        ScopeDecision::Forbidden {
            pattern: "**/.git".into()
        }
    );
    assert_eq!(p.scope().decide(b"README.md"), ScopeDecision::OutOfScope);
    // The id is blake3 over the canonical JSON.
    assert_eq!(
        p.id(),
        blake3::hash(p.canonical_json().as_bytes())
            .to_hex()
            .as_str()
    );
    assert_eq!(p.id().len(), 64);
}

#[test]
fn canonical_json_snapshot() {
    let p = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    let value: serde_json::Value = serde_json::from_str(p.canonical_json()).unwrap();
    insta::assert_json_snapshot!("codex_fix_parser_policy", value);
    insta::assert_snapshot!("codex_fix_parser_policy_id", p.id());
}

#[test]
fn objective_text_never_creates_network_authority() {
    let p = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    assert!(p.objective().contains("https://evil.example/x"));
    assert!(
        p.destinations()
            .iter()
            .all(|d| d.origin.host() == "api.openai.com")
    );
    assert!(!p.canonical_json().contains("evil.example\""));
}

#[test]
fn no_network_is_deny_all() {
    let p = SandboxPolicy::resolve(&no_network(), &claude(), &trusted()).unwrap();
    assert_eq!(p.network(), NetworkMode::DenyAll);
    assert!(p.destinations().is_empty());
    assert_eq!(p.limits(), &claude().default_limits);
    assert_eq!(p.base_commit().len(), 64);
    let mut wu = no_network();
    wu.permissions.network = NetworkPermission::Bounded {
        destinations: vec![],
    };
    assert_eq!(
        SandboxPolicy::resolve(&wu, &claude(), &trusted())
            .unwrap()
            .network(),
        NetworkMode::DenyAll
    );
}

#[test]
fn destination_must_be_named_by_preset_and_trusted() {
    // Trusted, but the codex preset does not name the anthropic connection.
    let mut wu = fix_parser();
    wu.permissions.network = NetworkPermission::Bounded {
        destinations: vec![o("https://api.openai.com"), o("https://api.anthropic.com")],
    };
    let v = violations(SandboxPolicy::resolve(&wu, &codex(), &trusted()).unwrap_err());
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        matches!(&v[0], Violation::DestinationNotAllowed { origin, reason } if origin.host() == "api.anthropic.com" && reason.contains("names no trusted connection"))
    );

    // Not trusted at all.
    wu.permissions.network = NetworkPermission::Bounded {
        destinations: vec![o("http://169.254.169.254")],
    };
    let v = violations(SandboxPolicy::resolve(&wu, &codex(), &trusted()).unwrap_err());
    assert!(
        matches!(&v[0], Violation::DestinationNotAllowed { reason, .. } if reason.contains("allow-list"))
    );

    // Same host, other port or scheme: a different origin.
    for other in ["http://api.openai.com", "https://api.openai.com:8443"] {
        wu.permissions.network = NetworkPermission::Bounded {
            destinations: vec![o(other)],
        };
        assert!(
            SandboxPolicy::resolve(&wu, &codex(), &trusted()).is_err(),
            "{other}"
        );
    }

    // The preset names a connection that is not trusted.
    let mut t = trusted();
    t.connections.remove("openai");
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &codex(), &t).unwrap_err());
    assert!(
        v.contains(&Violation::ConnectionNotTrusted("openai".into())),
        "{v:?}"
    );
}

#[test]
fn ambiguous_and_reserved_headers() {
    let mut t = trusted();
    t.connections.insert(
        "openai-2".into(),
        TrustedConnection {
            origin: o("https://api.openai.com"),
            headers: vec![],
        },
    );
    let mut preset = codex();
    preset.connections.push(stockade_policy::PresetConnection {
        name: "openai-2".into(),
        base_url_env: vec![],
    });
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &preset, &t).unwrap_err());
    assert!(
        matches!(&v[0], Violation::AmbiguousDestination { connections, .. } if connections == &["openai", "openai-2"])
    );

    let mut t = trusted();
    let h = |name: &str| HeaderRef {
        header: name.into(),
        secret: SecretRef::parse("env:X").unwrap(),
    };
    t.connections.get_mut("openai").unwrap().headers = vec![
        h("Host"),
        h("bad header"),
        h("x-a"),
        h("X-A"),
        h("Transfer-Encoding"),
    ];
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &codex(), &t).unwrap_err());
    assert_eq!(v.len(), 4, "{v:?}");
}

#[test]
fn file_transport_requires_isolated_input_mount() {
    let mut preset = codex();
    preset.prompt_transport = PromptTransport::File;
    preset.command = vec!["agent".into(), "--prompt-file={prompt_file}".into()];
    let p = SandboxPolicy::resolve(&fix_parser(), &preset, &trusted()).unwrap();
    assert!(p.requires_isolated_input_mount());
    // Placeholders must agree with the transport.
    preset.command = vec!["agent".into(), "{prompt}".into()];
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &preset, &trusted()).unwrap_err());
    assert_eq!(v.len(), 2, "{v:?}");
    preset.prompt_transport = PromptTransport::Stdin;
    assert!(SandboxPolicy::resolve(&fix_parser(), &preset, &trusted()).is_err());
    preset.command = vec!["agent".into(), "{workspace}".into(), "{\"json\": 1}".into()];
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &preset, &trusted()).unwrap_err());
    assert_eq!(v, [Violation::UnknownPlaceholder("{workspace}".into())]);
}

#[test]
fn every_violation_is_listed() {
    let mut wu = fix_parser();
    wu.id = "".into();
    wu.objective = "  ".into();
    wu.base_commit = "3f78685".into();
    wu.scope.clear();
    wu.permissions.sandbox_required = false;
    wu.permissions.process_execution = false;
    wu.permissions.secrets = vec!["GITHUB_TOKEN".into()];
    wu.permissions.network = NetworkPermission::Unrestricted;
    wu.permissions.wall_time_secs = 0;
    wu.permissions.limits = Some(ResourceLimits {
        cpu_millis: 0,
        memory_bytes: 1,
        disk_bytes: 1,
        pids: 0,
    });
    let mut preset = codex();
    preset.id = "codex/../x".into();
    preset.sandbox_required = false;
    preset.command = vec![];
    preset
        .env
        .insert("OPENAI_BASE_URL".into(), "https://evil.example".into());
    preset.env.insert("BAD=NAME".into(), "x".into());
    preset.read_only_host_paths = vec![
        "/".into(),
        "/root".into(),
        "/home/alice".into(),
        "/opt/venv/../../etc".into(),
        "/var".into(),
        "/opt/x/.ssh".into(),
        "relative".into(),
        "/run/docker.sock".into(),
        "/opt/venv".into(),
    ];
    let err = SandboxPolicy::resolve(&wu, &preset, &trusted()).unwrap_err();
    insta::assert_snapshot!("every_violation", err.to_string());
    let v = err.violations();
    for expected in [
        Violation::WorkUnitSandboxNotRequired,
        Violation::PresetSandboxNotRequired,
        Violation::ProcessExecutionNotPermitted,
        Violation::SecretsRequested(vec!["GITHUB_TOKEN".into()]),
        Violation::UnrestrictedNetwork,
        Violation::WallTimeNotPositive,
        Violation::EmptyScope,
        Violation::BaseCommit("3f78685".into()),
        Violation::EmptyObjective,
        Violation::EmptyCommand,
        Violation::EnvName("BAD=NAME".into()),
        Violation::EnvConflict {
            name: "OPENAI_BASE_URL".into(),
            connection: "openai".into(),
        },
    ] {
        assert!(v.contains(&expected), "missing {expected:?} in {v:?}");
    }
    let host_paths = v
        .iter()
        .filter(|x| matches!(x, Violation::ReadOnlyHostPath { .. }))
        .count();
    assert_eq!(host_paths, 8, "every bad host path but /opt/venv: {v:?}");
}

#[test]
fn scope_patterns_are_normalized_and_git_is_forbidden() {
    let mut wu = no_network();
    wu.scope = vec![
        PathPattern::parse("./src/").unwrap(),
        PathPattern::parse("src").unwrap(),
    ];
    let p = SandboxPolicy::resolve(&wu, &claude(), &trusted()).unwrap();
    assert_eq!(p.scope().allowed().len(), 1);
    assert_eq!(p.scope().allowed()[0].as_str(), "src");
    assert_eq!(
        p.scope().decide(b".git/hooks/pre-commit"),
        ScopeDecision::Forbidden {
            pattern: "**/.git".into()
        }
    );
    wu.scope = vec![PathPattern::parse("**").unwrap()];
    let p = SandboxPolicy::resolve(&wu, &claude(), &trusted()).unwrap();
    assert!(matches!(
        p.scope().decide(b".git/config"),
        ScopeDecision::Forbidden { .. }
    ));
}

#[test]
fn id_is_content_addressed() {
    let a = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    let b = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    assert_eq!(a.id(), b.id());
    let mut wu = fix_parser();
    wu.objective.push('!');
    let c = SandboxPolicy::resolve(&wu, &codex(), &trusted()).unwrap();
    assert_ne!(a.id(), c.id());
    // Order of equivalent inputs does not change the id.
    let mut wu = fix_parser();
    wu.scope.reverse();
    wu.forbidden.reverse();
    let mut preset = codex();
    preset
        .read_only_host_paths
        .push("/usr/local/lib/node_modules".into());
    let d = SandboxPolicy::resolve(&wu, &preset, &trusted()).unwrap();
    assert_eq!(a.id(), d.id());
    // Serialize wraps the canonical content with its id.
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["id"], a.id());
}

#[test]
fn secrets_are_never_values() {
    let p = SandboxPolicy::resolve(&fix_parser(), &codex(), &trusted()).unwrap();
    let debug = format!("{p:?}");
    assert!(debug.contains("env:STOCKADE_OPENAI_AUTHORIZATION"));
    assert!(
        p.canonical_json()
            .contains("\"secret\":\"env:STOCKADE_OPENAI_AUTHORIZATION\"")
    );
}

#[test]
fn wall_time_is_bounded() {
    let mut wu = fix_parser();
    wu.permissions.wall_time_secs = u64::MAX;
    let v = violations(SandboxPolicy::resolve(&wu, &codex(), &trusted()).unwrap_err());
    assert_eq!(v, [Violation::WallTimeTooLong(u64::MAX)]);
    wu.permissions.wall_time_secs = stockade_policy::MAX_WALL_TIME_SECS;
    assert!(SandboxPolicy::resolve(&wu, &codex(), &trusted()).is_ok());
}

#[test]
fn error_text_escapes_control_characters() {
    let mut preset = codex();
    preset.env.insert("\u{1b}[2J".into(), "x".into());
    let text = SandboxPolicy::resolve(&fix_parser(), &preset, &trusted())
        .unwrap_err()
        .to_string();
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("\\u{1b}[2J"), "{text}");
    let err = stockade_policy::load_preset(b"id = \"\x1b[2J\"\nbogus\x1b = 1", "p\x1b.toml")
        .unwrap_err()
        .to_string();
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn connection_names_are_ids() {
    let mut t = trusted();
    let c = t.connections.remove("openai").unwrap();
    t.connections.insert("open ai".into(), c);
    let mut preset = codex();
    preset.connections[0].name = "open ai".into();
    let v = violations(SandboxPolicy::resolve(&fix_parser(), &preset, &t).unwrap_err());
    assert_eq!(
        v,
        [Violation::Id {
            what: "connection",
            id: "open ai".into()
        }]
    );
}
