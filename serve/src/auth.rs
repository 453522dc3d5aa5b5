//! The control token: with [`ServeConfig::control_token`](crate::ServeConfig::control_token)
//! set, every route that changes what is served — `PUT` and `DELETE /models/{id}`, `POST
//! /models/{id}/pin` and `/unpin`, `POST /v2/repository/models/{name}/load` and `/unload` —
//! requires `Authorization: Bearer <token>` (401 with `WWW-Authenticate: Bearer` otherwise,
//! compared in constant time). Inference, metadata, health, the index and metrics stay open.

use std::fmt;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use resident::Loader;
use subtle::ConstantTimeEq;

use crate::app::App;
use crate::error::ApiError;
use crate::model::ServeModel;
use crate::routes::counted;

/// A secret that never shows in logs or `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// `token` as a secret.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// Whether `offered` is this secret, compared in constant time.
    fn matches(&self, offered: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(offered).into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Whether `method path` changes what is served.
pub(crate) fn is_control(method: &Method, path: &str) -> bool {
    let model = path.strip_prefix("/models/");
    let repository = path.strip_prefix("/v2/repository/models/");
    match *method {
        Method::PUT | Method::DELETE => model.is_some(),
        Method::POST => {
            model.is_some_and(|rest| rest.ends_with("/pin") || rest.ends_with("/unpin"))
                || repository.is_some_and(|rest| rest.ends_with("/load") || rest.ends_with("/unload"))
        }
        _ => false,
    }
}

/// Refuses a control request without the token, when one is configured.
pub(crate) async fn authorize<L>(State(app): State<App<L>>, request: Request, next: Next) -> Response
where
    L: Loader,
    L::Model: ServeModel,
{
    let Some(token) = &app.config().control_token else { return next.run(request).await };
    if !is_control(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    let offered = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
    if offered.is_some_and(|offered| token.matches(offered)) {
        return next.run(request).await;
    }
    let error = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "this route needs the control token");
    let mut response = counted("control", Err::<Response, _>(error)).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_routes_are_those_that_change_what_is_served() {
        let control = [
            (Method::PUT, "/models/mlp"),
            (Method::DELETE, "/models/coco/3"),
            (Method::POST, "/models/mlp/pin"),
            (Method::POST, "/models/mlp/unpin"),
            (Method::POST, "/v2/repository/models/mlp/load"),
            (Method::POST, "/v2/repository/models/mlp/unload"),
        ];
        for (method, path) in control {
            assert!(is_control(&method, path), "{method} {path}");
        }
        let open = [
            (Method::POST, "/models/mlp/infer"),
            (Method::GET, "/models"),
            (Method::POST, "/v2/models/mlp/infer"),
            (Method::POST, "/v2/repository/index"),
            (Method::GET, "/metrics"),
        ];
        for (method, path) in open {
            assert!(!is_control(&method, path), "{method} {path}");
        }
        let secret = Secret::new("s3cret");
        assert!(secret.matches(b"s3cret") && !secret.matches(b"s3cre") && !secret.matches(b""));
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }
}
