//! The fuzz oracle for request-head handling: raw bytes in, guarantees checked, panics on a
//! violation. The `gateway_head` fuzz target is glue over [`check_request_bytes`]; the
//! committed seeds are replayed by this crate's tests.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, Version};

use crate::head::{self, HeadContext, RouteView};

/// Parses `data` as an HTTP/1.x request head the way the server does (httparse, then the `http`
/// types, rejecting what they reject), runs [`head::prepare_upstream`] and asserts its
/// guarantees. Then treats the same headers as an upstream *response* head, plants every
/// injected value in it, and asserts [`head::rewrite_response_headers`] removes them all.
///
/// `route.inject` must not be empty and its values must be at least 8 bytes long.
pub fn check_request_bytes(data: &[u8], ctx: &HeadContext, route: &RouteView<'_>) {
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut slots);
    let Ok(httparse::Status::Complete(_)) = req.parse(data) else {
        return;
    };
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return;
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let Ok(uri) = path.parse::<Uri>() else { return };
    let version = if minor == 1 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    let mut headers = HeaderMap::new();
    for h in req.headers.iter() {
        let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) else {
            return;
        };
        headers.append(n, v);
    }
    check_parsed(&method, &uri, version, &headers, ctx, route);
}

/// [`check_request_bytes`] over an already parsed head.
pub fn check_parsed(
    method: &Method,
    uri: &Uri,
    version: Version,
    headers: &HeaderMap,
    ctx: &HeadContext,
    route: &RouteView<'_>,
) {
    let checked = head::check_head(method, uri, version, headers, ctx);
    let prepared = head::prepare_upstream(method, uri, version, headers, ctx, route);
    match (&checked, &prepared) {
        (Err(a), Err(b)) => assert_eq!(
            a, b,
            "prepare_upstream refuses for another reason than check_head"
        ),
        (Err(a), Ok(_)) => panic!("prepared a head that check_head refuses ({a:?})"),
        (Ok(()), _) => {}
    }
    if let Ok(up) = &prepared {
        assert_ne!(*method, Method::CONNECT);
        assert!(head::ALLOWED_METHODS.contains(method));
        // The upstream URI names exactly the origin.
        assert_eq!(up.uri.scheme_str(), Some(route.origin.scheme().as_str()));
        assert!(
            up.uri
                .host()
                .is_some_and(|h| h.eq_ignore_ascii_case(route.origin.host())),
            "{}",
            up.uri
        );
        assert_eq!(
            up.uri
                .port_u16()
                .unwrap_or(route.origin.scheme().default_port()),
            route.origin.port()
        );
        assert!(up.uri.path().starts_with('/') && !up.uri.path().starts_with("//"));
        // The Host the worker sent named this listener.
        let host = headers
            .get(header::HOST)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        assert!(head::host_matches_listener(host, ctx.listener));
        // Injected headers exactly once, with their values; nothing else credential-like.
        for (name, value) in route.inject {
            let all: Vec<&HeaderValue> = up.headers.get_all(name).iter().collect();
            assert_eq!(all.len(), 1, "{name} present {} times", all.len());
            assert_eq!(all[0], value.header_value());
        }
        for (name, _) in &up.headers {
            let injected = route.inject.iter().any(|(n, _)| n == name);
            assert!(!head::is_hop_by_hop(name), "{name}");
            assert!(
                name != header::HOST
                    && name != header::CONTENT_LENGTH
                    && name != header::TRANSFER_ENCODING,
                "{name}"
            );
            assert!(injected || !head::is_credential_header(name), "{name}");
            let listed = head::WORKER_HEADER_ALLOW_LIST.contains(&name.as_str())
                || head::WORKER_HEADER_ALLOW_PREFIXES
                    .iter()
                    .any(|p| name.as_str().starts_with(p))
                || route.pass.contains(name);
            assert!(
                injected || listed,
                "{name} passed without being allow-listed"
            );
        }
    }
    // Response side: every planted secret is removed, whatever else is there.
    let mut response = headers.clone();
    for (i, (_, value)) in route.inject.iter().enumerate() {
        let mut planted = b"x".to_vec();
        planted.extend_from_slice(value.header_value().as_bytes());
        planted.extend_from_slice(b"y");
        if let Ok(v) = HeaderValue::from_bytes(&planted) {
            response.append(
                HeaderName::from_static(if i % 2 == 0 {
                    "x-reflect"
                } else {
                    "set-cookie"
                }),
                v,
            );
        }
        response.append(header::LOCATION, value.header_value().clone());
    }
    head::rewrite_response_headers(&mut response, route);
    for (_, value) in route.inject {
        let secret = value.header_value().as_bytes();
        for (name, v) in &response {
            assert!(
                !v.as_bytes().windows(secret.len()).any(|w| w == secret),
                "secret left in response header {name}"
            );
        }
    }
    for (name, _) in &response {
        assert!(!head::is_hop_by_hop(name), "{name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SecretSource, SecretValue};
    use proptest::prelude::*;
    use stockade_policy::Origin;

    fn secret() -> (tempfile::NamedTempFile, SecretValue) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, b"Bearer sk-oracle-secret-value\n").unwrap();
        let v = SecretSource::File(f.path().to_owned()).resolve().unwrap();
        (f, v)
    }

    fn with_route(f: impl Fn(&HeadContext, &RouteView<'_>)) {
        let (_file, value) = secret();
        let origin: Origin = "https://api.example.com".parse().unwrap();
        let inject = [
            (header::AUTHORIZATION, value.clone()),
            (HeaderName::from_static("x-api-key"), value),
        ];
        let pass = [HeaderName::from_static("x-extra")];
        let route = RouteView {
            origin: &origin,
            inject: &inject,
            pass: &pass,
        };
        let ctx = HeadContext {
            listener: "127.0.0.1:4000".parse().unwrap(),
            max_header_bytes: 16 * 1024,
            max_request_body: 1 << 20,
        };
        f(&ctx, &route);
    }

    #[test]
    fn committed_fuzz_seeds_hold_the_oracle() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/gateway_head");
        let seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .collect();
        assert!(seeds.len() >= 5, "{seeds:?}");
        with_route(|ctx, route| {
            for seed in &seeds {
                check_request_bytes(&std::fs::read(seed).unwrap(), ctx, route);
            }
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Whatever target, host and headers a worker sends, the oracle's guarantees hold.
        #[test]
        fn hostile_heads_never_escape_the_origin(
            method in prop::sample::select(vec!["GET", "POST", "CONNECT", "TRACE", "OPTIONS", "PUT"]),
            target in prop::sample::select(vec!["/", "/v1/x", "//evil.example/x", "http://evil.example/", "*", "evil.example:443", "/@evil.example", "/a?b=http://evil.example", "https://api.example.com/v1"]),
            host in prop::sample::select(vec!["127.0.0.1:4000", "localhost:4000", "evil.example", "127.0.0.1:4001", "api.example.com", ""]),
            extra in prop::collection::vec((prop::sample::select(vec!["authorization", "x-api-key", "cookie", "connection", "content-type", "x-stainless-os", "transfer-encoding", "content-length", "upgrade", "x-extra", "forwarded", "te", "host"]), "[ -~]{0,20}"), 0..6),
        ) {
            let mut data = format!("{method} {target} HTTP/1.1\r\n");
            if !host.is_empty() {
                data.push_str(&format!("Host: {host}\r\n"));
            }
            for (n, v) in &extra {
                data.push_str(&format!("{n}: {v}\r\n"));
            }
            data.push_str("\r\n");
            with_route(|ctx, route| check_request_bytes(data.as_bytes(), ctx, route));
        }
    }
}
