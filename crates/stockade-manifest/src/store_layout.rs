//! The on-disk layout of an artifact store, shared by the writer and the verifier.
//!
//! ```text
//! <store>/artifacts/blake3/<64 hex>   content-addressed artifacts (patch, blobs, logs)
//! <store>/manifests/<attempt id>.json manifests, written last
//! <store>/tmp/                        temporary files before their atomic rename
//! ```

use std::path::PathBuf;

/// Directory (under the store root) holding artifacts by BLAKE3 address.
pub const ARTIFACTS_DIR: &str = "artifacts/blake3";
/// Directory (under the store root) holding manifests.
pub const MANIFESTS_DIR: &str = "manifests";

/// Whether `s` is exactly 64 lowercase hex digits (so it is safe to join into a path).
pub fn is_valid_blake3_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is a safe identifier for file names: 1–128 of `[A-Za-z0-9._-]`, not starting
/// with a dot.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Store-relative path of an artifact; `None` unless `blake3_hex` is a valid address.
pub fn artifact_relative_path(blake3_hex: &str) -> Option<PathBuf> {
    is_valid_blake3_hex(blake3_hex).then(|| PathBuf::from(ARTIFACTS_DIR).join(blake3_hex))
}

/// Store-relative path of an attempt's manifest; `None` unless `attempt_id` is a valid id.
pub fn manifest_relative_path(attempt_id: &str) -> Option<PathBuf> {
    is_valid_id(attempt_id).then(|| PathBuf::from(MANIFESTS_DIR).join(format!("{attempt_id}.json")))
}
