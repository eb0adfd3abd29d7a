//! # stockade-capture — layer 2: candidate capture outside worker authority
//!
//! What this crate does: after the worker's process tree is dead, it enumerates every path the
//! worker changed — from an overlay change layer (the upper directory, in O(changes)) or from a
//! plain directory tree compared in full — against the base tree read from the **canonical**
//! repository at an exact commit; it rejects forbidden, out-of-scope, `.git`, special and
//! oversized entries with a named reason per path; it writes the accepted changes as a git
//! patch, their full new contents and the supplied logs into a content-addressed
//! [`ArtifactStore`]; and it writes the normalized [`ResultManifest`] last (ADR-0017,
//! "Candidate/evidence boundary").
//!
//! What this crate does **not** do: it trusts nothing in the workspace — not its files, not its
//! `.git` (never read), not any timestamp; it never follows or reads through a symlink; it never
//! runs a program (no hooks, filters, textconv or credential helpers: only `gix-odb` and
//! `gix-object` read the canonical repository, and `gix-command` is absent from this crate's
//! dependency closure); it does not interpret `.gitignore` (ignored files are candidates like any
//! other); it does not detect renames; it verifies nothing about the candidate's merit and merges
//! nothing (`ResultManifest != acceptance`, `candidate capture != merge authority`).
//!
//! Change layers must come from overlay mounts with `metacopy=off` and `redirect_dir=off`;
//! capture fails closed with [`CaptureError::UnsupportedOverlay`] when it sees either.
#![forbid(unsafe_code)]

mod base;
mod classify;
mod error;
pub mod oracle;
mod patch;
mod stat_cache;
mod store;
mod walk;

pub use error::{CaptureError, StoreError};
pub use stat_cache::StatCache;
pub use stockade_manifest::{BoundsSpec, ResultManifest};
pub use store::ArtifactStore;

use std::io::Read;
use std::path::{Path, PathBuf};
use stockade_manifest::{
    Artifacts, BoundHit, BoundName, Completion, LogArtifact, SCHEMA_VERSION, is_valid_id,
};
use stockade_policy::PathScope;

/// What to capture.
#[derive(Debug, Clone, Copy)]
pub enum CaptureInput<'a> {
    /// An overlay upper directory (new and copied-up files, `0/0` character-device whiteouts,
    /// `trusted.overlay.opaque=y` / `user.overlay.opaque=y` opaque directories). The overlay
    /// must be unmounted or quiescent, and mounted with `metacopy=off,redirect_dir=off`.
    ChangeLayer {
        /// The upper directory.
        upper: &'a Path,
    },
    /// A complete directory tree, compared with the base in full.
    FullTree {
        /// The tree's root.
        dir: &'a Path,
        /// Optional stat cache taken on the pristine tree before the worker started, held
        /// outside the sandbox; it lets unchanged files skip hashing.
        stat_cache: Option<&'a StatCache>,
    },
}

/// The base the changes are relative to: the canonical repository and an exact commit id.
#[derive(Debug, Clone, Copy)]
pub struct BaseRef<'a> {
    /// The canonical repository (work tree with `.git/`, or bare).
    pub repo: &'a Path,
    /// Full 40-digit lowercase hex commit id (branch names and short ids are refused).
    pub commit: &'a str,
}

/// A log file to store beside the candidate (read without following symlinks, bounded).
#[derive(Debug, Clone)]
pub struct LogInput {
    /// Log name, e.g. `stdout` (must be a valid id: `[A-Za-z0-9._-]`).
    pub name: String,
    /// Host path of the log, written by the host (never by the worker).
    pub path: PathBuf,
}

/// Facts about the attempt supplied by the orchestrator.
#[derive(Debug, Clone)]
pub struct CaptureMeta {
    /// Attempt id (also the manifest's file name).
    pub attempt_id: String,
    /// Work unit id.
    pub work_unit_id: String,
    /// Agent preset id.
    pub preset_id: String,
    /// Resolved policy id (digest).
    pub policy_id: String,
    /// Capability attestation, recorded verbatim.
    pub capability_attestation: serde_json::Value,
    /// Exit and resource report, recorded verbatim (no floats: canonical JSON refuses them).
    pub exit_report: serde_json::Value,
    /// Logs to store.
    pub logs: Vec<LogInput>,
}

/// A finished capture.
#[derive(Debug, Clone)]
pub struct Captured {
    /// The manifest as written.
    pub manifest: ResultManifest,
    /// Where it was written.
    pub manifest_path: PathBuf,
}

/// Reasonable default bounds: 8 MiB per file, 64 MiB of patch, 100 000 changes, 16 MiB per log.
pub const DEFAULT_BOUNDS: BoundsSpec = BoundsSpec {
    max_file_bytes: 8 << 20,
    max_patch_bytes: 64 << 20,
    max_changes: 100_000,
    max_log_bytes: 16 << 20,
};

fn overlaps(store: &Path, other: &Path) -> Result<(), CaptureError> {
    let Ok(other) = other.canonicalize() else {
        return Ok(());
    };
    if store.starts_with(&other) || other.starts_with(store) {
        return Err(CaptureError::StoreOverlaps {
            store: store.to_path_buf(),
            other,
        });
    }
    Ok(())
}

/// Captures the candidate, writes every artifact, then the manifest (last, atomically).
///
/// Returns the manifest; its [`Completion`] is `incomplete` (and it carries no patch) when the
/// change bound was exceeded. An error means no manifest was written.
pub fn capture(
    input: CaptureInput<'_>,
    base: BaseRef<'_>,
    scope: &PathScope,
    bounds: BoundsSpec,
    store: &ArtifactStore,
    meta: &CaptureMeta,
) -> Result<Captured, CaptureError> {
    check_meta(meta)?;
    let input_dir = match input {
        CaptureInput::ChangeLayer { upper } => upper,
        CaptureInput::FullTree { dir, .. } => dir,
    };
    overlaps(store.root(), input_dir)?;
    overlaps(store.root(), base.repo)?;
    let base_tree = base::Base::open(base.repo, base.commit)?;
    let (layer, stat_cache) = match input {
        CaptureInput::ChangeLayer { .. } => (walk::Layer::Change, None),
        CaptureInput::FullTree { stat_cache, .. } => (walk::Layer::Full, stat_cache),
    };
    let root = walk::open_root(input_dir)?;
    let mut walker = walk::Walker {
        base: &base_tree,
        layer,
        max_file_bytes: bounds.max_file_bytes,
        max_changes: bounds.max_changes,
        stat_cache,
        out: walk::Collected::default(),
    };
    walker.walk(root)?;
    let collected = walker.out;
    let total = collected.old.len() as u64 + collected.new.len() as u64;
    let mut manifest = skeleton(meta, base.commit, bounds);
    manifest.artifacts.logs = store_logs(meta, bounds, store, &mut manifest.bounds_hit)?;
    if collected.overflow || total > bounds.max_changes {
        manifest.bounds_hit.push(BoundHit {
            bound: BoundName::Changes,
            limit: bounds.max_changes,
            affected: total,
        });
        manifest.completion = Completion::Incomplete {
            reason: format!(
                "more than {} changed paths; nothing was captured as a candidate",
                bounds.max_changes
            ),
        };
        let manifest_path = store.write_manifest(&manifest)?;
        return Ok(Captured {
            manifest,
            manifest_path,
        });
    }
    let decided = classify::decide(&base_tree, collected, scope, bounds)?;
    for blob in &decided.blobs {
        manifest.artifacts.blobs.push(store.put(blob)?);
    }
    manifest.artifacts.patch = Some(store.put(&decided.patch)?);
    manifest.accepted = decided.accepted;
    manifest.rejected = decided.rejected;
    manifest.bounds_hit.extend(decided.bounds_hit);
    manifest.normalize();
    let manifest_path = store.write_manifest(&manifest)?;
    Ok(Captured {
        manifest,
        manifest_path,
    })
}

/// Writes an honest incomplete manifest (for example when the worker could not be contained or
/// capture failed): no candidate, the reason stated, logs stored when readable.
pub fn write_incomplete(
    store: &ArtifactStore,
    base_commit: &str,
    bounds: BoundsSpec,
    meta: &CaptureMeta,
    reason: &str,
) -> Result<Captured, CaptureError> {
    check_meta(meta)?;
    let mut manifest = skeleton(meta, base_commit, bounds);
    manifest.artifacts.logs = store_logs(meta, bounds, store, &mut manifest.bounds_hit)?;
    manifest.completion = Completion::Incomplete {
        reason: reason.to_owned(),
    };
    let manifest_path = store.write_manifest(&manifest)?;
    Ok(Captured {
        manifest,
        manifest_path,
    })
}

fn check_meta(meta: &CaptureMeta) -> Result<(), CaptureError> {
    if !is_valid_id(&meta.attempt_id) {
        return Err(CaptureError::Meta(format!(
            "attempt id {:?} must be 1-128 characters of [A-Za-z0-9._-] not starting with a dot",
            meta.attempt_id
        )));
    }
    for log in &meta.logs {
        if !is_valid_id(&log.name) {
            return Err(CaptureError::Meta(format!(
                "log name {:?} is not a valid id",
                log.name
            )));
        }
    }
    Ok(())
}

fn skeleton(meta: &CaptureMeta, base_commit: &str, bounds: BoundsSpec) -> ResultManifest {
    ResultManifest {
        schema_version: SCHEMA_VERSION,
        attempt_id: meta.attempt_id.clone(),
        work_unit_id: meta.work_unit_id.clone(),
        preset_id: meta.preset_id.clone(),
        base_commit: base_commit.to_owned(),
        policy_id: meta.policy_id.clone(),
        capability_attestation: meta.capability_attestation.clone(),
        bounds,
        accepted: Vec::new(),
        rejected: Vec::new(),
        artifacts: Artifacts {
            patch: None,
            blobs: Vec::new(),
            logs: Vec::new(),
        },
        bounds_hit: Vec::new(),
        exit_report: meta.exit_report.clone(),
        completion: Completion::Complete,
    }
}

fn store_logs(
    meta: &CaptureMeta,
    bounds: BoundsSpec,
    store: &ArtifactStore,
    hits: &mut Vec<BoundHit>,
) -> Result<Vec<LogArtifact>, CaptureError> {
    let mut out = Vec::new();
    let mut cut = 0u64;
    for log in &meta.logs {
        let fd = rustix::fs::open(
            &log.path,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC
                | rustix::fs::OFlags::NONBLOCK,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| CaptureError::Io {
            path: log.path.clone(),
            source: e.into(),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| CaptureError::Io {
            path: log.path.clone(),
            source: e.into(),
        })?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(CaptureError::Io {
                path: log.path.clone(),
                source: std::io::Error::other("log is not a regular file"),
            });
        }
        let mut data = Vec::new();
        std::fs::File::from(fd)
            .take(bounds.max_log_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| CaptureError::Io {
                path: log.path.clone(),
                source: e,
            })?;
        let truncated = data.len() as u64 > bounds.max_log_bytes;
        if truncated {
            data.truncate(usize::try_from(bounds.max_log_bytes).unwrap_or(usize::MAX));
            cut += 1;
        }
        out.push(LogArtifact {
            name: log.name.clone(),
            artifact: store.put(&data)?,
            truncated,
        });
    }
    if cut > 0 {
        hits.push(BoundHit {
            bound: BoundName::LogBytes,
            limit: bounds.max_log_bytes,
            affected: cut,
        });
    }
    Ok(out)
}
