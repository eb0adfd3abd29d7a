//! Content-keyed templates: the first phase of the two-phase contract.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a backend is asked to prewarm.
///
/// `lower` is the exact-SHA checkout (from `stockade-workspace`) that becomes the read-only
/// lower layer of every session; `source_id` names its content (for example the workspace
/// template key, which covers the canonical repository and the commit). `files` are extra byte
/// files the template carries (path relative to the workspace root → bytes); their bytes are
/// part of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSpec {
    /// Identity of the lower layer's content (never a mutable name such as a branch).
    pub source_id: String,
    /// The directory holding the lower layer.
    pub lower: PathBuf,
    /// Extra files supplied as bytes, keyed by workspace-relative path.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// A template's content key: blake3 over the backend's name, the source identity and every
/// supplied file's path and bytes, each length-prefixed so no two specs collide by
/// concatenation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TemplateKey(String);

impl TemplateKey {
    /// Computes the key of `spec` as prewarmed by `backend`.
    pub fn compute(backend: &str, spec: &TemplateSpec) -> TemplateKey {
        let mut h = blake3::Hasher::new();
        h.update(b"stockade-template-v1\0");
        for part in [backend.as_bytes(), spec.source_id.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&(spec.files.len() as u64).to_le_bytes());
        for (path, bytes) in &spec.files {
            h.update(&(path.len() as u64).to_le_bytes());
            h.update(path.as_bytes());
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        TemplateKey(h.finalize().to_hex().to_string())
    }

    /// The key as lower-case hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TemplateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A prewarmed template: reusable by every session of the same backend, never removed by a
/// session's `delete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    key: TemplateKey,
    backend: String,
    lower: PathBuf,
    source_id: String,
}

impl Template {
    /// Records a template a backend has prewarmed. Backends call this from
    /// [`crate::Backend::prewarm`] after the template's state is durable.
    pub fn new(backend: &str, spec: &TemplateSpec, lower: PathBuf) -> Template {
        Template {
            key: TemplateKey::compute(backend, spec),
            backend: backend.to_owned(),
            lower,
            source_id: spec.source_id.clone(),
        }
    }

    /// The content key.
    pub fn key(&self) -> &TemplateKey {
        &self.key
    }

    /// The backend that prewarmed it.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The read-only lower layer every session of this template sees.
    pub fn lower(&self) -> &Path {
        &self.lower
    }

    /// The identity of the lower layer's content.
    pub fn source_id(&self) -> &str {
        &self.source_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(files: &[(&str, &[u8])]) -> TemplateSpec {
        TemplateSpec {
            source_id: "repo@abc".into(),
            lower: PathBuf::from("/nonexistent"),
            files: files
                .iter()
                .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
                .collect(),
        }
    }

    #[test]
    fn key_covers_backend_source_and_every_file_byte() {
        let base = TemplateKey::compute("linux", &spec(&[("a", b"1")]));
        assert_eq!(base, TemplateKey::compute("linux", &spec(&[("a", b"1")])));
        assert_ne!(base, TemplateKey::compute("other", &spec(&[("a", b"1")])));
        assert_ne!(base, TemplateKey::compute("linux", &spec(&[("a", b"2")])));
        assert_ne!(base, TemplateKey::compute("linux", &spec(&[("b", b"1")])));
        assert_ne!(
            base,
            TemplateKey::compute("linux", &spec(&[("a", b"1"), ("b", b"")]))
        );
        let mut other_source = spec(&[("a", b"1")]);
        other_source.source_id = "repo@abd".into();
        assert_ne!(base, TemplateKey::compute("linux", &other_source));
        // Length prefixes: moving bytes between path and content changes the key.
        assert_ne!(
            TemplateKey::compute("linux", &spec(&[("ab", b"c")])),
            TemplateKey::compute("linux", &spec(&[("a", b"bc")]))
        );
    }
}
