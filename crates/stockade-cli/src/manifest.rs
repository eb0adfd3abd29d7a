//! `stockade manifest verify`: re-hash the artifacts and check a manifest.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

/// `stockade manifest ...`
#[derive(Debug, Args)]
pub struct ManifestArgs {
    #[command(subcommand)]
    command: ManifestCommand,
}

#[derive(Debug, Subcommand)]
enum ManifestCommand {
    /// Re-hash every artifact a manifest names (blake3 and sha256) and check the manifest's
    /// schema and canonical form. DIR is an artifact store (every manifest in it is checked)
    /// or one manifest file inside a store's `manifests/` directory.
    ///
    /// Exits 0 when everything verifies, 1 when anything does not, 123 on bad usage.
    Verify {
        /// An artifact store directory or one manifest file.
        #[arg(value_name = "DIR")]
        path: PathBuf,
        /// Print one JSON object per manifest.
        #[arg(long)]
        json: bool,
    },
}

fn manifests_in(path: &Path) -> Result<Vec<PathBuf>, String> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let dir = path.join(stockade_manifest::MANIFESTS_DIR);
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        format!(
            "{} is neither a manifest file nor an artifact store ({}: {e})",
            path.display(),
            dir.display()
        )
    })?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(format!("no manifest in {}", dir.display()));
    }
    Ok(out)
}

/// `stockade manifest`.
pub fn run(args: ManifestArgs) -> i32 {
    let ManifestCommand::Verify { path, json } = args.command;
    let manifests = match manifests_in(&path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("stockade manifest verify: {e}");
            return 1;
        }
    };
    let mut bad = 0usize;
    for m in &manifests {
        match stockade_manifest::verify(m) {
            Ok(v) => {
                let manifest = v.manifest();
                let completion = match &manifest.completion {
                    stockade_manifest::Completion::Complete => "complete".to_owned(),
                    stockade_manifest::Completion::Incomplete { reason } => {
                        format!("INCOMPLETE ({})", crate::run::sanitize(reason.as_bytes()))
                    }
                };
                if json {
                    println!(
                        "{}",
                        serde_json::json!({ "manifest": m, "ok": true, "attempt_id": manifest.attempt_id, "completion": manifest.completion, "accepted": manifest.accepted.len(), "rejected": manifest.rejected.len() })
                    );
                } else {
                    println!(
                        "ok   {}  attempt {}: {completion}, {} accepted, {} rejected, every artifact re-hashed",
                        m.display(),
                        manifest.attempt_id,
                        manifest.accepted.len(),
                        manifest.rejected.len()
                    );
                }
            }
            Err(e) => {
                bad += 1;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({ "manifest": m, "ok": false, "error": e.to_string() })
                    );
                } else {
                    println!(
                        "FAIL {}  {}",
                        m.display(),
                        crate::run::sanitize(e.to_string().as_bytes())
                    );
                }
            }
        }
    }
    if !json {
        println!("{} manifest(s), {} failed", manifests.len(), bad);
    }
    i32::from(bad > 0)
}
