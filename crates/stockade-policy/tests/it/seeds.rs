//! Replays the committed fuzz seeds through the same oracles the fuzz targets run, so the laws
//! are checked by `cargo test` on the stable toolchain too.

use std::path::PathBuf;

use stockade_policy::oracle::{check_origin, check_preset, check_work_unit};

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
        })
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

#[test]
fn preset_seeds_hold_the_laws() {
    for (target, ext) in [("preset_toml", "toml"), ("preset_json", "json")] {
        for (path, bytes) in seeds(target) {
            check_preset(&bytes, &format!("seed.{ext}"))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

#[test]
fn work_unit_seeds_hold_the_laws() {
    for (target, ext) in [("work_unit_toml", "toml"), ("work_unit_json", "json")] {
        for (path, bytes) in seeds(target) {
            check_work_unit(&bytes, &format!("seed.{ext}"))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

#[test]
fn origin_seeds_hold_the_laws() {
    for (path, bytes) in seeds("origin") {
        check_origin(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn oracles_catch_a_broken_law() {
    // The oracles are not vacuous: a seed that parses is actually checked.
    assert!(check_origin(b"https://api.openai.com").is_ok());
    assert!(check_work_unit(&crate::data("fix-parser.work.toml"), "x.toml").is_ok());
    assert!(check_preset(&crate::data("codex.preset.toml"), "x.toml").is_ok());
}
