//! `resident-serve`: the HTTP model server (`--help` lists its settings; the crate docs its
//! routes). Serves until Ctrl-C or SIGTERM, then unloads every model and exits; non-zero if
//! some model could not be unloaded.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use resident_serve::{App, ServeConfig, serve, shutdown_signal};

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
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
    match run(<Options as clap::Parser>::parse()).await {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let config = options.config()?;
    let app = App::new(config.clone())?;
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        models = ?app.catalogue().ids().collect::<Vec<_>>(),
        "serving"
    );
    let summary = serve(listener, app, shutdown_signal()).await?;
    Ok(if summary.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
