//! Lossless repository paths.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A repository-relative path as raw bytes (git paths need not be UTF-8).
///
/// In JSON it is a plain string when the bytes are valid UTF-8, and `{"hex": "..."}` otherwise.
/// Parsing refuses the hex form for bytes that are valid UTF-8, so every path has exactly one
/// rendering.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoPath(Vec<u8>);

impl RepoPath {
    /// Wraps raw path bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> RepoPath {
        RepoPath(bytes.into())
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Consumes the path, returning its bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.0) {
            Ok(s) => f.write_str(s),
            Err(_) => write!(f, "hex:{}", hex::encode(&self.0)),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HexForm {
    hex: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Either {
    Text(String),
    Hex(HexForm),
}

impl Serialize for RepoPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(s) => serializer.serialize_str(s),
            Err(_) => HexForm {
                hex: hex::encode(&self.0),
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for RepoPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RepoPath, D::Error> {
        use serde::de::Error;
        match Either::deserialize(deserializer)? {
            Either::Text(s) => Ok(RepoPath(s.into_bytes())),
            Either::Hex(h) => {
                let bytes = hex::decode(&h.hex).map_err(D::Error::custom)?;
                if std::str::from_utf8(&bytes).is_ok() || h.hex != hex::encode(&bytes) {
                    return Err(D::Error::custom(
                        "path in hex form must be non-utf-8 and lowercase hex",
                    ));
                }
                Ok(RepoPath(bytes))
            }
        }
    }
}
