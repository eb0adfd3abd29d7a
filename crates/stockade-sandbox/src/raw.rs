//! The minimal surface a backend implements.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stockade_capabilities::{Admission, SandboxCapabilities};
use stockade_policy::SandboxPolicy;

use crate::SandboxError;
use crate::lease::SessionRecord;
use crate::path::SessionPath;
use crate::template::{Template, TemplateSpec};

/// A sandbox backend: identity, probed capabilities, and the two phases.
pub trait Backend: Send + Sync {
    /// The backend's stable name; part of every template key and session record.
    fn name(&self) -> &str;

    /// Probes the host with live self-tests and reports what this backend enforces here.
    /// Implementations cache the result per process and bound every step.
    fn probe(&self) -> SandboxCapabilities;

    /// Phase one: prepares a reusable, content-keyed template.
    fn prewarm(&self, spec: &TemplateSpec) -> Result<Template, SandboxError>;

    /// Phase two: opens a live session on `template`, enforcing `policy`.
    ///
    /// The [`Admission`] witness is consumed: only `stockade_capabilities::admit` can make
    /// one, so a session cannot exist for a policy that admission refused.
    fn create(
        &self,
        template: &Template,
        policy: &SandboxPolicy,
        admission: Admission,
    ) -> Result<Box<dyn RawSession>, SandboxError>;

    /// Reopens a stopped session from its record. The caller ([`crate::Session::reattach`])
    /// has already checked backend and template identity and holds the exclusive lease.
    fn reattach(
        &self,
        template: &Template,
        record: &SessionRecord,
    ) -> Result<Box<dyn RawSession>, SandboxError>;
}

/// The kind of a directory entry, read without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

/// How a spawned process's standard input is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null`.
    Null,
    /// A pipe the caller writes through [`RawProcess::take_stdin`].
    Piped,
}

/// One program to start inside a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Program and arguments; the program is resolved inside the sandbox.
    pub argv: Vec<String>,
    /// The complete environment: nothing of the host's is added.
    pub env: Vec<(String, String)>,
    /// Working directory, relative to the session workspace (`None`: the workspace root).
    pub cwd: Option<SessionPath>,
    /// Standard input.
    pub stdin: StdinMode,
    /// Loopback ports to open inside the sandbox's network namespace before the program
    /// starts; the listeners are handed to the caller (the host-side gateway serves them).
    pub loopback_ports: Vec<u16>,
    /// Wall-time budget after which the backend kills the whole process tree.
    pub wall_time: Option<Duration>,
    /// Files placed in the session's isolated input mount before the program starts (name →
    /// bytes): read-only inside the sandbox, outside the workspace, never part of the
    /// candidate. Refused by a backend without one ([`RawSession::input_dir`] is `None`).
    pub input_files: BTreeMap<String, Vec<u8>>,
}

/// How a sandboxed program ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Exited with a code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// Killed by a signal.
    Signaled {
        /// The signal number.
        signal: i32,
    },
}

impl ExitStatus {
    /// Whether the program exited with code 0.
    pub fn success(&self) -> bool {
        matches!(self, ExitStatus::Exited { code: 0 })
    }
}

/// A live session as a backend provides it: byte I/O on session paths, `lstat`, spawn and
/// the lifecycle. Everything else is built once in [`crate::Session`].
///
/// Implementations must perform byte I/O without following a symbolic link in any
/// component (on Linux: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), even though
/// [`crate::Session`] has already checked the path, because the worker may race the check.
pub trait RawSession: Send {
    /// The backend's name.
    fn backend(&self) -> &str;

    /// Where the workspace appears inside the sandbox (absolute path).
    fn workspace_mount(&self) -> &str;

    /// Reads a whole file.
    fn read_bytes(&self, path: &SessionPath) -> Result<Vec<u8>, SandboxError>;

    /// Creates or replaces a file, creating missing parent directories.
    fn write_bytes(&self, path: &SessionPath, bytes: &[u8]) -> Result<(), SandboxError>;

    /// The kind of the entry at `path` without following links; `None` if absent.
    fn lstat(&self, path: &SessionPath) -> Result<Option<EntryKind>, SandboxError>;

    /// Starts a program inside the session.
    fn spawn(&mut self, launch: &Launch) -> Result<Box<dyn RawProcess>, SandboxError>;

    /// Ends all compute; the session stays reattachable.
    fn stop(&mut self) -> Result<(), SandboxError>;

    /// Ends all compute and leaves nothing running; workspace files are preserved.
    fn shutdown(&mut self) -> Result<(), SandboxError>;

    /// Removes compute and disposable state (the writable layer, mounts); never the template.
    fn delete(&mut self) -> Result<(), SandboxError>;

    /// The session's writable layer as a host directory (an overlay upper directory), if the
    /// backend keeps one; capture reads it in O(changes). Readable after the worker is gone.
    fn change_layer(&self) -> Option<PathBuf>;

    /// The merged workspace view as a host directory, for capture from a full tree.
    fn workspace_view(&self) -> Option<PathBuf>;

    /// Backend-private state persisted in the session record so the session can be
    /// reattached (paths of its writable layer and so on).
    fn backend_state(&self) -> serde_json::Value;

    /// Where [`Launch::input_files`] appear inside the sandbox: an isolated input mount,
    /// read-only, outside the workspace and so excluded from capture by construction. `None`
    /// when the backend has none (then `file` prompt transport stays refused).
    fn input_dir(&self) -> Option<PathBuf>;
}

/// A running program.
pub trait RawProcess: Send {
    /// The standard input pipe, once, if [`StdinMode::Piped`].
    fn take_stdin(&mut self) -> Option<Box<dyn Write + Send>>;
    /// The standard output pipe, once.
    fn take_stdout(&mut self) -> Option<Box<dyn Read + Send>>;
    /// The standard error pipe, once.
    fn take_stderr(&mut self) -> Option<Box<dyn Read + Send>>;
    /// The listeners opened inside the sandbox's network namespace, once, in the order of
    /// [`Launch::loopback_ports`].
    fn take_listeners(&mut self) -> Vec<(u16, TcpListener)>;
    /// Non-blocking check for exit.
    fn try_wait(&mut self) -> Result<Option<ExitStatus>, SandboxError>;
    /// Blocks until the program's whole process tree is gone.
    fn wait(&mut self) -> Result<ExitStatus, SandboxError>;
    /// Kills the whole process tree (every descendant, however it detached).
    fn kill_tree(&mut self) -> Result<(), SandboxError>;
    /// Backend-specific usage report (JSON), available after exit.
    fn report(&self) -> Option<serde_json::Value>;
}
