//! A stat cache for full-tree capture, keyed on what the worker cannot forge.
//!
//! The key is (device, inode, ctime, size, mode bits). A process cannot set ctime: the kernel
//! stamps it with the current time on every content, mode or link change, so a file the worker
//! touched has a ctime later than the cache. Entries whose ctime is not at least two seconds
//! older than the moment the cache was taken are not trusted ("racily clean" in git's words) and
//! are hashed anyway. mtime is never consulted. The cache lives in the host process, outside the
//! sandbox; it records the git blob id each file had when the cache was taken, so a hit also
//! requires that id to equal the base tree's.

use crate::error::CaptureError;
use gix_hash::ObjectId;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
    size: i64,
    mode: u32,
}

fn key(st: &rustix::fs::Stat) -> Key {
    Key {
        dev: st.st_dev,
        ino: st.st_ino,
        ctime: st.st_ctime,
        ctime_nsec: st.st_ctime_nsec as i64,
        size: st.st_size,
        mode: st.st_mode,
    }
}

/// Stat data and blob ids of a pristine tree, taken before the worker starts.
#[derive(Debug, Default)]
pub struct StatCache {
    entries: HashMap<(u64, u64), (Key, ObjectId)>,
    taken_at: i64,
}

impl StatCache {
    /// Walks `dir` (never following symlinks, skipping the top-level `.git`) and records every
    /// single-link regular file. Call it on the pristine tree, before the worker can write.
    pub fn build(dir: &Path) -> Result<StatCache, CaptureError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let mut cache = StatCache {
            entries: HashMap::new(),
            taken_at: now,
        };
        let root = crate::walk::open_root(dir)?;
        let mut stack: Vec<(OwnedFd, Vec<u8>)> = vec![(root, Vec::new())];
        while let Some((fd, prefix)) = stack.pop() {
            let err = |e: rustix::io::Errno| CaptureError::Io {
                path: dir.join(String::from_utf8_lossy(&prefix).as_ref()),
                source: e.into(),
            };
            let mut names = Vec::new();
            for entry in rustix::fs::Dir::read_from(&fd).map_err(err)? {
                let name = entry.map_err(err)?.file_name().to_bytes().to_vec();
                if name != b"." && name != b".." && !(prefix.is_empty() && name == b".git") {
                    names.push(name);
                }
            }
            for name in names {
                let st = rustix::fs::statat(&fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(err)?;
                let mut path = prefix.clone();
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(&name);
                match FileType::from_raw_mode(st.st_mode) {
                    FileType::Directory => {
                        let sub = rustix::fs::openat(
                            &fd,
                            name.as_slice(),
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(err)?;
                        stack.push((sub, path));
                    }
                    FileType::RegularFile if st.st_nlink == 1 => {
                        let f = rustix::fs::openat(
                            &fd,
                            name.as_slice(),
                            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
                            Mode::empty(),
                        )
                        .map_err(err)?;
                        let mut data = Vec::new();
                        std::fs::File::from(f).read_to_end(&mut data).map_err(|e| {
                            CaptureError::Io {
                                path: dir.join(String::from_utf8_lossy(&path).as_ref()),
                                source: e,
                            }
                        })?;
                        if data.len() as i64 == st.st_size {
                            cache.entries.insert(
                                (st.st_dev, st.st_ino),
                                (key(&st), crate::base::blob_id(&data)),
                            );
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(cache)
    }

    /// Number of cached files.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the file with stat `st` provably holds the blob `base_oid`.
    ///
    /// Content belongs to the inode, so the cache is keyed on (device, inode): a file renamed
    /// by the worker still holds the content its inode had, and is compared with the base
    /// blob at its new path.
    pub(crate) fn unchanged(&self, st: &rustix::fs::Stat, base_oid: ObjectId) -> bool {
        match self.entries.get(&(st.st_dev, st.st_ino)) {
            Some((k, oid)) => *oid == base_oid && *k == key(st) && k.ctime + 2 <= self.taken_at,
            None => false,
        }
    }
}
