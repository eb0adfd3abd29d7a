//! `stockade-workspace` against the real `git` CLI: exact round trips, refusals, hostile
//! repository configuration that must never run, and the workspace's own git directory.

use std::{
    collections::BTreeSet,
    ffi::OsStr,
    io::Write,
    os::unix::{
        ffi::OsStrExt,
        fs::{MetadataExt, PermissionsExt},
    },
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use stockade_workspace::{Template, WorkspaceError};

/// `git` with no system or global configuration and a fixed identity.
fn git_cmd(dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
    cmd
}

fn git_in(dir: &Path, home: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut cmd = git_cmd(dir, home);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn git");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
    dest: PathBuf,
    markers: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("repo");
        let dest = tmp.path().join("templates");
        let markers = tmp.path().join("markers");
        for d in [&home, &repo, &markers] {
            std::fs::create_dir(d).unwrap();
        }
        let fx = Self {
            _tmp: tmp,
            home,
            repo,
            dest,
            markers,
        };
        fx.git(&["init", "-q", "-b", "main"]);
        fx
    }

    fn git(&self, args: &[&str]) -> Vec<u8> {
        git_in(&self.repo, &self.home, args, None)
    }

    fn git_text(&self, args: &[&str]) -> String {
        String::from_utf8(self.git(args)).unwrap().trim().to_owned()
    }

    fn write(&self, rel: &[u8], data: &[u8], mode: u32) {
        let path = self.repo.join(OsStr::from_bytes(rel));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, data).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--no-verify", "-m", message]);
        self.git_text(&["rev-parse", "HEAD"])
    }

    fn marker_files(&self) -> Vec<String> {
        std::fs::read_dir(&self.markers)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// A repository with every kind of entry: plain, executable, symlinks (relative, absolute,
/// dangling, to a directory), a non-UTF-8 name, a name with a newline, a deep path, a
/// large binary file, an empty file and a submodule gitlink.
fn rich_repo() -> (Fixture, String) {
    let fx = Fixture::new();
    fx.write(b"README.md", b"hello\n", 0o644);
    fx.write(b"empty", b"", 0o644);
    fx.write(b"bin/run.sh", b"#!/bin/sh\necho run\n", 0o755);
    fx.write(b"src/lib.rs", b"pub fn f() {}\n", 0o644);
    fx.write(b"src/nested/mod.rs", b"// nested\n", 0o644);
    fx.write(b"caf\xe9-latin1.txt", b"non-utf8 name\n", 0o644);
    fx.write(b"new\nline.txt", b"newline in name\n", 0o644);
    fx.write(b"crlf.txt", b"a\r\nb\r\n", 0o644);
    let mut deep = Vec::new();
    for i in 0..60 {
        deep.extend_from_slice(format!("d{i}/").as_bytes());
    }
    deep.extend_from_slice(b"leaf.txt");
    fx.write(&deep, b"deep\n", 0o644);
    let mut big = Vec::with_capacity(8 << 20);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while big.len() < 8 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big.extend_from_slice(&x.to_le_bytes());
    }
    fx.write(b"assets/big.bin", &big, 0o644);
    std::os::unix::fs::symlink("README.md", fx.repo.join("link-rel")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", fx.repo.join("link-abs")).unwrap();
    std::os::unix::fs::symlink("does/not/exist", fx.repo.join("link-dangling")).unwrap();
    std::os::unix::fs::symlink("src", fx.repo.join("link-dir")).unwrap();
    fx.commit_all("first");
    fx.write(b"src/lib.rs", b"pub fn f() {}\npub fn g() {}\n", 0o644);
    fx.git(&["add", "-A"]);
    // A gitlink (submodule entry) without checking out a submodule.
    fx.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        "160000,1111111111111111111111111111111111111111,vendor/sub",
    ]);
    fx.git(&["commit", "-q", "--no-verify", "-m", "second"]);
    let commit = fx.git_text(&["rev-parse", "HEAD"]);
    (fx, commit)
}

/// `git ls-tree -r -z` of `commit`: path -> (mode, oid).
fn ls_tree(fx: &Fixture, commit: &str) -> Vec<(Vec<u8>, String, String)> {
    let out = fx.git(&["ls-tree", "-r", "-z", "--full-tree", commit]);
    out.split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .map(|record| {
            let tab = record.iter().position(|b| *b == b'\t').unwrap();
            let meta = std::str::from_utf8(&record[..tab]).unwrap();
            let mut parts = meta.split(' ');
            let mode = parts.next().unwrap().to_owned();
            let _kind = parts.next().unwrap();
            let oid = parts.next().unwrap().to_owned();
            (record[tab + 1..].to_vec(), mode, oid)
        })
        .collect()
}

fn cat_blob(fx: &Fixture, oid: &str) -> Vec<u8> {
    fx.git(&["cat-file", "blob", oid])
}

/// Every path under `root` except the top-level `.git`, relative, as bytes.
fn disk_paths(root: &Path) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&rel)).unwrap() {
            let entry = entry.unwrap();
            let child = rel.join(entry.file_name());
            if child == Path::new(".git") {
                continue;
            }
            let ft = entry.file_type().unwrap();
            if ft.is_dir() {
                stack.push(child.clone());
            }
            out.insert(child.as_os_str().as_bytes().to_vec());
        }
    }
    out
}

fn assert_exact(fx: &Fixture, commit: &str, tree: &Path) {
    let entries = ls_tree(fx, commit);
    assert!(entries.len() > 10, "fixture too small: {entries:?}");
    let mut expected = BTreeSet::new();
    for (path, mode, oid) in &entries {
        // Every ancestor directory is expected too.
        for (i, b) in path.iter().enumerate() {
            if *b == b'/' {
                expected.insert(path[..i].to_vec());
            }
        }
        expected.insert(path.clone());
        let disk = tree.join(OsStr::from_bytes(path));
        let meta =
            std::fs::symlink_metadata(&disk).unwrap_or_else(|e| panic!("{}: {e}", disk.display()));
        match mode.as_str() {
            "100644" | "100755" => {
                assert!(meta.file_type().is_file(), "{}", disk.display());
                let exec = meta.permissions().mode() & 0o111 != 0;
                assert_eq!(exec, mode == "100755", "exec bit of {}", disk.display());
                assert_eq!(
                    std::fs::read(&disk).unwrap(),
                    cat_blob(fx, oid),
                    "{}",
                    disk.display()
                );
            }
            "120000" => {
                assert!(meta.file_type().is_symlink(), "{}", disk.display());
                let target = std::fs::read_link(&disk).unwrap();
                assert_eq!(
                    target.as_os_str().as_bytes(),
                    cat_blob(fx, oid),
                    "{}",
                    disk.display()
                );
            }
            "160000" => {
                assert!(meta.is_dir(), "{}", disk.display());
                assert_eq!(
                    std::fs::read_dir(&disk).unwrap().count(),
                    0,
                    "gitlink dir not empty"
                );
            }
            other => panic!("unexpected mode {other}"),
        }
    }
    assert_eq!(
        disk_paths(tree),
        expected,
        "paths on disk differ from ls-tree"
    );
}

#[test]
fn round_trip_is_exact_for_every_entry_kind() {
    let (fx, commit) = rich_repo();
    let template = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    assert!(!template.was_reused());
    assert_eq!(template.commit().to_string(), commit);
    assert_eq!(
        template.tree_id().to_string(),
        fx.git_text(&["rev-parse", &format!("{commit}^{{tree}}")])
    );
    assert_eq!(
        template.tree_dir(),
        fx.dest.join(template.key().as_str()).join("tree")
    );
    assert_exact(&fx, &commit, template.tree_dir());
    let counts = template.counts();
    assert_eq!(counts.symlinks, 4);
    assert_eq!(counts.gitlinks, 1);

    // The workspace's own repository: clean, detached at the commit, shallow, consistent.
    let ws = template.tree_dir();
    let status = git_in(
        ws,
        &fx.home,
        &["status", "--porcelain=v1", "-uall", "--ignored", "-z"],
        None,
    );
    assert!(
        status.is_empty(),
        "status not clean: {:?}",
        String::from_utf8_lossy(&status)
    );
    let head = git_in(ws, &fx.home, &["rev-parse", "HEAD"], None);
    assert_eq!(String::from_utf8(head).unwrap().trim(), commit);
    git_in(ws, &fx.home, &["fsck", "--no-dangling", "--strict"], None);
    let log = git_in(ws, &fx.home, &["log", "--format=%H"], None);
    assert_eq!(
        String::from_utf8(log).unwrap().trim(),
        commit,
        "shallow history is one commit"
    );
    let ls = git_in(
        ws,
        &fx.home,
        &["ls-tree", "-r", "-z", "--full-tree", "HEAD"],
        None,
    );
    assert_eq!(ls, fx.git(&["ls-tree", "-r", "-z", "--full-tree", &commit]));
    for pack in std::fs::read_dir(ws.join(".git/objects/pack")).unwrap() {
        let path = pack.unwrap().path();
        if path.extension() == Some(OsStr::new("idx")) {
            git_in(ws, &fx.home, &["verify-pack", path.to_str().unwrap()], None);
        }
    }
    assert!(!ws.join(".git/hooks").exists(), "no hooks directory");

    // A second prewarm reuses the published template.
    let again = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    assert!(again.was_reused());
    assert_eq!(again.key(), template.key());
    assert_eq!(again.tree_dir(), template.tree_dir());
    let leftovers: Vec<_> = std::fs::read_dir(&fx.dest)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary directories left: {leftovers:?}"
    );
}

#[test]
fn diff_and_commit_inside_do_not_touch_the_canonical_repository() {
    let (fx, commit) = rich_repo();
    let template = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    let ws = fx.dest.join("session-copy");
    template.materialize_copy(&ws).unwrap();
    assert_exact(&fx, &commit, &ws);
    let status = git_in(
        &ws,
        &fx.home,
        &["status", "--porcelain=v1", "-uall", "-z"],
        None,
    );
    assert!(
        status.is_empty(),
        "copy not clean: {:?}",
        String::from_utf8_lossy(&status)
    );
    assert!(matches!(
        template.materialize_copy(&ws),
        Err(WorkspaceError::DestinationExists { .. })
    ));

    let canonical_before = snapshot(&fx.repo.join(".git"));
    std::fs::write(ws.join("README.md"), b"hello\nedited by the agent\n").unwrap();
    std::fs::write(ws.join("untracked.txt"), b"new\n").unwrap();
    let diff = git_in(&ws, &fx.home, &["diff"], None);
    let diff = String::from_utf8(diff).unwrap();
    assert!(diff.contains("+edited by the agent"), "{diff}");
    assert!(
        diff.contains("diff --git a/README.md b/README.md"),
        "{diff}"
    );
    let status = git_in(&ws, &fx.home, &["status", "--porcelain=v1", "-uall"], None);
    let status = String::from_utf8(status).unwrap();
    assert!(
        status.contains(" M README.md") && status.contains("?? untracked.txt"),
        "{status}"
    );
    git_in(&ws, &fx.home, &["add", "-A"], None);
    git_in(&ws, &fx.home, &["commit", "-q", "-m", "agent work"], None);
    git_in(&ws, &fx.home, &["gc", "-q", "--prune=now"], None);
    let new_head = String::from_utf8(git_in(&ws, &fx.home, &["rev-parse", "HEAD"], None)).unwrap();
    let new_head = new_head.trim();
    assert_ne!(new_head, commit);

    assert_eq!(
        snapshot(&fx.repo.join(".git")),
        canonical_before,
        "canonical repository changed"
    );
    let out = git_cmd(&fx.repo, &fx.home)
        .args(["cat-file", "-e", new_head])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the agent's commit reached the canonical object database"
    );
    // The template itself is untouched by work in a copy.
    let status = git_in(
        template.tree_dir(),
        &fx.home,
        &["status", "--porcelain=v1", "-uall", "-z"],
        None,
    );
    assert!(status.is_empty());
}

/// Every file under `dir` with its size and content hash proxy (the bytes themselves).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let ft = entry.file_type().unwrap();
            if ft.is_dir() {
                stack.push(path);
            } else if path.file_name() == Some(OsStr::new("index")) && d == dir {
                // `git status` may refresh the canonical index; it is not objects or refs.
                continue;
            } else if ft.is_file() {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            } else {
                out.push((path.clone(), Vec::new()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn hostile_repository_configuration_never_runs() {
    let fx = Fixture::new();
    fx.write(b"a.txt", b"$Id$\nplain content\r\n", 0o644);
    fx.write(b"script.sh", b"#!/bin/sh\n", 0o755);
    fx.write(
        b".gitattributes",
        b"* filter=evil diff=evil merge=evil ident text eol=crlf\n",
        0o644,
    );
    let commit = fx.commit_all("base");
    let m = fx.markers.display().to_string();
    // Configure every program hook git knows of only after committing, so only the code
    // under test could trigger them.
    let hooks = fx.repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "post-checkout",
        "pre-commit",
        "post-commit",
        "post-index-change",
        "reference-transaction",
        "fsmonitor-watchman",
        "pre-auto-gc",
    ] {
        let path = hooks.join(hook);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {m}/hook-{hook}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let fsmonitor = fx.repo.join("fsmonitor.sh");
    std::fs::write(&fsmonitor, format!("#!/bin/sh\ntouch {m}/fsmonitor\n")).unwrap();
    std::fs::set_permissions(&fsmonitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let included = fx.repo.join("included.cfg");
    std::fs::write(
        &included,
        format!("[core]\n\tpager = touch {m}/include-pager\n"),
    )
    .unwrap();
    for (key, value) in [
        ("filter.evil.smudge", format!("touch {m}/smudge; cat")),
        ("filter.evil.clean", format!("touch {m}/clean; cat")),
        ("filter.evil.process", format!("touch {m}/process")),
        ("filter.evil.required", "true".to_owned()),
        ("diff.evil.textconv", format!("touch {m}/textconv; cat")),
        ("diff.external", format!("touch {m}/diff-external")),
        ("merge.evil.driver", format!("touch {m}/merge")),
        ("core.fsmonitor", fsmonitor.display().to_string()),
        ("core.sshCommand", format!("touch {m}/ssh")),
        ("core.hooksPath", hooks.display().to_string()),
        ("core.pager", format!("touch {m}/pager")),
        ("credential.helper", format!("!touch {m}/credential")),
        ("include.path", included.display().to_string()),
        ("remote.origin.url", "ext::touch %S".to_owned()),
    ] {
        fx.git(&["config", key, &value]);
    }

    let template = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    assert!(
        fx.marker_files().is_empty(),
        "prewarm ran: {:?}",
        fx.marker_files()
    );
    // Files hold the blob bytes exactly: no smudge, no ident expansion, no eol conversion.
    let blob = fx.git(&["cat-file", "blob", &format!("{commit}:a.txt")]);
    assert_eq!(
        std::fs::read(template.tree_dir().join("a.txt")).unwrap(),
        blob
    );
    assert!(blob.starts_with(b"$Id$\n"), "ident was expanded");
    assert!(!blob.contains(&b'\r'), "eol conversion on the way out");
    assert!(
        !std::fs::read_to_string(template.tree_dir().join(".git/config"))
            .unwrap()
            .contains("evil")
    );

    // An agent's git inside the workspace sees none of the canonical configuration either.
    let ws = template.tree_dir();
    git_in(ws, &fx.home, &["status", "--porcelain"], None);
    git_in(ws, &fx.home, &["diff"], None);
    git_in(ws, &fx.home, &["log", "-p"], None);
    assert!(
        fx.marker_files().is_empty(),
        "workspace git ran: {:?}",
        fx.marker_files()
    );

    // Reuse also runs nothing.
    Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    assert!(fx.marker_files().is_empty());
}

#[test]
fn refuses_anything_but_a_full_commit_id() {
    let (fx, commit) = rich_repo();
    let tree = fx.git_text(&["rev-parse", &format!("{commit}^{{tree}}")]);
    let blob = fx.git_text(&["rev-parse", &format!("{commit}:README.md")]);
    for bad in [
        "main",
        "HEAD",
        "refs/heads/main",
        &commit[..7],
        &commit[..39],
        &commit.to_uppercase(),
        &format!("{commit}0"),
        "",
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        &format!("{}^", &commit[..39]),
    ] {
        let err = Template::prewarm(&fx.repo, bad, &fx.dest).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::NotAFullObjectId { .. }),
            "{bad:?}: {err}"
        );
        assert!(err.to_string().contains("full object id"), "{err}");
    }
    let sha256 = "a".repeat(64);
    assert!(matches!(
        Template::prewarm(&fx.repo, &sha256, &fx.dest).unwrap_err(),
        WorkspaceError::UnsupportedObjectFormat { .. }
    ));
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let err = Template::prewarm(&fx.repo, missing, &fx.dest).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::CommitNotFound { .. }),
        "{err}"
    );
    for not_commit in [&tree, &blob] {
        let err = Template::prewarm(&fx.repo, not_commit, &fx.dest).unwrap_err();
        assert!(matches!(err, WorkspaceError::NotACommit { .. }), "{err}");
    }
    let plain = fx.home.join("not-a-repo");
    std::fs::create_dir(&plain).unwrap();
    let err = Template::prewarm(&plain, &commit, &fx.dest).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::NotARepository { .. }),
        "{err}"
    );
    let err = Template::prewarm(&fx.home.join("nowhere"), &commit, &fx.dest).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::NotARepository { .. }),
        "{err}"
    );
    // Nothing that looks like a template was left behind by any refusal.
    let left: Vec<_> = std::fs::read_dir(&fx.dest)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// Write a raw tree object (entries given as (mode, name, oid hex)) with `--literally`, so
/// names git would never produce itself reach the object database.
fn raw_tree(fx: &Fixture, entries: &[(&str, &[u8], &str)]) -> String {
    let mut data = Vec::new();
    for (mode, name, oid) in entries {
        data.extend_from_slice(mode.as_bytes());
        data.push(b' ');
        data.extend_from_slice(name);
        data.push(0);
        for i in (0..40).step_by(2) {
            data.push(u8::from_str_radix(&oid[i..i + 2], 16).unwrap());
        }
    }
    let out = git_in(
        &fx.repo,
        &fx.home,
        &["hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
        Some(&data),
    );
    String::from_utf8(out).unwrap().trim().to_owned()
}

fn raw_commit(fx: &Fixture, tree: &str) -> String {
    let body = format!(
        "tree {tree}\nauthor t <t@example.invalid> 0 +0000\ncommitter t <t@example.invalid> 0 +0000\n\nhostile\n"
    );
    let out = git_in(
        &fx.repo,
        &fx.home,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--literally",
            "--stdin",
        ],
        Some(body.as_bytes()),
    );
    String::from_utf8(out).unwrap().trim().to_owned()
}

#[test]
fn hostile_trees_are_refused_and_write_nothing_outside() {
    let fx = Fixture::new();
    fx.write(b"x", b"payload\n", 0o644);
    let base = fx.commit_all("base");
    let blob = fx.git_text(&["rev-parse", &format!("{base}:x")]);
    let outside = fx.markers.join("escaped");
    let link_target = fx.write_blob(fx.markers.as_os_str().as_bytes());
    let inner = raw_tree(&fx, &[("100644", b"escaped", &blob)]);
    let cases: Vec<(&str, String)> = vec![
        ("dot-git", raw_tree(&fx, &[("100644", b".git", &blob)])),
        ("dot-GIT", raw_tree(&fx, &[("040000", b".GIT", &inner)])),
        ("dotdot", raw_tree(&fx, &[("040000", b"..", &inner)])),
        ("dot", raw_tree(&fx, &[("100644", b".", &blob)])),
        ("slash", raw_tree(&fx, &[("100644", b"a/b", &blob)])),
        (
            // A symlink to a host directory and a tree of the same name: the file must not
            // be written through the link.
            "symlink-then-dir",
            raw_tree(
                &fx,
                &[("120000", b"a", &link_target), ("040000", b"a", &inner)],
            ),
        ),
        (
            "dir-then-symlink",
            raw_tree(
                &fx,
                &[("040000", b"a", &inner), ("120000", b"a", &link_target)],
            ),
        ),
        ("nested-dot-git", {
            let t = raw_tree(&fx, &[("100644", b".git", &blob)]);
            raw_tree(&fx, &[("040000", b"sub", &t)])
        }),
    ];
    for (name, tree) in cases {
        let commit = raw_commit(&fx, &tree);
        let err = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::UnsafePath { .. }),
            "{name}: expected a refusal, got {err}"
        );
        assert!(!outside.exists(), "{name}: wrote through a symlink");
        let left: Vec<_> = std::fs::read_dir(&fx.dest)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
}

impl Fixture {
    fn write_blob(&self, data: &[u8]) -> String {
        let out = git_in(
            &self.repo,
            &self.home,
            &["hash-object", "-w", "--stdin"],
            Some(data),
        );
        String::from_utf8(out).unwrap().trim().to_owned()
    }
}

#[test]
fn stale_build_directories_of_dead_processes_are_swept() {
    let (fx, commit) = rich_repo();
    std::fs::create_dir_all(&fx.dest).unwrap();
    // A pid that cannot exist (above pid_max's hard ceiling).
    let stale = fx.dest.join(".tmp-deadbeef-4294967295-1");
    std::fs::create_dir_all(stale.join("tree")).unwrap();
    let template = Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap();
    assert!(!stale.exists());
    assert!(template.tree_dir().is_dir());
    // A template that looks complete but is not what its key promises is refused, not reused.
    std::fs::write(template.root().join("template.json"), b"{}").unwrap();
    assert!(matches!(
        Template::prewarm(&fx.repo, &commit, &fx.dest).unwrap_err(),
        WorkspaceError::CorruptTemplate { .. }
    ));
    let _ = std::fs::metadata(template.tree_dir()).unwrap().mode();
}

#[test]
fn no_program_running_gitoxide_crate_is_in_the_dependency_closure() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for krate in [
        "gix-command",
        "gix-filter",
        "gix-credentials",
        "gix-transport",
        "gix",
    ] {
        let out = Command::new(&cargo)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "tree",
                "--offline",
                "-e",
                "normal",
                "-p",
                "stockade-workspace",
                "-i",
                krate,
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let absent = (!out.status.success() && stderr.contains("did not match any packages"))
            || (out.status.success() && stdout.trim().is_empty());
        assert!(
            absent,
            "{krate} is reachable from stockade-workspace:\n{stdout}{stderr}"
        );
    }
}
