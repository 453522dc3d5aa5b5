//! The control token: with [`ServeConfig::control_token`](crate::ServeConfig::control_token)
//! set, every route that changes what is served — `PUT` and `DELETE /models/{id}`, `POST
//! /models/{id}/pin` and `/unpin`, `POST /v2/repository/models/{name}/load` and `/unload` —
//! requires `Authorization: Bearer <token>` (the scheme in any case; 401 with
//! `WWW-Authenticate: Bearer` otherwise). Each of those handlers checks it itself, after the
//! router has decoded its path, so no spelling of the path (`mlp%2Fpin`) reaches a control
//! action without it. A request with a body that names one of those routes on its raw path is
//! also refused without the token before its body is charged or read (the handler's check stays
//! the one that counts). The token is compared through SHA-256 digests, in constant time and
//! without revealing its length. Inference, metadata, health, the index and metrics stay open.

use std::fmt;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// A secret that never shows in logs or `Debug` output, and is compared in constant time.
#[derive(Clone)]
pub struct Secret([u8; 32]);

impl Secret {
    /// `token` as a secret; `None` for an empty token (which would guard nothing).
    pub fn new(token: &str) -> Option<Self> {
        (!token.is_empty()).then(|| Self(Sha256::digest(token.as_bytes()).into()))
    }

    /// Whether `offered` is this secret: their digests compared in constant time.
    fn matches(&self, offered: &[u8]) -> bool {
        let offered: [u8; 32] = Sha256::digest(offered).into();
        self.0.ct_eq(&offered).into()
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Why a control request was refused: 401 with `WWW-Authenticate: Bearer`.
#[derive(Debug)]
pub(crate) struct Unauthorized;

impl From<Unauthorized> for ApiError {
    fn from(_: Unauthorized) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "this route needs the control token")
            .challenge()
    }
}

/// Admits a control request: always without a configured token, else only with
/// `Authorization: Bearer <token>`.
pub(crate) fn require(token: Option<&Secret>, headers: &HeaderMap) -> Result<(), Unauthorized> {
    let Some(token) = token else { return Ok(()) };
    let offered = headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes).and_then(|value| {
        let (scheme, rest) = value.split_at_checked(7)?;
        scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
    });
    if offered.is_some_and(|offered| token.matches(offered)) { Ok(()) } else { Err(Unauthorized) }
}

/// The `WWW-Authenticate` challenge a 401 carries.
pub(crate) fn challenge(mut response: Response) -> Response {
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_in_a_bearer_header_is_admitted() {
        let secret = Secret::new("s3cret").expect("a token");
        let headers = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            headers
        };
        assert!(require(None, &HeaderMap::new()).is_ok(), "no token configured: open");
        assert!(require(Some(&secret), &HeaderMap::new()).is_err());
        assert!(require(Some(&secret), &headers("Bearer s3cret")).is_ok());
        assert!(require(Some(&secret), &headers("bearer s3cret")).is_ok(), "the scheme in any case");
        for wrong in ["Bearer s3cre", "Bearer s3cret ", "Basic s3cret", "s3cret", "Bearer"] {
            assert!(require(Some(&secret), &headers(wrong)).is_err(), "{wrong}");
        }
        assert!(Secret::new("").is_none(), "an empty token guards nothing");
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }
}
