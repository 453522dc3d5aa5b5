//! [`App`]: the server's state — the resident stack, its cache group, the catalogue — and how
//! handlers call into it.

use std::time::Instant;

use axum::http::StatusCode;
use metrics_exporter_prometheus::PrometheusHandle;
use resident::burn::BurnError;
use resident::runtime::Arc;
use resident::{
    CallOptions, FixedSizeCache, FixedSizeConfig, InvalidConfig, Loader, Manager, ManagerError, ManagerExt,
    ModelId, ModelManager,
};

use crate::admit::InFlight;
use crate::catalogue::{Catalogue, CatalogueError, CatalogueLoader, Group};
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::forward::{Cancelled, Pass};
use crate::limits::{Activation, Charge};
use crate::model::ServeModel;
use crate::queue::{About, Queue};
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
    /// A limit was refused ([`Limits::validate`](crate::Limits::validate)).
    #[error(transparent)]
    Limit(#[from] crate::limits::InvalidLimit),
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
    queue: std::sync::Arc<Queue>,
    in_flight: InFlight,
    charge: Charge,
    open: tokio::sync::watch::Sender<usize>,
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
        config.limits.validate()?;
        let metrics = telemetry::recorder().clone();
        let catalogue = Arc::new(Catalogue::from_manifest(&config.models_dir)?);
        let group = Group::new(config.ram_cap_bytes)?;
        let loader = wrap(CatalogueLoader::new(Arc::clone(&catalogue), &group)?);
        let stack = FixedSizeCache::new(ModelManager::new(loader), FixedSizeConfig::new(config.max_models))?;
        let architectures = || catalogue.ids().filter_map(|id| catalogue.get(id));
        let expansion = architectures().map(|arch| arch.expansion()).fold(0.0, f64::max);
        let activation = architectures().map(|arch| arch.activation()).fold(
            Activation { per_row: 0, per_element: 0.0 },
            |most, arch| Activation {
                per_row: most.per_row.max(arch.per_row),
                per_element: most.per_element.max(arch.per_element),
            },
        );
        let limits = &config.limits;
        let charge = Charge::new(limits, expansion, activation);
        let largest = charge.bytes(limits.max_body_bytes);
        if largest > limits.inflight_bytes {
            tracing::warn!(
                largest,
                inflight_bytes = limits.inflight_bytes,
                "a body of the largest size, or of unknown length (chunked), is charged more than the in-flight budget: such requests are refused (413)"
            );
        }
        let queue = Queue::new(limits.max_blocking, limits.max_per_model);
        let in_flight = InFlight::new(limits.inflight_bytes);
        let open = tokio::sync::watch::Sender::new(0);
        let inner = Inner { stack, group, catalogue, config, metrics, queue, in_flight, charge, open };
        Ok(Self { inner: Arc::new(inner) })
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

    /// What a request is charged against the in-flight byte budget.
    pub(crate) fn charge(&self) -> &Charge {
        &self.inner.charge
    }

    /// A forward pass for a request that arrived at `started`, stopped by `cancelled`.
    pub(crate) fn pass(&self, started: Instant, cancelled: Cancelled) -> Pass {
        let limits = &self.config().limits;
        let deadline = started.checked_add(self.config().request_timeout);
        Pass { batch_rows: limits.batch_rows, max_elements: limits.max_elements, deadline, cancelled }
    }

    /// The bytes a request whose body has `body` bytes is charged against the in-flight budget
    /// ([`Charge`](crate::limits::Charge)).
    pub fn charge_for(&self, body: u64) -> u64 {
        self.inner.charge.bytes(body)
    }

    /// The in-flight byte budget.
    pub(crate) fn in_flight(&self) -> &InFlight {
        &self.inner.in_flight
    }

    /// Bytes of the in-flight budget ([`Limits::inflight_bytes`](crate::Limits::inflight_bytes))
    /// not charged to a request now.
    pub fn in_flight_available(&self) -> u64 {
        self.inner.in_flight.available()
    }

    /// The connections [`serve`](crate::serve) has open, as they change (a test waits on it for
    /// a client's hang-up to reach the server).
    pub fn connections(&self) -> tokio::sync::watch::Receiver<usize> {
        self.inner.open.subscribe()
    }

    pub(crate) fn open(&self) -> &tokio::sync::watch::Sender<usize> {
        &self.inner.open
    }

    /// Calls into resident running or waiting now: at most
    /// [`Limits::max_blocking`](crate::Limits::max_blocking), and eight changes of what is
    /// served in the control lane beside them.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.queue.total()
    }

    /// Runs `call` on the stack on tokio's blocking pool (resident's calls block: locks,
    /// loads, drains), with the request's deadline: the request timeout from `started`. The
    /// call takes a place in the server's [`Queue`] first, as `about` says (the server's bound,
    /// a model's too, or the control lane); without one it is refused at once (503 or 429 with
    /// `Retry-After`). The
    /// call holds the request's in-flight charge too, so a client that hangs up gets it back
    /// only once the call is done.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        started: Instant,
        about: About<'_>,
        call: impl FnOnce(&Stack<L>, CallOptions) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let ticket = self.inner.queue.enter(about)?;
        // The request's in-flight charge outlives a handler dropped by a hang-up while this runs.
        let charge = crate::admit::current_charge();
        let app = self.clone();
        tokio::task::spawn_blocking(move || {
            let _held = (ticket, charge);
            let left = app.config().request_timeout.saturating_sub(started.elapsed());
            call(app.stack(), CallOptions::new().with_timeout(left))
        })
        .await
        .map_err(|error| {
            // A panic's message is the server's to read, not the client's: it is logged.
            tracing::error!(%error, "a call on the blocking pool failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the call failed inside the server")
        })
    }

    /// Stops serving `id` (`DELETE /models/{id}`, the repository's unload): removes its model,
    /// and lifts its pin under the same lock once the model is removed (or was not there):
    /// pins of ids no longer served would pile up, and one served again would come back pinned.
    pub(crate) async fn unserve(&self, started: Instant, id: String) -> Result<(), ApiError> {
        self.run(started, About::Control, move |stack, options| {
            let guard = stack.lock_until(&ModelId::new(&id)?, options.deadline(stack.runtime()))?;
            match stack.remove_locked(&guard) {
                Ok(()) | Err(ManagerError::NotFound { .. }) if stack.is_pinned(&id) => {
                    stack.unpin_locked(&guard)
                }
                removed => removed,
            }
        })
        .await?
        .map_err(ApiError::from)
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
