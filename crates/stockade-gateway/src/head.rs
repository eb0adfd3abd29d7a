//! The gateway's own request-head validation and header rewriting, as pure functions.
//!
//! hyper parses the bytes (request line, header syntax, CR/LF, obs-fold, framing); this module
//! decides, over the parsed head, whether the request may go upstream and what the upstream
//! head is. It is what the `gateway_head` fuzz target drives, with [`prepare_upstream`]'s
//! documented guarantees as the oracle.

use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri, Version};
use stockade_policy::{Origin, Scheme};

use crate::config::SecretValue;

/// Worker request headers that pass to the upstream (besides a route's own `pass_headers`).
///
/// Why these: they describe the payload (`content-type`, `content-encoding`), negotiate the
/// response (`accept*`, conditional and range headers, `cache-control`), identify the client
/// (`user-agent`), or select an API version or feature that model SDKs send
/// (`anthropic-version`, `anthropic-beta`, `openai-beta`, `x-goog-api-client`,
/// `idempotency-key`, `x-request-id`). None carries a credential. `accept-encoding` passes: the
/// gateway never inspects bodies, so a compressed response streams through unchanged.
/// Everything else — cookies, `authorization`, API-key headers, forwarding headers
/// (`forwarded`, `x-forwarded-*`), `origin`, `referer`, proxy and hop-by-hop headers — is
/// dropped.
pub const WORKER_HEADER_ALLOW_LIST: &[&str] = &[
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-encoding",
    "content-type",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "range",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-goog-api-client",
    "idempotency-key",
    "x-request-id",
];

/// Worker header name prefixes that pass: the OpenAI/Anthropic SDKs' `x-stainless-*`
/// platform and retry descriptors (`x-stainless-os`, `x-stainless-retry-count`, ...).
pub const WORKER_HEADER_ALLOW_PREFIXES: &[&str] = &["x-stainless-"];

/// Hop-by-hop headers (RFC 9110 §7.6.1 plus the legacy proxy ones), never forwarded either way.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Headers that carry credentials; a worker can never pass them, not even through a route's
/// `pass_headers`. Only the gateway's injected headers carry credentials.
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "openai-organization",
    "openai-project",
];

/// Methods the gateway forwards. `CONNECT` (tunnels) and `TRACE` (reflects request headers,
/// injected credentials included) are refused, as is every other method.
pub const ALLOWED_METHODS: &[Method] = &[
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
];

/// True for hop-by-hop header names.
pub fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}

/// True for credential-bearing header names.
pub fn is_credential_header(name: &HeaderName) -> bool {
    CREDENTIAL_HEADERS.contains(&name.as_str())
}

/// Why the gateway refused or failed a request. The reason id is stable, secret-free and
/// is what the worker sees in the body of the error response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Denial {
    /// `CONNECT`.
    Connect,
    /// A method outside [`ALLOWED_METHODS`].
    Method,
    /// HTTP/2 or another version towards the worker.
    Version,
    /// An absolute-form (`http://host/...`) or authority-form (`host:port`) request target.
    AbsoluteForm,
    /// A request target starting with `//`.
    NetworkPath,
    /// Asterisk-form or otherwise not an origin-form target.
    Target,
    /// No `Host` header.
    MissingHost,
    /// More than one `Host` header.
    DuplicateHost,
    /// A `Host` that is not this listener's own address.
    HostMismatch,
    /// Both `Content-Length` and `Transfer-Encoding`, or several lengths.
    LengthConflict,
    /// A `Transfer-Encoding` other than `chunked`.
    TransferEncoding,
    /// An `Upgrade` request (WebSocket, h2c): not supported.
    Upgrade,
    /// The request head is larger than the limit.
    HeaderTooLarge,
    /// The request body is larger than the limit.
    BodyTooLarge,
    /// Too many requests in flight.
    Busy,
    /// The upstream resolved to (or names) an address the gateway will not connect to.
    UpstreamAddressForbidden,
    /// The upstream could not be reached or failed mid-exchange.
    UpstreamFailed,
    /// The upstream did not answer in time.
    UpstreamTimeout,
    /// hyper could not parse the request (malformed, CR/LF injection, bad framing).
    Malformed,
    /// The request head did not arrive in time.
    HeaderTimeout,
    /// The worker's request body stalled past the idle timeout or the total timeout.
    RequestBodyTimeout,
}

impl Denial {
    /// Stable reason id, used in audit records and error bodies.
    pub const fn reason(self) -> &'static str {
        match self {
            Denial::Connect => "connect_refused",
            Denial::Method => "method_refused",
            Denial::Version => "version_refused",
            Denial::AbsoluteForm => "absolute_form_target",
            Denial::NetworkPath => "network_path_target",
            Denial::Target => "target_not_origin_form",
            Denial::MissingHost => "missing_host",
            Denial::DuplicateHost => "duplicate_host",
            Denial::HostMismatch => "host_mismatch",
            Denial::LengthConflict => "length_conflict",
            Denial::TransferEncoding => "transfer_encoding_refused",
            Denial::Upgrade => "upgrade_refused",
            Denial::HeaderTooLarge => "header_too_large",
            Denial::BodyTooLarge => "body_too_large",
            Denial::Busy => "too_many_requests_in_flight",
            Denial::UpstreamAddressForbidden => "upstream_address_forbidden",
            Denial::UpstreamFailed => "upstream_failed",
            Denial::UpstreamTimeout => "upstream_timeout",
            Denial::Malformed => "malformed_request",
            Denial::HeaderTimeout => "header_timeout",
            Denial::RequestBodyTimeout => "request_body_timeout",
        }
    }

    /// The status the worker gets.
    pub const fn status(self) -> StatusCode {
        match self {
            Denial::Connect | Denial::Method => StatusCode::METHOD_NOT_ALLOWED,
            Denial::Version => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            Denial::AbsoluteForm | Denial::NetworkPath | Denial::Target | Denial::HostMismatch => {
                StatusCode::FORBIDDEN
            }
            Denial::MissingHost
            | Denial::DuplicateHost
            | Denial::LengthConflict
            | Denial::Malformed => StatusCode::BAD_REQUEST,
            Denial::TransferEncoding => StatusCode::NOT_IMPLEMENTED,
            Denial::Upgrade => StatusCode::NOT_IMPLEMENTED,
            Denial::HeaderTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Denial::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Denial::Busy => StatusCode::SERVICE_UNAVAILABLE,
            Denial::UpstreamAddressForbidden | Denial::UpstreamFailed => StatusCode::BAD_GATEWAY,
            Denial::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Denial::HeaderTimeout | Denial::RequestBodyTimeout => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// True when the gateway's policy refused the request (as opposed to an upstream failure).
    pub const fn is_policy(self) -> bool {
        !matches!(
            self,
            Denial::UpstreamAddressForbidden
                | Denial::UpstreamFailed
                | Denial::UpstreamTimeout
                | Denial::Busy
        )
    }
}

/// What the head check needs to know about the listener and the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadContext {
    /// The listener's own address (in the sandbox's network namespace).
    pub listener: SocketAddr,
    /// Largest request head in bytes.
    pub max_header_bytes: usize,
    /// Largest request body in bytes.
    pub max_request_body: u64,
}

/// The route as the head check sees it.
#[derive(Debug, Clone, Copy)]
pub struct RouteView<'a> {
    /// The upstream origin.
    pub origin: &'a Origin,
    /// Injected headers with their resolved values.
    pub inject: &'a [(HeaderName, SecretValue)],
    /// Extra worker headers allowed to pass.
    pub pass: &'a [HeaderName],
}

/// The upstream request head.
#[derive(Debug, Clone)]
pub struct UpstreamHead {
    /// Same as the worker's.
    pub method: Method,
    /// `origin` + the worker's path and query.
    pub uri: Uri,
    /// Filtered worker headers plus injected headers. Contains no `Host`, `Content-Length` or
    /// `Transfer-Encoding`: the HTTP client sets `Host`/`:authority` from the URI and frames
    /// the body itself.
    pub headers: HeaderMap,
}

/// Validates a parsed worker request head and builds the upstream head.
///
/// Guarantees when it returns `Ok(head)`:
/// - `head.uri`'s scheme, host and port are exactly `route.origin`'s;
/// - `head.headers` holds every injected header exactly once with its configured value, no
///   worker header of an injected name, no hop-by-hop header, no credential header but the
///   injected ones, and nothing outside the allow-lists.
pub fn prepare_upstream(
    method: &Method,
    uri: &Uri,
    version: Version,
    headers: &HeaderMap,
    ctx: &HeadContext,
    route: &RouteView<'_>,
) -> Result<UpstreamHead, Denial> {
    check_head(method, uri, version, headers, ctx)?;
    let uri = upstream_uri(route.origin, uri)?;
    let mut out = filter_worker_headers(headers, route);
    for (name, value) in route.inject {
        out.insert(name.clone(), value.header_value().clone());
    }
    Ok(UpstreamHead {
        method: method.clone(),
        uri,
        headers: out,
    })
}

/// The checks on a worker request head, without building anything.
pub fn check_head(
    method: &Method,
    uri: &Uri,
    version: Version,
    headers: &HeaderMap,
    ctx: &HeadContext,
) -> Result<(), Denial> {
    if *method == Method::CONNECT {
        return Err(Denial::Connect);
    }
    if !ALLOWED_METHODS.contains(method) {
        return Err(Denial::Method);
    }
    if version != Version::HTTP_11 && version != Version::HTTP_10 {
        return Err(Denial::Version);
    }
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(Denial::AbsoluteForm);
    }
    let Some(pq) = uri.path_and_query() else {
        return Err(Denial::Target);
    };
    let target = pq.as_str();
    if target.starts_with("//") {
        return Err(Denial::NetworkPath);
    }
    if !target.starts_with('/') || target.contains('\\') {
        return Err(Denial::Target);
    }
    let head_bytes = headers
        .iter()
        .fold(method.as_str().len() + target.len() + 12, |acc, (n, v)| {
            acc.saturating_add(n.as_str().len() + v.len() + 4)
        });
    if head_bytes > ctx.max_header_bytes {
        return Err(Denial::HeaderTooLarge);
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (None, _) => return Err(Denial::MissingHost),
        (Some(_), Some(_)) => return Err(Denial::DuplicateHost),
        (Some(h), None) => h,
    };
    if !host_matches_listener(host.as_bytes(), ctx.listener) {
        return Err(Denial::HostMismatch);
    }
    let te: Vec<&HeaderValue> = headers.get_all(header::TRANSFER_ENCODING).iter().collect();
    let cl: Vec<&HeaderValue> = headers.get_all(header::CONTENT_LENGTH).iter().collect();
    if !te.is_empty() && !cl.is_empty() {
        return Err(Denial::LengthConflict);
    }
    if te.len() > 1
        || te
            .first()
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Err(Denial::TransferEncoding);
    }
    if cl.len() > 1 {
        return Err(Denial::LengthConflict);
    }
    if let Some(v) = cl.first() {
        let len = std::str::from_utf8(v.as_bytes())
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or(Denial::LengthConflict)?;
        if len > ctx.max_request_body {
            return Err(Denial::BodyTooLarge);
        }
    }
    if headers.contains_key(header::UPGRADE) {
        return Err(Denial::Upgrade);
    }
    Ok(())
}

/// Whether a `Host` value names this listener: `IP:PORT` of the listener itself or
/// `localhost:PORT` (case-insensitive), with the port optional only when it is 80.
pub fn host_matches_listener(host: &[u8], listener: SocketAddr) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let port = listener.port();
    let ip = match listener {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let with_port = [format!("{ip}:{port}"), format!("localhost:{port}")];
    if with_port.contains(&host) {
        return true;
    }
    port == 80 && (host == ip || host == "localhost")
}

/// The origin's authority as written in a URI: the port is omitted when it is the default.
pub fn origin_authority(origin: &Origin) -> String {
    if origin.port() == origin.scheme().default_port() {
        origin.host().to_owned()
    } else {
        format!("{}:{}", origin.host(), origin.port())
    }
}

/// `origin` + the worker's origin-form path and query; refuses anything else.
pub fn upstream_uri(origin: &Origin, uri: &Uri) -> Result<Uri, Denial> {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(Denial::AbsoluteForm);
    }
    let pq = uri
        .path_and_query()
        .map(|p| p.as_str())
        .ok_or(Denial::Target)?;
    if pq.starts_with("//") {
        return Err(Denial::NetworkPath);
    }
    if !pq.starts_with('/') {
        return Err(Denial::Target);
    }
    let text = format!(
        "{}://{}{}",
        origin.scheme().as_str(),
        origin_authority(origin),
        pq
    );
    let built: Uri = text.parse().map_err(|_| Denial::Target)?;
    // Defence in depth: the parsed URI must name exactly the origin.
    let scheme_ok = built.scheme_str() == Some(origin.scheme().as_str());
    let host_ok = built
        .host()
        .is_some_and(|h| h.eq_ignore_ascii_case(origin.host()));
    let port_ok = built.port_u16().unwrap_or(origin.scheme().default_port()) == origin.port();
    let pq_ok = built.path_and_query().map(|p| p.as_str()) == Some(pq);
    if scheme_ok && host_ok && port_ok && pq_ok {
        Ok(built)
    } else {
        Err(Denial::Target)
    }
}

/// Header names the worker's `Connection` header nominates as hop-by-hop.
fn connection_nominated(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The worker headers that may go upstream: allow-listed, not hop-by-hop (nor nominated by
/// `Connection`), not credential-bearing, not of an injected name.
pub fn filter_worker_headers(headers: &HeaderMap, route: &RouteView<'_>) -> HeaderMap {
    let nominated = connection_nominated(headers);
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        let allowed = WORKER_HEADER_ALLOW_LIST.contains(&n)
            || WORKER_HEADER_ALLOW_PREFIXES
                .iter()
                .any(|p| n.starts_with(p))
            || route.pass.contains(name);
        if !allowed
            || is_hop_by_hop(name)
            || is_credential_header(name)
            || nominated.iter().any(|t| t == n)
            || route.inject.iter().any(|(i, _)| i == name)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Rewrites an upstream response head for the worker: drops hop-by-hop headers and any header
/// whose value contains an injected secret (defence in depth against a reflecting upstream),
/// and turns a `Location` on the route's own origin into a path (so a same-origin redirect,
/// followed by the worker, comes back through the gateway). A `Location` on any other origin
/// passes unchanged: the gateway never follows redirects, and the sandbox cannot reach it.
pub fn rewrite_response_headers(headers: &mut HeaderMap, route: &RouteView<'_>) {
    let nominated = connection_nominated(headers);
    let names: Vec<HeaderName> = headers.keys().cloned().collect();
    for name in names {
        if is_hop_by_hop(&name) || nominated.iter().any(|t| t == name.as_str()) {
            headers.remove(&name);
        }
    }
    let secrets: Vec<&[u8]> = route
        .inject
        .iter()
        .map(|(_, v)| v.header_value().as_bytes())
        .filter(|b| !b.is_empty())
        .collect();
    if !secrets.is_empty() {
        let tainted: Vec<HeaderName> = headers
            .iter()
            .filter(|(_, v)| secrets.iter().any(|s| contains(v.as_bytes(), s)))
            .map(|(n, _)| n.clone())
            .collect();
        for name in tainted {
            headers.remove(&name);
        }
    }
    if let Some(loc) = headers
        .get(header::LOCATION)
        .and_then(|v| same_origin_path(route.origin, v.as_bytes()))
    {
        headers.insert(header::LOCATION, loc);
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn same_origin_path(origin: &Origin, location: &[u8]) -> Option<HeaderValue> {
    let uri: Uri = std::str::from_utf8(location).ok()?.parse().ok()?;
    let scheme = match uri.scheme_str()? {
        s if s.eq_ignore_ascii_case("http") => Scheme::Http,
        s if s.eq_ignore_ascii_case("https") => Scheme::Https,
        _ => return None,
    };
    let host = uri.host()?;
    let port = uri.port_u16().unwrap_or(scheme.default_port());
    if scheme != origin.scheme()
        || !host.eq_ignore_ascii_case(origin.host())
        || port != origin.port()
    {
        return None;
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return None;
    }
    let pq = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    if pq.starts_with("//") || !pq.starts_with('/') {
        return None;
    }
    HeaderValue::from_str(pq).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> HeadContext {
        HeadContext {
            listener: "127.0.0.1:4000".parse().unwrap(),
            max_header_bytes: 8192,
            max_request_body: 1000,
        }
    }

    fn hdrs(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn check(method: &str, target: &str, h: &[(&str, &str)]) -> Result<(), Denial> {
        let uri: Uri = target.parse().unwrap();
        check_head(
            &Method::from_bytes(method.as_bytes()).unwrap(),
            &uri,
            Version::HTTP_11,
            &hdrs(h),
            &ctx(),
        )
    }

    #[test]
    fn accepts_plain_origin_form() {
        assert_eq!(
            check("POST", "/v1/messages?x=1", &[("host", "127.0.0.1:4000")]),
            Ok(())
        );
        assert_eq!(check("GET", "/", &[("host", "LOCALHOST:4000")]), Ok(()));
    }

    #[test]
    fn refuses_each_bypass_class() {
        let h = [("host", "127.0.0.1:4000")];
        assert_eq!(
            check("CONNECT", "evil.example:443", &h),
            Err(Denial::Connect)
        );
        assert_eq!(check("TRACE", "/", &h), Err(Denial::Method));
        assert_eq!(
            check("GET", "http://evil.example/x", &h),
            Err(Denial::AbsoluteForm)
        );
        assert_eq!(
            check("GET", "http://127.0.0.1:4000/x", &h),
            Err(Denial::AbsoluteForm)
        );
        assert_eq!(
            check("GET", "//evil.example/x", &h),
            Err(Denial::NetworkPath)
        );
        assert_eq!(check("OPTIONS", "*", &h), Err(Denial::Target));
        assert_eq!(
            check("GET", "/", &[("host", "evil.example")]),
            Err(Denial::HostMismatch)
        );
        assert_eq!(
            check("GET", "/", &[("host", "127.0.0.1:4001")]),
            Err(Denial::HostMismatch)
        );
        assert_eq!(
            check("GET", "/", &[("host", "127.0.0.1")]),
            Err(Denial::HostMismatch)
        );
        assert_eq!(check("GET", "/", &[]), Err(Denial::MissingHost));
        assert_eq!(
            check("GET", "/", &[("host", "127.0.0.1:4000"), ("host", "evil")]),
            Err(Denial::DuplicateHost)
        );
        assert_eq!(
            check(
                "POST",
                "/",
                &[
                    ("host", "127.0.0.1:4000"),
                    ("content-length", "3"),
                    ("transfer-encoding", "chunked")
                ]
            ),
            Err(Denial::LengthConflict)
        );
        assert_eq!(
            check(
                "POST",
                "/",
                &[
                    ("host", "127.0.0.1:4000"),
                    ("transfer-encoding", "gzip, chunked")
                ]
            ),
            Err(Denial::TransferEncoding)
        );
        assert_eq!(
            check(
                "POST",
                "/",
                &[("host", "127.0.0.1:4000"), ("content-length", "1001")]
            ),
            Err(Denial::BodyTooLarge)
        );
        assert_eq!(
            check(
                "GET",
                "/",
                &[("host", "127.0.0.1:4000"), ("upgrade", "websocket")]
            ),
            Err(Denial::Upgrade)
        );
        let big = "a".repeat(9000);
        assert_eq!(
            check(
                "GET",
                "/",
                &[("host", "127.0.0.1:4000"), ("user-agent", &big)]
            ),
            Err(Denial::HeaderTooLarge)
        );
    }

    #[test]
    fn upstream_uri_keeps_the_origin() {
        let o: Origin = "https://api.example.com".parse().unwrap();
        let u = upstream_uri(&o, &"/v1/x?y=@evil.example".parse().unwrap()).unwrap();
        assert_eq!(
            u.to_string(),
            "https://api.example.com/v1/x?y=@evil.example"
        );
        let o: Origin = "http://127.0.0.1:9999".parse().unwrap();
        let u = upstream_uri(&o, &"/@evil.example/".parse().unwrap()).unwrap();
        assert_eq!(u.host(), Some("127.0.0.1"));
        assert_eq!(u.port_u16(), Some(9999));
    }

    #[test]
    fn headers_are_allow_listed_and_injected_names_replaced() {
        let secret = crate::SecretSource::Env("STOCKADE_GATEWAY_UNIT_NEVER_SET".into());
        assert!(secret.resolve().is_err());
        let o: Origin = "https://api.example.com".parse().unwrap();
        let inject: Vec<(HeaderName, SecretValue)> = Vec::new();
        let pass = [HeaderName::from_static("x-custom")];
        let route = RouteView {
            origin: &o,
            inject: &inject,
            pass: &pass,
        };
        let worker = hdrs(&[
            ("host", "127.0.0.1:4000"),
            ("authorization", "Bearer stolen"),
            ("cookie", "a=b"),
            ("x-forwarded-for", "1.2.3.4"),
            ("content-type", "application/json"),
            ("x-stainless-os", "Linux"),
            ("connection", "x-stainless-os, close"),
            ("x-custom", "1"),
            ("transfer-encoding", "chunked"),
        ]);
        let out = filter_worker_headers(&worker, &route);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, vec!["content-type", "x-custom"]);
    }

    #[test]
    fn location_on_the_same_origin_becomes_a_path() {
        let o: Origin = "https://api.example.com".parse().unwrap();
        let route = RouteView {
            origin: &o,
            inject: &[],
            pass: &[],
        };
        let mut h = hdrs(&[
            ("location", "https://API.example.com:443/next?a=1"),
            ("connection", "x-a"),
            ("x-a", "1"),
            ("keep-alive", "5"),
        ]);
        rewrite_response_headers(&mut h, &route);
        assert_eq!(h.get("location").unwrap(), "/next?a=1");
        assert!(h.get("x-a").is_none() && h.get("keep-alive").is_none());
        let mut h = hdrs(&[("location", "https://evil.example/next")]);
        rewrite_response_headers(&mut h, &route);
        assert_eq!(h.get("location").unwrap(), "https://evil.example/next");
    }
}
