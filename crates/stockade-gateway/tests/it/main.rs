//! Integration tests for stockade-gateway: local upstreams on loopback only.
//!
//! Every test starts its own upstream(s) on 127.0.0.1 and a gateway whose listeners are bound
//! on 127.0.0.1 (standing in for the sandbox's loopback), and talks to it as a hostile worker
//! would: raw bytes over TCP.

#![forbid(unsafe_code)]
// Test support code (servers, clients) outside #[test] functions unwraps too.
#![allow(clippy::unwrap_used)]

mod bypass;
mod inject;
mod limits;
mod stream;
mod support;
mod tls;
