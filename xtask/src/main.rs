//! Repository automation for Stockade.
#![forbid(unsafe_code)]

fn main() {}
