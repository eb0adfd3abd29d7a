//! Materializing a commit's tree from the object database: files with their modes, symlinks
//! as data, gitlinks as empty directories, written in parallel, packed on the way.
//!
//! **Safety of writes.** Every directory is created with `mkdir` (never `mkdir -p`) before
//! any file, in parent-first order, and every file or symlink with `O_CREAT|O_EXCL` /
//! `symlink()`; both fail on anything already present. So no write can go through a symlink
//! the tree itself planted (for example a tree with `a -> /etc` and `a/passwd`): the second
//! entry fails with "exists" instead.

use std::{
    collections::HashSet,
    ffi::OsStr,
    fs::OpenOptions,
    io::Write,
    os::unix::{
        ffi::OsStrExt,
        fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    },
    path::{Path, PathBuf},
};

use gix_hash::ObjectId;
use gix_object::{
    Find,
    bstr::{BString, ByteSlice},
};

use crate::{WorkspaceError, pack::PackWriter};

/// What a tree entry becomes on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Executable,
    Symlink,
}

/// A blob to write at `path` (relative, `/`-separated, as git stores it).
pub(crate) struct FileEntry {
    pub(crate) path: BString,
    pub(crate) id: ObjectId,
    pub(crate) kind: Kind,
    /// Whether this entry is the one that packs its blob (blobs are packed once).
    pub(crate) packs: bool,
}

/// The flattened tree of one commit.
pub(crate) struct Walk {
    /// Directories, parents before children.
    pub(crate) dirs: Vec<BString>,
    pub(crate) files: Vec<FileEntry>,
    /// Submodule entries: path and the submodule commit id.
    pub(crate) gitlinks: Vec<(BString, ObjectId)>,
    /// Every distinct tree object, raw, for the workspace's pack.
    pub(crate) trees: Vec<(ObjectId, Vec<u8>)>,
}

fn odb_err(id: &gix_hash::oid, e: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::ObjectDatabase {
        id: id.to_string(),
        message: e.to_string(),
    }
}

/// Refuse names git itself refuses to check out, and anything that could leave the root.
fn check_component(parent: &[u8], name: &[u8]) -> Result<(), WorkspaceError> {
    let reason = if name.is_empty() {
        Some("empty name")
    } else if name == b"." || name == b".." {
        Some("dot or dot-dot component")
    } else if name.contains(&b'/') {
        Some("slash inside a name")
    } else if name.contains(&0) {
        Some("NUL byte in a name")
    } else if name.eq_ignore_ascii_case(b".git") {
        Some("a .git component would shadow the workspace's git directory")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(WorkspaceError::UnsafePath {
            path: join(parent, name),
            reason,
        }),
        None => Ok(()),
    }
}

fn join(parent: &[u8], name: &[u8]) -> BString {
    let mut path = Vec::with_capacity(parent.len() + 1 + name.len());
    if !parent.is_empty() {
        path.extend_from_slice(parent);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path.into()
}

/// Walk the tree `root` (depth-first, parents first) and flatten it.
pub(crate) fn walk(odb: &impl Find, root: ObjectId) -> Result<Walk, WorkspaceError> {
    let mut out = Walk {
        dirs: Vec::new(),
        files: Vec::new(),
        gitlinks: Vec::new(),
        trees: Vec::new(),
    };
    let mut seen_trees: HashSet<ObjectId> = HashSet::new();
    let mut seen_blobs: HashSet<ObjectId> = HashSet::new();
    let mut stack: Vec<(BString, ObjectId)> = vec![(BString::default(), root)];
    let mut buf = Vec::new();
    let mut names: HashSet<Vec<u8>> = HashSet::new();
    while let Some((dir, id)) = stack.pop() {
        let data = odb
            .try_find(&id, &mut buf)
            .map_err(|e| odb_err(&id, e))?
            .ok_or_else(|| WorkspaceError::MissingObject {
                id: id.to_string(),
                path: dir.clone(),
            })?;
        if data.kind != gix_object::Kind::Tree {
            return Err(WorkspaceError::WrongObjectKind {
                id: id.to_string(),
                path: dir.clone(),
                expected: "tree",
                found: data.kind.to_string(),
            });
        }
        if seen_trees.insert(id) {
            out.trees.push((id, data.data.to_vec()));
        }
        names.clear();
        let mut children = Vec::new();
        for entry in gix_object::TreeRefIter::from_bytes(data.data, gix_hash::Kind::Sha1) {
            let entry = entry.map_err(|e| odb_err(&id, format!("malformed tree: {e}")))?;
            let name: &[u8] = entry.filename.as_bytes();
            check_component(dir.as_bytes(), name)?;
            if !names.insert(name.to_vec()) {
                return Err(WorkspaceError::UnsafePath {
                    path: join(dir.as_bytes(), name),
                    reason: "duplicate name in one tree",
                });
            }
            let path = join(dir.as_bytes(), name);
            let oid = entry.oid.to_owned();
            let raw_mode = entry.mode.value();
            let kind = match raw_mode & 0o170000 {
                0o040000 => {
                    out.dirs.push(path.clone());
                    children.push((path, oid));
                    continue;
                }
                0o160000 => {
                    out.dirs.push(path.clone());
                    out.gitlinks.push((path, oid));
                    continue;
                }
                0o120000 => Kind::Symlink,
                0o100000 if raw_mode & 0o100 != 0 => Kind::Executable,
                0o100000 => Kind::File,
                _ => {
                    return Err(WorkspaceError::UnsupportedMode {
                        path,
                        mode: u32::from(raw_mode),
                    });
                }
            };
            let packs = seen_blobs.insert(oid);
            out.files.push(FileEntry {
                path,
                id: oid,
                kind,
                packs,
            });
        }
        // Reverse so the depth-first order visits children in tree order.
        stack.extend(children.into_iter().rev());
    }
    Ok(out)
}

/// Create every directory of the walk under `root`, parents first, failing on anything
/// that already exists.
pub(crate) fn create_dirs(root: &Path, walk: &Walk) -> Result<(), WorkspaceError> {
    for dir in &walk.dirs {
        let path = root.join(OsStr::from_bytes(dir));
        std::fs::create_dir(&path).map_err(|source| WorkspaceError::Io {
            op: "create directory",
            path,
            source,
        })?;
    }
    Ok(())
}

/// One written entry, for the index.
pub(crate) struct Written {
    pub(crate) index: usize,
    pub(crate) stat: gix_index::entry::Stat,
}

fn stat_of(meta: &std::fs::Metadata) -> gix_index::entry::Stat {
    // Truncation to 32 bits is what git does for every field.
    gix_index::entry::Stat {
        mtime: gix_index::entry::stat::Time {
            secs: meta.mtime() as u32,
            nsecs: meta.mtime_nsec() as u32,
        },
        ctime: gix_index::entry::stat::Time {
            secs: meta.ctime() as u32,
            nsecs: meta.ctime_nsec() as u32,
        },
        dev: meta.dev() as u32,
        ino: meta.ino() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.size() as u32,
    }
}

/// Write the files `walk.files[range]`, packing each blob whose `packs` flag is set into a
/// pack named after `worker`. Returns the stat of every written entry.
pub(crate) fn write_files(
    odb: &impl Find,
    root: &Path,
    pack_dir: &Path,
    worker: usize,
    entries: &[FileEntry],
    first_index: usize,
) -> Result<Vec<Written>, WorkspaceError> {
    let to_pack = entries.iter().filter(|e| e.packs).count();
    let mut pack = PackWriter::create(pack_dir, &format!("blobs_{worker}"), to_pack as u32)?;
    let mut buf = Vec::new();
    let mut written = Vec::with_capacity(entries.len());
    let mut path_buf = PathBuf::new();
    for (offset, entry) in entries.iter().enumerate() {
        let data = odb
            .try_find(&entry.id, &mut buf)
            .map_err(|e| odb_err(&entry.id, e))?
            .ok_or_else(|| WorkspaceError::MissingObject {
                id: entry.id.to_string(),
                path: entry.path.clone(),
            })?;
        if data.kind != gix_object::Kind::Blob {
            return Err(WorkspaceError::WrongObjectKind {
                id: entry.id.to_string(),
                path: entry.path.clone(),
                expected: "blob",
                found: data.kind.to_string(),
            });
        }
        path_buf.clear();
        path_buf.push(root);
        path_buf.push(OsStr::from_bytes(&entry.path));
        let path = path_buf.as_path();
        let io = |op: &'static str| {
            move |source| WorkspaceError::Io {
                op,
                path: path.to_path_buf(),
                source,
            }
        };
        let meta = match entry.kind {
            Kind::Symlink => {
                if data.data.contains(&0) || data.data.is_empty() {
                    return Err(WorkspaceError::UnsafePath {
                        path: entry.path.clone(),
                        reason: "symlink target is empty or contains a NUL byte",
                    });
                }
                std::os::unix::fs::symlink(OsStr::from_bytes(data.data), path)
                    .map_err(io("create symlink"))?;
                std::fs::symlink_metadata(path).map_err(io("stat symlink"))?
            }
            Kind::File | Kind::Executable => {
                let mode = if entry.kind == Kind::Executable {
                    0o755
                } else {
                    0o644
                };
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                    .open(path)
                    .map_err(io("create file"))?;
                file.write_all(data.data).map_err(io("write file"))?;
                let mut meta = file.metadata().map_err(io("stat file"))?;
                if entry.kind == Kind::Executable && meta.permissions().mode() & 0o111 != 0o111 {
                    // A restrictive umask dropped the executable bits: set them explicitly.
                    file.set_permissions(std::fs::Permissions::from_mode(0o755))
                        .map_err(io("chmod file"))?;
                    meta = file.metadata().map_err(io("stat file"))?;
                }
                meta
            }
        };
        if entry.packs {
            pack.add(entry.id, gix_object::Kind::Blob, data.data)?;
        }
        written.push(Written {
            index: first_index + offset,
            stat: stat_of(&meta),
        });
    }
    pack.finish()?;
    Ok(written)
}
