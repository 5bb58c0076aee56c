//! The Prometheus endpoint: `GET /metrics` on its own port (`--metrics-listen`),
//! serving adk-grpc-telemetry's registry in the text exposition format. A tiny HTTP/1
//! server (axum, already in the tree through tonic), separate from the gRPC port
//! so scrapers need no gRPC and the port can stay cluster-internal. Services may add
//! HTTP routes of their own to it (the runner's A2A agent cards).

use crate::shutdown::Shutdown;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A bound metrics port, not serving yet.
pub(crate) struct MetricsEndpoint {
    listener: TcpListener,
    pub(crate) local_addr: SocketAddr,
}

impl MetricsEndpoint {
    pub(crate) async fn bind(addr: &str) -> std::io::Result<MetricsEndpoint> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        Ok(MetricsEndpoint { listener, local_addr })
    }

    /// Serves `/metrics` and `extra` (e.g. A2A agent cards) until the shutdown fires
    /// (a request in progress is answered first).
    pub(crate) fn serve(self, extra: axum::Router, shutdown: Shutdown) -> JoinHandle<()> {
        let router = axum::Router::new().route("/metrics", get(scrape)).merge(extra);
        let addr = self.local_addr;
        tokio::spawn(async move {
            let served = axum::serve(self.listener, router)
                .with_graceful_shutdown(shutdown.triggered())
                .await;
            if let Err(err) = served {
                tracing::warn!("the metrics endpoint on {addr} stopped: {err}");
            }
        })
    }
}

async fn scrape() -> Response {
    match adk_grpc_telemetry::metrics::encode_text() {
        Ok(text) => (
            [(header::CONTENT_TYPE, adk_grpc_telemetry::metrics::TEXT_CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the metrics: {err}"),
        )
            .into_response(),
    }
}
