//! The gateway itself: accept loops on the handed-in listeners, per-request policy, forwarding.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, Version, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use stockade_policy::Origin;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::audit::{AuditLog, AuditRecord, Decision, audit_path};
use crate::body::{AuditGuard, Metered, StreamCut};
use crate::config::{GatewayConfig, GatewayLimits, Route, SecretValue};
use crate::error::GatewayError;
use crate::head::{Denial, HeadContext, RouteView, prepare_upstream, rewrite_response_headers};
use crate::upstream::{ConnectError, Connector, tls_config};

/// The body the gateway sends to the worker: a short generic error or the upstream's stream.
pub(crate) type WorkerBody = Either<Full<Bytes>, Metered>;

/// Where one route is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The route's rule id.
    pub rule_id: String,
    /// The route's upstream origin.
    pub origin: Origin,
    /// The listener's address (inside the sandbox's network namespace).
    pub local_addr: SocketAddr,
}

impl Endpoint {
    /// `http://IP:PORT` (no trailing slash), the base URL the sandboxed program uses.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local_addr)
    }
}

struct CompiledRoute {
    rule_id: String,
    origin: Origin,
    origin_text: String,
    inject: Vec<(HeaderName, SecretValue)>,
    pass: Vec<HeaderName>,
}

impl CompiledRoute {
    fn view(&self) -> RouteView<'_> {
        RouteView {
            origin: &self.origin,
            inject: &self.inject,
            pass: &self.pass,
        }
    }
}

struct Shared {
    client: Client<Connector, Metered>,
    limits: GatewayLimits,
    audit: AuditLog,
    requests: Arc<Semaphore>,
    connections: Arc<Semaphore>,
}

struct ListenerCtx {
    route: Arc<CompiledRoute>,
    head: HeadContext,
    shared: Arc<Shared>,
}

/// Starts gateways; see [`Gateway::start`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Gateway;

impl Gateway {
    /// Resolves every secret, builds the TLS client and serves each listener with its route.
    ///
    /// Must be called inside a tokio runtime (with the time and I/O drivers enabled); the
    /// gateway's tasks run on it. Each listener is handed over with the rule id of the route it
    /// serves; several listeners may serve one route. Fails before serving anything if a
    /// secret is missing, a rule id is unknown or duplicated, or trust roots cannot be built.
    pub fn start(
        config: GatewayConfig,
        listeners: Vec<(std::net::TcpListener, String)>,
    ) -> Result<GatewayHandle, GatewayError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| GatewayError::Runtime(e.to_string()))?;
        let limits = config.limits.clone();
        if limits.max_concurrent_requests == 0
            || limits.max_connections == 0
            || limits.max_headers == 0
            || limits.max_header_bytes < 256
        {
            return Err(GatewayError::Config(
                "limits must allow at least one connection, one request and a 256-byte head".into(),
            ));
        }
        let mut routes: Vec<Arc<CompiledRoute>> = Vec::new();
        for route in &config.routes {
            route.validate()?;
            if routes.iter().any(|r| r.rule_id == route.rule_id) {
                return Err(GatewayError::Config(format!(
                    "duplicate rule id `{}`",
                    route.rule_id
                )));
            }
            routes.push(Arc::new(compile(route)?));
        }
        let needs_tls = routes
            .iter()
            .any(|r| r.origin.scheme() == stockade_policy::Scheme::Https);
        let (tls, roots) =
            tls_config(config.use_system_roots, config.extra_root_ca_pem.as_deref())?;
        if needs_tls && roots == 0 {
            return Err(GatewayError::Tls(
                "no trusted root certificates (system store empty and no extra ca)".into(),
            ));
        }
        let connector = Connector::new(tls, limits.connect_timeout);
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(std::time::Duration::from_secs(60))
            .pool_max_idle_per_host(32)
            .http1_max_headers(256)
            .http2_max_header_list_size(256 * 1024)
            .http2_adaptive_window(true)
            .build(connector);
        let shared = Arc::new(Shared {
            client,
            audit: AuditLog::default(),
            requests: Arc::new(Semaphore::new(limits.max_concurrent_requests)),
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            limits,
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut prepared = Vec::new();
        let mut endpoints = Vec::new();
        for (listener, rule_id) in listeners {
            let route = routes
                .iter()
                .find(|r| r.rule_id == rule_id)
                .cloned()
                .ok_or_else(|| GatewayError::UnknownRule(rule_id.clone()))?;
            let local = listener
                .local_addr()
                .map_err(|source| GatewayError::Listener {
                    rule_id: rule_id.clone(),
                    source,
                })?;
            listener
                .set_nonblocking(true)
                .map_err(|source| GatewayError::Listener {
                    rule_id: rule_id.clone(),
                    source,
                })?;
            endpoints.push(Endpoint {
                rule_id: rule_id.clone(),
                origin: route.origin.clone(),
                local_addr: local,
            });
            let head = HeadContext {
                listener: local,
                max_header_bytes: shared.limits.max_header_bytes,
                max_request_body: shared.limits.max_request_body,
            };
            prepared.push((
                listener,
                rule_id,
                Arc::new(ListenerCtx {
                    route,
                    head,
                    shared: shared.clone(),
                }),
            ));
        }
        let mut tasks = Vec::new();
        for (listener, rule_id, ctx) in prepared {
            let _enter = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|source| GatewayError::Listener { rule_id, source })?;
            tasks.push(runtime.spawn(accept_loop(listener, ctx, shutdown_rx.clone())));
        }
        Ok(GatewayHandle {
            audit: shared.audit.clone(),
            endpoints,
            shutdown_tx,
            tasks,
        })
    }
}

fn compile(route: &Route) -> Result<CompiledRoute, GatewayError> {
    let mut inject = Vec::new();
    for (name, source) in &route.inject_headers {
        inject.push((name.clone(), source.resolve()?));
    }
    Ok(CompiledRoute {
        rule_id: route.rule_id.clone(),
        origin: route.origin.clone(),
        origin_text: route.origin.to_string(),
        inject,
        pass: route.pass_headers.clone(),
    })
}

/// A running gateway. Dropping it stops the gateway too (without waiting).
#[derive(Debug)]
pub struct GatewayHandle {
    audit: AuditLog,
    endpoints: Vec<Endpoint>,
    shutdown_tx: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl GatewayHandle {
    /// Every audit record so far (allowed, denied and failed requests).
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.audit.records()
    }

    /// Audit records not kept because the log reached [`crate::MAX_AUDIT_RECORDS`].
    pub fn audit_dropped(&self) -> u64 {
        self.audit.dropped()
    }

    /// Where each route is served, one entry per listener.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Stops accepting, closes every worker connection and waits for the accept loops.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for GatewayHandle {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    ctx: Arc<ListenerCtx>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(ctx.shared.limits.header_read_timeout)
        .max_headers(ctx.shared.limits.max_headers)
        .max_header_size(ctx.shared.limits.max_header_bytes)
        .keep_alive(true)
        .half_close(false);
    let builder = Arc::new(builder);
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(rule = %ctx.route.rule_id, error = %e, "gateway accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = ctx.shared.connections.clone().try_acquire_owned() else {
            tracing::warn!(rule = %ctx.route.rule_id, "gateway connection limit reached; closing connection");
            record_connection_failure(&ctx, Denial::Busy);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let builder = builder.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc_ctx = ctx.clone();
            let svc = service_fn(move |req| {
                let ctx = svc_ctx.clone();
                async move { Ok::<_, Infallible>(handle(ctx, req).await) }
            });
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        let denial = if e.is_parse_too_large() {
                            Some(Denial::HeaderTooLarge)
                        } else if e.is_parse() || e.is_parse_status() {
                            Some(Denial::Malformed)
                        } else if e.is_timeout() {
                            Some(Denial::HeaderTimeout)
                        } else {
                            None
                        };
                        tracing::debug!(rule = %ctx.route.rule_id, error = %e, "worker connection ended with an error");
                        if let Some(d) = denial {
                            record_connection_failure(&ctx, d);
                        }
                    }
                }
                _ = shutdown.changed() => {}
            }
            drop(permit);
        });
    }
}

fn base_record(route: &CompiledRoute, method: &str, path: String) -> AuditRecord {
    AuditRecord {
        rule_id: route.rule_id.clone(),
        origin: route.origin_text.clone(),
        method: method.to_owned(),
        path,
        status: 0,
        bytes_in: 0,
        bytes_out: 0,
        duration_us: 0,
        decision: Decision::Denied,
        reason: None,
    }
}

fn record_connection_failure(ctx: &ListenerCtx, denial: Denial) {
    let mut rec = base_record(&ctx.route, "-", "-".to_owned());
    rec.status = match denial {
        Denial::HeaderTimeout | Denial::Busy => 0,
        d => d.status().as_u16(),
    };
    rec.reason = Some(denial.reason().to_owned());
    ctx.shared.audit.push(rec);
}

/// A generic error for the worker: the status and the stable reason id, nothing else.
fn refusal(denial: Denial) -> Response<WorkerBody> {
    let text = format!(
        "stockade-gateway: {} ({})\n",
        if denial.is_policy() {
            "refused by network policy"
        } else {
            "upstream unavailable"
        },
        denial.reason()
    );
    let mut resp = Response::new(Either::Left(Full::new(Bytes::from(text))));
    *resp.status_mut() = denial.status();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        HeaderName::from_static("x-stockade-gateway"),
        HeaderValue::from_static(denial.reason()),
    );
    if matches!(denial, Denial::Connect | Denial::Method) {
        resp.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
    }
    if !denial.is_policy()
        || matches!(
            denial,
            Denial::BodyTooLarge | Denial::LengthConflict | Denial::Malformed
        )
    {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

fn deny(
    ctx: &ListenerCtx,
    mut rec: AuditRecord,
    start: Instant,
    bytes_in: u64,
    denial: Denial,
) -> Response<WorkerBody> {
    rec.status = denial.status().as_u16();
    rec.decision = if denial.is_policy() {
        Decision::Denied
    } else {
        Decision::Failed
    };
    rec.reason = Some(denial.reason().to_owned());
    rec.bytes_in = bytes_in;
    rec.duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    ctx.shared.audit.push(rec);
    refusal(denial)
}

fn chain_find<T: std::error::Error + Copy + 'static>(
    e: &(dyn std::error::Error + 'static),
) -> Option<T> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<T>() {
            return Some(*t);
        }
        cur = err.source();
    }
    None
}

fn chain_has_forbidden(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(ConnectError::Forbidden { .. }) = err.downcast_ref::<ConnectError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

async fn handle(ctx: Arc<ListenerCtx>, req: Request<Incoming>) -> Response<WorkerBody> {
    let start = Instant::now();
    let limits = &ctx.shared.limits;
    let rec = base_record(&ctx.route, req.method().as_str(), audit_path(req.uri()));
    let Ok(permit) = ctx.shared.requests.clone().try_acquire_owned() else {
        return deny(&ctx, rec, start, 0, Denial::Busy);
    };
    let (parts, body) = req.into_parts();
    let view = ctx.route.view();
    let head = match prepare_upstream(
        &parts.method,
        &parts.uri,
        parts.version,
        &parts.headers,
        &ctx.head,
        &view,
    ) {
        Ok(h) => h,
        Err(d) => return deny(&ctx, rec, start, 0, d),
    };
    let deadline = tokio::time::Instant::now() + limits.total_timeout;
    let bytes_in = Arc::new(AtomicU64::new(0));
    let bytes_out = Arc::new(AtomicU64::new(0));
    let up_body = Metered::new(
        body,
        Some(limits.max_request_body),
        bytes_in.clone(),
        limits.idle_timeout,
        deadline,
        None,
    );
    let mut up = Request::new(up_body);
    *up.method_mut() = head.method;
    *up.uri_mut() = head.uri;
    *up.version_mut() = Version::HTTP_11;
    *up.headers_mut() = head.headers;
    let resp = match tokio::time::timeout_at(deadline, ctx.shared.client.request(up)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let sent = bytes_in.load(Ordering::Relaxed);
            let denial = if let Some(cut) = chain_find::<StreamCut>(&e) {
                match cut {
                    StreamCut::TooLarge => Denial::BodyTooLarge,
                    StreamCut::Idle | StreamCut::Deadline => Denial::RequestBodyTimeout,
                }
            } else if sent > limits.max_request_body {
                Denial::BodyTooLarge
            } else if chain_has_forbidden(&e) {
                Denial::UpstreamAddressForbidden
            } else {
                Denial::UpstreamFailed
            };
            tracing::warn!(rule = %ctx.route.rule_id, origin = %ctx.route.origin_text, error = %e, source = ?std::error::Error::source(&e).map(|s| s.to_string()), "upstream request failed");
            return deny(&ctx, rec, start, sent, denial);
        }
        Err(_) => {
            return deny(
                &ctx,
                rec,
                start,
                bytes_in.load(Ordering::Relaxed),
                Denial::UpstreamTimeout,
            );
        }
    };
    let (mut rparts, rbody) = resp.into_parts();
    rewrite_response_headers(&mut rparts.headers, &view);
    rparts.version = Version::HTTP_11;
    let mut rec = rec;
    rec.status = rparts.status.as_u16();
    rec.decision = Decision::Allowed;
    let guard = AuditGuard {
        log: ctx.shared.audit.clone(),
        record: rec,
        start,
        bytes_in,
        bytes_out: bytes_out.clone(),
        _permit: Some(permit),
    };
    let body = Metered::new(
        rbody,
        limits.max_response_body,
        bytes_out,
        limits.idle_timeout,
        deadline,
        Some(guard),
    );
    Response::from_parts(rparts, Either::Right(body))
}
