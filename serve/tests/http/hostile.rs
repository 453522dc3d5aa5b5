//! Hostile and unlucky clients: bodies too large to take, a spent in-flight byte budget, queues
//! behind a draining model, slow senders, idle sockets past the connection limit, and clients
//! that hang up while their forward pass waits. Each waits on evidence the server reports (its
//! connection count, its budget, its queue, the gate), or on the event itself with a generous
//! bound; the one negative check ("not answered yet") cannot fail a correct server.

use std::time::Duration;

use super::*;
use resident_serve::{Limits, Secret};

/// The bound on waiting for an event a correct server produces at once (or after a sub-second
/// timeout of its own): only a broken server makes a test wait this long.
const EVENTUALLY: Duration = Duration::from_secs(20);

/// A response read off a raw connection: status, headers (lower-cased names), body.
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one response (its body by its `Content-Length`) off `stream`; `None` if the server
/// closed the connection first.
async fn read_response(stream: &mut TcpStream) -> Option<RawResponse> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).expect("a UTF-8 head");
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).expect("a status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        assert!(n > 0, "the connection closed inside a body");
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = &buffer[head_end..head_end + length];
    let body = if body.is_empty() { Value::Null } else { serde_json::from_slice(body).expect("a JSON body") };
    Some(RawResponse { status, headers, body })
}

/// A connection that has sent `head` (a request line and headers, no blank line) and `body`.
async fn sent(addr: SocketAddr, head: &str, body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(format!("{head}\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("send the head");
    stream.write_all(body).await.expect("send the body");
    stream
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(EVENTUALLY, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {EVENTUALLY:?}"))
}

/// Waits until the server reports `done` of itself (looking again every millisecond).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    within(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

fn config(limits: Limits) -> ServeConfig {
    ServeConfig { limits, ..ServeConfig::fixtures() }
}

fn v2_body(rows: usize) -> Vec<u8> {
    let data = vec![0.5_f32; rows * 16];
    let request =
        json!({ "inputs": [{ "name": "input", "datatype": "FP32", "shape": [rows, 16], "data": data }] });
    serde_json::to_vec(&request).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_and_tensors_past_their_limits_are_refused_before_they_are_read() {
    let limits = Limits { max_body_bytes: 4096, max_elements: 64, ..Limits::default() };
    let server = Server::start(App::new(config(limits)).expect("the server builds")).await;
    assert_eq!(server.client.put("mlp", None).await.0, 201);

    // A Content-Length past the limit is answered without a byte of the body sent.
    let mut stream =
        sent(server.addr, "POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Length: 1000000000000", b"").await;
    let refused = within("a 413 from the head", read_response(&mut stream)).await.expect("an answer");
    assert_eq!((refused.status, &refused.body["kind"]), (413, &json!("too_large")), "{}", refused.body);

    // A chunked body is cut off at the limit.
    let big = vec![b' '; 5000];
    let chunked = format!("{:x}\r\n", big.len());
    let mut stream = sent(
        server.addr,
        "POST /models/mlp/infer HTTP/1.1\r\nTransfer-Encoding: chunked",
        chunked.as_bytes(),
    )
    .await;
    stream.write_all(&big).await.expect("send");
    stream.write_all(b"\r\n0\r\n\r\n").await.expect("send");
    let cut = within("a 413 for a long chunked body", read_response(&mut stream)).await.expect("an answer");
    assert_eq!(cut.status, 413, "{}", cut.body);

    // An input past the element cap (5 rows of 16 > 64), in the protocol and on the own route.
    let url = format!("{}/v2/models/mlp/infer", server.client.base);
    let response = server.client.http.post(url).body(v2_body(5)).send().await.expect("POST");
    assert_eq!(response.status().as_u16(), 413);
    let (status, body) = server.client.infer("mlp", &[0.5; 80]).await;
    assert_eq!((status, &body["kind"]), (413, &json!("too_large")), "{body}");
    // Within them, the same request is served.
    let url = format!("{}/v2/models/mlp/infer", server.client.base);
    let response = server.client.http.post(url).body(v2_body(4)).send().await.expect("POST");
    assert_eq!(response.status().as_u16(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_in_flight_budget_queues_bodies_and_refuses_what_never_fits() {
    let probe = App::new(ServeConfig::fixtures()).expect("the server builds");
    let length = 1000_u64;
    // One charge of a 1,000-byte body fits, two do not.
    let limits = Limits { inflight_bytes: probe.charge_for(length) + 1024, ..Limits::default() };
    let app = App::new(config(limits)).expect("the server builds");
    let server = Server::start(app.clone()).await;
    assert_eq!(server.client.put("mlp", None).await.0, 201);
    let budget = app.in_flight_available();

    // A client sends its head and ten bytes: its charge is taken before the body is read.
    let head = format!("POST /models/mlp/infer HTTP/1.1\r\nContent-Length: {length}");
    let mut slow = sent(server.addr, &head, b"{\"input\":[").await;
    until("the slow request's charge", || app.in_flight_available() < budget).await;

    // A second body waits for the budget; a request without a body does not.
    let waiting = {
        let client = server.client.clone();
        tokio::spawn(async move {
            let mut padded = format!("{{\"input\": {:?}}}", fixture("mlp").input);
            // The same length: the same charge.
            padded.push_str(&" ".repeat(usize::try_from(length).unwrap() - padded.len()));
            let url = format!("{}/models/mlp/infer", client.base);
            Client::reply(client.http.post(url).body(padded).send().await.expect("POST")).await
        })
    };
    let (status, _) = server.client.get_v2("/health/ready").await;
    assert_eq!(status, 200, "a request without a body is not charged");
    if waiting.is_finished() {
        panic!("the second body did not wait for the budget: {:?}", waiting.await);
    }

    // A body whose charge can never fit is refused at once.
    let huge = vec![b' '; 8 * 1024];
    let url = format!("{}/models/mlp/infer", server.client.base);
    let response = server.client.http.post(url).body(huge).send().await.expect("POST");
    assert_eq!(response.status().as_u16(), 413);

    // The slow body completes (as bad JSON): its charge returns and the waiting body runs.
    slow.write_all(&vec![b'x'; usize::try_from(length).unwrap() - 10]).await.expect("send the rest");
    let bad = within("the slow request's answer", read_response(&mut slow)).await.expect("an answer");
    assert_eq!(bad.status, 400, "{}", bad.body);
    let (status, body) = within("the waiting request", waiting).await.expect("the task");
    assert_eq!(status, 200, "{body}");
    until("every charge returned", || app.in_flight_available() == budget).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_model_bounds_its_queue_and_other_requests_are_answered() {
    let limits = Limits { max_per_model: 3, max_blocking: 5, ..Limits::default() };
    let (app, gate) = gated_with(config(limits));
    let server = Server::start(app.clone()).await;
    for id in ["mlp", "cnn"] {
        assert_eq!(server.client.put(id, None).await.0, 201, "PUT {id}");
    }
    let mlp = fixture("mlp");
    // mlp: three inferences held at the gate fill its bound.
    let held = infers(&server.client, 3);
    wait_inside(&gate, 3).await;
    // A fourth call for mlp is refused at once, with when to come back.
    let url = format!("{}/models/mlp/infer", server.client.base);
    let response =
        server.client.http.post(url).json(&json!({ "input": mlp.input })).send().await.expect("POST");
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    // Its operator is not kept out: a DELETE, and a PUT behind it, take the control lane (the
    // DELETE drains the inferences).
    let client = server.client.clone();
    let delete = tokio::spawn(async move { client.delete("mlp").await });
    until("the DELETE queued", || app.calls_in_flight() == 4).await;
    let client = server.client.clone();
    let put = tokio::spawn(async move { client.put("mlp", None).await });
    until("the PUT queued", || app.calls_in_flight() == 5).await;
    // Other models, and requests about none, are answered while mlp drains.
    assert_eq!(server.client.get_v2("/models/cnn").await.0, 200, "cnn's metadata");
    assert_eq!(server.client.get_v2("/health/ready").await.0, 200);
    assert!(server.client.models().await.contains(&"cnn".to_owned()));

    // Two cnn inferences held at the gate fill the server's bound (the control lane is outside
    // it): the next call is a 503.
    let cnn = fixture("cnn");
    let cnn_infers: Vec<_> = (0..2)
        .map(|_| {
            let (client, input) = (server.client.clone(), cnn.input.clone());
            tokio::spawn(async move { client.infer("cnn", &input).await })
        })
        .collect();
    wait_inside(&gate, 5).await;
    let url = format!("{}/v2/models/cnn", server.client.base);
    let response = server.client.http.get(url).send().await.expect("GET");
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(!delete.is_finished() && !put.is_finished());

    gate.open();
    for infer in held.into_iter().chain(cnn_infers) {
        let (status, body) = infer.await.expect("an infer task");
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(delete.await.expect("the DELETE").0, 204);
    assert_eq!(put.await.expect("the PUT").0, 201, "the PUT loaded mlp again after the DELETE");
    until("the queue empties", || app.calls_in_flight() == 0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_senders_time_out_and_idle_sockets_are_closed() {
    let timeout = Duration::from_millis(300);
    let limits = Limits { header_timeout: timeout, body_timeout: timeout, ..Limits::default() };
    let server = Server::start(App::new(config(limits)).expect("the server builds")).await;

    // A head trickled in parts, never finished: the server closes the connection.
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    stream.write_all(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n").await.expect("send");
    assert!(within("the header timeout", read_response(&mut stream)).await.is_none_or(|r| r.status == 408));

    // A socket that never sends a byte is closed too.
    let mut idle = TcpStream::connect(server.addr).await.expect("connect");
    assert!(within("an idle socket's close", read_response(&mut idle)).await.is_none_or(|r| r.status == 408));

    // A body that stops short is answered 408.
    let mut stream =
        sent(server.addr, "POST /models/mlp/infer HTTP/1.1\r\nContent-Length: 100", b"{\"input\"").await;
    let late = within("the body timeout", read_response(&mut stream)).await.expect("an answer");
    assert_eq!((late.status, &late.body["kind"]), (408, &json!("body_timeout")), "{}", late.body);
    assert!(late.header("content-type").is_some_and(|t| t.starts_with("application/json")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_request_without_the_token_is_refused_before_its_body() {
    // The body is never sent: only a refusal before it answers within the waits below.
    let limits = Limits { body_timeout: EVENTUALLY * 3, ..Limits::default() };
    let config = ServeConfig { control_token: Secret::new("s3cret"), ..config(limits) };
    let app = App::new(config).expect("the server builds");
    let server = Server::start(app.clone()).await;
    let budget = app.in_flight_available();
    for head in [
        "PUT /models/mlp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000000",
        "POST /v2/repository/models/mlp/load HTTP/1.1\r\nContent-Length: 1000000",
        "POST /models/mlp/pin HTTP/1.1\r\nTransfer-Encoding: chunked",
    ] {
        let mut stream = sent(server.addr, head, b"").await;
        let refused = within("the refusal", read_response(&mut stream)).await.expect("an answer");
        assert_eq!((refused.status, &refused.body["kind"]), (401, &json!("unauthorized")), "{head}");
        assert_eq!(app.in_flight_available(), budget, "{head}: charged");
    }
    server.stop().await;
}

/// A server under `limits`, its count of open connections, and two idle connections of the
/// one test client (127.0.0.1), both counted open.
async fn two_connections_open(
    limits: Limits,
) -> (Server<CatalogueLoader>, tokio::sync::watch::Receiver<usize>, [TcpStream; 2]) {
    let app = App::new(config(limits)).expect("the server builds");
    let server = Server::start(app.clone()).await;
    let mut open = app.connections();
    let first = TcpStream::connect(server.addr).await.expect("connect");
    let second = TcpStream::connect(server.addr).await.expect("connect");
    within("two connections open", open.wait_for(|n| *n == 2)).await.expect("the server runs");
    (server, open, [first, second])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_for_a_slot() {
    let limits = Limits { max_connections: 2, ..Limits::default() };
    let (server, _open, [first, _second]) = two_connections_open(limits).await;

    // The kernel queues a third; the server does not take it while both slots are held.
    let mut third = sent(server.addr, "GET /v2/health/live HTTP/1.1", b"").await;
    let early = tokio::time::timeout(Duration::from_millis(200), read_response(&mut third)).await;
    assert!(early.is_err(), "a third connection was served past the limit of two");
    drop(first);
    let answer = within("the third connection's answer", read_response(&mut third)).await.expect("an answer");
    assert_eq!(answer.status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_its_clients_cap_is_closed_at_once() {
    // No idle connection is closed by the head timeout within the waits below: only the cap
    // can close the third.
    let limits =
        Limits { max_connections_per_client: 2, header_timeout: EVENTUALLY * 3, ..Limits::default() };
    let (server, mut open, [first, second]) = two_connections_open(limits).await;

    // A third of the same client is closed unanswered, while the server has slots left: it
    // never counts as open.
    let mut third = TcpStream::connect(server.addr).await.expect("connect");
    assert!(within("the third connection's close", read_response(&mut third)).await.is_none());
    assert_eq!(*open.borrow(), 2, "the third connection was counted open");

    // One closed, the client may open another, which is served.
    drop(first);
    within("one connection closed", open.wait_for(|n| *n == 1)).await.expect("the server runs");
    let mut fourth = sent(server.addr, "GET /v2/health/live HTTP/1.1", b"").await;
    let answer =
        within("the fourth connection's answer", read_response(&mut fourth)).await.expect("an answer");
    assert_eq!(answer.status, 200);
    drop((second, fourth));
    within("every connection closed", open.wait_for(|n| *n == 0)).await.expect("the server runs");
    let metrics = server.client.metrics().await;
    assert!(
        metrics.contains("resident_http_connections_refused_total{reason=\"per_client\"}"),
        "the refusal is counted: {metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_stops_its_forward_pass_between_batches() {
    let limits = Limits { batch_rows: 1, ..Limits::default() };
    let (app, gate) = gated_with(config(limits));
    let server = Server::start(app.clone()).await;
    let mlp = fixture("mlp");
    assert_eq!(raw(server.addr, "PUT", "/models/mlp", "").await.0, 201);
    let mut open = app.connections();
    within("the PUT's connection closed", open.wait_for(|n| *n == 0)).await.expect("the server runs");
    let budget = app.in_flight_available();

    // Three rows, one a batch: the first batch waits at the gate while the client hangs up.
    let abandoned = {
        let client = Client { http: HttpClient::new(), base: server.client.base.clone() };
        let input = mlp.input.clone();
        tokio::spawn(async move { client.infer("mlp", &input).await })
    };
    wait_inside(&gate, 1).await;
    abandoned.abort();
    within("the hang-up reaching the server", open.wait_for(|n| *n == 0)).await.expect("the server runs");
    // The pass still holds the body and what it decoded: its charge with them (checked once
    // the gate is open, so that a failure does not leave the pass waiting at it).
    let charged = app.in_flight_available() < budget;
    gate.open();
    assert!(charged, "a hang-up gave the charge back while the pass runs");
    // The DELETE drains the pass's lease: once it answers, the pass has ended.
    assert_eq!(raw(server.addr, "DELETE", "/models/mlp", "").await.0, 204);
    let ran = {
        let state = gate.lock();
        (state.inside, state.exits.len())
    };
    assert_eq!(ran, (1, 1), "one batch of three ran");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_answer_is_cut_off_and_its_charge_returns() {
    // An idle connection is not closed by the head timeout within the wait below: only the
    // stalled write can close it.
    let limits = Limits {
        send_timeout: Duration::from_millis(300),
        header_timeout: EVENTUALLY * 3,
        ..Limits::default()
    };
    let app = App::new(config(limits)).expect("the server builds");
    let server = Server::start(app.clone()).await;
    assert_eq!(raw(server.addr, "PUT", "/models/mlp", "").await.0, 201);
    let mut open = app.connections();
    within("the PUT's connection closed", open.wait_for(|n| *n == 0)).await.expect("the server runs");
    let budget = app.in_flight_available();

    // An answer of a few MB in JSON, far more than a 4 KiB receive buffer and the server's
    // send buffer hold: the server's writes stall while the client reads nothing.
    let rows = 150_000;
    let head = json!({ "inputs": [{ "name": "input", "datatype": "FP32", "shape": [rows, 16],
                                    "parameters": { "binary_data_size": rows * 64 } }] });
    let mut body = serde_json::to_vec(&head).expect("JSON");
    let length = body.len();
    body.extend(std::iter::repeat_n(0.5_f32.to_le_bytes(), rows * 16).flatten());
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small receive buffer");
    let mut stream = socket.connect(server.addr).await.expect("connect");
    let head = format!(
        "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: {length}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("send the head");
    stream.write_all(&body).await.expect("send the body");
    drop(body);
    until("the request charged", || app.in_flight_available() < budget).await;
    // The server gives up on the stalled answer: the connection goes, and the charge with it.
    within("the stalled connection closed", open.wait_for(|n| *n == 0)).await.expect("the server runs");
    until("the charge returned", || app.in_flight_available() == budget).await;
    drop(stream);
    server.stop().await;
}

/// Bodies are decoded on the blocking pool, never on an async worker: on a runtime with one
/// async worker and one blocking thread, held by an inference at the gate, large bodies are
/// received and queued — a malformed one is not even answered, since its decode waits for the
/// pool — while requests that need no blocking call are answered at once. Once the gate opens,
/// every body is decoded and answered.
#[test]
fn bodies_wait_for_the_blocking_pool_and_the_async_worker_stays_free() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (app, gate) = gated_with(ServeConfig::fixtures());
        let server = Server::start(app.clone()).await;
        // Loaded before the pool is held (a load is a blocking call too).
        assert_eq!(raw(server.addr, "PUT", "/models/mlp", "").await.0, 201);
        let mlp = fixture("mlp");
        let held = tokio::spawn({
            let (addr, body) = (server.addr, json!({ "input": mlp.input }).to_string());
            async move { raw(addr, "POST", "/models/mlp/infer", &body).await }
        });
        // The gate is waited for on a thread of the test's own: the pool's one thread is held.
        // (This future runs on the test's thread, not on the runtime's one worker.)
        let waiter = Arc::clone(&gate);
        std::thread::spawn(move || waiter.wait_inside(1)).join().expect("the inference at the gate");

        // Large bodies arrive, are charged and read, and wait for the pool to decode them.
        let large = format!("{{\"input\": [{}]}}", vec!["0.5"; 16 * 20_000].join(","));
        let posts: Vec<_> = (0..3)
            .map(|_| {
                let (addr, body) = (server.addr, large.clone());
                tokio::spawn(async move { raw(addr, "POST", "/models/mlp/infer", &body).await })
            })
            .collect();
        let mut malformed = tokio::spawn({
            let addr = server.addr;
            async move { raw(addr, "POST", "/models/mlp/infer", "{\"input\": [1, 2").await }
        });
        until("the bodies queued for the pool", || app.calls_in_flight() == 5).await;
        // The async worker answers what needs no blocking call.
        for probe in ["/v2/health/ready", "/v2/health/live", "/v2"] {
            assert_eq!(raw(server.addr, "GET", probe, "").await.0, 200, "{probe}");
        }
        let early = tokio::time::timeout(Duration::from_millis(200), &mut malformed).await;
        assert!(early.is_err(), "a malformed body was answered before the pool decoded it: {early:?}");

        gate.open();
        assert_eq!(held.await.expect("the held inference").0, 200);
        let (status, body) = malformed.await.expect("the malformed body");
        assert_eq!((status, &body["kind"]), (400, &json!("bad_json")), "{body}");
        for post in posts {
            let (status, body) = post.await.expect("a large body");
            assert_eq!(status, 200, "{body}");
        }
        until("the queue empties", || app.calls_in_flight() == 0).await;
        server.stop().await;
    });
}
