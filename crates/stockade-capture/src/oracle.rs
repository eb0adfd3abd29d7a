//! Fuzzing oracle for path-scope matching as capture applies it (the fuzz target is glue).

use crate::classify::path_reason;
use stockade_manifest::RejectReason;
use stockade_policy::{PathPattern, PathScope, ScopeDecision};

/// Input: lines; `+pattern` adds an allowed pattern, `-pattern` a forbidden one, any other line
/// is a candidate path (raw bytes). Laws checked for every path: decisions are deterministic; a
/// path capture would accept is `Allowed` by the scope and has no `.git` component and no
/// `.`/`..`/empty segment; a `.git` component always gives `git_dir`; a `Forbidden` decision
/// names one of the forbidden patterns.
pub fn check_scope(data: &[u8]) -> Result<(), String> {
    let mut allowed = Vec::new();
    let mut forbidden = Vec::new();
    let mut paths = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        match line.first() {
            Some(b'+') | Some(b'-') => {
                let Ok(text) = std::str::from_utf8(&line[1..]) else {
                    continue;
                };
                let Ok(p) = PathPattern::parse(text) else {
                    continue;
                };
                if line[0] == b'+' {
                    allowed.push(p);
                } else {
                    forbidden.push(p);
                }
            }
            _ => paths.push(line),
        }
    }
    let forbidden_texts: Vec<String> = forbidden.iter().map(ToString::to_string).collect();
    let Ok(scope) = PathScope::new(allowed, forbidden) else {
        return Ok(());
    };
    for path in paths {
        let d = scope.decide(path);
        if d != scope.decide(path) {
            return Err("scope decision is not deterministic".into());
        }
        if let ScopeDecision::Forbidden { pattern } = &d
            && !forbidden_texts.contains(pattern)
        {
            return Err(format!("forbidden by unknown pattern {pattern:?}"));
        }
        let reason = path_reason(path, &scope, false);
        let comps: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        if comps.iter().any(|c| c.eq_ignore_ascii_case(b".git"))
            && reason != Some(RejectReason::GitDir)
        {
            return Err(format!(
                "path {path:?} with a .git component not rejected as git_dir"
            ));
        }
        if reason.is_none() {
            if d != ScopeDecision::Allowed {
                return Err(format!("path {path:?} accepted but scope said {d:?}"));
            }
            if comps
                .iter()
                .any(|c| c.is_empty() || *c == b"." || *c == b"..")
            {
                return Err(format!("non-normalized path {path:?} accepted"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn committed_fuzz_corpus_holds() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/path_scope");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if !path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
            {
                continue;
            }
            let data = std::fs::read(path).unwrap();
            check_scope(&data).unwrap();
            n += 1;
        }
        assert!(n > 0);
    }

    #[test]
    fn git_dir_and_traversal_never_accepted() {
        let scope = PathScope::new(vec![PathPattern::parse("**").unwrap()], vec![]).unwrap();
        for p in [
            &b".git/config"[..],
            b"a/.Git/x",
            b"../x",
            b"a//b",
            b"/abs",
            b"a/./b",
            b"x/GIT~1/y",
            b".git. /x",
        ] {
            assert!(
                path_reason(p, &scope, false).is_some(),
                "{:?}",
                String::from_utf8_lossy(p)
            );
        }
        assert!(path_reason(b".gitmodules", &scope, true).is_some());
        assert!(path_reason(b".gitmodules", &scope, false).is_none());
        assert!(path_reason(b"a/b", &scope, false).is_none());
    }

    proptest! {
        #[test]
        fn scope_laws_hold(lines in proptest::collection::vec(
            prop_oneof![
                "[+-][a-z*?/.]{1,8}".prop_map(String::into_bytes),
                proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'/'), Just(b'.'), Just(b'g'), Just(b'i'), Just(b't'), Just(b'G'), Just(0xffu8)], 0..12),
            ],
            0..12,
        )) {
            let data = lines.join(&b'\n');
            prop_assert_eq!(check_scope(&data), Ok(()));
        }
    }
}
