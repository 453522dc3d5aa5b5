//! A line of waiters served in arrival order (SPEC 2.14), each with its own wake-up.
//!
//! Only the first in line may take what it waits for; the others wait for their turn. If they
//! all waited on one signal, every departure of the first would wake every waiter behind it,
//! of which only the new first could go: n waiters would cost n² wake-ups. So each waiter
//! joins with a waker of its own (`W`, a [`Signal`](crate::runtime::Signal) in the crate), and
//! the first leaving hands back only the new first's, to be woken outside the caller's monitor.
//! Pure data: the caller keeps it behind its monitor.

use std::collections::VecDeque;
use std::fmt;

use crate::runtime::{LineStep, Runtime};

/// Waiters by ticket in arrival order, each with its waker.
pub(crate) struct Line<W> {
    waiters: VecDeque<(u64, W)>,
    /// The next waiter's ticket.
    tickets: u64,
}

impl<W> Default for Line<W> {
    fn default() -> Self {
        Self { waiters: VecDeque::new(), tickets: 0 }
    }
}

impl<W> fmt::Debug for Line<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.waiters.iter().map(|(ticket, _)| ticket)).finish()
    }
}

impl<W> Line<W> {
    /// Joins at the back, to be woken through `wake` when it becomes first; its ticket.
    pub(crate) fn join(&mut self, wake: W) -> u64 {
        let ticket = self.tickets;
        self.tickets += 1;
        self.waiters.push_back((ticket, wake));
        ticket
    }

    /// [`Line::join`], told to `rt` ([`Runtime::observe_line`]).
    pub(crate) fn join_observed<R: Runtime>(&mut self, wake: W, rt: &R) -> u64 {
        let ticket = self.join(wake);
        rt.observe_line(self.key(), LineStep::Joined { ticket });
        ticket
    }

    /// [`Line::leave`], told to `rt` ([`Runtime::observe_line`]); the new first's waker, cloned
    /// to be woken outside the caller's monitor.
    pub(crate) fn leave_observed<R: Runtime>(&mut self, ticket: u64, rt: &R) -> Option<W>
    where
        W: Clone,
    {
        rt.observe_line(self.key(), LineStep::Left { ticket });
        self.leave(ticket).cloned()
    }

    /// Takes `ticket` out of the line. If it was first, the waker of the new first, which
    /// may go now (`None` if it was not first, or nobody is left).
    pub(crate) fn leave(&mut self, ticket: u64) -> Option<&W> {
        let at = self.waiters.iter().position(|(t, _)| *t == ticket)?;
        self.waiters.remove(at);
        (at == 0).then(|| self.waiters.front().map(|(_, wake)| wake)).flatten()
    }

    /// Whether a waiter other than `ticket` (any, for `None`) is first.
    pub(crate) fn ahead(&self, ticket: Option<u64>) -> bool {
        self.waiters.front().is_some_and(|(first, _)| Some(*first) != ticket)
    }

    /// Whether `ticket` is first.
    pub(crate) fn is_first(&self, ticket: u64) -> bool {
        self.waiters.front().is_some_and(|(first, _)| *first == ticket)
    }

    /// The wakers of every waiter behind the first.
    pub(crate) fn behind_first(&self) -> impl Iterator<Item = &W> {
        self.waiters.iter().skip(1).map(|(_, wake)| wake)
    }

    /// The key its steps are observed under ([`Runtime::observe_line`]): its address, unique
    /// among live lines (each sits in a monitor that does not move while it has waiters).
    pub(crate) fn key(&self) -> usize {
        std::ptr::from_ref(self).addr()
    }

    /// How many wait.
    pub(crate) fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether nobody waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_leave_in_any_order_and_only_the_first_leaving_wakes_the_next() {
        let mut line = Line::default();
        assert!(!line.ahead(None), "an empty line");
        let (first, second, third) = (line.join('a'), line.join('b'), line.join('c'));
        assert!(!line.ahead(Some(first)) && line.is_first(first));
        assert!(line.ahead(Some(second)) && line.ahead(None));
        assert_eq!(line.behind_first().copied().collect::<Vec<_>>(), ['b', 'c']);
        assert_eq!(line.leave(second), None, "not first: nobody to wake");
        assert_eq!(line.leave(first), Some(&'c'), "first: the next is woken");
        assert!(!line.ahead(Some(third)) && line.len() == 1);
        assert_eq!(line.leave(third), None, "first, but nobody behind");
        assert!(line.is_empty());
        assert_eq!(line.leave(third), None, "not in line");
    }
}
