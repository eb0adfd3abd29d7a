//! A typed subset of `cargo metadata --format-version 1`, enough for the layering rules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The output of `cargo metadata`.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    /// Every package in the resolved graph (filtered to the host platform).
    pub packages: Vec<Package>,
    /// Package ids of the workspace members.
    pub workspace_members: Vec<String>,
    /// The resolved dependency graph.
    pub resolve: Resolve,
    /// The directory holding the root `Cargo.toml`.
    pub workspace_root: PathBuf,
}

/// One package.
#[derive(Debug, Deserialize)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Opaque package id.
    pub id: String,
    /// Absolute path of its `Cargo.toml`.
    pub manifest_path: PathBuf,
    /// Declared dependencies.
    pub dependencies: Vec<Dependency>,
    /// The package's `[features]` table.
    #[serde(default)]
    pub features: BTreeMap<String, Vec<String>>,
    /// Its build targets.
    pub targets: Vec<Target>,
}

/// One declared dependency of a package.
#[derive(Debug, Deserialize)]
pub struct Dependency {
    /// Package name of the dependency.
    pub name: String,
    /// `dev`, `build` or `None` for normal.
    pub kind: Option<String>,
    /// The key it is declared under, when renamed.
    pub rename: Option<String>,
    /// Whether it is optional.
    pub optional: bool,
    /// Whether `default-features` stays on.
    pub uses_default_features: bool,
    /// Features requested on this edge.
    pub features: Vec<String>,
}

impl Dependency {
    /// The key the dependency is declared under (its rename or its name).
    pub fn key(&self) -> &str {
        self.rename.as_deref().unwrap_or(&self.name)
    }
}

/// One build target.
#[derive(Debug, Deserialize)]
pub struct Target {
    /// Target kinds (`lib`, `bin`, `test`, ...).
    pub kind: Vec<String>,
    /// Target name.
    pub name: String,
    /// The crate root file.
    pub src_path: PathBuf,
}

/// The resolved graph.
#[derive(Debug, Deserialize)]
pub struct Resolve {
    /// One node per package.
    pub nodes: Vec<Node>,
}

/// One resolved package.
#[derive(Debug, Deserialize)]
pub struct Node {
    /// Package id.
    pub id: String,
    /// Resolved dependencies.
    pub deps: Vec<NodeDep>,
    /// Enabled features (unified over the workspace).
    pub features: Vec<String>,
}

/// One resolved edge.
#[derive(Debug, Deserialize)]
pub struct NodeDep {
    /// Package id of the dependency.
    pub pkg: String,
    /// The kinds of the edge.
    pub dep_kinds: Vec<DepKind>,
}

/// Kind of a resolved edge.
#[derive(Debug, Deserialize)]
pub struct DepKind {
    /// `dev`, `build` or `None` for normal.
    pub kind: Option<String>,
}

impl Metadata {
    /// Runs `cargo metadata` on the workspace at `root`, filtered to the host platform.
    pub fn load(root: &Path) -> anyhow::Result<Self> {
        let host = host_triple()?;
        let out = Command::new(cargo())
            .args([
                "metadata",
                "--format-version",
                "1",
                "--filter-platform",
                &host,
            ])
            .arg("--manifest-path")
            .arg(root.join("Cargo.toml"))
            .output()
            .context("running cargo metadata")?;
        if !out.status.success() {
            bail!(
                "cargo metadata failed in {}: {}",
                root.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_slice(&out.stdout).context("parsing cargo metadata output")
    }

    /// The package with this id.
    pub fn package(&self, id: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.id == id)
    }

    /// The resolved node with this id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.resolve.nodes.iter().find(|n| n.id == id)
    }

    /// Whether a package id is a workspace member.
    pub fn is_member(&self, id: &str) -> bool {
        self.workspace_members.iter().any(|m| m == id)
    }

    /// The workspace members, as packages, sorted by name.
    pub fn members(&self) -> Vec<&Package> {
        let mut v: Vec<&Package> = self
            .workspace_members
            .iter()
            .filter_map(|id| self.package(id))
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}

/// The `cargo` to run: the one that started us, if any.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn host_triple() -> anyhow::Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|s| s.trim().to_owned())
        .context("rustc -vV printed no host triple")
}
