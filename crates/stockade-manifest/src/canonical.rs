//! Canonical JSON: object keys sorted by their UTF-8 bytes, no insignificant whitespace, no
//! floats, strings escaped by serde_json's rules.
//!
//! The writer sorts keys itself rather than trusting `serde_json::Map`'s order, so a feature
//! (`preserve_order`) switched on elsewhere in the build cannot change the bytes.

/// Why JSON could not be made or read canonically.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// A floating-point number appeared; canonical JSON carries integers only.
    #[error("floating-point number {0} is not allowed in canonical json")]
    Float(String),
    /// Serialization failed.
    #[error("cannot serialize manifest: {0}")]
    Serialize(String),
    /// The bytes are not valid JSON or do not match the manifest schema.
    #[error("cannot parse manifest: {0}")]
    Parse(String),
    /// The schema version is missing or not the one this crate reads.
    #[error("unsupported manifest schema version {0:?}")]
    SchemaVersion(Option<u64>),
    /// The bytes parse but are not the canonical rendering (reordered keys, whitespace, unsorted
    /// arrays, or a non-canonical path encoding).
    #[error("manifest bytes are not in canonical form")]
    NotCanonical,
}

/// Renders `value` as canonical JSON bytes (no trailing newline).
pub fn to_canonical_json(value: &serde_json::Value) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(1024);
    write_value(value, &mut out)?;
    Ok(out)
}

fn write_value(value: &serde_json::Value, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    use serde_json::Value;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if n.is_f64() {
                return Err(CanonicalError::Float(n.to_string()));
            }
            out.extend_from_slice(n.to_string().as_bytes());
        }
        Value::String(s) => write_string(s, out)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out)?;
                out.push(b':');
                write_value(v, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_string(s: &str, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    let rendered =
        serde_json::to_string(s).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
    out.extend_from_slice(rendered.as_bytes());
    Ok(())
}
