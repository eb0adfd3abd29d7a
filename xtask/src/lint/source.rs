//! L003 (raw process API), L004 (crate roots forbid `unsafe`), L005 (`unsafe` only in the
//! backend's `sys` module, each with `// SAFETY:`), over the source files.

use std::path::{Path, PathBuf};

use super::scan::{self, PathRef, Tok};
use super::{Diagnostic, Rule, rel};
use crate::layers::{BACKEND, SPAWN_EXEMPT};
use crate::metadata::Metadata;

/// A source file and whose it is.
struct File {
    path: PathBuf,
    package: String,
    /// Inside the backend's `src/sys.rs` or `src/sys/`.
    backend_sys: bool,
}

pub(super) fn check(meta: &Metadata, out: &mut Vec<Diagnostic>) -> anyhow::Result<usize> {
    let root = &meta.workspace_root;
    let mut files = Vec::new();
    for pkg in meta.members() {
        let Some(dir) = pkg.manifest_path.parent() else {
            continue;
        };
        let mut found = Vec::new();
        walk(dir, true, &mut found)?;
        for path in found {
            let within = path.strip_prefix(dir).unwrap_or(&path);
            let backend_sys = pkg.name == BACKEND
                && (within == Path::new("src/sys.rs") || within.starts_with("src/sys"));
            files.push(File {
                path,
                package: pkg.name.clone(),
                backend_sys,
            });
        }
        l004(meta, pkg, out)?;
    }
    // Fuzz targets live outside the workspace but are our code too.
    let fuzz = root.join("fuzz");
    if fuzz.is_dir()
        && !meta
            .members()
            .iter()
            .any(|p| p.manifest_path.starts_with(&fuzz))
    {
        let mut found = Vec::new();
        walk(&fuzz, true, &mut found)?;
        files.extend(found.into_iter().map(|path| File {
            path,
            package: "fuzz".into(),
            backend_sys: false,
        }));
    }
    for f in &files {
        let text = std::fs::read_to_string(&f.path)?;
        let split = scan::split(&text);
        let toks = scan::tokens(&split.code);
        let file = rel(root, &f.path);
        if !f.backend_sys && !SPAWN_EXEMPT.contains(&f.package.as_str()) {
            l003(&file, &scan::paths(&toks), out);
        }
        l005(&file, f.backend_sys, &text, &split, &toks, out);
    }
    Ok(files.len())
}

/// Collects `.rs` files under `dir`, skipping build output, hidden folders and nested packages.
fn walk(dir: &Path, top: bool, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !top && dir.join("Cargo.toml").exists() {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let path = e.path();
        let ty = e.file_type()?;
        if ty.is_dir() {
            if name.starts_with('.') || ["target", "corpus", "artifacts"].contains(&name.as_ref()) {
                continue;
            }
            walk(&path, false, out)?;
        } else if ty.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Identifiers that start or replace processes wherever they appear.
///
/// Syscall numbers (`libc::SYS_clone`, ...) are not here: they are data (a seccomp filter names
/// them), and invoking one needs `libc::syscall`, which is `unsafe` and so caught by L005.
const ALWAYS: &[&str] = &["CommandExt", "pre_exec"];

/// Functions that start or replace processes when reached through libc, nix or rustix.
const SYSCALL_FNS: &[&str] = &[
    "fork", "vfork", "clone", "clone3", "execve", "execv", "execvp", "execvpe", "execl", "execlp",
    "execle", "fexecve", "execveat", "system", "popen", "daemon",
];

/// Why a path is a raw process API, if it is one.
pub(super) fn raw_process_api(segs: &[String]) -> Option<String> {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    if let Some(x) = s
        .iter()
        .find(|x| ALWAYS.contains(x) || x.starts_with("posix_spawn"))
    {
        return Some(format!("`{x}`"));
    }
    for w in s.windows(2) {
        if w[0] == "process" && ["Command", "Child", "*"].contains(&w[1]) {
            return Some(format!("`{}`", s.join("::")));
        }
    }
    match s.as_slice() {
        ["tokio", "process", ..] => return Some("`tokio::process`".into()),
        ["rustix", "runtime", ..] => return Some("`rustix::runtime`".into()),
        ["nix", "spawn", ..] => return Some("`nix::spawn`".into()),
        ["libc" | "nix" | "rustix", .., "*"] if s.len() <= 3 => {
            return Some(format!("glob import `{}` (hides fork/exec)", s.join("::")));
        }
        [first @ ("libc" | "nix" | "rustix"), rest @ ..] => {
            if let Some(f) = rest.iter().find(|x| SYSCALL_FNS.contains(x)) {
                return Some(format!("`{first}::…::{f}`"));
            }
        }
        _ => {}
    }
    None
}

fn l003(file: &Path, paths: &[PathRef], out: &mut Vec<Diagnostic>) {
    let mut last_line = 0;
    for p in paths {
        let Some(api) = raw_process_api(&p.segments) else {
            continue;
        };
        if p.line == last_line {
            continue;
        }
        last_line = p.line;
        out.push(Diagnostic {
            rule: Rule::L003,
            message: format!("raw process API {api} in a non-backend source file"),
            file: file.to_path_buf(),
            line: Some(p.line),
            notes: vec![format!(
                "only `{BACKEND}`'s `sys` module may create or replace processes (xtask/ and tests/ are exempt)"
            )],
            fix: format!("go through the sandbox launcher in `{BACKEND}` instead"),
        });
    }
}

fn l004(
    meta: &Metadata,
    pkg: &crate::metadata::Package,
    out: &mut Vec<Diagnostic>,
) -> anyhow::Result<()> {
    for t in &pkg.targets {
        let text = std::fs::read_to_string(&t.src_path)?;
        let toks = scan::tokens(&scan::split(&text).code);
        let levels = unsafe_code_levels(&toks);
        let backend_lib = pkg.name == BACKEND && t.kind.iter().any(|k| k == "lib");
        let ok = if backend_lib {
            levels.iter().any(|l| l == "deny" || l == "forbid")
        } else {
            levels.iter().any(|l| l == "forbid")
        };
        if ok {
            continue;
        }
        let want = if backend_lib {
            "#![deny(unsafe_code)]"
        } else {
            "#![forbid(unsafe_code)]"
        };
        out.push(Diagnostic {
            rule: Rule::L004,
            message: format!(
                "crate root of `{}` ({} target `{}`) lacks `{want}`",
                pkg.name,
                t.kind.join("/"),
                t.name
            ),
            file: rel(&meta.workspace_root, &t.src_path),
            line: Some(1),
            notes: {
                let mut notes = Vec::new();
                if !levels.is_empty() {
                    notes.push(format!("found unsafe_code at level: {}", levels.join(", ")));
                }
                if !t.kind.iter().any(|k| k == "lib" || k == "bin") {
                    notes.push(
                        "integration tests, benches, examples and build scripts are crate roots too"
                            .into(),
                    );
                }
                notes
            },
            fix: format!("add `{want}` after the crate's `//!` docs"),
        });
    }
    Ok(())
}

/// The lint levels of `unsafe_code` set by inner attributes (`#![forbid(unsafe_code, ...)]`).
fn unsafe_code_levels(toks: &[scan::Token]) -> Vec<String> {
    let mut levels = Vec::new();
    for (i, w) in toks.windows(5).enumerate() {
        let (Tok::Punct('#'), Tok::Punct('!'), Tok::Punct('['), Tok::Ident(level), Tok::Punct('(')) =
            (&w[0].tok, &w[1].tok, &w[2].tok, &w[3].tok, &w[4].tok)
        else {
            continue;
        };
        let inner = toks[i + 5..]
            .iter()
            .take_while(|t| t.tok != Tok::Punct(')'));
        if inner
            .into_iter()
            .any(|t| t.tok == Tok::Ident("unsafe_code".into()))
        {
            levels.push(level.clone());
        }
    }
    levels
}

fn l005(
    file: &Path,
    backend_sys: bool,
    text: &str,
    split: &scan::Split,
    toks: &[scan::Token],
    out: &mut Vec<Diagnostic>,
) {
    let orig: Vec<&str> = text.lines().collect();
    let comments: Vec<&str> = split.comments.lines().collect();
    let says_safety = |idx: usize| {
        comments
            .get(idx)
            .is_some_and(|c| c.contains("SAFETY:") || c.contains("# Safety"))
    };
    let is_comment_or_attr = |idx: usize| {
        orig.get(idx).is_some_and(|l| {
            let t = l.trim_start();
            t.starts_with("//") || t.starts_with("/*") || t.starts_with('*') || t.starts_with("#[")
        })
    };
    for (i, t) in toks.iter().enumerate() {
        if t.tok != Tok::Ident("unsafe".into()) {
            continue;
        }
        let idx = t.line - 1;
        if !backend_sys {
            out.push(Diagnostic {
                rule: Rule::L005,
                message: format!("`unsafe` outside `{BACKEND}`'s `sys` module"),
                file: file.to_path_buf(),
                line: Some(t.line),
                notes: vec!["`unsafe` lives in one audited place: crates/stockade-sandbox-linux/src/sys*".into()],
                fix: "use a safe wrapper (rustix, std) or move the code into the backend's `sys` module".into(),
            });
            continue;
        }
        let mut ok = says_safety(idx);
        let mut k = idx;
        while !ok && k > 0 && is_comment_or_attr(k - 1) {
            k -= 1;
            ok = says_safety(k);
        }
        if !ok && toks.get(i + 1).is_some_and(|n| n.tok == Tok::Punct('{')) {
            let mut k = idx + 1;
            while !ok && is_comment_or_attr(k) {
                ok = says_safety(k);
                k += 1;
            }
        }
        if !ok {
            out.push(Diagnostic {
                rule: Rule::L005,
                message: "`unsafe` without a `// SAFETY:` comment".into(),
                file: file.to_path_buf(),
                line: Some(t.line),
                notes: vec!["every unsafe block states why it is sound, directly above it or on its first line".into()],
                fix: "add `// SAFETY: <why every precondition holds>` right above the block".into(),
            });
        }
    }
}
