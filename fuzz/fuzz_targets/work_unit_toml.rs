//! Untrusted bytes as a work unit (toml); see `stockade_policy::oracle::check_work_unit`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = stockade_policy::oracle::check_work_unit(data, "fuzz.toml") {
        panic!("{broken}");
    }
});
