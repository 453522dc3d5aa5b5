//! `resident-serve`: the HTTP model server (`--help` lists its settings; the crate docs its
//! routes). Serves until Ctrl-C or SIGTERM, then unloads every model and exits; non-zero if
//! some model could not be unloaded.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use resident_serve::{App, Limits, Secret, ServeConfig, Signals, serve};

/// Serves burn models over HTTP from a models directory, through resident.
#[derive(Debug, clap::Parser)]
#[command(version)]
struct Options {
    /// The models directory: `<id>.safetensors` files and the catalogue manifest (`expected.json`).
    #[arg(long, default_value_os_t = ServeConfig::default().models_dir)]
    models_dir: PathBuf,
    /// Most models resident at once (least recently used idle ones are evicted).
    #[arg(long, default_value_t = ServeConfig::default().max_models)]
    max_models: usize,
    /// The models' RAM budget, in bytes.
    #[arg(long, default_value_t = ServeConfig::default().ram_cap_bytes)]
    ram_cap_bytes: u64,
    /// How long a request may wait inside resident, in seconds (locks, room, loads, drains).
    #[arg(long, default_value_t = ServeConfig::default().request_timeout.as_secs_f64())]
    request_timeout: f64,
    /// How long the shutdown waits for requests in flight, then for the unloads, in seconds.
    #[arg(long, default_value_t = ServeConfig::default().shutdown_timeout.as_secs_f64())]
    shutdown_timeout: f64,
    /// The address to listen on.
    #[arg(long, default_value_t = ServeConfig::default().bind)]
    bind: SocketAddr,
    /// The largest request body, in bytes (a larger Content-Length is refused up front: 413).
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    max_body_bytes: u64,
    /// The most elements of a request's input tensor, and of its output tensor.
    #[arg(long, default_value_t = Limits::default().max_elements)]
    max_elements: u64,
    /// The bytes all requests may hold in the server at once (bodies, tensors, answers).
    #[arg(long, default_value_t = Limits::default().inflight_bytes)]
    inflight_bytes: u64,
    /// The most calls into resident running or waiting at once (more: 503, Retry-After).
    #[arg(long, default_value_t = Limits::default().max_blocking)]
    max_blocking: usize,
    /// The most calls running or waiting at once for one model (more: 429, Retry-After).
    #[arg(long, default_value_t = Limits::default().max_per_model)]
    max_per_model: usize,
    /// The most connections open at once.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// The most connections one client (an IPv4 address, an IPv6 /64) may hold open at once;
    /// behind a proxy, raise it to --max-connections.
    #[arg(long, default_value_t = Limits::default().max_connections_per_client)]
    max_connections_per_client: usize,
    /// How long a client may take to send a request's head, in seconds.
    #[arg(long, default_value_t = Limits::default().header_timeout.as_secs_f64())]
    header_timeout: f64,
    /// How long a client may take to send a request's body, in seconds (then 408).
    #[arg(long, default_value_t = Limits::default().body_timeout.as_secs_f64())]
    body_timeout: f64,
    /// How long a write of an answer may wait for the client to read, in seconds.
    #[arg(long, default_value_t = Limits::default().send_timeout.as_secs_f64())]
    send_timeout: f64,
    /// The rows a forward pass runs at a time (it stops between batches once its client left).
    #[arg(long, default_value_t = Limits::default().batch_rows)]
    batch_rows: usize,
    /// The bearer token the routes that change what is served require (load, replace, unload,
    /// pin, unpin); unset, they answer only clients on a loopback address (see --open-control).
    /// Read from the environment, never a flag: a command line is visible to every user of the
    /// machine.
    #[arg(long = "control-token-env", value_name = "VARIABLE", default_value = "RESIDENT_CONTROL_TOKEN")]
    control_token_env: String,
    /// Without a control token, open the routes that change what is served to every client,
    /// not only to clients on a loopback address (bind to a trusted interface only).
    #[arg(long)]
    open_control: bool,
    /// Models to load before serving: `id` or `id=source`, comma-separated (`--load mlp,detector=cnn`).
    #[arg(long, value_delimiter = ',')]
    load: Vec<String>,
}

fn seconds(value: f64, name: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|error| format!("--{name} {value}: {error}"))
}

impl Options {
    fn config(self) -> Result<ServeConfig, String> {
        Ok(ServeConfig {
            models_dir: self.models_dir,
            max_models: self.max_models,
            ram_cap_bytes: self.ram_cap_bytes,
            request_timeout: seconds(self.request_timeout, "request-timeout")?,
            shutdown_timeout: seconds(self.shutdown_timeout, "shutdown-timeout")?,
            bind: self.bind,
            limits: Limits {
                max_body_bytes: self.max_body_bytes,
                max_elements: self.max_elements,
                inflight_bytes: self.inflight_bytes,
                max_blocking: self.max_blocking,
                max_per_model: self.max_per_model,
                max_connections: self.max_connections,
                max_connections_per_client: self.max_connections_per_client,
                header_timeout: seconds(self.header_timeout, "header-timeout")?,
                body_timeout: seconds(self.body_timeout, "body-timeout")?,
                send_timeout: seconds(self.send_timeout, "send-timeout")?,
                batch_rows: self.batch_rows,
            },
            control_token: std::env::var(&self.control_token_env).ok().and_then(|token| Secret::new(&token)),
            open_control: self.open_control,
        })
    }
}

/// The exit status after a second shutdown signal (128 + SIGINT's number, as shells report it).
const INTERRUPTED: i32 = 130;

#[tokio::main]
async fn main() -> ExitCode {
    // `RUST_LOG` picks what is logged (`info` if unset or invalid).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let code = match run(<Options as clap::Parser>::parse()).await {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    };
    // The runtime's drop would wait for every blocking call still running (a forward pass
    // dropped at the shutdown stops at its next batch, but a load or a user's model need not):
    // the shutdown is bounded by its timeouts, so the process exits now.
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 })
}

/// Completes on the first Ctrl-C or SIGTERM; a second one exits the process at once.
fn first_signal() -> impl std::future::Future<Output = ()> {
    let (fired, first) = tokio::sync::oneshot::channel::<()>();
    // Listening from now on: a second signal right after the first is not lost.
    let mut signals = Signals::new();
    tokio::spawn(async move {
        signals.next().await;
        let _ = fired.send(());
        signals.next().await;
        tracing::warn!("a second signal: exiting at once");
        std::process::exit(INTERRUPTED);
    });
    async move {
        let _ = first.await;
    }
}

async fn run(options: Options) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let load = options.load.clone();
    let token_env = options.control_token_env.clone();
    let config = options.config()?;
    match (&config.control_token, config.open_control) {
        (Some(_), _) => {}
        (None, true) => tracing::warn!(
            variable = token_env,
            "no control token: the routes that change what is served are open to every client"
        ),
        (None, false) => tracing::warn!(
            variable = token_env,
            "no control token: the routes that change what is served answer loopback clients only \
             (a proxy on this host makes its clients loopback ones: behind one, set a token)"
        ),
    }
    let app = App::new(config.clone())?;
    for entry in &load {
        let (id, source) = match entry.split_once('=') {
            Some((id, source)) => (id, Some(source)),
            None => (entry.as_str(), None),
        };
        let loaded =
            app.load(id, source).await.map_err(|error| format!("--load {entry}: {}", error.message()))?;
        tracing::info!(id, source = loaded.as_str(), "loaded at start");
    }
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        models = ?app.catalogue().ids().collect::<Vec<_>>(),
        "serving"
    );
    let summary = serve(listener, app, first_signal()).await;
    Ok(if summary.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
