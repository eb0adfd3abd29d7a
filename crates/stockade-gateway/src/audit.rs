//! The audit trail: one record per request, allowed or not, without secrets.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// What happened to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Forwarded to the upstream; the response (whatever its status) reached the worker.
    Allowed,
    /// Refused by the gateway's policy or limits; nothing was sent upstream for it.
    Denied,
    /// Allowed by policy but the exchange failed (upstream unreachable, forbidden address,
    /// timeout, body limit or stream cut).
    Failed,
}

/// One request as the host sees it. Holds no header values, no bodies and no query strings:
/// nothing here can carry an injected secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// The rule (route) of the listener the request arrived on.
    pub rule_id: String,
    /// The route's upstream origin, `scheme://host:port`.
    pub origin: String,
    /// The request method, `-` when the head could not be parsed.
    pub method: String,
    /// The request path without the query, at most 256 bytes, `-` when unparsed.
    pub path: String,
    /// The status sent to the worker; 0 when none was sent.
    pub status: u16,
    /// Request body bytes received from the worker.
    pub bytes_in: u64,
    /// Response body bytes passed to the worker.
    pub bytes_out: u64,
    /// Microseconds from the request head to the end of the response body.
    pub duration_us: u64,
    /// The decision.
    pub decision: Decision,
    /// A stable reason id ([`crate::Denial::reason`] or a stream failure), if not plainly allowed.
    pub reason: Option<String>,
}

/// Most records kept; later ones are counted in [`crate::GatewayHandle::audit_dropped`] instead.
pub const MAX_AUDIT_RECORDS: usize = 100_000;

/// A shared, bounded audit log.
#[derive(Debug, Clone, Default)]
pub struct AuditLog {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    records: Vec<AuditRecord>,
    dropped: u64,
}

impl AuditLog {
    pub(crate) fn push(&self, record: AuditRecord) {
        tracing::info!(
            target: "stockade_gateway::audit",
            rule = %record.rule_id,
            origin = %record.origin,
            method = %record.method,
            path = %record.path,
            status = record.status,
            bytes_in = record.bytes_in,
            bytes_out = record.bytes_out,
            duration_us = record.duration_us,
            decision = ?record.decision,
            reason = record.reason.as_deref().unwrap_or(""),
            "gateway request"
        );
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.records.len() < MAX_AUDIT_RECORDS {
            inner.records.push(record);
        } else {
            inner.dropped += 1;
        }
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .records
            .clone()
    }

    /// Records not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dropped
    }
}

/// The audit path: no query, at most 256 bytes (cut on a character boundary).
pub(crate) fn audit_path(uri: &http::Uri) -> String {
    let p = uri.path();
    let mut end = p.len().min(256);
    while !p.is_char_boundary(end) {
        end -= 1;
    }
    p[..end].to_owned()
}
