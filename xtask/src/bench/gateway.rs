//! `cargo xtask bench gateway`: the gateway against direct loopback access, in one run.
//!
//! A local HTTP/1.1 upstream on 127.0.0.1 (plain threads, keep-alive) is reached two ways,
//! alternating every round: directly, and through a `stockade_gateway::BlockingGateway` whose
//! listener is also on 127.0.0.1 and which injects an `authorization` header.
//! It reports, side by side:
//! - per-request latency on a kept-alive connection (median, p99, and the added median);
//! - time to the first server-sent-event chunk of a streamed response;
//! - throughput: requests per second with 4 concurrent keep-alive clients, and bulk MiB/s.
//!
//! Goal (issue 6): under 0.5 ms added at the median, no buffering delay on streams.
//! Run it optimized: `cargo run --release -p xtask -- bench gateway [--rounds N]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use stockade_gateway::{BlockingGateway, GatewayConfig, Route, SecretSource};

use super::stats::{self, Samples};

const SSE_EVENTS: usize = 4;
const BULK_BYTES: usize = 8 * 1024 * 1024;

/// Runs the `gateway` benchmark.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 2000usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().context("--rounds needs a number")?.parse()?,
            other => bail!("unknown argument `{other}`; usage: bench gateway [--rounds N]"),
        }
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: unoptimized build; numbers are not representative. Use `cargo run --release -p xtask -- bench gateway`."
        );
    }
    let upstream = start_upstream()?;
    let secret_dir =
        std::env::temp_dir().join(format!("stockade-bench-gateway-{}", std::process::id()));
    std::fs::create_dir_all(&secret_dir)?;
    let secret = secret_dir.join("key");
    std::fs::write(&secret, "Bearer bench-secret\n")?;
    let origin = format!("http://127.0.0.1:{}", upstream.port()).parse()?;
    let route = Route::new("bench", origin)
        .inject(http_authorization(), SecretSource::File(secret.clone()));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let gw_addr = listener.local_addr()?;
    let gateway = BlockingGateway::start(
        GatewayConfig::new(vec![route]),
        vec![(listener, "bench".into())],
    )?;
    let result = measure(upstream, gw_addr, rounds);
    let audit = gateway.shutdown();
    let _ = std::fs::remove_dir_all(&secret_dir);
    result?;
    println!("gateway audit records: {}", audit.len());
    Ok(())
}

fn http_authorization() -> http::HeaderName {
    http::header::AUTHORIZATION
}

fn measure(direct: SocketAddr, gateway: SocketAddr, rounds: usize) -> anyhow::Result<()> {
    println!("# latency per request, keep-alive, GET 13-byte body ({rounds} rounds, alternating)");
    let mut d = Client::connect(direct)?;
    let mut g = Client::connect(gateway)?;
    let a = std::cell::RefCell::new(&mut d);
    let b = std::cell::RefCell::new(&mut g);
    let fa = || a.borrow_mut().request("/small");
    let fb = || b.borrow_mut().request("/small");
    let lat = stats::alternate(&[("direct", &fa), ("gateway", &fb)], 100, rounds)?;
    print!("{}", stats::report(&lat, "direct"));
    print_added(&lat);

    let sse_rounds = (rounds / 10).max(50);
    println!(
        "\n# time to the first server-sent-event chunk ({sse_rounds} rounds; {SSE_EVENTS} events 2 ms apart)"
    );
    let fa = || a.borrow_mut().first_chunk("/sse");
    let fb = || b.borrow_mut().first_chunk("/sse");
    let sse = stats::alternate(&[("direct", &fa), ("gateway", &fb)], 10, sse_rounds)?;
    print!("{}", stats::report(&sse, "direct"));
    print_added(&sse);

    println!("\n# throughput: 4 concurrent keep-alive clients, 2 s each");
    let mut rates = Vec::new();
    for (name, addr) in [
        ("direct", direct),
        ("gateway", gateway),
        ("direct", direct),
        ("gateway", gateway),
    ] {
        rates.push((name, throughput(addr, 4, Duration::from_secs(2))?));
    }
    for name in ["direct", "gateway"] {
        let best = rates
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, r)| *r)
            .fold(0.0f64, f64::max);
        println!("{name:<9} {best:>10.0} req/s (best of 2)");
    }
    let best = |n: &str| {
        rates
            .iter()
            .filter(|(m, _)| *m == n)
            .map(|(_, r)| *r)
            .fold(0.0f64, f64::max)
    };
    println!(
        "gateway / direct: {:.2}",
        best("gateway") / best("direct").max(1.0)
    );

    println!("\n# bulk: one 8 MiB response body, 10 rounds");
    let fa = || a.borrow_mut().request("/bulk");
    let fb = || b.borrow_mut().request("/bulk");
    let bulk = stats::alternate(&[("direct", &fa), ("gateway", &fb)], 2, 10)?;
    for s in &bulk {
        let mibs = (BULK_BYTES as f64 / (1024.0 * 1024.0)) / s.median().as_secs_f64();
        println!(
            "{:<9} {:>8.0} MiB/s (median {})",
            s.name,
            mibs,
            stats::fmt_duration(s.median())
        );
    }
    Ok(())
}

fn print_added(samples: &[Samples]) {
    if let [d, g] = samples {
        let added_med = g.median().saturating_sub(d.median());
        let added_p99 = g.p99().saturating_sub(d.p99());
        let verdict = if added_med < Duration::from_micros(500) {
            "meets"
        } else {
            "MISSES"
        };
        println!(
            "added by the gateway: median {}, p99 {} ({verdict} the < 0.5 ms median goal)",
            stats::fmt_duration(added_med),
            stats::fmt_duration(added_p99)
        );
    }
}

/// A keep-alive HTTP/1.1 client over one TCP connection.
struct Client {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Client {
            addr,
            reader: BufReader::new(s),
        })
    }

    fn send(&mut self, path: &str) -> anyhow::Result<()> {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer dummy\r\nAccept: */*\r\n\r\n",
            self.addr
        );
        self.reader.get_mut().write_all(req.as_bytes())?;
        Ok(())
    }

    /// Reads the head; returns (status, content-length or None for chunked).
    fn head(&mut self) -> anyhow::Result<(u16, Option<usize>)> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line.split(' ').nth(1).context("no status line")?.parse()?;
        let mut len = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                bail!("connection closed in the head");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = Some(v.trim().parse()?);
            }
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        if !chunked && len.is_none() {
            bail!("response without length on a keep-alive connection");
        }
        Ok((status, if chunked { None } else { len }))
    }

    /// Reads one chunk; returns its size (0 at the end).
    fn chunk(&mut self) -> anyhow::Result<usize> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim_end(), 16)
            .with_context(|| format!("bad chunk size {line:?}"))?;
        let mut buf = vec![0u8; size + 2];
        self.reader.read_exact(&mut buf)?;
        Ok(size)
    }

    fn body(&mut self, len: Option<usize>) -> anyhow::Result<()> {
        match len {
            Some(n) => {
                std::io::copy(&mut (&mut self.reader).take(n as u64), &mut std::io::sink())?;
            }
            None => while self.chunk()? != 0 {},
        }
        Ok(())
    }

    fn request(&mut self, path: &str) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.send(path)?;
        let (status, len) = self.head()?;
        self.body(len)?;
        if status != 200 {
            bail!("status {status}");
        }
        Ok(start.elapsed())
    }

    fn first_chunk(&mut self, path: &str) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.send(path)?;
        let (status, len) = self.head()?;
        if status != 200 || len.is_some() {
            bail!("expected a chunked 200, got {status}");
        }
        self.chunk()?;
        let first = start.elapsed();
        while self.chunk()? != 0 {}
        Ok(first)
    }
}

fn throughput(addr: SocketAddr, clients: usize, dur: Duration) -> anyhow::Result<f64> {
    let count = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for _ in 0..clients {
        let count = count.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut c = Client::connect(addr)?;
            while !stop.load(Ordering::Relaxed) {
                c.request("/small")?;
                count.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    let start = Instant::now();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
    }
    Ok(count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

/// A minimal keep-alive HTTP/1.1 upstream: `/small`, `/sse` (chunked events), `/bulk`.
fn start_upstream() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = serve(stream);
            });
        }
    });
    Ok(addr)
}

fn serve(stream: TcpStream) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let bulk = vec![b'b'; BULK_BYTES];
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 {
                return Ok(());
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
        }
        match path.as_str() {
            "/sse" => {
                w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")?;
                for i in 0..SSE_EVENTS {
                    if i > 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    let ev = format!("data: {{\"i\":{i}}}\n\n");
                    w.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())?;
                }
                w.write_all(b"0\r\n\r\n")?;
            }
            "/bulk" => {
                w.write_all(
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", bulk.len()).as_bytes(),
                )?;
                w.write_all(&bulk)?;
            }
            _ => {
                w.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\nhello, world\n")?;
            }
        }
    }
}
