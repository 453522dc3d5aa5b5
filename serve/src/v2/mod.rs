//! The Open Inference Protocol (KServe's V2 protocol, as Triton speaks it), over REST: health,
//! metadata and inference, beside the server's own routes ([`crate::routes`]).
//!
//! | Route | Answer |
//! |---|---|
//! | `GET /v2/health/live` | 200 while the process serves requests |
//! | `GET /v2/health/ready` | 200 until the shutdown begins, then 400 |
//! | `GET /v2` | server metadata: `{"name", "version", "extensions": ["binary_tensor_data", "model_repository"]}` |
//! | `GET /v2/models/{name}[/versions/1]` | model metadata: `{"name", "versions": ["1"], "platform", "inputs", "outputs"}` |
//! | `GET /v2/models/{name}[/versions/1]/ready` | 200 if `name` is served, else 400 |
//! | `POST /v2/models/{name}[/versions/1]/infer` | inference: named tensors in and out |
//!
//! A model is served under its resident id (the name in these paths; `coco/3` included: a
//! path's last `/ready`, `/infer` and `/versions/<v>` are read as the protocol's). resident has
//! no model versions: every model reports one version, `1`; a path naming any other version is
//! answered 404. Models are loaded, replaced and unloaded through the repository extension
//! (`/v2/repository/...`, documented in its module) or the server's own `PUT` and `DELETE
//! /models/{id}`.
//!
//! # Tensors
//! A model takes one tensor `input` of datatype `FP32` and shape `[rows, input width]` (`-1`
//! rows in its metadata: any number) and answers one tensor `output`, `FP32`,
//! `[rows, output width]`. An inference request's `data` is the tensor's elements in row-major
//! order, flat or nested as the shape; the answer's `data` is flat. Another datatype, another
//! input name, a shape that does not match the data or the model, a non-finite element, or a
//! requested output other than `output` are 400s. A non-finite output is a 500, never a `null`.
//!
//! The binary tensor data extension is spoken (`tritonclient.http` sends and asks binary by
//! default): the body is the JSON object followed by the raw little-endian elements, the JSON's
//! length in the `Inference-Header-Content-Length` header and the input's byte count in its
//! `binary_data_size` parameter; the output comes back the same way when asked (its own
//! `binary_data` parameter, else the request's `binary_data_output`).
//!
//! # Errors
//! Every error answers the protocol's error object `{"error": "<text>"}`, with the status the
//! server's own routes give the same failure ([`crate::error`]'s table).

use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use resident::burn::BurnError;
use resident::{InvalidId, Loader, Manager, ManagerError, ManagerExt, ModelId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::app::App;
use crate::error::ApiError;
use crate::model::ServeModel;
use crate::routes::counted;

mod binary;
mod elements;
mod repository;

use elements::Elements;

/// Route labels of `resident_http_requests_total`.
const HEALTH: &str = "GET /v2/health/{live,ready}";
const SERVER: &str = "GET /v2";
const MODEL: &str = "GET /v2/models/{name}";
const INFER: &str = "POST /v2/models/{name}/infer";
const OTHER: &str = "other";

/// The one version every model reports.
const VERSION: &str = "1";
/// The one input and the one output of every model.
const INPUT: &str = "input";
const OUTPUT: &str = "output";
const FP32: &str = "FP32";

/// The protocol's routes over `App<L>`'s state.
pub(crate) fn routes<L>() -> Router<App<L>>
where
    L: Loader,
    L::Model: ServeModel,
{
    Router::new()
        .route("/v2", get(server_metadata).fallback(method_not_allowed))
        .route("/v2/health/live", get(live).fallback(method_not_allowed))
        .route("/v2/health/ready", get(ready::<L>).fallback(method_not_allowed))
        .route("/v2/models/{*rest}", get(get_model::<L>).post(post_model::<L>).fallback(method_not_allowed))
        .merge(repository::routes::<L>())
}

/// An error as the protocol answers it: `{"error": "<text>"}` with the status of
/// [`crate::error`]'s table.
struct V2Error(ApiError);

impl From<ApiError> for V2Error {
    fn from(error: ApiError) -> Self {
        Self(error)
    }
}

impl From<ManagerError> for V2Error {
    fn from(error: ManagerError) -> Self {
        Self(error.into())
    }
}

impl From<InvalidId> for V2Error {
    fn from(error: InvalidId) -> Self {
        Self(error.into())
    }
}

impl From<BurnError> for V2Error {
    fn from(error: BurnError) -> Self {
        Self(error.into())
    }
}

impl IntoResponse for V2Error {
    fn into_response(self) -> Response {
        (self.0.status(), Json(serde_json::json!({ "error": self.0.message() }))).into_response()
    }
}

fn bad(message: impl Into<String>) -> V2Error {
    V2Error(ApiError::bad_request("bad_input", message))
}

fn not_found(message: impl Into<String>) -> V2Error {
    V2Error(ApiError::new(StatusCode::NOT_FOUND, "not_found", message))
}

/// Any other method on a protocol route: 405 with the protocol's error object.
async fn method_not_allowed() -> Response {
    let error = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    );
    answer(OTHER, Err(V2Error(error)))
}

/// A name the protocol's paths can address without ambiguity: none of its segments is
/// `versions`, and its last is neither `ready` nor `infer` (`a/versions/1/infer` would
/// otherwise run `a`).
fn addressable(name: &str) -> Result<(), V2Error> {
    let clash = name.split('/').any(|segment| segment == "versions")
        || name.rsplit('/').next().is_some_and(|last| matches!(last, "ready" | "infer"));
    if clash {
        return Err(bad(format!(
            "{name:?} cannot be addressed in the protocol's paths (a `versions` segment, or a last segment `ready` or `infer`)"
        )));
    }
    Ok(())
}

/// Counts the answer under `route` and returns it.
fn answer(route: &'static str, result: Result<Response, V2Error>) -> Response {
    counted(route, result)
}

// ---- Health and metadata ------------------------------------------------------------------------

async fn live() -> Response {
    answer(HEALTH, Ok(StatusCode::OK.into_response()))
}

async fn ready<L>(State(app): State<App<L>>) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let status = if app.stack().is_shut_down() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    answer(HEALTH, Ok(status.into_response()))
}

async fn server_metadata() -> Response {
    let body = serde_json::json!({
        "name": "resident-serve",
        "version": env!("CARGO_PKG_VERSION"),
        "extensions": ["binary_tensor_data", "model_repository"],
    });
    answer(SERVER, Ok(Json(body).into_response()))
}

/// What a `/v2/models/{*rest}` path names: a model, the version it asked for, and what is after.
#[derive(Debug, PartialEq, Eq)]
struct ModelPath<'a> {
    name: &'a str,
    /// The path's last segment after the name (and version): `ready`, `infer`, or none.
    action: Option<&'a str>,
}

/// Splits `rest` into the model name and the action; a version other than `1` is a 404.
fn model_path(rest: &str) -> Result<ModelPath<'_>, V2Error> {
    let (head, action) = match rest.rsplit_once('/') {
        Some((head, last @ ("ready" | "infer"))) => (head, Some(last)),
        _ => (rest, None),
    };
    let name = match head.rsplit_once("/versions/") {
        Some((name, VERSION)) => name,
        Some((name, version)) => {
            return Err(not_found(format!("model {name:?} has no version {version:?} (only {VERSION:?})")));
        }
        None => head,
    };
    ModelId::validate(name)?;
    Ok(ModelPath { name, action })
}

fn captured(path: Result<Path<String>, PathRejection>) -> Result<String, V2Error> {
    path.map(|Path(rest)| rest).map_err(|rejection| bad(rejection.body_text()))
}

/// One tensor's description in model metadata.
#[derive(Debug, Serialize)]
struct TensorMetadata {
    name: &'static str,
    datatype: &'static str,
    shape: [i64; 2],
}

async fn get_model<L>(State(app): State<App<L>>, path: Result<Path<String>, PathRejection>) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let result = async {
        let rest = captured(path)?;
        let path = model_path(&rest)?;
        match path.action {
            // A probe is no use of the model: it neither touches the LRU order nor leases.
            Some("ready") => {
                let ready = app.stack().contains(path.name);
                Ok(if ready { StatusCode::OK } else { StatusCode::BAD_REQUEST }.into_response())
            }
            Some(action) => Err(not_found(format!("no GET route for {action:?}"))),
            None => {
                // The manager's own lease, under the cache: reading metadata is no use either.
                let name = path.name.to_owned();
                let widths = app
                    .run(Instant::now(), move |stack, _| stack.get_ref().lease(&name).map(|m| m.widths()))
                    .await??;
                Ok(Json(metadata(path.name, widths.0, widths.1)).into_response())
            }
        }
    };
    answer(MODEL, result.await)
}

/// The metadata of a model of these widths.
fn metadata(name: &str, input: usize, output: usize) -> Value {
    let tensor = |name, width: usize| TensorMetadata {
        name,
        datatype: FP32,
        shape: [-1, i64::try_from(width).unwrap_or(i64::MAX)],
    };
    serde_json::json!({
        "name": name,
        "versions": [VERSION],
        "platform": "resident_burn",
        "inputs": [tensor(INPUT, input)],
        "outputs": [tensor(OUTPUT, output)],
    })
}

// ---- Inference ----------------------------------------------------------------------------------

/// An inference request (the protocol's "Inference Request JSON Object"; of its parameters,
/// and its tensors', only the binary data extension's are read).
#[derive(Debug, Deserialize)]
struct InferRequest {
    id: Option<String>,
    parameters: Option<Map<String, Value>>,
    inputs: Vec<InputTensor>,
    outputs: Option<Vec<RequestedOutput>>,
}

/// One input tensor of a request: its elements in `data`, or (the binary data extension) in
/// the body after the JSON, `binary_data_size` bytes of them.
#[derive(Debug, Deserialize)]
struct InputTensor {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    parameters: Option<Map<String, Value>>,
    data: Option<Elements>,
}

/// One output a request asks for (`binary_data`: in binary after the JSON).
#[derive(Debug, Deserialize)]
struct RequestedOutput {
    name: String,
    parameters: Option<Map<String, Value>>,
}

impl InferRequest {
    /// Whether the output is asked for in binary: its own `binary_data` parameter, else the
    /// request's `binary_data_output` (JSON by default).
    fn binary_output(&self) -> bool {
        let own =
            self.outputs.iter().flatten().find_map(|o| binary::flag(o.parameters.as_ref(), "binary_data"));
        own.or_else(|| binary::flag(self.parameters.as_ref(), "binary_data_output")).unwrap_or(false)
    }
}

async fn post_model<L>(
    State(app): State<App<L>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let started = Instant::now();
    let result = async {
        let rest = captured(path)?;
        let path = model_path(&rest)?;
        if path.action != Some("infer") {
            return Err(not_found(format!("no POST route for {rest:?}")));
        }
        let body = body.map_err(|rejection| {
            V2Error(ApiError::new(rejection.status(), "bad_body", rejection.body_text()))
        })?;
        let (json, binary) = binary::split(&headers, body)?;
        let mut request: InferRequest =
            serde_json::from_slice(&json).map_err(|error| bad(error.to_string()))?;
        let (rows, input) = checked_input(&mut request, &binary)?;
        let name = path.name.to_owned();
        let (output, width) = app
            .run(started, move |stack, options| {
                stack.infer_with(&name, options, |model| {
                    let (expected, width) = model.widths();
                    let input = fit(rows, expected, input)?;
                    Ok::<_, V2Error>((model.infer(&input)?, width))
                })
            })
            .await???;
        if let Some(bad_value) = output.iter().find(|v| !v.is_finite()) {
            let text = format!("the model answered a non-finite value ({bad_value})");
            return Err(V2Error(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "inference_failed", text)));
        }
        let binary_output = request.binary_output();
        let mut tensor = serde_json::json!({ "name": OUTPUT, "datatype": FP32, "shape": [rows, width] });
        let raw = if binary_output {
            let raw = binary::bytes(&output);
            tensor["parameters"] = serde_json::json!({ binary::SIZE: raw.len() });
            raw
        } else {
            tensor["data"] = output.into();
            Vec::new()
        };
        let mut body =
            serde_json::json!({ "model_name": path.name, "model_version": VERSION, "outputs": [tensor] });
        if let Some(id) = request.id {
            body["id"] = id.into();
        }
        Ok(if binary_output { binary::respond(&body, &raw) } else { Json(body).into_response() })
    };
    answer(INFER, result.await)
}

/// The request's one input, checked against the protocol (name, datatype, shape against the
/// data, finite elements; its data in JSON or all of `binary`) and its requested outputs: its
/// rows and its elements, flat.
fn checked_input(request: &mut InferRequest, binary: &[u8]) -> Result<(usize, Vec<f32>), V2Error> {
    if let Some(wrong) = request.outputs.iter().flatten().find(|o| o.name != OUTPUT) {
        return Err(bad(format!("unknown output {:?}: the model answers {OUTPUT:?}", wrong.name)));
    }
    let count = request.inputs.len();
    let [tensor] = request.inputs.as_mut_slice() else {
        return Err(bad(format!("expected one input, {INPUT:?}, got {count}")));
    };
    if tensor.name != INPUT {
        return Err(bad(format!("unknown input {:?}: the model takes {INPUT:?}", tensor.name)));
    }
    if tensor.datatype != FP32 {
        return Err(bad(format!(
            "input {INPUT:?} has datatype {:?}; the model takes {FP32}",
            tensor.datatype
        )));
    }
    let &[rows, _] = tensor.shape.as_slice() else {
        return Err(bad(format!(
            "input {INPUT:?} has shape {:?}; the model takes [rows, width]",
            tensor.shape
        )));
    };
    let data = match (binary::size(tensor.parameters.as_ref())?, tensor.data.take()) {
        (Some(size), None) if size == binary.len() => binary::floats(binary)?,
        (Some(size), None) => {
            return Err(bad(format!("{INPUT:?} has {} of {size} bytes after the JSON", binary.len())));
        }
        (None, Some(Elements(data))) if binary.is_empty() => data,
        (None, None) => return Err(bad(format!("input {INPUT:?} has no data"))),
        _ => return Err(bad(format!("input {INPUT:?} has its data in JSON and in binary"))),
    };
    let elements = tensor.shape.iter().try_fold(1_i64, |n, d| n.checked_mul(*d).filter(|_| *d >= 0));
    if elements.and_then(|n| usize::try_from(n).ok()) != Some(data.len()) {
        return Err(bad(format!("input {INPUT:?} has shape {:?} but {} elements", tensor.shape, data.len())));
    }
    let rows = usize::try_from(rows).map_err(|_| bad("a negative row count"))?;
    Ok((rows, data))
}

/// The input, if its rows are the model's `width` wide.
fn fit(rows: usize, width: usize, input: Vec<f32>) -> Result<Vec<f32>, V2Error> {
    if rows.checked_mul(width) != Some(input.len()) {
        return Err(bad(format!(
            "the model takes rows of {width} values; got shape [{rows}, {}]",
            input.len() / rows.max(1)
        )));
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_a_model_a_version_and_an_action() {
        let path = |rest| model_path(rest).map_err(|e| e.0.status());
        assert_eq!(path("mlp"), Ok(ModelPath { name: "mlp", action: None }));
        assert_eq!(path("coco/3/ready"), Ok(ModelPath { name: "coco/3", action: Some("ready") }));
        assert_eq!(path("coco/3/versions/1/infer"), Ok(ModelPath { name: "coco/3", action: Some("infer") }));
        assert_eq!(path("mlp/versions/1"), Ok(ModelPath { name: "mlp", action: None }));
        assert_eq!(path("mlp/versions/2/infer"), Err(StatusCode::NOT_FOUND));
        assert_eq!(path("../etc/infer"), Err(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn names_the_paths_would_misread_cannot_be_loaded() {
        for clash in ["a/versions/1", "versions", "a/ready", "infer"] {
            assert!(addressable(clash).is_err(), "{clash}");
        }
        for fine in ["mlp", "coco/3", "ready-made", "a/inference"] {
            assert!(addressable(fine).is_ok(), "{fine}");
        }
    }
}
