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
//!
//! Without a token those routes answer only clients on a loopback address (403 for any other,
//! or for a request whose client address is unknown), unless
//! [`ServeConfig::open_control`](crate::ServeConfig::open_control) opens them to every client:
//! a server bound to a public interface with no token set does not let anyone who reaches it
//! unload its models. The client's address is the connection's peer, which [`crate::serve`]
//! records; a router served another way reads axum's `ConnectInfo<SocketAddr>`
//! (`into_make_service_with_connect_info`). A request a proxy forwarded (`Forwarded`, `Via`,
//! `X-Real-IP` or an `X-Forwarded-*` header) is not a loopback client's, whatever its peer: a
//! proxy on the same host would otherwise make every client local. A proxy that adds none of
//! those headers still does: behind one, set a token.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ServeConfig;
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

/// Why a control request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A token is configured and the request does not carry it: 401 with `WWW-Authenticate:
    /// Bearer`.
    Unauthorized,
    /// No token is configured, the routes are not opened to every client, and the client is
    /// not on a loopback address (or its address is unknown, or a proxy forwarded it): 403.
    NotLocal,
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Unauthorized => {
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "this route needs the control token")
                    .challenge()
            }
            Refused::NotLocal => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "no control token is set: this route answers only clients on a loopback address \
                 (set a control token, or open the control routes to every client)",
            ),
        }
    }
}

/// What a control request shows of its caller: its `Authorization` header and the address of
/// its connection's peer (if recorded). An extractor that never rejects: the handler decides
/// what to do with a refusal ([`Caller::admitted`]).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    authorization: Option<HeaderValue>,
    peer: Option<IpAddr>,
    /// The request names a proxy's forwarding headers: its peer is the proxy.
    forwarded: bool,
}

impl Caller {
    /// The caller of a request with these headers and extensions.
    pub(crate) fn of(headers: &HeaderMap, extensions: &Extensions) -> Self {
        let forwarded = headers.keys().any(|name| {
            let name = name.as_str();
            matches!(name, "forwarded" | "via" | "x-real-ip") || name.starts_with("x-forwarded-")
        });
        Self {
            authorization: headers.get(header::AUTHORIZATION).cloned(),
            peer: extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(peer)| peer.ip()),
            forwarded,
        }
    }

    /// Admits a control request under `config`: with a token, only `Authorization: Bearer
    /// <token>`; without one, a client on a loopback address whose request no proxy forwarded,
    /// or any client if the routes are open.
    pub(crate) fn admitted(&self, config: &ServeConfig) -> Result<(), Refused> {
        let Some(token) = config.control_token.as_ref() else {
            let local = !self.forwarded && self.peer.is_some_and(|peer| peer.to_canonical().is_loopback());
            return if local || config.open_control { Ok(()) } else { Err(Refused::NotLocal) };
        };
        let offered = self.authorization.as_ref().map(HeaderValue::as_bytes).and_then(|value| {
            let (scheme, rest) = value.split_at_checked(7)?;
            scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
        });
        if offered.is_some_and(|offered| token.matches(offered)) {
            Ok(())
        } else {
            Err(Refused::Unauthorized)
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.headers, &parts.extensions))
    }
}

/// The `WWW-Authenticate` challenge a 401 carries.
pub(crate) fn challenge(mut response: Response) -> Response {
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response.into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderName;

    use super::*;

    fn caller(authorization: Option<&'static str>, peer: Option<&str>) -> Caller {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        }
        let mut extensions = Extensions::new();
        if let Some(peer) = peer {
            extensions.insert(ConnectInfo(SocketAddr::new(peer.parse().expect("an address"), 40_000)));
        }
        Caller::of(&headers, &extensions)
    }

    #[test]
    fn only_the_token_in_a_bearer_header_is_admitted() {
        let config = ServeConfig { control_token: Secret::new("s3cret"), ..ServeConfig::fixtures() };
        let admitted = |value| caller(value, Some("127.0.0.1")).admitted(&config);
        assert_eq!(admitted(None), Err(Refused::Unauthorized), "a loopback client needs it too");
        assert!(admitted(Some("Bearer s3cret")).is_ok());
        assert!(admitted(Some("bearer s3cret")).is_ok(), "the scheme in any case");
        assert!(caller(Some("Bearer s3cret"), Some("192.0.2.7")).admitted(&config).is_ok(), "any client");
        for wrong in ["Bearer s3cre", "Bearer s3cret ", "Basic s3cret", "s3cret", "Bearer"] {
            assert_eq!(admitted(Some(wrong)), Err(Refused::Unauthorized), "{wrong}");
        }
        assert!(Secret::new("").is_none(), "an empty token guards nothing");
        assert_eq!(format!("{:?}", Secret::new("s3cret").expect("a token")), "Secret(..)");
    }

    #[test]
    fn without_a_token_only_loopback_clients_are_admitted_unless_the_routes_are_open() {
        let config = ServeConfig { control_token: None, ..ServeConfig::fixtures() };
        for local in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(caller(None, Some(local)).admitted(&config).is_ok(), "{local}");
        }
        for remote in ["192.0.2.7", "10.0.0.1", "0.0.0.0", "2001:db8::1", "::ffff:192.0.2.7"] {
            assert_eq!(caller(None, Some(remote)).admitted(&config), Err(Refused::NotLocal), "{remote}");
        }
        assert_eq!(caller(None, None).admitted(&config), Err(Refused::NotLocal), "an unknown client");
        for header in ["forwarded", "via", "x-real-ip", "x-forwarded-for", "x-forwarded-proto"] {
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_static(header), HeaderValue::from_static("192.0.2.7"));
            let mut extensions = Extensions::new();
            extensions.insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
            let forwarded = Caller::of(&headers, &extensions);
            assert_eq!(forwarded.admitted(&config), Err(Refused::NotLocal), "a proxy on the host: {header}");
        }
        let open = ServeConfig { open_control: true, ..config };
        for anyone in [Some("192.0.2.7"), Some("::1"), None] {
            assert!(caller(None, anyone).admitted(&open).is_ok(), "{anyone:?}");
        }
    }
}
