//! L001 (forbidden workspace edge) and L002 (spawn-capable crate reachable from a non-backend
//! crate), over the `cargo metadata` graph.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::Path;

use super::{Diagnostic, Rule, rel};
use crate::layers::{self, BACKEND, SPAWN_EXEMPT};
use crate::metadata::{Metadata, Package};

pub(super) fn check(meta: &Metadata, out: &mut Vec<Diagnostic>) -> anyhow::Result<()> {
    for pkg in meta.members() {
        l001(meta, pkg, out);
        if pkg.name != BACKEND && !SPAWN_EXEMPT.contains(&pkg.name.as_str()) {
            l002(meta, pkg, out);
        }
    }
    Ok(())
}

fn l001(meta: &Metadata, pkg: &Package, out: &mut Vec<Diagnostic>) {
    let file = rel(&meta.workspace_root, &pkg.manifest_path);
    let Some(row) = layers::lookup(&pkg.name) else {
        out.push(Diagnostic {
            rule: Rule::L001,
            message: format!(
                "workspace crate `{}` is not in the layering table",
                pkg.name
            ),
            file,
            line: None,
            notes: vec![
                "every workspace crate needs a layer and a list of what it may depend on".into(),
            ],
            fix:
                "add a row for it to `TABLE` in xtask/src/layers.rs, then run `cargo xtask codegen`"
                    .into(),
        });
        return;
    };
    let Some(node) = meta.node(&pkg.id) else {
        return;
    };
    for dep in &node.deps {
        if !meta.is_member(&dep.pkg) {
            continue;
        }
        let Some(to) = meta.package(&dep.pkg) else {
            continue;
        };
        if layers::edge_allowed(row, &to.name) {
            continue;
        }
        let allowed = match row.may_depend_on {
            layers::Allowed::Only([]) => "nothing of ours".to_owned(),
            layers::Allowed::Only(list) => list.join(", "),
            layers::Allowed::Anything => "anything".to_owned(),
        };
        let layer_of = |n: &str| {
            layers::lookup(n)
                .and_then(|l| l.layer)
                .map_or_else(|| "-".to_owned(), |l| l.to_string())
        };
        out.push(Diagnostic {
            rule: Rule::L001,
            message: format!(
                "forbidden workspace edge `{}` (layer {}) -> `{}` (layer {})",
                pkg.name,
                layer_of(&pkg.name),
                to.name,
                layer_of(&to.name)
            ),
            file: file.clone(),
            line: manifest_line(&pkg.manifest_path, &to.name),
            notes: vec![
                format!("edge kinds: {}", kinds(&dep.dep_kinds)),
                format!("`{}` may depend on: {allowed}", pkg.name),
            ],
            fix: format!(
                "remove the dependency on `{}` (lower layers never see higher ones, siblings never see each other; only the orchestrator combines them)",
                to.name
            ),
        });
    }
}

fn kinds(k: &[crate::metadata::DepKind]) -> String {
    let mut v: Vec<&str> = k
        .iter()
        .map(|k| k.kind.as_deref().unwrap_or("normal"))
        .collect();
    v.sort();
    v.dedup();
    v.join(", ")
}

fn l002(meta: &Metadata, root: &Package, out: &mut Vec<Diagnostic>) {
    // Breadth-first over every edge kind, staying out of other workspace crates (each is checked
    // as its own root) and out of the backend (the one allowed wrapper).
    let mut parent: HashMap<&str, &str> = HashMap::new();
    let mut closure: Vec<&str> = vec![root.id.as_str()];
    let mut queue = VecDeque::from([root.id.as_str()]);
    let mut backend_hit = None;
    while let Some(id) = queue.pop_front() {
        let Some(node) = meta.node(id) else { continue };
        for dep in &node.deps {
            let to = dep.pkg.as_str();
            if to == root.id || parent.contains_key(to) {
                continue;
            }
            if meta.is_member(to) {
                if meta.package(to).is_some_and(|p| p.name == BACKEND)
                    && !layers::may_reach_backend(&root.name)
                {
                    parent.insert(to, id);
                    backend_hit.get_or_insert(to);
                }
                continue;
            }
            parent.insert(to, id);
            closure.push(to);
            queue.push_back(to);
        }
    }
    let mut report = |target: &str, what: String, mut extra: Vec<String>| {
        let path = path_to(&parent, target);
        let names: Vec<&str> = path
            .iter()
            .map(|id| meta.package(id).map_or(*id, |p| p.name.as_str()))
            .collect();
        let mut notes = vec![format!("path: {}", names.join(" -> "))];
        for w in path.windows(2) {
            notes.push(hop(meta, w[0], w[1]));
        }
        notes.append(&mut extra);
        out.push(Diagnostic {
            rule: Rule::L002,
            message: format!("{what} is reachable from non-backend crate `{}`", root.name),
            file: rel(&meta.workspace_root, &root.manifest_path),
            line: names.get(1).and_then(|n| manifest_line(&root.manifest_path, n)),
            notes,
            fix: format!(
                "only `{BACKEND}` may start processes: drop the dependency or the feature (see `cargo tree -p {} -e features -i {}`)",
                root.name,
                names.last().copied().unwrap_or_default()
            ),
        });
    };
    if let Some(b) = backend_hit {
        report(
            b,
            format!("the backend `{BACKEND}` (the only spawner)"),
            vec![format!(
                "only crates whose layering row allows `{BACKEND}` may reach it"
            )],
        );
    }
    for &id in &closure[1..] {
        let Some(pkg) = meta.package(id) else {
            continue;
        };
        let Some(sc) = layers::spawn_capable(&pkg.name) else {
            continue;
        };
        match sc.feature {
            None => report(
                id,
                format!("spawn-capable crate `{}`", pkg.name),
                vec![format!("why: {}", sc.why)],
            ),
            Some(f) => {
                let enabled = meta
                    .node(id)
                    .is_some_and(|n| n.features.iter().any(|x| x == f));
                if !enabled {
                    continue;
                }
                let requesters = requesters(meta, &closure, pkg, f);
                if requesters.is_empty() {
                    // Enabled only by a crate outside this closure (feature unification): that
                    // crate is reported as its own root.
                    continue;
                }
                let mut extra = vec![format!("why: {}", sc.why)];
                extra.extend(
                    requesters
                        .into_iter()
                        .map(|r| format!("feature `{f}` of `{}` enabled by {r}", pkg.name)),
                );
                report(
                    id,
                    format!("spawn-capable crate `{}` with feature `{f}`", pkg.name),
                    extra,
                );
            }
        }
    }
}

/// The path from the root to `target`, following `parent` links.
fn path_to<'a>(parent: &HashMap<&'a str, &'a str>, target: &'a str) -> Vec<&'a str> {
    let mut p = vec![target];
    let mut cur = target;
    while let Some(&up) = parent.get(cur) {
        p.push(up);
        cur = up;
    }
    p.reverse();
    p
}

/// Which packages in `closure` ask for a feature of `target` that turns on `feature`.
fn requesters(meta: &Metadata, closure: &[&str], target: &Package, feature: &str) -> Vec<String> {
    let mut out = Vec::new();
    for &id in closure {
        let Some(p) = meta.package(id) else { continue };
        let enabled = enabled_features(meta, id);
        for d in p.dependencies.iter().filter(|d| d.name == target.name) {
            let mut edge: Vec<&str> = d.features.iter().map(String::as_str).collect();
            if d.uses_default_features {
                edge.push("default");
            }
            if let Some(f) = edge.iter().find(|f| expands_to(target, f, feature)) {
                out.push(format!(
                    "`{}` (features on its dependency declaration: `{f}`)",
                    p.name
                ));
            }
            for own in &enabled {
                for entry in p.features.get(*own).into_iter().flatten() {
                    let Some((key, f)) = entry.split_once('/') else {
                        continue;
                    };
                    if key.trim_end_matches('?') == d.key() && expands_to(target, f, feature) {
                        out.push(format!("`{}` (its feature `{own}` = \"{entry}\")", p.name));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The features enabled on a package in the resolved graph.
fn enabled_features<'a>(meta: &'a Metadata, id: &str) -> Vec<&'a str> {
    meta.node(id)
        .map(|n| n.features.iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Whether enabling `start` on `pkg` enables `wanted` (following `pkg`'s own feature table).
fn expands_to(pkg: &Package, start: &str, wanted: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(f) = stack.pop() {
        if f == wanted {
            return true;
        }
        if !seen.insert(f) {
            continue;
        }
        for e in pkg.features.get(f).into_iter().flatten() {
            if !e.starts_with("dep:") && !e.contains('/') {
                stack.push(e);
            }
        }
    }
    false
}

/// One hop of a dependency path, with the features the edge asks for and what enabled it.
fn hop(meta: &Metadata, from: &str, to: &str) -> String {
    let (Some(a), Some(b)) = (meta.package(from), meta.package(to)) else {
        return format!("hop: {from} -> {to}");
    };
    let enabled = enabled_features(meta, from);
    let mut parts = Vec::new();
    for d in a.dependencies.iter().filter(|d| d.name == b.name) {
        let mut feats: Vec<&str> = Vec::new();
        if d.uses_default_features {
            feats.push("default");
        }
        feats.extend(d.features.iter().map(String::as_str));
        let mut s = format!(
            "{} dependency, features [{}]",
            d.kind.as_deref().unwrap_or("normal"),
            feats.join(", ")
        );
        if d.optional {
            let by: Vec<String> = enabled
                .iter()
                .filter(|f| {
                    a.features.get(**f).into_iter().flatten().any(|e| {
                        e == &format!("dep:{}", d.key())
                            || e.split_once('/').is_some_and(|(k, _)| k == d.key())
                    }) || **f == d.key()
                })
                .map(|f| format!("`{f}`"))
                .collect();
            s.push_str(&format!(
                ", optional, turned on by `{}` feature {}",
                a.name,
                by.join(", ")
            ));
        }
        parts.push(s);
    }
    format!("hop: {} -> {}: {}", a.name, b.name, parts.join("; "))
}

/// The 1-based line of `Cargo.toml` that declares the dependency `name`, if found.
pub(super) fn manifest_line(manifest: &Path, name: &str) -> Option<usize> {
    let text = std::fs::read_to_string(manifest).ok()?;
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            t.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '=', '.']))
                || t.contains(&format!("dependencies.{name}]"))
        })
        .map(|i| i + 1)
}
