//! [`admit`]: the middleware every request passes before its handler — the body's length checked
//! from its head, its [`Charge`](crate::limits::Charge) taken from the in-flight byte budget,
//! its body read within the body timeout. The charge is given back when the answer's body has
//! been written or dropped ([`crate::limits`] has the rules).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use resident::Loader;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::app::App;
use crate::error::ApiError;
use crate::model::ServeModel;
use crate::routes::counted;

/// The budget's unit: a charge is taken in whole KiB (a semaphore takes at most `u32::MAX`
/// permits at once).
const UNIT: u64 = 1024;

/// Seconds a client refused for a spent budget is told to wait.
const RETRY_AFTER: u32 = 1;

/// Route label of requests refused here, before any route saw them.
const ADMISSION: &str = "admission";

/// The server's in-flight byte budget ([`Limits::inflight_bytes`](crate::Limits::inflight_bytes)).
#[derive(Debug)]
pub(crate) struct InFlight {
    permits: Arc<Semaphore>,
    units: u64,
}

impl InFlight {
    /// A budget of `bytes`, in whole KiB.
    pub(crate) fn new(bytes: u64) -> Self {
        let units = (bytes / UNIT).min(Semaphore::MAX_PERMITS as u64);
        Self { permits: Arc::new(Semaphore::new(usize::try_from(units).unwrap_or(0))), units }
    }

    /// Bytes not charged to any request now.
    pub(crate) fn available(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }

    /// Takes `bytes` (rounded up to a KiB), waiting for them; `None` if they can never fit.
    async fn take(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let units = bytes.div_ceil(UNIT);
        if units > self.units {
            return None;
        }
        let units = u32::try_from(units).ok()?;
        Arc::clone(&self.permits).acquire_many_owned(units).await.ok()
    }
}

/// The largest frame an answer is handed to hyper in: hyper buffers a few frames ahead of the
/// socket, so the charge is held until all but the last few are written.
const FRAME: usize = 64 * 1024;

tokio::task_local! {
    /// The in-flight charge of the request being handled, for work it hands to the blocking
    /// pool ([`current_charge`]).
    static CHARGE: Arc<OwnedSemaphorePermit>;
}

/// The in-flight charge of the request being handled, if its body was charged: work handed to
/// the blocking pool holds it too, so that a client that hangs up (which drops the handler)
/// gets its bytes back only once that work, which still holds the body and what it decoded,
/// is done.
pub(crate) fn current_charge() -> Option<Arc<OwnedSemaphorePermit>> {
    CHARGE.try_with(Arc::clone).ok()
}

/// An answer's body that holds its request's charge until it is dropped, handing its bytes to
/// hyper in frames of at most [`FRAME`] bytes (hyper drops a body once it has taken its last
/// frame, written or not).
struct Charged {
    body: Body,
    pending: Bytes,
    /// When the answer must have been handed to hyper whole: a client that reads it slower
    /// than [`MIN_RATE`] (after the send timeout) is cut off, its charge returned.
    deadline: Option<Instant>,
    _permit: Arc<OwnedSemaphorePermit>,
}

/// The slowest a client may read an answer, on average, after the send timeout: bytes a second.
pub(crate) const MIN_RATE: u64 = 64 * 1024;

impl Charged {
    fn new(body: Body, permit: Arc<OwnedSemaphorePermit>, send_timeout: Duration) -> Self {
        let length = http_body::Body::size_hint(&body).upper().unwrap_or(u64::MAX);
        let reading = Duration::from_secs(length / MIN_RATE);
        let deadline = Instant::now().checked_add(send_timeout.saturating_add(reading));
        Self { body, pending: Bytes::new(), deadline, _permit: permit }
    }
}

impl http_body::Body for Charged {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.deadline.is_some_and(|deadline| Instant::now() > deadline) {
            let text = format!("the client read its answer slower than {MIN_RATE} bytes a second");
            return Poll::Ready(Some(Err(axum::Error::new(text))));
        }
        if this.pending.is_empty() {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return other,
            }
        }
        let piece = this.pending.split_to(this.pending.len().min(FRAME));
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.body.size_hint();
        let pending = self.pending.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(pending));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(pending));
        }
        hint
    }
}

/// What of a request's charge its answer `body` keeps once the handler is done: the answer's
/// bytes and a frame (hyper's buffers), the rest given back at once — the body read, what was
/// decoded and computed are gone, and a client reading a large answer slowly would otherwise
/// hold several times its bytes. The whole charge if something else still holds it (work on
/// the blocking pool) or the answer's length is unknown.
fn kept_for(mut permit: Arc<OwnedSemaphorePermit>, body: &Body) -> Arc<OwnedSemaphorePermit> {
    let Some(length) = http_body::Body::size_hint(body).exact() else { return permit };
    if let Some(whole) = Arc::get_mut(&mut permit) {
        let kept = usize::try_from(length.saturating_add(FRAME as u64).div_ceil(UNIT)).unwrap_or(usize::MAX);
        let spare = whole.num_permits().saturating_sub(kept);
        drop(whole.split(spare));
    }
    permit
}

/// The request's body length from its head: `Content-Length`, else the largest body accepted
/// if it has one of unknown length (chunked), else zero.
fn declared_length(headers: &HeaderMap, max: u64) -> Result<u64, ApiError> {
    if let Some(length) = headers.get(header::CONTENT_LENGTH) {
        return length.to_str().ok().and_then(|text| text.parse::<u64>().ok()).ok_or_else(|| {
            ApiError::bad_request("bad_body", format!("Content-Length is not a length: {length:?}"))
        });
    }
    Ok(if headers.contains_key(header::TRANSFER_ENCODING) { max } else { 0 })
}

/// Whether a request names a route that changes what is served ([`crate::auth`]), read from its
/// raw path: every `PUT` and `DELETE`, a pin or an unpin, the repository's load and unload.
fn is_control(method: &Method, path: &str) -> bool {
    let pin = path.starts_with("/models/") && (path.ends_with("/pin") || path.ends_with("/unpin"));
    matches!(*method, Method::PUT | Method::DELETE)
        || (*method == Method::POST && (pin || path.starts_with("/v2/repository/models/")))
}

/// Refuses a body whose `Content-Type` is neither JSON nor, for the binary tensor data
/// extension (an `Inference-Header-Content-Length` header), raw bytes (415). A body without one
/// is read as JSON (`tritonclient` sends none).
fn checked_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return Ok(()) };
    let mime = value.to_str().ok().and_then(|v| v.split(';').next()).map(|m| m.trim().to_ascii_lowercase());
    match mime.as_deref() {
        Some("application/json") => Ok(()),
        Some("application/octet-stream") if headers.contains_key("inference-header-content-length") => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "a body of type {value:?}: the server reads application/json (or application/octet-stream with Inference-Header-Content-Length)"
            ),
        )),
    }
}

fn too_large(text: String) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", text)
}

/// Checks, charges and reads the request's body, then runs the rest of the stack on it.
pub(crate) async fn admit<L>(State(app): State<App<L>>, request: Request, next: Next) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    match admitted(&app, request).await {
        Ok((request, permit)) => {
            let Some(permit) = permit.map(Arc::new) else { return next.run(request).await };
            let response = CHARGE.scope(Arc::clone(&permit), next.run(request)).await;
            // The charge covers the answer too: what the answer holds goes back when hyper drops
            // the body, written; the rest now.
            let send_timeout = app.config().limits.send_timeout;
            response.map(|body| {
                let permit = kept_for(permit, &body);
                Body::new(Charged::new(body, permit, send_timeout))
            })
        }
        Err(error) => counted(ADMISSION, Err::<Response, _>(error)).into_response(),
    }
}

async fn admitted<L>(
    app: &App<L>,
    request: Request,
) -> Result<(Request, Option<OwnedSemaphorePermit>), ApiError>
where
    L: Loader,
    L::Model: ServeModel,
{
    let limits = &app.config().limits;
    let length = declared_length(request.headers(), limits.max_body_bytes)?;
    if length == 0 {
        return Ok((request, None));
    }
    // A control request without the token is refused before its body is charged or read (its
    // handler checks the token again, on the decoded path, whatever this look at the raw one
    // misses).
    if is_control(request.method(), request.uri().path()) {
        crate::auth::Caller::of(request.headers(), request.extensions())
            .admitted(app.config())
            .map_err(ApiError::from)?;
    }
    checked_type(request.headers())?;
    if length > limits.max_body_bytes {
        return Err(too_large(format!(
            "a body of {length} bytes; the server takes at most {}",
            limits.max_body_bytes
        )));
    }
    let charge = app.charge().bytes(length);
    let waited = tokio::time::timeout(app.config().request_timeout, app.in_flight().take(charge));
    let permit = match waited.await {
        Ok(Some(permit)) => permit,
        Ok(None) => {
            return Err(too_large(format!(
                "a body of {length} bytes may hold {charge} bytes in the server, more than its in-flight budget ({})",
                limits.inflight_bytes
            )));
        }
        Err(_) => {
            let text = format!("no room for {charge} more bytes in flight within the request timeout");
            return Err(
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", text).retry_after(RETRY_AFTER)
            );
        }
    };
    let (parts, body) = request.into_parts();
    let limit = usize::try_from(length).unwrap_or(usize::MAX);
    // A declared length is set aside whole (it is charged); a chunked body's buffer grows.
    let declared = parts.headers.contains_key(header::CONTENT_LENGTH);
    let reserve = if declared { limit } else { limit.min(CHUNKED_RESERVE) };
    let bytes = match tokio::time::timeout(limits.body_timeout, read_body(body, limit, reserve)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyRead::TooLong)) => {
            return Err(too_large(format!("cannot read the body: it is longer than {limit} bytes")));
        }
        Ok(Err(BodyRead::Failed(error))) => {
            let text = format!("cannot read the body: {error}");
            return Err(ApiError::bad_request("bad_body", text).with_source(error));
        }
        Err(elapsed) => {
            let text = format!("the body was not received within {:?}", limits.body_timeout);
            return Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", text).with_source(elapsed));
        }
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), Some(permit)))
}

/// What a chunked body's buffer starts at (it grows to the body's length, at most the largest
/// body accepted, which the request is charged).
const CHUNKED_RESERVE: usize = 1024 * 1024;

/// Why a body was not read whole.
enum BodyRead {
    /// It is longer than its limit.
    TooLong,
    /// The connection failed, or hyper refused it (a malformed chunk).
    Failed(axum::Error),
}

/// Reads `body` (at most `limit` bytes) into one buffer of `reserve` bytes to start with, frame
/// by frame. Each frame is copied and let go at once: a body sent in many tiny chunks holds
/// its bytes, not one handle and one read buffer per chunk.
async fn read_body(body: Body, limit: usize, reserve: usize) -> Result<Bytes, BodyRead> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut bytes = Vec::with_capacity(reserve);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(BodyRead::Failed)?.into_data() else { continue };
        if data.len() > limit - bytes.len() {
            return Err(BodyRead::TooLong);
        }
        bytes.extend_from_slice(&data);
    }
    Ok(Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn a_body_declares_its_length_or_the_largest() {
        let mut headers = HeaderMap::new();
        assert_eq!(declared_length(&headers, 99).ok(), Some(0));
        headers.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        assert_eq!(declared_length(&headers, 99).ok(), Some(99));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("12"));
        assert_eq!(declared_length(&headers, 99).ok(), Some(12));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("-1"));
        assert!(declared_length(&headers, 99).is_err());
    }

    #[tokio::test]
    async fn an_answer_keeps_its_own_bytes_of_the_charge_and_gives_the_rest_back() {
        let budget = InFlight::new(1000 * UNIT);
        let answer = || Body::from(vec![0_u8; 10 * 1024]);
        let charge = || async { Arc::new(budget.take(600 * UNIT).await.expect("fits")) };
        let kept = kept_for(charge().await, &answer());
        assert_eq!(budget.available(), (1000 - 74) * UNIT, "10 KiB of answer and a 64 KiB frame");
        drop(kept);
        assert_eq!(budget.available(), 1000 * UNIT);
        // Held elsewhere too (work on the blocking pool): kept whole.
        let held = charge().await;
        let kept = kept_for(Arc::clone(&held), &answer());
        assert_eq!(budget.available(), 400 * UNIT);
        drop((held, kept));
        // An answer of unknown length: kept whole.
        let kept = kept_for(charge().await, &Body::new(Unknown));
        assert_eq!(budget.available(), 400 * UNIT);
        drop(kept);
        // An answer larger than the charge keeps it whole.
        let small = Arc::new(budget.take(8 * UNIT).await.expect("fits"));
        let kept = kept_for(small, &answer());
        assert_eq!(budget.available(), 992 * UNIT);
        drop(kept);
    }

    /// A body of unknown length.
    struct Unknown;

    impl http_body::Body for Unknown {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(None)
        }
    }

    #[tokio::test]
    async fn a_charge_past_the_budget_is_refused_and_one_within_it_waits_its_turn() {
        let budget = InFlight::new(4 * UNIT);
        assert!(budget.take(5 * UNIT).await.is_none(), "can never fit");
        let held = budget.take(3 * UNIT + 1).await.expect("fits");
        assert_eq!(budget.available(), 0, "rounded up to whole units");
        let waiting = budget.take(UNIT);
        tokio::pin!(waiting);
        assert!(futures_poll_once(waiting.as_mut()).await.is_none(), "waits while the budget is spent");
        drop(held);
        assert!(waiting.await.is_some(), "then gets its turn");
    }

    /// Polls `future` once: its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
        let mut future = future;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
