//! Errors of capture and of the artifact store.

use std::path::PathBuf;

/// Why a capture could not run to the end.
///
/// Refusals of individual paths are not errors: they are rejected changes in the manifest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The base commit is not a full lowercase hex object id (branch names and short ids are
    /// refused).
    #[error("base commit {0:?} is not a full 40-digit lowercase hex object id")]
    BadCommitId(String),
    /// The canonical repository could not be opened.
    #[error("cannot open canonical repository {path}: {detail}")]
    Repo {
        /// The repository path given.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// An object could not be read or decoded from the canonical repository.
    #[error("cannot read object {oid} from the canonical repository: {detail}")]
    Object {
        /// The object id.
        oid: String,
        /// What failed.
        detail: String,
    },
    /// Reading the candidate failed.
    #[error("cannot read candidate path {path}: {source}")]
    Io {
        /// Host path, or repository-relative path for entries inside the input.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The change layer uses an overlay feature capture does not interpret (metacopy,
    /// redirect_dir, or xwhiteouts); the backend must mount with them off.
    #[error(
        "change layer uses unsupported overlay feature {feature} at {path}; mount with metacopy=off,redirect_dir=off"
    )]
    UnsupportedOverlay {
        /// The xattr found.
        feature: String,
        /// Repository-relative path (lossy).
        path: String,
    },
    /// The artifact store lies inside the input, the canonical repository, or the other way round.
    #[error(
        "artifact store {store} overlaps {other}: artifacts must live outside the workspace and the canonical repository"
    )]
    StoreOverlaps {
        /// Store root.
        store: PathBuf,
        /// The overlapping directory.
        other: PathBuf,
    },
    /// Capture metadata is invalid (for example an attempt id unusable as a file name).
    #[error("invalid capture metadata: {0}")]
    Meta(String),
    /// The artifact store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The manifest could not be rendered.
    #[error("cannot render manifest: {0}")]
    Manifest(#[from] stockade_manifest::CanonicalError),
}

/// Why the artifact store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation on the store failed.
    #[error("artifact store {path}: {source}")]
    Io {
        /// The store path involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A manifest for this attempt already exists; manifests are never overwritten.
    #[error("a manifest already exists at {0}; manifests are never overwritten")]
    ManifestExists(PathBuf),
    /// The attempt id cannot be used as a file name.
    #[error("attempt id {0:?} is not 1-128 characters of [A-Za-z0-9._-] not starting with a dot")]
    BadAttemptId(String),
    /// The manifest could not be rendered.
    #[error("cannot render manifest: {0}")]
    Manifest(#[from] stockade_manifest::CanonicalError),
}
