//! # stockade-workspace
//!
//! Layer 2. Exact-SHA workspace templates: a canonical repository's commit, materialized once
//! into a content-keyed directory that every attempt on that commit reuses (the Linux backend
//! mounts it as an overlay's read-only lower layer; backends without overlay take a
//! [`Template::materialize_copy`]).
//!
//! What it does:
//! - accepts only a full hexadecimal commit id (no branch, tag, `HEAD` or abbreviation);
//! - reads the commit's tree straight from the canonical object database and writes the
//!   files with their modes, symlinks as git stores them (the target is data, never
//!   followed), and submodules (gitlinks) as empty directories, like `git` does for a
//!   submodule that is not initialized;
//! - gives the tree a git directory of its own ([`WORKSPACE_GIT_DIR`]): a shallow repository
//!   holding just the base commit, its trees and blobs in one pack per writer, `HEAD` detached
//!   at the commit, an index with the stat data of the files written (so `git status` is
//!   clean at once) and a configuration that names no program ([`WORKSPACE_GIT_CONFIG`]);
//! - builds everything in a temporary directory and renames it into place, so a crash never
//!   leaves a template that looks complete, and a second prewarm of the same key reuses it.
//!
//! What it does not do:
//! - run anything: no hook, filter driver (smudge/clean, `ident`, `text`/`eol` conversion),
//!   fsmonitor, `core.sshCommand` or credential helper the repository configures. It depends
//!   on gitoxide's plumbing crates only (not the `gix` facade), and `gix-command` is not in
//!   its dependency closure. Files hold the exact bytes of the blobs;
//! - write to the canonical repository: its object database is opened for reading, its
//!   config is not parsed (one line is scanned for the object format), and the workspace's
//!   git directory shares nothing with it;
//! - support SHA-256 repositories (refused by name), or follow the canonical repository's
//!   replace refs or grafts (the template holds the objects as stored);
//! - decide what a session may change, or capture it: that is `stockade-capture`, which reads
//!   the base tree from the canonical repository ([`Template::canonical_objects_dir`],
//!   [`Template::tree_id`]), never from the workspace.
#![forbid(unsafe_code)]

mod checkout;
mod copy;
mod gitdir;
mod pack;
mod repo;

use std::{
    io::ErrorKind,
    path::{Path, PathBuf},
};

use gix_hash::ObjectId;
use gix_object::{Find, bstr::BString};
use serde::{Deserialize, Serialize};

pub use gitdir::{WORKSPACE_GIT_CONFIG, WORKSPACE_GIT_DIR};
pub use repo::{CanonicalRepo, parse_full_object_id};

/// Version of the on-disk template layout; part of every key.
pub const TEMPLATE_FORMAT: u32 = 1;

/// Name of the metadata file beside `tree/` in a finished template.
const METADATA_FILE: &str = "template.json";

/// Why a template could not be prewarmed, opened or copied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The commit was not given as a full hexadecimal object id.
    #[error(
        "commit {given:?} is not a full object id: give all 40 lowercase hex digits of the commit (branch names, tags, HEAD and abbreviated ids are refused)"
    )]
    NotAFullObjectId {
        /// What was given (at most 128 characters of it).
        given: String,
    },
    /// The path is not a git repository.
    #[error(
        "{path}: not a git repository (no .git directory, .git file or bare repository layout)"
    )]
    NotARepository {
        /// The path given.
        path: PathBuf,
    },
    /// The repository (or the id given) uses an object format this crate does not handle.
    #[error("object format {format} is not supported: only sha1 repositories can be prewarmed")]
    UnsupportedObjectFormat {
        /// The format named.
        format: String,
    },
    /// The commit is not in the canonical repository.
    #[error("commit {commit} does not exist in repository {repo}")]
    CommitNotFound {
        /// The commit id.
        commit: String,
        /// The repository's git directory.
        repo: PathBuf,
    },
    /// The id names an object that is not a commit.
    #[error("object {id} is a {kind}, not a commit")]
    NotACommit {
        /// The id.
        id: String,
        /// Its object kind.
        kind: String,
    },
    /// An object the commit's tree refers to is missing (a broken or partial clone).
    #[error("object {id} for {path:?} is missing from the canonical repository")]
    MissingObject {
        /// The missing id.
        id: String,
        /// The path it is referenced from.
        path: BString,
    },
    /// An object has another kind than its tree entry says.
    #[error("object {id} for {path:?} is a {found}, expected a {expected}")]
    WrongObjectKind {
        /// The id.
        id: String,
        /// The path it is referenced from.
        path: BString,
        /// The kind the tree entry implies.
        expected: &'static str,
        /// The kind found.
        found: String,
    },
    /// A tree entry's name or content is one git refuses to check out, or could escape the root.
    #[error("refusing tree entry {path:?}: {reason}")]
    UnsafePath {
        /// The path inside the tree.
        path: BString,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A tree entry has a mode that is neither a file, an executable, a symlink, a tree nor a
    /// gitlink.
    #[error("tree entry {path:?} has unsupported mode {mode:o}")]
    UnsupportedMode {
        /// The path inside the tree.
        path: BString,
        /// The raw mode.
        mode: u32,
    },
    /// Reading or decoding an object failed.
    #[error("object database error for {id}: {message}")]
    ObjectDatabase {
        /// The object id involved, if any.
        id: String,
        /// gitoxide's message.
        message: String,
    },
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the workspace's index failed.
    #[error("writing the workspace index failed: {message}")]
    Index {
        /// gitoxide's message.
        message: String,
    },
    /// A finished-looking template does not match what its key promises.
    #[error("template {path} is corrupt: {reason} (remove it to prewarm again)")]
    CorruptTemplate {
        /// The template directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The destination of a copy already exists.
    #[error("destination {path} already exists")]
    DestinationExists {
        /// The destination.
        path: PathBuf,
    },
    /// A worker thread panicked (a bug); nothing was published.
    #[error("a file-writing worker thread panicked")]
    WorkerPanicked,
}

/// The content key of a template: blake3 over the layout version, the canonical repository's
/// identity (its canonical common git directory) and the commit id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TemplateKey(String);

impl TemplateKey {
    /// Compute the key for `repo` at `commit`.
    pub fn compute(repo: &CanonicalRepo, commit: &ObjectId) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"stockade-workspace template\0");
        hasher.update(&TEMPLATE_FORMAT.to_be_bytes());
        let identity = repo.common_dir().as_os_str().as_bytes();
        hasher.update(&(identity.len() as u64).to_be_bytes());
        hasher.update(identity);
        hasher.update(b"\0");
        hasher.update(commit.to_hex().to_string().as_bytes());
        Self(hasher.finalize().to_hex().to_string())
    }

    /// The key as 64 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TemplateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Counts describing a materialized tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeCounts {
    /// Regular files (executable or not).
    pub files: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Directories (submodule placeholders included).
    pub dirs: u64,
    /// Submodules (gitlinks), each an empty directory.
    pub gitlinks: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    format: u32,
    key: TemplateKey,
    commit: String,
    tree: String,
    canonical_git_dir: PathBuf,
    canonical_objects_dir: PathBuf,
    counts: TreeCounts,
}

/// A prewarmed exact-SHA template: `root()/tree` is the workspace (with its own `.git`).
#[derive(Debug, Clone)]
pub struct Template {
    root: PathBuf,
    tree_dir: PathBuf,
    key: TemplateKey,
    commit: ObjectId,
    tree: ObjectId,
    canonical_git_dir: PathBuf,
    canonical_objects_dir: PathBuf,
    counts: TreeCounts,
    reused: bool,
}

/// Removes a temporary build directory unless disarmed.
struct TmpGuard(Option<PathBuf>);

impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

pub(crate) fn io_err<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> WorkspaceError + 'a {
    move |source| WorkspaceError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn worker_threads() -> usize {
    std::thread::available_parallelism()
        .map(std::num::NonZero::get)
        .unwrap_or(1)
        .clamp(1, 8)
}

impl Template {
    /// Prewarm (or reuse) the template of `repo` at `commit` under `dest_root`.
    ///
    /// `commit` must be a full 40-digit lowercase hex id of a commit in `repo`. The template is
    /// written to `dest_root/<key>/` atomically; if it already exists it is verified and reused.
    /// Temporary directories left by a crashed prewarm (of a process that no longer exists) are
    /// removed on the way.
    pub fn prewarm(repo: &Path, commit: &str, dest_root: &Path) -> Result<Self, WorkspaceError> {
        let commit_id = parse_full_object_id(commit)?;
        let canonical = CanonicalRepo::locate(repo)?;
        let format = canonical.object_format();
        if format != "sha1" {
            return Err(WorkspaceError::UnsupportedObjectFormat { format });
        }
        let key = TemplateKey::compute(&canonical, &commit_id);
        let final_dir = dest_root.join(key.as_str());
        if final_dir.exists() {
            return Self::open_existing(&final_dir, &key, commit_id);
        }

        let odb = canonical.open_objects()?;
        let mut buf = Vec::new();
        let commit_obj = odb
            .try_find(&commit_id, &mut buf)
            .map_err(|e| WorkspaceError::ObjectDatabase {
                id: commit_id.to_string(),
                message: e.to_string(),
            })?
            .ok_or_else(|| WorkspaceError::CommitNotFound {
                commit: commit_id.to_string(),
                repo: canonical.git_dir().to_path_buf(),
            })?;
        if commit_obj.kind != gix_object::Kind::Commit {
            return Err(WorkspaceError::NotACommit {
                id: commit_id.to_string(),
                kind: commit_obj.kind.to_string(),
            });
        }
        let commit_data = commit_obj.data.to_vec();
        let parsed = gix_object::CommitRef::from_bytes(&commit_data, gix_hash::Kind::Sha1)
            .map_err(|e| WorkspaceError::ObjectDatabase {
                id: commit_id.to_string(),
                message: format!("malformed commit: {e}"),
            })?;
        let tree_id = parsed.tree();
        let has_parents = parsed.parents().next().is_some();

        std::fs::create_dir_all(dest_root).map_err(io_err("create directory", dest_root))?;
        sweep_stale(dest_root);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tmp = dest_root.join(format!(".tmp-{key}-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(io_err("create directory", &tmp))?;
        let mut guard = TmpGuard(Some(tmp.clone()));
        let tree_dir = tmp.join("tree");
        std::fs::create_dir(&tree_dir).map_err(io_err("create directory", &tree_dir))?;

        let walk = checkout::walk(&odb, tree_id)?;
        let git_dir = tree_dir.join(WORKSPACE_GIT_DIR);
        let pack_dir = gitdir::create_skeleton(&git_dir, commit_id, has_parents)?;
        checkout::create_dirs(&tree_dir, &walk)?;

        let threads = worker_threads();
        let chunk = walk.files.len().div_ceil(threads).max(1);
        let written =
            std::thread::scope(|scope| -> Result<Vec<checkout::Written>, WorkspaceError> {
                let handles: Vec<_> = walk
                    .files
                    .chunks(chunk)
                    .enumerate()
                    .map(|(worker, part)| {
                        let odb = odb.clone();
                        let tree_dir = &tree_dir;
                        let pack_dir = &pack_dir;
                        scope.spawn(move || {
                            checkout::write_files(
                                &odb,
                                tree_dir,
                                pack_dir,
                                worker,
                                part,
                                worker * chunk,
                            )
                        })
                    })
                    .collect();
                // Meanwhile, pack the commit and its trees.
                let trees_result = (|| {
                    let count = walk.trees.len() as u32 + 1;
                    let mut pack = pack::PackWriter::create(&pack_dir, "trees", count)?;
                    pack.add(commit_id, gix_object::Kind::Commit, &commit_data)?;
                    for (id, data) in &walk.trees {
                        pack.add(*id, gix_object::Kind::Tree, data)?;
                    }
                    pack.finish()
                })();
                let mut written = Vec::with_capacity(walk.files.len());
                let mut first_err = trees_result.err();
                for handle in handles {
                    match handle.join() {
                        Ok(Ok(part)) => written.extend(part),
                        Ok(Err(e)) => {
                            first_err.get_or_insert(e);
                        }
                        Err(_) => {
                            first_err.get_or_insert(WorkspaceError::WorkerPanicked);
                        }
                    }
                }
                match first_err {
                    Some(e) => Err(e),
                    None => Ok(written),
                }
            })?;

        let mut counts = TreeCounts {
            dirs: walk.dirs.len() as u64,
            gitlinks: walk.gitlinks.len() as u64,
            ..TreeCounts::default()
        };
        let files = &walk.files;
        let index_entries = written
            .into_iter()
            .map(|w| {
                let entry = &files[w.index];
                let mode = match entry.kind {
                    checkout::Kind::File => gix_index::entry::Mode::FILE,
                    checkout::Kind::Executable => gix_index::entry::Mode::FILE_EXECUTABLE,
                    checkout::Kind::Symlink => gix_index::entry::Mode::SYMLINK,
                };
                (entry.path.clone(), entry.id, mode, w.stat)
            })
            .chain(walk.gitlinks.iter().map(|(path, id)| {
                (
                    path.clone(),
                    *id,
                    gix_index::entry::Mode::COMMIT,
                    gix_index::entry::Stat::default(),
                )
            }));
        for entry in files {
            match entry.kind {
                checkout::Kind::Symlink => counts.symlinks += 1,
                _ => counts.files += 1,
            }
        }
        gitdir::write_index(&git_dir, index_entries)?;

        let metadata = Metadata {
            format: TEMPLATE_FORMAT,
            key: key.clone(),
            commit: commit_id.to_string(),
            tree: tree_id.to_string(),
            canonical_git_dir: canonical.git_dir().to_path_buf(),
            canonical_objects_dir: canonical.objects_dir().to_path_buf(),
            counts,
        };
        let meta_path = tmp.join(METADATA_FILE);
        let json = serde_json::to_vec_pretty(&metadata).map_err(|e| WorkspaceError::Io {
            op: "serialize metadata",
            path: meta_path.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&meta_path, json).map_err(io_err("write", &meta_path))?;

        // Durability before publication: everything written must be on disk before the
        // rename makes the template look complete.
        let tmp_handle = std::fs::File::open(&tmp).map_err(io_err("open", &tmp))?;
        rustix::fs::syncfs(&tmp_handle).map_err(|e| WorkspaceError::Io {
            op: "syncfs",
            path: tmp.clone(),
            source: e.into(),
        })?;
        drop(tmp_handle);

        match std::fs::rename(&tmp, &final_dir) {
            Ok(()) => {
                guard.0 = None;
                if let Ok(root) = std::fs::File::open(dest_root) {
                    let _ = root.sync_all();
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::DirectoryNotEmpty | ErrorKind::AlreadyExists
                ) =>
            {
                // Another prewarm of the same key won the race: use its result.
                drop(guard);
                return Self::open_existing(&final_dir, &key, commit_id);
            }
            Err(source) => {
                return Err(WorkspaceError::Io {
                    op: "publish template",
                    path: final_dir,
                    source,
                });
            }
        }
        Ok(Self::from_metadata(final_dir, metadata, false))
    }

    fn from_metadata(root: PathBuf, metadata: Metadata, reused: bool) -> Self {
        Self {
            tree_dir: root.join("tree"),
            root,
            key: metadata.key,
            commit: ObjectId::from_hex(metadata.commit.as_bytes())
                .unwrap_or_else(|_| ObjectId::null(gix_hash::Kind::Sha1)),
            tree: ObjectId::from_hex(metadata.tree.as_bytes())
                .unwrap_or_else(|_| ObjectId::null(gix_hash::Kind::Sha1)),
            canonical_git_dir: metadata.canonical_git_dir,
            canonical_objects_dir: metadata.canonical_objects_dir,
            counts: metadata.counts,
            reused,
        }
    }

    fn open_existing(
        dir: &Path,
        key: &TemplateKey,
        commit: ObjectId,
    ) -> Result<Self, WorkspaceError> {
        let corrupt = |reason: String| WorkspaceError::CorruptTemplate {
            path: dir.to_path_buf(),
            reason,
        };
        let meta_path = dir.join(METADATA_FILE);
        let bytes =
            std::fs::read(&meta_path).map_err(|e| corrupt(format!("{METADATA_FILE}: {e}")))?;
        let metadata: Metadata =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("{METADATA_FILE}: {e}")))?;
        if metadata.format != TEMPLATE_FORMAT {
            return Err(corrupt(format!(
                "layout format {} is not {TEMPLATE_FORMAT}",
                metadata.format
            )));
        }
        if &metadata.key != key
            || ObjectId::from_hex(metadata.commit.as_bytes()).ok() != Some(commit)
        {
            return Err(corrupt(
                "its metadata names another key or commit".to_owned(),
            ));
        }
        if ObjectId::from_hex(metadata.tree.as_bytes()).is_err() {
            return Err(corrupt("its metadata has no valid tree id".to_owned()));
        }
        if !dir
            .join("tree")
            .join(WORKSPACE_GIT_DIR)
            .join("index")
            .is_file()
        {
            return Err(corrupt("tree/.git/index is missing".to_owned()));
        }
        Ok(Self::from_metadata(dir.to_path_buf(), metadata, true))
    }

    /// The workspace directory: the commit's files plus the workspace's own `.git`.
    /// This is the overlay's lower layer; treat it as read-only.
    pub fn tree_dir(&self) -> &Path {
        &self.tree_dir
    }

    /// The template directory (`dest_root/<key>`), holding `tree/` and `template.json`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The commit the template holds.
    pub fn commit(&self) -> &ObjectId {
        &self.commit
    }

    /// The commit's root tree id: the base tree capture compares against, to be read from
    /// [`Template::canonical_objects_dir`], never from the workspace.
    pub fn tree_id(&self) -> &ObjectId {
        &self.tree
    }

    /// The content key.
    pub fn key(&self) -> &TemplateKey {
        &self.key
    }

    /// The canonical repository's git directory the template was built from.
    pub fn canonical_git_dir(&self) -> &Path {
        &self.canonical_git_dir
    }

    /// The canonical repository's object database: where capture reads the base tree.
    pub fn canonical_objects_dir(&self) -> &Path {
        &self.canonical_objects_dir
    }

    /// What the tree holds.
    pub fn counts(&self) -> TreeCounts {
        self.counts
    }

    /// Whether this call reused a template an earlier prewarm had published.
    pub fn was_reused(&self) -> bool {
        self.reused
    }

    /// Copy the workspace (files and `.git`) to `dest`, which must not exist: the fallback for
    /// backends without an overlay filesystem. Files are reflinked where the filesystem
    /// supports it and copied otherwise; modes, symlinks and modification times are kept, so
    /// `git status` in the copy is clean. Built beside `dest` and renamed into place.
    pub fn materialize_copy(&self, dest: &Path) -> Result<(), WorkspaceError> {
        if std::fs::symlink_metadata(dest).is_ok() {
            return Err(WorkspaceError::DestinationExists {
                path: dest.to_path_buf(),
            });
        }
        let name = dest.file_name().ok_or_else(|| WorkspaceError::Io {
            op: "materialize copy",
            path: dest.to_path_buf(),
            source: std::io::Error::new(ErrorKind::InvalidInput, "destination has no file name"),
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".stockade-tmp-{}", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        let guard = TmpGuard(Some(tmp.clone()));
        copy::copy_tree(&self.tree_dir, &tmp, worker_threads())?;
        std::fs::rename(&tmp, dest).map_err(|source| {
            if matches!(
                source.kind(),
                ErrorKind::DirectoryNotEmpty | ErrorKind::AlreadyExists
            ) {
                WorkspaceError::DestinationExists {
                    path: dest.to_path_buf(),
                }
            } else {
                WorkspaceError::Io {
                    op: "publish copy",
                    path: dest.to_path_buf(),
                    source,
                }
            }
        })?;
        let mut guard = guard;
        guard.0 = None;
        Ok(())
    }
}

/// Remove `.tmp-*` build directories whose owning process no longer exists.
fn sweep_stale(dest_root: &Path) {
    let Ok(entries) = std::fs::read_dir(dest_root) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(".tmp-") else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(_key), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid == me || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

#[cfg(test)]
mod tests;
