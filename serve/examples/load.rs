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

/// One client's requests; their latencies.
async fn client(url: String, body: String, requests: usize) -> Vec<Duration> {
    let client = reqwest::Client::new();
    let mut latencies = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        let request = client.post(&url).header("content-type", "application/json").body(body.clone());
        let response = request.send().await.expect("the server answers");
        assert_eq!(response.status().as_u16(), 200, "an inference is served");
        response.bytes().await.expect("the answer's body");
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
    let url = format!("http://{addr}/v2/models/mlp/infer");
    let started = Instant::now();
    let tasks: Vec<_> =
        (0..clients).map(|_| tokio::spawn(client(url.clone(), body.clone(), requests))).collect();
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
