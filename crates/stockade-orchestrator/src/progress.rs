//! Progress events an attempt sends while it works, for a command line or a log to render.

use std::time::Duration;

use serde::Serialize;

/// The steps of an attempt, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Waiting for a slot under the concurrency limit.
    Queued,
    /// Resolving the work unit, preset and trusted connections into a policy.
    Resolve,
    /// Probing the backend and admitting the policy (no admission, no worker).
    Admit,
    /// Prewarming (or reusing) the exact-SHA workspace template.
    Workspace,
    /// Creating the sandbox session.
    Session,
    /// Starting the agent and the gateway for the policy's destinations.
    Launch,
    /// Delivering the prompt.
    Prompt,
    /// The agent runs under its wall-time budget.
    Agent,
    /// Killing and reaping whatever is left of the process tree, shutting the session down.
    Contain,
    /// Capturing the candidate from outside the worker.
    Capture,
    /// The manifest is written; the attempt is over.
    Done,
}

impl Stage {
    /// A short lower-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Queued => "queued",
            Stage::Resolve => "resolve",
            Stage::Admit => "admit",
            Stage::Workspace => "workspace",
            Stage::Session => "session",
            Stage::Launch => "launch",
            Stage::Prompt => "prompt",
            Stage::Agent => "agent",
            Stage::Contain => "contain",
            Stage::Capture => "capture",
            Stage::Done => "done",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which output stream of the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
#[non_exhaustive]
pub enum ProgressKind {
    /// A new stage began.
    Stage {
        /// The stage.
        stage: Stage,
    },
    /// The agent wrote output (the bytes are the agent's, untrusted: render them escaped).
    Output {
        /// Which stream.
        stream: OutputStream,
        /// The chunk as read.
        chunk: Vec<u8>,
        /// Bytes written to this stream so far.
        total: u64,
    },
    /// The gateway's request count changed.
    Gateway {
        /// Requests seen so far.
        requests: u64,
        /// Of which denied by the gateway.
        denied: u64,
    },
}

/// One progress event of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The attempt.
    pub attempt_id: String,
    /// Time since the attempt started.
    pub elapsed: Duration,
    /// What happened.
    pub kind: ProgressKind,
}
