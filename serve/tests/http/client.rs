//! A small HTTP/1.1 client over hyper's connection API, for the tests' requests. Like the
//! clients people use, it keeps a connection alive between requests (one idle connection per
//! client, shared by its clones), so the server meets idle kept-alive connections, at shutdown
//! too; it reads the whole answer before `send` returns, and resolves `.` and `..` segments as a
//! URL parser does. [`raw`](super::raw) sends a target exactly as written.

use std::fmt::Display;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HOST, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What a request can fail with: no connection, a malformed URL or header, a broken answer.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// A connection kept alive after its answer, and the server it goes to.
type Idle = (String, SendRequest<Full<Bytes>>);

/// Makes requests; its clones share its idle connection.
#[derive(Clone, Default)]
pub(crate) struct HttpClient {
    idle: Arc<Mutex<Option<Idle>>>,
}

impl HttpClient {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn request(&self, method: Method, url: impl Into<String>) -> RequestBuilder {
        let idle = Arc::clone(&self.idle);
        RequestBuilder { idle, method, url: url.into(), headers: Vec::new(), body: Vec::new() }
    }

    pub(crate) fn get(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    pub(crate) fn put(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    pub(crate) fn post(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    pub(crate) fn delete(&self, url: impl Into<String>) -> RequestBuilder {
        self.request(Method::DELETE, url)
    }
}

/// A request being built.
pub(crate) struct RequestBuilder {
    idle: Arc<Mutex<Option<Idle>>>,
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RequestBuilder {
    pub(crate) fn header(mut self, name: &str, value: impl Display) -> Self {
        self.headers.push((name.to_owned(), value.to_string()));
        self
    }

    pub(crate) fn bearer_auth(self, token: &str) -> Self {
        self.header("authorization", format!("Bearer {token}"))
    }

    pub(crate) fn json(self, value: &impl serde::Serialize) -> Self {
        let body = serde_json::to_vec(value).expect("a value that serializes");
        self.header("content-type", "application/json").body(body)
    }

    pub(crate) fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sends the request on the client's idle connection to the server, else on a new one, and
    /// reads the whole answer; the connection is kept for the next request.
    pub(crate) async fn send(self) -> Result<Response, Error> {
        let rest = self.url.strip_prefix("http://").ok_or("only http:// URLs")?;
        let (authority, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(authority)?);
        for (name, value) in &self.headers {
            headers.append(HeaderName::from_bytes(name.as_bytes())?, HeaderValue::from_str(value)?);
        }
        let head = Head { method: self.method, uri: resolve_dots(target).parse()?, headers };
        let body = Bytes::from(self.body);
        let kept = self.idle.lock().expect("idle connection").take().filter(|(to, _)| to == authority);
        let (mut sender, fresh) = match kept {
            Some((_, sender)) => (sender, false),
            None => (connect(authority).await?, true),
        };
        // A kept connection the server closed meanwhile is replaced before anything is sent on
        // it; once a request is sent, it is never sent again.
        if !fresh && sender.ready().await.is_err() {
            sender = connect(authority).await?;
        }
        let response = exchange(&mut sender, &head, &body).await?;
        *self.idle.lock().expect("idle connection") = Some((authority.to_owned(), sender));
        Ok(response)
    }
}

/// A new connection to `authority`, its connection task spawned.
async fn connect(authority: &str) -> Result<SendRequest<Full<Bytes>>, Error> {
    let stream = TcpStream::connect(authority).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// What is sent before a request's body.
struct Head {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

/// One request and its whole answer on `sender`.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    head: &Head,
    body: &Bytes,
) -> Result<Response, Error> {
    let mut request = hyper::Request::new(Full::new(body.clone()));
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = head.uri.clone();
    *request.headers_mut() = head.headers.clone();
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Response { status: parts.status, headers: parts.headers, body })
}

/// An answer, read whole.
pub(crate) struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Response {
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    pub(crate) async fn bytes(self) -> Result<Bytes, Error> {
        Ok(self.body)
    }

    pub(crate) async fn text(self) -> Result<String, Error> {
        Ok(String::from_utf8(self.body.to_vec())?)
    }

    pub(crate) async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, Error> {
        Ok(serde_json::from_slice(&self.body)?)
    }
}

/// The path with its `.` and `..` segments resolved (RFC 3986, 5.2.4), the query kept.
fn resolve_dots(target: &str) -> String {
    let (path, query) = target.split_at(target.find('?').unwrap_or(target.len()));
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." if last => kept.push(""),
            "." => {}
            ".." => {
                kept.pop();
                if last {
                    kept.push("");
                }
            }
            segment => kept.push(segment),
        }
    }
    format!("/{}{query}", kept.join("/"))
}

#[test]
fn dot_segments_resolve_as_a_url_parser_resolves_them() {
    assert_eq!(resolve_dots("/models/MLP/../mlp/pin"), "/models/mlp/pin");
    assert_eq!(resolve_dots("/a/./b/../../c?x=1"), "/c?x=1");
    assert_eq!(resolve_dots("/models/a/.."), "/models/");
    assert_eq!(resolve_dots(""), "/");
    assert_eq!(resolve_dots("/models/mlp%2F..%2Fpin"), "/models/mlp%2F..%2Fpin");
}
