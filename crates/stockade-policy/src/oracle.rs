//! Oracles for untrusted input: the checks the fuzz targets (`fuzz/`) and the seed-replay test
//! run on every input.
//!
//! Each function feeds bytes to a public parser and checks the laws that must hold for whatever
//! parses; it returns `Err` with a description when a law is broken. Inputs that do not parse
//! are fine (`Ok`): refusing bad input is the parser's job, and not panicking is the oracle's.

use crate::{
    NetworkPermission, Origin, SandboxPolicy, load_preset, load_trusted_connections, load_work_unit,
};

const PRESET: &str = r#"
id = "oracle"
kind = "model-only"
command = ["agent", "{prompt}"]
prompt_transport = "argument"
sandbox_required = true
default_limits = { cpu_millis = 1000, memory_bytes = 1073741824, disk_bytes = 1073741824, pids = 64 }
connections = [{ name = "model", base_url_env = ["OPENAI_BASE_URL"] }]
"#;

const TRUSTED: &str = r#"
[connections.model]
origin = "https://api.openai.com"
headers = [{ header = "authorization", secret = "env:KEY" }]
"#;

/// A loaded preset survives a JSON round trip.
pub fn check_preset(bytes: &[u8], file_name: &str) -> Result<(), String> {
    let Ok(preset) = load_preset(bytes, file_name) else {
        return Ok(());
    };
    let json = serde_json::to_vec(&preset)
        .map_err(|e| format!("loaded preset does not serialize: {e}"))?;
    let back = load_preset(&json, "round-trip.json")
        .map_err(|e| format!("serialized preset does not load: {e}"))?;
    if back != preset {
        return Err(format!(
            "preset changed in a round trip: {preset:?} -> {back:?}"
        ));
    }
    Ok(())
}

/// A loaded work unit survives a JSON round trip, and resolving it against a fixed preset and
/// allow-list grants only origins it asked for that are on the allow-list.
pub fn check_work_unit(bytes: &[u8], file_name: &str) -> Result<(), String> {
    let Ok(wu) = load_work_unit(bytes, file_name) else {
        return Ok(());
    };
    let json =
        serde_json::to_vec(&wu).map_err(|e| format!("loaded work unit does not serialize: {e}"))?;
    let back = load_work_unit(&json, "round-trip.json")
        .map_err(|e| format!("serialized work unit does not load: {e}"))?;
    if back != wu {
        return Err(format!(
            "work unit changed in a round trip: {wu:?} -> {back:?}"
        ));
    }
    let preset = load_preset(PRESET.as_bytes(), "oracle.toml").map_err(|e| e.to_string())?;
    let trusted =
        load_trusted_connections(TRUSTED.as_bytes(), "oracle.toml").map_err(|e| e.to_string())?;
    let Ok(policy) = SandboxPolicy::resolve(&wu, &preset, &trusted) else {
        return Ok(());
    };
    let asked: &[Origin] = match &wu.permissions.network {
        NetworkPermission::Bounded { destinations } => destinations,
        NetworkPermission::None => &[],
        NetworkPermission::Unrestricted => {
            return Err("unrestricted network was resolved".to_owned());
        }
    };
    for d in policy.destinations() {
        if !asked.contains(&d.origin) || d.origin.host() != "api.openai.com" {
            return Err(format!(
                "policy grants {} which was not asked for or not trusted",
                d.origin
            ));
        }
    }
    if blake3::hash(policy.canonical_json().as_bytes())
        .to_hex()
        .as_str()
        != policy.id()
    {
        return Err("policy id is not the hash of its canonical json".to_owned());
    }
    Ok(())
}

/// What parses as an origin round-trips through `Display` and shows no userinfo, wildcard,
/// path, query or fragment.
pub fn check_origin(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let Ok(origin) = text.parse::<Origin>() else {
        return Ok(());
    };
    let shown = origin.to_string();
    match shown.parse::<Origin>() {
        Ok(back) if back == origin => {}
        other => return Err(format!("{text:?} -> {shown:?} -> {other:?}")),
    }
    if shown.contains(['@', '*', '?', '#', '\\']) || shown.matches('/').count() != 2 {
        return Err(format!("{text:?} displays as {shown:?}"));
    }
    match Origin::new(origin.scheme(), origin.host(), origin.port()) {
        Ok(rebuilt) if rebuilt == origin => Ok(()),
        other => Err(format!(
            "{shown:?} does not rebuild from its parts: {other:?}"
        )),
    }
}
