//! Credential injection: the secret reaches the upstream, and nowhere else.

use stockade_gateway::{GatewayConfig, GatewayLimits, Route, SecretSource, env_for_sandbox};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_arrives_upstream_once_and_worker_headers_are_filtered() {
    let up = plain_upstream().await;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        GatewayLimits::default(),
        None,
    );
    let resp = raw(
        gw.addr(),
        format!(
            "POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer worker-fake\r\nauthorization: Bearer second\r\nX-Api-Key: worker\r\nCookie: a=b\r\nX-Forwarded-For: 10.0.0.1\r\nForwarded: for=1.2.3.4\r\nProxy-Authorization: Basic eA==\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\nX-Stainless-Os: Linux\r\nUser-Agent: agent/1\r\nX-Secret-Probe: 1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}",
            gw.addr().port()
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert!(resp.ends_with("ok 2 bytes"), "{resp}");
    let seen = up.log.all();
    assert_eq!(seen.len(), 1);
    let h = &seen[0].headers;
    let auth: Vec<_> = h.get_all("authorization").iter().collect();
    assert_eq!(auth.len(), 1, "exactly one authorization header upstream");
    assert_eq!(auth[0].to_str().unwrap(), format!("Bearer {SECRET}"));
    assert_eq!(
        h.get("host").unwrap().to_str().unwrap(),
        format!("127.0.0.1:{}", up.addr.port()),
        "host rewritten to the origin's authority"
    );
    for dropped in [
        "x-api-key",
        "cookie",
        "x-forwarded-for",
        "forwarded",
        "proxy-authorization",
        "x-secret-probe",
        "connection",
    ] {
        assert!(h.get(dropped).is_none(), "{dropped} must not pass");
    }
    for kept in [
        "content-type",
        "anthropic-version",
        "x-stainless-os",
        "user-agent",
    ] {
        assert!(h.get(kept).is_some(), "{kept} must pass");
    }
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/v1/chat?x=1");
    assert_eq!(seen[0].body_len, 2);
    assert!(!resp.contains(SECRET));
    let audit = gw.handle.audit();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].status, 200);
    assert_eq!(audit[0].bytes_in, 2);
    assert_eq!(audit[0].path, "/v1/chat", "audit path has no query");
    assert!(!gw.audit_json().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflected_credential_header_is_dropped_from_the_response() {
    let up = plain_upstream().await;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        GatewayLimits::default(),
        None,
    );
    let resp = get(gw.addr(), "/reflect", "").await;
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert!(!resp.contains(SECRET), "{resp}");
    assert!(!resp.to_ascii_lowercase().contains("x-reflected"), "{resp}");
    assert!(
        resp.to_ascii_lowercase().contains("x-harmless: 1"),
        "{resp}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_errors_name_the_source_never_the_value() {
    let dir = tempfile::tempdir().unwrap();
    // A value with a newline in the middle is not a valid header value.
    let bad = dir.path().join("bad");
    std::fs::write(&bad, format!("{SECRET}\ninjected: 1\n")).unwrap();
    let route = Route::new("r", "https://api.example.com".parse().unwrap())
        .inject(http::header::AUTHORIZATION, SecretSource::File(bad.clone()));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err =
        stockade_gateway::Gateway::start(GatewayConfig::new(vec![route]), vec![(l, "r".into())])
            .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains(&bad.display().to_string()), "{text}");
    assert!(!text.contains(SECRET), "{text}");

    let missing = SecretSource::Env("STOCKADE_TEST_SURELY_UNSET_VARIABLE".into())
        .resolve()
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("env:STOCKADE_TEST_SURELY_UNSET_VARIABLE")
    );
    let v = SecretSource::Env("PATH".into()).resolve().unwrap();
    assert_eq!(format!("{v} {v:?}"), "<redacted> <redacted>");
    assert_eq!(
        "env:OPENAI_API_KEY".parse::<SecretSource>().unwrap(),
        SecretSource::Env("OPENAI_API_KEY".into())
    );
    assert!("literal:sk-123".parse::<SecretSource>().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_refuses_unknown_rules_and_injecting_framing_headers() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let route = Route::new("a", "http://127.0.0.1:9".parse().unwrap());
    let err = stockade_gateway::Gateway::start(
        GatewayConfig::new(vec![route.clone()]),
        vec![(l, "b".into())],
    )
    .unwrap_err();
    assert!(
        matches!(err, stockade_gateway::GatewayError::UnknownRule(_)),
        "{err}"
    );
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bad = route.inject(http::header::HOST, SecretSource::Env("PATH".into()));
    assert!(
        stockade_gateway::Gateway::start(GatewayConfig::new(vec![bad]), vec![(l, "a".into())])
            .is_err()
    );
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bad = Route::new("a", "http://127.0.0.1:9".parse().unwrap()).pass(http::header::COOKIE);
    assert!(
        stockade_gateway::Gateway::start(GatewayConfig::new(vec![bad]), vec![(l, "a".into())])
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_points_the_sandbox_at_the_listener() {
    let up = plain_upstream().await;
    let origin = format!("http://127.0.0.1:{}", up.addr.port());
    let route = Route::new("openai-api", origin.parse().unwrap()).env("OPENAI_BASE_URL", "/v1");
    let gw = start(vec![route.clone()], GatewayLimits::default(), None);
    let env = env_for_sandbox(&[route], gw.handle.endpoints());
    let port = gw.addr().port();
    assert!(
        env.contains(&(
            "OPENAI_BASE_URL".into(),
            format!("http://127.0.0.1:{port}/v1")
        )),
        "{env:?}"
    );
    assert!(
        env.contains(&(
            "STOCKADE_ORIGIN_OPENAI_API".into(),
            format!("http://127.0.0.1:{port}")
        )),
        "{env:?}"
    );
    assert!(
        env.contains(&(
            "STOCKADE_GATEWAY_ORIGINS".into(),
            format!("{origin}=http://127.0.0.1:{port}")
        )),
        "{env:?}"
    );
    let lines = stockade_gateway::describe_endpoints(gw.handle.endpoints());
    assert_eq!(
        lines,
        vec![format!(
            "stockade: {origin} is served at http://127.0.0.1:{port} (rule openai-api)"
        )]
    );
}
