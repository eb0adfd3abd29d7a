//! `cargo xtask codegen`: docs generated from code, so they cannot drift.
//!
//! - the layering table in `docs/ARCHITECTURE.md` (between markers), from `layers::TABLE`;
//! - `docs/protections-status.md`, from the capabilities crate.
//!
//! Lint rule L006 fails when a committed copy differs from what this would write.

use std::fmt::Write as _;
use std::path::Path;

use crate::layers::{self, Allowed};

/// A marked region inside a hand-written file.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// The line that opens the region.
    pub begin: &'static str,
    /// The line that closes it.
    pub end: &'static str,
}

/// One generated output.
#[derive(Debug)]
pub struct Generated {
    /// Path relative to the workspace root.
    pub path: &'static str,
    /// The marked region it fills, or `None` for the whole file.
    pub region: Option<Region>,
    /// What it is generated from (for messages).
    pub source: &'static str,
    /// The generated text.
    pub content: String,
}

/// The layering region of `docs/ARCHITECTURE.md`.
pub const LAYERING: Region = Region {
    begin: "<!-- BEGIN GENERATED: layering (cargo xtask codegen; edit xtask/src/layers.rs) -->",
    end: "<!-- END GENERATED: layering -->",
};

/// Every generated output.
pub fn outputs() -> anyhow::Result<Vec<Generated>> {
    Ok(vec![
        Generated {
            path: "docs/ARCHITECTURE.md",
            region: Some(LAYERING),
            source: "xtask/src/layers.rs",
            content: layering_table(),
        },
        Generated {
            path: "docs/protections-status.md",
            region: None,
            source: "the stockade-capabilities crate",
            content: protections_status(),
        },
    ])
}

/// The text between a region's markers (exclusive), if both are present in order.
pub fn region_body(text: &str, region: Region) -> Option<&str> {
    let start = text.find(region.begin)? + region.begin.len();
    let start = start + text[start..].find('\n')? + 1;
    let end = start + text[start..].find(region.end)?;
    Some(&text[start..end])
}

/// Writes every output under `root`. Returns the paths it changed.
pub fn write(root: &Path) -> anyhow::Result<Vec<&'static str>> {
    let mut changed = Vec::new();
    for g in outputs()? {
        let path = root.join(g.path);
        let current = std::fs::read_to_string(&path).ok();
        let next = match g.region {
            None => g.content,
            Some(region) => {
                let text = current.clone().unwrap_or_default();
                let Some(body) = region_body(&text, region) else {
                    anyhow::bail!(
                        "{} lacks the markers `{}` and `{}`: add them where the table belongs",
                        g.path,
                        region.begin,
                        region.end
                    );
                };
                let at = body.as_ptr() as usize - text.as_ptr() as usize;
                format!("{}{}{}", &text[..at], g.content, &text[at + body.len()..])
            }
        };
        if current.as_deref() != Some(next.as_str()) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, next)?;
            changed.push(g.path);
        }
    }
    Ok(changed)
}

/// The allowed-edge table, as markdown.
pub fn layering_table() -> String {
    let mut s = String::from(
        "| layer | crate | role | may depend on (workspace crates) |\n| --- | --- | --- | --- |\n",
    );
    for l in layers::TABLE {
        let layer = l.layer.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let deps = match l.may_depend_on {
            Allowed::Anything => "anything (outside the layering)".to_owned(),
            Allowed::Only([]) => "nothing of ours".to_owned(),
            Allowed::Only(list) => list
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let _ = writeln!(s, "| {layer} | `{}` | {} | {deps} |", l.name, l.role);
    }
    s.push('\n');
    s.push_str("Spawn-capable crates (rule L002; reachable only through `");
    s.push_str(layers::BACKEND);
    s.push_str("`):\n\n");
    for c in layers::SPAWN_CAPABLE {
        match c.feature {
            Some(f) => {
                let _ = writeln!(s, "- `{}` with feature `{f}`: {}", c.name, c.why);
            }
            None => {
                let _ = writeln!(s, "- `{}`: {}", c.name, c.why);
            }
        }
    }
    s
}

/// `docs/protections-status.md`: one line per protection per backend.
///
/// The protections come from `stockade_capabilities::Protection::ALL`. A backend attests a
/// protection only at run time, by a live self-test on the host, so this page cannot say what a
/// given host attests (`stockade probe` does); it says, per backend, whether a live probe for the
/// protection exists at all. That fact is kept in [`linux`], an exhaustive `match`, so a new
/// protection does not compile until someone states it.
pub fn protections_status() -> String {
    use stockade_capabilities::Protection;
    let mut s = String::from(
        "# Protections status\n\n\
         <!-- Generated by `cargo xtask codegen` from stockade_capabilities::Protection::ALL. Do not edit. -->\n\n\
         One line per protection per backend.\n\
         A backend attests a protection only after proving it on the host with a live self-test; admission refuses a worker unless every required protection is attested.\n\
         What one host attests is printed by `stockade probe`; this page says which protections a backend can attest at all.\n\n\
         | protection | ADR-0017 bit | guarantees | backend | status |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for p in Protection::ALL {
        let bit = if p.is_adr_0017() { "yes" } else { "no" };
        let _ = writeln!(
            s,
            "| `{}` | {bit} | {} | `stockade-sandbox-linux` | {} |",
            p.as_str(),
            p.description(),
            linux(p)
        );
    }
    s
}

/// What the Linux backend can attest, per protection. Keep in step with
/// `crates/stockade-sandbox-linux/src/probe.rs`.
fn linux(p: stockade_capabilities::Protection) -> &'static str {
    use stockade_capabilities::Protection as P;
    const PROBED: &str = "live canary probe (`stockade_sandbox_linux::probe`); attested only if it passes on the host";
    match p {
        P::ProcessTree
        | P::Cpu
        | P::Memory
        | P::WritableDisk
        | P::Pids
        | P::FilesystemIsolation
        | P::CredentialIsolation
        | P::NetworkEnforcement
        | P::SeccompFilter
        | P::NoNewPrivs
        | P::Landlock
        | P::NetworkDenyAll
        | P::NetworkGatewayOrigins
        | P::IsolatedInputMount => PROBED,
    }
}
