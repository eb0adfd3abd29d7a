//! Gateway configuration: routes, secret sources, limits.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use stockade_policy::Origin;

use crate::error::GatewayError;
use crate::head::is_hop_by_hop;

/// Where the value of an injected header comes from, resolved on the host when the gateway
/// starts (never from policy text, never from the worker).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SecretSource {
    /// A host environment variable, by name.
    Env(String),
    /// A host file; one trailing newline (`\n` or `\r\n`) is removed.
    File(PathBuf),
}

/// Largest secret value accepted, in bytes.
const MAX_SECRET_BYTES: usize = 16 * 1024;

impl SecretSource {
    /// Reads the value on the host. Errors name the source, never the value.
    pub fn resolve(&self) -> Result<SecretValue, GatewayError> {
        let bytes: Vec<u8> = match self {
            SecretSource::Env(name) => {
                use std::os::unix::ffi::OsStringExt;
                match std::env::var_os(name) {
                    Some(v) => v.into_vec(),
                    None => {
                        return Err(GatewayError::SecretMissing {
                            source_name: self.to_string(),
                        });
                    }
                }
            }
            SecretSource::File(path) => {
                let mut bytes =
                    std::fs::read(path).map_err(|e| GatewayError::SecretUnreadable {
                        source_name: self.to_string(),
                        kind: e.kind(),
                    })?;
                if bytes.ends_with(b"\r\n") {
                    bytes.truncate(bytes.len() - 2);
                } else if bytes.ends_with(b"\n") {
                    bytes.truncate(bytes.len() - 1);
                }
                bytes
            }
        };
        if bytes.is_empty() {
            return Err(GatewayError::SecretMissing {
                source_name: self.to_string(),
            });
        }
        if bytes.len() > MAX_SECRET_BYTES {
            return Err(GatewayError::SecretInvalid {
                source_name: self.to_string(),
            });
        }
        let mut value =
            HeaderValue::from_bytes(&bytes).map_err(|_| GatewayError::SecretInvalid {
                source_name: self.to_string(),
            })?;
        value.set_sensitive(true);
        Ok(SecretValue(value))
    }
}

/// `env:NAME` or `file:PATH` (names only; safe to log).
impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(name) => write!(f, "env:{name}"),
            SecretSource::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// Parses `env:NAME` or `file:PATH`.
impl FromStr for SecretSource {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(name) = s.strip_prefix("env:") {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(GatewayError::SecretSourceSyntax(s.to_owned()));
            }
            return Ok(SecretSource::Env(name.to_owned()));
        }
        if let Some(path) = s.strip_prefix("file:") {
            if path.is_empty() {
                return Err(GatewayError::SecretSourceSyntax(s.to_owned()));
            }
            return Ok(SecretSource::File(PathBuf::from(path)));
        }
        Err(GatewayError::SecretSourceSyntax(s.to_owned()))
    }
}

/// A resolved secret header value. Its `Debug` and `Display` print `<redacted>`; the bytes are
/// only reachable inside this crate, where they are written into upstream requests.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(HeaderValue);

impl SecretValue {
    pub(crate) fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// An environment variable that tells the program in the sandbox where a route is served:
/// its value is `http://127.0.0.1:PORT` followed by `path` (for example `OPENAI_BASE_URL` with
/// path `/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EnvBinding {
    /// Variable name, e.g. `ANTHROPIC_BASE_URL`.
    pub name: String,
    /// Path appended to the base URL: empty or starting with `/`.
    pub path: String,
}

/// One allowed origin and what the gateway does for requests to it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// The policy rule this route implements, recorded in every audit record.
    pub rule_id: String,
    /// The exact upstream origin; the only source of the upstream scheme, host and port.
    pub origin: Origin,
    /// Headers the gateway sets on every upstream request; same-named worker headers are dropped.
    pub inject_headers: Vec<(HeaderName, SecretSource)>,
    /// Worker headers allowed to pass in addition to the built-in allow-list
    /// ([`crate::head::WORKER_HEADER_ALLOW_LIST`]).
    pub pass_headers: Vec<HeaderName>,
    /// Environment variables naming this route's in-sandbox base URL.
    pub env: Vec<EnvBinding>,
}

impl Route {
    /// A route with no injected headers, no extra pass headers and no environment bindings.
    pub fn new(rule_id: impl Into<String>, origin: Origin) -> Self {
        Route {
            rule_id: rule_id.into(),
            origin,
            inject_headers: Vec::new(),
            pass_headers: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Adds a header the gateway injects with a value from `source`.
    #[must_use]
    pub fn inject(mut self, name: HeaderName, source: SecretSource) -> Self {
        self.inject_headers.push((name, source));
        self
    }

    /// Lets one more worker header through.
    #[must_use]
    pub fn pass(mut self, name: HeaderName) -> Self {
        self.pass_headers.push(name);
        self
    }

    /// Adds an environment variable pointing at this route's base URL plus `path`.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, path: impl Into<String>) -> Self {
        self.env.push(EnvBinding {
            name: name.into(),
            path: path.into(),
        });
        self
    }

    pub(crate) fn validate(&self) -> Result<(), GatewayError> {
        if self.rule_id.is_empty()
            || self.rule_id.len() > 128
            || self.rule_id.chars().any(|c| c.is_control())
        {
            return Err(GatewayError::Config(format!(
                "route rule id `{}` must be 1..=128 printable characters",
                self.rule_id.escape_debug()
            )));
        }
        for (name, _) in &self.inject_headers {
            if forbidden_injection(name) {
                return Err(GatewayError::Config(format!(
                    "route `{}`: header `{name}` cannot be injected",
                    self.rule_id
                )));
            }
        }
        for name in &self.pass_headers {
            if forbidden_injection(name) || crate::head::is_credential_header(name) {
                return Err(GatewayError::Config(format!(
                    "route `{}`: header `{name}` cannot be passed from the worker",
                    self.rule_id
                )));
            }
        }
        for b in &self.env {
            let ok_name = !b.name.is_empty()
                && b.name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_')
                && !b.name.as_bytes()[0].is_ascii_digit();
            let ok_path = b.path.is_empty()
                || (b.path.starts_with('/')
                    && !b.path.starts_with("//")
                    && b.path.bytes().all(|c| c.is_ascii_graphic()));
            if !ok_name || !ok_path {
                return Err(GatewayError::Config(format!(
                    "route `{}`: bad environment binding `{}`",
                    self.rule_id,
                    b.name.escape_debug()
                )));
            }
        }
        Ok(())
    }
}

fn forbidden_injection(name: &HeaderName) -> bool {
    is_hop_by_hop(name)
        || name == http::header::HOST
        || name == http::header::CONTENT_LENGTH
        || name.as_str().starts_with(':')
}

/// Bounds on what one gateway accepts and how long it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GatewayLimits {
    /// Requests in flight at once across all listeners; more get `503`.
    pub max_concurrent_requests: usize,
    /// Open worker connections at once across all listeners; more are closed on accept.
    pub max_connections: usize,
    /// Largest request head (request line and headers) in bytes; larger gets `431`.
    pub max_header_bytes: usize,
    /// Most header lines in one request.
    pub max_headers: usize,
    /// Largest request body in bytes; larger gets `413` (or the stream is cut).
    pub max_request_body: u64,
    /// Largest response body in bytes passed to the worker; `None` for no limit.
    pub max_response_body: Option<u64>,
    /// Time allowed to receive a complete request head (slow-loris defence).
    pub header_read_timeout: Duration,
    /// Longest silence on a body (either direction) before the exchange is cut.
    pub idle_timeout: Duration,
    /// Longest time one request may take, head to end of response body.
    pub total_timeout: Duration,
    /// Time allowed to resolve, connect and handshake with the upstream.
    pub connect_timeout: Duration,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        GatewayLimits {
            max_concurrent_requests: 64,
            max_connections: 256,
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_request_body: 64 * 1024 * 1024,
            max_response_body: Some(1024 * 1024 * 1024),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            total_timeout: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Everything a gateway needs: routes, limits and trust roots.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// The allowed origins; rule ids must be unique.
    pub routes: Vec<Route>,
    /// Bounds and timeouts.
    pub limits: GatewayLimits,
    /// Load the host's root certificates (`rustls-native-certs`).
    pub use_system_roots: bool,
    /// Extra trusted root certificates, PEM (tests use a locally generated CA).
    pub extra_root_ca_pem: Option<Vec<u8>>,
}

impl GatewayConfig {
    /// Default limits, system roots, no extra CA.
    pub fn new(routes: Vec<Route>) -> Self {
        GatewayConfig {
            routes,
            limits: GatewayLimits::default(),
            use_system_roots: true,
            extra_root_ca_pem: None,
        }
    }
}
