//! # stockade-sandbox-linux — layer 3: the Linux backend
//!
//! Placeholder: the only crate allowed to spawn processes or contain `unsafe` (in its `sys`
//! module only). Filled by the Linux backend issues; claims nothing yet.
#![deny(unsafe_code)]
