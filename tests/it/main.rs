//! Workspace end-to-end and adversarial tests.
#![forbid(unsafe_code)]
