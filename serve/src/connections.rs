//! The connection loop: accepts at most [`Limits::max_connections`] connections at once, and
//! closes at once a connection past its client's [`Limits::max_connections_per_client`]
//! ([`crate::clients`]); gives each client [`Limits::header_timeout`] to send a request's head
//! (of at most [`MAX_HEAD`] bytes) and closes its connection once a write of its answer stalls for
//! [`Limits::send_timeout`]; at shutdown it stops
//! accepting, lets the requests in flight finish within the drain time, then drops whatever is
//! left (its handlers' forward passes stop at their next batch: [`crate::forward`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower_http::add_extension::AddExtension;

use crate::clients::{ClientConnection, Clients};
use crate::limits::Limits;
use crate::stall::Stalling;
use crate::telemetry;

/// How long the loop waits after a failed accept (out of descriptors, say) before it accepts
/// again, so that a lasting failure does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The most bytes of a request's head (its line and headers) and of a connection's read buffer:
/// hyper's own default is about 400 KiB per connection.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// How a [`run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Every connection finished its requests within the drain time.
    Drained,
    /// Connections still had requests in flight at the end of the drain time: they were dropped.
    Dropped,
}

/// Counts a connection open until dropped (with its task: ended, or aborted), with what it
/// holds: its slot among `max_connections` and its place among its client's connections.
struct Counted {
    open: watch::Sender<usize>,
    held: Option<(OwnedSemaphorePermit, ClientConnection)>,
}

impl Drop for Counted {
    /// Gives back what it holds first: whoever sees the count fall may open another connection
    /// at once, and must find room for it.
    fn drop(&mut self) {
        drop(self.held.take());
        self.open.send_modify(|n| *n -= 1);
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes, then drains for at
/// most `drain`. `open` counts the connections open.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
    open: &watch::Sender<usize>,
) -> Ended {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let clients = Clients::new(limits.max_connections_per_client);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut http = http1::Builder::new();
    // A request's head (and the connection's read buffer) is at most MAX_HEAD bytes.
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(MAX_HEAD);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            biased;
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Past its client's cap, the connection is closed as it is dropped here (with the slot
        // it took).
        let Some(client) = clients.admit(peer.ip()) else {
            telemetry::count_refused_connection();
            tracing::debug!(%peer, "a connection past its client's cap: closed");
            continue;
        };
        while connections.try_join_next().is_some() {}
        let stream = Stalling::new(stream, limits.send_timeout);
        // Each request carries its client's address (`ConnectInfo`), as axum's own server gives
        // it: what admits a control request without a token ([`crate::auth`]).
        let service = AddExtension::new(router.clone(), ConnectInfo(peer));
        let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        open.send_modify(|n| *n += 1);
        // Counted before the task runs: a task aborted before its first poll still uncounts.
        let counted = Counted { open: open.clone(), held: Some((slot, client)) };
        connections.spawn(async move {
            let _counted = counted;
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    let ended = tokio::select! {
        () = graceful.shutdown() => Ended::Drained,
        () = tokio::time::sleep(drain) => Ended::Dropped,
    };
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    ended
}
