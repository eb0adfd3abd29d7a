//! Untrusted bytes as an agent preset (json); see `stockade_policy::oracle::check_preset`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = stockade_policy::oracle::check_preset(data, "fuzz.json") {
        panic!("{broken}");
    }
});
