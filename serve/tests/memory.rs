//! The in-flight byte budget, measured by the allocator and by the kernel rather than by the
//! server's own counter: five concurrent maximal requests (bodies at the body limit, tensors at
//! the element cap — two as JSON, two as binary tensors, and one JSON body of twice the cap's
//! elements, refused while it decodes) make the heap grow by no more than the budget they are
//! charged against, and the process's peak RSS by no more than twice that.
//!
//! One test in this binary, so that no other test's allocations are counted.

use std::alloc::System;
use std::net::SocketAddr;

use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};
use resident_serve::{App, Limits, ServeConfig, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static HEAP: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The body limit of the test's server.
const BODY: u64 = 1024 * 1024;
/// What the heap may hold beyond the charges: connections' read buffers, tasks, the runtime's
/// own bookkeeping.
const SLACK: u64 = 2 * 1024 * 1024;

/// A kernel figure of this process from `/proc/self/status`, in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("the field");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number");
    kib * 1024
}

/// Sends `head` and `body` on a connection of its own; returns the status and the answer's
/// length, reading it into a fixed buffer (the client's own heap stays flat).
async fn exchange(addr: SocketAddr, head: String, body: &[u8]) -> (u16, usize) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head =
        format!("{head}\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).await.expect("send the head");
    stream.write_all(body).await.expect("send the body");
    let mut buffer = [0_u8; 16 * 1024];
    let mut first = Vec::with_capacity(16);
    let mut total = 0;
    loop {
        let n = stream.read(&mut buffer).await.expect("receive");
        if n == 0 {
            break;
        }
        if first.len() < 12 {
            first.extend_from_slice(&buffer[..n.min(12)]);
        }
        total += n;
    }
    let status = std::str::from_utf8(&first[9..12]).ok().and_then(|s| s.parse().ok()).expect("a status");
    (status, total)
}

/// A body of exactly [`BODY`] bytes for the server's own route: `elements` zeros, then padding.
fn json_body(elements: usize) -> Vec<u8> {
    let mut body = b"{\"input\":[".to_vec();
    body.extend(std::iter::repeat_n(b"0,".as_slice(), elements - 1).flatten());
    body.extend_from_slice(b"0]}");
    body.resize(usize::try_from(BODY).unwrap(), b' ');
    body
}

/// A binary-tensor request of [`BODY`] bytes: the JSON head, then the elements.
fn binary_body() -> (String, Vec<u8>) {
    let rows = (usize::try_from(BODY).unwrap() - 512) / 64;
    let head = serde_json::json!({
        "inputs": [{ "name": "input", "datatype": "FP32", "shape": [rows, 16],
                     "parameters": { "binary_data_size": rows * 64 } }],
        "outputs": [{ "name": "output", "parameters": { "binary_data": true } }],
    });
    let mut json = serde_json::to_vec(&head).expect("JSON");
    json.resize(512, b' ');
    let length = json.len();
    json.extend(std::iter::repeat_n(0.25_f32.to_le_bytes(), rows * 16).flatten());
    (format!("Inference-Header-Content-Length: {length}"), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_maximal_requests_stay_within_the_in_flight_budget() {
    let probe = App::new(ServeConfig::fixtures()).expect("the server builds");
    // A quarter of what a body of zeros could hold: the decoders must stop at the cap.
    let limits = Limits { max_body_bytes: BODY, max_elements: BODY / 4, ..Limits::default() };
    let charge = App::new(ServeConfig { limits: limits.clone(), ..ServeConfig::fixtures() })
        .expect("the server builds")
        .charge_for(BODY);
    drop(probe);
    // Room for the five charges at once, so that all five run together.
    let limits = Limits { inflight_bytes: 5 * charge + 5 * 1024, ..limits };
    let budget = limits.inflight_bytes;
    let app = App::new(ServeConfig { limits, ..ServeConfig::fixtures() }).expect("the server builds");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async {
        let _ = stopped.await;
    }));
    let (status, _) = exchange(addr, "PUT /models/mlp HTTP/1.1".into(), b"").await;
    assert_eq!(status, 201);

    // At the cap, and (refused while it decodes) twice past it.
    let cap = usize::try_from(BODY / 4).unwrap();
    let json = json_body(cap);
    let over = json_body(cap * 2 - 16);
    let (binary_header, binary) = binary_body();
    // The peak RSS restarts from now (Linux: `5` to clear_refs resets VmHWM).
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
    let rss_before = status_bytes("VmRSS:");
    HEAP.reset_peak_memory();
    let requests = (0..5).map(|i| {
        let (json, over, binary, header) =
            (json.clone(), over.clone(), binary.clone(), binary_header.clone());
        tokio::spawn(async move {
            match i {
                0 | 1 => exchange(addr, "POST /models/mlp/infer HTTP/1.1".into(), &json).await,
                2 => exchange(addr, "POST /models/mlp/infer HTTP/1.1".into(), &over).await,
                _ => exchange(addr, format!("POST /v2/models/mlp/infer HTTP/1.1\r\n{header}"), &binary).await,
            }
        })
    });
    let answers = futures_join(requests.collect()).await;
    let peak = HEAP.get_peak_memory() as u64;
    let rss_peak = status_bytes("VmHWM:");
    for (i, (status, length)) in answers.iter().enumerate() {
        let want = if i == 2 { 413 } else { 200 };
        assert_eq!(*status, want, "request {i} ({length} bytes)");
    }
    // The clients' copies of the bodies (5 MiB) are counted too: the heap saw the requests.
    assert!(peak >= 5 * BODY, "heap peak {peak} below five bodies: the measurement is blind");
    let bound = budget + 5 * BODY + SLACK;
    assert!(peak <= bound, "heap peak {peak} over the budget {budget} + the clients' bodies + slack");
    let rss_growth = rss_peak.saturating_sub(rss_before);
    assert!(rss_growth <= 2 * bound, "peak RSS grew by {rss_growth}, over twice the heap bound {bound}");
    println!(
        "5 maximal requests: charge {charge} each, budget {budget}; heap peak {peak}; RSS {rss_before} -> peak {rss_peak} (+{rss_growth}); answers {:?}",
        answers.iter().map(|(_, n)| n).collect::<Vec<_>>()
    );
    stop.send(()).expect("the server runs");
    server.await.expect("the server task");
}

/// Awaits every task, in order.
async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("a request task"));
    }
    out
}
