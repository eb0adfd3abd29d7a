//! Untrusted bytes as an origin; see `stockade_policy::oracle::check_origin`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = stockade_policy::oracle::check_origin(data) {
        panic!("{broken}");
    }
});
