//! A body wrapper that streams frames unchanged while counting bytes, enforcing a size limit,
//! an idle timeout and a deadline, and finishing the audit record when the stream ends.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use crate::audit::{AuditLog, AuditRecord, Decision};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a metered stream was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamCut {
    #[error("body exceeds the gateway's limit")]
    TooLarge,
    #[error("body idle longer than the gateway's idle timeout")]
    Idle,
    #[error("exchange exceeded the gateway's total timeout")]
    Deadline,
}

impl StreamCut {
    fn reason(self, response: bool) -> &'static str {
        match (self, response) {
            (StreamCut::TooLarge, false) => "body_too_large",
            (StreamCut::TooLarge, true) => "response_too_large",
            (StreamCut::Idle, _) => "idle_timeout",
            (StreamCut::Deadline, _) => "total_timeout",
        }
    }
}

/// Finishes one audit record when dropped.
pub(crate) struct AuditGuard {
    pub(crate) log: AuditLog,
    pub(crate) record: AuditRecord,
    pub(crate) start: std::time::Instant,
    pub(crate) bytes_in: Arc<AtomicU64>,
    pub(crate) bytes_out: Arc<AtomicU64>,
    pub(crate) _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for AuditGuard {
    fn drop(&mut self) {
        let mut record = self.record.clone();
        record.bytes_in = self.bytes_in.load(Ordering::Relaxed);
        record.bytes_out = self.bytes_out.load(Ordering::Relaxed);
        record.duration_us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.log.push(record);
    }
}

pub(crate) struct Metered {
    inner: Incoming,
    seen: u64,
    limit: Option<u64>,
    counter: Arc<AtomicU64>,
    idle: Duration,
    idle_timer: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
    guard: Option<AuditGuard>,
    response: bool,
    done: bool,
}

impl Metered {
    pub(crate) fn new(
        inner: Incoming,
        limit: Option<u64>,
        counter: Arc<AtomicU64>,
        idle: Duration,
        deadline: Instant,
        guard: Option<AuditGuard>,
    ) -> Self {
        let response = guard.is_some();
        Metered {
            inner,
            seen: 0,
            limit,
            counter,
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
            guard,
            response,
            done: false,
        }
    }

    fn cut(&mut self, why: StreamCut) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.done = true;
        if let Some(g) = self.guard.as_mut() {
            g.record.decision = Decision::Failed;
            g.record.reason = Some(why.reason(self.response).to_owned());
        }
        self.guard = None;
        Poll::Ready(Some(Err(Box::new(why))))
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let n = data.len() as u64;
                    this.seen = this.seen.saturating_add(n);
                    this.counter.fetch_add(n, Ordering::Relaxed);
                    if this.limit.is_some_and(|l| this.seen > l) {
                        return this.cut(StreamCut::TooLarge);
                    }
                }
                let next = Instant::now() + this.idle;
                this.idle_timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done = true;
                if let Some(g) = this.guard.as_mut() {
                    g.record.decision = Decision::Failed;
                    g.record.reason = Some(
                        if this.response {
                            "upstream_stream_error"
                        } else {
                            "worker_stream_error"
                        }
                        .to_owned(),
                    );
                }
                this.guard = None;
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(None) => {
                this.done = true;
                this.guard = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_ready() {
                    return this.cut(StreamCut::Deadline);
                }
                if this.idle_timer.as_mut().poll(cx).is_ready() {
                    return this.cut(StreamCut::Idle);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        if let Some(g) = self.guard.as_mut()
            && !self.done
            && !self.inner.is_end_stream()
        {
            // The worker went away (or hyper stopped polling) before the stream ended.
            g.record.reason = Some("response_incomplete".to_owned());
        }
    }
}
