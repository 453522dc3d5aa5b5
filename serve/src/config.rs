//! [`ServeConfig`]: what the server serves, how much of it, and how long a request may wait.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::auth::Secret;
use crate::limits::Limits;

/// The server's settings. [`ServeConfig::default`] serves the models of `fixtures/models` under
/// the working directory (the repository's fixtures, run from its root) on `127.0.0.1:8080`;
/// [`ServeConfig::fixtures`] the repository's fixtures wherever it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// The models directory: `<id>.safetensors` files and the catalogue manifest
    /// ([`MANIFEST`](crate::MANIFEST)).
    pub models_dir: PathBuf,
    /// Most models resident at once ([`FixedSizeCache`](resident::FixedSizeCache)'s
    /// `max_size`): least recently used idle ones are evicted to make room.
    pub max_models: usize,
    /// The hard RAM budget of the models' weights, in bytes (the
    /// [`CacheGroup`](resident::cache::CacheGroup)'s cap).
    pub ram_cap_bytes: u64,
    /// How long a request may wait inside resident: for a lifecycle lock, for room, for a
    /// load, for leases to drain. It becomes the deadline of the request's resident calls.
    pub request_timeout: Duration,
    /// One bound for the whole shutdown, twice: for the requests in flight to finish (then the
    /// connections are dropped), then for the unloads (each model's lock and the drain of its
    /// leases; what is left is reported as still registered).
    pub shutdown_timeout: Duration,
    /// The address the binary listens on.
    pub bind: SocketAddr,
    /// What requests can make the server spend ([`Limits`]).
    pub limits: Limits,
    /// The bearer token the routes that change what is served require ([`crate::auth`]);
    /// `None`: they answer only clients on a loopback address, unless
    /// [`ServeConfig::open_control`].
    pub control_token: Option<Secret>,
    /// Without a control token, whether the routes that change what is served answer every
    /// client (`true`: bind to a trusted interface only) or only clients on a loopback address
    /// (`false`, the default; 403 for the others). Ignored once a token is set.
    pub open_control: bool,
}

impl ServeConfig {
    /// The repository's fixture models (`fixtures/models` of the workspace this crate was
    /// built in: for tests and examples, never a deployment's default).
    pub fn fixtures_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models")
    }

    /// The default settings over the repository's fixture models ([`ServeConfig::fixtures_dir`]).
    pub fn fixtures() -> Self {
        Self { models_dir: Self::fixtures_dir(), ..Self::default() }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            models_dir: PathBuf::from("fixtures/models"),
            max_models: 8,
            ram_cap_bytes: 256 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            limits: Limits::default(),
            control_token: None,
            open_control: false,
        }
    }
}
