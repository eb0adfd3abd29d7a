//! L006: generated docs are current.

use std::path::Path;

use super::{Diagnostic, Rule};
use crate::codegen::{self, Region};

pub(super) fn check(root: &Path, out: &mut Vec<Diagnostic>) -> anyhow::Result<()> {
    for g in codegen::outputs()? {
        let path = root.join(g.path);
        let current = std::fs::read_to_string(&path).ok();
        let problem = match (&current, g.region) {
            (None, _) => Some("is missing".to_owned()),
            (Some(text), None) => (text != &g.content).then(|| "is stale".to_owned()),
            (Some(text), Some(region)) => match codegen::region_body(text, region) {
                None => Some(format!(
                    "lacks the generated region `{}` … `{}`",
                    region.begin, region.end
                )),
                Some(body) => (body != g.content)
                    .then(|| format!("has a stale generated region `{}`", region.begin)),
            },
        };
        if let Some(problem) = problem {
            out.push(Diagnostic {
                rule: Rule::L006,
                message: format!("generated doc {} {problem}", g.path),
                file: g.path.into(),
                line: current
                    .as_deref()
                    .zip(g.region)
                    .and_then(|(t, r): (&str, Region)| t.lines().position(|l| l.contains(r.begin)))
                    .map(|i| i + 1),
                notes: vec![format!("generated from {}", g.source)],
                fix: "run `cargo xtask codegen` and commit the result".into(),
            });
        }
    }
    Ok(())
}
