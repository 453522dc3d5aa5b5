//! The access log: every request gets an id (`x-request-id`: the client's if it is at most
//! [`MAX_ID`] bytes of letters, digits and `.`, `_`, `:`, `-`, else the server's own), echoed
//! in the answer's `x-request-id`, and one `INFO` line per answer through `tower-http`'s trace
//! layer — method (its first [`MAX_LOGGED_METHOD`] bytes), path (its first
//! [`MAX_LOGGED_PATH`] bytes), request id, status, latency —
//! under the `resident_serve::access` target (`RUST_LOG=resident_serve::access=info` shows them
//! alone).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Method, Request, header::HeaderName};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{OnResponse, TraceLayer};
use tracing::Span;

/// The header that carries a request's id.
pub const REQUEST_ID: &str = "x-request-id";

/// The most bytes of a request's path its access line writes: a head may carry a path of
/// nearly 64 KiB, and the log would grow by as much per request.
pub const MAX_LOGGED_PATH: usize = 512;

/// The most bytes of a request's method its access line writes: HTTP lets a method be any
/// token, as long as the head (nearly 64 KiB).
pub const MAX_LOGGED_METHOD: usize = 32;

/// `path` cut to [`MAX_LOGGED_PATH`] bytes, on a character boundary.
fn logged_path(path: &str) -> &str {
    crate::error::prefix(path, MAX_LOGGED_PATH)
}

/// `method` cut to [`MAX_LOGGED_METHOD`] bytes (a method is ASCII).
fn logged_method(method: &Method) -> &str {
    crate::error::prefix(method.as_str(), MAX_LOGGED_METHOD)
}

/// The longest request id a client may choose.
pub const MAX_ID: usize = 128;

/// Whether a client's request id can be logged and echoed as it is.
fn acceptable(id: &HeaderValue) -> bool {
    let id = id.as_bytes();
    !id.is_empty()
        && id.len() <= MAX_ID
        && id.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Drops a client's request id the log could not carry as it is: the server makes its own.
async fn screened(mut request: axum::extract::Request) -> axum::extract::Request {
    if request.headers().get(REQUEST_ID).is_some_and(|id| !acceptable(id)) {
        request.headers_mut().remove(REQUEST_ID);
    }
    request
}

/// One access line per answer, under the `resident_serve::access` target.
#[derive(Debug, Clone, Copy)]
struct Answered;

impl<B> OnResponse<B> for Answered {
    fn on_response(self, response: &axum::http::Response<B>, latency: Duration, _: &Span) {
        tracing::info!(
            target: "resident_serve::access",
            status = response.status().as_u16(),
            latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            "answered"
        );
    }
}

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
                method = %logged_method(request.method()),
                path = %logged_path(request.uri().path()),
                request_id = id,
            )
        })
        .on_request(())
        .on_response(Answered);
    // Outermost last: a client's id is screened, then set, before the span reads it, and
    // echoed on the way out.
    router
        .layer(PropagateRequestIdLayer::new(header.clone()))
        .layer(trace)
        .layer(SetRequestIdLayer::new(header, Counter::new()))
        .layer(axum::middleware::map_request(screened))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_is_kept_only_if_the_log_can_carry_it() {
        for fine in ["abc-123", "trace.id:7_x", &"a".repeat(MAX_ID)] {
            assert!(acceptable(&HeaderValue::from_str(fine).unwrap()), "{fine}");
        }
        for bad in ["", "a b", "a} status=200", "x\"y", &"a".repeat(MAX_ID + 1)] {
            assert!(!acceptable(&HeaderValue::from_str(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn a_logged_method_is_cut_to_its_bound() {
        assert_eq!(logged_method(&Method::POST), "POST");
        let long = Method::from_bytes("A".repeat(64 * 1024).as_bytes()).expect("any token is a method");
        assert_eq!(logged_method(&long).len(), MAX_LOGGED_METHOD);
    }

    #[test]
    fn a_logged_path_is_cut_to_its_bound() {
        assert_eq!(logged_path("/models/mlp/infer"), "/models/mlp/infer");
        let long = format!("/models/{}", "a".repeat(64 * 1024));
        assert_eq!(logged_path(&long).len(), MAX_LOGGED_PATH);
        let wide = "é".repeat(MAX_LOGGED_PATH);
        assert_eq!(logged_path(&wide).len(), MAX_LOGGED_PATH);
        let odd = format!("x{wide}");
        assert_eq!(logged_path(&odd).len(), MAX_LOGGED_PATH - 1);
    }
}
