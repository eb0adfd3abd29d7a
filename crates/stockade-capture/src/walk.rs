//! Walking the candidate without following a symlink or trusting any timestamp.
//!
//! Every directory is opened relative to its parent with `O_NOFOLLOW | O_DIRECTORY`, every
//! entry is examined with `AT_SYMLINK_NOFOLLOW`, regular files are opened with `O_NOFOLLOW` and
//! re-checked with `fstat` (same inode, still regular, one link), and symlink targets are read
//! with `readlinkat` as data. Nothing is ever resolved through a link, so no host file outside
//! the input is read.

use crate::base::{Base, BaseBlob, BaseNode, blob_id, blob_id_stream};
use crate::error::CaptureError;
use gix_hash::ObjectId;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stockade_manifest::{FileMode, RejectReason};

/// New state of a changed path.
#[derive(Debug, Clone)]
pub(crate) enum NewItem {
    Blob {
        mode: FileMode,
        data: Vec<u8>,
        oid: ObjectId,
    },
    Refused(RejectReason),
}

/// What a walk found: base entries that may differ, new entries that differ.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub old: BTreeMap<Vec<u8>, BaseBlob>,
    pub new: BTreeMap<Vec<u8>, NewItem>,
    /// Set when the change bound was exceeded during the walk.
    pub overflow: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
    /// An overlay upper directory: whiteouts and opaque directories have meaning.
    Change,
    /// A complete tree: base entries it lacks are deletions.
    Full,
}

pub(crate) struct Walker<'a> {
    pub base: &'a Base,
    pub layer: Layer,
    pub max_file_bytes: u64,
    pub max_changes: u64,
    pub stat_cache: Option<&'a crate::StatCache>,
    pub out: Collected,
}

fn io_err(path: &[u8], e: impl Into<std::io::Error>) -> CaptureError {
    CaptureError::Io {
        path: PathBuf::from(String::from_utf8_lossy(path).into_owned()),
        source: e.into(),
    }
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    if !prefix.is_empty() {
        p.extend_from_slice(prefix);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Opens the input root: no symlink at the last component, must be a directory.
pub(crate) fn open_root(path: &Path) -> Result<OwnedFd, CaptureError> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| CaptureError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// Reads one xattr; `None` when absent or unsupported.
fn xattr(fd: impl AsFd, name: &str) -> Result<Option<Vec<u8>>, rustix::io::Errno> {
    let mut buf = [0u8; 256];
    match rustix::fs::fgetxattr(fd, name, &mut buf) {
        Ok(n) => Ok(Some(buf[..n].to_vec())),
        Err(rustix::io::Errno::NODATA) | Err(rustix::io::Errno::NOTSUP) => Ok(None),
        Err(rustix::io::Errno::RANGE) => Ok(Some(b"<long>".to_vec())),
        Err(e) => Err(e),
    }
}

/// Names of all xattrs of `fd`.
fn xattr_names(fd: impl AsFd) -> Result<Vec<Vec<u8>>, rustix::io::Errno> {
    let mut buf = vec![0u8; 4096];
    loop {
        match rustix::fs::flistxattr(fd.as_fd(), &mut buf) {
            Ok(n) => {
                return Ok(buf[..n]
                    .split(|b| *b == 0)
                    .filter(|s| !s.is_empty())
                    .map(<[u8]>::to_vec)
                    .collect());
            }
            Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
            Err(rustix::io::Errno::RANGE) if buf.len() < (1 << 20) => buf.resize(buf.len() * 4, 0),
            Err(e) => return Err(e),
        }
    }
}

fn overlay_names(names: &[Vec<u8>], suffix: &[u8]) -> bool {
    names.iter().any(|n| {
        (n.starts_with(b"trusted.overlay.") || n.starts_with(b"user.overlay."))
            && n.ends_with(suffix)
    })
}

struct Pending {
    parent: Arc<OwnedFd>,
    name: Vec<u8>,
    path: Vec<u8>,
    /// The base tree at this path when it is visible through this directory.
    base_tree: Option<ObjectId>,
    in_submodule: bool,
}

impl Walker<'_> {
    fn count_new(&mut self) {
        if self.out.new.len() as u64 + self.out.old.len() as u64 > self.max_changes {
            self.out.overflow = true;
        }
    }

    /// Records every base blob at or below `path` as possibly changed (hidden by an upper
    /// entry, replaced by another type, or missing from a full tree).
    fn hide(&mut self, node: Option<BaseNode>, path: &[u8]) -> Result<(), CaptureError> {
        if let Some(n) = node {
            self.base.list_into(n, path, &mut self.out.old)?;
        }
        Ok(())
    }

    /// Walks the whole input from its root directory fd.
    pub fn walk(&mut self, root: OwnedFd) -> Result<(), CaptureError> {
        let root = Arc::new(root);
        let mut stack: Vec<Pending> = Vec::new();
        self.read_dir(root, b"", Some(self.base.root), false, &mut stack)?;
        while let Some(p) = stack.pop() {
            if self.out.overflow {
                return Ok(());
            }
            let fd = rustix::fs::openat(
                &*p.parent,
                p.name.as_slice(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| io_err(&p.path, e))?;
            drop(p.parent);
            let mut base_tree = p.base_tree;
            if self.layer == Layer::Change {
                let names = xattr_names(&fd).map_err(|e| io_err(&p.path, e))?;
                if overlay_names(&names, b".redirect") || overlay_names(&names, b".metacopy") {
                    return Err(CaptureError::UnsupportedOverlay {
                        feature: "redirect/metacopy".into(),
                        path: String::from_utf8_lossy(&p.path).into_owned(),
                    });
                }
                if overlay_names(&names, b".opaque") {
                    let v = match xattr(&fd, "trusted.overlay.opaque")
                        .map_err(|e| io_err(&p.path, e))?
                    {
                        Some(v) => Some(v),
                        None => {
                            xattr(&fd, "user.overlay.opaque").map_err(|e| io_err(&p.path, e))?
                        }
                    };
                    match v.as_deref() {
                        Some(b"y") => {
                            if let Some(t) = base_tree.take() {
                                self.hide(Some(BaseNode::Tree(t)), &p.path)?;
                            }
                        }
                        Some(other) => {
                            return Err(CaptureError::UnsupportedOverlay {
                                feature: format!("opaque={}", String::from_utf8_lossy(other)),
                                path: String::from_utf8_lossy(&p.path).into_owned(),
                            });
                        }
                        None => {}
                    }
                }
            }
            self.read_dir(Arc::new(fd), &p.path, base_tree, p.in_submodule, &mut stack)?;
        }
        Ok(())
    }

    fn read_dir(
        &mut self,
        dir: Arc<OwnedFd>,
        prefix: &[u8],
        base_tree: Option<ObjectId>,
        in_submodule: bool,
        stack: &mut Vec<Pending>,
    ) -> Result<(), CaptureError> {
        let iter = rustix::fs::Dir::read_from(&*dir).map_err(|e| io_err(prefix, e))?;
        let mut names: Vec<Vec<u8>> = Vec::new();
        for entry in iter {
            let entry = entry.map_err(|e| io_err(prefix, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(name.to_vec());
        }
        names.sort();
        if self.layer == Layer::Full
            && let Some(t) = base_tree
        {
            // A full tree shows every path: base entries it lacks are deleted.
            let entries = self.base.tree(&t)?;
            for (name, node) in entries.iter() {
                if names.binary_search(name).is_err() {
                    self.hide(Some(*node), &join(prefix, name))?;
                }
            }
            self.count_new();
        }
        for name in names {
            if prefix.is_empty() && name == b".git" {
                // The worker's own git directory: never candidate content, never read.
                continue;
            }
            let path = join(prefix, &name);
            let base_node = match base_tree {
                Some(t) => self.base.child(&t, &name)?,
                None => None,
            };
            let st = rustix::fs::statat(&*dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io_err(&path, e))?;
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft == FileType::Directory {
                let mut child_tree = None;
                let mut sub = in_submodule;
                match base_node {
                    Some(BaseNode::Tree(t)) => child_tree = Some(t),
                    Some(BaseNode::Gitlink) => sub = true,
                    other => self.hide(other, &path)?,
                }
                stack.push(Pending {
                    parent: dir.clone(),
                    name,
                    path,
                    base_tree: child_tree,
                    in_submodule: sub,
                });
                continue;
            }
            let is_whiteout = self.layer == Layer::Change
                && ft == FileType::CharacterDevice
                && rustix::fs::major(st.st_rdev) == 0
                && rustix::fs::minor(st.st_rdev) == 0;
            let base_blob = match base_node {
                Some(BaseNode::Blob(b)) => Some(b),
                _ => None,
            };
            if base_blob.is_none() || is_whiteout {
                // A tree (or gitlink) hidden by a non-directory; a whited-out blob.
                self.hide(base_node, &path)?;
            }
            if is_whiteout {
                self.count_new();
                continue;
            }
            let item = if in_submodule || base_node == Some(BaseNode::Gitlink) {
                Some(NewItem::Refused(RejectReason::Submodule))
            } else {
                self.examine(&dir, &name, &path, &st, ft, base_blob)?
            };
            // `None`: unchanged (same type, mode and content as the base blob).
            if let Some(item) = item {
                if let Some(b) = base_blob {
                    self.out.old.insert(path.clone(), b);
                }
                self.out.new.insert(path, item);
            }
            self.count_new();
            if self.out.overflow {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Examines one non-directory entry; `None` means it equals `base`.
    fn examine(
        &mut self,
        dir: &OwnedFd,
        name: &[u8],
        path: &[u8],
        st: &rustix::fs::Stat,
        ft: FileType,
        base: Option<BaseBlob>,
    ) -> Result<Option<NewItem>, CaptureError> {
        let refused = |r| Ok(Some(NewItem::Refused(r)));
        match ft {
            FileType::RegularFile => {}
            FileType::Symlink => {
                let target =
                    rustix::fs::readlinkat(dir, name, Vec::new()).map_err(|e| io_err(path, e))?;
                let data = target.into_bytes();
                let oid = blob_id(&data);
                if base.is_some_and(|b| b.mode == FileMode::Symlink && b.oid == oid) {
                    return Ok(None);
                }
                return Ok(Some(NewItem::Blob {
                    mode: FileMode::Symlink,
                    data,
                    oid,
                }));
            }
            FileType::Fifo => return refused(RejectReason::Fifo),
            FileType::Socket => return refused(RejectReason::Socket),
            FileType::BlockDevice => return refused(RejectReason::BlockDevice),
            FileType::CharacterDevice => return refused(RejectReason::CharDevice),
            _ => {
                return refused(RejectReason::Unreadable {
                    detail: "unknown file type".into(),
                });
            }
        }
        if st.st_nlink > 1 {
            return refused(RejectReason::HardLink { nlink: st.st_nlink });
        }
        let mode = if st.st_mode & 0o100 != 0 {
            FileMode::Executable
        } else {
            FileMode::Regular
        };
        let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
        if let (Some(cache), Some(b)) = (self.stat_cache, base)
            && b.mode == mode
            && cache.unchanged(st, b.oid)
        {
            return Ok(None);
        }
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| io_err(path, e))?;
        let fst = rustix::fs::fstat(&fd).map_err(|e| io_err(path, e))?;
        if fst.st_ino != st.st_ino
            || fst.st_dev != st.st_dev
            || FileType::from_raw_mode(fst.st_mode) != FileType::RegularFile
            || fst.st_nlink != 1
        {
            return refused(RejectReason::Unreadable {
                detail: "file changed while being captured".into(),
            });
        }
        if self.layer == Layer::Change {
            let names = xattr_names(&fd).map_err(|e| io_err(path, e))?;
            if overlay_names(&names, b".metacopy") || overlay_names(&names, b".redirect") {
                return Err(CaptureError::UnsupportedOverlay {
                    feature: "metacopy".into(),
                    path: String::from_utf8_lossy(path).into_owned(),
                });
            }
            if overlay_names(&names, b".whiteout") {
                return Err(CaptureError::UnsupportedOverlay {
                    feature: "xattr whiteout".into(),
                    path: String::from_utf8_lossy(path).into_owned(),
                });
            }
        }
        let mut file = std::fs::File::from(fd);
        if size > self.max_file_bytes {
            if let Some(b) = base
                && b.mode == mode
            {
                let id = blob_id_stream(&mut file, size).map_err(|e| io_err(path, e))?;
                if id == Some(b.oid) {
                    return Ok(None);
                }
            }
            return refused(RejectReason::FileTooLarge {
                size,
                limit: self.max_file_bytes,
            });
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut file)
            .take(self.max_file_bytes + 1)
            .read_to_end(&mut data)
            .map_err(|e| io_err(path, e))?;
        if data.len() as u64 > self.max_file_bytes {
            return refused(RejectReason::FileTooLarge {
                size: data.len() as u64,
                limit: self.max_file_bytes,
            });
        }
        let oid = blob_id(&data);
        if base.is_some_and(|b| b.mode == mode && b.oid == oid) {
            return Ok(None);
        }
        Ok(Some(NewItem::Blob { mode, data, oid }))
    }
}
