//! A load generator for `resident-serve`: `clients` concurrent clients, each sending `requests`
//! Open Inference Protocol JSON inferences of three rows to `mlp`, one after another; prints
//! the throughput and the latency percentiles. The server must serve `mlp` (`--load mlp`).
//!
//! ```text
//! cargo build --release -p resident-serve --bin resident-serve --example load
//! target/release/resident-serve --bind 127.0.0.1:8080 --load mlp &
//! target/release/examples/load 127.0.0.1:8080 4 3000
//! ```

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One client's requests, one after another on one kept-alive connection; their latencies.
async fn client(addr: String, body: Bytes, requests: usize) -> Vec<Duration> {
    let stream = TcpStream::connect(&addr).await.expect("the server accepts");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("an HTTP/1.1 connection");
    tokio::spawn(connection);
    let mut latencies = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        let request = hyper::Request::post("/v2/models/mlp/infer")
            .header(HOST, &addr)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .expect("a valid request");
        sender.ready().await.expect("the connection stays open");
        let response = sender.send_request(request).await.expect("the server answers");
        assert_eq!(response.status().as_u16(), 200, "an inference is served");
        response.into_body().collect().await.expect("the answer's body");
        latencies.push(started.elapsed());
    }
    latencies
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, clients, requests] = args.as_slice() else {
        eprintln!("usage: load <address> <clients> <requests per client>");
        std::process::exit(2);
    };
    let clients: usize = clients.parse().expect("a count of clients");
    let requests: usize = requests.parse().expect("a count of requests");
    let input: Vec<f32> = (0..48_u8).map(|i| f32::from(i) / 48.0 - 0.5).collect();
    let body = serde_json::json!({
        "inputs": [{ "name": "input", "datatype": "FP32", "shape": [3, 16], "data": input }]
    })
    .to_string();
    let body = Bytes::from(body);
    let started = Instant::now();
    let tasks: Vec<_> =
        (0..clients).map(|_| tokio::spawn(client(addr.clone(), body.clone(), requests))).collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a client"));
    }
    let wall = started.elapsed();
    latencies.sort();
    let at = |q: usize| latencies[(latencies.len() * q / 100).min(latencies.len() - 1)];
    let rate = latencies.len() as f64 / wall.as_secs_f64();
    println!(
        "{clients} clients: {} requests in {wall:.2?}: {rate:.0} req/s; p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        at(50),
        at(99),
        latencies[latencies.len() - 1]
    );
}
