//! Errors of the launcher.

/// Why a launch failed. Nothing is left running when one is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The spec is malformed or asks for something unsafe.
    #[error("invalid launch spec: {0}")]
    InvalidSpec(String),
    /// Reading host facts needed for the plan failed.
    #[error("host inspection failed: {0}")]
    Host(String),
    /// A system call in the parent failed.
    #[error("{what}: {source}")]
    Sys {
        /// What the launcher was doing.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child reported a setup failure before `exec`.
    #[error("sandbox setup failed at {stage}{detail}: {source}")]
    Setup {
        /// Setup stage name.
        stage: &'static str,
        /// Extra detail (the mount step, for instance).
        detail: String,
        /// The OS error reported by the child.
        source: std::io::Error,
    },
    /// The program could not be executed inside the sandbox (not found or not executable).
    #[error("cannot execute {program} inside the sandbox: {source}")]
    Exec {
        /// The program as given.
        program: String,
        /// The OS error reported by `execve`.
        source: std::io::Error,
    },
    /// The before-release hook failed.
    #[error("before-release hook failed: {0}")]
    Hook(String),
    /// Setup did not finish in time.
    #[error("sandbox setup did not finish within {0:?}")]
    SetupTimeout(std::time::Duration),
    /// The launcher thread is gone (it never exits, so this is a bug).
    #[error("the launcher thread is not running")]
    LauncherGone,
}
