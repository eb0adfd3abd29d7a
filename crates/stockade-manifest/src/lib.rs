//! # stockade-manifest — the normalized `ResultManifest` and its verifier
//!
//! Layer: leaf crate read by downstream verifiers (and written by `stockade-capture`).
//!
//! What this crate does: it defines [`ResultManifest`], the schema-versioned record of one
//! captured attempt (accepted changes with digests, rejected changes with a named reason per
//! path, content-addressed artifact addresses, bounds hit, completion status), renders it as
//! canonical JSON (sorted keys, arrays in a stable order, no floats), parses it back strictly,
//! and [`verify`]s a manifest against its artifact store by re-hashing every artifact.
//!
//! What this crate does **not** do: it never reads a repository (no gix), never starts a runtime
//! (no tokio), never runs a program, and never decides acceptance: a manifest that verifies only
//! says the artifacts are the ones the capture wrote (ADR-0017: `ResultManifest != acceptance`).
#![forbid(unsafe_code)]

mod canonical;
pub mod oracle;
mod path;
mod store_layout;
mod verify;

pub use canonical::{CanonicalError, to_canonical_json};
pub use path::RepoPath;
pub use store_layout::{
    ARTIFACTS_DIR, MANIFESTS_DIR, artifact_relative_path, is_valid_blake3_hex, is_valid_id,
    manifest_relative_path,
};
pub use verify::{
    Mismatch, VerifiedManifest, VerifyError, check_manifest_artifacts, verify, verify_in_store,
};

use serde::{Deserialize, Serialize};

/// The schema version this crate writes and the only one it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One captured attempt, normalized.
///
/// Build it with the fields, then call [`ResultManifest::normalize`] (or render it with
/// [`ResultManifest::to_canonical_json`], which normalizes a copy) so arrays are in their stable
/// order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultManifest {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The attempt this capture belongs to.
    pub attempt_id: String,
    /// The work unit the attempt ran.
    pub work_unit_id: String,
    /// The maintainer-owned agent preset the attempt used.
    pub preset_id: String,
    /// Full hex object id of the base commit the changes are relative to.
    pub base_commit: String,
    /// Identifier (digest) of the resolved per-attempt sandbox policy.
    pub policy_id: String,
    /// The backend's capability attestation, as supplied by the orchestrator (opaque here).
    pub capability_attestation: serde_json::Value,
    /// The bounds capture ran with.
    pub bounds: BoundsSpec,
    /// Changes that passed every check and are in the patch, sorted by path bytes.
    pub accepted: Vec<AcceptedChange>,
    /// Changes refused, each with its reason, sorted by path bytes; none reaches the patch.
    pub rejected: Vec<RejectedChange>,
    /// Content-addressed artifacts written before this manifest.
    pub artifacts: Artifacts,
    /// Every bound that was reached; empty when none was.
    pub bounds_hit: Vec<BoundHit>,
    /// Exit and resource report of the worker, as supplied by the orchestrator (opaque here).
    pub exit_report: serde_json::Value,
    /// Whether the capture is complete, or why not.
    pub completion: Completion,
}

/// Limits capture enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsSpec {
    /// Largest new file content (bytes) capture accepts.
    pub max_file_bytes: u64,
    /// Largest patch (bytes) capture retains.
    pub max_patch_bytes: u64,
    /// Most changed paths capture enumerates before it stops and reports incomplete.
    pub max_changes: u64,
    /// Largest log (bytes) capture stores; longer logs are stored cut and marked truncated.
    pub max_log_bytes: u64,
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Not in the base tree; present now.
    Added,
    /// In the base tree; gone now.
    Deleted,
    /// Same type, different content (the mode may also have changed).
    Modified,
    /// Same content, only the executable bit changed.
    ModeChanged,
    /// Regular file became a symlink or the other way round.
    TypeChanged,
}

/// A git file mode capture represents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FileMode {
    /// `100644`.
    #[serde(rename = "100644")]
    Regular,
    /// `100755`.
    #[serde(rename = "100755")]
    Executable,
    /// `120000`; the content is the link target, recorded as data.
    #[serde(rename = "120000")]
    Symlink,
}

impl FileMode {
    /// The git octal spelling.
    pub fn as_git_str(self) -> &'static str {
        match self {
            FileMode::Regular => "100644",
            FileMode::Executable => "100755",
            FileMode::Symlink => "120000",
        }
    }
}

/// The base side of a change, read from the canonical repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OldEntry {
    /// Git mode in the base tree.
    pub mode: FileMode,
    /// Git blob id (hex) in the base tree.
    pub git_blob: String,
}

/// The new side of a change, with digests of its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewEntry {
    /// Git mode of the new content.
    pub mode: FileMode,
    /// Git blob id (hex) of the new content.
    pub git_blob: String,
    /// Content size in bytes.
    pub size: u64,
    /// BLAKE3 of the content (hex): also the blob artifact's address.
    pub blake3: String,
    /// SHA-256 of the content (hex).
    pub sha256: String,
}

/// An accepted change; it is in the patch and its new content is a blob artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptedChange {
    /// Repository-relative path.
    pub path: RepoPath,
    /// What happened.
    pub kind: ChangeKind,
    /// Base side; absent for additions.
    pub old: Option<OldEntry>,
    /// New side; absent for deletions.
    pub new: Option<NewEntry>,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "code")]
pub enum RejectReason {
    /// A forbidden pattern of the scope covers the path.
    Forbidden {
        /// The pattern that matched.
        pattern: String,
    },
    /// No allowed pattern of the scope covers the path.
    OutOfScope,
    /// The path lies in a `.git` directory (the worker's git dir is untrusted).
    GitDir,
    /// A regular file with more than one hard link (it may alias a file outside the workspace).
    HardLink {
        /// Link count seen.
        nlink: u64,
    },
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block device node.
    BlockDevice,
    /// A character device node (other than an overlay whiteout in a change layer).
    CharDevice,
    /// The new content is larger than the per-file bound.
    FileTooLarge {
        /// Size seen.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// Adding this change's patch text would exceed the patch bound.
    PatchBoundExceeded {
        /// The bound.
        limit: u64,
    },
    /// Git itself refuses to write this path (an NTFS-equivalent of `.git` such as `GIT~1` or
    /// `.git.`, or a symlink named `.gitmodules`, `.gitattributes`, `.gitignore` or `.mailmap`).
    GitRefusesPath,
    /// The path lies inside a submodule (gitlink) of the base tree; capture does not descend
    /// into submodules.
    Submodule,
    /// Accepting this change needs another change that was rejected (for example a new file
    /// `a/b` where the deletion of the base file `a` was rejected), so the patch could not apply.
    BlockedBy {
        /// The rejected change this one depends on.
        path: RepoPath,
    },
    /// A symlink target longer than the per-file bound or otherwise unreadable as data.
    Unreadable {
        /// What failed.
        detail: String,
    },
}

/// A refused change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectedChange {
    /// Repository-relative path.
    pub path: RepoPath,
    /// The change that was refused, when capture could tell.
    pub kind: Option<ChangeKind>,
    /// Why.
    pub reason: RejectReason,
}

/// Address and digests of one stored artifact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    /// BLAKE3 (hex) of the bytes: the address, `artifacts/blake3/<hex>` in the store.
    pub blake3: String,
    /// SHA-256 (hex) of the bytes.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

/// A named log artifact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogArtifact {
    /// Log name (for example `stdout`).
    pub name: String,
    /// Where it is stored.
    pub artifact: ArtifactRef,
    /// Whether the log was cut at the log bound (its stored bytes are a prefix).
    pub truncated: bool,
}

/// Every artifact a manifest names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifacts {
    /// The patch in git's format; absent when the capture is incomplete.
    pub patch: Option<ArtifactRef>,
    /// Full new contents of accepted changes, sorted by address, deduplicated.
    pub blobs: Vec<ArtifactRef>,
    /// Logs, sorted by name.
    pub logs: Vec<LogArtifact>,
}

/// Which bound was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundName {
    /// Per-file bytes.
    FileBytes,
    /// Retained patch bytes.
    PatchBytes,
    /// Number of changed paths.
    Changes,
    /// Bytes of one log.
    LogBytes,
}

/// A bound that was reached, and how far past it the candidate went.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundHit {
    /// Which bound.
    pub bound: BoundName,
    /// Its limit.
    pub limit: u64,
    /// How many paths (or logs) it affected.
    pub affected: u64,
}

/// Whether capture finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Completion {
    /// Every change was enumerated and classified; the patch holds every accepted change.
    Complete,
    /// Capture stopped early; nothing here is a candidate.
    Incomplete {
        /// Why.
        reason: String,
    },
}

/// Orders changes the canonical way: by path bytes, then by kind.
fn change_order(
    a: &RepoPath,
    ak: Option<ChangeKind>,
    b: &RepoPath,
    bk: Option<ChangeKind>,
) -> std::cmp::Ordering {
    a.as_bytes().cmp(b.as_bytes()).then(ak.cmp(&bk))
}

impl ResultManifest {
    /// Puts every array in its canonical order (paths by bytes, artifacts by address, logs by
    /// name) and removes duplicate blob entries.
    pub fn normalize(&mut self) {
        self.accepted
            .sort_by(|a, b| change_order(&a.path, Some(a.kind), &b.path, Some(b.kind)));
        self.rejected.sort_by(|a, b| {
            change_order(&a.path, a.kind, &b.path, b.kind).then_with(|| a.reason.cmp(&b.reason))
        });
        self.artifacts.blobs.sort();
        self.artifacts.blobs.dedup();
        self.artifacts.logs.sort();
        self.bounds_hit.sort();
    }

    /// Renders canonical JSON (normalizing a copy first), ending in a newline.
    pub fn to_canonical_json(&self) -> Result<Vec<u8>, CanonicalError> {
        let mut copy = self.clone();
        copy.normalize();
        let value =
            serde_json::to_value(&copy).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
        let mut out = to_canonical_json(&value)?;
        out.push(b'\n');
        Ok(out)
    }

    /// Re-hashes every artifact this manifest names in the store at `store_root`; see
    /// [`check_manifest_artifacts`]. `Ok` says the artifacts are the recorded bytes, not that
    /// the candidate is acceptable.
    pub fn verify(&self, store_root: &std::path::Path) -> Result<(), Vec<Mismatch>> {
        let m = check_manifest_artifacts(self, store_root);
        if m.is_empty() { Ok(()) } else { Err(m) }
    }

    /// Parses a manifest strictly: the schema version must be [`SCHEMA_VERSION`], unknown fields
    /// are refused, and the bytes must be exactly the canonical rendering of what they parse to.
    pub fn from_canonical_json(bytes: &[u8]) -> Result<ResultManifest, CanonicalError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| CanonicalError::Parse(e.to_string()))?;
        let version = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64);
        if version != Some(u64::from(SCHEMA_VERSION)) {
            return Err(CanonicalError::SchemaVersion(version));
        }
        let manifest: ResultManifest =
            serde_json::from_value(value).map_err(|e| CanonicalError::Parse(e.to_string()))?;
        let again = manifest.to_canonical_json()?;
        if again != bytes {
            return Err(CanonicalError::NotCanonical);
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests;
