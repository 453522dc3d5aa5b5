//! [`Loads`]: the keys a cache group is loading right now, so that one load of a key runs at a
//! time across every device, and a second device waits for it and adopts its canonical.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::mutants::Mutant;
use crate::runtime::{Monitor, Runtime, TimedOut};

/// The default bound on a wait for another device's load of the same key.
pub(crate) const DEFAULT_LOAD_WAIT: Duration = Duration::from_secs(60);

struct InFlight {
    keys: BTreeSet<String>,
    wait: Duration,
    /// The group was shut down: no new load starts.
    shut_down: bool,
}

/// Keys being loaded by [`DeviceCache::get_or_put`](super::DeviceCache::get_or_put) in a group.
pub(crate) struct Loads<R: Runtime> {
    state: R::Monitor<InFlight>,
    runtime: R,
}

/// What [`Loads::claim_or_wait`] found.
pub(crate) enum Turn<'a, R: Runtime> {
    /// Nobody loads the key: this caller does, until the claim is dropped.
    Load(LoadClaim<'a, R>),
    /// Another load of the key ended: look it up again.
    Retry,
    /// The group was shut down: no load starts.
    ShutDown,
}

impl<R: Runtime> Loads<R> {
    pub(crate) fn new(runtime: &R) -> Self {
        let state =
            runtime.monitor(InFlight { keys: BTreeSet::new(), wait: DEFAULT_LOAD_WAIT, shut_down: false });
        Self { state, runtime: runtime.clone() }
    }

    /// How long a caller waits for another load of the same key.
    pub(crate) fn wait(&self) -> Duration {
        self.state.with(|s| s.wait)
    }

    pub(crate) fn set_wait(&self, wait: Duration) {
        self.state.with(|s| s.wait = wait);
    }

    /// No load starts from now on; loads in flight finish. Wakes the callers waiting for one
    /// (they are refused at once, not after the load in flight). Idempotent.
    pub(crate) fn shut_down(&self) {
        self.state.with(|s| s.shut_down = true);
        if !self.runtime.mutant(Mutant::LOST_WAKEUP_GROUP_SHUTDOWN) {
            self.state.notify_all();
        }
    }

    /// Whether [`Loads::shut_down`] ran.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.state.with(|s| s.shut_down)
    }

    /// Claims `key`, or waits at most `timeout` for the load in flight to end. Nothing is claimed
    /// once the group is shut down.
    pub(crate) fn claim_or_wait(&self, key: &str, timeout: Duration) -> Result<Turn<'_, R>, TimedOut> {
        if self.runtime.mutant(Mutant::GET_OR_PUT_NOT_SINGLE_FLIGHT) {
            return Ok(Turn::Load(LoadClaim { loads: self, key: None }));
        }
        let mut waited = false;
        let turn = self.state.wait_until(Some(timeout), |s| {
            if s.shut_down {
                Some(Found::ShutDown)
            } else if s.keys.contains(key) {
                waited = true;
                None
            } else if waited {
                Some(Found::Ended)
            } else {
                s.keys.insert(key.to_owned());
                Some(Found::Claimed)
            }
        })?;
        Ok(match turn {
            Found::Claimed => Turn::Load(LoadClaim { loads: self, key: Some(key.to_owned()) }),
            Found::Ended => Turn::Retry,
            Found::ShutDown => Turn::ShutDown,
        })
    }
}

/// What a claim found inside the monitor.
enum Found {
    Claimed,
    Ended,
    ShutDown,
}

/// A claimed load of one key; dropping it (the load admitted, failed or panicked) lets the
/// waiters look again.
pub(crate) struct LoadClaim<'a, R: Runtime> {
    loads: &'a Loads<R>,
    key: Option<String>,
}

impl<R: Runtime> Drop for LoadClaim<'_, R> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        self.loads.state.with(|s| s.keys.remove(&key));
        if !self.loads.runtime.mutant(Mutant::LOST_WAKEUP_LOAD_FINISHED) {
            self.loads.state.notify_all();
        }
    }
}
