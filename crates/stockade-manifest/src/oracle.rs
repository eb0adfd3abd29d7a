//! Fuzzing oracle for manifest parsing (the fuzz target is glue around this).

use crate::ResultManifest;

/// Parses untrusted bytes as a manifest and checks the laws: parsing never panics, and anything
/// accepted re-renders to exactly the same bytes (one spelling per manifest).
pub fn check_manifest_bytes(bytes: &[u8]) -> Result<(), String> {
    let Ok(m) = ResultManifest::from_canonical_json(bytes) else {
        return Ok(());
    };
    let again = m
        .to_canonical_json()
        .map_err(|e| format!("accepted manifest does not render: {e}"))?;
    if again != bytes {
        return Err("accepted manifest re-renders to different bytes".into());
    }
    let back = ResultManifest::from_canonical_json(&again)
        .map_err(|e| format!("rendered manifest does not parse: {e}"))?;
    if back != m {
        return Err("manifest changed across a round trip".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_fuzz_corpus_holds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/manifest_json");
        let mut accepted = 0;
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
            super::check_manifest_bytes(&data).unwrap();
            if crate::ResultManifest::from_canonical_json(&data).is_ok() {
                accepted += 1;
            }
        }
        assert!(
            accepted > 0,
            "the seed corpus holds at least one valid manifest"
        );
    }
}
