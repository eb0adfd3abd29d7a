//! TLS upstreams with a test CA, over HTTP/1.1 and HTTP/2 (ALPN).

use http::Version;
use stockade_gateway::GatewayLimits;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_http1_upstream_gets_the_credential() {
    let pki = test_pki();
    let up = tls_upstream(&pki, &[b"http/1.1"]).await;
    let gw = start_injecting(
        &format!("https://localhost:{}", up.addr.port()),
        GatewayLimits::default(),
        Some(&pki.ca_pem),
    );
    let resp = get(gw.addr(), "/echo", "").await;
    assert_eq!(status_of(&resp), 200, "{resp}");
    let seen = up.log.all();
    assert_eq!(seen[0].version, Version::HTTP_11);
    assert_eq!(
        seen[0]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap(),
        format!("Bearer {SECRET}")
    );
    assert_eq!(
        seen[0].headers.get("host").unwrap().to_str().unwrap(),
        format!("localhost:{}", up.addr.port())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_http2_upstream_is_negotiated_by_alpn() {
    let pki = test_pki();
    let up = tls_upstream(&pki, &[b"h2", b"http/1.1"]).await;
    let gw = start_injecting(
        &format!("https://localhost:{}", up.addr.port()),
        GatewayLimits::default(),
        Some(&pki.ca_pem),
    );
    for _ in 0..3 {
        let resp = get(gw.addr(), "/echo", "").await;
        assert_eq!(status_of(&resp), 200, "{resp}");
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "worker side stays HTTP/1.1: {resp}"
        );
    }
    let resp = get(gw.addr(), "/sse", "").await;
    assert!(resp.contains("event-4"), "{resp}");
    let seen = up.log.all();
    assert!(
        seen.iter().all(|s| s.version == Version::HTTP_2),
        "{seen:?}"
    );
    assert_eq!(
        seen[0]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap(),
        format!("Bearer {SECRET}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_certificates_are_refused() {
    let pki = test_pki();
    let other = test_pki();
    let up = tls_upstream(&pki, &[b"http/1.1"]).await;
    let gw = start_injecting(
        &format!("https://localhost:{}", up.addr.port()),
        GatewayLimits::default(),
        Some(&other.ca_pem),
    );
    let resp = get(gw.addr(), "/echo", "").await;
    assert_eq!(status_of(&resp), 502, "{resp}");
    assert!(resp.contains("upstream_failed"), "{resp}");
    assert_eq!(up.log.count(), 0);
}
