//! A body sent in one-byte chunks, measured by the allocator: while the server reads it, it
//! holds the body's bytes (within the request's charge), not a handle and a read buffer per
//! chunk.
//!
//! One test in this binary, so that no other test's allocations are counted.

use std::alloc::System;

use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};
use resident_serve::{App, Limits, ServeConfig, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[global_allocator]
static HEAP: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The body limit of the test's server, and the body's length.
const BODY: u64 = 1024 * 1024;
/// What the heap may hold beyond the charge: the connection's buffers, tasks, the runtime.
const SLACK: u64 = 2 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_of_one_byte_chunks_holds_its_bytes_not_its_chunks() {
    let limits = Limits { max_body_bytes: BODY, max_elements: BODY / 4, ..Limits::default() };
    let app = App::new(ServeConfig { limits, ..ServeConfig::fixtures() }).expect("the server builds");
    // A chunked body is charged as the largest body accepted.
    let charge = app.charge_for(BODY);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app, async {
        let _ = stopped.await;
    }));

    // A JSON body of spaces (a 400 once read), one byte a chunk: six bytes on the wire each.
    let mut wire = format!(
        "POST /models/mlp/infer HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..BODY {
        wire.extend_from_slice(b"1\r\n \r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    HEAP.reset_peak_memory();
    stream.write_all(&wire).await.expect("send the request");
    let mut answer = Vec::with_capacity(64 * 1024);
    stream.read_to_end(&mut answer).await.expect("receive");
    let peak = HEAP.get_peak_memory() as u64;
    let status = std::str::from_utf8(&answer[9..12]).expect("a status line");
    assert_eq!(status, "400", "the body was read whole, then refused as JSON");
    assert!(peak >= BODY, "heap peak {peak} below the body: the measurement is blind");
    assert!(peak <= charge + SLACK, "heap peak {peak} over the charge {charge} + slack");
    println!("one-byte chunks: {BODY} bytes, charge {charge}; heap peak {peak}");
    let _ = stop.send(());
    server.await.expect("the server task");
}
