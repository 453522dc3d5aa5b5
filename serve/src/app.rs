//! [`App`]: the server's state — the resident stack, its cache group, the catalogue — and how
//! handlers call into it.

use std::time::Instant;

use axum::http::StatusCode;
use metrics_exporter_prometheus::PrometheusHandle;
use resident::burn::BurnError;
use resident::runtime::Arc;
use resident::{
    CallOptions, FixedSizeCache, FixedSizeConfig, InvalidConfig, Loader, ManagerExt, ModelManager,
};

use crate::catalogue::{Catalogue, CatalogueError, CatalogueLoader, Group};
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::model::ServeModel;
use crate::telemetry;

/// The resident stack the server runs: an LRU of at most `max_models` over the manager.
pub type Stack<L = CatalogueLoader> = FixedSizeCache<ModelManager<L>>;

/// Why the server could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The catalogue manifest could not be read.
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    /// A loader could not be made for the device.
    #[error(transparent)]
    Burn(#[from] BurnError),
    /// A setting was refused (a zero `max_models` or `ram_cap_bytes`).
    #[error(transparent)]
    Config(#[from] InvalidConfig),
}

/// What the shutdown did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownSummary {
    /// The models the stack's shutdown unloaded, in id order.
    pub unloaded: Vec<String>,
    /// The models still registered, with why (leases that outlived the shutdown timeout, a
    /// failed unload).
    pub failed: Vec<(String, String)>,
    /// Cache records the group's shutdown then evicted.
    pub evicted_records: usize,
}

/// The server's state, shared by every handler (cloning shares it).
///
/// `L` is the stack's loader: [`CatalogueLoader`] by default; [`App::with_loader`] wraps it
/// (a test holds inference open that way).
pub struct App<L: Loader = CatalogueLoader> {
    inner: Arc<Inner<L>>,
}

struct Inner<L: Loader> {
    stack: Stack<L>,
    group: Arc<Group>,
    catalogue: Arc<Catalogue>,
    config: ServeConfig,
    metrics: PrometheusHandle,
}

impl<L: Loader> Clone for App<L> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl App {
    /// The server `config` describes, over the [`Catalogue`] of its models directory.
    pub fn new(config: ServeConfig) -> Result<Self, ServeError> {
        Self::with_loader(config, |loader| loader)
    }
}

impl<L> App<L>
where
    L: Loader,
    L::Model: ServeModel,
{
    /// The server `config` describes, whose stack loads through `wrap(catalogue loader)`.
    pub fn with_loader(
        config: ServeConfig,
        wrap: impl FnOnce(CatalogueLoader) -> L,
    ) -> Result<Self, ServeError> {
        let metrics = telemetry::recorder().clone();
        let catalogue = Arc::new(Catalogue::from_manifest(&config.models_dir)?);
        let group = Group::new(config.ram_cap_bytes)?;
        let loader = wrap(CatalogueLoader::new(Arc::clone(&catalogue), &group)?);
        let stack = FixedSizeCache::new(ModelManager::new(loader), FixedSizeConfig::new(config.max_models))?;
        Ok(Self { inner: Arc::new(Inner { stack, group, catalogue, config, metrics }) })
    }

    /// The resident stack.
    pub fn stack(&self) -> &Stack<L> {
        &self.inner.stack
    }

    /// The cache group under the stack (its RAM budget, its weight store).
    pub fn group(&self) -> &Arc<Group> {
        &self.inner.group
    }

    /// The models the server can load.
    pub fn catalogue(&self) -> &Catalogue {
        &self.inner.catalogue
    }

    /// The settings.
    pub fn config(&self) -> &ServeConfig {
        &self.inner.config
    }

    /// The Prometheus handle `GET /metrics` renders.
    pub fn metrics(&self) -> &PrometheusHandle {
        &self.inner.metrics
    }

    /// Runs `call` on the stack on tokio's blocking pool (resident's calls block: locks,
    /// loads, drains), with the request's deadline: the request timeout from `started`.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        started: Instant,
        call: impl FnOnce(&Stack<L>, CallOptions) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let app = self.clone();
        tokio::task::spawn_blocking(move || {
            let left = app.config().request_timeout.saturating_sub(started.elapsed());
            call(app.stack(), CallOptions::new().with_timeout(left))
        })
        .await
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string()))
    }

    /// Shuts the stack down ([`ManagerExt::shutdown`], bounded by the shutdown timeout: refuses
    /// new adds and leases, drains live leases, unloads every model), then the cache group
    /// (evicts the released records). Runs on the blocking pool; logs and returns what it did.
    /// Idempotent: a second call finds nothing left (or retries what failed).
    pub async fn shutdown(&self) -> ShutdownSummary {
        let app = self.clone();
        let summary = tokio::task::spawn_blocking(move || app.shutdown_blocking()).await;
        summary.unwrap_or_else(|error| {
            tracing::error!(%error, "the shutdown panicked");
            ShutdownSummary::default()
        })
    }

    fn shutdown_blocking(&self) -> ShutdownSummary {
        let report =
            self.stack().shutdown_with(CallOptions::new().with_timeout(self.config().shutdown_timeout));
        let failed: Vec<(String, String)> =
            report.failed.iter().map(|(id, error)| (id.to_string(), error.to_string())).collect();
        let unloaded = report.removed.iter().map(ToString::to_string).collect();
        let evicted_records = self.group().shutdown();
        let summary = ShutdownSummary { unloaded, failed, evicted_records };
        if report.is_complete() {
            tracing::info!(unloaded = ?summary.unloaded, evicted_records, "shut down: every model unloaded");
        } else {
            tracing::warn!(unloaded = ?summary.unloaded, failed = ?summary.failed, evicted_records, "shut down: some models are still registered");
        }
        summary
    }
}
