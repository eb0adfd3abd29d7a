//! The plain-copy fallback: a full, independent copy of a template for backends without an
//! overlay filesystem. Files are cloned (`FICLONE`, a reflink) where the filesystem supports
//! it and copied in the kernel (`copy_file_range`) otherwise; modes, symlinks (as data) and
//! modification times are kept, so the copied index still matches.

use std::{
    fs::{File, OpenOptions},
    os::unix::fs::{MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use crate::{WorkspaceError, io_err};

enum Item {
    Dir(PathBuf),
    File(PathBuf, u32),
    Symlink(PathBuf),
}

/// List everything under `root` (relative paths), directories before their contents,
/// refusing anything a template never holds (FIFOs, sockets, devices).
fn list(root: &Path) -> Result<Vec<Item>, WorkspaceError> {
    let mut items = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let entries = std::fs::read_dir(&dir).map_err(io_err("read directory", &dir))?;
        for entry in entries {
            let entry = entry.map_err(io_err("read directory", &dir))?;
            let rel_child = rel.join(entry.file_name());
            let file_type = entry.file_type().map_err(io_err("stat", &entry.path()))?;
            if file_type.is_dir() {
                items.push(Item::Dir(rel_child.clone()));
                stack.push(rel_child);
            } else if file_type.is_symlink() {
                items.push(Item::Symlink(rel_child));
            } else if file_type.is_file() {
                let meta = entry.metadata().map_err(io_err("stat", &entry.path()))?;
                items.push(Item::File(rel_child, meta.mode() & 0o7777));
            } else {
                return Err(WorkspaceError::CorruptTemplate {
                    path: entry.path(),
                    reason: "special file in a template".to_owned(),
                });
            }
        }
    }
    Ok(items)
}

fn copy_file(src: &Path, dst: &Path, mode: u32) -> Result<(), WorkspaceError> {
    let input = File::open(src).map_err(io_err("open", src))?;
    let meta = input.metadata().map_err(io_err("stat", src))?;
    let mut output = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(dst)
        .map_err(io_err("create file", dst))?;
    if rustix::fs::ioctl_ficlone(&output, &input).is_err() {
        let mut input = input;
        std::io::copy(&mut input, &mut output).map_err(io_err("copy file", dst))?;
    }
    if meta.mode() & 0o7777 != mode {
        output
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
            .map_err(io_err("chmod", dst))?;
    }
    let modified = meta.modified().map_err(io_err("stat", src))?;
    output
        .set_modified(modified)
        .map_err(io_err("set modification time", dst))?;
    Ok(())
}

fn copy_symlink(src: &Path, dst: &Path) -> Result<(), WorkspaceError> {
    let target = std::fs::read_link(src).map_err(io_err("read symlink", src))?;
    std::os::unix::fs::symlink(&target, dst).map_err(io_err("create symlink", dst))?;
    let meta = std::fs::symlink_metadata(src).map_err(io_err("stat", src))?;
    let times = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: meta.atime(),
            tv_nsec: meta.atime_nsec(),
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: meta.mtime(),
            tv_nsec: meta.mtime_nsec(),
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        dst,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(|e| WorkspaceError::Io {
        op: "set symlink modification time",
        path: dst.to_path_buf(),
        source: e.into(),
    })
}

/// Copy the tree at `src` into `dest`, which is created and must not exist.
pub(crate) fn copy_tree(src: &Path, dest: &Path, threads: usize) -> Result<(), WorkspaceError> {
    std::fs::create_dir(dest).map_err(io_err("create directory", dest))?;
    let items = list(src)?;
    for item in &items {
        if let Item::Dir(rel) = item {
            let path = dest.join(rel);
            std::fs::create_dir(&path).map_err(io_err("create directory", &path))?;
        }
    }
    let leaves: Vec<&Item> = items
        .iter()
        .filter(|i| !matches!(i, Item::Dir(_)))
        .collect();
    let chunk = leaves.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = leaves
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<(), WorkspaceError> {
                    for item in part {
                        match item {
                            Item::File(rel, mode) => {
                                copy_file(&src.join(rel), &dest.join(rel), *mode)?
                            }
                            Item::Symlink(rel) => copy_symlink(&src.join(rel), &dest.join(rel))?,
                            Item::Dir(_) => {}
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for handle in handles {
            handle
                .join()
                .map_err(|_| WorkspaceError::WorkerPanicked)??;
        }
        Ok(())
    })
}
