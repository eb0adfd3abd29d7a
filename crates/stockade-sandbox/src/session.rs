//! The public session API, built once on top of [`RawSession`].

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::SandboxError;
use crate::lease::{Lease, LeaseHolder, LeaseStore, SessionRecord};
use crate::path::{PathError, SessionPath};
use crate::raw::{Backend, EntryKind, Launch, RawProcess, RawSession, StdinMode};
use crate::run::{self, RunOptions, RunOutput};
use crate::template::Template;

/// A session's identifier: `[A-Za-z0-9_-]{1,64}`, safe as a file name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    /// Validates an identifier.
    pub fn new(id: impl Into<String>) -> Result<SessionId, SandboxError> {
        let id = id.into();
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(SessionId(id))
        } else {
            Err(SandboxError::Backend {
                backend: "session".into(),
                message: format!("invalid session id {id:?}: use 1 to 64 of [A-Za-z0-9_-]"),
            })
        }
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SessionId {
    type Error = SandboxError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        SessionId::new(s)
    }
}

impl From<SessionId> for String {
    fn from(s: SessionId) -> String {
        s.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A policy revision. Launches prepared under an older revision are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Revision(pub u64);

/// Where a session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Compute may run.
    Running,
    /// Compute ended; reattachable.
    Stopped,
    /// Compute ended and nothing is left running; files preserved.
    ShutDown,
    /// Compute and disposable state removed.
    Deleted,
}

impl SessionState {
    fn name(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Stopped => "stopped",
            SessionState::ShutDown => "shut down",
            SessionState::Deleted => "deleted",
        }
    }
}

/// A launch prepared under a given policy revision; see [`Session::launch`].
#[derive(Debug)]
pub struct PreparedLaunch {
    launch: Launch,
    revision: Revision,
}

impl PreparedLaunch {
    /// The revision this launch was prepared under.
    pub fn revision(&self) -> Revision {
        self.revision
    }
}

/// A live session: the public API every backend shares.
pub struct Session {
    raw: Box<dyn RawSession>,
    id: SessionId,
    template: Template,
    policy_id: String,
    revision: Revision,
    state: SessionState,
    store: LeaseStore,
    lease: Option<Lease>,
    backend_state: serde_json::Value,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("backend", &self.raw.backend())
            .field("template", self.template.key())
            .field("policy_id", &self.policy_id)
            .field("revision", &self.revision)
            .field("state", &self.state)
            .finish()
    }
}

impl Session {
    /// Creates a session on `backend` under an exclusive lease in `store`.
    ///
    /// Refuses a template made by another backend and an admission granted for another policy.
    pub fn create(
        backend: &dyn Backend,
        store: LeaseStore,
        id: SessionId,
        holder: LeaseHolder,
        template: &Template,
        policy: &stockade_policy::SandboxPolicy,
        admission: stockade_capabilities::Admission,
    ) -> Result<Session, SandboxError> {
        if template.backend() != backend.name() {
            return Err(SandboxError::ForeignTemplate {
                key: template.key().to_string(),
                template_backend: template.backend().to_owned(),
                backend: backend.name().to_owned(),
            });
        }
        // The witness must have been made by `admit` for exactly this policy (an admission from
        // `admit_protections` names no policy and so covers none) and from this backend's
        // attestation.
        if !admission.is_for_policy(policy) {
            return Err(SandboxError::AdmissionMismatch {
                admitted: admission.policy_id().unwrap_or("<no policy>").to_owned(),
                offered: policy.id().to_owned(),
            });
        }
        if !admission.is_for_backend(backend.name()) {
            return Err(SandboxError::ForeignAdmission {
                admitted_backend: admission.backend().name.clone(),
                backend: backend.name().to_owned(),
            });
        }
        let lease = store.acquire(&id, holder)?;
        let raw = backend.create(template, policy, admission)?;
        let backend_state = raw.backend_state();
        let session = Session {
            raw,
            id,
            template: template.clone(),
            policy_id: policy.id().to_owned(),
            revision: Revision(0),
            state: SessionState::Running,
            store,
            lease: Some(lease),
            backend_state,
        };
        session.store.save_record(&session.record())?;
        Ok(session)
    }

    /// Reattaches a stopped session: same backend, same template, and the exclusive lease.
    pub fn reattach(
        backend: &dyn Backend,
        store: LeaseStore,
        id: &SessionId,
        holder: LeaseHolder,
        template: &Template,
    ) -> Result<Session, SandboxError> {
        let record = store.load_record(id)?;
        if record.backend != backend.name() {
            return Err(SandboxError::ReattachMismatch(format!(
                "session {id} was created by backend `{}`, not `{}`",
                record.backend,
                backend.name()
            )));
        }
        if &record.template != template.key() {
            return Err(SandboxError::ReattachMismatch(format!(
                "session {id} was created from template {}, not {}",
                record.template,
                template.key()
            )));
        }
        let lease = store.acquire(id, holder)?;
        let raw = backend.reattach(template, &record)?;
        Ok(Session {
            raw,
            id: id.clone(),
            template: template.clone(),
            policy_id: record.policy_id.clone(),
            revision: Revision(record.revision),
            state: SessionState::Running,
            store,
            lease: Some(lease),
            backend_state: record.backend_state,
        })
        .inspect(|s: &Session| {
            let _ = s.store.save_record(&s.record());
        })
    }

    fn record(&self) -> SessionRecord {
        SessionRecord {
            session: self.id.clone(),
            backend: self.raw.backend().to_owned(),
            template: self.template.key().clone(),
            policy_id: self.policy_id.clone(),
            revision: self.revision.0,
            backend_state: self.backend_state.clone(),
        }
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The lifecycle state.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The current policy revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The id of the policy this session enforces.
    pub fn policy_id(&self) -> &str {
        &self.policy_id
    }

    /// The template the session was created from.
    pub fn template(&self) -> &Template {
        &self.template
    }

    /// Advances the policy revision (for example after the policy was tightened); launches
    /// prepared before this call are refused.
    pub fn advance_revision(&mut self) -> Result<Revision, SandboxError> {
        self.revision = Revision(self.revision.0 + 1);
        self.store.save_record(&self.record())?;
        Ok(self.revision)
    }

    fn require(&self, state: SessionState, operation: &'static str) -> Result<(), SandboxError> {
        if self.state == state {
            Ok(())
        } else {
            Err(SandboxError::WrongState {
                state: self.state.name(),
                operation,
            })
        }
    }

    /// Resolves `path` to a location inside the session: lexically normalized, and no
    /// component may be a symbolic link (checked on the backend).
    pub fn resolve(&self, path: &str) -> Result<SessionPath, SandboxError> {
        let p = SessionPath::parse(path, Some(self.raw.workspace_mount()))?;
        for prefix in p.parents() {
            match self.raw.lstat(&prefix)? {
                Some(EntryKind::Symlink) => {
                    return Err(PathError::Symlink {
                        path: path.to_owned(),
                        link: prefix.as_relative(),
                    }
                    .into());
                }
                Some(EntryKind::Directory) | None => {}
                Some(EntryKind::File | EntryKind::Other) => {
                    return Err(PathError::NotADirectory {
                        path: path.to_owned(),
                        component: prefix.as_relative(),
                    }
                    .into());
                }
            }
        }
        if self.raw.lstat(&p)? == Some(EntryKind::Symlink) {
            return Err(PathError::Symlink {
                path: path.to_owned(),
                link: p.as_relative(),
            }
            .into());
        }
        Ok(p)
    }

    /// Reads a file's bytes.
    pub fn read_bytes(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let p = self.resolve(path)?;
        self.raw.read_bytes(&p)
    }

    /// Reads a file as UTF-8 text.
    pub fn read_text(&self, path: &str) -> Result<String, SandboxError> {
        let p = self.resolve(path)?;
        String::from_utf8(self.raw.read_bytes(&p)?).map_err(|_| SandboxError::NotText {
            path: p.as_relative(),
        })
    }

    /// Writes a file (creating parent directories).
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), SandboxError> {
        self.require(SessionState::Running, "write")?;
        let p = self.resolve(path)?;
        self.raw.write_bytes(&p, bytes)
    }

    /// Prepares a launch under the current revision.
    pub fn prepare_launch(&self, launch: Launch) -> PreparedLaunch {
        PreparedLaunch {
            launch,
            revision: self.revision,
        }
    }

    /// Starts a prepared launch; refused if the policy revision advanced since it was prepared.
    pub fn launch(
        &mut self,
        prepared: PreparedLaunch,
    ) -> Result<Box<dyn RawProcess>, SandboxError> {
        self.require(SessionState::Running, "launch")?;
        if prepared.revision != self.revision {
            return Err(SandboxError::StaleRevision {
                prepared: prepared.revision.0,
                current: self.revision.0,
            });
        }
        self.raw.spawn(&prepared.launch)
    }

    /// Runs a command to completion with a deadline and bounded output.
    pub fn run(
        &mut self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        options: &RunOptions,
    ) -> Result<RunOutput, SandboxError> {
        let launch = Launch {
            argv,
            env,
            cwd: None,
            stdin: if options.stdin.is_some() {
                StdinMode::Piped
            } else {
                StdinMode::Null
            },
            loopback_ports: Vec::new(),
            wall_time: Some(options.deadline),
            input_files: std::collections::BTreeMap::new(),
        };
        let prepared = self.prepare_launch(launch);
        let process = self.launch(prepared)?;
        run::drive(process, options)
    }

    /// Ends compute; the session stays reattachable (the lease is released, the record kept).
    pub fn stop(mut self) -> Result<SessionRecord, SandboxError> {
        self.require(SessionState::Running, "stop")?;
        self.raw.stop()?;
        self.state = SessionState::Stopped;
        let record = self.record();
        self.store.save_record(&record)?;
        self.lease.take();
        Ok(record)
    }

    /// Ends compute and leaves nothing running; workspace files are preserved.
    pub fn shutdown(&mut self) -> Result<(), SandboxError> {
        if matches!(self.state, SessionState::ShutDown | SessionState::Deleted) {
            return Ok(());
        }
        self.raw.shutdown()?;
        self.state = SessionState::ShutDown;
        Ok(())
    }

    /// Removes compute and disposable state; the template is never touched.
    pub fn delete(mut self) -> Result<(), SandboxError> {
        self.shutdown()?;
        self.raw.delete()?;
        self.state = SessionState::Deleted;
        self.store.remove_record(&self.id)?;
        self.lease.take();
        Ok(())
    }

    /// The writable layer as a host directory, for capture after the worker is gone.
    pub fn change_layer(&self) -> Option<std::path::PathBuf> {
        self.raw.change_layer()
    }

    /// The merged workspace view as a host directory.
    pub fn workspace_view(&self) -> Option<std::path::PathBuf> {
        self.raw.workspace_view()
    }

    /// Where launch input files appear inside the sandbox (the isolated input mount), if the
    /// backend has one.
    pub fn input_dir(&self) -> Option<std::path::PathBuf> {
        self.raw.input_dir()
    }
}

impl Drop for Session {
    /// A session dropped while running is shut down: nothing of it may keep running.
    fn drop(&mut self) {
        if self.state == SessionState::Running {
            let _ = self.raw.shutdown();
        }
    }
}
