//! # stockade-gateway — layer 2: host-side HTTP gateway for exact-origin egress
//!
//! What this crate does: it serves each allowed origin (scheme, host, port) on a plain-HTTP
//! listener that the sandbox backend created on loopback inside the sandbox's network
//! namespace, and forwards each request to that one origin from the host, with fixed
//! per-origin headers (credentials) that never enter the sandbox. The upstream URL is built
//! only from the route's origin; the request head is validated ([`head`]), worker headers pass
//! through an allow-list, hop-by-hop headers are stripped, bodies stream both ways with byte,
//! idle and total-time limits, and every request — allowed, denied or failed — is recorded in
//! an [`AuditRecord`] that holds no secret.
//!
//! Entry points: [`Gateway::start`] (inside a tokio runtime) or [`BlockingGateway::start`]
//! (own runtime), both taking a [`GatewayConfig`] and `std::net::TcpListener`s tagged with the
//! rule id they serve; [`env_for_sandbox`] for the variables that tell the sandboxed program
//! where each origin is served; [`plan_for_sandbox`] to turn `stockade exec`'s `--allow-origin`
//! and `--origin-header` flags into routes, in-sandbox ports, environment and stderr lines.
//! Design and threat analysis: `docs/adr/0030-host-side-gateway-exact-origin-egress.md`.
//!
//! What this crate does **not** do: it spawns no process, enters no namespace and creates no
//! listener (the backend hands them over); it does not deny direct TCP, UDP or DNS (the
//! sandbox's empty network namespace does); it is not a CONNECT proxy or a transparent
//! firewall; it does not follow redirects; it does not scan response bodies for secrets
//! (authorized upstreams are trusted not to reflect the injected credentials — response
//! *headers* that contain one are dropped as defence in depth); it speaks HTTP/1.1 towards the
//! worker only (no WebSocket or other upgrades).
#![forbid(unsafe_code)]

mod addr;
mod audit;
mod blocking;
mod body;
mod config;
mod env;
mod error;
mod gateway;
pub mod head;
pub mod oracle;
mod plan;
mod upstream;

pub use addr::{AddrClass, classify, may_connect};
pub use audit::{AuditRecord, Decision, MAX_AUDIT_RECORDS};
pub use blocking::BlockingGateway;
pub use config::{EnvBinding, GatewayConfig, GatewayLimits, Route, SecretSource, SecretValue};
pub use env::{describe_endpoints, env_for_sandbox};
pub use error::GatewayError;
pub use gateway::{Endpoint, Gateway, GatewayHandle};
pub use head::Denial;
pub use plan::{DEFAULT_FIRST_PORT, SandboxPlan, parse_header_flag, plan_for_sandbox};
pub use upstream::ConnectError;

/// The header-name type routes use (re-exported so callers need no direct `http` dependency).
pub use http::HeaderName;
