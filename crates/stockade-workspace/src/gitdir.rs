//! The workspace's own git directory: a shallow, self-contained repository holding exactly
//! the base commit, its trees and blobs, with `HEAD` detached at the commit, an index that
//! matches the files written, and a configuration that names no program.

use std::path::Path;

use gix_hash::ObjectId;

use crate::{WorkspaceError, io_err};

/// The name of the workspace's git directory at the root of the tree.
///
/// Capture must treat this directory as the workspace's bookkeeping, never as candidate
/// content (the worker controls it entirely once a session starts).
pub const WORKSPACE_GIT_DIR: &str = ".git";

/// The configuration written into every workspace git directory.
///
/// It names no program: hooks are disabled (`core.hooksPath=/dev/null`), no fsmonitor, no
/// attributes or excludes file outside the tree, no automatic maintenance (which would
/// spawn background `git gc`). `checkStat=minimal` and `trustctime=false` keep `git status`
/// clean when the tree is seen through an overlay or copied (inode numbers and ctimes change,
/// content does not).
pub const WORKSPACE_GIT_CONFIG: &str = "\
[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tsymlinks = true
\tignorecase = false
\tlogallrefupdates = false
\thooksPath = /dev/null
\tfsmonitor = false
\tuntrackedCache = false
\tcheckStat = minimal
\ttrustctime = false
\tattributesFile = /dev/null
\texcludesFile = /dev/null
[gc]
\tauto = 0
[maintenance]
\tauto = false
[index]
\tskipHash = false
";

/// Create the skeleton of the git directory at `git_dir` (which must not exist yet) and
/// return its `objects/pack` directory.
pub(crate) fn create_skeleton(
    git_dir: &Path,
    commit: ObjectId,
    shallow: bool,
) -> Result<std::path::PathBuf, WorkspaceError> {
    for dir in [
        "",
        "objects",
        "objects/pack",
        "objects/info",
        "refs",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        let path = git_dir.join(dir);
        std::fs::create_dir(&path).map_err(io_err("create directory", &path))?;
    }
    let head = git_dir.join("HEAD");
    std::fs::write(&head, format!("{commit}\n")).map_err(io_err("write", &head))?;
    let config = git_dir.join("config");
    std::fs::write(&config, WORKSPACE_GIT_CONFIG).map_err(io_err("write", &config))?;
    if shallow {
        // The parents are not in this repository: mark the base commit as a shallow boundary
        // so `git log` stops there instead of failing on a missing object.
        let path = git_dir.join("shallow");
        std::fs::write(&path, format!("{commit}\n")).map_err(io_err("write", &path))?;
    }
    Ok(git_dir.join("objects").join("pack"))
}

/// Write the index at `git_dir/index` from `(path, id, mode, stat)` entries.
pub(crate) fn write_index(
    git_dir: &Path,
    entries: impl IntoIterator<
        Item = (
            gix_object::bstr::BString,
            ObjectId,
            gix_index::entry::Mode,
            gix_index::entry::Stat,
        ),
    >,
) -> Result<(), WorkspaceError> {
    let mut state = gix_index::State::new(gix_hash::Kind::Sha1);
    for (path, id, mode, stat) in entries {
        state.dangerously_push_entry(
            stat,
            id,
            gix_index::entry::Flags::empty(),
            mode,
            path.as_ref(),
        );
    }
    state.sort_entries();
    let path = git_dir.join("index");
    let mut file = gix_index::File::from_state(state, path.clone());
    file.write(gix_index::write::Options::default())
        .map_err(|e| WorkspaceError::Index {
            message: e.to_string(),
        })
}
