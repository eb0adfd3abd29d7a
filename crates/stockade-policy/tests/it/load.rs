use stockade_policy::{
    LoadError, NetworkPermission, load_preset, load_trusted_connections, load_work_unit,
};

use crate::{claude, codex, data, fix_parser, no_network, trusted};

#[test]
fn examples_load() {
    assert_eq!(codex().id, "codex");
    assert_eq!(claude().connections[0].base_url_env, ["ANTHROPIC_BASE_URL"]);
    let wu = fix_parser();
    assert_eq!(
        wu.scope[0].as_str(),
        "src",
        "patterns are normalized on load"
    );
    assert!(
        matches!(wu.permissions.network, NetworkPermission::Bounded { ref destinations } if destinations.len() == 1)
    );
    assert_eq!(no_network().permissions.network, NetworkPermission::None);
    assert_eq!(trusted().connections.len(), 2);
}

fn invalid(e: LoadError) -> (String, String, Option<(usize, usize)>) {
    match e {
        LoadError::Invalid {
            file,
            field,
            location,
            ..
        } => (file, field, location),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn unknown_fields_are_refused_with_the_field_path() {
    let toml = String::from_utf8(data("fix-parser.work.toml"))
        .unwrap()
        .replace("secrets = []", "secrets = []\nsudo = true");
    let err = load_work_unit(toml.as_bytes(), "wu.toml").unwrap_err();
    let msg = err.to_string();
    let (file, field, location) = invalid(err);
    assert_eq!(file, "wu.toml");
    assert_eq!(field, "permissions.sudo");
    assert!(location.is_some(), "{msg}");
    assert!(msg.contains("unknown field `sudo`"), "{msg}");
    assert!(msg.starts_with("wu.toml:"), "{msg}");

    let json = String::from_utf8(data("claude.preset.json"))
        .unwrap()
        .replace("\"base_url_env\"", "\"extra\": 1, \"base_url_env\"");
    let err = load_preset(json.as_bytes(), "claude.json").unwrap_err();
    let msg = err.to_string();
    let (_, field, _) = invalid(err);
    assert_eq!(field, "connections[0].extra", "{msg}");
}

#[test]
fn bad_values_name_their_field() {
    let toml = String::from_utf8(data("fix-parser.work.toml"))
        .unwrap()
        .replace("https://api.openai.com", "https://*.openai.com");
    let err = load_work_unit(toml.as_bytes(), "wu.toml").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("wildcards are not allowed"), "{msg}");
    let toml = String::from_utf8(data("fix-parser.work.toml"))
        .unwrap()
        .replace("\"src/\"", "\"../src\"");
    let (_, field, _) = invalid(load_work_unit(toml.as_bytes(), "wu.toml").unwrap_err());
    assert_eq!(field, "scope[0]");
    let toml = String::from_utf8(data("trusted.toml"))
        .unwrap()
        .replace("env:STOCKADE_OPENAI_AUTHORIZATION", "Bearer sk-live-123");
    let err = load_trusted_connections(toml.as_bytes(), "trusted.toml").unwrap_err();
    let msg = err.to_string();
    assert!(
        !msg.contains("sk-live-123"),
        "a value that is not a reference is not echoed: {msg}"
    );
    let (_, field, _) = invalid(err);
    assert_eq!(field, "connections.openai.headers[0].secret");
}

#[test]
fn duplicate_json_keys_are_refused() {
    let json = br#"{"connections": {"a": {"origin": "https://a.example"}, "a": {"origin": "https://b.example"}}}"#;
    let err = load_trusted_connections(json, "t.json").unwrap_err();
    assert!(err.to_string().contains("duplicate key `a`"), "{err}");
    let json = String::from_utf8(data("claude.preset.json"))
        .unwrap()
        .replace(
            r#""env": {"DISABLE_AUTOUPDATER": "1"}"#,
            r#""env": {"A": "1", "A": "2"}"#,
        );
    assert!(load_preset(json.as_bytes(), "p.json").is_err());
}

#[test]
fn format_by_extension_and_size() {
    assert!(matches!(
        load_preset(b"", "preset.yaml"),
        Err(LoadError::UnknownFormat { .. })
    ));
    assert!(matches!(
        load_preset(b"", "preset"),
        Err(LoadError::UnknownFormat { .. })
    ));
    assert!(matches!(
        load_preset(&[b' '; (1 << 20) + 1], "p.json"),
        Err(LoadError::TooLarge { .. })
    ));
    assert!(matches!(
        load_preset(b"\xff", "p.toml"),
        Err(LoadError::NotUtf8 { offset: 0, .. })
    ));
    assert!(load_preset(&data("codex.preset.toml"), "CODEX.TOML").is_ok());
    // Trailing garbage after a JSON document is refused.
    let mut json = data("claude.preset.json");
    json.extend_from_slice(b" {}");
    assert!(load_preset(&json, "p.json").is_err());
}

#[test]
fn network_mode_must_be_known() {
    let toml = String::from_utf8(data("fix-parser.work.toml"))
        .unwrap()
        .replace("mode = \"bounded\"", "mode = \"allow-all\"");
    assert!(load_work_unit(toml.as_bytes(), "wu.toml").is_err());
    let toml = String::from_utf8(data("fix-parser.work.toml"))
        .unwrap()
        .replace(
            "network = { mode = \"bounded\", destinations = [\"https://api.openai.com\"] }",
            "network = { mode = \"none\", destinations = [\"https://api.openai.com\"] }",
        );
    assert!(
        load_work_unit(toml.as_bytes(), "wu.toml").is_err(),
        "extra fields on a network variant are refused"
    );
}
