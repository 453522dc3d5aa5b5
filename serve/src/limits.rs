//! [`Limits`]: what one client, and all of them together, can make the server spend — bytes,
//! blocking threads, sockets and time.
//!
//! # Bytes
//! A request's body is at most [`Limits::max_body_bytes`]: a larger `Content-Length` is refused
//! with 413 before a byte of the body is read, and a body without one is cut off there (413).
//! Its input tensor and its output tensor hold at most [`Limits::max_elements`] elements each
//! (413 otherwise): the JSON decoders stop at the cap while they parse, a binary tensor's bytes
//! are checked against its shape before a float is decoded, and the output's count is checked
//! against the model before the forward pass. Names and ids a request carries are at most 256
//! bytes, a shape at most 8 dimensions, a request at most 8 input tensors and 8 requested
//! outputs; a request's head (line and headers) at most 64 KiB, and the path the access log
//! writes of it at most [`MAX_LOGGED_PATH`](crate::access::MAX_LOGGED_PATH) bytes.
//!
//! Before its body is read, every request with a body is charged, against the server's
//! in-flight byte budget ([`Limits::inflight_bytes`], a semaphore of bytes), everything it can
//! make the server allocate ([`Charge`]); once its handler is done, all but its answer's bytes
//! (and a frame) is returned, and the rest when the answer has been handed to hyper (or
//! dropped). The body is copied into one buffer as it arrives, so a body
//! sent in many tiny chunks holds its bytes, not a handle and a read buffer per chunk; a
//! control request without the control token is refused before its body is charged or read;
//! and an error's message, which may quote what the client sent, is cut to
//! [`MAX_MESSAGE`](crate::error::MAX_MESSAGE) bytes. A request that finds the budget spent
//! waits for its turn, up to the request timeout (then 503 with `Retry-After`); one whose charge is larger than the whole
//! budget is refused at once (413). An answer is handed to hyper in frames of 64 KiB, so the
//! charge is held until all but the last few hundred KiB of it have been written; a client that
//! stops reading is cut off after [`Limits::send_timeout`], and one that reads slower than 64 KiB
//! a second on average (after that timeout) once its answer is late by that measure. So all requests together hold at
//! most `inflight_bytes` of bodies, decoded tensors, activations and answers, plus, per open
//! connection, hyper's buffers (a head of at most 64 KiB, a few frames of an answer).
//!
//! Known limit: a request is charged for its declared length while its body arrives, so clients
//! that announce large bodies and send them slowly hold the budget for up to
//! [`Limits::body_timeout`] each, and honest requests wait behind them (the budget is first come,
//! first served). Size `body_timeout` and `max_connections` against `inflight_bytes` where
//! clients are not trusted.
//!
//! # Threads
//! Every call into resident blocks a thread of tokio's blocking pool (a lifecycle lock, a load,
//! a drain, a forward pass). At most [`Limits::max_blocking`] such calls run or wait at once
//! (more: 503 with `Retry-After`), and at most [`Limits::max_per_model`] of them for one model
//! (more: 429 with `Retry-After`): a flood of inferences on one model can neither fill the pool
//! nor stall an unrelated model. A change of what is served (a load, a replace, an unload, a
//! pin), once its caller is admitted as a controller, takes a place in a lane of its own instead
//! (eight calls at most, then 503): a flood of inferences cannot keep
//! the operator from unloading the model.
//!
//! # Sockets and time
//! At most [`Limits::max_connections`] connections are open (the listener stops accepting until
//! one closes), at most [`Limits::max_connections_per_client`] of them of one client (a further
//! one is closed as soon as it is accepted, so that, with a cap below `max_connections`, one
//! client cannot take every connection); a client has [`Limits::header_timeout`] to send its request's head and
//! [`Limits::body_timeout`] to send its body (408), and [`Limits::send_timeout`] for each write
//! of its answer to make progress (else the connection is closed); a forward pass runs in
//! batches of [`Limits::batch_rows`] rows and stops between two batches when its client has gone or its
//! deadline has passed.

use std::time::Duration;

/// The server's bounds on what requests can make it spend (the module docs say how each is
/// enforced). [`Limits::default`] suits the fixture models on a small machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, in bytes.
    pub max_body_bytes: u64,
    /// The most elements of a request's input tensor, and of its output tensor.
    pub max_elements: u64,
    /// The bytes all requests in the server may hold at once (bodies, decoded tensors,
    /// activations, answers), as charged by [`Charge`].
    pub inflight_bytes: u64,
    /// The most calls into resident (each holding a blocking thread) running or waiting at once.
    pub max_blocking: usize,
    /// The most calls into resident running or waiting at once for one model.
    pub max_per_model: usize,
    /// The most connections open at once.
    pub max_connections: usize,
    /// The most connections one client may hold open at once: a further one of its is closed
    /// as soon as it is accepted. A client is an IPv4 address or an IPv6 /64 network. Behind a
    /// proxy every request comes from the proxy's address: raise this to `max_connections`
    /// there.
    pub max_connections_per_client: usize,
    /// How long a client may take to send a request's head (its line and headers).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body, from the end of its head.
    pub body_timeout: Duration,
    /// How long a write of an answer may wait for the client to read (then the connection is
    /// closed).
    pub send_timeout: Duration,
    /// The rows a forward pass runs at a time: its activations are bounded by this many rows,
    /// and between two batches it stops if its client has gone or its deadline has passed.
    pub batch_rows: usize,
}

/// A [`Limits`] value the server cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit `{name}` is {value}; it must be at least {least}")]
pub struct InvalidLimit {
    /// The field.
    pub name: &'static str,
    /// Its value, as text.
    pub value: String,
    /// The least value that works, as text.
    pub least: &'static str,
}

impl Limits {
    /// Checks every limit can admit a request: counts and sizes of at least one (the in-flight
    /// budget at least one KiB, its unit), timeouts of more than zero.
    pub fn validate(&self) -> Result<(), InvalidLimit> {
        let counts = [
            ("max_body_bytes", self.max_body_bytes, 1, "1"),
            ("max_elements", self.max_elements, 1, "1"),
            ("inflight_bytes", self.inflight_bytes, 1024, "1024"),
            ("max_blocking", self.max_blocking as u64, 1, "1"),
            ("max_per_model", self.max_per_model as u64, 1, "1"),
            ("max_connections", self.max_connections as u64, 1, "1"),
            ("max_connections_per_client", self.max_connections_per_client as u64, 1, "1"),
            ("batch_rows", self.batch_rows as u64, 1, "1"),
        ];
        if let Some((name, value, _, least)) = counts.into_iter().find(|(_, value, least, _)| value < least) {
            return Err(InvalidLimit { name, value: value.to_string(), least });
        }
        let times = [
            ("header_timeout", self.header_timeout),
            ("body_timeout", self.body_timeout),
            ("send_timeout", self.send_timeout),
        ];
        if let Some((name, value)) = times.into_iter().find(|(_, value)| value.is_zero()) {
            return Err(InvalidLimit { name, value: format!("{value:?}"), least: "a nanosecond" });
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 * 1024 * 1024,
            max_elements: 4 * 1024 * 1024,
            inflight_bytes: 1024 * 1024 * 1024,
            max_blocking: 64,
            max_per_model: 16,
            max_connections: 1024,
            max_connections_per_client: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            batch_rows: 256,
        }
    }
}

/// What a request is charged against [`Limits::inflight_bytes`] before its body is read,
/// computed from the body's length alone:
///
/// - the body itself;
/// - its decoded input: a JSON element takes at least two bytes of the body (`0,`) and a binary
///   one four, so at most `body / 2` elements, capped by [`Limits::max_elements`], of four
///   bytes, twice over (a growing vector's spare capacity);
/// - its answer: the input's rows times the widest output row per input value of any catalogue
///   model ([`Charge::new`]'s `expansion`), capped by [`Limits::max_elements`]; each element four
///   bytes as a float, at most sixteen as JSON text, four again in binary;
/// - one batch's activations, four bytes a float: the floats a forward pass holds per input
///   element (the most of any catalogue model) times the input's elements, but never more than
///   [`Limits::batch_rows`] rows of the largest per-row activation of any catalogue model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Charge {
    max_elements: u64,
    expansion: f64,
    activation: Activation,
    batch_floats: u64,
}

/// What a forward pass holds at once: at most `per_row` floats a row and `per_element` floats
/// an input element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activation {
    /// Floats per row.
    pub per_row: u64,
    /// Floats per input element.
    pub per_element: f64,
}

impl Charge {
    /// The charge for requests to models whose output has at most `expansion` elements per
    /// input element, and whose forward pass holds at most `activation`.
    pub fn new(limits: &Limits, expansion: f64, activation: Activation) -> Self {
        let batch_rows = u64::try_from(limits.batch_rows).unwrap_or(u64::MAX);
        Self {
            max_elements: limits.max_elements,
            expansion: expansion.max(0.0),
            activation,
            batch_floats: batch_rows.saturating_mul(activation.per_row),
        }
    }

    /// `count` times `factor`, rounded up, saturating.
    fn scaled(count: u64, factor: f64) -> u64 {
        // An f64 past u64's range saturates; callers cap the result.
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let scaled = (count as f64 * factor.max(0.0)).ceil() as u64;
        scaled
    }

    /// The bytes a request whose body has `body` bytes is charged.
    pub fn bytes(&self, body: u64) -> u64 {
        if body == 0 {
            return 0;
        }
        let inputs = (body / 2).min(self.max_elements);
        let outputs = Self::scaled(inputs, self.expansion).min(self.max_elements);
        let activations = Self::scaled(inputs, self.activation.per_element).min(self.batch_floats);
        body.saturating_add(inputs.saturating_mul(8))
            .saturating_add(outputs.saturating_mul(24))
            .saturating_add(activations.saturating_mul(4))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_that_admit_nothing_are_refused() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let zero = Limits { max_blocking: 0, ..Limits::default() };
        assert_eq!(zero.validate().map_err(|e| e.name), Err("max_blocking"));
        let tiny = Limits { inflight_bytes: 1023, ..Limits::default() };
        assert_eq!(tiny.validate().map_err(|e| e.name), Err("inflight_bytes"));
        let instant = Limits { header_timeout: Duration::ZERO, ..Limits::default() };
        assert_eq!(instant.validate().map_err(|e| e.name), Err("header_timeout"));
    }

    #[test]
    fn a_charge_covers_the_body_its_tensors_and_a_batch() {
        let limits = Limits { max_elements: 1000, batch_rows: 10, ..Limits::default() };
        let activation = Activation { per_row: 100, per_element: 3.0 };
        let charge = Charge::new(&limits, 0.5, activation);
        assert_eq!(charge.bytes(0), 0, "no body, no charge");
        // 200 bytes: 100 inputs (800), 50 outputs (1,200), 300 activation floats (1,200).
        assert_eq!(charge.bytes(200), 200 + 800 + 1_200 + 1_200);
        // The element cap bounds both tensors however large the body, the batch the activations.
        assert_eq!(charge.bytes(1_000_000), 1_000_000 + 8_000 + 500 * 24 + 10 * 100 * 4);
        let wide = Charge::new(&limits, 1e30, Activation { per_row: 1, per_element: 1e30 });
        assert_eq!(wide.bytes(10), 10 + 40 + 1_000 * 24 + 10 * 4, "outputs are capped too");
        let huge = Charge::new(&limits, 1.0, Activation { per_row: u64::MAX, per_element: 1.0 });
        assert_eq!(huge.bytes(u64::MAX), u64::MAX, "saturates");
    }
}
