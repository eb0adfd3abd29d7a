//! Local upstreams (plain, TLS with a test CA, HTTP/2) and a raw worker-side client.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use stockade_gateway::{Gateway, GatewayConfig, GatewayHandle, GatewayLimits, Route, SecretSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The secret every test injects; tests assert it never shows up where it must not.
pub const SECRET: &str = "sk-stockade-test-7d1f0c2a9b-never-leak";

/// What the upstream saw for one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub version: Version,
    pub headers: HeaderMap,
    pub body_len: usize,
}

#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<Seen>>>);

impl Log {
    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// A body fed from a channel: each message is one frame, sent when it is sent.
pub struct ChanBody(pub mpsc::Receiver<Bytes>);

impl Body for ChanBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

type UpBody = Either<Full<Bytes>, ChanBody>;

fn full(status: u16, body: impl Into<Bytes>) -> Response<UpBody> {
    let mut r = Response::new(Either::Left(Full::new(body.into())));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r
}

fn streamed(chunks: Vec<(Duration, Bytes)>, content_type: &str) -> Response<UpBody> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for (delay, chunk) in chunks {
            tokio::time::sleep(delay).await;
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
    });
    let mut r = Response::new(Either::Right(ChanBody(rx)));
    r.headers_mut()
        .insert("content-type", content_type.parse().unwrap());
    r
}

/// The upstream's routes:
/// `/echo` (records, answers `ok`), `/reflect` (puts the received `authorization` in a
/// response header), `/sse` (5 events 200 ms apart), `/stall` (one chunk, then silence),
/// `/big` (2 MiB), `/slow` (answers after 3 s), `/redirect-other`, `/redirect-same`.
async fn upstream_service(
    req: Request<Incoming>,
    log: Log,
    self_origin: String,
) -> Result<Response<UpBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    log.0.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        target: target.clone(),
        version: parts.version,
        headers: parts.headers.clone(),
        body_len: body.len(),
    });
    let path = parts.uri.path();
    let resp = match path {
        "/reflect" => {
            let mut r = full(200, "reflected");
            if let Some(v) = parts.headers.get("authorization") {
                r.headers_mut().insert("x-reflected", v.clone());
            }
            r.headers_mut().insert("x-harmless", "1".parse().unwrap());
            r
        }
        "/sse" => streamed(
            (0..5)
                .map(|i| {
                    (
                        Duration::from_millis(200),
                        Bytes::from(format!("data: event-{i}\n\n")),
                    )
                })
                .collect(),
            "text/event-stream",
        ),
        "/stall" => streamed(
            vec![
                (Duration::ZERO, Bytes::from_static(b"first")),
                (Duration::from_secs(30), Bytes::from_static(b"late")),
            ],
            "text/plain",
        ),
        "/big" => full(200, vec![b'x'; 2 * 1024 * 1024]),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            full(200, "slow")
        }
        "/redirect-other" => {
            let mut r = full(302, "");
            r.headers_mut()
                .insert("location", "http://evil.example/steal".parse().unwrap());
            r
        }
        "/redirect-same" => {
            let mut r = full(301, "");
            r.headers_mut().insert(
                "location",
                format!("{self_origin}/echo?from=redirect").parse().unwrap(),
            );
            r
        }
        _ => full(200, format!("ok {} bytes", body.len())),
    };
    Ok(resp)
}

/// A running local upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    pub log: Log,
}

/// Plain HTTP/1.1 upstream on 127.0.0.1.
pub async fn plain_upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Log::default();
    let l2 = log.clone();
    let origin = format!("http://127.0.0.1:{}", addr.port());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let log = l2.clone();
            let origin = origin.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| upstream_service(req, log.clone(), origin.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    Upstream { addr, log }
}

/// A test CA and a `localhost` leaf certificate signed by it.
pub struct TestPki {
    pub ca_pem: String,
    pub leaf_der: rustls::pki_types::CertificateDer<'static>,
    pub leaf_key_der: Vec<u8>,
}

pub fn test_pki() -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "stockade gateway test ca");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    TestPki {
        ca_pem: ca.pem(),
        leaf_der: leaf.der().clone(),
        leaf_key_der: leaf_key.serialize_der(),
    }
}

/// TLS upstream on 127.0.0.1 with a `localhost` certificate; offers `alpn` (e.g. `h2`).
pub async fn tls_upstream(pki: &TestPki, alpn: &[&[u8]]) -> Upstream {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![pki.leaf_der.clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pki.leaf_key_der.clone().into()),
        )
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Log::default();
    let l2 = log.clone();
    let origin = format!("https://localhost:{}", addr.port());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let log = l2.clone();
            let origin = origin.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let svc = service_fn(move |req| upstream_service(req, log.clone(), origin.clone()));
                if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                }
            });
        }
    });
    Upstream { addr, log }
}

/// A secret file holding `Bearer SECRET` (kept alive by the returned guard).
pub fn secret_file() -> (tempfile::NamedTempFile, SecretSource) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, format!("Bearer {SECRET}\n").as_bytes()).unwrap();
    let src = SecretSource::File(f.path().to_owned());
    (f, src)
}

/// A started gateway with one listener per route; `addrs[i]` serves `routes[i]`.
pub struct Gw {
    pub handle: GatewayHandle,
    pub addrs: Vec<SocketAddr>,
    _secret: Option<tempfile::NamedTempFile>,
}

impl Gw {
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }
    pub fn audit_json(&self) -> String {
        serde_json::to_string(&self.handle.audit()).unwrap()
    }
}

pub fn start(routes: Vec<Route>, limits: GatewayLimits, extra_ca: Option<&str>) -> Gw {
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    for r in &routes {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        addrs.push(l.local_addr().unwrap());
        listeners.push((l, r.rule_id.clone()));
    }
    let mut config = GatewayConfig::new(routes);
    config.limits = limits;
    config.use_system_roots = false;
    config.extra_root_ca_pem = extra_ca.map(|p| p.as_bytes().to_vec());
    let handle = Gateway::start(config, listeners).unwrap();
    Gw {
        handle,
        addrs,
        _secret: None,
    }
}

/// A gateway in front of `origin` injecting `authorization: Bearer SECRET`.
pub fn start_injecting(origin: &str, limits: GatewayLimits, extra_ca: Option<&str>) -> Gw {
    let (file, src) = secret_file();
    let route = Route::new("model", origin.parse().unwrap())
        .inject(http::header::AUTHORIZATION, src)
        .env("OPENAI_BASE_URL", "/v1");
    let mut gw = start(vec![route], limits, extra_ca);
    gw._secret = Some(file);
    gw
}

/// Sends raw bytes, returns everything read until EOF (or 5 s).
pub async fn raw(addr: SocketAddr, req: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// `GET target` with the listener's own Host and `Connection: close`, plus extra header lines.
pub async fn get(addr: SocketAddr, target: &str, extra: &str) -> String {
    raw(
        addr,
        format!(
            "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{extra}Connection: close\r\n\r\n",
            addr.port()
        )
        .as_bytes(),
    )
    .await
}

pub fn status_of(resp: &str) -> u16 {
    resp.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
