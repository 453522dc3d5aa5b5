//! [`ApiError`]: how a failed request answers, and which status each resident error maps to.
//!
//! | Error | Status | `kind` |
//! |---|---|---|
//! | [`ManagerError::NotFound`]; a source the catalogue does not list | 404 | `not_found`, `unknown_model` |
//! | [`ManagerError::InvalidId`]; malformed JSON; input that is not whole rows | 400 | `invalid_id`, `bad_json`, `bad_input` |
//! | [`ManagerError::CapacityExhausted`], [`ManagerError::OverLimit`], [`ManagerError::NoSlotBeside`]; a load refused by the RAM budget ([`CacheError::TooLarge`], [`CacheError::NoRoom`], ..., [`BurnError::TooLarge`]) | 507 | `capacity_exhausted`, `over_limit`, `no_slot_beside`, `over_budget` |
//! | [`ManagerError::Busy`], [`ManagerError::LockTimeout`], [`ManagerError::Removing`], [`ManagerError::ShutDown`]; a load wait that ran out; a model file rewritten while it was read ([`BurnError::Changed`], [`CacheError::SourceChanged`]) | 503 | `busy`, `lock_timeout`, `removing`, `shut_down`, `load_timeout`, `model_file_changing` |
//! | Too many calls waiting for one model ([`Limits::max_per_model`](crate::Limits::max_per_model)) | 429, with `Retry-After` | `too_many_requests` |
//! | Too many calls waiting in the server ([`Limits::max_blocking`](crate::Limits::max_blocking)); the in-flight byte budget still spent at the request's deadline | 503, with `Retry-After` | `overloaded` |
//! | A body over [`Limits::max_body_bytes`](crate::Limits::max_body_bytes), a tensor over [`Limits::max_elements`](crate::Limits::max_elements) | 413 | `too_large` |
//! | A body whose `Content-Type` is not JSON (nor raw bytes with `Inference-Header-Content-Length`) | 415 | `unsupported_media_type` |
//! | An alias that would take a catalogue model's name | 409 | `catalogue_name` |
//! | A control route without the control token ([`crate::auth`]) | 401, with `WWW-Authenticate: Bearer` | `unauthorized` |
//! | A body not sent within [`Limits::body_timeout`](crate::Limits::body_timeout) | 408 | `body_timeout` |
//! | A forward pass past the request's deadline | 503 | `deadline` |
//! | anything else (a corrupt file, a failed unload, a panic) | 500 | `load_failed`, `unload_failed`, `inference_failed`, `internal` |

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use resident::burn::BurnError;
use resident::{CacheError, InvalidId, ManagerError, SourceError};

use crate::catalogue::NotInCatalogue;

/// A failed request: its status, a short machine-readable `kind`, and the error's text. Its
/// body is `{"error": "<text>", "kind": "<kind>"}`.
///
/// It keeps the error that caused it as its [`source`](std::error::Error::source), for
/// applications that mount the routes and log or inspect what failed: the client sees only the
/// text, which for a failed load has its paths cut, where the source (and so `Debug`) keeps
/// them. Two errors are equal when they answer alike (status, kind, text, headers), whatever
/// their sources.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    retry_after: Option<u32>,
    challenge: bool,
    /// The methods the route takes, for a 405's `Allow` header.
    allow: Option<&'static str>,
    source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

/// The longest message an answer carries, in bytes: a message quotes what the client sent (a
/// header, a name, a path), and an answer must not cost the server a multiple of a request's head.
pub const MAX_MESSAGE: usize = 2048;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix(text: &str, max: usize) -> &str {
    let end = (0..=max.min(text.len())).rev().find(|&at| text.is_char_boundary(at)).unwrap_or(0);
    &text[..end]
}

/// `message` cut to at most [`MAX_MESSAGE`] bytes (on a character boundary), marked if cut.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        message.truncate(prefix(&message, MAX_MESSAGE).len());
        message.push_str(" [cut]");
        // A cut message keeps its whole buffer otherwise, for as long as the answer lives.
        message.shrink_to_fit();
    }
    message
}

impl ApiError {
    /// An error answered with `status`; its message is cut to [`MAX_MESSAGE`] bytes.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        let message = bounded(message.into());
        Self { status, kind, message, retry_after: None, challenge: false, allow: None, source: None }
    }

    /// The same error, caused by `source` (its [`Error::source`]; the client never sees it).
    #[must_use]
    pub fn with_source(mut self, source: impl Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same error, answered with a `Retry-After` of `seconds` (a refusal for load: the
    /// client may try again then).
    #[must_use]
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// A method the route does not take (405), answered with `Allow: allow` (the methods it
    /// takes).
    pub fn method_not_allowed(allow: &'static str) -> Self {
        let mut error = Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method not allowed on this route",
        );
        error.allow = Some(allow);
        error
    }

    /// A request the server cannot parse (400).
    pub fn bad_request(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind, message)
    }

    /// The same error, answered with a `WWW-Authenticate: Bearer` challenge (a 401).
    #[must_use]
    pub(crate) fn challenge(mut self) -> Self {
        self.challenge = true;
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The short kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The error's text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The answer with `body` (its `Retry-After` header, if any, included).
    pub(crate) fn respond(&self, body: serde_json::Value) -> Response {
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.challenge {
            response = crate::auth::challenge(response);
        }
        if let Some(allow) = self.allow {
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

impl PartialEq for ApiError {
    fn eq(&self, other: &Self) -> bool {
        (self.status, self.kind, &self.message, self.retry_after, self.challenge)
            == (other.status, other.kind, &other.message, other.retry_after, other.challenge)
    }
}

impl Eq for ApiError {}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.kind, self.message)
    }
}

impl Error for ApiError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|source| source as &(dyn Error + 'static))
    }
}

impl From<ManagerError> for ApiError {
    fn from(error: ManagerError) -> Self {
        let (status, kind) = classify(&error);
        if let ManagerError::Load { id, source } = &error {
            // The operator's copy keeps the model file's path; the client's is cut to the file's
            // name: a client never learns where the server keeps its models.
            tracing::warn!(%id, kind, error = %source, "load failed");
            return Self::new(status, kind, without_paths(&error.to_string())).with_source(error);
        }
        Self::new(status, kind, error.to_string()).with_source(error)
    }
}

/// `text` with every absolute path (a whitespace-separated word starting with `/` that has
/// another `/` in it) cut to its last component.
fn without_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        // After the whitespace, whatever its width (a no-break space is two bytes).
        let word_start =
            rest[..at].char_indices().rfind(|(_, c)| c.is_whitespace()).map_or(0, |(w, c)| w + c.len_utf8());
        let word_end = rest[at..].find(char::is_whitespace).map_or(rest.len(), |w| at + w);
        let word = &rest[word_start..word_end];
        out.push_str(&rest[..word_start]);
        let absolute = word.starts_with('/') && word[1..].contains('/');
        out.push_str(if absolute { word.rsplit('/').next().unwrap_or(word) } else { word });
        rest = &rest[word_end..];
    }
    out.push_str(rest);
    out
}

impl From<InvalidId> for ApiError {
    fn from(error: InvalidId) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_id", error.to_string()).with_source(error)
    }
}

impl From<NotInCatalogue> for ApiError {
    fn from(error: NotInCatalogue) -> Self {
        Self::new(StatusCode::NOT_FOUND, "unknown_model", error.to_string()).with_source(error)
    }
}

/// An inference's own error: input that is not whole rows, or not the tensors the model
/// declares, is the client's (400); anything else (an output that breaks its declaration
/// included) the server's (500).
impl From<BurnError> for ApiError {
    fn from(error: BurnError) -> Self {
        let (status, kind) = match &error {
            BurnError::Input { .. } | BurnError::Tensor { .. } => (StatusCode::BAD_REQUEST, "bad_input"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "inference_failed"),
        };
        Self::new(status, kind, error.to_string()).with_source(error)
    }
}

/// A body that could not be received (its status is the rejection's).
impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        Self::new(rejection.status(), "bad_body", rejection.body_text()).with_source(rejection)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.respond(serde_json::json!({ "error": self.message, "kind": self.kind }))
    }
}

/// The status and kind of a manager error (the table of the module docs).
pub fn classify(error: &ManagerError) -> (StatusCode, &'static str) {
    match error {
        ManagerError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
        ManagerError::InvalidId(_) => (StatusCode::BAD_REQUEST, "invalid_id"),
        ManagerError::CapacityExhausted { .. } => (StatusCode::INSUFFICIENT_STORAGE, "capacity_exhausted"),
        ManagerError::OverLimit { .. } => (StatusCode::INSUFFICIENT_STORAGE, "over_limit"),
        ManagerError::NoSlotBeside { .. } => (StatusCode::INSUFFICIENT_STORAGE, "no_slot_beside"),
        ManagerError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
        ManagerError::LockTimeout { .. } => (StatusCode::SERVICE_UNAVAILABLE, "lock_timeout"),
        ManagerError::Removing { .. } => (StatusCode::SERVICE_UNAVAILABLE, "removing"),
        ManagerError::ShutDown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "shut_down"),
        ManagerError::Load { source, .. } => load_failure(source),
        ManagerError::Unload { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "unload_failed"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

/// The status and kind of a loader's error: the cache's and the burn adapter's own errors,
/// followed down to the error that caused them.
fn load_failure(source: &SourceError) -> (StatusCode, &'static str) {
    if let Some(error) = source.downcast_ref::<CacheError>() {
        cache_failure(error)
    } else if let Some(error) = source.downcast_ref::<BurnError>() {
        burn_failure(error)
    } else if source.downcast_ref::<NotInCatalogue>().is_some() {
        (StatusCode::NOT_FOUND, "unknown_model")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "load_failed")
    }
}

fn cache_failure(error: &CacheError) -> (StatusCode, &'static str) {
    match error {
        CacheError::TooLarge { .. }
        | CacheError::NoRoom { .. }
        | CacheError::DeviceFull { .. }
        | CacheError::OverCap { .. }
        | CacheError::DeviceOverBudget { .. }
        | CacheError::SizeOverflow { .. } => (StatusCode::INSUFFICIENT_STORAGE, "over_budget"),
        CacheError::ShutDown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "shut_down"),
        CacheError::LoadWaitTimeout { .. } | CacheError::DeviceMoveTimeout { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "load_timeout")
        }
        CacheError::InvalidKey { .. } => (StatusCode::BAD_REQUEST, "invalid_id"),
        CacheError::SourceChanged { .. } => (StatusCode::SERVICE_UNAVAILABLE, "model_file_changing"),
        CacheError::Load { source, .. } => load_failure(source),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "load_failed"),
    }
}

fn burn_failure(error: &BurnError) -> (StatusCode, &'static str) {
    match error {
        BurnError::TooLarge { .. } => (StatusCode::INSUFFICIENT_STORAGE, "over_budget"),
        // The catalogue lists the model but its file is gone: the server's fault.
        BurnError::NotFound { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "model_file_missing"),
        BurnError::BadId { .. } => (StatusCode::BAD_REQUEST, "invalid_id"),
        // Rewritten while it was read: a later request reads it again.
        BurnError::Changed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "model_file_changing"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "load_failed"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use resident::{BoxError, Loader, ManagerExt, ModelId, ModelManager};

    use super::*;

    fn id(s: &str) -> ModelId {
        ModelId::new(s).unwrap()
    }

    /// A load error as the manager reports it, with `error` as the loader's.
    fn load_error(error: impl std::error::Error + Send + Sync + 'static) -> ManagerError {
        struct Failing(std::sync::Mutex<Option<BoxError>>);
        struct Never;
        impl resident::Model for Never {
            fn size_bytes(&self) -> u64 {
                0
            }
        }
        impl Loader for Failing {
            type Model = Never;
            fn load(&self, _: &ModelId) -> Result<Never, BoxError> {
                Err(self.0.lock().unwrap().take().unwrap())
            }
        }
        let manager = ModelManager::new(Failing(std::sync::Mutex::new(Some(Box::new(error)))));
        manager.add_model("m", None).unwrap_err()
    }

    #[test]
    fn every_family_of_errors_has_its_status() {
        let waited = Duration::from_secs(1);
        let cases = [
            (ManagerError::NotFound { id: id("m") }, 404),
            (ManagerError::InvalidId(InvalidId::Empty), 400),
            (
                ManagerError::CapacityExhausted {
                    id: id("m"),
                    registered: 1,
                    loading: 0,
                    max_size: 1,
                    waited,
                },
                507,
            ),
            (ManagerError::OverLimit { max_size: 1, held: vec![], loading: 0, waited }, 507),
            (ManagerError::Busy { id: id("m"), leases: 1, waited }, 503),
            (ManagerError::LockTimeout { id: id("m"), waited }, 503),
            (ManagerError::Removing { id: id("m") }, 503),
            (ManagerError::ShutDown { id: id("m") }, 503),
            (load_error(CacheError::TooLarge { key: "m".into(), bytes: 2, cap: 1 }), 507),
            (
                load_error(BurnError::TooLarge { path: "m".into(), bytes: 2, budget: "RAM budget", cap: 1 }),
                507,
            ),
            (load_error(NotInCatalogue { id: "m".into() }), 404),
            (load_error(std::io::Error::other("a loader's own error")), 500),
        ];
        for (error, status) in cases {
            assert_eq!(ApiError::from(error.clone()).status().as_u16(), status, "{error:?}");
        }
    }

    #[test]
    fn an_answer_keeps_the_error_that_caused_it() {
        let api = ApiError::from(ManagerError::NotFound { id: id("m") });
        let source = Error::source(&api).expect("the manager's error");
        assert!(matches!(source.downcast_ref::<ManagerError>(), Some(ManagerError::NotFound { .. })));
        assert_eq!(api.to_string(), format!("404 not_found: {}", api.message()));
        let plain = ApiError::new(StatusCode::NOT_FOUND, "not_found", api.message());
        assert!(Error::source(&plain).is_none());
        assert_eq!(api, plain, "equal answers are equal errors, whatever their sources");
        // The client's text has the model file's path cut; the source keeps it for the operator.
        let path = "/srv/models/x.safetensors";
        let api = ApiError::from(load_error(BurnError::NotFound { path: path.into() }));
        let chain: Vec<String> =
            std::iter::successors(Error::source(&api), |&e| e.source()).map(ToString::to_string).collect();
        assert!(chain.iter().any(|text| text.contains(path)), "{chain:?}");
        assert!(!api.message().contains(path), "{}", api.message());
    }

    #[test]
    fn a_message_is_cut_to_its_bound_on_a_character_boundary() {
        let short = ApiError::bad_request("bad", "short");
        assert_eq!(short.message(), "short");
        // A header of 63 KiB quoted in a message: the answer carries 2 KiB of it.
        let long = ApiError::bad_request("bad", format!("a body of type {:?}", "\u{ff}".repeat(63 * 1024)));
        assert!(long.message().len() <= MAX_MESSAGE + " [cut]".len(), "{}", long.message().len());
        assert!(long.message().ends_with(" [cut]"));
        // Two-byte characters across the bound: cut before the one the bound splits.
        let wide = ApiError::bad_request("bad", "é".repeat(MAX_MESSAGE));
        assert_eq!(wide.message().len(), MAX_MESSAGE + " [cut]".len());
        let odd = ApiError::bad_request("bad", format!("x{}", "é".repeat(MAX_MESSAGE)));
        assert_eq!(odd.message().len(), MAX_MESSAGE - 1 + " [cut]".len());
    }

    #[test]
    fn absolute_paths_are_cut_to_their_file_names() {
        let cut = without_paths;
        assert_eq!(
            cut("model file /srv/models/x.safetensors not found"),
            "model file x.safetensors not found"
        );
        assert_eq!(cut("/a/b: gone, /c/d too"), "b: gone, d too");
        assert_eq!(cut("model `coco/3` is not registered"), "model `coco/3` is not registered");
        assert_eq!(cut("a / b and /root"), "a / b and /root");
        // Whitespace of more than one byte (an id may hold a no-break space) before a word.
        assert_eq!(cut("model a\u{a0}b/c at\u{a0}/srv/m/x.st"), "model a\u{a0}b/c at\u{a0}x.st");
        assert_eq!(cut("\u{2003}/srv/m/y"), "\u{2003}y");
        let error = load_error(BurnError::NotFound { path: "/srv/models/x.safetensors".into() });
        let api = ApiError::from(error);
        assert!(!api.message().contains("/srv"), "{}", api.message());
        assert!(api.message().contains("x.safetensors"), "{}", api.message());
    }
}
