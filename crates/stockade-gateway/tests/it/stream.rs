//! Streaming: server-sent events reach the worker chunk by chunk.

use std::time::{Duration, Instant};

use stockade_gateway::GatewayLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_chunks_arrive_before_the_stream_ends() {
    let up = plain_upstream().await;
    let gw = start_injecting(
        &format!("http://127.0.0.1:{}", up.addr.port()),
        GatewayLimits::default(),
        None,
    );
    let p = gw.addr().port();
    let mut s = tokio::net::TcpStream::connect(gw.addr()).await.unwrap();
    let started = Instant::now();
    s.write_all(format!("GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut all = Vec::new();
    let mut first_event_at = None;
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
        if first_event_at.is_none() && String::from_utf8_lossy(&all).contains("event-0") {
            first_event_at = Some(started.elapsed());
        }
    }
    let total = started.elapsed();
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("event-4"), "{text}");
    let first = first_event_at.unwrap();
    // Events are 200 ms apart upstream: the first must arrive about 800 ms before the end.
    assert!(
        first + Duration::from_millis(500) < total,
        "first event at {first:?}, stream ended at {total:?}: buffered"
    );
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
}
