//! The contract's error type.

use crate::lease::LeaseError;
use crate::path::PathError;

/// Everything a backend or the session API can refuse or fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A session path was malformed or tried to escape the session.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The session lease could not be taken or kept.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// A launch was prepared under an older policy revision than the session's current one.
    #[error(
        "launch refused: prepared under policy revision {prepared}, session is at revision {current}"
    )]
    StaleRevision {
        /// Revision the launch was prepared under.
        prepared: u64,
        /// The session's current revision.
        current: u64,
    },
    /// The operation needs a running or reattachable session but the session is in another state.
    #[error("session is {state}: {operation} is not possible")]
    WrongState {
        /// The session's state, rendered.
        state: &'static str,
        /// What was attempted.
        operation: &'static str,
    },
    /// A template made by one backend was offered to another.
    #[error("template {key} belongs to backend `{template_backend}`, not `{backend}`")]
    ForeignTemplate {
        /// The template key.
        key: String,
        /// The backend that made the template.
        template_backend: String,
        /// The backend it was offered to.
        backend: String,
    },
    /// Reattach was asked for a record made by another backend or template.
    #[error("reattach refused: {0}")]
    ReattachMismatch(String),
    /// The admission witness does not cover the policy offered with it.
    #[error("admission was granted for policy {admitted}, not for policy {offered}")]
    AdmissionMismatch {
        /// Policy id the admission was granted for.
        admitted: String,
        /// Policy id offered to `create`.
        offered: String,
    },
    /// The admission witness was made from another backend's attestation.
    #[error(
        "admission was granted from the attestation of backend `{admitted_backend}`, not `{backend}`"
    )]
    ForeignAdmission {
        /// The backend whose attestation the admission was made from.
        admitted_backend: String,
        /// The backend it was offered to.
        backend: String,
    },
    /// The backend cannot provide what was asked (for example an overlay on this host).
    #[error("backend `{backend}` cannot {what}: {remedy}")]
    Unsupported {
        /// Backend name.
        backend: String,
        /// What it cannot do.
        what: String,
        /// How to fix the host or the request.
        remedy: String,
    },
    /// A file-system operation on the host failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A session file is not valid UTF-8 where text was asked for.
    #[error("{path} is not valid UTF-8")]
    NotText {
        /// The session path.
        path: String,
    },
    /// Backend-specific failure (setup of the boundary failed, and so on).
    #[error("backend `{backend}`: {message}")]
    Backend {
        /// Backend name.
        backend: String,
        /// What failed.
        message: String,
    },
}

impl SandboxError {
    /// Wraps an I/O error with a context string.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io {
            context: context.into(),
            source,
        }
    }
}
