//! Candidate path scope and forbidden-path patterns (normalized, repository-relative).
//!
//! A [`PathPattern`] is a repository-relative glob over `/`-separated segments:
//!
//! * `*` matches zero or more bytes within one segment (never a `/`);
//! * `?` matches exactly one byte within one segment;
//! * `**` as a whole segment matches zero or more whole segments;
//! * every other byte matches itself (there are no character classes and no escapes).
//!
//! A pattern that names a directory also covers everything under it: `src` covers `src/a.rs`,
//! and `src/*.rs` covers `src/gen.rs/anything` should `gen.rs` be a directory.
//! Matching is on raw bytes because repository paths need not be UTF-8.
//!
//! A [`PathScope`] pairs allowed (candidate) patterns with forbidden ones; forbidden wins.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest pattern text accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 4096;

/// Why a pattern or a scope is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// The pattern is empty, or only `.` segments.
    #[error("path pattern `{0}` is empty")]
    Empty(String),
    /// The pattern starts with `/`.
    #[error("path pattern `{0}` is absolute; write it relative to the repository root")]
    Absolute(String),
    /// The pattern has a `..` segment.
    #[error("path pattern `{0}` has a `..` segment; patterns may not leave the repository")]
    ParentDir(String),
    /// The pattern has an empty segment (`a//b`).
    #[error("path pattern `{0}` has an empty segment")]
    EmptySegment(String),
    /// The pattern contains a NUL byte.
    #[error("path pattern {0:?} contains a NUL byte")]
    Nul(String),
    /// The pattern contains a backslash, which would be ambiguous (escape or separator).
    #[error(
        "path pattern `{0}` contains a backslash; use `/` between segments and `?` for a literal backslash"
    )]
    Backslash(String),
    /// The pattern is longer than [`MAX_PATTERN_LEN`].
    #[error("path pattern is {0} bytes long; the limit is 4096")]
    TooLong(usize),
    /// `**` glued to other characters inside a segment (`a**b`).
    #[error("path pattern `{0}`: `**` must be a whole segment")]
    DoubleStarInSegment(String),
    /// A scope with no allowed pattern would allow nothing: refused rather than silently empty.
    #[error("path scope has no allowed pattern; name at least one candidate path")]
    NoAllowed,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Segment {
    /// `**`: zero or more whole segments.
    AnyDepth,
    /// One segment with `*` / `?` wildcards or literal bytes.
    Glob(Vec<u8>),
}

/// A normalized, repository-relative path pattern.
///
/// Normalization drops `.` segments and one trailing `/`, and collapses repeated `**`
/// segments; [`Display`](fmt::Display) prints the normalized text, so
/// `parse(display(p)) == p`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathPattern {
    text: String,
    segments: Vec<Segment>,
}

impl PathPattern {
    /// Parses and normalizes a pattern: `*` within a segment, `?` one byte, `**` zero or more
    /// whole segments; `.` segments and one trailing `/` are dropped; absolute paths, `..`,
    /// empty segments, NUL and backslashes are refused.
    pub fn parse(input: &str) -> Result<PathPattern, ScopeError> {
        if input.len() > MAX_PATTERN_LEN {
            return Err(ScopeError::TooLong(input.len()));
        }
        if input.contains('\0') {
            return Err(ScopeError::Nul(input.to_owned()));
        }
        if input.contains('\\') {
            return Err(ScopeError::Backslash(input.to_owned()));
        }
        if input.starts_with('/') {
            return Err(ScopeError::Absolute(input.to_owned()));
        }
        if input.is_empty() {
            return Err(ScopeError::Empty(input.to_owned()));
        }
        let body = input.strip_suffix('/').unwrap_or(input);
        let mut segments: Vec<Segment> = Vec::new();
        for seg in body.split('/') {
            match seg {
                "" => return Err(ScopeError::EmptySegment(input.to_owned())),
                "." => continue,
                ".." => return Err(ScopeError::ParentDir(input.to_owned())),
                "**" => {
                    if segments.last() != Some(&Segment::AnyDepth) {
                        segments.push(Segment::AnyDepth);
                    }
                }
                s if s.contains("**") => {
                    return Err(ScopeError::DoubleStarInSegment(input.to_owned()));
                }
                s => segments.push(Segment::Glob(s.as_bytes().to_vec())),
            }
        }
        if segments.is_empty() {
            return Err(ScopeError::Empty(input.to_owned()));
        }
        let text = segments
            .iter()
            .map(|s| match s {
                Segment::AnyDepth => "**",
                // Segments came from a &str split on an ASCII byte, so they are UTF-8.
                Segment::Glob(b) => std::str::from_utf8(b).unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("/");
        Ok(PathPattern { text, segments })
    }

    /// The normalized pattern text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when the pattern has no wildcard: it names exactly one path (and what lies under it).
    pub fn is_literal(&self) -> bool {
        self.segments.iter().all(|s| match s {
            Segment::AnyDepth => false,
            Segment::Glob(b) => !b.iter().any(|&c| c == b'*' || c == b'?'),
        })
    }

    /// True when this pattern covers `path` (a repository-relative path, raw bytes): the pattern
    /// matches `path` itself or one of its ancestor directories.
    ///
    /// A path that is not a normalized relative path (absolute, empty, with `.`/`..`/empty
    /// segments or NUL) is never covered.
    pub fn matches(&self, path: &[u8]) -> bool {
        match split_path(path) {
            Some(segs) => self.matches_segments(&segs),
            None => false,
        }
    }

    fn matches_segments(&self, path: &[&[u8]]) -> bool {
        // reach[j]: the first `i` pattern segments can consume exactly the first `j` path
        // segments. Dynamic programming keeps this O(pattern * path) for any number of `**`.
        let n = path.len();
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for seg in &self.segments {
            let mut next = vec![false; n + 1];
            match seg {
                Segment::AnyDepth => {
                    let mut any = false;
                    for j in 0..=n {
                        any |= reach[j];
                        next[j] = any;
                    }
                }
                Segment::Glob(g) => {
                    for j in 0..n {
                        if reach[j] && glob_segment(g, path[j]) {
                            next[j + 1] = true;
                        }
                    }
                }
            }
            reach = next;
            if !reach.iter().any(|&r| r) {
                return false;
            }
        }
        // The whole pattern consumed some prefix of the path: it names the path or an ancestor.
        // A prefix of zero segments (pattern made only of `**`) covers every path.
        reach.iter().any(|&r| r)
    }
}

/// Splits a repository-relative path into segments, or `None` when it is not normalized.
fn split_path(path: &[u8]) -> Option<Vec<&[u8]>> {
    if path.is_empty() || path.contains(&0) {
        return None;
    }
    let mut out = Vec::new();
    for seg in path.split(|&b| b == b'/') {
        if seg.is_empty() || seg == b"." || seg == b".." {
            return None;
        }
        out.push(seg);
    }
    Some(out)
}

/// Matches one segment against a `*`/`?` glob, byte-wise, in O(len(glob) * len(text)) worst case.
fn glob_segment(glob: &[u8], text: &[u8]) -> bool {
    let (mut g, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && (glob[g] == b'?' || (glob[g] != b'*' && glob[g] == text[t])) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == b'*' {
            star = Some((g, t));
            g += 1;
        } else if let Some((sg, st)) = star {
            g = sg + 1;
            t = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for PathPattern {
    type Err = ScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PathPattern::parse(s)
    }
}

impl Serialize for PathPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for PathPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PathPattern::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What a [`PathScope`] says about one changed path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum ScopeDecision {
    /// Some allowed pattern covers the path and no forbidden pattern does.
    Allowed,
    /// No allowed pattern covers the path (or the path is not a normalized relative path).
    OutOfScope,
    /// A forbidden pattern covers the path; forbidden wins over allowed.
    Forbidden {
        /// The normalized text of the first forbidden pattern that covers the path.
        pattern: String,
    },
}

/// Allowed (candidate) and forbidden path patterns; forbidden wins over allowed.
///
/// Patterns are deduplicated and sorted, so two scopes built from the same patterns in any
/// order are equal and serialize identically.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathScope {
    allowed: Vec<PathPattern>,
    forbidden: Vec<PathPattern>,
}

impl PathScope {
    /// Builds a scope; `allowed` must not be empty.
    pub fn new(
        mut allowed: Vec<PathPattern>,
        mut forbidden: Vec<PathPattern>,
    ) -> Result<PathScope, ScopeError> {
        if allowed.is_empty() {
            return Err(ScopeError::NoAllowed);
        }
        allowed.sort();
        allowed.dedup();
        forbidden.sort();
        forbidden.dedup();
        Ok(PathScope { allowed, forbidden })
    }

    /// The allowed patterns, sorted and deduplicated.
    pub fn allowed(&self) -> &[PathPattern] {
        &self.allowed
    }

    /// The forbidden patterns, sorted and deduplicated.
    pub fn forbidden(&self) -> &[PathPattern] {
        &self.forbidden
    }

    /// Decides one repository-relative path (raw bytes).
    ///
    /// A forbidden pattern covering the path wins; otherwise the path is allowed only when an
    /// allowed pattern covers it. A path that is not normalized (absolute, empty, `.`/`..`/empty
    /// segments, NUL) is never allowed: it is reported out of scope unless a forbidden pattern
    /// names it.
    pub fn decide(&self, path: &[u8]) -> ScopeDecision {
        let Some(segs) = split_path(path) else {
            return ScopeDecision::OutOfScope;
        };
        if let Some(p) = self.forbidden.iter().find(|p| p.matches_segments(&segs)) {
            return ScopeDecision::Forbidden {
                pattern: p.text.clone(),
            };
        }
        if self.allowed.iter().any(|p| p.matches_segments(&segs)) {
            ScopeDecision::Allowed
        } else {
            ScopeDecision::OutOfScope
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathScopeRepr {
    allowed: Vec<PathPattern>,
    #[serde(default)]
    forbidden: Vec<PathPattern>,
}

impl Serialize for PathScope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PathScopeRepr {
            allowed: self.allowed.clone(),
            forbidden: self.forbidden.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PathScope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = PathScopeRepr::deserialize(d)?;
        PathScope::new(r.allowed, r.forbidden).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> PathPattern {
        PathPattern::parse(s).unwrap()
    }

    #[test]
    fn parse_refuses_bad_patterns() {
        assert!(matches!(PathPattern::parse(""), Err(ScopeError::Empty(_))));
        assert!(matches!(PathPattern::parse("."), Err(ScopeError::Empty(_))));
        assert!(matches!(
            PathPattern::parse("./"),
            Err(ScopeError::Empty(_))
        ));
        assert!(matches!(
            PathPattern::parse("/etc"),
            Err(ScopeError::Absolute(_))
        ));
        assert!(matches!(
            PathPattern::parse("a/../b"),
            Err(ScopeError::ParentDir(_))
        ));
        assert!(matches!(
            PathPattern::parse(".."),
            Err(ScopeError::ParentDir(_))
        ));
        assert!(matches!(
            PathPattern::parse("a//b"),
            Err(ScopeError::EmptySegment(_))
        ));
        assert!(matches!(
            PathPattern::parse("a//"),
            Err(ScopeError::EmptySegment(_))
        ));
        assert!(matches!(
            PathPattern::parse("a\0b"),
            Err(ScopeError::Nul(_))
        ));
        assert!(matches!(
            PathPattern::parse("a\\b"),
            Err(ScopeError::Backslash(_))
        ));
        assert!(matches!(
            PathPattern::parse("a**b"),
            Err(ScopeError::DoubleStarInSegment(_))
        ));
        assert!(matches!(
            PathPattern::parse(&"a".repeat(4097)),
            Err(ScopeError::TooLong(4097))
        ));
    }

    #[test]
    fn parse_normalizes() {
        assert_eq!(p("./src/").as_str(), "src");
        assert_eq!(p("src/./lib").as_str(), "src/lib");
        assert_eq!(p("**/**/x").as_str(), "**/x");
        assert_eq!(p("src"), p("./src/."));
        assert!(p("src/lib.rs").is_literal());
        assert!(!p("src/*.rs").is_literal());
    }

    #[test]
    fn directory_covers_descendants() {
        assert!(p("src").matches(b"src"));
        assert!(p("src").matches(b"src/a/b.rs"));
        assert!(!p("src").matches(b"srcx"));
        assert!(!p("src").matches(b"x/src"));
        assert!(p("src/*.rs").matches(b"src/a.rs"));
        assert!(!p("src/*.rs").matches(b"src/a.rc"));
        assert!(!p("src/*.rs").matches(b"src"));
    }

    #[test]
    fn wildcards() {
        assert!(p("a?c").matches(b"abc"));
        assert!(!p("a?c").matches(b"ac"));
        assert!(p("*").matches(b"anything/deep"));
        assert!(p("**").matches(b"x"));
        assert!(p("**/.git").matches(b".git"));
        assert!(p("**/.git").matches(b"a/b/.git/config"));
        assert!(!p("**/.git").matches(b"a/b/.gitignore"));
        assert!(p("a/**/z").matches(b"a/z"));
        assert!(p("a/**/z").matches(b"a/b/c/z/q"));
        assert!(!p("a/**/z").matches(b"b/z"));
        assert!(p("*.rs").matches(b"\xff\xfe.rs"));
        assert!(p("?").matches(b"\xff"));
    }

    #[test]
    fn malformed_paths_never_match() {
        for path in [
            &b""[..],
            b"/src/a",
            b"src/../x",
            b"src//a",
            b"./src",
            b"src/\0",
            b"src/",
        ] {
            assert!(!p("**").matches(path), "{path:?}");
            let scope = PathScope::new(vec![p("**")], vec![]).unwrap();
            assert_eq!(scope.decide(path), ScopeDecision::OutOfScope);
        }
    }

    #[test]
    fn forbidden_wins() {
        let scope = PathScope::new(vec![p("src")], vec![p("src/secret"), p("**/.git")]).unwrap();
        assert_eq!(scope.decide(b"src/a.rs"), ScopeDecision::Allowed);
        assert_eq!(
            scope.decide(b"src/secret/k"),
            ScopeDecision::Forbidden {
                pattern: "src/secret".into()
            }
        );
        assert_eq!(
            scope.decide(b"src/.git/HEAD"),
            ScopeDecision::Forbidden {
                pattern: "**/.git".into()
            }
        );
        assert_eq!(scope.decide(b"docs/x"), ScopeDecision::OutOfScope);
        assert_eq!(
            scope.decide(b"docs/.git"),
            ScopeDecision::Forbidden {
                pattern: "**/.git".into()
            }
        );
    }

    #[test]
    fn scope_needs_allowed() {
        assert_eq!(
            PathScope::new(vec![], vec![p("a")]),
            Err(ScopeError::NoAllowed)
        );
    }

    #[test]
    fn serde_as_strings() {
        let scope = PathScope::new(vec![p("src/"), p("./docs")], vec![p("src/x")]).unwrap();
        let json = serde_json::to_string(&scope).unwrap();
        assert_eq!(json, r#"{"allowed":["docs","src"],"forbidden":["src/x"]}"#);
        let back: PathScope = serde_json::from_str(&json).unwrap();
        assert_eq!(back, scope);
        assert!(serde_json::from_str::<PathScope>(r#"{"allowed":[]}"#).is_err());
        assert!(serde_json::from_str::<PathScope>(r#"{"allowed":["/etc"]}"#).is_err());
        assert!(serde_json::from_str::<PathScope>(r#"{"allowed":["a"],"extra":1}"#).is_err());
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let pat = p(&["**", "a"].repeat(200).join("/"));
        let path = vec![&b"a"[..]; 400].join(&b'/');
        let _ = pat.matches(&path);
        let star = p(&format!("{}b", "*a".repeat(1000)));
        let _ = star.matches(&b"a".repeat(3000));
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z.]{1,4}".prop_filter("dot segments", |s| s != "." && s != ".."),
            Just("*".to_owned()),
            Just("**".to_owned()),
            "[a-c?*]{1,3}".prop_filter("double star", |s| !s.contains("**")),
        ]
    }

    fn pattern() -> impl Strategy<Value = PathPattern> {
        prop::collection::vec(segment(), 1..5).prop_map(|v| p(&v.join("/")))
    }

    fn path() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::collection::vec(
                prop_oneof![Just(b'a'), Just(b'b'), Just(b'.'), Just(b'c'), Just(0xffu8)],
                1..4,
            ),
            1..5,
        )
        .prop_filter("dot segments", |v| {
            v.iter().all(|s| s != b"." && s != b"..")
        })
        .prop_map(|v| v.join(&b'/'))
    }

    proptest! {
        #[test]
        fn display_parse_round_trips(pat in pattern()) {
            prop_assert_eq!(PathPattern::parse(&pat.to_string()).unwrap(), pat);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = PathPattern::parse(&s);
        }

        #[test]
        fn covering_is_inherited_by_descendants(pat in pattern(), path in path(), child in "[a-z]{1,3}") {
            if pat.matches(&path) {
                let mut deeper = path.clone();
                deeper.push(b'/');
                deeper.extend_from_slice(child.as_bytes());
                prop_assert!(pat.matches(&deeper));
            }
        }

        #[test]
        fn forbidden_always_wins(allowed in prop::collection::vec(pattern(), 1..3), forbidden in prop::collection::vec(pattern(), 0..3), path in path()) {
            let scope = PathScope::new(allowed.clone(), forbidden.clone()).unwrap();
            let d = scope.decide(&path);
            let hit_forbidden = forbidden.iter().any(|f| f.matches(&path));
            let hit_allowed = allowed.iter().any(|a| a.matches(&path));
            match d {
                ScopeDecision::Forbidden { .. } => prop_assert!(hit_forbidden),
                ScopeDecision::Allowed => prop_assert!(hit_allowed && !hit_forbidden),
                ScopeDecision::OutOfScope => prop_assert!(!hit_allowed && !hit_forbidden),
            }
        }

        #[test]
        fn adding_forbidden_never_allows_more(allowed in prop::collection::vec(pattern(), 1..3), forbidden in prop::collection::vec(pattern(), 0..3), extra in pattern(), path in path()) {
            let before = PathScope::new(allowed.clone(), forbidden.clone()).unwrap();
            let mut more = forbidden.clone();
            more.push(extra);
            let after = PathScope::new(allowed, more).unwrap();
            if after.decide(&path) == ScopeDecision::Allowed {
                prop_assert_eq!(before.decide(&path), ScopeDecision::Allowed);
            }
        }

        #[test]
        fn star_star_matches_every_normalized_path(path in path()) {
            prop_assert!(p("**").matches(&path));
        }
    }
}
