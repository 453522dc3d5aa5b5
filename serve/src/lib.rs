//! # resident-serve
//!
//! A small HTTP model server over [resident]: burn models from SafeTensors files, loaded on
//! demand into one [`FixedSizeCache`](resident::FixedSizeCache) over a
//! [`CacheGroup`](resident::cache::CacheGroup) (one hard RAM budget, ndarray on the CPU),
//! replaced atomically, unloaded without pulling a model from under a running request, and
//! observed through Prometheus metrics.
//!
//! ```text
//! PUT    /models/{id}         load (or atomically replace) a catalogue model; body {"source", "replace"}
//! DELETE /models/{id}         unload, after the requests in flight
//! GET    /models              the served ids
//! POST   /models/{id}/infer   {"input": [f32]} -> {"output": [f32]}
//! GET    /metrics             Prometheus text
//!
//! GET    /v2, /v2/health/{live,ready}                     the Open Inference Protocol (KServe v2):
//! GET    /v2/models/{name}[/versions/1][/ready]           server and model metadata, readiness,
//! POST   /v2/models/{name}[/versions/1]/infer             inference on named FP32 tensors
//! POST   /v2/repository/index, .../models/{name}/{load,unload}   explicit model control
//! ```
//!
//! [`routes`] documents each route, [`v2`] the protocol's, [`error`] the status of each error.
//!
//! ## Pieces
//! - [`ServeConfig`]: models directory, most models resident, RAM cap, request and shutdown
//!   timeouts, bind address, and the [`Limits`] on what requests may spend.
//! - [`Catalogue`]: the models the server can load (`<id>.safetensors` and an architecture,
//!   from the directory's [`MANIFEST`]); [`Zoo`] puts resident's MLP and CNN under one
//!   architecture type so that both share the one cache group.
//! - [`App`]: the state handlers share — the [`Stack`], its group, the catalogue — and
//!   [`App::shutdown`].
//! - [`serve`]: runs the routes on a listener until a shutdown future completes, then shuts
//!   the stack down.
//!
//! ## Blocking calls
//! resident's calls block the calling thread: a lifecycle lock, a load, a wait for room in
//! the budget, a drain of live leases, and inference itself. A handler never makes them on an
//! async worker: every call into the stack — with the decoding of its request and the encoding
//! of its answer — runs in [`tokio::task::spawn_blocking`], and the handler awaits its result.
//! At most [`Limits::max_blocking`] such calls run or wait at once, and
//! [`Limits::max_per_model`] for one model: past either, a request is refused at once (503 or
//! 429 with `Retry-After`), never queued behind a draining model. Each call gets the request's
//! deadline as its [`CallOptions`](resident::CallOptions): what is left of
//! [`ServeConfig::request_timeout`] since the request's body was received bounds every wait
//! inside resident, and a wait that runs out is answered with its typed error (503 or 507),
//! never a hung request. A forward pass runs in batches of [`Limits::batch_rows`] rows and
//! stops between two of them when its deadline has passed or its client has gone.
//!
//! ## Hostile clients
//! [`Limits`] bounds what clients can make the server spend: body bytes (refused from
//! `Content-Length` up front), tensor elements, the bytes all requests hold at once (each
//! request charged before its body is read), blocking threads, connections, and the time a
//! client may take to send a request's head and body. [`limits`] documents each.
//!
//! ## Shutdown
//! [`serve`] stops accepting connections when its shutdown future completes (the binary's is
//! [`shutdown_signal`]: Ctrl-C or SIGTERM; a second one exits the binary at once), lets the
//! requests in flight finish for at most [`ServeConfig::shutdown_timeout`], drops those left
//! (their forward passes stop at their next batch), then calls [`App::shutdown`]:
//! [`ManagerExt::shutdown`](resident::ManagerExt::shutdown) unloads every model (refusing new
//! adds and leases, draining the live ones, within the shutdown timeout again), then the
//! group's shutdown evicts the released weights. The summary is logged and returned; the
//! binary exits then, without waiting for blocking calls still running.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use resident_serve::{App, ServeConfig, serve, shutdown_signal};
//! let config = ServeConfig::default();
//! let listener = tokio::net::TcpListener::bind(config.bind).await?;
//! let summary = serve(listener, App::new(config)?, shutdown_signal()).await;
//! assert!(summary.failed.is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! ## Metrics
//! `GET /metrics` renders the process's Prometheus recorder ([`telemetry::recorder`],
//! installed once per process): resident's own metrics (`resident_model_loads_total{model}`,
//! load failures and durations, evictions, refusals, lease and lock waits, models resident,
//! memory per device) and the server's `resident_http_requests_total{route, status}` (route
//! `admission` for requests refused before any route saw them), `resident_http_connections`,
//! `resident_http_calls_in_flight` and `resident_http_inflight_bytes_available`.
#![forbid(unsafe_code)]

pub mod access;
mod admit;
mod app;
pub mod auth;
pub mod catalogue;
mod clients;
mod config;
mod connections;
pub mod error;
mod forward;
pub mod limits;
mod model;
mod queue;
pub mod routes;
mod stall;
pub mod telemetry;
pub mod v2;
pub mod zoo;

use std::future::Future;

use connections::Ended;
use resident::Loader;
use tokio::net::TcpListener;

pub use app::{App, ServeError, ShutdownSummary, Stack};
pub use auth::Secret;
pub use catalogue::{Catalogue, CatalogueLoader, CatalogueModel, Group, MANIFEST};
pub use config::ServeConfig;
pub use error::ApiError;
pub use limits::Limits;
pub use model::ServeModel;
pub use zoo::Zoo;

impl<L> App<L>
where
    L: Loader,
    L::Model: ServeModel,
{
    /// The server's routes ([`routes`]) over this state.
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// Serves the catalogue model `source` (`id` itself if `None`) under `id`, as `PUT
    /// /models/{id}` does (an atomic replace if `id` is served): the binary's `--load`. Returns
    /// the source served.
    pub async fn load(&self, id: &str, source: Option<&str>) -> Result<String, ApiError> {
        let started = std::time::Instant::now();
        let served =
            routes::serve_under(self, started, id.to_owned(), source.map(str::to_owned), true).await?;
        Ok(served.source)
    }
}

/// Serves `app` on `listener` until `shutdown` completes: then stops accepting, waits for the
/// requests in flight for at most the shutdown timeout (then drops them: a forward pass stops
/// at its next batch), and shuts the stack and its group down ([`App::shutdown`], bounded by
/// the shutdown timeout too), returning what that did. [`Limits`] bounds the connections and
/// how long a client may take to send a request.
///
/// A test passes any future (a channel's receiver, say); the binary passes
/// [`shutdown_signal`].
pub async fn serve<L>(
    listener: TcpListener,
    app: App<L>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> ShutdownSummary
where
    L: Loader,
    L::Model: ServeModel,
{
    let upkeep = tokio::spawn(telemetry::upkeep(app.metrics().clone()));
    let config = app.config();
    let drain = config.shutdown_timeout;
    match connections::run(listener, app.router(), &config.limits, shutdown, drain, app.open()).await {
        Ended::Drained => tracing::info!("stopped accepting; requests drained"),
        Ended::Dropped => {
            tracing::warn!(?drain, "requests still in flight after the shutdown timeout: dropped");
        }
    }
    upkeep.abort();
    app.shutdown().await
}

/// Completes on Ctrl-C, or on SIGTERM on Unix. If a signal handler cannot be installed, that
/// signal is never awaited (and the failure is logged).
pub async fn shutdown_signal() {
    Signals::new().next().await;
}

/// The shutdown signals — Ctrl-C (SIGINT), and SIGTERM on Unix — listened to from when it is
/// made: a signal arriving between two [`Signals::next`] calls is not lost.
#[derive(Debug)]
pub struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts listening (within a tokio runtime). A handler that cannot be installed is logged,
    /// and its signal never awaited.
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind: SignalKind, name: &str| {
                signal(kind).map_err(|error| tracing::error!(%error, "cannot listen for {name}")).ok()
            };
            Self {
                interrupt: listen(SignalKind::interrupt(), "Ctrl-C"),
                terminate: listen(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Completes on the next signal.
    pub async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                () = received(self.interrupt.as_mut()) => tracing::info!("Ctrl-C: shutting down"),
                () = received(self.terminate.as_mut()) => tracing::info!("SIGTERM: shutting down"),
            }
        }
        #[cfg(not(unix))]
        {
            if let Err(error) = tokio::signal::ctrl_c().await {
                tracing::error!(%error, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
            tracing::info!("Ctrl-C: shutting down");
        }
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}
