//! Running a gateway on its own runtime, for synchronous callers.

use crate::audit::AuditRecord;
use crate::config::GatewayConfig;
use crate::error::GatewayError;
use crate::gateway::{Endpoint, Gateway, GatewayHandle};

/// A gateway on a private multi-threaded tokio runtime (two worker threads).
///
/// For callers without a runtime (the CLI's synchronous `exec` path, benchmarks). Do not
/// create or shut one down from inside an async context: it blocks.
#[derive(Debug)]
pub struct BlockingGateway {
    handle: Option<GatewayHandle>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl BlockingGateway {
    /// Builds the runtime and starts the gateway on it; see [`Gateway::start`].
    pub fn start(
        config: GatewayConfig,
        listeners: Vec<(std::net::TcpListener, String)>,
    ) -> Result<Self, GatewayError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stockade-gateway")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| GatewayError::Runtime(e.to_string()))?;
        let handle = {
            let _enter = runtime.enter();
            Gateway::start(config, listeners)?
        };
        Ok(BlockingGateway {
            handle: Some(handle),
            runtime: Some(runtime),
        })
    }

    /// Every audit record so far.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.handle
            .as_ref()
            .map(GatewayHandle::audit)
            .unwrap_or_default()
    }

    /// Where each route is served.
    pub fn endpoints(&self) -> &[Endpoint] {
        self.handle
            .as_ref()
            .map(GatewayHandle::endpoints)
            .unwrap_or_default()
    }

    /// Stops the gateway, waits for it and returns the final audit trail.
    pub fn shutdown(mut self) -> Vec<AuditRecord> {
        self.stop()
    }

    fn stop(&mut self) -> Vec<AuditRecord> {
        let (Some(handle), Some(runtime)) = (self.handle.take(), self.runtime.take()) else {
            return Vec::new();
        };
        let records = handle.audit();
        runtime.block_on(handle.shutdown());
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        records
    }
}

impl Drop for BlockingGateway {
    fn drop(&mut self) {
        self.stop();
    }
}
