//! The base tree, read from the canonical repository's object database at an exact commit.
//!
//! Only `gix-odb`/`gix-object` are used: no config is read, no ref is resolved, no program runs.

use crate::error::CaptureError;
use gix_hash::ObjectId;
use gix_object::FindExt;
use gix_object::tree::EntryKind;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;
use stockade_manifest::FileMode;

/// A blob (file or symlink) of the base tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BaseBlob {
    pub mode: FileMode,
    pub oid: ObjectId,
}

/// One entry of a base tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaseNode {
    Tree(ObjectId),
    Blob(BaseBlob),
    Gitlink,
}

type TreeEntries = Rc<Vec<(Vec<u8>, BaseNode)>>;

pub(crate) struct Base {
    odb: gix_odb::Handle,
    pub root: ObjectId,
    trees: RefCell<HashMap<ObjectId, TreeEntries>>,
}

fn obj_err(oid: &gix_hash::oid, e: impl std::fmt::Display) -> CaptureError {
    CaptureError::Object {
        oid: oid.to_string(),
        detail: e.to_string(),
    }
}

/// Whether `s` is a full lowercase SHA-1 hex id.
pub(crate) fn is_full_hex_id(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Base {
    /// Opens the object database of the canonical repository (a work tree with `.git/` or a
    /// bare repository) and resolves `commit` (a full hex id) to its tree.
    pub fn open(repo: &Path, commit: &str) -> Result<Base, CaptureError> {
        if !is_full_hex_id(commit) {
            return Err(CaptureError::BadCommitId(commit.to_owned()));
        }
        let repo_err = |detail: String| CaptureError::Repo {
            path: repo.to_path_buf(),
            detail,
        };
        let objects = if repo.join(".git").join("objects").is_dir() {
            repo.join(".git").join("objects")
        } else if repo.join("objects").is_dir() {
            repo.join("objects")
        } else {
            return Err(repo_err(
                "no objects directory (expected .git/objects or a bare repository)".into(),
            ));
        };
        let odb =
            gix_odb::at(objects, gix_hash::Kind::Sha1).map_err(|e| repo_err(e.to_string()))?;
        let commit_id = ObjectId::from_hex(commit.as_bytes())
            .map_err(|_| CaptureError::BadCommitId(commit.to_owned()))?;
        let mut buf = Vec::new();
        let root = odb
            .find_commit_iter(&commit_id, &mut buf)
            .map_err(|e| obj_err(&commit_id, e))?
            .tree_id()
            .map_err(|e| obj_err(&commit_id, e))?;
        Ok(Base {
            odb,
            root,
            trees: RefCell::new(HashMap::new()),
        })
    }

    /// The entries of a tree, decoded once and cached.
    pub fn tree(&self, oid: &ObjectId) -> Result<TreeEntries, CaptureError> {
        if let Some(t) = self.trees.borrow().get(oid) {
            return Ok(t.clone());
        }
        let mut buf = Vec::new();
        let tree = self
            .odb
            .find_tree(oid, &mut buf)
            .map_err(|e| obj_err(oid, e))?;
        let mut entries = Vec::with_capacity(tree.entries.len());
        for e in &tree.entries {
            let node = match e.mode.kind() {
                EntryKind::Tree => BaseNode::Tree(e.oid.to_owned()),
                EntryKind::Blob => BaseNode::Blob(BaseBlob {
                    mode: FileMode::Regular,
                    oid: e.oid.to_owned(),
                }),
                EntryKind::BlobExecutable => BaseNode::Blob(BaseBlob {
                    mode: FileMode::Executable,
                    oid: e.oid.to_owned(),
                }),
                EntryKind::Link => BaseNode::Blob(BaseBlob {
                    mode: FileMode::Symlink,
                    oid: e.oid.to_owned(),
                }),
                EntryKind::Commit => BaseNode::Gitlink,
            };
            entries.push((e.filename.to_vec(), node));
        }
        // Git sorts trees with directories as if suffixed by '/'; re-sort by name for lookup.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let entries = Rc::new(entries);
        self.trees.borrow_mut().insert(*oid, entries.clone());
        Ok(entries)
    }

    /// The child `name` of tree `oid`.
    pub fn child(&self, oid: &ObjectId, name: &[u8]) -> Result<Option<BaseNode>, CaptureError> {
        let t = self.tree(oid)?;
        Ok(t.binary_search_by(|e| e.0.as_slice().cmp(name))
            .ok()
            .map(|i| t[i].1))
    }

    /// Every blob at or below `node` (at `path`) into `out`; gitlinks are skipped.
    pub fn list_into(
        &self,
        node: BaseNode,
        path: &[u8],
        out: &mut BTreeMap<Vec<u8>, BaseBlob>,
    ) -> Result<(), CaptureError> {
        match node {
            BaseNode::Blob(b) => {
                out.insert(path.to_vec(), b);
            }
            BaseNode::Gitlink => {}
            BaseNode::Tree(oid) => {
                let t = self.tree(&oid)?;
                for (name, child) in t.iter() {
                    let mut p = Vec::with_capacity(path.len() + 1 + name.len());
                    if !path.is_empty() {
                        p.extend_from_slice(path);
                        p.push(b'/');
                    }
                    p.extend_from_slice(name);
                    self.list_into(*child, &p, out)?;
                }
            }
        }
        Ok(())
    }

    /// The content of a blob.
    pub fn blob(&self, oid: &ObjectId) -> Result<Vec<u8>, CaptureError> {
        let mut buf = Vec::new();
        let b = self
            .odb
            .find_blob(oid, &mut buf)
            .map_err(|e| obj_err(oid, e))?;
        Ok(b.data.to_vec())
    }
}

/// The git blob id of `data`.
pub(crate) fn blob_id(data: &[u8]) -> ObjectId {
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(format!("blob {}\0", data.len()).as_bytes());
    h.update(data);
    // SHA-1 collision detection: a detected collision attack yields a distinct, never-matching id.
    h.try_finalize()
        .unwrap_or_else(|_| ObjectId::null(gix_hash::Kind::Sha1))
}

/// Streams `len` bytes from `r` into the git blob id.
pub(crate) fn blob_id_stream(
    r: &mut impl std::io::Read,
    len: u64,
) -> std::io::Result<Option<ObjectId>> {
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 1 << 16];
    let mut seen = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        h.update(&buf[..n]);
    }
    if seen != len {
        return Ok(None);
    }
    Ok(h.try_finalize().ok())
}
