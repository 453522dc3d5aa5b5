//! The access log: every request gets an id (`x-request-id`, honoured if the client sent one,
//! else the server's own), echoed in the answer's `x-request-id`, and one `INFO` line per answer
//! from `tower-http`'s trace layer — method, path, request id, status, latency — under the
//! `resident_serve::access` target (`RUST_LOG=resident_serve::access=info`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::http::{HeaderValue, Request, header::HeaderName};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

/// The header that carries a request's id.
pub const REQUEST_ID: &str = "x-request-id";

/// The server's own request ids: `<process start, hex>-<count>`, unique within a process and
/// across its restarts.
#[derive(Debug, Clone)]
struct Counter {
    prefix: Arc<str>,
    next: Arc<AtomicU64>,
}

impl Counter {
    fn new() -> Self {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_micros());
        Self { prefix: format!("{started:x}").into(), next: Arc::new(AtomicU64::new(1)) }
    }
}

impl MakeRequestId for Counter {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        // A count, not a hand-off: nothing is read through it.
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        HeaderValue::from_str(&format!("{}-{n}", self.prefix)).ok().map(RequestId::new)
    }
}

/// `router` with request ids and the access log around every route.
pub(crate) fn logged(router: Router) -> Router {
    let header = HeaderName::from_static(REQUEST_ID);
    let trace = TraceLayer::new_for_http()
        .make_span_with(|request: &Request<_>| {
            let id = request.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            tracing::info_span!(
                target: "resident_serve::access",
                "request",
                method = %request.method(),
                path = %request.uri().path(),
                request_id = %id,
            )
        })
        .on_request(())
        .on_response(DefaultOnResponse::new().level(Level::INFO));
    // Outermost first: the id is set before the span reads it, and echoed on the way out.
    router
        .layer(PropagateRequestIdLayer::new(header.clone()))
        .layer(trace)
        .layer(SetRequestIdLayer::new(header, Counter::new()))
}
