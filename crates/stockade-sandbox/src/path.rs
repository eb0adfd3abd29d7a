//! Session paths: normalized, relative to the session workspace, unable to name anything
//! outside it.

use std::fmt;

/// Why a path cannot name a location inside the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty or names the workspace root itself where a file is needed.
    #[error("path is empty")]
    Empty,
    /// The path contains a NUL byte.
    #[error("path `{0}` contains a NUL byte")]
    Nul(String),
    /// A `..` would climb above the workspace root.
    #[error("path `{0}` climbs above the session workspace")]
    Escapes(String),
    /// An absolute path outside the workspace mount point.
    #[error("path `{0}` is absolute and not inside the session workspace")]
    Absolute(String),
    /// A component of the path is a symbolic link; session I/O never follows links.
    #[error(
        "path `{path}` goes through the symbolic link `{link}`; session I/O never follows links"
    )]
    Symlink {
        /// The whole path asked for.
        path: String,
        /// The component that is a link.
        link: String,
    },
    /// A non-final component exists but is not a directory.
    #[error("path `{path}`: `{component}` is not a directory")]
    NotADirectory {
        /// The whole path asked for.
        path: String,
        /// The component that is not a directory.
        component: String,
    },
}

/// A normalized path relative to the session workspace: no `.`, no `..`, no empty
/// components, no NUL, never absolute.
///
/// A `SessionPath` is lexically inside the session. [`crate::Session::resolve`] additionally
/// checks on the backend that no component is a symbolic link.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionPath {
    components: Vec<String>,
}

impl SessionPath {
    /// Normalizes `path` lexically. `workspace_mount` is where the workspace appears inside
    /// the sandbox; an absolute path is accepted only below it.
    pub fn parse(path: &str, workspace_mount: Option<&str>) -> Result<SessionPath, PathError> {
        if path.contains('\0') {
            return Err(PathError::Nul(path.to_owned()));
        }
        let relative = if path.starts_with('/') {
            let mount = workspace_mount
                .map(|m| m.trim_end_matches('/'))
                .unwrap_or("");
            match path.strip_prefix(mount) {
                Some(rest) if !mount.is_empty() && (rest.is_empty() || rest.starts_with('/')) => {
                    rest
                }
                _ => return Err(PathError::Absolute(path.to_owned())),
            }
        } else {
            path
        };
        let mut components: Vec<String> = Vec::new();
        for part in relative.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if components.pop().is_none() {
                        return Err(PathError::Escapes(path.to_owned()));
                    }
                }
                other => components.push(other.to_owned()),
            }
        }
        if components.is_empty() {
            return Err(PathError::Empty);
        }
        Ok(SessionPath { components })
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// Every proper prefix of this path, outermost first (the directories to walk through).
    pub fn parents(&self) -> impl Iterator<Item = SessionPath> + '_ {
        (1..self.components.len()).map(|n| SessionPath {
            components: self.components[..n].to_vec(),
        })
    }

    /// The path as a relative `a/b/c` string.
    pub fn as_relative(&self) -> String {
        self.components.join("/")
    }
}

impl fmt::Display for SessionPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_relative())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_refuses_escapes() {
        assert_eq!(
            SessionPath::parse("a/./b//c", None).unwrap().as_relative(),
            "a/b/c"
        );
        assert_eq!(
            SessionPath::parse("a/x/../b", None).unwrap().as_relative(),
            "a/b"
        );
        assert_eq!(
            SessionPath::parse("../etc/passwd", None),
            Err(PathError::Escapes("../etc/passwd".into()))
        );
        assert_eq!(
            SessionPath::parse("a/../../b", None),
            Err(PathError::Escapes("a/../../b".into()))
        );
        assert_eq!(
            SessionPath::parse("/etc/passwd", Some("/work/ws")),
            Err(PathError::Absolute("/etc/passwd".into()))
        );
        assert_eq!(
            SessionPath::parse("/work/wsx/a", Some("/work/ws")),
            Err(PathError::Absolute("/work/wsx/a".into()))
        );
        assert_eq!(
            SessionPath::parse("/work/ws/a/b", Some("/work/ws"))
                .unwrap()
                .as_relative(),
            "a/b"
        );
        assert_eq!(
            SessionPath::parse("/work/ws/../x", Some("/work/ws")),
            Err(PathError::Escapes("/work/ws/../x".into()))
        );
        assert_eq!(SessionPath::parse("", None), Err(PathError::Empty));
        assert_eq!(SessionPath::parse("a/..", None), Err(PathError::Empty));
        assert!(matches!(
            SessionPath::parse("a\0b", None),
            Err(PathError::Nul(_))
        ));
    }

    #[test]
    fn parents_walk_outermost_first() {
        let p = SessionPath::parse("a/b/c", None).unwrap();
        let parents: Vec<String> = p.parents().map(|p| p.as_relative()).collect();
        assert_eq!(parents, vec!["a", "a/b"]);
    }

    proptest::proptest! {
        #[test]
        fn parsed_paths_never_climb(parts in proptest::collection::vec(proptest::prop_oneof![
            proptest::strategy::Just("..".to_string()),
            proptest::strategy::Just(".".to_string()),
            proptest::strategy::Just(String::new()),
            "[a-z]{1,3}",
        ], 0..8)) {
            let text = parts.join("/");
            if let Ok(p) = SessionPath::parse(&text, None) {
                proptest::prop_assert!(p.components().iter().all(|c| c != ".." && c != "." && !c.is_empty() && !c.contains('/')));
            }
        }
    }
}
