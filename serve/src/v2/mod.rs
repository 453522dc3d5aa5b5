//! The Open Inference Protocol (KServe's V2 protocol, as Triton speaks it), over REST: health,
//! metadata and inference, beside the server's own routes ([`crate::routes`]).
//!
//! | Route | Answer |
//! |---|---|
//! | `GET /v2/health/live` | 200 while the process serves requests |
//! | `GET /v2/health/ready` | 200 until the shutdown begins, then 400 |
//! | `GET /v2` | server metadata: `{"name", "version", "extensions": ["binary_tensor_data", "model_repository"]}` |
//! | `GET /v2/models/{name}[/versions/1]` | model metadata: `{"name", "versions": ["1"], "platform", "inputs", "outputs", "parameters": {"source"}}` (`source`: the catalogue model it was loaded from) |
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
//! A model's metadata gives the tensors its architecture declares
//! ([`Architecture::inputs`](resident::burn::Architecture::inputs)): names, datatypes and
//! shapes of any rank, `-1` for a dimension of any size (the batch first). The server runs
//! models of one `FP32` input and one `FP32` output: the fixture MLP takes `input` `[-1, 16]`,
//! the fixture CNN images `[-1, 1, 8, 8]`. An inference request's `data` is the tensor's elements
//! in row-major order, flat, nested as the shape (an array per dimension), or an array per
//! leading dimension holding the rest flattened (a batch of rows); ragged data, or data nested
//! otherwise, is refused. The answer's `data` is flat, its shape the
//! declared one with the batch's size. Another datatype, another input name, a shape the data
//! or the declaration does not admit, a non-finite element, or a requested output the model does
//! not declare are 400s. A non-finite output is a 500, never a `null`.
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
use resident::burn::{BurnError, DataType, TensorSpec};
use resident::{InvalidId, Loader, Manager, ManagerError, ManagerExt, ModelId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::forward::cancellation;
use crate::model::ServeModel;
use crate::queue::About;
use crate::routes::counted;

mod binary;
pub(crate) mod elements;
mod repository;

use elements::{Bounded, Elements};

/// Route labels of `resident_http_requests_total`.
const HEALTH: &str = "GET /v2/health/{live,ready}";
const SERVER: &str = "GET /v2";
const MODEL: &str = "GET /v2/models/{name}";
const INFER: &str = "POST /v2/models/{name}/infer";
const OTHER: &str = "other";

/// The one version every model reports.
const VERSION: &str = "1";
/// The datatype the server decodes and encodes.
const FP32: &str = "FP32";

/// The protocol's routes over `App<L>`'s state.
pub(crate) fn routes<L>() -> Router<App<L>>
where
    L: Loader,
    L::Model: ServeModel,
{
    Router::new()
        .route("/v2", get(server_metadata).fallback(method_not_allowed("GET")))
        .route("/v2/health/live", get(live).fallback(method_not_allowed("GET")))
        .route("/v2/health/ready", get(ready::<L>).fallback(method_not_allowed("GET")))
        .route(
            "/v2/models/{*rest}",
            get(get_model::<L>).post(post_model::<L>).fallback(method_not_allowed("GET, POST")),
        )
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
        self.0.respond(serde_json::json!({ "error": self.0.message() }))
    }
}

fn bad(message: impl Into<String>) -> V2Error {
    V2Error(ApiError::bad_request("bad_input", message))
}

/// [`bad`], caused by `source`.
fn bad_from(message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> V2Error {
    V2Error(ApiError::bad_request("bad_input", message).with_source(source))
}

fn not_found(message: impl Into<String>) -> V2Error {
    V2Error(ApiError::new(StatusCode::NOT_FOUND, "not_found", message))
}

/// The handler of any other method on a protocol route that takes `allow`: 405 with the
/// protocol's error object and `Allow: allow`.
fn method_not_allowed(
    allow: &'static str,
) -> impl FnOnce() -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    move || std::future::ready(answer(OTHER, Err(V2Error(ApiError::method_not_allowed(allow)))))
}

/// A name the protocol's paths can address without ambiguity: none of its segments is
/// `versions`, and its last is neither `ready` nor `infer` (`a/versions/1/infer` would
/// otherwise run `a`, and a model `a/infer` could be added but never run). Every id the server
/// is asked to serve, through either family of routes, must be one.
pub(crate) fn addressable(name: &str) -> Result<(), ApiError> {
    let clash = name.split('/').any(|segment| segment == "versions")
        || name.rsplit('/').next().is_some_and(|last| matches!(last, "ready" | "infer"));
    if clash {
        return Err(ApiError::bad_request(
            "invalid_id",
            format!(
                "{name:?} cannot be addressed in the protocol's paths (a `versions` segment, or a last segment `ready` or `infer`)"
            ),
        ));
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
    path.map(|Path(rest)| rest).map_err(|rejection| bad_from(rejection.body_text(), rejection))
}

/// One tensor's description in model metadata.
#[derive(Debug, Serialize)]
struct TensorMetadata {
    name: String,
    datatype: &'static str,
    shape: Vec<i64>,
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
            // The protocol's inference route takes POST only.
            Some("infer") => Err(V2Error(ApiError::method_not_allowed("POST"))),
            Some(action) => Err(not_found(format!("no GET route for {action:?}"))),
            None => {
                // A look that is no use of the model: reading metadata moves no LRU order.
                let name = path.name.to_owned();
                let described = app
                    .run(Instant::now(), About::Model(path.name), move |stack, options| {
                        stack
                            .peek_until(&name, options.deadline(stack.runtime()))
                            .map(|m| (m.inputs(), m.outputs(), m.source().map(str::to_owned)))
                    })
                    .await??;
                let (inputs, outputs, source) = described;
                Ok(Json(metadata(path.name, &inputs, &outputs, source)).into_response())
            }
        }
    };
    answer(MODEL, result.await)
}

/// The metadata of a model of these declared tensors, loaded from `source` (in the metadata's
/// `parameters`, resident's addition: the catalogue model an alias serves).
fn metadata(name: &str, inputs: &[TensorSpec], outputs: &[TensorSpec], source: Option<String>) -> Value {
    let tensors = |specs: &[TensorSpec]| -> Vec<TensorMetadata> {
        specs
            .iter()
            .map(|spec| TensorMetadata {
                name: spec.name.clone(),
                datatype: spec.datatype.protocol_name(),
                shape: spec.shape.clone(),
            })
            .collect()
    };
    serde_json::json!({
        "name": name,
        "versions": [VERSION],
        "platform": "resident_burn",
        "inputs": tensors(inputs),
        "outputs": tensors(outputs),
        "parameters": { "source": source },
    })
}

// ---- Inference ----------------------------------------------------------------------------------

/// The most dimensions of a tensor's shape, and the most input or output tensors of a request.
const MAX_DIMS: usize = 8;
const MAX_TENSORS: usize = 8;

/// The longest name (a tensor's, a datatype) or request id the server reads: it echoes them in
/// answers and errors.
const MAX_NAME: usize = 256;

/// A string of at most [`MAX_NAME`] bytes.
fn short<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.len() > MAX_NAME {
        return Err(serde::de::Error::custom(format!("a name of {} bytes; at most {MAX_NAME}", text.len())));
    }
    Ok(text)
}

/// An optional [`short`] string (`null` is none).
fn short_option<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    if let Some(text) = text.as_ref().filter(|text| text.len() > MAX_NAME) {
        return Err(serde::de::Error::custom(format!("an id of {} bytes; at most {MAX_NAME}", text.len())));
    }
    Ok(text)
}

/// An inference request (the protocol's "Inference Request JSON Object"; of its parameters,
/// and its tensors', only the binary data extension's are read, the others skipped unread).
#[derive(Debug, Deserialize)]
struct InferRequest {
    #[serde(default, deserialize_with = "short_option")]
    id: Option<String>,
    parameters: Option<Parameters>,
    inputs: Bounded<InputTensor, MAX_TENSORS>,
    outputs: Option<Bounded<RequestedOutput, MAX_TENSORS>>,
}

/// The parameters the server reads (of a request, a tensor or a requested output); any other is
/// skipped without being stored.
#[derive(Debug, Default, Deserialize)]
struct Parameters {
    /// A binary input's length in bytes.
    binary_data_size: Option<u64>,
    /// A requested output's: answer it in binary.
    binary_data: Option<bool>,
    /// The request's: answer every output in binary unless it says otherwise.
    binary_data_output: Option<bool>,
}

/// One input tensor of a request: its elements in `data`, or (the binary data extension) in
/// the body after the JSON, `binary_data_size` bytes of them.
#[derive(Debug, Deserialize)]
struct InputTensor {
    #[serde(deserialize_with = "short")]
    name: String,
    shape: Bounded<i64, MAX_DIMS>,
    #[serde(deserialize_with = "short")]
    datatype: String,
    parameters: Option<Parameters>,
    data: Option<Elements>,
}

/// One output a request asks for (`binary_data`: in binary after the JSON).
#[derive(Debug, Deserialize)]
struct RequestedOutput {
    #[serde(deserialize_with = "short")]
    name: String,
    parameters: Option<Parameters>,
}

impl InferRequest {
    /// Whether the output is asked for in binary: its own `binary_data` parameter, else the
    /// request's `binary_data_output` (JSON by default).
    fn binary_output(&self) -> bool {
        let outputs = self.outputs.iter().flat_map(|o| &o.0);
        let own = outputs.filter_map(|o| o.parameters.as_ref()).find_map(|p| p.binary_data);
        own.or_else(|| self.parameters.as_ref().and_then(|p| p.binary_data_output)).unwrap_or(false)
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
    let (_cancel_on_drop, cancelled) = cancellation();
    let result = async {
        let rest = captured(path)?;
        let path = model_path(&rest)?;
        match path.action {
            Some("infer") => {}
            // A model's metadata and readiness take GET only.
            None | Some("ready") => return Err(V2Error(ApiError::method_not_allowed("GET"))),
            Some(_) => return Err(not_found(format!("no POST route for {rest:?}"))),
        }
        let body = body.map_err(|rejection| V2Error(rejection.into()))?;
        let pass = app.pass(started, cancelled);
        let name = path.name.to_owned();
        // Decoding, the forward pass and encoding all run on the blocking pool.
        app.run(started, About::Model(path.name), move |stack, options| {
            let (request, input) = decoded(&headers, body, pass.max_elements)?;
            // A request the model cannot take is refused before the call counts as a use of
            // the model (an LRU touch): checked through a look that is no use of it.
            let model = stack.peek_until(&name, options.deadline(stack.runtime()))?;
            fit(&request, &input, &model.inputs(), &model.outputs())?;
            pass.fits(&*model, &input.data)?;
            drop(model);
            let (output, spec) = stack.infer_with(&name, options, |model| {
                let spec = fit(&request, &input, &model.inputs(), &model.outputs())?;
                Ok::<_, V2Error>((pass.run(model, &input.data)?, spec))
            })??;
            Ok(encoded(&request, &name, &spec, input.shape[0], &output))
        })
        .await?
    };
    answer(INFER, result.await)
}

/// A request's input tensor: its name, its shape, its elements (flat, row-major).
#[derive(Debug)]
struct Input {
    name: String,
    shape: Vec<usize>,
    data: Vec<f32>,
}

/// The request a body holds, with its input.
fn decoded(headers: &HeaderMap, body: Bytes, max_elements: u64) -> Result<(InferRequest, Input), V2Error> {
    let (json, binary) = binary::split(headers, body)?;
    let (parsed, refused) =
        elements::capped(max_elements, || crate::routes::json_object::<InferRequest>(&json));
    let mut request = parsed.map_err(|error| refused.map_or(error, elements::Refused::error))?;
    drop(json);
    let input = checked_input(&mut request, &binary, max_elements)?;
    Ok((request, input))
}

/// The protocol's "Inference Response JSON Object", with the one output tensor.
#[derive(Debug, Serialize)]
struct InferResponse<'a> {
    model_name: &'a str,
    model_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    outputs: [OutputTensor<'a>; 1],
}

/// The output tensor: its elements in `data`, or (binary) their length in `parameters`.
#[derive(Debug, Serialize)]
struct OutputTensor<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a [f32]>,
}

/// The answer to `request`: the output tensor, in JSON or (asked for) in binary after it; either
/// body written once into a buffer of its final size.
fn encoded(request: &InferRequest, name: &str, spec: &TensorSpec, rows: usize, output: &[f32]) -> Response {
    let binary_output = request.binary_output();
    // The declared shape, with the batch's size first (the declaration checked its other sizes).
    let mut shape = vec![rows];
    shape.extend(spec.shape.iter().skip(1).map(|&d| usize::try_from(d).unwrap_or(0)));
    let tensor = OutputTensor {
        name: &spec.name,
        datatype: spec.datatype.protocol_name(),
        shape,
        parameters: binary_output.then(|| serde_json::json!({ binary::SIZE: output.len() * 4 })),
        data: (!binary_output).then_some(output),
    };
    let answer = InferResponse {
        model_name: name,
        model_version: VERSION,
        id: request.id.as_deref(),
        outputs: [tensor],
    };
    let answered = if binary_output {
        // The head is a few fields: its floats follow it in binary.
        crate::routes::json_bytes(&answer, 0).map(|head| binary::respond(&head, output))
    } else {
        crate::routes::json_answer(&answer, output.len())
    };
    answered.unwrap_or_else(|error| V2Error(error).into_response())
}

/// The request's one input, checked against the protocol (a datatype the server decodes, a
/// shape against the data, finite elements, at most `max_elements` of them; its data in JSON or
/// all of `binary`).
fn checked_input(request: &mut InferRequest, binary: &[u8], max_elements: u64) -> Result<Input, V2Error> {
    let count = request.inputs.0.len();
    let [tensor] = request.inputs.0.as_mut_slice() else {
        return Err(bad(format!("expected one input tensor, got {count}")));
    };
    let name = std::mem::take(&mut tensor.name);
    if tensor.datatype != FP32 {
        return Err(bad(format!(
            "input {name:?} has datatype {:?}; the server decodes {FP32}",
            tensor.datatype
        )));
    }
    let shape: Option<Vec<usize>> = tensor.shape.0.iter().map(|&d| usize::try_from(d).ok()).collect();
    let Some(shape) = shape.filter(|shape| !shape.is_empty()) else {
        return Err(bad(format!("input {name:?} has shape {:?}", tensor.shape.0)));
    };
    let elements = shape.iter().try_fold(1_u64, |n, &d| n.checked_mul(d as u64));
    let Some(elements) = elements else { return Err(bad(format!("input {name:?} has shape {shape:?}"))) };
    if elements > max_elements {
        let text = format!("input {name:?} has {elements} elements; the server takes at most {max_elements}");
        return Err(V2Error(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", text)));
    }
    let size = tensor.parameters.as_ref().and_then(|p| p.binary_data_size);
    let data = match (size, tensor.data.take()) {
        (Some(size), None) if usize::try_from(size).ok() == Some(binary.len()) => {
            // Checked against the shape before a float is decoded: the vector is the shape's.
            if elements.checked_mul(4) != u64::try_from(binary.len()).ok() {
                return Err(bad(format!("input {name:?} has shape {shape:?} but {} bytes", binary.len())));
            }
            binary::floats(binary)?
        }
        (Some(size), None) => {
            return Err(bad(format!("{name:?} has {} of {size} bytes after the JSON", binary.len())));
        }
        (None, Some(Elements(data, layout))) if binary.is_empty() => {
            // Nested data must nest as the shape says (flat data is counted below).
            if !layout.fits(&shape) {
                let text = "data nested otherwise (flat, an array per dimension, or rows flattened)";
                return Err(bad(format!("input {name:?} has shape {shape:?} but {text}")));
            }
            data
        }
        (None, None) => return Err(bad(format!("input {name:?} has no data"))),
        _ => return Err(bad(format!("input {name:?} has its data in JSON and in binary"))),
    };
    if u64::try_from(data.len()).ok() != Some(elements) {
        return Err(bad(format!("input {name:?} has shape {shape:?} but {} elements", data.len())));
    }
    Ok(Input { name, shape, data })
}

/// The request against the model's declaration: one `FP32` input and output (what the server
/// runs), the input's name and shape as declared, only the declared output asked for. The
/// output's declaration.
fn fit(
    request: &InferRequest,
    input: &Input,
    inputs: &[TensorSpec],
    outputs: &[TensorSpec],
) -> Result<TensorSpec, V2Error> {
    let ([spec], [output]) = (inputs, outputs) else {
        return Err(bad(format!(
            "the model takes {} tensors and answers {}: the server runs models of one input and one output",
            inputs.len(),
            outputs.len()
        )));
    };
    if spec.name != input.name {
        return Err(bad(format!("unknown input {:?}: the model takes {:?}", input.name, spec.name)));
    }
    if spec.datatype != DataType::Fp32 || output.datatype != DataType::Fp32 {
        return Err(bad(format!("the model's tensors are not {FP32}: the server runs {FP32} models")));
    }
    // The answer's shape is the input's batch with the output's declared row: both must be
    // batches of fixed-size rows.
    if let Some(odd) = [spec, output].into_iter().find(|spec| !spec.is_batch_of_rows()) {
        return Err(bad(format!(
            "the model declares {:?} as {:?}: the server runs models whose tensors are a batch (-1) of fixed-size rows",
            odd.name, odd.shape
        )));
    }
    if !spec.admits(&input.shape) {
        return Err(bad(format!(
            "input {:?} has shape {:?}; the model takes {:?} (-1: any size)",
            input.name, input.shape, spec.shape
        )));
    }
    if let Some(wrong) = request.outputs.iter().flat_map(|o| &o.0).find(|o| o.name != output.name) {
        return Err(bad(format!("unknown output {:?}: the model answers {:?}", wrong.name, output.name)));
    }
    Ok(output.clone())
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

    /// A JSON value of the shapes a request holds, from a few leaves up.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[a-z_]{0,8}".prop_map(Value::from),
            prop_oneof![Just("input"), Just("output"), Just("FP32"), Just("INT8")].prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("inputs"),
                        Just("outputs"),
                        Just("name"),
                        Just("shape"),
                        Just("datatype"),
                        Just("data"),
                        Just("parameters"),
                        Just("binary_data_size"),
                        Just("binary_data"),
                        Just("id"),
                    ]
                    .prop_map(str::to_owned),
                    inner,
                    0..5,
                )
                .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any body, with or without the binary extension's header: a decoded request or a
        /// client error (4xx) — never a panic, never a server error.
        #[test]
        fn any_body_decodes_or_is_a_client_error(
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
            json in json_value(),
            split in proptest::option::of(0usize..300),
            binary in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let mut headers = HeaderMap::new();
            if let Some(at) = split {
                headers.insert(binary::HEADER_LENGTH, axum::http::HeaderValue::from(at));
            }
            let mut structured = serde_json::to_vec(&json).expect("JSON");
            structured.extend_from_slice(&binary);
            for body in [body, structured] {
                if let Err(error) = decoded(&headers, Bytes::from(body), 1 << 10) {
                    proptest::prop_assert!(error.0.status().is_client_error(), "{:?}", error.0);
                }
            }
        }
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
