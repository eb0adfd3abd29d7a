//! Size, concurrency and time limits.

use std::time::Duration;

use stockade_gateway::{Decision, GatewayLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_and_bodies_are_refused() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.max_header_bytes = 4096;
    limits.max_request_body = 1000;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let a = gw.addr();
    let p = a.port();
    // one huge header
    let big = "a".repeat(8000);
    let resp = get(a, "/echo", &format!("User-Agent: {big}\r\n")).await;
    assert_eq!(status_of(&resp), 431, "{resp}");
    // many small headers
    let many: String = (0..200)
        .map(|i| format!("X-Stainless-H{i}: v\r\n"))
        .collect();
    let resp = get(a, "/echo", &many).await;
    assert!(matches!(status_of(&resp), 431 | 400), "{resp}");
    // declared body too large
    let resp = raw(a, format!("POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n").as_bytes()).await;
    assert_eq!(status_of(&resp), 413, "{resp}");
    assert_eq!(up.log.count(), 0);
    // chunked body growing past the limit
    let mut req = format!("POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").into_bytes();
    for _ in 0..4 {
        req.extend_from_slice(b"200\r\n");
        req.extend_from_slice(&[b'y'; 0x200]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let resp = raw(a, &req).await;
    assert!(status_of(&resp) == 413 || resp.is_empty(), "{resp}");
    assert!(
        up.log.all().iter().all(|s| s.body_len <= 1000),
        "upstream never got more than the limit"
    );
    let audit = gw.handle.audit();
    assert!(
        audit
            .iter()
            .any(|r| r.reason.as_deref() == Some("body_too_large") && r.status == 413),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|r| r.reason.as_deref() == Some("header_too_large")),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_answers_503() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.max_concurrent_requests = 1;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let a = gw.addr();
    let slow = tokio::spawn(async move { get(a, "/slow", "").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resp = get(a, "/echo", "").await;
    assert_eq!(status_of(&resp), 503, "{resp}");
    assert!(resp.contains("too_many_requests_in_flight"));
    assert_eq!(status_of(&slow.await.unwrap()), 200);
    // the permit is released once the first response ends
    assert_eq!(status_of(&get(a, "/echo", "").await), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_upstreams_time_out_and_stalled_streams_are_cut() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.total_timeout = Duration::from_secs(1);
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let resp = get(gw.addr(), "/slow", "").await;
    assert_eq!(status_of(&resp), 504, "{resp}");

    let mut limits = GatewayLimits::default();
    limits.idle_timeout = Duration::from_millis(500);
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let started = std::time::Instant::now();
    let resp = get(gw.addr(), "/stall", "").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert!(resp.contains("first") && !resp.contains("late"), "{resp}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let audit = gw.handle.audit();
    assert!(
        audit
            .iter()
            .any(|r| r.decision == Decision::Failed && r.reason.as_deref() == Some("idle_timeout")),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_body_limit_cuts_the_stream() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.max_response_body = Some(64 * 1024);
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let resp = get(gw.addr(), "/big", "").await;
    assert!(resp.len() < 2 * 1024 * 1024, "the whole body passed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let audit = gw.handle.audit();
    assert!(
        audit
            .iter()
            .any(|r| r.reason.as_deref() == Some("response_too_large")
                && r.bytes_out <= 64 * 1024 + 65536),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_connections_serve_several_requests() {
    let up = plain_upstream().await;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        GatewayLimits::default(),
        None,
    );
    let p = gw.addr().port();
    let mut s = tokio::net::TcpStream::connect(gw.addr()).await.unwrap();
    let one = format!("GET /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n\r\n");
    let last = format!("GET /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nConnection: close\r\n\r\n");
    s.write_all(format!("{one}{one}{last}").as_bytes())
        .await
        .unwrap();
    let mut buf = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(buf.matches("HTTP/1.1 200").count(), 3, "{buf}");
    assert_eq!(up.log.count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.header_read_timeout = Duration::from_millis(500);
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let p = gw.addr().port();
    let mut s = tokio::net::TcpStream::connect(gw.addr()).await.unwrap();
    s.write_all(format!("GET /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    // Read the response, then keep reading: the gateway must close the idle connection.
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => panic!(
                "idle keep-alive connection still open after {:?}",
                started.elapsed()
            ),
        }
    }
    assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_bodies_time_out() {
    let up = plain_upstream().await;
    let mut limits = GatewayLimits::default();
    limits.idle_timeout = Duration::from_millis(500);
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        limits,
        None,
    );
    let p = gw.addr().port();
    let mut s = tokio::net::TcpStream::connect(gw.addr()).await.unwrap();
    s.write_all(
        format!(
            "POST /echo HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nContent-Length: 100\r\n\r\n0123456789"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut buf = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut buf)).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status_of(&buf), 408, "{buf}");
    assert!(buf.contains("request_body_timeout"), "{buf}");
}
