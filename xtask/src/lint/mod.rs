//! `cargo xtask lint`: repository rules with stable ids, rustc-like output.
//!
//! | id | rule |
//! | --- | --- |
//! | L001 | forbidden workspace edge (the table in `layers.rs`) |
//! | L002 | spawn-capable crate reachable from a non-backend crate |
//! | L003 | raw process API in a non-backend source file |
//! | L004 | crate root without `#![forbid(unsafe_code)]` (backend: `#![deny(unsafe_code)]`) |
//! | L005 | `unsafe` outside the backend's `sys` module, or without a `// SAFETY:` comment |
//! | L006 | stale generated docs (`cargo xtask codegen`) |
//!
//! The rules are plain functions over a workspace root, so they run as ordinary `#[test]`s: one on
//! the real tree, and one per rule on a fixture workspace with a planted violation.

mod deps;
mod docs;
pub mod scan;
mod source;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::metadata::Metadata;

/// A rule id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// Forbidden workspace edge.
    L001,
    /// Spawn-capable crate reachable from a non-backend crate.
    L002,
    /// Raw process API in a non-backend source file.
    L003,
    /// Missing `#![forbid(unsafe_code)]`.
    L004,
    /// `unsafe` outside the backend's `sys` module or without `// SAFETY:`.
    L005,
    /// Stale generated docs.
    L006,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One finding.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// The rule that fired.
    pub rule: Rule,
    /// What is wrong, one line.
    pub message: String,
    /// Where, relative to the workspace root.
    pub file: PathBuf,
    /// 1-based line, if known.
    pub line: Option<usize>,
    /// Extra `= note: ...` lines (dependency paths, features).
    pub notes: Vec<String>,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error[{}]: {}", self.rule, self.message)?;
        match self.line {
            Some(l) => writeln!(f, "  --> {}:{l}", self.file.display())?,
            None => writeln!(f, "  --> {}", self.file.display())?,
        }
        for n in &self.notes {
            writeln!(f, "  = note: {n}")?;
        }
        writeln!(f, "  = fix: {}", self.fix)
    }
}

/// The result of a lint run.
#[derive(Debug, Default)]
pub struct Report {
    /// Every finding, in rule then file order.
    pub diagnostics: Vec<Diagnostic>,
    /// How many workspace crates were checked.
    pub crates: usize,
    /// How many source files were scanned.
    pub files: usize,
}

impl Report {
    /// The ids that fired, each once.
    #[cfg(test)]
    pub fn rules(&self) -> Vec<Rule> {
        let mut v: Vec<Rule> = self.diagnostics.iter().map(|d| d.rule).collect();
        v.sort();
        v.dedup();
        v
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        if self.diagnostics.is_empty() {
            return format!(
                "lint: ok: L001-L006 passed on {} crates and {} source files",
                self.crates, self.files
            );
        }
        let mut counts: BTreeMap<Rule, usize> = BTreeMap::new();
        for d in &self.diagnostics {
            *counts.entry(d.rule).or_default() += 1;
        }
        let by_rule: Vec<String> = counts.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        format!(
            "error: lint found {} violation{} ({}) in {} crates and {} source files",
            self.diagnostics.len(),
            if self.diagnostics.len() == 1 { "" } else { "s" },
            by_rule.join(", "),
            self.crates,
            self.files
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.diagnostics {
            writeln!(f, "{d}")?;
        }
        writeln!(f, "{}", self.summary())
    }
}

/// Runs every rule on the workspace at `root`.
pub fn run(root: &Path) -> anyhow::Result<Report> {
    let meta = Metadata::load(root)?;
    let mut report = Report {
        crates: meta.workspace_members.len(),
        ..Report::default()
    };
    deps::check(&meta, &mut report.diagnostics)?;
    report.files = source::check(&meta, &mut report.diagnostics)?;
    docs::check(root, &mut report.diagnostics)?;
    report
        .diagnostics
        .sort_by(|a, b| (a.rule, &a.file, a.line).cmp(&(b.rule, &b.file, b.line)));
    Ok(report)
}

/// `path` relative to `root`, for messages.
pub fn rel(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}
