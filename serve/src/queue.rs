//! [`Queue`]: the bound on calls into resident running or waiting at once, in all and per model
//! ([`Limits::max_blocking`](crate::Limits::max_blocking),
//! [`Limits::max_per_model`](crate::Limits::max_per_model)).
//!
//! A call enters before it is handed to tokio's blocking pool and leaves when it returns (its
//! [`Ticket`] dropped). A call that finds either bound reached is refused at once with
//! `Retry-After` — 503 `overloaded` for the server's bound, 429 `too_many_requests` for the
//! model's — rather than queued: a burst of requests behind one draining model can neither fill
//! the blocking pool nor make an unrelated request wait behind it.
//!
//! A change of what is served (a load, a replace, an unload, a pin), admitted by the control
//! guard ([`crate::auth`]), takes a place in a lane of its own ([`CONTROL_LANE`] calls), outside
//! both bounds: a flood of inferences on a model cannot keep its operator from unloading it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;

use crate::error::ApiError;

/// Seconds a refused client is told to wait before it tries again.
const RETRY_AFTER: u32 = 1;

/// The most changes of what is served running or waiting at once ([`About::Control`]).
pub(crate) const CONTROL_LANE: usize = 8;

/// What a call is about, and so where it takes its place.
#[derive(Debug, Clone, Copy)]
pub(crate) enum About<'a> {
    /// The server as a whole (the index): the server's bound.
    Server,
    /// One model (an inference, its metadata): the server's bound and the model's.
    Model(&'a str),
    /// A change of what is served about one model, admitted by the control guard: the control
    /// lane.
    Control,
}

/// Calls into resident in flight: how many in all and per model.
#[derive(Debug)]
pub(crate) struct Queue {
    max_total: usize,
    max_per_model: usize,
    state: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_model: HashMap<String, usize>,
    /// Calls in the control lane.
    control: usize,
}

/// One call's place in the [`Queue`]; leaving it frees the place.
#[derive(Debug)]
pub(crate) struct Ticket {
    queue: Arc<Queue>,
    model: Option<String>,
    control: bool,
}

impl Queue {
    /// A queue of at most `max_total` calls, `max_per_model` of them for one model.
    pub(crate) fn new(max_total: usize, max_per_model: usize) -> Arc<Self> {
        Arc::new(Self { max_total, max_per_model, state: Mutex::new(Counts::default()) })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        // The counts are whole after every critical section: nothing in them can panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a call about `about`, or the refusal.
    pub(crate) fn enter(self: &Arc<Self>, about: About<'_>) -> Result<Ticket, ApiError> {
        let mut counts = self.counts();
        let model = match about {
            About::Control => return self.enter_control(&mut counts),
            About::Server => None,
            About::Model(model) => Some(model),
        };
        if counts.total >= self.max_total {
            let text = format!("{} calls are already running or waiting in the server", counts.total);
            return Err(
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", text).retry_after(RETRY_AFTER)
            );
        }
        if let Some(model) = model {
            let waiting = counts.per_model.get(model).copied().unwrap_or(0);
            if waiting >= self.max_per_model {
                let text = format!("{waiting} calls are already running or waiting for model {model:?}");
                return Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", text)
                    .retry_after(RETRY_AFTER));
            }
            *counts.per_model.entry(model.to_owned()).or_default() += 1;
        }
        counts.total += 1;
        Ok(Ticket { queue: Arc::clone(self), model: model.map(str::to_owned), control: false })
    }

    /// A place in the control lane, or 503 once [`CONTROL_LANE`] calls are in it.
    fn enter_control(self: &Arc<Self>, counts: &mut Counts) -> Result<Ticket, ApiError> {
        if counts.control >= CONTROL_LANE {
            let text = format!("{} changes of what is served are already running or waiting", counts.control);
            return Err(
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", text).retry_after(RETRY_AFTER)
            );
        }
        counts.control += 1;
        Ok(Ticket { queue: Arc::clone(self), model: None, control: true })
    }

    /// Calls in flight, in all (the control lane's too).
    pub(crate) fn total(&self) -> usize {
        let counts = self.counts();
        counts.total + counts.control
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self.queue.counts();
        if self.control {
            counts.control -= 1;
            return;
        }
        counts.total -= 1;
        if let Some(model) = &self.model
            && let Some(waiting) = counts.per_model.get_mut(model)
        {
            *waiting -= 1;
            if *waiting == 0 {
                counts.per_model.remove(model);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_and_each_model_have_their_bounds() {
        let queue = Queue::new(3, 2);
        let a1 = queue.enter(About::Model("a")).expect("room");
        let a2 = queue.enter(About::Model("a")).expect("room");
        let refused = queue.enter(About::Model("a")).expect_err("a's bound");
        assert_eq!((refused.status(), refused.kind()), (StatusCode::TOO_MANY_REQUESTS, "too_many_requests"));
        let b = queue.enter(About::Model("b")).expect("another model has room");
        let full = queue.enter(About::Server).expect_err("the server's bound");
        assert_eq!((full.status(), full.kind()), (StatusCode::SERVICE_UNAVAILABLE, "overloaded"));
        drop(a1);
        assert_eq!(queue.total(), 2);
        let again = queue.enter(About::Model("a")).expect("a left a place");
        drop((a2, b, again));
        assert_eq!(queue.total(), 0);
        assert!(queue.counts().per_model.is_empty(), "no model keeps an entry");
    }

    #[test]
    fn changes_of_what_is_served_have_a_lane_of_their_own() {
        let queue = Queue::new(1, 1);
        let flood = queue.enter(About::Model("a")).expect("room");
        assert!(queue.enter(About::Model("a")).is_err() && queue.enter(About::Server).is_err(), "both full");
        let lane: Vec<Ticket> =
            (0..CONTROL_LANE).map(|_| queue.enter(About::Control).expect("the lane has room")).collect();
        let full = queue.enter(About::Control).expect_err("the lane's bound");
        assert_eq!((full.status(), full.kind()), (StatusCode::SERVICE_UNAVAILABLE, "overloaded"));
        assert_eq!(queue.total(), 1 + CONTROL_LANE);
        drop(lane);
        assert!(queue.enter(About::Model("a")).is_err(), "the lane gives no place to the others");
        drop(flood);
        assert_eq!(queue.total(), 0);
    }
}
