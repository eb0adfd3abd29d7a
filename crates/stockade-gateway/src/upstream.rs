//! Connecting to upstreams: host-side DNS, the address policy, TCP, TLS (rustls, ALPN h2 and
//! http/1.1), and hyper-util's pooled client on top.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::addr::may_connect;
use crate::error::GatewayError;

/// Why the connector did not produce a connection (host log only).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// Every resolved address, or the literal, is outside what the origin may reach.
    #[error("upstream {host} resolves to an address the gateway does not connect to ({ip})")]
    Forbidden {
        /// The origin host.
        host: String,
        /// The refused address.
        ip: IpAddr,
    },
    /// Name resolution failed.
    #[error("resolving upstream {host}: {source}")]
    Resolve {
        /// The origin host.
        host: String,
        /// The resolver error.
        source: io::Error,
    },
    /// TCP connect or TLS handshake failed.
    #[error("connecting to upstream {host}: {source}")]
    Connect {
        /// The origin host.
        host: String,
        /// The I/O error.
        source: io::Error,
    },
    /// Resolve, connect and handshake took longer than the connect timeout.
    #[error("connecting to upstream {host} timed out")]
    Timeout {
        /// The origin host.
        host: String,
    },
    /// The URI handed to the connector is not an origin this gateway built.
    #[error("upstream uri is not an http(s) origin")]
    BadUri,
}

/// The connector hyper-util's client calls for each new upstream connection.
#[derive(Clone)]
pub(crate) struct Connector {
    tls: tokio_rustls::TlsConnector,
    connect_timeout: Duration,
}

impl Connector {
    pub(crate) fn new(tls: Arc<rustls::ClientConfig>, connect_timeout: Duration) -> Self {
        Connector {
            tls: tokio_rustls::TlsConnector::from(tls),
            connect_timeout,
        }
    }
}

/// Builds the rustls client configuration: ring, system roots and/or an extra PEM CA, ALPN
/// `h2` then `http/1.1`. Also returns how many roots are trusted.
pub(crate) fn tls_config(
    use_system_roots: bool,
    extra_pem: Option<&[u8]>,
) -> Result<(Arc<rustls::ClientConfig>, usize), GatewayError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if use_system_roots {
        let loaded = rustls_native_certs::load_native_certs();
        for cert in loaded.certs {
            // A system certificate rustls cannot use is skipped, like every rustls-based client.
            let _ = roots.add(cert);
        }
    }
    if let Some(pem) = extra_pem {
        let mut n = 0usize;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| GatewayError::Tls(format!("extra root ca pem: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| GatewayError::Tls(format!("extra root ca: {e}")))?;
            n += 1;
        }
        if n == 0 {
            return Err(GatewayError::Tls(
                "extra root ca pem holds no certificate".into(),
            ));
        }
    }
    let count = roots.len();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| GatewayError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), count))
}

/// A plain or TLS upstream stream.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(_) => Connected::new(),
            Stream::Tls(s) => {
                if s.get_ref().1.alpn_protocol() == Some(b"h2") {
                    Connected::new().negotiated_h2()
                } else {
                    Connected::new()
                }
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// The addresses the gateway may try for `host:port`, resolved on the host.
pub(crate) async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, ConnectError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        if !may_connect(ip, true) {
            return Err(ConnectError::Forbidden {
                host: host.to_owned(),
                ip,
            });
        }
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if bare.eq_ignore_ascii_case("localhost") {
        // RFC 6761: localhost is loopback; never ask DNS.
        return Ok(vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
        ]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|source| ConnectError::Resolve {
            host: host.to_owned(),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectError::Resolve {
            host: host.to_owned(),
            source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
        });
    }
    if let Some(bad) = addrs.iter().find(|a| !may_connect(a.ip(), false)) {
        return Err(ConnectError::Forbidden {
            host: host.to_owned(),
            ip: bad.ip(),
        });
    }
    Ok(addrs)
}

async fn connect(tls: tokio_rustls::TlsConnector, uri: Uri) -> Result<Stream, ConnectError> {
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(ConnectError::BadUri),
    };
    let host = uri.host().ok_or(ConnectError::BadUri)?.to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let addrs = resolve(&host, port).await?;
    let mut last = None;
    let mut tcp = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let tcp = match tcp {
        Some(t) => t,
        None => {
            return Err(ConnectError::Connect {
                host,
                source: last.unwrap_or_else(|| io::Error::other("no address")),
            });
        }
    };
    let _ = tcp.set_nodelay(true);
    if !https {
        return Ok(Stream::Plain(tcp));
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    let name = ServerName::try_from(bare.to_owned()).map_err(|_| ConnectError::BadUri)?;
    let tls = tls
        .connect(name, tcp)
        .await
        .map_err(|source| ConnectError::Connect { host, source })?;
    Ok(Stream::Tls(Box::new(tls)))
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = self.tls.clone();
        let timeout = self.connect_timeout;
        Box::pin(async move {
            let host = uri.host().unwrap_or_default().to_owned();
            match tokio::time::timeout(timeout, connect(tls, uri)).await {
                Ok(r) => r.map(TokioIo::new),
                Err(_) => Err(ConnectError::Timeout { host }),
            }
        })
    }
}
