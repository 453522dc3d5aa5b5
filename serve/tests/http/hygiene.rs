//! Input and output hygiene over HTTP: content types, JSON arrays where an object belongs, ids
//! that hide characters or that the protocol's paths could not address, aliases that would
//! shadow a catalogue model, and an id's source shown where its model is described.

use super::*;

/// `method` on `path` with `body` and a `Content-Type` of `kind`.
async fn typed(client: &Client, method: hyper::Method, path: &str, kind: &str, body: &str) -> (u16, Value) {
    let request = client.http.request(method, format!("{}{path}", client.base));
    let request = request.header("content-type", kind).body(body.to_owned());
    Client::reply(request.send().await.expect("a request")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_must_be_json_objects_of_a_json_type() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    assert_eq!(client.put("mlp", None).await.0, 201);
    let input = json!({ "input": fixture("mlp").input }).to_string();
    let post = hyper::Method::POST;
    for kind in ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"] {
        let (status, body) = typed(client, post.clone(), "/models/mlp/infer", kind, &input).await;
        assert_eq!((status, &body["kind"]), (415, &json!("unsupported_media_type")), "{kind}: {body}");
    }
    let (status, _) =
        typed(client, post.clone(), "/models/mlp/infer", "application/json; charset=utf-8", &input).await;
    assert_eq!(status, 200, "JSON with a charset");

    // serde reads a struct from an array of its fields' values; no route does.
    let json = "application/json";
    let (status, body) = typed(client, hyper::Method::PUT, "/models/mlp", json, r#"["mlp", false]"#).await;
    assert_eq!((status, &body["kind"]), (400, &json!("bad_json")), "{body}");
    let array = json!([fixture("mlp").input]).to_string();
    assert_eq!(typed(client, post.clone(), "/models/mlp/infer", json, &array).await.0, 400);
    let (status, _) = typed(client, post.clone(), "/v2/models/mlp/infer", json, "[[]]").await;
    assert_eq!(status, 400);
    let (status, _) = typed(client, post, "/v2/repository/models/mlp/load", json, "[]").await;
    assert_eq!(status, 400);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_hiding_characters_or_unaddressable_are_refused_and_aliases_keep_to_their_names() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    let ids = [
        "mlp%E2%80%AEtxt",
        "a%E2%81%A6b",
        "zero%E2%80%8Bwidth",
        "mode%CC%80le",
        "a/infer",
        "a/versions/2",
        "ready",
    ];
    for id in ids {
        let (status, body) = client.put(id, Some(json!({ "source": "mlp" }))).await;
        assert_eq!((status, &body["kind"]), (400, &json!("invalid_id")), "{id}: {body}");
    }
    // An alias may not take a catalogue model's name, through either family of routes.
    let (status, body) = client.put("cnn", Some(json!({ "source": "mlp" }))).await;
    assert_eq!((status, &body["kind"]), (409, &json!("catalogue_name")), "{body}");
    let url = format!("{}/v2/repository/models/cnn/load", client.base);
    let load = json!({ "parameters": { "source": "mlp" } });
    let response = client.http.post(url).json(&load).send().await.expect("POST");
    assert_eq!(response.status().as_u16(), 409);
    assert!(server.client.models().await.is_empty(), "nothing was served by a refused request");

    // An id's answers name the source it really serves.
    let (status, body) = client.put("detector", Some(json!({ "source": "mlp" }))).await;
    assert_eq!((status, &body["source"]), (201, &json!("mlp")), "{body}");
    let (status, body) = client.put("detector", Some(json!({ "source": "cnn", "replace": false }))).await;
    assert_eq!((status, &body["status"], &body["source"]), (200, &json!("present"), &json!("mlp")), "{body}");
    let (status, body) = client.get_v2("/models/detector").await;
    assert_eq!((status, &body["parameters"]["source"]), (200, &json!("mlp")), "{body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_takes_the_shape_the_model_declares() {
    let server = Server::start(App::new(ServeConfig::fixtures()).expect("the server builds")).await;
    let client = &server.client;
    assert_eq!(client.put("cnn", None).await.0, 201);
    let cnn = fixture("cnn");
    let rows = cnn.input.len() / 64;
    let request = |shape: Value| json!({ "inputs": [{ "name": "input", "datatype": "FP32", "shape": shape, "data": cnn.input }] });
    // Images, as declared; rows of 64 values are not the CNN's shape (nor is another channel count).
    let (status, body) = client.infer_v2("cnn", &request(json!([rows, 1, 8, 8]))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outputs"][0]["shape"], json!([rows, 3]), "{body}");
    for wrong in [json!([rows, 64]), json!([rows, 4, 4, 4]), json!([rows * 8, 8])] {
        let (status, body) = client.infer_v2("cnn", &request(wrong.clone())).await;
        assert_eq!(status, 400, "{wrong}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| e.contains("[-1, 1, 8, 8]")), "{body}");
    }
    // The server's own route still takes flat rows of the declared row's size.
    assert_eq!(client.infer("cnn", &cnn.input).await.0, 200);
    server.stop().await;
}
