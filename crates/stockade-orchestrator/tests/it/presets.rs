//! Every preset in `presets/` and every example in `examples/` loads with stockade-policy's
//! loader and resolves into a policy; the wrappers never splice the prompt into a shell script.

use std::path::{Path, PathBuf};

use stockade_policy::{
    AgentPreset, NetworkPermission, PROMPT_PLACEHOLDER, PromptTransport, SandboxPolicy,
    TrustedModelConnections, WorkUnit, load_preset, load_trusted_connections, load_work_unit,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    out.sort();
    out
}

fn preset(path: &Path) -> AgentPreset {
    let name = path.file_name().unwrap().to_str().unwrap();
    load_preset(&std::fs::read(path).unwrap(), name).unwrap_or_else(|e| panic!("{e}"))
}

fn trusted() -> TrustedModelConnections {
    let p = root().join("examples/trusted-connections.toml");
    load_trusted_connections(&std::fs::read(&p).unwrap(), "trusted-connections.toml").unwrap()
}

fn work_unit(name: &str) -> WorkUnit {
    let p = root().join("examples/work-units").join(name);
    load_work_unit(&std::fs::read(&p).unwrap(), name).unwrap_or_else(|e| panic!("{e}"))
}

const AGENTS: [&str; 6] = [
    "aider",
    "claude-code",
    "codex",
    "gemini-cli",
    "goose",
    "mini-swe-agent",
];

#[test]
fn there_is_a_preset_for_every_agent_and_each_loads() {
    let ids: Vec<String> = files("presets").iter().map(|p| preset(p).id).collect();
    assert_eq!(ids, AGENTS);
    for p in files("presets") {
        assert_eq!(
            preset(&p).id,
            p.file_stem().unwrap().to_str().unwrap(),
            "file name is the id"
        );
    }
}

#[test]
fn every_preset_resolves_with_a_work_unit_bounded_to_its_connections() {
    let trusted = trusted();
    for p in files("presets") {
        let preset = preset(&p);
        let mut wu = work_unit("fix-calc.toml");
        let destinations = preset
            .connections
            .iter()
            .map(|c| trusted.get(&c.name).unwrap().origin.clone())
            .collect();
        wu.permissions.network = NetworkPermission::Bounded { destinations };
        let policy = SandboxPolicy::resolve(&wu, &preset, &trusted)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(policy.destinations().len(), preset.connections.len());
        assert!(
            !policy.requires_isolated_input_mount(),
            "{}: no preset needs the file transport",
            preset.id
        );
    }
}

#[test]
fn presets_hold_no_credential_and_point_sdks_at_the_gateway() {
    for p in files("presets") {
        let preset = preset(&p);
        assert!(preset.sandbox_required);
        assert!(
            !preset.connections.is_empty(),
            "{}: names its model connection",
            preset.id
        );
        for c in &preset.connections {
            assert!(
                !c.base_url_env.is_empty(),
                "{}: connection {} sets a base-url variable",
                preset.id,
                c.name
            );
        }
        for (name, value) in &preset.env {
            if name.ends_with("_KEY") || name.ends_with("_TOKEN") {
                assert!(
                    value.starts_with("stockade-placeholder"),
                    "{}: {name} must be a placeholder",
                    preset.id
                );
            }
            assert!(
                !value.starts_with("sk-"),
                "{}: {name} looks like a key",
                preset.id
            );
        }
        for path in &preset.read_only_host_paths {
            assert!(path.starts_with('/'), "{}: {path}", preset.id);
        }
    }
}

#[test]
fn shell_wrappers_take_the_prompt_as_a_positional_argument_never_inside_the_script() {
    for p in files("presets") {
        let preset = preset(&p);
        let shell = preset
            .command
            .first()
            .is_some_and(|c| c.ends_with("/sh") || c.ends_with("/bash"));
        if shell {
            assert_eq!(
                preset.command.get(1).map(String::as_str),
                Some("-c"),
                "{}",
                preset.id
            );
            let script = &preset.command[2];
            assert!(
                !script.contains(PROMPT_PLACEHOLDER),
                "{}: prompt spliced into shell text",
                preset.id
            );
            assert!(
                script.contains("exec "),
                "{}: the wrapper execs the agent",
                preset.id
            );
            if preset.prompt_transport == PromptTransport::Argument {
                assert_eq!(
                    preset.command.last().map(String::as_str),
                    Some(PROMPT_PLACEHOLDER)
                );
                assert!(
                    script.contains("\"$1\""),
                    "{}: the script quotes $1",
                    preset.id
                );
            }
        }
        match preset.prompt_transport {
            PromptTransport::Argument => assert!(
                preset.command.iter().any(|a| a == PROMPT_PLACEHOLDER),
                "{}",
                preset.id
            ),
            PromptTransport::Stdin => assert!(
                !preset
                    .command
                    .iter()
                    .any(|a| a.contains(PROMPT_PLACEHOLDER)),
                "{}",
                preset.id
            ),
            PromptTransport::File => panic!(
                "{}: file transport needs an isolated input mount",
                preset.id
            ),
        }
    }
}

#[test]
fn example_work_units_load_and_a_task_cannot_widen_the_network() {
    let trusted = trusted();
    let mini = preset(&root().join("presets/mini-swe-agent.toml"));
    let wu = work_unit("fix-calc.toml");
    assert_eq!(
        wu.base_commit, "173c806a135aa5b8e34da064d6f71003ef1a75ba",
        "the demo repository's fixed commit"
    );
    SandboxPolicy::resolve(&wu, &mini, &trusted).unwrap();
    let offline = work_unit("offline-tests.toml");
    let policy = SandboxPolicy::resolve(&offline, &mini, &trusted).unwrap();
    assert!(policy.destinations().is_empty());
    // A destination that no connection of the preset serves is a violation, never dropped.
    let mut wide = wu.clone();
    wide.permissions.network = NetworkPermission::Bounded {
        destinations: vec!["https://evil.example".parse().unwrap()],
    };
    assert!(SandboxPolicy::resolve(&wide, &mini, &trusted).is_err());
}
