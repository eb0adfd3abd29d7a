//! References to secrets, by name only.
//!
//! This crate never holds a secret *value*: a [`SecretRef`] names where the host-side gateway
//! reads the value (an environment variable of the gateway process, or a file on the host),
//! so `Debug`, `Display` and every serialized policy show only that name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where the gateway reads one secret value on the host, never the value itself.
///
/// Written `env:NAME` (an environment variable of the gateway's process; `NAME` matches
/// `[A-Za-z_][A-Za-z0-9_]*`) or `file:/absolute/path` (a file on the host, read by the gateway).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    source: SecretSourceOwned,
}

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum SecretSourceOwned {
    Env(String),
    File(String),
}

/// The two kinds of place a [`SecretRef`] can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource<'a> {
    /// An environment variable of the host-side gateway process.
    Env(&'a str),
    /// An absolute file path on the host.
    File(&'a str),
}

/// Why a text is not a secret reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretRefError {
    /// Neither `env:` nor `file:`.
    #[error("secret reference must be `env:NAME` or `file:/absolute/path`")]
    Kind,
    /// `env:` followed by something that is not an environment variable name.
    #[error(
        "secret reference `env:…` must name an environment variable ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes)"
    )]
    EnvName,
    /// `file:` followed by a relative, non-normalized or NUL-containing path.
    #[error("secret reference `file:…` must be an absolute normalized path without `..`")]
    FilePath,
}

pub(crate) fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    s.len() <= 128
        && matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// An absolute, normalized host path: starts with `/`, no empty, `.` or `..` segments (a single
/// trailing `/` is not allowed either), no NUL, at most 4096 bytes.
pub(crate) fn is_absolute_normalized(path: &str) -> bool {
    path == "/"
        || (path.len() <= 4096
            && !path.contains('\0')
            && path.strip_prefix('/').is_some_and(|rest| {
                rest.split('/')
                    .all(|s| !s.is_empty() && s != "." && s != "..")
            }))
}

impl SecretRef {
    /// Parses `env:NAME` or `file:/absolute/path`.
    pub fn parse(s: &str) -> Result<SecretRef, SecretRefError> {
        if let Some(name) = s.strip_prefix("env:") {
            SecretRef::env(name)
        } else if let Some(path) = s.strip_prefix("file:") {
            SecretRef::file(path)
        } else {
            Err(SecretRefError::Kind)
        }
    }

    /// A reference to an environment variable of the gateway's process.
    pub fn env(name: &str) -> Result<SecretRef, SecretRefError> {
        if !is_env_name(name) {
            return Err(SecretRefError::EnvName);
        }
        Ok(SecretRef {
            source: SecretSourceOwned::Env(name.to_owned()),
        })
    }

    /// A reference to a file on the host.
    pub fn file(path: &str) -> Result<SecretRef, SecretRefError> {
        if path == "/" || !is_absolute_normalized(path) {
            return Err(SecretRefError::FilePath);
        }
        Ok(SecretRef {
            source: SecretSourceOwned::File(path.to_owned()),
        })
    }

    /// Where the value lives.
    pub fn source(&self) -> SecretSource<'_> {
        match &self.source {
            SecretSourceOwned::Env(n) => SecretSource::Env(n),
            SecretSourceOwned::File(p) => SecretSource::File(p),
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            SecretSourceOwned::Env(n) => write!(f, "env:{n}"),
            SecretSourceOwned::File(p) => write!(f, "file:{p}"),
        }
    }
}

impl fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretRef({self})")
    }
}

impl FromStr for SecretRef {
    type Err = SecretRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SecretRef::parse(s)
    }
}

impl Serialize for SecretRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SecretRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SecretRef::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// One header the host-side gateway injects into requests to an origin.
///
/// The referenced secret holds the *whole* header value (for example `Bearer sk-…` for
/// `authorization`), so the gateway needs no templating. The header name is checked when a
/// policy is resolved: it must be an HTTP token and not a framing or hop-by-hop header.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRef {
    /// The header name (compared case-insensitively; resolution lower-cases it).
    pub header: String,
    /// Where the gateway reads the header's value.
    pub secret: SecretRef,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        let e = SecretRef::parse("env:OPENAI_API_KEY").unwrap();
        assert_eq!(e.source(), SecretSource::Env("OPENAI_API_KEY"));
        assert_eq!(e.to_string(), "env:OPENAI_API_KEY");
        assert_eq!(format!("{e:?}"), "SecretRef(env:OPENAI_API_KEY)");
        let f = SecretRef::parse("file:/etc/stockade/key").unwrap();
        assert_eq!(f.source(), SecretSource::File("/etc/stockade/key"));
        for bad in [
            "sk-abc",
            "env:",
            "env:sk-abc",
            "env:1A",
            "file:relative",
            "file:/",
            "file:/a/../b",
            "file:/a//b",
            "ENV:X",
        ] {
            assert!(SecretRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_is_the_name() {
        let h = HeaderRef {
            header: "authorization".into(),
            secret: SecretRef::parse("env:K").unwrap(),
        };
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"header":"authorization","secret":"env:K"}"#);
        assert_eq!(serde_json::from_str::<HeaderRef>(&json).unwrap(), h);
        assert!(
            serde_json::from_str::<HeaderRef>(r#"{"header":"a","secret":"Bearer sk-live"}"#)
                .is_err()
        );
    }
}
