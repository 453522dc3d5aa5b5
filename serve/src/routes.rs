//! The HTTP routes.
//!
//! | Route | Resident call | Answer |
//! |---|---|---|
//! | `PUT /models/{id}` | [`ManagerExt::replace`] (or [`ManagerExt::add_model_with`] with `"replace": false`) | 201 `loaded`, 200 `replaced` / `present` |
//! | `DELETE /models/{id}` | [`ManagerExt::remove_with`] | 204, no body |
//! | `GET /models` | [`Manager::ids`] | 200 `{"models": [ids]}` |
//! | `POST /models/{id}/infer` | [`ManagerExt::infer_with`] | 200 `{"output": [f32]}` |
//! | `POST /models/{id}/pin`, `/unpin` | [`ManagerExt::pin_with`], [`ManagerExt::unpin_with`] | 204, no body |
//! | `GET /metrics` | | 200, Prometheus text |
//!
//! An id may contain `/` (`coco/3`); it is percent-decoded, then validated by resident
//! ([`ModelId`]: no control, invisible or bidirectional formatting characters, no `.`, `..` or
//! empty segments) before anything else. An id the server is asked to serve must also be one the
//! Open Inference Protocol's paths can address (no `versions` segment, no last segment `ready`
//! or `infer`). A body must be a JSON object (`Content-Type: application/json`, or none). Errors answer `{"error": "<text>", "kind": "<kind>"}`
//! with the status of [`crate::error`]'s table; an unknown route or method answers 404 or 405
//! the same way.
//!
//! # `PUT /models/{id}`
//! Makes `id` serve the catalogue model `source`. The body is optional:
//! `{"source": "<catalogue id>", "replace": true}`. `source` defaults to `id` (the model file
//! `<id>.safetensors`); another source makes `id` an alias of it (resident's `alias`). The
//! source must be in the catalogue (else 404 `unknown_model`), and an alias may not take a
//! catalogue model's name (409 `catalogue_name`). The answer's `source` is what `id` serves
//! once the call is done (for `present`, the source served already, whatever the body asked).
//!
//! - `"replace": true` (the default): an atomic replacement ([`ManagerExt::replace`]): the new
//!   version is loaded beside the one served, if any, and switched in, so no request sees the
//!   id missing. 201 `{"id", "source", "status": "loaded"}` if nothing was served under `id`,
//!   else 200 `"status": "replaced"` (with a `"warning"` if the old version's leases outlived
//!   the drain and it was detached rather than unloaded). Every such PUT loads.
//! - `"replace": false`: add if absent ([`ManagerExt::add_model_with`]): 201 `"loaded"` if this
//!   request loaded the model, 200 `"present"` if it was already served (nothing loaded).
//!   Concurrent PUTs of one new id load it once: one answers 201, the others wait for that
//!   load and answer 200 `present`.
//!
//! # `DELETE /models/{id}`
//! Refuses new inferences on `id` at once (503 `removing`), waits for those in flight (within
//! the request timeout), unloads the model and answers 204 with no body; 503 `busy` if they
//! outlived the timeout (the model then stays served), 404 if nothing is served under `id`.
//!
//! # `POST /models/{id}/pin` and `/unpin`
//! A pinned id's model is never evicted to make room for another (the LRU and the RAM budget
//! pass it by); pinning an id that is not served is a 404. Unpinning makes it evictable again.
//! Both answer 204. With a control token set ([`crate::auth`]), both need it, as `PUT` and
//! `DELETE` do.
//!
//! # `POST /models/{id}/infer`
//! Body `{"input": [f32, ...]}`: whole rows of the model's input width. Runs them under a lease
//! (the model cannot be unloaded meanwhile) and answers `{"output": [f32, ...]}`, the output
//! rows, flat. Input that is not whole rows, or holds a value past `f32`'s range (`1e39`), is
//! 400 `bad_input`; a model that answers a non-finite value is 500 `inference_failed` (never a
//! `null` in the output).

use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, put};
use resident::{Added, Loader, Manager, ManagerError, ManagerExt, ModelId, Replaced};
use serde::de::DeserializeOwned;

use crate::app::App;
use crate::auth::Caller;
use crate::catalogue::NotInCatalogue;
use crate::error::ApiError;
use crate::forward::cancellation;
use crate::model::ServeModel;
use crate::queue::About;
use crate::telemetry::count_request;
use crate::v2::elements::{self, Elements, Refused};

/// Route labels of `resident_http_requests_total`.
const LIST: &str = "GET /models";
const PUT: &str = "PUT /models/{id}";
const DELETE: &str = "DELETE /models/{id}";
const INFER: &str = "POST /models/{id}/infer";
const PIN: &str = "POST /models/{id}/{pin,unpin}";
const METRICS: &str = "GET /metrics";
const OTHER: &str = "other";

/// The server's routes over `app`.
pub fn router<L>(app: App<L>) -> Router
where
    L: Loader,
    L::Model: ServeModel,
{
    let model: MethodRouter<App<L>> = put(put_model::<L>).delete(delete_model::<L>).post(post_model::<L>);
    let routes = Router::new()
        .route("/models", get(list_models::<L>).fallback(method_not_allowed))
        .route("/models/{*id}", model.fallback(method_not_allowed))
        .route("/metrics", get(metrics::<L>).fallback(method_not_allowed))
        .merge(crate::v2::routes::<L>())
        .fallback(not_found)
        // The admission reads every body, within its own limit.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::admit::admit::<L>))
        .with_state(app);
    crate::access::logged(routes)
}

/// Counts the answer under `route` and returns it.
fn answer(route: &'static str, result: Result<Response, ApiError>) -> Response {
    counted(route, result)
}

/// Counts the answer under `route` and returns it (an error in whichever body its routes use).
pub(crate) fn counted<E: IntoResponse>(route: &'static str, result: Result<Response, E>) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    count_request(route, response.status());
    response
}

/// The request's body, or its rejection as a JSON error.
fn received(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(ApiError::from)
}

/// The id a `{*id}` capture holds, percent-decoded (invalid UTF-8 is a 400).
fn captured(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(id)| id).map_err(|rejection| {
        ApiError::bad_request("invalid_id", rejection.body_text()).with_source(rejection)
    })
}

/// `body` as a `T`; an empty body is `T::default()`.
fn json_body<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    small_body(body)?;
    json_required(body)
}

/// The largest body a control route (a load, an unload, a `PUT`) parses: its JSON is a few
/// fields, and a larger document could decode into many times its size.
pub const MAX_CONTROL_BODY_BYTES: usize = 64 * 1024;

/// Refuses a control route's body over [`MAX_CONTROL_BODY_BYTES`] (413) before it is parsed.
pub(crate) fn small_body(body: &[u8]) -> Result<(), ApiError> {
    if body.len() > MAX_CONTROL_BODY_BYTES {
        let text = format!("a control body of {} bytes; at most {MAX_CONTROL_BODY_BYTES}", body.len());
        return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", text));
    }
    Ok(())
}

fn json_required<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    json_object(body)
}

/// The longest string a JSON body may hold, in bytes as sent (escapes included). Every string
/// the server reads is a name or an id of at most 256 bytes; others (parameters it does not
/// know) are skipped. A long string where serde expects a number or an array would be quoted
/// whole, escaped (up to six bytes for two), in serde's error: memory the request's charge
/// does not cover.
pub(crate) const MAX_JSON_STRING: usize = 64 * 1024;

/// The length of the first string token of `body` longer than `max` bytes (as sent), if any.
/// One pass, no allocation; a body that is not JSON is serde's to refuse.
fn overlong_string(body: &[u8], max: usize) -> Option<usize> {
    let (mut inside, mut escaped, mut length) = (false, false, 0_usize);
    for &byte in body {
        if !inside {
            inside = byte == b'"';
            length = 0;
            continue;
        }
        if escaped {
            escaped = false;
        } else if byte == b'\\' {
            escaped = true;
        } else if byte == b'"' {
            inside = false;
            continue;
        }
        length += 1;
        if length > max {
            return Some(length);
        }
    }
    None
}

/// `body` as a `T`, if it is a JSON object: serde would read a struct from an array of its
/// fields' values too (`["mlp", true]`), which no route takes. A string longer than
/// [`MAX_JSON_STRING`] is refused before serde reads the body.
pub(crate) fn json_object<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(ApiError::bad_request("bad_json", "the body must be a JSON object"));
    }
    if overlong_string(body, MAX_JSON_STRING).is_some() {
        let text = format!("a JSON string of more than {MAX_JSON_STRING} bytes");
        return Err(ApiError::bad_request("bad_json", text));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request("bad_json", error.to_string()).with_source(error))
}

async fn list_models<L>(State(app): State<App<L>>) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let result = app.run(Instant::now(), About::Server, |stack, _| stack.ids()).await.map(|ids| {
        let models: Vec<String> = ids.iter().map(ToString::to_string).collect();
        Json(serde_json::json!({ "models": models })).into_response()
    });
    answer(LIST, result)
}

/// The optional body of `PUT /models/{id}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    /// The catalogue model to serve under the id; the id itself if absent.
    source: Option<String>,
    /// Replace what is served under the id (true), or only add it if absent (false).
    #[serde(default = "yes")]
    replace: bool,
}

fn yes() -> bool {
    true
}

impl Default for PutBody {
    fn default() -> Self {
        Self { source: None, replace: true }
    }
}

async fn put_model<L>(
    State(app): State<App<L>>,
    path: Result<Path<String>, PathRejection>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let started = Instant::now();
    let result = match (caller.admitted(app.config()), received(body)) {
        (Err(refused), _) => Err(refused.into()),
        (Ok(()), Ok(body)) => load_or_replace(&app, started, path, &body).await,
        (Ok(()), Err(error)) => Err(error),
    };
    answer(PUT, result)
}

async fn load_or_replace<L>(
    app: &App<L>,
    started: Instant,
    path: Result<Path<String>, PathRejection>,
    body: &[u8],
) -> Result<Response, ApiError>
where
    L: Loader,
    L::Model: ServeModel,
{
    let id = captured(path)?;
    let request: PutBody = json_body(body)?;
    let served = serve_under(app, started, id, request.source, request.replace).await?;
    let status = if served.loaded { StatusCode::CREATED } else { StatusCode::OK };
    let mut body = serde_json::json!({ "id": served.id, "source": served.source, "status": served.status });
    if let Some(warning) = served.warning {
        body["warning"] = warning.into();
    }
    Ok((status, Json(body)).into_response())
}

/// What serving a catalogue model under an id did.
pub(crate) struct ServedUnder {
    pub(crate) id: String,
    pub(crate) source: String,
    /// This call loaded a model that nothing was served under `id` before.
    pub(crate) loaded: bool,
    /// `loaded`, `replaced` or `present`.
    pub(crate) status: &'static str,
    /// The old version's leases outlived the drain: it was detached, not unloaded.
    pub(crate) warning: Option<String>,
}

/// Makes `id` serve the catalogue model `source` (`id` itself if `None`): an atomic replace
/// ([`ManagerExt::replace_with`]), or with `replace: false` an add if absent
/// ([`ManagerExt::add_model_with`]).
pub(crate) async fn serve_under<L>(
    app: &App<L>,
    started: Instant,
    id: String,
    source: Option<String>,
    replace: bool,
) -> Result<ServedUnder, ApiError>
where
    L: Loader,
    L::Model: ServeModel,
{
    ModelId::validate(&id)?;
    crate::v2::addressable(&id)?;
    let source = source.unwrap_or_else(|| id.clone());
    ModelId::validate(&source)?;
    if !app.catalogue().contains(&source) {
        return Err(NotInCatalogue { id: source }.into());
    }
    if source != id && app.catalogue().contains(&id) {
        let text = format!("{id:?} is a catalogue model's name: an alias of {source:?} cannot take it");
        return Err(ApiError::new(StatusCode::CONFLICT, "catalogue_name", text));
    }
    let alias = (source != id).then(|| id.clone());
    let call_source = source.clone();
    let call_id = id.clone();
    let (outcome, served_source) = app
        .run(started, About::Control, move |stack, options| {
            let outcome = if replace {
                stack.replace_with(&call_source, alias.as_deref(), options).map(Outcome::Replaced)
            } else {
                stack.add_model_with(&call_source, alias.as_deref(), options).map(Outcome::Added)
            }?;
            // What `id` serves now: a `present` answer names the source already served.
            let lease = stack.peek_until(&call_id, options.deadline(stack.runtime()));
            let served = lease.ok().and_then(|model| model.source().map(str::to_owned));
            Ok::<_, ApiError>((outcome, served.unwrap_or(call_source)))
        })
        .await??;
    let served = |loaded, status, warning| ServedUnder { id, source: served_source, loaded, status, warning };
    Ok(match outcome {
        Outcome::Replaced(Replaced::Added) => served(true, "loaded", None),
        Outcome::Replaced(Replaced::Unloaded) => served(false, "replaced", None),
        Outcome::Replaced(Replaced::Detached(error)) => served(false, "replaced", Some(error.to_string())),
        Outcome::Added(Added::Loaded) => served(true, "loaded", None),
        Outcome::Added(Added::Warm) => served(false, "present", None),
    })
}

/// What the stack's call did.
enum Outcome {
    Replaced(Replaced),
    Added(Added),
}

async fn delete_model<L>(
    State(app): State<App<L>>,
    path: Result<Path<String>, PathRejection>,
    caller: Caller,
) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let started = Instant::now();
    let result = async {
        caller.admitted(app.config())?;
        let id = captured(path)?;
        ModelId::validate(&id)?;
        app.unserve(started, id).await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    };
    answer(DELETE, result.await)
}

/// The body of `POST /models/{id}/infer`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InferBody {
    input: Elements,
}

/// The answer of `POST /models/{id}/infer`.
#[derive(Debug, serde::Serialize)]
struct InferAnswer<'a> {
    output: &'a [f32],
}

/// `answer` as JSON, of `elements` floats and a few fields, written once into a buffer of its
/// final size (a finite f32 takes at most fifteen characters and a comma), never through a JSON
/// value per element.
pub(crate) fn json_bytes(answer: &impl serde::Serialize, elements: usize) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::with_capacity(elements.saturating_mul(16).saturating_add(512));
    serde_json::to_writer(&mut body, answer).map_err(|error| {
        let text = format!("cannot write the answer: {error}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", text)
    })?;
    // The answer's charge, once its handler is done, is its length (`admit::kept_for`): the
    // buffer must hold no more (`0.0,` takes 4 of the 16 bytes an element was given).
    body.shrink_to_fit();
    Ok(body)
}

/// [`json_bytes`] as a JSON answer.
pub(crate) fn json_answer(answer: &impl serde::Serialize, elements: usize) -> Result<Response, ApiError> {
    let body = json_bytes(answer, elements)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `POST /models/{*rest}`: `{id}/infer` runs the model; anything else is 405.
async fn post_model<L>(
    State(app): State<App<L>>,
    path: Result<Path<String>, PathRejection>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let started = Instant::now();
    let (_cancel_on_drop, cancelled) = cancellation();
    let rest = match captured(path) {
        Ok(rest) => rest,
        Err(error) => return answer(INFER, Err(error)),
    };
    for (suffix, pin) in [("/pin", true), ("/unpin", false)] {
        if let Some(id) = rest.strip_suffix(suffix) {
            let result = match caller.admitted(app.config()) {
                Ok(()) => pinned(&app, started, id.to_owned(), pin).await,
                Err(refused) => Err(refused.into()),
            };
            return answer(PIN, result);
        }
    }
    let Some(id) = rest.strip_suffix("/infer").map(str::to_owned) else {
        return answer(OTHER, Ok(method_not_allowed_response()));
    };
    let result = async {
        ModelId::validate(&id)?;
        let body = received(body)?;
        let pass = app.pass(started, cancelled);
        let model = id.clone();
        // Decoding, the forward pass and encoding all run on the blocking pool.
        app.run(started, About::Model(&model), move |stack, options| {
            // At most the element cap decoded, however long the body; JSON has no infinities,
            // but a number past `f32::MAX` (`1e39`) would parse as one: refused as bad input.
            let (parsed, refused) = elements::capped(pass.max_elements, || json_required::<InferBody>(&body));
            let Elements(input, _) = parsed.map_err(|error| refused.map_or(error, Refused::error))?.input;
            drop(body);
            // Input the model cannot take is refused before the call counts as a use of the
            // model (an LRU touch): checked through a look that is no use of it.
            pass.fits(&*stack.peek_until(&id, options.deadline(stack.runtime()))?, &input)?;
            let output = stack.infer_with(&id, options, |model| pass.run(model, &input))??;
            drop(input);
            json_answer(&InferAnswer { output: &output }, output.len())
        })
        .await?
    };
    answer(INFER, result.await)
}

/// Pins `id` (its model is never evicted to make room, `true`) or unpins it: 204.
async fn pinned<L>(app: &App<L>, started: Instant, id: String, pin: bool) -> Result<Response, ApiError>
where
    L: Loader,
    L::Model: ServeModel,
{
    ModelId::validate(&id)?;
    app.run(started, About::Control, move |stack, options| {
        let id = ModelId::new(&id)?;
        let guard = stack.lock_until(&id, options.deadline(stack.runtime()))?;
        // Only a served id is pinned over HTTP: pins of ids never served would pile up. Checked
        // under the id's lock, which a removal takes too: a pin racing a `DELETE` either finds
        // the model or pins nothing (the `DELETE` lifts a pin it finds, under the same lock).
        if pin && !stack.contains(&id) {
            return Err(ManagerError::NotFound { id });
        }
        if pin { stack.pin_locked(&guard) } else { stack.unpin_locked(&guard) }
    })
    .await??;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn metrics<L>(State(app): State<App<L>>) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    // Gauges are read off the stack and the budget when scraped (resident::metrics).
    resident::metrics::record_models(app.stack(), crate::catalogue::DEVICE);
    resident::metrics::record_budget(app.group().budget());
    metrics::gauge!("resident_http_connections").set(*app.connections().borrow() as f64);
    metrics::gauge!("resident_http_calls_in_flight").set(app.calls_in_flight() as f64);
    metrics::gauge!("resident_http_inflight_bytes_available").set(app.in_flight_available() as f64);
    let text = app.metrics().render();
    answer(METRICS, Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()))
}

fn method_not_allowed_response() -> Response {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this route")
        .into_response()
}

async fn method_not_allowed() -> Response {
    answer(OTHER, Ok(method_not_allowed_response()))
}

async fn not_found(method: Method, uri: Uri) -> Response {
    let error =
        ApiError::new(StatusCode::NOT_FOUND, "no_route", format!("no route for {method} {}", uri.path()));
    answer(OTHER, Err(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any body of the server's own routes: its request or a 400 — never a panic.
        #[test]
        fn any_body_is_a_request_or_a_bad_request(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
            text in r#"[\[\]{}",:0-9.e\-a-z ]{0,64}"#,
        ) {
            for body in [body.as_slice(), text.as_bytes()] {
                if let Err(error) = json_required::<InferBody>(body) {
                    proptest::prop_assert_eq!(error.status(), StatusCode::BAD_REQUEST);
                }
                match json_body::<PutBody>(body) {
                    Err(error) => proptest::prop_assert!(error.status().is_client_error()),
                    Ok(_) => proptest::prop_assert!(body.len() <= MAX_CONTROL_BODY_BYTES),
                }
            }
        }
    }

    #[test]
    fn a_long_string_is_refused_before_serde_quotes_it() {
        // C1 controls: two bytes each as sent, six in serde's `Debug`-escaped quote.
        let long = "\u{85}".repeat(MAX_JSON_STRING);
        let body = format!(r#"{{"input": "{long}"}}"#);
        let error = json_required::<InferBody>(body.as_bytes()).expect_err("a string past the limit");
        assert_eq!(error.status(), StatusCode::BAD_REQUEST);
        assert!(error.to_string().contains("a JSON string of more than"), "{error}");
        // Escapes count as sent; an escaped quote does not end the string.
        let escaped = format!(r#"{{"input": [1.0], "note": "{}\"{}"}}"#, "a".repeat(10), "b".repeat(10));
        assert_eq!(overlong_string(escaped.as_bytes(), 22), None);
        assert_eq!(overlong_string(escaped.as_bytes(), 21), Some(22));
        let fine = format!(r#"{{"note": "{}"}}"#, "a".repeat(MAX_JSON_STRING));
        assert!(json_object::<serde_json::Value>(fine.as_bytes()).is_ok(), "a string at the limit is read");
    }

    #[test]
    fn only_objects_are_bodies() {
        assert!(json_required::<InferBody>(b"[[1.0]]").is_err(), "an array of the fields' values");
        assert!(json_body::<PutBody>(br#"["mlp", true]"#).is_err());
        assert!(json_body::<PutBody>(b"  ").is_ok(), "an empty body is the default");
        assert!(json_body::<PutBody>(br#" {"source": "mlp"}"#).is_ok());
    }
}
