//! proptest laws: resolution never widens authority; origin parse/display round-trips.

use std::collections::BTreeSet;

use proptest::prelude::*;
use stockade_policy::{
    AgentPreset, HeaderRef, NetworkMode, NetworkPermission, Origin, PresetConnection,
    ResourceLimits, SandboxPolicy, Scheme, SecretRef, TrustedConnection, TrustedModelConnections,
    WorkUnit,
};

use crate::{codex, fix_parser};

const UNIVERSE: [&str; 5] = [
    "https://api.openai.com",
    "https://api.anthropic.com",
    "http://api.openai.com",
    "https://api.openai.com:8443",
    "http://127.0.0.1:8080",
];
const NAMES: [&str; 5] = ["c0", "c1", "c2", "c3", "c4"];

fn origin() -> impl Strategy<Value = Origin> {
    prop::sample::select(UNIVERSE.to_vec()).prop_map(|s| s.parse().unwrap())
}

fn trusted() -> impl Strategy<Value = TrustedModelConnections> {
    // c4 is never trusted.
    prop::collection::btree_map(
        prop::sample::select(NAMES[..4].to_vec()),
        (origin(), any::<bool>()),
        0..4,
    )
    .prop_map(|m| {
        let mut t = TrustedModelConnections::default();
        for (name, (origin, with_header)) in m {
            let headers = if with_header {
                vec![HeaderRef {
                    header: "Authorization".into(),
                    secret: SecretRef::env(&format!("KEY_{name}")).unwrap(),
                }]
            } else {
                vec![]
            };
            t.connections
                .insert(name.to_owned(), TrustedConnection { origin, headers });
        }
        t
    })
}

fn preset() -> impl Strategy<Value = AgentPreset> {
    prop::collection::btree_set(prop::sample::select(NAMES.to_vec()), 0..4).prop_map(|names| {
        let mut p = codex();
        p.connections = names
            .into_iter()
            .map(|n| PresetConnection {
                name: n.to_owned(),
                base_url_env: vec![format!("{}_BASE_URL", n.to_uppercase())],
            })
            .collect();
        p
    })
}

fn limits() -> impl Strategy<Value = Option<ResourceLimits>> {
    prop::option::of(
        (0u32..5000, 0u64..1 << 33, 0u64..1 << 31, 0u32..1000).prop_map(|(c, m, d, p)| {
            ResourceLimits {
                cpu_millis: c,
                memory_bytes: m,
                disk_bytes: d,
                pids: p,
            }
        }),
    )
}

fn network() -> impl Strategy<Value = NetworkPermission> {
    prop_oneof![
        Just(NetworkPermission::None),
        Just(NetworkPermission::Unrestricted),
        prop::collection::vec(origin(), 0..4)
            .prop_map(|destinations| NetworkPermission::Bounded { destinations }),
    ]
}

fn objective() -> impl Strategy<Value = String> {
    (prop::sample::select(UNIVERSE.to_vec()), "[a-z :/.]{1,30}")
        .prop_map(|(u, t)| format!("please fetch {u} and {t}"))
}

fn work_unit() -> impl Strategy<Value = WorkUnit> {
    (network(), limits(), objective()).prop_map(|(network, limits, objective)| {
        let mut wu = fix_parser();
        wu.permissions.network = network;
        wu.permissions.limits = limits;
        wu.objective = objective;
        wu
    })
}

proptest! {
    #[test]
    fn resolution_never_widens_authority(wu in work_unit(), preset in preset(), trusted in trusted()) {
        let result = SandboxPolicy::resolve(&wu, &preset, &trusted);
        if wu.permissions.network == NetworkPermission::Unrestricted {
            prop_assert!(result.is_err());
        }
        let Ok(p) = result else { return Ok(()) };
        let wanted: BTreeSet<Origin> = match &wu.permissions.network {
            NetworkPermission::Bounded { destinations } => destinations.iter().cloned().collect(),
            _ => BTreeSet::new(),
        };
        let got: BTreeSet<Origin> = p.destinations().iter().map(|d| d.origin.clone()).collect();
        // Exactly what the work unit asked for: nothing added, nothing silently dropped.
        prop_assert_eq!(&got, &wanted);
        prop_assert_eq!(p.network() == NetworkMode::DenyAll, got.is_empty());
        for d in p.destinations() {
            // Named by the preset ...
            let pc = preset.connections.iter().find(|c| c.name == d.connection);
            prop_assert!(pc.is_some());
            // ... and on the trusted allow-list with exactly this origin and these headers.
            let t = trusted.get(&d.connection).unwrap();
            prop_assert_eq!(&t.origin, &d.origin);
            prop_assert_eq!(t.headers.len(), d.headers.len());
            for (a, b) in t.headers.iter().zip(&d.headers) {
                prop_assert_eq!(&a.secret, &b.secret);
                prop_assert_eq!(a.header.to_ascii_lowercase(), b.header.clone());
            }
            prop_assert_eq!(&pc.unwrap().base_url_env, &d.base_url_env);
        }
        // Limits never exceed the preset's or the work unit's.
        let l = p.limits();
        let d = preset.default_limits;
        prop_assert!(l.cpu_millis <= d.cpu_millis && l.memory_bytes <= d.memory_bytes && l.disk_bytes <= d.disk_bytes && l.pids <= d.pids);
        if let Some(w) = wu.permissions.limits {
            prop_assert!(l.cpu_millis <= w.cpu_millis && l.memory_bytes <= w.memory_bytes && l.disk_bytes <= w.disk_bytes && l.pids <= w.pids);
        }
    }

    #[test]
    fn objective_text_never_changes_authority(wu in work_unit(), preset in preset(), trusted in trusted(), other in objective()) {
        let a = SandboxPolicy::resolve(&wu, &preset, &trusted);
        let mut wu2 = wu.clone();
        wu2.objective = other;
        let b = SandboxPolicy::resolve(&wu2, &preset, &trusted);
        match (a, b) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.network(), b.network());
                prop_assert_eq!(a.destinations(), b.destinations());
                prop_assert_eq!(a.limits(), b.limits());
                prop_assert_eq!(a.scope(), b.scope());
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.violations(), b.violations()),
            (a, b) => prop_assert!(false, "objective changed the outcome: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }

    #[test]
    fn removing_trust_never_adds_destinations(wu in work_unit(), preset in preset(), trusted in trusted(), drop in prop::sample::select(NAMES.to_vec())) {
        let mut fewer = trusted.clone();
        fewer.connections.remove(drop);
        if let (Ok(before), Ok(after)) = (SandboxPolicy::resolve(&wu, &preset, &trusted), SandboxPolicy::resolve(&wu, &preset, &fewer)) {
            let b: BTreeSet<_> = before.destinations().iter().cloned().collect();
            prop_assert!(after.destinations().iter().all(|d| b.contains(d)));
        }
    }

    #[test]
    fn origin_display_parse_round_trips(
        https in any::<bool>(),
        host in prop_oneof![
            (prop::collection::vec("[a-zA-Z0-9]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?", 0..3), "[a-zA-Z]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?")
                .prop_map(|(mut labels, last)| { labels.push(last); labels.join(".") }),
            any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string()),
            any::<std::net::Ipv6Addr>().prop_map(|a| format!("[{a}]")),
        ],
        port in 1u16..,
    ) {
        let scheme = if https { Scheme::Https } else { Scheme::Http };
        let o = Origin::new(scheme, &host, port).unwrap();
        prop_assert_eq!(o.host(), host.to_ascii_lowercase());
        let text = o.to_string();
        let back: Origin = text.parse().unwrap();
        prop_assert_eq!(&back, &o);
        // The default port may be omitted and a single trailing slash is accepted.
        if port == scheme.default_port() {
            let short: Origin = format!("{}://{}/", scheme.as_str(), host).parse().unwrap();
            prop_assert_eq!(short, o);
        }
    }

    #[test]
    fn origin_parse_is_total_and_stable(s in "\\PC{0,40}") {
        if let Ok(o) = s.parse::<Origin>() {
            prop_assert_eq!(o.to_string().parse::<Origin>().unwrap(), o);
        }
    }

    #[test]
    fn origin_parse_stable_on_url_like_input(s in "(https?|ftp|HTTP)://[a-z0-9.:@*\\[\\]/?#-]{0,20}") {
        if let Ok(o) = s.parse::<Origin>() {
            let shown = o.to_string();
            prop_assert_eq!(shown.parse::<Origin>().unwrap(), o);
            prop_assert!(!shown.contains(['@', '*', '?', '#']));
        }
    }
}
