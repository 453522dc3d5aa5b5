//! Keep-alive: how long an idle record stays, and expiring the ones past it.

use super::*;
use crate::telemetry::EvictedBy;

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Evicts records that stayed unprotected for `keep_alive` on the runtime's clock, without
    /// any other call: the group's timer thread (started by the first keep-alive of the group,
    /// ended when no cache has one) sleeps to the earliest deadline. `None` turns expiry off.
    /// Refused (returns `false`) after [`DeviceCache::shutdown`], which cancels keep-alive for
    /// good.
    pub fn set_keep_alive(&self, keep_alive: Option<Duration>) -> bool {
        // The flag changes with the table, under its lock: two calls racing leave both agreeing.
        let set = self.state.with(|s| {
            let set = s.set_keep_alive(keep_alive);
            if set {
                self.timed.store(u64::from(keep_alive.is_some()), Relaxed);
            }
            set
        });
        let drained_first = self.mutant(Mutant::KEEP_ALIVE_SET_DRAINS_FIRST);
        if drained_first {
            self.drain_requests();
        }
        let timer = || {
            if set && keep_alive.is_some() {
                self.group.start_timer();
            } else if set {
                // The timer may exit now, if no other cache has a keep-alive.
                self.group.timer.poke(None, Mutant::LOST_WAKEUP_KEEP_ALIVE_SET);
            }
            0
        };
        // The requests a peer left meanwhile, last (even if the timer's start reports a failure
        // with a panic): their evictions run user code, which may panic, and the keep-alive in
        // force must have its timer by then.
        if drained_first {
            timer();
        } else {
            self.finish_then_drain(timer);
        }
        set
    }

    /// The keep-alive in force (`None` after shutdown).
    pub fn keep_alive(&self) -> Option<Duration> {
        self.with_state(|s| s.keep_alive())
    }

    /// Evicts the records idle (unlocked, unheld, not admitting) for at least the keep-alive, on
    /// the runtime's clock, now. The group's keep-alive timer thread calls it when the earliest
    /// deadline passes, so nobody has to; every `put` and `make_room` runs it first too.
    /// Returns how many went.
    pub fn expire_idle(&self) -> usize {
        let now = self.group.runtime.now();
        let ignore_holds = self.mutant(Mutant::KEEP_ALIVE_EVICTS_HELD);
        let evicted = self.state.with(|s| s.expire(now, ignore_holds));
        self.finish_then_drain(|| self.finish_evictions(evicted, EvictedBy::Idle))
    }

    /// The keep-alive in force and the earliest deadline on the runtime's clock at which one of
    /// this cache's idle records expires: `None` without a keep-alive; `Some(None)` when no
    /// record is idle.
    pub(crate) fn next_expiry(&self) -> Option<Option<Duration>> {
        self.with_state(|s| s.next_expiry())
    }
}
