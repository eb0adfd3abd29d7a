//! What an attempt ends with: a named error, an outcome, and the documented exit codes.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use stockade_gateway::AuditRecord;
use stockade_manifest::ResultManifest;

use crate::progress::Stage;

/// Exit code: a candidate was captured (the agent exited 0 and the manifest is complete).
pub const EXIT_CAPTURED: i32 = 0;
/// Exit code: the attempt was refused before any worker started (policy, admission, missing
/// credential, unsupported prompt transport). The message names the fix.
pub const EXIT_REFUSED: i32 = 10;
/// Exit code: the agent failed (non-zero exit, signal, or wall-time budget), its output was
/// still captured and a manifest written.
pub const EXIT_AGENT_FAILED: i32 = 11;
/// Exit code: Stockade could not finish the attempt (an internal step failed, or it was
/// cancelled); an incomplete record was written where possible.
pub const EXIT_INCOMPLETE: i32 = 12;

/// Why an attempt did not produce a complete record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The work unit, preset and trusted connections do not resolve into a policy.
    #[error("refused: {0}")]
    Policy(#[from] stockade_policy::PolicyError),
    /// The backend does not attest every protection the policy needs.
    #[error("refused: {0}")]
    Admission(#[from] stockade_capabilities::Refusal),
    /// `file` prompt transport needs an isolated input mount that this backend does not offer.
    #[error(
        "refused: prompt transport `file` needs an isolated input mount outside the candidate workspace, which this backend does not provide; use a preset with `stdin` or `argument` transport"
    )]
    IsolatedInputMountUnavailable,
    /// A credential the gateway must inject is missing on the host.
    #[error("refused: {0}; set it on the host before running (the value never enters the sandbox)")]
    Secret(String),
    /// The launch could not be planned from the policy.
    #[error("refused: {0}")]
    Plan(String),
    /// The attempt id is not `[A-Za-z0-9._-]{1,128}` (not starting with a dot).
    #[error("attempt id {0:?} must be 1-128 characters of [A-Za-z0-9._-] not starting with a dot")]
    AttemptId(String),
    /// The backend is not available in this build or on this host.
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// The exact-SHA workspace could not be prewarmed.
    #[error("workspace: {0}")]
    Workspace(#[from] stockade_workspace::WorkspaceError),
    /// The sandbox backend failed.
    #[error("sandbox: {0}")]
    Sandbox(#[from] stockade_sandbox::SandboxError),
    /// The gateway could not start.
    #[error("gateway: {0}")]
    Gateway(#[from] stockade_gateway::GatewayError),
    /// Capture failed: no candidate was recorded.
    #[error("capture: {0}")]
    Capture(#[from] stockade_capture::CaptureError),
    /// The artifact store could not be opened.
    #[error("artifact store: {0}")]
    Store(#[from] stockade_capture::StoreError),
    /// A host-side file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The worker's process tree could not be confirmed dead.
    #[error("containment failed: {0}")]
    Containment(String),
    /// The attempt was cancelled.
    #[error("cancelled during stage {0}")]
    Cancelled(Stage),
    /// A blocking step panicked or was aborted.
    #[error("internal: {0}")]
    Internal(String),
}

impl AttemptError {
    /// Whether this error is a refusal (nothing ran).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            AttemptError::Policy(_)
                | AttemptError::Admission(_)
                | AttemptError::IsolatedInputMountUnavailable
                | AttemptError::Secret(_)
                | AttemptError::Plan(_)
                | AttemptError::BackendUnavailable(_)
        )
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        AttemptError::Io {
            context: context.into(),
            source,
        }
    }
}

/// How the agent process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "how")]
pub enum AgentExit {
    /// It exited with a code.
    Exited {
        /// The code.
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// It ran past the wall-time budget and its tree was killed.
    TimedOut,
    /// The attempt was cancelled and its tree was killed.
    Cancelled,
}

/// The verdict of an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum AttemptStatus {
    /// The agent exited 0 and capture is complete: a candidate (not an acceptance).
    CandidateCaptured,
    /// The agent failed; whatever it changed was still captured.
    AgentFailed,
    /// Refused before any worker started.
    Refused,
    /// Stockade could not finish, or the attempt was cancelled.
    Incomplete,
}

impl AttemptStatus {
    /// The documented exit code for this status.
    pub const fn exit_code(&self) -> i32 {
        match self {
            AttemptStatus::CandidateCaptured => EXIT_CAPTURED,
            AttemptStatus::AgentFailed => EXIT_AGENT_FAILED,
            AttemptStatus::Refused => EXIT_REFUSED,
            AttemptStatus::Incomplete => EXIT_INCOMPLETE,
        }
    }
}

/// Everything an attempt reports.
#[derive(Debug)]
pub struct AttemptOutcome {
    /// The attempt id.
    pub attempt_id: String,
    /// The verdict.
    pub status: AttemptStatus,
    /// The error that stopped it, if any (always set for `Refused` and `Incomplete`).
    pub error: Option<AttemptError>,
    /// The resolved policy's id, when it resolved.
    pub policy_id: Option<String>,
    /// Protections admitted for this attempt, with the backend's evidence.
    pub protections: Vec<(String, String)>,
    /// How the agent ended, if it started.
    pub agent_exit: Option<AgentExit>,
    /// Wall time of the whole attempt.
    pub elapsed: Duration,
    /// Agent standard output and error sizes in bytes.
    pub output_bytes: (u64, u64),
    /// Every gateway request (allowed, denied, failed), without secrets.
    pub gateway_audit: Vec<AuditRecord>,
    /// Backend usage report (limits hit and so on), as the backend gave it.
    pub usage: Option<serde_json::Value>,
    /// The manifest, when one was written (complete or incomplete).
    pub manifest: Option<ResultManifest>,
    /// Where the manifest was written.
    pub manifest_path: Option<PathBuf>,
    /// The artifact store root.
    pub artifacts_dir: PathBuf,
    /// Host files holding the agent's stdout and stderr (outside workspace and store).
    pub log_paths: Vec<PathBuf>,
}

impl AttemptOutcome {
    /// The documented exit code.
    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }
}
