//! The server over HTTP, on `127.0.0.1:0` inside the test's runtime: concurrent inference on
//! warm models, a cold stampede loading once, a DELETE that waits for the inferences in flight
//! (held open by a gate the test controls), bad requests answered with their statuses, and a
//! graceful shutdown that drains requests and unloads everything.
//!
//! Every concurrent step waits on explicit evidence (a condvar the gated models signal, a
//! state the stack reports), never on time.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use client::HttpClient;
use resident::burn::BurnError;
use resident::{BoxError, Deadline, Loader, Manager, ManagerError, ManagerExt, Model, ModelId};
use resident_serve::{App, CatalogueLoader, ServeConfig, ServeModel, ShutdownSummary, serve};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

mod client;
mod hostile;
mod hygiene;
mod operations;
mod signals;

// ---------------------------------------------------------------------------------------------
// Fixtures

#[derive(Clone, serde::Deserialize)]
struct Fixture {
    id: String,
    input: Vec<f32>,
    output: Vec<f32>,
}

fn fixture(id: &str) -> Fixture {
    #[derive(serde::Deserialize)]
    struct File {
        models: Vec<Fixture>,
    }
    let path = ServeConfig::fixtures_dir().join("expected.json");
    let text = std::fs::read_to_string(&path).expect("fixtures/models/expected.json");
    let file: File = serde_json::from_str(&text).expect("valid expected.json");
    file.models.into_iter().find(|f| f.id == id).expect("a fixture with that id")
}

fn assert_close(got: &Value, want: &[f32], what: &str) {
    let got: Vec<f32> = serde_json::from_value(got.clone()).unwrap_or_else(|e| panic!("{what}: {e}: {got}"));
    assert_eq!(got.len(), want.len(), "{what}: output length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{what}[{i}]: got {g}, stored {w}");
    }
}

// ---------------------------------------------------------------------------------------------
// A server and its client

struct Server<L: Loader> {
    app: App<L>,
    addr: SocketAddr,
    client: Client,
    stop: oneshot::Sender<()>,
    task: JoinHandle<ShutdownSummary>,
}

impl<L> Server<L>
where
    L: Loader,
    L::Model: ServeModel,
{
    async fn start(app: App<L>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, app.clone(), async {
            let _ = stopped.await;
        }));
        Self {
            app,
            addr,
            client: Client { http: HttpClient::new(), base: format!("http://{addr}") },
            stop,
            task,
        }
    }

    /// Signals the shutdown and waits for the server to finish it.
    async fn stop(self) -> ShutdownSummary {
        self.stop.send(()).expect("the server is running");
        self.task.await.expect("the server task")
    }
}

/// A cheap, cloneable client of one server, for requests from spawned tasks.
#[derive(Clone)]
struct Client {
    http: HttpClient,
    base: String,
}

impl Client {
    async fn reply(response: client::Response) -> (u16, Value) {
        let status = response.status().as_u16();
        let text = response.text().await.expect("a body");
        let body =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON body") };
        (status, body)
    }

    async fn put(&self, id: &str, body: Option<Value>) -> (u16, Value) {
        let request = self.http.put(format!("{}/models/{id}", self.base));
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        Self::reply(request.send().await.expect("PUT")).await
    }

    async fn infer(&self, id: &str, input: &[f32]) -> (u16, Value) {
        let url = format!("{}/models/{id}/infer", self.base);
        Self::reply(self.http.post(url).json(&json!({ "input": input })).send().await.expect("POST")).await
    }

    async fn delete(&self, id: &str) -> (u16, Value) {
        Self::reply(self.http.delete(format!("{}/models/{id}", self.base)).send().await.expect("DELETE"))
            .await
    }

    async fn models(&self) -> Vec<String> {
        let (status, body) =
            Self::reply(self.http.get(format!("{}/models", self.base)).send().await.expect("GET")).await;
        assert_eq!(status, 200, "{body}");
        let mut models: Vec<String> = serde_json::from_value(body["models"].clone()).expect("a list of ids");
        models.sort();
        models
    }

    async fn metrics(&self) -> String {
        let response = self.http.get(format!("{}/metrics", self.base)).send().await.expect("GET /metrics");
        assert_eq!(response.status().as_u16(), 200);
        response.text().await.expect("Prometheus text")
    }
}

/// One HTTP/1.1 request with `target` sent exactly as given: a URL parser would resolve
/// `%2E%2E` and empty segments before they reach the server.
async fn raw(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("receive");
    let response = String::from_utf8(response).expect("a UTF-8 response");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body = if body.is_empty() { Value::Null } else { serde_json::from_str(body).expect("a JSON body") };
    (status, body)
}

/// The value of the series `name{labels...}` in Prometheus text, if present.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|line| !line.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        let inner = match rest {
            "" => "",
            rest => rest.strip_prefix('{')?.strip_suffix('}')?,
        };
        let found: Vec<&str> = inner.split(',').collect();
        let all = labels.iter().all(|(key, want)| found.contains(&format!("{key}=\"{want}\"").as_str()));
        all.then(|| value.parse().ok()).flatten()
    })
}

// ---------------------------------------------------------------------------------------------
// A gate that holds inference open

/// What the gated models report: who is inside, and the order in which inferences left the
/// model and models were unloaded (one logical clock for both).
#[derive(Default)]
struct GateState {
    open: bool,
    inside: usize,
    /// Models loaded so far.
    loads: usize,
    clock: u64,
    exits: Vec<u64>,
    unloads: Vec<u64>,
}

#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().expect("gate")
    }

    /// An inference arrives: counts itself inside, then waits for the gate to open.
    fn pass(&self) {
        let mut state = self.lock();
        state.inside += 1;
        self.changed.notify_all();
        while !state.open {
            state = self.changed.wait(state).expect("gate");
        }
    }

    /// An inference leaves the model (its lease ends right after).
    fn exit(&self) {
        let mut state = self.lock();
        state.clock += 1;
        let now = state.clock;
        state.exits.push(now);
    }

    fn unload(&self) {
        let mut state = self.lock();
        state.clock += 1;
        let now = state.clock;
        state.unloads.push(now);
    }

    /// Blocks until `n` inferences are inside.
    fn wait_inside(&self, n: usize) {
        self.wait_for(|state| state.inside >= n);
    }

    /// Blocks until `done` holds.
    fn wait_for(&self, done: impl Fn(&GateState) -> bool) {
        let mut state = self.lock();
        while !done(&state) {
            state = self.changed.wait(state).expect("gate");
        }
    }

    /// A model was loaded.
    fn loaded(&self) {
        self.lock().loads += 1;
        self.changed.notify_all();
    }

    fn open(&self) {
        self.lock().open = true;
        self.changed.notify_all();
    }
}

/// The catalogue's loader, whose models pass the gate before every inference.
struct Gated {
    inner: CatalogueLoader,
    gate: Arc<Gate>,
}

struct GatedModel {
    inner: <CatalogueLoader as Loader>::Model,
    gate: Arc<Gate>,
}

impl Loader for Gated {
    type Model = GatedModel;

    fn load(&self, id: &ModelId) -> Result<GatedModel, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<GatedModel, BoxError> {
        let inner = self.inner.load_until(id, deadline)?;
        self.gate.loaded();
        Ok(GatedModel { inner, gate: Arc::clone(&self.gate) })
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.inner.declared_bytes(id)
    }
}

impl Model for GatedModel {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn unload(&self) -> Result<(), BoxError> {
        self.gate.unload();
        self.inner.unload()
    }
}

impl ServeModel for GatedModel {
    fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        self.gate.pass();
        let output = ServeModel::infer(&self.inner, input);
        self.gate.exit();
        output
    }

    fn inputs(&self) -> Vec<resident::burn::TensorSpec> {
        self.inner.inputs()
    }

    fn outputs(&self) -> Vec<resident::burn::TensorSpec> {
        self.inner.outputs()
    }

    fn source(&self) -> Option<&str> {
        self.inner.source()
    }
}

fn gated() -> (App<Gated>, Arc<Gate>) {
    gated_with(ServeConfig::fixtures())
}

fn gated_with(config: ServeConfig) -> (App<Gated>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let inner = Arc::clone(&gate);
    let app = App::with_loader(config, move |loader| Gated { inner: loader, gate: inner })
        .expect("the server builds");
    (app, gate)
}

async fn wait_inside(gate: &Arc<Gate>, n: usize) {
    let gate = Arc::clone(gate);
    tokio::task::spawn_blocking(move || gate.wait_inside(n)).await.expect("waiting at the gate");
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inferences_on_warm_models_give_the_stored_outputs() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    for id in ["mlp", "cnn"] {
        let (status, body) = server.client.put(id, None).await;
        assert_eq!((status, &body["status"]), (201, &json!("loaded")), "PUT {id}: {body}");
    }
    assert_eq!(server.client.models().await, ["cnn", "mlp"]);

    let requests: Vec<_> = (0..16)
        .map(|i| {
            let fixture = fixture(if i % 2 == 0 { "mlp" } else { "cnn" });
            let client = server.client.clone();
            tokio::spawn(async move { (client.infer(&fixture.id, &fixture.input).await, fixture) })
        })
        .collect();
    for request in requests {
        let ((status, body), fixture) = request.await.expect("a request task");
        assert_eq!(status, 200, "{}: {body}", fixture.id);
        assert_close(&body["output"], &fixture.output, &fixture.id);
    }

    let summary = server.stop().await;
    assert_eq!(summary.unloaded, ["cnn", "mlp"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_replaces_a_served_model_and_serves_aliases() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    assert_eq!(client.put("mlp", None).await.0, 201);
    let (status, body) = client.put("mlp", None).await;
    assert_eq!((status, &body["status"]), (200, &json!("replaced")), "{body}");

    // `detector` is an alias of the catalogue's cnn.
    let (status, body) = client.put("detector", Some(json!({ "source": "cnn" }))).await;
    assert_eq!((status, &body["status"], &body["source"]), (201, &json!("loaded"), &json!("cnn")), "{body}");
    let cnn = fixture("cnn");
    let (status, body) = client.infer("detector", &cnn.input).await;
    assert_eq!(status, 200, "{body}");
    assert_close(&body["output"], &cnn.output, "detector");

    // Replaced by the mlp, atomically: the id never goes missing.
    let (status, body) = client.put("detector", Some(json!({ "source": "mlp" }))).await;
    assert_eq!((status, &body["status"]), (200, &json!("replaced")), "{body}");
    let mlp = fixture("mlp");
    let (status, body) = client.infer("detector", &mlp.input).await;
    assert_eq!(status, 200, "{body}");
    assert_close(&body["output"], &mlp.output, "detector after the replace");

    assert_eq!(client.delete("detector").await.0, 204);
    let (status, body) = client.delete("detector").await;
    assert_eq!((status, &body["kind"]), (404, &json!("not_found")), "{body}");
    assert_eq!(client.models().await, ["mlp"]);
    server.stop().await;
}

/// A models directory with the fixtures and one more catalogue entry, `name`, a copy of the
/// fixture `of`: a canonical id no other test loads, so that its load count in the
/// process-wide metrics is this test's alone.
fn models_dir_with_copy(name: &str, of: &str) -> std::path::PathBuf {
    let fixtures = ServeConfig::fixtures_dir();
    let dir = std::env::temp_dir().join(format!("resident-serve-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    for entry in std::fs::read_dir(&fixtures).expect("the fixtures") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "safetensors") {
            std::fs::copy(&path, dir.join(path.file_name().expect("a file"))).expect("a copy");
        }
    }
    std::fs::copy(fixtures.join(format!("{of}.safetensors")), dir.join(format!("{name}.safetensors")))
        .expect("a copy");
    let text = std::fs::read_to_string(fixtures.join("expected.json")).expect("the manifest");
    let mut manifest: Value = serde_json::from_str(&text).expect("valid JSON");
    let models = manifest["models"].as_array_mut().expect("a model list");
    let mut copy = models.iter().find(|m| m["id"] == of).expect("the fixture").clone();
    copy["id"] = json!(name);
    models.push(copy);
    std::fs::write(dir.join("expected.json"), manifest.to_string()).expect("the manifest");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_stampede_on_one_id_loads_it_once() {
    const N: usize = 8;
    let config =
        ServeConfig { models_dir: models_dir_with_copy("stampede", "mlp"), ..ServeConfig::fixtures() };
    let server = Server::start(App::new(config).expect("the server builds")).await;
    let puts: Vec<_> = (0..N)
        .map(|_| {
            let client = server.client.clone();
            tokio::spawn(async move { client.put("stampede", Some(json!({ "replace": false }))).await })
        })
        .collect();
    let mut replies = Vec::new();
    for put in puts {
        replies.push(put.await.expect("a PUT task"));
    }
    let loaded = replies.iter().filter(|(s, b)| *s == 201 && b["status"] == "loaded").count();
    let present = replies.iter().filter(|(s, b)| *s == 200 && b["status"] == "present").count();
    assert_eq!((loaded, present), (1, N - 1), "one load, every other PUT found it present: {replies:?}");

    let mlp = fixture("mlp");
    let (status, body) = server.client.infer("stampede", &mlp.input).await;
    assert_eq!(status, 200, "{body}");
    assert_close(&body["output"], &mlp.output, "stampede");
    assert_eq!(server.client.models().await, ["stampede"]);

    let text = server.client.metrics().await;
    let answered =
        metric(&text, "resident_http_requests_total", &[("route", "PUT /models/{id}"), ("status", "201")]);
    assert!(answered.is_some_and(|n| n >= 1.0), "the server counts its answers:\n{text}");
    // resident's own count of loads, by the canonical id loaded.
    assert_eq!(
        metric(&text, "resident_model_loads_total", &[("model", "stampede")]),
        Some(1.0),
        "exactly one load of `stampede` in resident's metrics:\n{text}"
    );
    // Gauges set on scrape: this server's registered models and its RAM budget.
    assert_eq!(metric(&text, "resident_models", &[("device", "cpu")]), Some(1.0), "{text}");
    let used = metric(&text, "resident_memory_used_bytes", &[("device", "ram")]);
    assert!(used.is_some_and(|bytes| bytes > 0.0), "the budget's bytes in use:\n{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_for_the_inferences_in_flight() {
    const N: usize = 6;
    let (app, gate) = gated();
    let server = Server::start(app).await;
    let mlp = fixture("mlp");
    assert_eq!(server.client.put("mlp", None).await.0, 201);

    let infers: Vec<_> = (0..N)
        .map(|_| {
            let (client, input) = (server.client.clone(), mlp.input.clone());
            tokio::spawn(async move { client.infer("mlp", &input).await })
        })
        .collect();
    wait_inside(&gate, N).await;

    let client = server.client.clone();
    let delete = tokio::spawn(async move { client.delete("mlp").await });
    // The DELETE drains once the model refuses new leases with `Removing`: wait for that state.
    loop {
        // A lease is a blocking call: on the blocking pool, like the server's own.
        let app = server.app.clone();
        let leased = tokio::task::spawn_blocking(move || app.stack().lease("mlp").map(drop)).await;
        match leased.expect("a lease task") {
            Err(ManagerError::Removing { .. }) => break,
            Ok(()) => tokio::task::yield_now().await,
            Err(error) => panic!("unexpected lease error while the DELETE starts: {error}"),
        }
    }
    assert!(!delete.is_finished(), "the DELETE cannot finish while {N} inferences hold the model");
    // A request arriving now is refused, never run on a model being unloaded.
    let (status, body) = server.client.infer("mlp", &mlp.input).await;
    assert_eq!((status, &body["kind"]), (503, &json!("removing")), "{body}");

    gate.open();
    for infer in infers {
        let (status, body) = infer.await.expect("an infer task");
        assert_eq!(status, 200, "an inference in flight completes: {body}");
        assert_close(&body["output"], &mlp.output, "in flight");
    }
    let (status, body) = delete.await.expect("the DELETE task");
    assert_eq!(status, 204, "{body}");
    {
        let state = gate.lock();
        assert_eq!(state.exits.len(), N, "every inference left the model before the DELETE answered");
        let last_exit = state.exits.iter().max().copied();
        assert!(
            state.unloads.len() == 1 && Some(state.unloads[0]) > last_exit,
            "one unload, after the last inference left: exits {:?}, unloads {:?}",
            state.exits,
            state.unloads
        );
    }
    let (status, body) = server.client.infer("mlp", &mlp.input).await;
    assert_eq!((status, &body["kind"]), (404, &json!("not_found")), "{body}");
    assert!(server.client.models().await.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_their_statuses_and_change_nothing() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    assert_eq!(server.client.put("mlp", None).await.0, 201);
    let before = server.client.models().await;
    let mlp = json!({ "input": fixture("mlp").input }).to_string();
    let long = "x".repeat(ModelId::MAX_LEN + 1);
    let cases: Vec<(&str, String, String, u16, &str)> = vec![
        ("POST", "/models/%2E%2E/infer".into(), mlp.clone(), 400, "invalid_id"),
        ("PUT", "/models/%2E%2E".into(), String::new(), 400, "invalid_id"),
        ("PUT", "/models/a%00b".into(), String::new(), 400, "invalid_id"),
        ("PUT", "/models/a%5Cb".into(), String::new(), 400, "invalid_id"),
        ("PUT", "/models//x".into(), String::new(), 400, "invalid_id"),
        ("DELETE", "/models/a//b".into(), String::new(), 400, "invalid_id"),
        ("POST", "/models/a/./b/infer".into(), mlp.clone(), 400, "invalid_id"),
        ("PUT", format!("/models/{long}"), String::new(), 400, "invalid_id"),
        ("PUT", "/models/%FF".into(), String::new(), 400, "invalid_id"),
        ("PUT", "/models/alias".into(), json!({ "source": "../mlp" }).to_string(), 400, "invalid_id"),
        ("PUT", "/models/unknown".into(), String::new(), 404, "unknown_model"),
        ("PUT", "/models/alias".into(), json!({ "source": "nope" }).to_string(), 404, "unknown_model"),
        ("PUT", "/models/mlp".into(), json!({ "sauce": "mlp" }).to_string(), 400, "bad_json"),
        ("POST", "/models/unknown/infer".into(), mlp.clone(), 404, "not_found"),
        ("DELETE", "/models/unknown".into(), String::new(), 404, "not_found"),
        ("POST", "/models/mlp/infer".into(), "{\"input\": [1, 2".into(), 400, "bad_json"),
        ("POST", "/models/mlp/infer".into(), "{\"inputs\": []}".into(), 400, "bad_json"),
        (
            "POST",
            "/models/mlp/infer".into(),
            json!({ "input": [1.0, 2.0, 3.0] }).to_string(),
            400,
            "bad_input",
        ),
        ("POST", "/models/mlp/infer".into(), json!({ "input": [] }).to_string(), 400, "bad_input"),
        (
            "POST",
            "/models/mlp/infer".into(),
            format!("{{\"input\": [1e39{}]}}", ", 0".repeat(15)),
            400,
            "bad_input",
        ),
        ("POST", "/models/mlp".into(), mlp.clone(), 405, "method_not_allowed"),
        ("GET", "/models/mlp".into(), String::new(), 405, "method_not_allowed"),
        ("GET", "/nowhere".into(), String::new(), 404, "no_route"),
    ];
    for (method, target, body, status, kind) in cases {
        let (got, reply) = raw(server.addr, method, &target, &body).await;
        assert_eq!((got, &reply["kind"]), (status, &json!(kind)), "{method} {target}: {reply}");
        assert!(reply["error"].as_str().is_some_and(|e| !e.is_empty()), "{method} {target}: {reply}");
    }
    assert_eq!(server.client.models().await, before, "no bad request changed what is served");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_model_cannot_take_is_no_use_of_it() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    for id in ["mlp", "cnn"] {
        assert_eq!(server.client.put(id, None).await.0, 201);
    }
    let order = || server.app.stack().queue().iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(order(), ["mlp", "cnn"], "least recently used first");
    let v2 = |shape: [usize; 2], data: Vec<f32>| {
        json!({ "inputs": [{ "name": "input", "shape": shape, "datatype": "FP32", "data": data }] })
            .to_string()
    };
    let refused = [
        ("/models/mlp/infer", json!({ "input": [1.0, 2.0, 3.0] }).to_string()),
        ("/v2/models/mlp/infer", v2([1, 3], vec![1.0, 2.0, 3.0])),
    ];
    for (target, body) in refused {
        let (status, reply) = raw(server.addr, "POST", target, &body).await;
        assert_eq!(status, 400, "{target}: {reply}");
        assert_eq!(order(), ["mlp", "cnn"], "{target}: a refused request touched the order");
    }
    let (status, reply) = raw(server.addr, "POST", "/v2/models/mlp/infer", &v2([1, 16], vec![0.5; 16])).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(order(), ["cnn", "mlp"], "an inference is a use");
    server.stop().await;
}

/// `n` inferences of the mlp fixture on `client`, each in its own task.
fn infers(client: &Client, n: usize) -> Vec<JoinHandle<(u16, Value)>> {
    let input = fixture("mlp").input;
    (0..n)
        .map(|_| {
            let (client, input) = (client.clone(), input.clone());
            tokio::spawn(async move { client.infer("mlp", &input).await })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_replaces_under_inferences_in_flight_and_none_finds_the_id_missing() {
    const N: usize = 3;
    let (app, gate) = gated();
    let server = Server::start(app).await;
    assert_eq!(server.client.put("mlp", None).await.0, 201);
    // N inferences hold the serving version.
    let mut running = infers(&server.client, N);
    wait_inside(&gate, N).await;
    let replace = {
        let client = server.client.clone();
        tokio::spawn(async move { client.put("mlp", None).await })
    };
    // The new version is loaded beside the old one; inferences sent now get one or the other.
    let gate2 = Arc::clone(&gate);
    tokio::task::spawn_blocking(move || gate2.wait_for(|state| state.loads == 2)).await.expect("the load");
    running.extend(infers(&server.client, N));
    wait_inside(&gate, 2 * N).await;
    gate.open();
    let mlp = fixture("mlp");
    for infer in running {
        let (status, body) = infer.await.expect("an infer task");
        assert_eq!(status, 200, "an inference during a replace is served: {body}");
        assert_close(&body["output"], &mlp.output, "during the replace");
    }
    let (status, body) = replace.await.expect("the PUT task");
    assert_eq!((status, &body["status"]), (200, &json!("replaced")), "{body}");
    let (exits, unloads) = {
        let state = gate.lock();
        (state.exits.clone(), state.unloads.clone())
    };
    assert_eq!(unloads.len(), 1, "the old version was unloaded once");
    // The N inferences on the old version left before its unload, so the first N exits did.
    assert!(
        exits[..N].iter().all(|exit| *exit < unloads[0]),
        "the old version was unloaded after the inferences on it left: exits {exits:?}, unload {unloads:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_requests_in_flight_then_unloads_everything() {
    let (app, gate) = gated();
    let server = Server::start(app.clone()).await;
    for id in ["mlp", "cnn"] {
        assert_eq!(server.client.put(id, None).await.0, 201, "PUT {id}");
    }
    let mlp = fixture("mlp");
    let in_flight = {
        let (client, input) = (server.client.clone(), mlp.input.clone());
        tokio::spawn(async move { client.infer("mlp", &input).await })
    };
    wait_inside(&gate, 1).await;

    server.stop.send(()).expect("the server is running");
    gate.open();
    let (status, body) = in_flight.await.expect("the infer task");
    assert_eq!(status, 200, "the request in flight completes: {body}");
    assert_close(&body["output"], &mlp.output, "in flight during the shutdown");

    let summary = server.task.await.expect("the server task");
    assert!(TcpStream::connect(server.addr).await.is_err(), "a stopped server accepts no connection");
    assert_eq!(summary.unloaded, ["cnn", "mlp"]);
    assert!(summary.failed.is_empty(), "{summary:?}");
    assert!(app.stack().ids().is_empty(), "nothing is registered after the shutdown");
    assert!(app.stack().is_shut_down());
    assert_eq!(app.group().budget().in_use(), 0, "no weights stay counted");
    let state = gate.lock();
    assert!(
        state.unloads.len() == 2 && state.unloads.iter().all(|u| state.exits.iter().all(|e| u > e)),
        "both models unloaded after the request in flight left: exits {:?}, unloads {:?}",
        state.exits,
        state.unloads
    );
}

// ---------------------------------------------------------------------------------------------
// The Open Inference Protocol

impl Client {
    async fn get_v2(&self, path: &str) -> (u16, Value) {
        Self::reply(self.http.get(format!("{}/v2{path}", self.base)).send().await.expect("GET /v2")).await
    }

    async fn infer_v2(&self, path: &str, request: &Value) -> (u16, Value) {
        let url = format!("{}/v2/models/{path}/infer", self.base);
        Self::reply(self.http.post(url).json(request).send().await.expect("POST /v2 infer")).await
    }
}

/// The shape a model's metadata declares for its input, but the batch: `[16]` for rows of 16,
/// `[1, 8, 8]` for one-channel images.
fn row_shape(meta: &Value) -> Vec<usize> {
    let shape = meta["inputs"][0]["shape"].as_array().expect("a declared shape");
    assert_eq!(shape[0], json!(-1), "any batch: {meta}");
    shape[1..].iter().map(|d| usize::try_from(d.as_u64().expect("a fixed size")).expect("small")).collect()
}

/// An inference request of `fixture`'s input as a batch of `row` shaped rows, `data` flat or
/// nested a row at a time.
fn v2_request(fixture: &Fixture, row: &[usize], nested: bool) -> Value {
    let width: usize = row.iter().product();
    let rows = fixture.input.len() / width;
    let data = if nested {
        json!(fixture.input.chunks(width).map(<[f32]>::to_vec).collect::<Vec<_>>())
    } else {
        json!(fixture.input)
    };
    let mut shape = vec![rows];
    shape.extend_from_slice(row);
    json!({ "id": "r-1", "inputs": [{ "name": "input", "shape": shape, "datatype": "FP32", "data": data }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_inference_protocol_answers_health_metadata_and_inference() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    assert_eq!(client.get_v2("/health/live").await.0, 200);
    assert_eq!(client.get_v2("/health/ready").await.0, 200);
    let (status, meta) = client.get_v2("").await;
    assert_eq!((status, &meta["name"]), (200, &json!("resident-serve")), "{meta}");
    assert_eq!(client.get_v2("/models/mlp/ready").await.0, 400, "not loaded yet: not ready");
    let (status, body) = client.get_v2("/models/mlp").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].is_string(), "the protocol's error object: {body}");

    for id in ["mlp", "cnn"] {
        assert_eq!(client.put(id, None).await.0, 201);
        assert_eq!(client.get_v2(&format!("/models/{id}/ready")).await.0, 200);
        assert_eq!(client.get_v2(&format!("/models/{id}/versions/1/ready")).await.0, 200);
        let (status, meta) = client.get_v2(&format!("/models/{id}")).await;
        assert_eq!(status, 200, "{meta}");
        assert_eq!((&meta["name"], &meta["versions"]), (&json!(id), &json!(["1"])), "{meta}");
        assert_eq!(
            (&meta["inputs"][0]["name"], &meta["inputs"][0]["datatype"]),
            (&json!("input"), &json!("FP32"))
        );
        let row = row_shape(&meta);
        let width: usize = row.iter().product();
        let out_width = meta["outputs"][0]["shape"][1].as_u64().expect("an output width");
        let fixture = fixture(id);
        for (path, nested) in [(id.to_owned(), false), (format!("{id}/versions/1"), true)] {
            let (status, body) = client.infer_v2(&path, &v2_request(&fixture, &row, nested)).await;
            assert_eq!(status, 200, "{path}: {body}");
            assert_eq!(
                (&body["model_name"], &body["model_version"], &body["id"]),
                (&json!(id), &json!("1"), &json!("r-1"))
            );
            let output = &body["outputs"][0];
            assert_eq!((&output["name"], &output["datatype"]), (&json!("output"), &json!("FP32")), "{body}");
            let rows = (fixture.input.len() / width) as u64;
            assert_eq!(output["shape"], json!([rows, out_width]), "{body}");
            assert_close(&output["data"], &fixture.output, &path);
        }
    }

    // Refusals: the protocol's error object, the route's status, nothing changed.
    let mlp = fixture("mlp");
    let (_, meta) = client.get_v2("/models/mlp").await;
    let good = v2_request(&mlp, &row_shape(&meta), false);
    let with = |pointer: &str, value: Value| {
        let mut request = good.clone();
        *request.pointer_mut(pointer).expect("a field of the request") = value;
        request
    };
    let refusals = [
        ("mlp/versions/2", good.clone(), 404),
        ("nope", good.clone(), 404),
        ("mlp", with("/inputs/0/datatype", json!("FP64")), 400),
        ("mlp", with("/inputs/0/name", json!("x")), 400),
        ("mlp", with("/inputs/0/shape", json!([1, mlp.input.len() + 1])), 400),
        ("mlp", with("/inputs/0/shape", json!([mlp.input.len(), 1])), 400),
        ("mlp", with("/inputs/0/data/0", json!(1e39)), 400),
        ("mlp", with("/inputs/0/data/0", json!("1")), 400),
        // The right count, nested otherwise than the shape says: in rows of 8, and ragged.
        ("mlp", with("/inputs/0/data", json!(mlp.input.chunks(8).collect::<Vec<_>>())), 400),
        ("mlp", with("/inputs/0/data", json!([&mlp.input[..1], &mlp.input[1..]])), 400),
        ("mlp", json!({ "inputs": [] }), 400),
        ("mlp", json!({ "inputs": good["inputs"], "outputs": [{ "name": "logits" }] }), 400),
    ];
    for (path, request, want) in refusals {
        let (status, body) = client.infer_v2(path, &request).await;
        assert_eq!(status, want, "{path} {request}: {body}");
        assert!(
            body["error"].is_string() && body.get("kind").is_none(),
            "the protocol's error object: {body}"
        );
    }
    let (status, body) = raw(server.addr, "POST", "/v2/models/mlp/infer", "[1, 2]").await;
    assert_eq!(status, 400, "an array is no request object: {body}");
    let (status, body) = raw(server.addr, "PUT", "/v2/models/mlp", "").await;
    assert_eq!(status, 405, "{body}");
    assert!(body["error"].is_string() && body.get("kind").is_none(), "the protocol's error object: {body}");
    // A route of the protocol asked with the wrong method is 405 too, not a missing route.
    for (method, path) in
        [("GET", "/v2/models/mlp/infer"), ("POST", "/v2/models/mlp"), ("POST", "/v2/models/mlp/ready")]
    {
        let (status, body) = raw(server.addr, method, path, "{}").await;
        assert_eq!(status, 405, "{method} {path}: {body}");
        assert!(
            body["error"].is_string() && body.get("kind").is_none(),
            "the protocol's error object: {body}"
        );
    }
    let (status, body) = raw(server.addr, "GET", "/v2/models/mlp/explain", "").await;
    assert_eq!(status, 404, "no such route: {body}");
    assert_eq!(client.models().await, ["cnn", "mlp"]);

    // Once the shutdown begins, the server is no longer ready (but still live).
    let summary = server.app.shutdown().await;
    assert_eq!(summary.unloaded, ["cnn", "mlp"]);
    assert_eq!(client.get_v2("/health/ready").await.0, 400);
    assert_eq!(client.get_v2("/health/live").await.0, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_tensor_data_goes_in_and_comes_out_after_the_json() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    assert_eq!(server.client.put("mlp", None).await.0, 201);
    let (_, meta) = server.client.get_v2("/models/mlp").await;
    let width = meta["inputs"][0]["shape"][1].as_u64().expect("a width");
    let mlp = fixture("mlp");
    let rows = mlp.input.len() as u64 / width;
    let raw: Vec<u8> = mlp.input.iter().flat_map(|v| v.to_le_bytes()).collect();
    let send = |header: Value, raw: &[u8], length: Option<usize>| {
        let header = serde_json::to_vec(&header).expect("JSON");
        let length = length.unwrap_or(header.len());
        let body = [header.as_slice(), raw].concat();
        let url = format!("{}/v2/models/mlp/infer", server.client.base);
        let request =
            server.client.http.post(url).header("Inference-Header-Content-Length", length).body(body);
        async move { request.send().await.expect("POST binary") }
    };
    let input = json!({
        "name": "input", "shape": [rows, width], "datatype": "FP32",
        "parameters": { "binary_data_size": raw.len() },
    });
    let asked = json!({ "inputs": [input], "outputs": [{ "name": "output", "parameters": { "binary_data": true } }] });
    let response = send(asked.clone(), &raw, None).await;
    assert_eq!(response.status().as_u16(), 200);
    let length: usize = response.headers()["inference-header-content-length"]
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("a length");
    let body = response.bytes().await.expect("a body");
    let header: Value = serde_json::from_slice(&body[..length]).expect("the JSON part");
    let output = &header["outputs"][0];
    assert!(output.get("data").is_none(), "binary output has no JSON data: {header}");
    let size = output["parameters"]["binary_data_size"].as_u64().expect("a size");
    assert_eq!(size as usize, body.len() - length, "{header}");
    let values: Vec<f32> =
        body[length..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_close(&json!(values), &mlp.output, "binary output");

    // Binary in, JSON out (the default without a `binary_data` parameter).
    let json_out = json!({ "inputs": [asked["inputs"][0].clone()] });
    let (status, body) = Client::reply(send(json_out, &raw, None).await).await;
    assert_eq!(status, 200, "{body}");
    assert_close(&body["outputs"][0]["data"], &mlp.output, "JSON output of binary input");

    // A length past the body, a short tensor, bytes left over, a non-finite element: 400s.
    let mut infinite = raw.clone();
    infinite[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let cases = [
        (asked.clone(), raw.clone(), Some(1 << 20)),
        (asked.clone(), raw[..raw.len() - 4].to_vec(), None),
        (asked.clone(), [raw.as_slice(), &[0, 0, 0, 0]].concat(), None),
        (asked.clone(), infinite, None),
    ];
    for (header, raw, length) in cases {
        let (status, body) = Client::reply(send(header, &raw, length).await).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].is_string(), "{body}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repository_extension_loads_replaces_and_unloads() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    let post = |path: &str, body: Option<Value>| {
        let request = client.http.post(format!("{}/v2/repository{path}", client.base));
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        async move { Client::reply(request.send().await.expect("POST /v2/repository")).await }
    };
    let states = |index: &Value| -> Vec<(String, String)> {
        let entries = index.as_array().expect("an array of models");
        entries
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_owned(), e["state"].as_str().unwrap().to_owned()))
            .collect()
    };
    let (status, index) = post("/index", None).await;
    assert_eq!(status, 200, "{index}");
    let unloaded = |name: &str| (name.to_owned(), "UNAVAILABLE".to_owned());
    assert_eq!(states(&index), [unloaded("cnn"), unloaded("mlp")]);

    assert_eq!(post("/models/mlp/load", None).await.0, 200);
    let config = json!({ "parameters": { "config": json!({ "source": "cnn" }).to_string() } });
    assert_eq!(post("/models/detector/load", Some(config)).await.0, 200, "an alias of cnn");
    let ready = |name: &str| (name.to_owned(), "READY".to_owned());
    assert_eq!(states(&post("/index", None).await.1), [unloaded("cnn"), ready("detector"), ready("mlp")]);
    assert_eq!(
        states(&post("/index", Some(json!({ "ready": true }))).await.1),
        [ready("detector"), ready("mlp")]
    );
    let cnn = fixture("cnn");
    let (_, meta) = client.get_v2("/models/detector").await;
    assert_eq!(meta["inputs"][0]["shape"], json!([-1, 1, 8, 8]), "the CNN takes images: {meta}");
    let (status, body) = client.infer_v2("detector", &v2_request(&cnn, &row_shape(&meta), false)).await;
    assert_eq!(status, 200, "{body}");
    assert_close(&body["outputs"][0]["data"], &cnn.output, "the alias serves cnn");
    assert_eq!(post("/models/mlp/load", None).await.0, 200, "a load of a served model replaces it");

    assert_eq!(post("/models/detector/unload", None).await.0, 200);
    assert_eq!(client.get_v2("/models/detector/ready").await.0, 400);
    for (path, body, want) in [
        ("/models/detector/unload", None, 404),
        ("/models/nope/load", None, 404),
        ("/models/x/load", Some(json!({ "parameters": { "source": "nope" } })), 404),
        ("/models/x/load", Some(json!({ "parameters": { "config": "{" } })), 400),
        ("/models/mlp/reload", None, 404),
        ("/models/a/versions/1/load", None, 400),
        ("/models/x/load", Some(json!({ "parameters": { "file:1/model.onnx": "AAAA" } })), 400),
        ("/index", Some(json!([1])), 400),
    ] {
        let (status, reply) = post(path, body).await;
        assert_eq!(status, want, "{path}: {reply}");
        assert!(reply["error"].is_string(), "{path}: {reply}");
    }
    assert_eq!(client.models().await, ["mlp"]);
    server.stop().await;
}
