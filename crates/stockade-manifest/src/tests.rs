use super::*;
use proptest::prelude::*;
use sha2::Digest;

fn artifact(bytes: &[u8]) -> ArtifactRef {
    ArtifactRef {
        blake3: blake3::hash(bytes).to_hex().to_string(),
        sha256: hex::encode(sha2::Sha256::digest(bytes)),
        size: bytes.len() as u64,
    }
}

fn sample(patch: &[u8], blob: &[u8]) -> ResultManifest {
    let b = artifact(blob);
    ResultManifest {
        schema_version: SCHEMA_VERSION,
        attempt_id: "att-1".into(),
        work_unit_id: "wu".into(),
        preset_id: "preset".into(),
        base_commit: "0".repeat(40),
        policy_id: "policy".into(),
        capability_attestation: serde_json::json!({"z": 1, "a": [true, null]}),
        bounds: BoundsSpec {
            max_file_bytes: 10,
            max_patch_bytes: 20,
            max_changes: 30,
            max_log_bytes: 40,
        },
        accepted: vec![
            AcceptedChange {
                path: RepoPath::new(b"z".to_vec()),
                kind: ChangeKind::Deleted,
                old: Some(OldEntry {
                    mode: FileMode::Regular,
                    git_blob: "1".repeat(40),
                }),
                new: None,
            },
            AcceptedChange {
                path: RepoPath::new(b"a\xff".to_vec()),
                kind: ChangeKind::Added,
                old: None,
                new: Some(NewEntry {
                    mode: FileMode::Executable,
                    git_blob: "2".repeat(40),
                    size: b.size,
                    blake3: b.blake3.clone(),
                    sha256: b.sha256.clone(),
                }),
            },
        ],
        rejected: vec![RejectedChange {
            path: RepoPath::new(b".git/config".to_vec()),
            kind: Some(ChangeKind::Modified),
            reason: RejectReason::GitDir,
        }],
        artifacts: Artifacts {
            patch: Some(artifact(patch)),
            blobs: vec![b],
            logs: vec![],
        },
        bounds_hit: vec![],
        exit_report: serde_json::json!({"exit_code": 0}),
        completion: Completion::Complete,
    }
}

#[test]
fn canonical_roundtrip_and_order() {
    let m = sample(b"patch", b"blob");
    let bytes = m.to_canonical_json().unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // Sorted: the non-UTF-8 path (0x61 0xff) sorts before "z"; hex form used for it.
    let a = text.find("\"hex\":\"61ff\"").unwrap();
    let z = text.find("\"path\":\"z\"").unwrap();
    assert!(a < z);
    assert!(text.find("\"accepted\"").unwrap() < text.find("\"artifacts\"").unwrap());
    let back = ResultManifest::from_canonical_json(&bytes).unwrap();
    let mut norm = m.clone();
    norm.normalize();
    assert_eq!(back, norm);
}

#[test]
fn non_canonical_bytes_are_refused() {
    let m = sample(b"p", b"b");
    let bytes = m.to_canonical_json().unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    assert_eq!(
        ResultManifest::from_canonical_json(&pretty),
        Err(CanonicalError::NotCanonical)
    );
    let mut v2 = value.clone();
    v2["schema_version"] = serde_json::json!(2);
    let b2 = to_canonical_json(&v2).unwrap();
    assert_eq!(
        ResultManifest::from_canonical_json(&b2),
        Err(CanonicalError::SchemaVersion(Some(2)))
    );
    let mut v3 = value;
    v3["extra"] = serde_json::json!(1);
    let mut b3 = to_canonical_json(&v3).unwrap();
    b3.push(b'\n');
    assert!(matches!(
        ResultManifest::from_canonical_json(&b3),
        Err(CanonicalError::Parse(_))
    ));
}

#[test]
fn floats_are_refused() {
    assert!(matches!(
        to_canonical_json(&serde_json::json!({"x": 1.5})),
        Err(CanonicalError::Float(_))
    ));
}

#[test]
fn hex_form_of_utf8_path_is_refused() {
    let r: Result<RepoPath, _> = serde_json::from_str("{\"hex\":\"61\"}");
    assert!(r.is_err());
    let r: RepoPath = serde_json::from_str("{\"hex\":\"ff0a\"}").unwrap();
    assert_eq!(r.as_bytes(), b"\xff\n");
}

#[test]
fn snapshot_sample_manifest() {
    let m = sample(b"patch", b"blob");
    let text = String::from_utf8(m.to_canonical_json().unwrap()).unwrap();
    insta::assert_snapshot!(text);
}

fn write_store(m: &ResultManifest, files: &[&[u8]]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(ARTIFACTS_DIR)).unwrap();
    std::fs::create_dir_all(dir.path().join(MANIFESTS_DIR)).unwrap();
    for f in files {
        let a = artifact(f);
        std::fs::write(
            dir.path().join(artifact_relative_path(&a.blake3).unwrap()),
            f,
        )
        .unwrap();
    }
    let mp = dir
        .path()
        .join(manifest_relative_path(&m.attempt_id).unwrap());
    std::fs::write(&mp, m.to_canonical_json().unwrap()).unwrap();
    (dir, mp)
}

#[test]
fn verify_accepts_intact_store() {
    let m = sample(b"patch", b"blob");
    let (_d, mp) = write_store(&m, &[b"patch", b"blob"]);
    let v = verify(&mp).unwrap();
    assert_eq!(v.manifest().attempt_id, "att-1");
}

#[test]
fn verify_reports_every_mismatch() {
    let m = sample(b"patch", b"blob");
    let (d, mp) = write_store(&m, &[b"patch"]);
    // Tamper the patch: same name, other bytes.
    let p = d
        .path()
        .join(artifact_relative_path(&artifact(b"patch").blake3).unwrap());
    std::fs::write(&p, b"patcX").unwrap();
    let Err(VerifyError::Mismatches { mismatches, .. }) = verify(&mp) else {
        panic!("expected mismatches");
    };
    assert!(
        mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::Blake3 { .. }))
    );
    assert!(
        mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::Sha256 { .. }))
    );
    assert!(
        mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::Missing { .. }))
    );
}

#[test]
fn verify_refuses_traversal_address() {
    let mut m = sample(b"patch", b"blob");
    m.artifacts.logs.push(LogArtifact {
        name: "x".into(),
        artifact: ArtifactRef {
            blake3: "../../etc/passwd".into(),
            sha256: String::new(),
            size: 0,
        },
        truncated: false,
    });
    let (_d, mp) = write_store(&m, &[b"patch", b"blob"]);
    let Err(VerifyError::Mismatches { mismatches, .. }) = verify(&mp) else {
        panic!("expected mismatches");
    };
    assert_eq!(
        mismatches,
        vec![Mismatch::BadAddress {
            address: "../../etc/passwd".into()
        }]
    );
}

proptest! {
    #[test]
    fn repo_path_roundtrips(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        let p = RepoPath::new(bytes.clone());
        let s = serde_json::to_string(&p).unwrap();
        let back: RepoPath = serde_json::from_str(&s).unwrap();
        prop_assert_eq!(back.as_bytes(), &bytes[..]);
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = ResultManifest::from_canonical_json(&bytes);
    }
}

#[test]
fn in_memory_verify_reports_missing_blob() {
    let m = sample(b"patch", b"blob");
    let (d, _mp) = write_store(&m, &[b"patch"]);
    let errs = m.verify(d.path()).unwrap_err();
    assert!(errs.iter().any(|e| matches!(e, Mismatch::Missing { .. })));
    let (d2, _) = write_store(&m, &[b"patch", b"blob"]);
    m.verify(d2.path()).unwrap();
}
