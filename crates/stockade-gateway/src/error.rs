//! Errors reported to the gateway's caller (the host), never to the worker.

/// Why a gateway could not start. Messages name secret *sources*, never secret values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A secret source names an environment variable that is unset or empty, or an empty file.
    #[error("secret source `{source_name}` is unset or empty on the host")]
    SecretMissing {
        /// `env:NAME` or `file:PATH`.
        source_name: String,
    },
    /// A secret file could not be read.
    #[error("secret source `{source_name}` cannot be read: {kind}")]
    SecretUnreadable {
        /// `file:PATH`.
        source_name: String,
        /// The I/O error kind (the message could quote nothing secret, but stay minimal).
        kind: std::io::ErrorKind,
    },
    /// A secret value is not a valid header value (control characters, too long).
    #[error(
        "secret source `{source_name}` holds a value that is not a valid header value (control characters or longer than 16 KiB)"
    )]
    SecretInvalid {
        /// `env:NAME` or `file:PATH`.
        source_name: String,
    },
    /// A secret source string is neither `env:NAME` nor `file:PATH`.
    #[error("secret source `{0}` must be `env:NAME` or `file:PATH`")]
    SecretSourceSyntax(String),
    /// The configuration is inconsistent.
    #[error("gateway configuration: {0}")]
    Config(String),
    /// A listener names a rule id that no route has.
    #[error("listener for rule `{0}` has no matching route")]
    UnknownRule(String),
    /// A listener could not be used (not bound, not convertible to non-blocking).
    #[error("listener for rule `{rule_id}` is unusable: {source}")]
    Listener {
        /// The rule id the listener was handed with.
        rule_id: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TLS trust roots could not be assembled.
    #[error("tls trust roots: {0}")]
    Tls(String),
    /// `Gateway::start` was called outside a tokio runtime, or the runtime thread failed.
    #[error("gateway runtime: {0}")]
    Runtime(String),
}
