//! Re-hash every artifact a manifest names and report every mismatch.

use crate::{
    ArtifactRef, CanonicalError, Completion, MANIFESTS_DIR, ResultManifest, artifact_relative_path,
    manifest_relative_path,
};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest manifest the verifier reads.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// Why a manifest could not be verified at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The manifest file could not be read.
    #[error("cannot read manifest {path}: {source}")]
    Read {
        /// The manifest path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The manifest is larger than the verifier reads.
    #[error("manifest {0} is larger than {MAX_MANIFEST_BYTES} bytes")]
    TooLarge(PathBuf),
    /// The manifest does not sit at `<store>/manifests/<attempt>.json`.
    #[error("manifest path {0} is not <store>/{MANIFESTS_DIR}/<attempt id>.json")]
    Layout(PathBuf),
    /// The manifest bytes are not a canonical manifest.
    #[error("invalid manifest {path}: {source}")]
    Invalid {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong.
        source: CanonicalError,
    },
    /// The manifest parsed, but artifacts or cross-references do not match; every mismatch is
    /// listed.
    #[error("manifest {path} failed verification with {} mismatch(es): {}", .mismatches.len(), join(.mismatches))]
    Mismatches {
        /// The manifest path.
        path: PathBuf,
        /// Every mismatch found.
        mismatches: Vec<Mismatch>,
    },
}

fn join(m: &[Mismatch]) -> String {
    m.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One disagreement between a manifest and its store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// An artifact address is not 64 lowercase hex digits.
    BadAddress {
        /// The address.
        address: String,
    },
    /// The artifact file is missing or unreadable (or is not a regular file).
    Missing {
        /// The address.
        address: String,
        /// What failed.
        detail: String,
    },
    /// Size differs.
    Size {
        /// The address.
        address: String,
        /// Size in the manifest.
        expected: u64,
        /// Size on disk.
        actual: u64,
    },
    /// BLAKE3 of the bytes differs from the address.
    Blake3 {
        /// The address.
        address: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// SHA-256 differs.
    Sha256 {
        /// The address.
        address: String,
        /// Digest in the manifest.
        expected: String,
        /// Digest of the bytes.
        actual: String,
    },
    /// An accepted change's new content is not among the blob artifacts, or disagrees with it.
    BlobNotListed {
        /// The path.
        path: String,
    },
    /// The same path is both accepted and rejected, or accepted twice.
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// A complete manifest has no patch.
    MissingPatch,
    /// The manifest's file name is not its attempt id.
    WrongFileName {
        /// The attempt id inside the manifest.
        attempt_id: String,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::BadAddress { address } => write!(f, "bad artifact address {address:?}"),
            Mismatch::Missing { address, detail } => {
                write!(f, "artifact {address} missing: {detail}")
            }
            Mismatch::Size {
                address,
                expected,
                actual,
            } => {
                write!(f, "artifact {address} size {actual} != {expected}")
            }
            Mismatch::Blake3 { address, actual } => {
                write!(f, "artifact {address} hashes to blake3 {actual}")
            }
            Mismatch::Sha256 {
                address,
                expected,
                actual,
            } => {
                write!(f, "artifact {address} sha256 {actual} != {expected}")
            }
            Mismatch::BlobNotListed { path } => {
                write!(f, "accepted change {path} has no matching blob artifact")
            }
            Mismatch::DuplicatePath { path } => write!(f, "path {path} listed more than once"),
            Mismatch::MissingPatch => write!(f, "complete manifest has no patch artifact"),
            Mismatch::WrongFileName { attempt_id } => {
                write!(f, "manifest file name is not {attempt_id}.json")
            }
        }
    }
}

/// A manifest whose every artifact was re-hashed and matched.
///
/// Only [`verify`] and [`verify_in_store`] make one. It says the artifacts are the bytes the
/// capture recorded; it does not say the candidate is acceptable.
#[derive(Debug, Clone)]
pub struct VerifiedManifest {
    manifest: ResultManifest,
    store_root: PathBuf,
}

impl VerifiedManifest {
    /// The verified manifest.
    pub fn manifest(&self) -> &ResultManifest {
        &self.manifest
    }

    /// The store root the artifacts were read from.
    pub fn store_root(&self) -> &Path {
        &self.store_root
    }

    /// Absolute path of an artifact in the verified store.
    pub fn artifact_path(&self, artifact: &ArtifactRef) -> Option<PathBuf> {
        artifact_relative_path(&artifact.blake3).map(|p| self.store_root.join(p))
    }
}

/// Verifies `<store>/manifests/<attempt>.json`: the store root is two levels up.
pub fn verify(manifest_path: &Path) -> Result<VerifiedManifest, VerifyError> {
    let dir = manifest_path
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == MANIFESTS_DIR))
        .ok_or_else(|| VerifyError::Layout(manifest_path.to_path_buf()))?;
    let root = dir
        .parent()
        .ok_or_else(|| VerifyError::Layout(manifest_path.to_path_buf()))?;
    verify_in_store(root, manifest_path)
}

/// Verifies a manifest against the artifact store rooted at `store_root`.
pub fn verify_in_store(
    store_root: &Path,
    manifest_path: &Path,
) -> Result<VerifiedManifest, VerifyError> {
    let read_err = |source| VerifyError::Read {
        path: manifest_path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(manifest_path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(VerifyError::TooLarge(manifest_path.to_path_buf()));
    }
    let manifest =
        ResultManifest::from_canonical_json(&bytes).map_err(|source| VerifyError::Invalid {
            path: manifest_path.to_path_buf(),
            source,
        })?;

    let mut mismatches = Vec::new();
    let expected_name = manifest_relative_path(&manifest.attempt_id)
        .and_then(|p| p.file_name().map(ToOwned::to_owned));
    if expected_name.as_deref() != manifest_path.file_name() {
        mismatches.push(Mismatch::WrongFileName {
            attempt_id: manifest.attempt_id.clone(),
        });
    }

    mismatches.extend(check_manifest_artifacts(&manifest, store_root));
    if mismatches.is_empty() {
        Ok(VerifiedManifest {
            manifest,
            store_root: store_root.to_path_buf(),
        })
    } else {
        Err(VerifyError::Mismatches {
            path: manifest_path.to_path_buf(),
            mismatches,
        })
    }
}

fn check_artifact(root: &Path, r: &ArtifactRef, out: &mut Vec<Mismatch>) {
    let Some(rel) = artifact_relative_path(&r.blake3) else {
        out.push(Mismatch::BadAddress {
            address: r.blake3.clone(),
        });
        return;
    };
    let path = root.join(rel);
    let missing = |detail: String| Mismatch::Missing {
        address: r.blake3.clone(),
        detail,
    };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => {
            out.push(missing("not a regular file".to_owned()));
            return;
        }
        Err(e) => {
            out.push(missing(e.to_string()));
            return;
        }
    }
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            out.push(missing(e.to_string()));
            return;
        }
    };
    let mut b3 = blake3::Hasher::new();
    let mut s2 = sha2::Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                b3.update(&buf[..n]);
                s2.update(&buf[..n]);
                size += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                out.push(missing(e.to_string()));
                return;
            }
        }
    }
    if size != r.size {
        out.push(Mismatch::Size {
            address: r.blake3.clone(),
            expected: r.size,
            actual: size,
        });
    }
    let actual_b3 = b3.finalize().to_hex().to_string();
    if actual_b3 != r.blake3 {
        out.push(Mismatch::Blake3 {
            address: r.blake3.clone(),
            actual: actual_b3,
        });
    }
    let actual_s2 = hex::encode(s2.finalize());
    if actual_s2 != r.sha256 {
        out.push(Mismatch::Sha256 {
            address: r.blake3.clone(),
            expected: r.sha256.clone(),
            actual: actual_s2,
        });
    }
}

/// Re-hashes every artifact `manifest` names in the store at `store_root` and checks the
/// cross-references (blob of each accepted change, duplicate paths, patch of a complete
/// manifest); returns every mismatch, empty when all agree.
pub fn check_manifest_artifacts(manifest: &ResultManifest, store_root: &Path) -> Vec<Mismatch> {
    let mut mismatches = Vec::new();
    let mut refs: Vec<&ArtifactRef> = Vec::new();
    refs.extend(manifest.artifacts.patch.iter());
    refs.extend(manifest.artifacts.blobs.iter());
    refs.extend(manifest.artifacts.logs.iter().map(|l| &l.artifact));
    let mut checked = BTreeSet::new();
    for r in refs {
        if checked.insert(r.clone()) {
            check_artifact(store_root, r, &mut mismatches);
        }
    }

    let blobs: BTreeMap<&str, &ArtifactRef> = manifest
        .artifacts
        .blobs
        .iter()
        .map(|b| (b.blake3.as_str(), b))
        .collect();
    let mut seen = BTreeSet::new();
    for change in &manifest.accepted {
        if !seen.insert(change.path.as_bytes().to_vec()) {
            mismatches.push(Mismatch::DuplicatePath {
                path: change.path.to_string(),
            });
        }
        if let Some(new) = &change.new {
            let ok = blobs
                .get(new.blake3.as_str())
                .is_some_and(|b| b.sha256 == new.sha256 && b.size == new.size);
            if !ok {
                mismatches.push(Mismatch::BlobNotListed {
                    path: change.path.to_string(),
                });
            }
        }
    }
    for r in &manifest.rejected {
        if seen.contains(r.path.as_bytes()) {
            mismatches.push(Mismatch::DuplicatePath {
                path: r.path.to_string(),
            });
        }
    }
    if manifest.completion == Completion::Complete && manifest.artifacts.patch.is_none() {
        mismatches.push(Mismatch::MissingPatch);
    }

    mismatches
}
