//! Untrusted bytes as a ResultManifest; see `stockade_manifest::oracle::check_manifest_bytes`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = stockade_manifest::oracle::check_manifest_bytes(data) {
        panic!("{broken}");
    }
});
