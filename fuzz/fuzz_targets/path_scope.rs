//! Untrusted patterns and paths through capture's scope check; see
//! `stockade_capture::oracle::check_scope`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = stockade_capture::oracle::check_scope(data) {
        panic!("{broken}");
    }
});
