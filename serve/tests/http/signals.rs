//! The binary's shutdown over real signals: bounded by about twice `--shutdown-timeout` with a
//! long forward pass in flight, and cut short by a second signal.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// A running `resident-serve` and the address it printed.
struct Process {
    child: Child,
    addr: SocketAddr,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Process {
    fn start(shutdown_timeout: &str) -> Self {
        Self::start_with(&["--shutdown-timeout", shutdown_timeout])
    }

    fn start_with(args: &[&str]) -> Self {
        Self::start_in(&ServeConfig::fixtures_dir(), args)
    }

    fn start_in(models: &std::path::Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_resident-serve"))
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .arg("--models-dir")
            .arg(models)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        let stdout = BufReader::new(child.stdout.take().expect("its output"));
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let serving = Self::wait_line(&lines, "serving");
        let addr = serving
            .split_whitespace()
            .find_map(|word| word.strip_prefix("address="))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("an address in {serving:?}"));
        Self { child, addr, lines }
    }

    fn wait_line(lines: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
        loop {
            let line =
                lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{needle:?}: {e}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    fn signal(&self) {
        let status = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -TERM");
    }

    /// Waits for the process to exit; its status and how long that took.
    fn exit(mut self, bound: Duration) -> (Option<i32>, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("the process") {
                return (status.code(), started.elapsed());
            }
            if started.elapsed() > bound {
                let _ = self.child.kill();
                panic!("the server did not exit within {bound:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts a forward pass of many CNN rows on `addr`, and returns once the server reports it in
/// flight (its `/metrics`).
async fn long_inference(addr: SocketAddr) -> JoinHandle<Option<u16>> {
    let client = HttpClient::new();
    let base = format!("http://{addr}");
    let put = client.put(format!("{base}/models/cnn")).send().await.expect("PUT");
    assert_eq!(put.status().as_u16(), 201);
    // Within the default element cap (4 Mi): 64 values a row.
    let rows = 65_000;
    let head = json!({ "inputs": [{ "name": "input", "datatype": "FP32", "shape": [rows, 1, 8, 8],
                                    "parameters": { "binary_data_size": rows * 256 } }] });
    let mut body = serde_json::to_vec(&head).expect("JSON");
    let length = body.len();
    body.extend(std::iter::repeat_n(0.5_f32.to_le_bytes(), rows * 64).flatten());
    let request = client
        .post(format!("{base}/v2/models/cnn/infer"))
        .header("Inference-Header-Content-Length", length)
        .body(body);
    let task = tokio::spawn(async move { request.send().await.ok().map(|r| r.status().as_u16()) });
    loop {
        let text =
            client.get(format!("{base}/metrics")).send().await.expect("GET").text().await.expect("text");
        if metric(&text, "resident_http_calls_in_flight", &[]).is_some_and(|n| n >= 1.0) {
            return task;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_is_bounded_with_a_long_forward_pass_in_flight() {
    let process = Process::start("1");
    let inference = long_inference(process.addr).await;
    process.signal();
    let (code, took) =
        tokio::task::spawn_blocking(move || process.exit(Duration::from_secs(60))).await.unwrap();
    assert_eq!(code, Some(0), "the pass stopped at its next batch, and every model was unloaded");
    assert!(
        took < Duration::from_secs(6),
        "exited {took:?} after the signal, over twice the 1 s timeout and slack"
    );
    assert_ne!(inference.await.expect("the request task"), Some(200), "the pass was cut short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let process = Process::start("600");
    let _inference = long_inference(process.addr).await;
    process.signal();
    Process::wait_line(&process.lines, "shutting down");
    process.signal();
    let (code, took) =
        tokio::task::spawn_blocking(move || process.exit(Duration::from_secs(60))).await.unwrap();
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(10), "exited {took:?} after the second signal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_load_at_start_and_requests_are_logged_with_their_ids() {
    let process = Process::start_with(&["--load", "mlp,detector=cnn"]);
    let client = HttpClient::new();
    let base = format!("http://{}", process.addr);
    let response =
        client.get(format!("{base}/models")).header("x-request-id", "trace-me").send().await.expect("GET");
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["models"], json!(["detector", "mlp"]));
    let line = Process::wait_line(&process.lines, "trace-me");
    assert!(line.contains("status=200") && line.contains("/models"), "an access line: {line}");
    process.signal();
    let (code, _) = tokio::task::spawn_blocking(move || process.exit(Duration::from_secs(60))).await.unwrap();
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_is_logged_with_its_cause_and_answered_without_paths() {
    // A catalogue entry whose file went missing: the server's fault, logged in full.
    let dir = models_dir_with_copy("vanishing", "mlp");
    std::fs::remove_file(dir.join("vanishing.safetensors")).expect("the copy removed");
    let process = Process::start_in(&dir, &[]);
    let client = HttpClient::new();
    let response = client.put(format!("http://{}/models/vanishing", process.addr)).send().await.expect("PUT");
    assert_eq!(response.status().as_u16(), 500);
    let body: Value = response.json().await.expect("JSON");
    let text = body["error"].as_str().expect("an error");
    assert!(text.contains("vanishing.safetensors") && !text.contains(&*dir.to_string_lossy()), "{text}");
    let line = Process::wait_line(&process.lines, "load failed");
    assert!(
        line.contains("vanishing") && line.contains(&*dir.to_string_lossy()),
        "the cause, in full: {line}"
    );
    process.signal();
    let (code, _) = tokio::task::spawn_blocking(move || process.exit(Duration::from_secs(60))).await.unwrap();
    assert_eq!(code, Some(0));
    std::fs::remove_dir_all(&dir).expect("scratch removed");
}
