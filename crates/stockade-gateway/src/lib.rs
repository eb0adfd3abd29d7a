//! # stockade-gateway
//!
//! Placeholder: this crate is filled by a later issue. It holds no working code yet and
//! claims nothing.
#![forbid(unsafe_code)]
