//! Runtime switches that put historical bugs back, so the model checker can prove that each
//! scenario catches the bug it targets. Compiled only with the `mutants` feature, which only the
//! `resident-sim` crate enables; production builds contain none of this.

use std::fmt;
use std::str::FromStr;

macro_rules! mutants {
    ($($(#[doc = $doc:literal])* $name:ident = $slug:literal,)*) => {
        /// One historical bug that can be switched back on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Mutant {
            $($(#[doc = $doc])* $name,)*
        }

        impl Mutant {
            /// Every mutant, in declaration order.
            pub const ALL: &'static [Mutant] = &[$(Mutant::$name,)*];

            /// The stable kebab-case name used on the command line and in replay files.
            pub fn name(self) -> &'static str {
                match self {
                    $(Mutant::$name => $slug,)*
                }
            }
        }
    };
}

mutants! {
    /// S1: `remove` retires the lifecycle entry while it still holds the lock.
    RetireWhileHeld = "retire-while-held",
    /// S1b: `remove` retires the entry right after releasing it, ignoring reservations.
    RetireAfterRelease = "retire-after-release",
    /// S2: a failed load retires the entry while the failing loader still holds it.
    RetireOnLoadFailure = "retire-on-load-failure",
    /// S2t: a caller that times out waiting for the lifecycle lock keeps its reservation.
    LeakReservationOnTimeout = "leak-reservation-on-timeout",
    /// S2p: cleanup runs only on normal return, so a panicking loader leaks its reservation.
    LeakReservationOnPanic = "leak-reservation-on-panic",
    /// L1: `remove` unloads without waiting for live leases to end.
    UnloadWhileLeased = "unload-while-leased",
    /// S3: a decorator's warm check runs without the lifecycle lock and returns at once.
    UnlockedWarmPath = "unlocked-warm-path",
    /// S4: the cache drops the id from its queue before the inner remove, and never restores it.
    QueueRemovalFirst = "queue-removal-first",
    /// S5: eviction pops skipped pins and the victim off the queue and loses them on failure.
    NoEvictionRestore = "no-eviction-restore",
    /// S6: a touch appends without removing the existing entry.
    NoQueueDedup = "no-queue-dedup",
    /// S6b: cold adds queue before locking; a failed load's rollback drops every occurrence.
    RollbackRemovesAll = "rollback-removes-all",
    /// S6c: admission counts registered models only, not cold loads in flight.
    CapacityIgnoresInflight = "capacity-ignores-inflight",
    /// S7: the decorator's warm check looks at the canonical id instead of the resolved id.
    CanonicalWarmCheck = "canonical-warm-check",
    /// S8: a warm add touches the queue after releasing the lifecycle lock, appending.
    WarmTouchOutsideLock = "warm-touch-outside-lock",
    /// S11: the new id is queued before eviction and not rolled back when a victim fails.
    AppendBeforeEvict = "append-before-evict",
    /// S12: a lease touches the queue before the lookup, appending unknown ids.
    TouchUnknown = "touch-unknown",
    /// L2: eviction picks models that are in use.
    EvictLeased = "evict-leased",
    /// S10: a cache keeps a pin to itself instead of forwarding it down the stack.
    PinNotForwarded = "pin-not-forwarded",
    /// S13: eviction waits for a victim's lifecycle lock while holding the queue lock.
    QueueLockDuringEviction = "queue-lock-during-eviction",
    /// C-R1: shutdown lets go of retained records' canonicals (a peer reload copies them).
    ShutdownReleasesWeights = "shutdown-releases-weights",
    /// C-R2: evicting a shared record after shutdown also debits its bytes from the cache's
    /// non-shared count (upstream read a flag that shutdown had flipped).
    MisDebitShared = "mis-debit-shared",
    /// C-R3/C-R23: eviction paths treat records inside their admission window as free.
    AdmissionUnprotected = "admission-unprotected",
    /// C-R4/C-R27: a release finds its record by key, not identity.
    KeyMatchRelease = "key-match-release",
    /// C-R5/C-R14: `get` arms the first-use hold in a second critical section after the lookup.
    HoldAfterLookup = "hold-after-lookup",
    /// C-R6/C-R12: dropping an unused admission or hold releases nothing.
    UnusedHandleLeaks = "unused-handle-leaks",
    /// C-R7: an admission clears every other record's first-use holds.
    SiblingAdmissionClearsHolds = "sibling-admission-clears-holds",
    /// C-R8: a stale record is evicted at its last unlock even while another handle holds it.
    StaleUnlockIgnoresHolds = "stale-unlock-ignores-holds",
    /// C-R18: a busy peer drops reconcile requests: its releases honour neither the pending
    /// flag nor the overshoot (upstream before #9263).
    DeferredReconcileSkipped = "deferred-reconcile-skipped",
    /// C-R19: a requester sets a peer's reconcile flag only after its try of the peer's lock
    /// failed, so the holder may release and check the flag in between (lost wakeup).
    FlagSetAfterTry = "flag-set-after-try",
    /// C-R21: a reconcile clears the flag after its critical section instead of inside it,
    /// erasing a request that landed meanwhile (set/clear race).
    FlagClearedLate = "flag-cleared-late",
    /// C-K1: keep-alive expiry takes records that are held but not yet locked.
    KeepAliveEvictsHeld = "keep-alive-evicts-held",
    /// C-R22: a release honours only a peer's request, not its own cache's overshoot.
    NoOwnReconcile = "no-own-reconcile",
    /// C-R28: adoption peeks, and the insert does not re-check for a live canonical.
    AdoptByPeek = "adopt-by-peek",
    /// C-D1: `get` arms a hold on a stale occupant (serving dropped or shut-down weights).
    GetServesStale = "get-serves-stale",
    /// C-D2: `drop_model(key)` invalidates only `key` in the store, not its `key:*` submodels.
    DropKeyOnly = "drop-key-only",
    /// C-D2: `drop_model` acts on the calling cache only, not on its peers.
    DropOneCache = "drop-one-cache",
    /// C-D3: an admission inserts an adopted canonical without re-checking that `drop_model`
    /// did not invalidate it meanwhile.
    AdoptAcrossDrop = "adopt-across-drop",
    /// C-D4: user code (spare weights' `Drop`, inline evictions and their callbacks) runs after
    /// a claim is counted and before the handle that releases it exists.
    ClaimBeforeHandle = "claim-before-handle",
    /// C-P1: a claimed move charges nothing to the device budget until it settles.
    MoveUncharged = "move-uncharged",
    /// C-P2: a device copy used through a detached record is no longer counted.
    DetachedCopyUncounted = "detached-copy-uncounted",
    /// C-P3: the move claim is created only after user code (offloaded copies' `Drop`, inline
    /// reconciles) ran, so a panic there strands the slot in `Moving`.
    MoveClaimLate = "move-claim-late",
    /// C-P3: a wait for another thread's move has no bound.
    MoveWaitUnbounded = "move-wait-unbounded",
    /// C-P4: replacing a stale slot drops its device copy under the state lock.
    StaleCopyDroppedLocked = "stale-copy-dropped-locked",
    /// M-E1: `pin` takes no lifecycle lock, so an eviction that checked pins before it still
    /// unloads the model.
    PinUnordered = "pin-unordered",
    /// M-E2: eviction closes its victim with remove's blocking drain, refusing leases
    /// (`Removing`, then `Busy`) on a model it then keeps.
    EvictDrainsLeases = "evict-drains-leases",
    /// M-E3: a layer never learns of removals made below it (an inner cache's evictions).
    NestedQueueStale = "nested-queue-stale",
    /// M-E4: a cold add checks its capacity deadline only when nothing at all is evictable.
    DeadlineOnlyWhenFull = "deadline-only-when-full",
    /// M-P1: the cache asks the new model its size before queueing it.
    SizeBeforeQueue = "size-before-queue",
    /// M-P2: the queue is updated only when the inner remove returns normally.
    QueueSkippedOnPanic = "queue-skipped-on-panic",
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a known mutant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mutant {0:?}")]
pub struct UnknownMutant(pub String);

impl FromStr for Mutant {
    type Err = UnknownMutant;

    fn from_str(s: &str) -> Result<Self, UnknownMutant> {
        Mutant::ALL.iter().copied().find(|m| m.name() == s).ok_or_else(|| UnknownMutant(s.to_owned()))
    }
}

/// A set of switched-on mutants; empty by default. One bit per mutant (room for 128).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutantSet(u128);

impl MutantSet {
    /// No mutant on.
    pub const NONE: MutantSet = MutantSet(0);

    /// Only `mutant` on.
    pub fn only(mutant: Mutant) -> Self {
        Self::NONE.with(mutant)
    }

    /// This set plus `mutant`.
    pub fn with(self, mutant: Mutant) -> Self {
        Self(self.0 | 1u128 << mutant as u32)
    }

    /// Whether `mutant` is on.
    pub fn contains(self, mutant: Mutant) -> bool {
        self.0 & (1u128 << mutant as u32) != 0
    }

    /// Whether no mutant is on.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The mutants that are on, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Mutant> {
        Mutant::ALL.iter().copied().filter(move |m| self.contains(*m))
    }
}

impl FromIterator<Mutant> for MutantSet {
    fn from_iter<I: IntoIterator<Item = Mutant>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, Self::with)
    }
}

/// Whether `mutant` is on. Without the `mutants` feature this is the constant `false`, so every
/// mutant branch compiles away.
#[cfg(feature = "mutants")]
#[inline]
pub(crate) fn on(set: MutantSet, mutant: Mutant) -> bool {
    set.contains(mutant)
}

/// Whether `mutant` is on. Without the `mutants` feature this is the constant `false`, so every
/// mutant branch compiles away.
#[cfg(not(feature = "mutants"))]
#[inline(always)]
pub(crate) fn on(_set: MutantSet, _mutant: Mutant) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutant_fits_the_set_and_round_trips() {
        assert!(Mutant::ALL.len() <= u128::BITS as usize, "widen MutantSet");
        let all: MutantSet = Mutant::ALL.iter().copied().collect();
        assert_eq!(all.iter().count(), Mutant::ALL.len(), "one distinct bit per mutant");
        for &m in Mutant::ALL {
            assert!(MutantSet::only(m).contains(m));
            assert_eq!(MutantSet::only(m).iter().collect::<Vec<_>>(), [m]);
            assert_eq!(m.name().parse::<Mutant>(), Ok(m));
        }
    }
}
