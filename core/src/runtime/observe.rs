//! Ghost steps: what a model-checking runtime is told about a model slot's designation protocol
//! (SPEC 2.14), so that it can check the protocol's fairness on every execution without reading
//! any private state.

/// A step of a model slot's lease and designation protocol, reported to
/// [`Runtime::observe`](super::Runtime::observe) under the slot's use-state monitor, in the same
/// critical section as the change it describes (so a checker sees them in their true order).
///
/// The protocol's fairness (SPEC 2.14): once a designated slot's last lease has ended (or the
/// slot was idle when designated), no lease may be taken on it until its waiter acts on it (a
/// close for an eviction, a remove or a replace) or every designation of it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SlotStep {
    /// A slot was created: a key a slot that is gone had may name a new one from now on.
    Created,
    /// A lease was taken on the slot.
    Leased,
    /// A waiting add designated the slot; `idle`: it had no live lease and was open, so the
    /// waiter is owed it from this step on.
    Designated {
        /// No live lease, and open.
        idle: bool,
    },
    /// The last lease ended while the slot was designated and open: the waiter is owed it.
    IdleWhileDesignated,
    /// One designation of the slot ended.
    Undesignated,
    /// The slot was closed by an eviction, a remove or a replace acting on it.
    Closed,
}

/// A step of a waiting line (SPEC 2.14: the adds waiting for a `FixedSizeCache`'s capacity, the
/// loads waiting for the RAM budget's room), reported to
/// [`Runtime::observe_line`](super::Runtime::observe_line) under the monitor that keeps the
/// line, in the same critical section as the change it describes.
///
/// The line's rule: whoever takes what the line waits for (a slot, room) is its first waiter,
/// or, with nobody waiting, a caller that holds no place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LineStep {
    /// `ticket` joined the line at its back.
    Joined {
        /// Its place.
        ticket: u64,
    },
    /// `ticket` left the line (served, refused, out of time or unwinding).
    Left {
        /// Its place.
        ticket: u64,
    },
    /// A caller took what the line waits for: the holder of `ticket`, or one not in line.
    Served {
        /// Its place, if it holds one.
        ticket: Option<u64>,
    },
}
