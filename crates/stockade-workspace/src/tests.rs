//! Unit tests: repositories are built with gitoxide's object writer only (no `git` program);
//! the `git`-CLI round trips live in `tests/it/workspace.rs`.

use std::{
    os::unix::{ffi::OsStrExt, fs::PermissionsExt},
    path::{Path, PathBuf},
};

use gix_hash::ObjectId;
use gix_object::{Find, Write};

use super::*;

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dest: PathBuf,
    odb: gix_odb::Handle,
}

impl Repo {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let git = root.join(".git");
        for d in ["objects/pack", "objects/info", "refs/heads"] {
            std::fs::create_dir_all(git.join(d)).unwrap();
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            git.join("config"),
            "[core]\n\trepositoryformatversion = 0\n",
        )
        .unwrap();
        let odb = gix_odb::at(git.join("objects"), gix_hash::Kind::Sha1).unwrap();
        let dest = tmp.path().join("templates");
        Self {
            _tmp: tmp,
            root,
            dest,
            odb,
        }
    }

    fn blob(&self, data: &[u8]) -> ObjectId {
        self.odb.write_buf(gix_object::Kind::Blob, data).unwrap()
    }

    /// A raw tree from (mode, name, id), in the order given (so hostile orders are possible).
    fn tree(&self, entries: &[(&str, &[u8], ObjectId)]) -> ObjectId {
        let mut data = Vec::new();
        for (mode, name, id) in entries {
            data.extend_from_slice(mode.as_bytes());
            data.push(b' ');
            data.extend_from_slice(name);
            data.push(0);
            data.extend_from_slice(id.as_slice());
        }
        self.odb.write_buf(gix_object::Kind::Tree, &data).unwrap()
    }

    fn commit(&self, tree: ObjectId, parent: Option<ObjectId>) -> String {
        let mut body = format!("tree {tree}\n");
        if let Some(p) = parent {
            body.push_str(&format!("parent {p}\n"));
        }
        body.push_str(
            "author t <t@example.invalid> 0 +0000\ncommitter t <t@example.invalid> 0 +0000\n\nm\n",
        );
        self.odb
            .write_buf(gix_object::Kind::Commit, body.as_bytes())
            .unwrap()
            .to_string()
    }
}

fn sample(repo: &Repo) -> (String, ObjectId) {
    let readme = repo.blob(b"hello\n");
    let script = repo.blob(b"#!/bin/sh\necho hi\n");
    let target = repo.blob(b"../README");
    let same = repo.blob(b"hello\n");
    let sub = repo.tree(&[
        ("100755", b"run.sh", script),
        ("120000", b"up", target),
        ("100644", b"\xff\xfename", same),
    ]);
    let gitlink = ObjectId::from_hex(b"1111111111111111111111111111111111111111").unwrap();
    let root = repo.tree(&[
        ("100644", b"README", readme),
        ("040000", b"bin", sub),
        ("160000", b"vendor", gitlink),
    ]);
    let first = repo.commit(root, None);
    let second = repo.commit(root, Some(ObjectId::from_hex(first.as_bytes()).unwrap()));
    (second, root)
}

#[test]
fn full_object_ids_only() {
    for bad in [
        "main",
        "HEAD",
        "",
        "abc1234",
        "ABCDEF0123456789ABCDEF0123456789ABCDEF01",
        "g123456789abcdef0123456789abcdef01234567",
        "0123456789abcdef0123456789abcdef0123456",
        "0123456789abcdef0123456789abcdef012345678",
    ] {
        assert!(
            matches!(
                parse_full_object_id(bad),
                Err(WorkspaceError::NotAFullObjectId { .. })
            ),
            "{bad:?}"
        );
    }
    assert!(parse_full_object_id("0123456789abcdef0123456789abcdef01234567").is_ok());
    assert!(matches!(
        parse_full_object_id(&"a".repeat(64)),
        Err(WorkspaceError::UnsupportedObjectFormat { .. })
    ));
}

#[test]
fn prewarm_writes_tree_pack_and_index() {
    let repo = Repo::new();
    let (commit, root_tree) = sample(&repo);
    let t = Template::prewarm(&repo.root, &commit, &repo.dest).unwrap();
    let tree = t.tree_dir();
    assert_eq!(t.tree_id(), &root_tree);
    assert_eq!(std::fs::read(tree.join("README")).unwrap(), b"hello\n");
    let script = std::fs::symlink_metadata(tree.join("bin/run.sh")).unwrap();
    assert_eq!(script.permissions().mode() & 0o777, 0o755);
    let readme = std::fs::symlink_metadata(tree.join("README")).unwrap();
    assert_eq!(readme.permissions().mode() & 0o111, 0);
    assert_eq!(
        std::fs::read_link(tree.join("bin/up")).unwrap(),
        Path::new("../README")
    );
    let odd = tree.join(std::ffi::OsStr::from_bytes(b"bin/\xff\xfename"));
    assert_eq!(std::fs::read(odd).unwrap(), b"hello\n");
    assert!(tree.join("vendor").is_dir());
    assert_eq!(std::fs::read_dir(tree.join("vendor")).unwrap().count(), 0);
    assert_eq!(
        t.counts(),
        TreeCounts {
            files: 3,
            symlinks: 1,
            dirs: 2,
            gitlinks: 1
        }
    );

    // The workspace's own object database holds the commit, both trees and every blob.
    let git = tree.join(".git");
    assert_eq!(
        std::fs::read_to_string(git.join("HEAD")).unwrap(),
        format!("{commit}\n")
    );
    assert_eq!(
        std::fs::read_to_string(git.join("shallow")).unwrap(),
        format!("{commit}\n")
    );
    assert!(!git.join("hooks").exists());
    let ws_odb = gix_odb::at(git.join("objects"), gix_hash::Kind::Sha1).unwrap();
    let mut buf = Vec::new();
    let c = ws_odb
        .try_find(&ObjectId::from_hex(commit.as_bytes()).unwrap(), &mut buf)
        .unwrap()
        .unwrap();
    assert_eq!(c.kind, gix_object::Kind::Commit);
    let mut src_buf = Vec::new();
    for id in [root_tree, repo.blob(b"hello\n"), repo.blob(b"../README")] {
        let ours = ws_odb.try_find(&id, &mut buf).unwrap().unwrap();
        let theirs = repo.odb.try_find(&id, &mut src_buf).unwrap().unwrap();
        assert_eq!((ours.kind, ours.data), (theirs.kind, theirs.data));
    }

    // The index lists every non-tree entry with the right mode.
    let index = gix_index::File::at(
        git.join("index"),
        gix_hash::Kind::Sha1,
        false,
        gix_index::decode::Options::default(),
    )
    .unwrap();
    let listed: Vec<(Vec<u8>, gix_index::entry::Mode)> = index
        .entries()
        .iter()
        .map(|e| (e.path(&index).to_vec(), e.mode))
        .collect();
    assert_eq!(
        listed,
        vec![
            (b"README".to_vec(), gix_index::entry::Mode::FILE),
            (
                b"bin/run.sh".to_vec(),
                gix_index::entry::Mode::FILE_EXECUTABLE
            ),
            (b"bin/up".to_vec(), gix_index::entry::Mode::SYMLINK),
            (b"bin/\xff\xfename".to_vec(), gix_index::entry::Mode::FILE),
            (b"vendor".to_vec(), gix_index::entry::Mode::COMMIT),
        ]
    );
    let readme_entry = &index.entries()[0];
    assert_eq!(readme_entry.stat.size, 6);

    // Reuse, and a different commit gets a different key.
    let again = Template::prewarm(&repo.root, &commit, &repo.dest).unwrap();
    assert!(again.was_reused());
    let other = repo.commit(root_tree, None);
    let t2 = Template::prewarm(&repo.root, &other, &repo.dest).unwrap();
    assert_ne!(t2.key(), t.key());
    assert!(
        !t2.tree_dir().join(".git/shallow").exists(),
        "root commit is not shallow"
    );

    let copy = repo.dest.join("copy");
    t.materialize_copy(&copy).unwrap();
    assert_eq!(
        std::fs::read_link(copy.join("bin/up")).unwrap(),
        Path::new("../README")
    );
    assert_eq!(
        std::fs::symlink_metadata(copy.join("bin/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    assert_eq!(
        std::fs::read(copy.join(".git/index")).unwrap(),
        std::fs::read(git.join("index")).unwrap()
    );
}

#[test]
fn hostile_trees_fail_without_publishing() {
    let repo = Repo::new();
    let blob = repo.blob(b"x");
    let outside = repo.dest.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let link = repo.blob(outside.as_os_str().as_bytes());
    let inner = repo.tree(&[("100644", b"pwned", blob)]);
    let cases: Vec<(&str, ObjectId)> = vec![
        ("dot-git", repo.tree(&[("100644", b".git", blob)])),
        ("dot-Git dir", repo.tree(&[("040000", b".Git", inner)])),
        ("dotdot", repo.tree(&[("040000", b"..", inner)])),
        (
            "dup",
            repo.tree(&[("100644", b"a", blob), ("100644", b"a", blob)]),
        ),
        (
            "symlink then dir",
            repo.tree(&[("120000", b"a", link), ("040000", b"a", inner)]),
        ),
        (
            "bad mode",
            repo.tree(&[("100000", b"m", blob), ("070000", b"n", blob)]),
        ),
        ("tree is a blob", repo.tree(&[("040000", b"d", blob)])),
        ("blob is a tree", repo.tree(&[("100644", b"f", inner)])),
        (
            "missing blob",
            repo.tree(&[(
                "100644",
                b"gone",
                ObjectId::from_hex(b"2222222222222222222222222222222222222222").unwrap(),
            )]),
        ),
    ];
    for (name, tree) in cases {
        let commit = repo.commit(tree, None);
        let err = Template::prewarm(&repo.root, &commit, &repo.dest).unwrap_err();
        assert!(
            matches!(
                err,
                WorkspaceError::UnsafePath { .. }
                    | WorkspaceError::UnsupportedMode { .. }
                    | WorkspaceError::WrongObjectKind { .. }
                    | WorkspaceError::MissingObject { .. }
            ),
            "{name}: {err}"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "{name}");
        let left: Vec<_> = std::fs::read_dir(&repo.dest)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
    // A blob id is not a commit.
    assert!(matches!(
        Template::prewarm(&repo.root, &blob.to_string(), &repo.dest),
        Err(WorkspaceError::NotACommit { .. })
    ));
}

#[test]
fn pack_writer_round_trips_through_gix_pack() {
    let tmp = tempfile::tempdir().unwrap();
    let objects = tmp.path().join("objects");
    let pack_dir = objects.join("pack");
    std::fs::create_dir_all(&pack_dir).unwrap();
    let mut expected = Vec::new();
    let mut big = vec![0u8; 300_000];
    for (i, b) in big.iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    let datas: Vec<Vec<u8>> = vec![Vec::new(), b"a".to_vec(), vec![b'z'; 17], big];
    for data in &datas {
        let id =
            gix_object::compute_hash(gix_hash::Kind::Sha1, gix_object::Kind::Blob, data).unwrap();
        expected.push((id, data.clone()));
    }
    let mut pack = pack::PackWriter::create(&pack_dir, "t", expected.len() as u32).unwrap();
    for (id, data) in &expected {
        pack.add(*id, gix_object::Kind::Blob, data).unwrap();
    }
    pack.finish().unwrap();
    let odb = gix_odb::at(&objects, gix_hash::Kind::Sha1).unwrap();
    let mut buf = Vec::new();
    for (id, data) in &expected {
        let found = odb.try_find(id, &mut buf).unwrap().unwrap();
        assert_eq!(found.kind, gix_object::Kind::Blob);
        assert_eq!(found.data, data.as_slice());
    }
    // A writer that got fewer objects than announced refuses to finish.
    let short = pack::PackWriter::create(&pack_dir, "short", 2).unwrap();
    assert!(short.finish().is_err());
}

#[test]
fn concurrent_prewarms_of_one_key_publish_once() {
    let repo = Repo::new();
    let (commit, _) = sample(&repo);
    let results: Vec<Result<Template, WorkspaceError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| Template::prewarm(&repo.root, &commit, &repo.dest)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let templates: Vec<Template> = results.into_iter().map(Result::unwrap).collect();
    assert!(
        templates
            .iter()
            .all(|t| t.tree_dir() == templates[0].tree_dir())
    );
    assert!(templates.iter().filter(|t| !t.was_reused()).count() >= 1);
    let names: Vec<_> = std::fs::read_dir(&repo.dest)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "only the published template remains: {names:?}"
    );
    assert!(templates[0].tree_dir().join(".git/index").is_file());
}
