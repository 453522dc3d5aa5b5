//! The protocol's model repository extension (Triton's explicit model control), over the
//! server's catalogue: the repository's models are the catalogue's, plus the ids served under
//! another source (aliases).
//!
//! | Route | Resident call | Answer |
//! |---|---|---|
//! | `POST /v2/repository/index` | [`Manager::ids`] | `[{"name", "version": "1", "state": "READY" \| "UNAVAILABLE", "reason"}]`; body `{"ready": true}`: the served ones only |
//! | `POST /v2/repository/models/{name}/load` | [`ManagerExt::replace_with`] | 200: `name` serves its source, loaded beside the version served (if any) and switched in atomically |
//! | `POST /v2/repository/models/{name}/unload` | [`ManagerExt::remove_with`] | 200 once the requests in flight drained and the model is unloaded |
//!
//! A load's source is `name` itself, or (a resident extension) the catalogue model named by the
//! request's `source` parameter, or by the `source` field of its `config` parameter (a JSON
//! object, as `tritonclient`'s `load_model(name, config=...)` sends it): `name` is then an alias
//! of it. A refusal is the protocol's error object with the status of [`crate::error`]'s table:
//! 404 for a model the catalogue does not list or an unload of one not served, 507 when the RAM
//! budget or `max_models` refuses the load (the budget's own text), 503 while the model drains.

use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use resident::{Loader, Manager};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{V2Error, VERSION, answer, bad, bad_from, captured, method_not_allowed, not_found};
use crate::app::App;
use crate::error::ApiError;
use crate::model::ServeModel;
use crate::routes::serve_under;

/// Route labels of `resident_http_requests_total`.
const INDEX: &str = "POST /v2/repository/index";
const CONTROL: &str = "POST /v2/repository/models/{name}/{load,unload}";

/// The repository extension's routes over `App<L>`'s state.
pub(super) fn routes<L>() -> Router<App<L>>
where
    L: Loader,
    L::Model: ServeModel,
{
    Router::new()
        .route("/v2/repository/index", post(index::<L>).fallback(method_not_allowed("POST")))
        .route("/v2/repository/models/{*rest}", post(control::<L>).fallback(method_not_allowed("POST")))
}

/// The optional body of the index.
#[derive(Debug, Default, Deserialize)]
struct IndexRequest {
    #[serde(default)]
    ready: bool,
}

/// The optional body of a load or an unload.
#[derive(Debug, Default, Deserialize)]
struct ControlRequest {
    parameters: Option<Map<String, Value>>,
}

/// `body` as a `T`: an empty body is `T::default()`, anything but a JSON object a 400.
fn optional<T: Default + for<'de> Deserialize<'de>>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, V2Error> {
    let body = body.map_err(|rejection| V2Error(rejection.into()))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    crate::routes::small_body(&body)?;
    Ok(crate::routes::json_object(&body)?)
}

async fn index<L>(State(app): State<App<L>>, body: Result<Bytes, BytesRejection>) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let result = async {
        let request: IndexRequest = optional(body)?;
        let served = app.run(Instant::now(), crate::queue::About::Server, |stack, _| stack.ids()).await?;
        let served: Vec<String> = served.iter().map(ToString::to_string).collect();
        let mut names: Vec<String> = app.catalogue().ids().map(str::to_owned).collect();
        names.extend(served.iter().cloned());
        names.sort();
        names.dedup();
        let entries: Vec<Value> = names
            .into_iter()
            .map(|name| (served.contains(&name), name))
            .filter(|(ready, _)| *ready || !request.ready)
            .map(|(ready, name)| {
                let (state, reason) = if ready { ("READY", "") } else { ("UNAVAILABLE", "unloaded") };
                serde_json::json!({ "name": name, "version": VERSION, "state": state, "reason": reason })
            })
            .collect();
        Ok(Json(entries).into_response())
    };
    answer(INDEX, result.await)
}

async fn control<L>(
    State(app): State<App<L>>,
    path: Result<Path<String>, PathRejection>,
    caller: crate::auth::Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let started = Instant::now();
    let result = async {
        let rest = captured(path)?;
        if rest.ends_with("/load") || rest.ends_with("/unload") {
            caller.admitted(app.config()).map_err(ApiError::from)?;
        }
        if let Some(name) = rest.strip_suffix("/load") {
            let request: ControlRequest = optional(body)?;
            let source = source(request.parameters.as_ref())?;
            serve_under(&app, started, name.to_owned(), source, true).await?;
        } else if let Some(name) = rest.strip_suffix("/unload") {
            let _: ControlRequest = optional(body)?;
            app.unserve(started, name.to_owned()).await?;
        } else {
            return Err(not_found(format!("no repository route for {rest:?}")));
        }
        Ok(StatusCode::OK.into_response())
    };
    answer(CONTROL, result.await)
}

/// The catalogue model a load names: its `source` parameter, else its `config` parameter's
/// `source` field; `None`: the loaded name itself.
fn source(parameters: Option<&Map<String, Value>>) -> Result<Option<String>, V2Error> {
    let Some(parameters) = parameters else { return Ok(None) };
    // tritonclient's `load_model(files=...)`: the server loads its catalogue, never uploads.
    if let Some(file) = parameters.keys().find(|key| key.starts_with("file:")) {
        return Err(bad(format!("{file:?}: model files cannot be uploaded; the server loads its catalogue")));
    }
    let config = match parameters.get("config") {
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .map_err(|error| bad_from(format!("config is not JSON: {error}"), error))?,
        Some(other) => return Err(bad(format!("config must be a JSON string, got {other}"))),
        None => Value::Null,
    };
    match parameters.get("source").or_else(|| config.get("source")) {
        None => Ok(None),
        Some(Value::String(source)) => Ok(Some(source.clone())),
        Some(other) => Err(bad(format!("source must be a string, got {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_names_its_source_directly_or_in_its_config() {
        let params = |v: Value| v.as_object().cloned();
        let read = |v: Value| source(params(v).as_ref()).map_err(|e| e.0.status());
        assert_eq!(source(None).ok(), Some(None));
        assert_eq!(read(serde_json::json!({ "source": "cnn" })), Ok(Some("cnn".to_owned())));
        assert_eq!(
            read(serde_json::json!({ "config": "{\"source\": \"mlp\"}" })),
            Ok(Some("mlp".to_owned()))
        );
        assert_eq!(read(serde_json::json!({ "config": "{}" })), Ok(None));
        assert_eq!(read(serde_json::json!({ "config": "{" })), Err(StatusCode::BAD_REQUEST));
        assert_eq!(read(serde_json::json!({ "source": 3 })), Err(StatusCode::BAD_REQUEST));
        assert_eq!(read(serde_json::json!({ "file:1/model.onnx": "AAAA" })), Err(StatusCode::BAD_REQUEST));
    }
}
