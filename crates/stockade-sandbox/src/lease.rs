//! Exclusive session leases and persisted session records.
//!
//! A lease is a file created with `O_EXCL` under the store's directory. It is released when
//! the [`Lease`] is dropped. If its holder crashed, the file stays: it is removed **only** by
//! [`LeaseStore::break_stale`], which demands an [`OperatorVerification`] saying a person or
//! supervisor verified that nothing of the session is running. There is no automatic
//! staleness timeout: a timeout would let two supervisors drive one sandbox.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::session::SessionId;
use crate::template::TemplateKey;

/// Who holds a lease, as written into the lease file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseHolder {
    /// Process id of the supervisor holding the lease.
    pub pid: u32,
    /// Free-form description of the holder (host name, tool).
    pub holder: String,
}

/// Why a lease could not be taken or broken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Another holder has the lease (or crashed holding it).
    #[error("session {session} is leased by pid {} ({}); if that holder crashed, verify nothing of the session runs and break the lease explicitly", holder.pid, holder.holder)]
    Held {
        /// The session.
        session: String,
        /// The recorded holder.
        holder: LeaseHolder,
    },
    /// The lease file exists but cannot be read or parsed.
    #[error("session {session}: lease file {path} is unreadable: {reason}")]
    Corrupt {
        /// The session.
        session: String,
        /// The lease file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// There is no lease to break.
    #[error("session {0} has no lease to break")]
    NotHeld(String),
    /// No record exists for the session.
    #[error("no session record for {0}")]
    NoRecord(String),
    /// File-system failure on the lease store.
    #[error("lease store {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// An operator's explicit statement, required to remove a lease left by a crashed holder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperatorVerification {
    /// The operator verified that no process of the session is running anywhere.
    VerifiedNothingRunning {
        /// Who verified it (recorded in the audit file).
        operator: String,
    },
}

/// What is persisted about a session so it can be reattached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    /// The session.
    pub session: SessionId,
    /// The backend that created it.
    pub backend: String,
    /// The template it was created from.
    pub template: TemplateKey,
    /// The id of the policy it enforces.
    pub policy_id: String,
    /// The policy revision in force.
    pub revision: u64,
    /// Backend-private state needed to reattach (paths of its writable layer and so on).
    pub backend_state: serde_json::Value,
}

/// A directory of leases and session records.
#[derive(Debug, Clone)]
pub struct LeaseStore {
    dir: PathBuf,
}

/// An exclusive lease on one session; released on drop.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    session: SessionId,
}

impl Lease {
    /// The leased session.
    pub fn session(&self) -> &SessionId {
        &self.session
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

impl LeaseStore {
    /// Opens (creating if needed) a lease store in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<LeaseStore, LeaseError> {
        let dir = dir.into();
        for sub in ["leases", "records", "audit"] {
            let p = dir.join(sub);
            fs::create_dir_all(&p).map_err(|source| LeaseError::Io {
                path: p.clone(),
                source,
            })?;
        }
        Ok(LeaseStore { dir })
    }

    fn lease_path(&self, session: &SessionId) -> PathBuf {
        self.dir
            .join("leases")
            .join(format!("{}.lease", session.as_str()))
    }

    fn record_path(&self, session: &SessionId) -> PathBuf {
        self.dir
            .join("records")
            .join(format!("{}.json", session.as_str()))
    }

    /// Takes the exclusive lease on `session`, failing if anyone holds it.
    pub fn acquire(&self, session: &SessionId, holder: LeaseHolder) -> Result<Lease, LeaseError> {
        let path = self.lease_path(session);
        let body = serde_json::to_vec(&holder).map_err(|e| LeaseError::Corrupt {
            session: session.to_string(),
            path: path.clone(),
            reason: e.to_string(),
        })?;
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                f.write_all(&body)
                    .and_then(|()| f.sync_all())
                    .map_err(|source| LeaseError::Io {
                        path: path.clone(),
                        source,
                    })?;
                Ok(Lease {
                    path,
                    session: session.clone(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(match self.holder(session)? {
                    Some(holder) => LeaseError::Held {
                        session: session.to_string(),
                        holder,
                    },
                    None => LeaseError::NotHeld(session.to_string()),
                })
            }
            Err(source) => Err(LeaseError::Io { path, source }),
        }
    }

    /// The recorded holder of `session`'s lease, if any.
    pub fn holder(&self, session: &SessionId) -> Result<Option<LeaseHolder>, LeaseError> {
        let path = self.lease_path(session);
        match fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| LeaseError::Corrupt {
                        session: session.to_string(),
                        path,
                        reason: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LeaseError::Io { path, source }),
        }
    }

    /// Removes a lease left by a crashed holder. Only an explicit operator verification that
    /// nothing of the session is running allows it; the act is appended to the audit log.
    pub fn break_stale(
        &self,
        session: &SessionId,
        verification: OperatorVerification,
    ) -> Result<LeaseHolder, LeaseError> {
        let path = self.lease_path(session);
        let holder = match self.holder(session) {
            Ok(Some(h)) => h,
            Ok(None) => return Err(LeaseError::NotHeld(session.to_string())),
            // A lease file we cannot parse is still a lease: the operator may break it.
            Err(LeaseError::Corrupt { .. }) => LeaseHolder {
                pid: 0,
                holder: "<unreadable lease file>".into(),
            },
            Err(e) => return Err(e),
        };
        let OperatorVerification::VerifiedNothingRunning { operator } = verification;
        let audit = self.dir.join("audit").join("broken-leases.log");
        let line = format!(
            "session={} holder_pid={} holder={:?} broken_by={:?} verification=nothing-running\n",
            session.as_str(),
            holder.pid,
            holder.holder,
            operator
        );
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&audit)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|source| LeaseError::Io {
                path: audit.clone(),
                source,
            })?;
        fs::remove_file(&path).map_err(|source| LeaseError::Io { path, source })?;
        Ok(holder)
    }

    /// Persists a session record atomically (write to a temporary file, then rename).
    pub fn save_record(&self, record: &SessionRecord) -> Result<(), LeaseError> {
        let path = self.record_path(&record.session);
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| LeaseError::Corrupt {
            session: record.session.to_string(),
            path: path.clone(),
            reason: e.to_string(),
        })?;
        write_synced(&tmp, &bytes).map_err(|source| LeaseError::Io {
            path: tmp.clone(),
            source,
        })?;
        fs::rename(&tmp, &path).map_err(|source| LeaseError::Io { path, source })
    }

    /// Loads a session record.
    pub fn load_record(&self, session: &SessionId) -> Result<SessionRecord, LeaseError> {
        let path = self.record_path(session);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| LeaseError::Corrupt {
                session: session.to_string(),
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(LeaseError::NoRecord(session.to_string()))
            }
            Err(source) => Err(LeaseError::Io { path, source }),
        }
    }

    /// Removes a session record (after `delete`).
    pub fn remove_record(&self, session: &SessionId) -> Result<(), LeaseError> {
        let path = self.record_path(session);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(LeaseError::Io { path, source }),
        }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32) -> LeaseHolder {
        LeaseHolder {
            pid,
            holder: "test".into(),
        }
    }

    #[test]
    fn lease_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let store = LeaseStore::open(dir.path()).unwrap();
        let s = SessionId::new("s1").unwrap();
        let lease = store.acquire(&s, holder(1)).unwrap();
        assert!(
            matches!(store.acquire(&s, holder(2)), Err(LeaseError::Held { holder, .. }) if holder.pid == 1)
        );
        drop(lease);
        let _again = store.acquire(&s, holder(2)).unwrap();
    }

    #[test]
    fn crashed_holder_needs_operator_verification() {
        let dir = tempfile::tempdir().unwrap();
        let store = LeaseStore::open(dir.path()).unwrap();
        let s = SessionId::new("s2").unwrap();
        let lease = store.acquire(&s, holder(7)).unwrap();
        std::mem::forget(lease); // the holder "crashed": nothing released the file
        assert!(matches!(
            store.acquire(&s, holder(8)),
            Err(LeaseError::Held { .. })
        ));
        let broken = store
            .break_stale(
                &s,
                OperatorVerification::VerifiedNothingRunning {
                    operator: "alice".into(),
                },
            )
            .unwrap();
        assert_eq!(broken.pid, 7);
        let log = fs::read_to_string(dir.path().join("audit/broken-leases.log")).unwrap();
        assert!(log.contains("broken_by=\"alice\""), "{log}");
        let _new = store.acquire(&s, holder(8)).unwrap();
    }

    #[test]
    fn breaking_an_absent_lease_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = LeaseStore::open(dir.path()).unwrap();
        let s = SessionId::new("s3").unwrap();
        assert!(matches!(
            store.break_stale(
                &s,
                OperatorVerification::VerifiedNothingRunning {
                    operator: "x".into()
                }
            ),
            Err(LeaseError::NotHeld(_))
        ));
    }
}
