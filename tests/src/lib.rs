//! Test-only crate: see `it/`.
#![forbid(unsafe_code)]
