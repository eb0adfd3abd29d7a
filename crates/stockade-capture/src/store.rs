//! The content-addressed artifact store.
//!
//! Layout (shared with the verifier in `stockade-manifest`): `artifacts/blake3/<hex>`,
//! `manifests/<attempt>.json`, `tmp/`. Every file is written to `tmp/` and renamed into place.
//! Before the manifest is written, one `syncfs` makes every artifact durable (one flush instead
//! of one `fsync` per blob); the manifest itself is then written to `tmp/`, `fsync`ed, renamed
//! with `RENAME_NOREPLACE` (never overwriting) and its directory flushed. A crash therefore
//! leaves no manifest, or a manifest whose artifacts are all durable. An artifact left behind by
//! a crash is never trusted: [`ArtifactStore::put`] re-hashes an existing file and rewrites it
//! unless its bytes are exactly the addressed ones.

use crate::error::StoreError;
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use stockade_manifest::{
    ARTIFACTS_DIR, ArtifactRef, MANIFESTS_DIR, ResultManifest, artifact_relative_path,
    manifest_relative_path,
};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A directory of content-addressed artifacts and manifests, outside every workspace and the
/// canonical repository.
#[derive(Debug)]
pub struct ArtifactStore {
    root: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl ArtifactStore {
    /// Opens (creating if needed) a store rooted at `root`; the root is canonicalized.
    pub fn open(root: &Path) -> Result<ArtifactStore, StoreError> {
        for sub in [ARTIFACTS_DIR, MANIFESTS_DIR, "tmp"] {
            let p = root.join(sub);
            std::fs::create_dir_all(&p).map_err(io(&p))?;
        }
        let root = root.canonicalize().map_err(io(root))?;
        Ok(ArtifactStore { root })
    }

    /// The canonical store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute path of an artifact.
    pub fn artifact_path(&self, artifact: &ArtifactRef) -> Option<PathBuf> {
        artifact_relative_path(&artifact.blake3).map(|p| self.root.join(p))
    }

    /// Absolute path where the manifest of `attempt_id` lives.
    pub fn manifest_path(&self, attempt_id: &str) -> Result<PathBuf, StoreError> {
        manifest_relative_path(attempt_id)
            .map(|p| self.root.join(p))
            .ok_or_else(|| StoreError::BadAttemptId(attempt_id.to_owned()))
    }

    /// Stores `bytes` under their BLAKE3 address (atomically; a no-op when already present).
    pub fn put(&self, bytes: &[u8]) -> Result<ArtifactRef, StoreError> {
        let r = ArtifactRef {
            blake3: blake3::hash(bytes).to_hex().to_string(),
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
            size: bytes.len() as u64,
        };
        let rel = artifact_relative_path(&r.blake3).ok_or_else(|| StoreError::Io {
            path: self.root.clone(),
            source: std::io::Error::other("blake3 produced an invalid address"),
        })?;
        let dest = self.root.join(rel);
        if let Ok(m) = std::fs::symlink_metadata(&dest)
            && m.is_file()
            && m.len() == r.size
            && std::fs::read(&dest).is_ok_and(|existing| existing == bytes)
        {
            return Ok(r);
        }
        let tmp = self.write_tmp(bytes, false)?;
        std::fs::rename(&tmp, &dest).map_err(io(&dest))?;
        Ok(r)
    }

    /// Makes every artifact written so far durable: `syncfs` on the store's file system, then
    /// a flush of the artifact directory.
    pub fn sync(&self) -> Result<(), StoreError> {
        let dir = self.root.join(ARTIFACTS_DIR);
        let f = std::fs::File::open(&dir).map_err(io(&dir))?;
        rustix::fs::syncfs(&f).map_err(|e| StoreError::Io {
            path: dir.clone(),
            source: e.into(),
        })?;
        f.sync_all().map_err(io(&dir))
    }

    /// Writes the manifest last: canonical JSON, atomically, never replacing an existing one.
    pub fn write_manifest(&self, manifest: &ResultManifest) -> Result<PathBuf, StoreError> {
        let dest = self.manifest_path(&manifest.attempt_id)?;
        let bytes = manifest.to_canonical_json()?;
        self.sync()?;
        let tmp = self.write_tmp(&bytes, true)?;
        let cwd = rustix::fs::CWD;
        match rustix::fs::renameat_with(cwd, &tmp, cwd, &dest, rustix::fs::RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(StoreError::ManifestExists(dest));
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(StoreError::Io {
                    path: dest,
                    source: e.into(),
                });
            }
        }
        let dir = self.root.join(MANIFESTS_DIR);
        std::fs::File::open(&dir)
            .and_then(|f| f.sync_all())
            .map_err(io(&dir))?;
        Ok(dest)
    }

    fn write_tmp(&self, bytes: &[u8], fsync: bool) -> Result<PathBuf, StoreError> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = self.root.join("tmp").join(format!(
            "{}-{}-{n}",
            std::process::id(),
            blake3::hash(bytes).to_hex()
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        let res = f
            .write_all(bytes)
            .and_then(|()| if fsync { f.sync_all() } else { Ok(()) });
        if let Err(e) = res {
            let _ = std::fs::remove_file(&tmp);
            return Err(StoreError::Io {
                path: tmp,
                source: e,
            });
        }
        Ok(tmp)
    }
}
