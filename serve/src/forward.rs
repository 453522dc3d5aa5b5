//! [`Pass`]: a request's forward pass, in batches of
//! [`Limits::batch_rows`](crate::Limits::batch_rows) rows, that stops between two batches once
//! its client has gone ([`Cancelled`]) or its deadline has passed.
//!
//! A request's handler holds a [`CancelOnDrop`]; hyper drops the handler when its connection
//! closes (the client hung up, or the shutdown dropped the connection), and the pass running on
//! the blocking pool then sees [`Cancelled`] at its next batch. A pass whose client left before
//! it started does not start.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::http::StatusCode;
use resident::burn::BurnError;

use crate::error::ApiError;
use crate::model::ServeModel;

/// Whether a request's handler has been dropped.
#[derive(Debug, Clone)]
pub(crate) struct Cancelled(Arc<AtomicBool>);

/// Held by a request's handler: dropping it (with the handler) sets its [`Cancelled`].
#[derive(Debug)]
pub(crate) struct CancelOnDrop(Arc<AtomicBool>);

/// A token and the guard that sets it when dropped.
pub(crate) fn cancellation() -> (CancelOnDrop, Cancelled) {
    let flag = Arc::new(AtomicBool::new(false));
    (CancelOnDrop(Arc::clone(&flag)), Cancelled(flag))
}

impl Cancelled {
    fn is_set(&self) -> bool {
        // A flag, not a hand-off: nothing is read through it.
        self.0.load(Ordering::Relaxed)
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One request's forward pass: its batch size, its element cap, its deadline, its token.
#[derive(Debug, Clone)]
pub(crate) struct Pass {
    pub(crate) batch_rows: usize,
    pub(crate) max_elements: u64,
    /// None: a timeout past what an `Instant` can hold.
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancelled: Cancelled,
}

/// How an input fits a model ([`Pass::fits`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fit {
    /// The model's input width.
    width: usize,
    /// The input's rows.
    rows: usize,
    /// The values the output will hold.
    outputs: usize,
}

impl Pass {
    /// Runs whole rows of `input` through `model`, a batch at a time; returns the output rows,
    /// flat, every value finite.
    ///
    /// Input that `model` cannot take is refused first ([`Pass::fits`]); a client gone 499
    /// `client_gone`; a deadline passed between batches 503 `deadline`; a non-finite output 500
    /// `inference_failed`.
    pub(crate) fn run<M: ServeModel>(&self, model: &M, input: &[f32]) -> Result<Vec<f32>, ApiError> {
        let Fit { width, rows, outputs } = self.fits(model, input)?;
        let mut output = Vec::with_capacity(outputs);
        for batch in input.chunks(self.batch_rows.max(1).saturating_mul(width)) {
            self.check()?;
            output.extend(model.infer(batch)?);
        }
        // A row out per row in, as the declaration's batch says: else the answer's shape lies.
        if output.len() != outputs {
            let text =
                format!("the model answered {} values for {rows} rows ({outputs} expected)", output.len());
            return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "inference_failed", text));
        }
        // JSON would carry a non-finite output as `null`: that is the model's failure, not data.
        if let Some(value) = output.iter().find(|v| !v.is_finite()) {
            let text = format!("the model answered a non-finite value ({value})");
            return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "inference_failed", text));
        }
        Ok(output)
    }

    /// Whether `model` takes `input`: whole rows of its input width, at most the element cap in
    /// and out. Input that is not whole rows is 400 `bad_input`; an input or an output of more
    /// than the element cap 413 `too_large`.
    pub(crate) fn fits<M: ServeModel>(&self, model: &M, input: &[f32]) -> Result<Fit, ApiError> {
        let (width, out_width) = model.widths();
        if out_width == 0 {
            let text = "the model's output is not a batch of fixed-size rows";
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "bad_input", text));
        }
        if width == 0 || input.is_empty() || !input.len().is_multiple_of(width) {
            return Err(BurnError::Input { len: input.len(), width }.into());
        }
        let too_many = |what: &str, count: usize| {
            let text = format!("{count} {what} values; the server takes at most {}", self.max_elements);
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", text)
        };
        if u64::try_from(input.len()).unwrap_or(u64::MAX) > self.max_elements {
            return Err(too_many("input", input.len()));
        }
        let rows = input.len() / width;
        let outputs = rows.saturating_mul(out_width);
        if u64::try_from(outputs).unwrap_or(u64::MAX) > self.max_elements {
            return Err(too_many("output", outputs));
        }
        Ok(Fit { width, rows, outputs })
    }

    /// Whether the next batch may run.
    fn check(&self) -> Result<(), ApiError> {
        if self.cancelled.is_set() {
            let gone = StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST);
            return Err(ApiError::new(gone, "client_gone", "the client closed the connection"));
        }
        if self.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            let text = "the request's deadline passed during its forward pass";
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "deadline", text));
        }
        Ok(())
    }
}
