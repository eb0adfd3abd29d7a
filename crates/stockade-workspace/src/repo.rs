//! Locating the canonical repository and opening its object database, read-only.
//!
//! Nothing here reads the canonical repository's configuration beyond the one line that names
//! its object format: no include paths, no hooks, no drivers, no credential helpers.

use std::path::{Path, PathBuf};

use gix_hash::ObjectId;

use crate::WorkspaceError;

/// The canonical repository a template is built from, located without running anything.
#[derive(Debug, Clone)]
pub struct CanonicalRepo {
    /// The repository's git directory (`.git`, or the bare repository itself).
    git_dir: PathBuf,
    /// The common directory (differs from `git_dir` for linked worktrees).
    common_dir: PathBuf,
    /// `common_dir/objects`.
    objects_dir: PathBuf,
}

impl CanonicalRepo {
    /// Locate the repository at `path`: a work tree with a `.git` directory or `.git` file,
    /// or a bare repository. The path is canonicalized; nothing is written.
    pub fn locate(path: &Path) -> Result<Self, WorkspaceError> {
        let not_a_repo = || WorkspaceError::NotARepository {
            path: path.to_path_buf(),
        };
        let root = std::fs::canonicalize(path).map_err(|_| not_a_repo())?;
        let dot_git = root.join(".git");
        let git_dir = match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => dot_git,
            Ok(meta) if meta.is_file() => {
                let text = std::fs::read_to_string(&dot_git).map_err(|_| not_a_repo())?;
                let target = text
                    .strip_prefix("gitdir:")
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(not_a_repo)?;
                let target = root.join(target);
                std::fs::canonicalize(target).map_err(|_| not_a_repo())?
            }
            _ if root.join("HEAD").is_file() && root.join("objects").is_dir() => root.clone(),
            _ => return Err(not_a_repo()),
        };
        if !git_dir.join("HEAD").is_file() {
            return Err(not_a_repo());
        }
        let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(text) => {
                std::fs::canonicalize(git_dir.join(text.trim())).map_err(|_| not_a_repo())?
            }
            Err(_) => git_dir.clone(),
        };
        let objects_dir = common_dir.join("objects");
        if !objects_dir.is_dir() {
            return Err(not_a_repo());
        }
        Ok(Self {
            git_dir,
            common_dir,
            objects_dir,
        })
    }

    /// The repository's git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The directory holding the shared `objects`, `refs` and `config`.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The object database directory (`<common dir>/objects`).
    pub fn objects_dir(&self) -> &Path {
        &self.objects_dir
    }

    /// The repository's object format as its config declares it (`extensions.objectFormat`),
    /// `sha1` when absent. Only that one key is read, with a plain line scan.
    pub fn object_format(&self) -> String {
        let Ok(config) = std::fs::read_to_string(self.common_dir.join("config")) else {
            return "sha1".to_owned();
        };
        for line in config.lines() {
            let line = line.trim();
            if let Some((key, value)) = line.split_once('=')
                && key.trim().eq_ignore_ascii_case("objectformat")
            {
                return value.trim().trim_matches('"').to_ascii_lowercase();
            }
        }
        "sha1".to_owned()
    }

    /// Open the object database read-only (object reads only; alternates are followed,
    /// replace refs are not applied), with a pack delta cache per handle.
    pub fn open_objects(&self) -> Result<gix_odb::HandleArc, WorkspaceError> {
        let handle = gix_odb::at(self.objects_dir.clone(), gix_hash::Kind::Sha1)
            .and_then(gix_odb::Handle::into_arc)
            .map_err(|source| WorkspaceError::Io {
                op: "open object database",
                path: self.objects_dir.clone(),
                source,
            })?;
        let mut handle = handle;
        handle.set_pack_cache(|| {
            Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(
                64 * 1024 * 1024,
            ))
        });
        Ok(handle)
    }
}

/// Parse `commit` as a full hexadecimal object id, refusing anything else.
///
/// Branch names, tag names, `HEAD`, abbreviated ids and ids with upper-case or non-hex
/// characters are all refused: a template is keyed by exactly one commit.
pub fn parse_full_object_id(commit: &str) -> Result<ObjectId, WorkspaceError> {
    let refuse = || WorkspaceError::NotAFullObjectId {
        given: commit.chars().take(128).collect(),
    };
    let ok_len = commit.len() == 40 || commit.len() == 64;
    let ok_chars = commit
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !ok_len || !ok_chars {
        return Err(refuse());
    }
    if commit.len() == 64 {
        return Err(WorkspaceError::UnsupportedObjectFormat {
            format: "sha256".to_owned(),
        });
    }
    ObjectId::from_hex(commit.as_bytes()).map_err(|_| refuse())
}
