//! Metrics: the process's Prometheus recorder, and the server's own request counter.
//!
//! resident emits its metrics through the [`metrics`] facade (loads, evictions, refusals,
//! lease and lock waits, memory); the recorder installed here collects them, and `GET /metrics`
//! renders them with the server's `resident_http_requests_total{route, status}`.

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// How often [`upkeep`] drains the recorder's histograms.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed as the global [`metrics`] recorder on first
/// use; every server of the process (several, in a test binary) shares it.
///
/// If another recorder was installed first, this one cannot be: its handle then renders only
/// what it records itself (nothing), and a warning is logged.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => handle,
        Err(error) => {
            tracing::warn!(%error, "another metrics recorder is installed; /metrics will be empty");
            PrometheusBuilder::new().build_recorder().handle()
        }
    })
}

/// Counts one answered request: `resident_http_requests_total{route, status}`.
pub(crate) fn count_request(route: &'static str, status: StatusCode) {
    metrics::counter!("resident_http_requests_total", "route" => route, "status" => status.as_u16().to_string())
        .increment(1);
}

/// Counts a connection closed as it was accepted, its client holding
/// [`Limits::max_connections_per_client`](crate::Limits::max_connections_per_client) already:
/// `resident_http_connections_refused_total{reason="per_client"}`.
pub(crate) fn count_refused_connection() {
    metrics::counter!("resident_http_connections_refused_total", "reason" => "per_client").increment(1);
}

/// Drains the recorder's histograms every few seconds, so that they do not grow between
/// scrapes (the recorder leaves that to its user). Runs until dropped.
pub(crate) async fn upkeep(handle: PrometheusHandle) {
    let mut every = tokio::time::interval(UPKEEP_EVERY);
    loop {
        every.tick().await;
        handle.run_upkeep();
    }
}
