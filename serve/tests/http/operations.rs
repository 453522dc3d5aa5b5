//! Operating the server: request ids, the control token, pins over HTTP, and models loaded at
//! start with their access log lines.

use super::*;
use std::time::Duration;

use resident_serve::Secret;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_honoured_or_made_and_echoed() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let url = format!("{}/v2/health/live", server.client.base);
    let mine = server.client.http.get(&url).header("x-request-id", "abc-123").send().await.expect("GET");
    assert_eq!(mine.headers().get("x-request-id").map(|v| v.to_str().unwrap()), Some("abc-123"));
    let ids: Vec<String> = futures_ids(&server.client, &url).await;
    assert!(ids.iter().all(|id| !id.is_empty()), "{ids:?}");
    assert_ne!(ids[0], ids[1], "each request gets an id of its own");
    server.stop().await;
}

async fn futures_ids(client: &Client, url: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let response = client.http.get(url).send().await.expect("GET");
        ids.push(response.headers().get("x-request-id").expect("an id").to_str().expect("text").to_owned());
    }
    ids
}

/// A request through the router alone, from `peer` (as the connection loop records it).
async fn from_peer(router: &axum::Router, peer: &str, method: &str, path: &str) -> (u16, serde_json::Value) {
    use tower::ServiceExt;
    let peer: std::net::SocketAddr = peer.parse().expect("an address");
    let mut request = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .body(axum::body::Body::empty())
        .expect("a request");
    request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("a body");
    (status, serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_only_loopback_clients_change_what_is_served_unless_opened() {
    let app = App::new(ServeConfig::fixtures()).expect("the server builds");
    let router = app.router();
    let remote = "192.0.2.7:40000";
    let (status, body) = from_peer(&router, remote, "PUT", "/models/mlp").await;
    assert_eq!((status, &body["kind"]), (403, &json!("forbidden")), "{body}");
    assert_eq!(from_peer(&router, remote, "POST", "/v2/repository/models/mlp/load").await.0, 403);
    assert!(app.stack().ids().is_empty(), "nothing served");
    // A loopback client (IPv4, IPv6, IPv4 mapped) changes what is served; a remote one still
    // cannot, nor can a request whose client is unknown.
    assert_eq!(from_peer(&router, "[::ffff:127.0.0.1]:40000", "PUT", "/models/mlp").await.0, 201);
    for (method, path) in [("POST", "/models/mlp/pin"), ("DELETE", "/models/mlp")] {
        assert_eq!(from_peer(&router, "[2001:db8::1]:40000", method, path).await.0, 403, "{path}");
    }
    let mut unknown = axum::http::Request::delete("/models/mlp").body(axum::body::Body::empty()).expect("ok");
    unknown.extensions_mut().clear();
    let response = tower::ServiceExt::oneshot(router.clone(), unknown).await.expect("infallible");
    assert_eq!(response.status(), 403, "a client of unknown address");
    assert_eq!(app.stack().ids(), ["mlp"], "still served");
    // Inference stays open to every client.
    assert_ne!(from_peer(&router, remote, "GET", "/v2/models/mlp").await.0, 403);
    assert_eq!(from_peer(&router, "[::1]:40000", "DELETE", "/models/mlp").await.0, 204);
    // Opened, every client may.
    let open = App::new(ServeConfig { open_control: true, ..ServeConfig::fixtures() }).expect("builds");
    assert_eq!(from_peer(&open.router(), remote, "PUT", "/models/mlp").await.0, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_token_guards_what_changes_the_served_models_and_pins_hold() {
    // The add refused below waits for room until its request's deadline (the cache's own
    // capacity wait, 5 s, is longer): 2 s instead of the default 30 s.
    let config = ServeConfig {
        control_token: Secret::new("s3cret"),
        max_models: 1,
        request_timeout: Duration::from_secs(2),
        ..ServeConfig::fixtures()
    };
    let server = Server::start(App::new(config).expect("the server builds")).await;
    let base = &server.client.base;
    let http = &server.client.http;
    let send = |request: client::RequestBuilder| async move {
        Client::reply(request.send().await.expect("a request")).await
    };
    // Without the token (or with another), nothing changes.
    let (status, body) = send(http.put(format!("{base}/models/mlp"))).await;
    assert_eq!((status, &body["kind"]), (401, &json!("unauthorized")), "{body}");
    let wrong = http.put(format!("{base}/models/mlp")).bearer_auth("guess");
    assert_eq!(send(wrong).await.0, 401);
    let load = http.post(format!("{base}/v2/repository/models/mlp/load"));
    assert_eq!(send(load).await.0, 401);
    // No spelling of a control path gets past the token: it is checked on the decoded path.
    for spelling in ["mlp%2Fload", "mlp/lo%61d", "mlp%2fload"] {
        let load = http.post(format!("{base}/v2/repository/models/{spelling}"));
        assert_eq!(send(load).await.0, 401, "{spelling}");
    }
    for spelling in ["mlp%2Fpin", "mlp/p%69n", "MLP/../mlp/pin"] {
        let (status, body) = send(http.post(format!("{base}/models/{spelling}"))).await;
        assert!(matches!(status, 401 | 400 | 404), "{spelling}: {status} {body}");
        assert_ne!(status, 204, "{spelling}");
    }
    let wrong_case = http.put(format!("{base}/models/mlp")).header("authorization", "bearer s3cret");
    assert_eq!(send(wrong_case).await.0, 201, "the scheme is case-insensitive");
    let (status, _) = send(http.delete(format!("{base}/models/mlp")).bearer_auth("s3cret")).await;
    assert_eq!(status, 204);
    assert!(server.client.models().await.is_empty());

    let put = |id: &str| http.put(format!("{base}/models/{id}")).bearer_auth("s3cret");
    assert_eq!(send(put("mlp")).await.0, 201);
    // Inference and metadata stay open.
    assert_eq!(server.client.infer("mlp", &fixture("mlp").input).await.0, 200);
    // A pinned model is not evicted for another: with room for one, the add is refused.
    let pin = |id: &str, what: &str| http.post(format!("{base}/models/{id}/{what}")).bearer_auth("s3cret");
    assert_eq!(send(http.post(format!("{base}/models/mlp/pin"))).await.0, 401);
    let (status, body) = send(pin("never-served", "pin")).await;
    assert_eq!((status, &body["kind"]), (404, &json!("not_found")), "only a served id is pinned: {body}");
    assert_eq!(send(pin("mlp", "pin")).await.0, 204);
    let (status, body) = send(put("cnn")).await;
    assert_eq!(status, 507, "{body}");
    assert_eq!(server.client.models().await, ["mlp"]);
    assert_eq!(send(pin("mlp", "unpin")).await.0, 204);
    assert_eq!(send(put("cnn")).await.0, 201, "unpinned, mlp makes room");
    assert_eq!(server.client.models().await, ["cnn"]);
    // A DELETE forgets the id's pin with its model: served again, it makes room like any other.
    assert_eq!(send(pin("cnn", "pin")).await.0, 204);
    assert_eq!(send(http.delete(format!("{base}/models/cnn")).bearer_auth("s3cret")).await.0, 204);
    assert_eq!(send(put("cnn")).await.0, 201);
    assert_eq!(send(put("mlp")).await.0, 201, "cnn, served again, is no longer pinned");
    assert_eq!(server.client.models().await, ["mlp"]);
    // So does the repository's unload.
    assert_eq!(send(pin("mlp", "pin")).await.0, 204);
    let unload = http.post(format!("{base}/v2/repository/models/mlp/unload")).bearer_auth("s3cret");
    assert_eq!(send(unload).await.0, 200);
    assert_eq!(send(put("mlp")).await.0, 201);
    assert_eq!(send(put("cnn")).await.0, 201, "mlp, served again, is no longer pinned");
    assert_eq!(server.client.models().await, ["cnn"]);
    server.stop().await;
}
