//! `resident`'s own switches in the manager, its layers and the runtime: each names one
//! historical bug and the scenario that catches it.

use super::Mutant;

mutants! {
    MANAGER;
    /// S1: `remove` retires the lifecycle entry while it still holds the lock.
    RETIRE_WHILE_HELD = "retire-while-held",
    /// S1b: `remove` retires the entry right after releasing it, ignoring reservations.
    RETIRE_AFTER_RELEASE = "retire-after-release",
    /// S-F1: callers that waited for a failed load do not share its error; each loads again.
    FAILURE_NOT_SHARED = "failure-not-shared",
    /// S-D1: the lifecycle lock wait ignores the call's deadline (configured timeout only).
    DEADLINE_SKIPS_LOCK = "deadline-skips-lock",
    /// S-D1: remove's lease drain ignores the call's deadline.
    DEADLINE_SKIPS_DRAIN = "deadline-skips-drain",
    /// S-D1: a cache's wait for capacity ignores the call's deadline.
    DEADLINE_SKIPS_CAPACITY = "deadline-skips-capacity",
    /// S-D1: a lease's wait for an eviction's outcome ignores the call's deadline.
    DEADLINE_SKIPS_LEASE = "deadline-skips-lease",
    /// S-D2: `pin` waits for the lifecycle lock past its call's deadline.
    DEADLINE_SKIPS_PIN = "deadline-skips-pin",
    /// S-CL1: `clear` gives up at the first model it cannot remove (upstream's `clear`).
    CLEAR_STOPS_AT_FIRST_FAILURE = "clear-stops-at-first-failure",
    /// S-CL1: `clear` evicts instead of removing: pinned and leased models stay, unreported.
    CLEAR_EVICTS = "clear-evicts",
    /// S-CL1: a cache's `clear` goes straight to the manager below it (a decorator fast path):
    /// the queue keeps the removed ids.
    CLEAR_BYPASSES_LAYERS = "clear-bypasses-layers",
    /// S-CL1: a cache's `clear` resets its bookkeeping, pins included.
    CLEAR_DROPS_PINS = "clear-drops-pins",
    /// M-P3: `shutdown` and `clear` let a panicking `unload` unwind out of them: the ids after
    /// it are never attempted and no report is returned.
    REMOVAL_ABANDONED_ON_PANIC = "removal-abandoned-on-panic",
    /// M-P3r: `shutdown` and `clear` report an id's failure uncaught: the ids after it never go.
    REMOVAL_REPORT_UNCAUGHT = "removal-report-uncaught",
    /// M-B1: a replace records the new version's size but never evicts down to `max_bytes`.
    REPLACE_SKIPS_MAX_BYTES = "replace-skips-max-bytes",
    /// S-F2: the expiry of a caller's bounded wait inside a load is recorded as the load's
    /// failure: shared with the callers waiting behind it, and remembered by the negative cache.
    EXPIRY_SHARED_AS_FAILURE = "expiry-shared-as-failure",
    /// a replace loads as an add does, so a cache-backed loader serves the weights it
    /// already holds (the old version's) instead of reading the source again.
    REPLACE_ADOPTS_CACHED = "replace-adopts-cached",
    /// S-F1n: a failed load's error that the table lets go of (replaced or expired) is dropped
    /// inside the table's monitor: the loader's error type's `Drop` is user code.
    FAILURE_DROPPED_IN_MONITOR = "failure-dropped-in-monitor",
    /// S-R2: a replace that can never find a slot beside its old version (a cache of one, or
    /// every other model pinned) waits its whole capacity wait, then fails `CapacityExhausted`.
    REPLACE_WAITS_FOR_NO_SLOT = "replace-waits-for-no-slot",
    /// S-PN2: `unpin` takes no lifecycle lock: racing a pin of the same id, it can leave the
    /// id pinned in one layer and unpinned in the other.
    UNPIN_UNORDERED = "unpin-unordered",
    /// M-P4: a panic caught while `shutdown` or `clear` waits for an id's lock (a report of the
    /// wait) counts the id removed when it is not registered at that moment, though a load of
    /// it under way registers it after the call.
    PANIC_BEFORE_REMOVAL_COUNTED = "panic-before-removal-counted",
    /// M-P2r: a remove or an eviction reports the finished unload while the caller's reference
    /// to the slot lives: a panicking subscriber unwinds and drops the model then, and a `Drop`
    /// that panics aborts the process.
    UNLOADED_REPORTED_FIRST = "unloaded-reported-first",
    /// M-P2s: a replace reports the old version's unload (and the load) while the last
    /// reference to the old version lives, with the same abort.
    REPLACED_REPORTED_FIRST = "replaced-reported-first",
    /// M-P2v, M-P2w: a model slot drops its model plainly when it goes in an unwind: a replace
    /// whose old version's `unload` panics, or a lease let go by a panic that holds the last
    /// reference to a version its replace detached, drops the model there, where the model's
    /// own panicking `Drop` aborts the process.
    SLOT_DROPPED_IN_UNWIND = "slot-dropped-in-unwind",
    /// M-P2x: `register` holds the model it was given plainly across the reports of its
    /// refusal (the lock's wait, a shutdown, a cache's, the `Traced` layer's): a report that
    /// panics drops the model in that unwind, where its own panicking `Drop` aborts the process.
    REGISTERED_MODEL_DROPPED_IN_UNWIND = "registered-model-dropped-in-unwind",
    /// M-P2t: a lease that waited for an eviction's outcome reports the wait while it holds
    /// the slot the eviction took out, with the same abort.
    LEASE_WAIT_REPORTED_HOLDING = "lease-wait-reported-holding",
    /// S-R2i: a lease of an id an in-place replace is swapping finds it gone (`NotFound`)
    /// instead of waiting for the new version.
    SWAP_LEASE_NOT_FOUND = "swap-lease-not-found",
    /// S-R2i: an in-place replace unloads the old version without draining its leases.
    SWAP_SKIPS_DRAIN = "swap-skips-drain",
    /// S-R2i: the end of an in-place swap does not wake the leases waiting for it.
    LOST_WAKEUP_SWAP_SETTLED = "lost-wakeup-swap-settled",
    /// S-O1: a cold add waiting for capacity designates no victim: it wakes at a lease's end
    /// and re-plans, and a lease that starts before it runs keeps the victim (starvation).
    CAPACITY_WAITER_LOSES_RACE = "capacity-waiter-loses-race",
    /// S-O1b: an add that finds room takes it though adds that came earlier wait for capacity.
    CAPACITY_WAITERS_BARGE = "capacity-waiters-barge",
    /// S-O1b: an add that finds fewer evictable victims than it needs evicts them and claims its
    /// slot anyway: two adds each evict a share of what both need, then wait for each other's
    /// slot until one runs out of time.
    PARTIAL_EVICTION_CLAIMS = "partial-eviction-claims",
    /// S-O1f: over a lowered `max_size`, a cold add waiting for capacity evicts only when every
    /// victim it needs is idle at once, and designates only when one victim short: a stream of
    /// leases on two victims starves it, each lease taking back a victim that went idle.
    LOWERED_LIMIT_STARVES_ADDS = "lowered-limit-starves-adds",
    /// S-O1g: an add served by evicting other victims keeps its designation until its next
    /// plan: the designated victim's last lease closes it for an eviction nobody needs, and
    /// its leases wait through the add's unloads.
    SERVED_KEEPS_DESIGNATION = "served-keeps-designation",
    /// M-P2u: `Traced` leaves its span through tracing's guard, so a call that panics (its
    /// loader did) exits the span in the unwind, and a subscriber that panics there aborts the
    /// process.
    SPAN_EXITED_IN_UNWIND = "span-exited-in-unwind",
    /// W-20: a warm add's quiet release of a lifecycle lock does not tell the stack, though an
    /// add waiting for capacity found the model locked and skipped it as a victim: it sleeps
    /// out its capacity wait.
    LOST_WAKEUP_QUIET_RELEASE_WANTED = "lost-wakeup-quiet-release-wanted",
    /// S-O1c: dropping a designation that closed its victim reopens it without waking the
    /// leases waiting on it (they wait out their timeout).
    LOST_WAKEUP_DESIGNATION_DROPPED = "lost-wakeup-designation-dropped",
    /// S-O1e: a remove, replace or in-place replace closes a slot its designation had closed
    /// without waking the leases waiting on that close (they wait out their timeout instead
    /// of finding the new reason).
    LOST_WAKEUP_DESIGNATED_RECLOSED = "lost-wakeup-designated-reclosed",
    /// S-O1b: the first add waiting for capacity leaves the queue (served, or out of time)
    /// without waking the next, which waits for some other change.
    LOST_WAKEUP_CAPACITY_WAITER_LEFT = "lost-wakeup-capacity-waiter-left",
    /// S-O1h: a cold add whose load failed gives its slot back without a wake-up: the add
    /// waiting for capacity sleeps until the failed add's lifecycle lock is released.
    LOST_WAKEUP_CAPACITY_CLAIM_DROPPED = "lost-wakeup-capacity-claim-dropped",
    /// S-O1i, S-O1j: a removal or an eviction settled under a lifecycle lock frees its slot
    /// without a wake-up: the add waiting for capacity sleeps until the lock's holder lets go.
    LOST_WAKEUP_SLOT_FORGOTTEN = "lost-wakeup-slot-forgotten",
    /// S-RG1: `register` of a registered id replaces the model, which is dropped without its
    /// unload while it may serve.
    REGISTER_OVERWRITES = "register-overwrites",
    /// S-RG1: a cache forwards `register` without admission: `max_size` does not hold.
    REGISTER_UNADMITTED = "register-unadmitted",
    /// S-G1, S-G2: shutdown settles only the ids registered when it starts, missing adds and
    /// in-place replaces in flight: it returns while their loads run.
    SHUTDOWN_REGISTRY_ONLY = "shutdown-registry-only",
    /// S-G1: adds are not refused after shutdown.
    ADD_AFTER_SHUTDOWN = "add-after-shutdown",
    /// S-G1: leases are not refused after shutdown.
    LEASE_AFTER_SHUTDOWN = "lease-after-shutdown",
    /// W-16: the start of a shutdown does not wake an add waiting for capacity.
    LOST_WAKEUP_SHUTDOWN = "lost-wakeup-shutdown",
    /// S-R1: a replace removes the old version first, then loads the new one (a hole).
    REPLACE_REMOVES_FIRST = "replace-removes-first",
    /// S-R1: a replace unloads the old version without waiting for its leases.
    REPLACE_SKIPS_DRAIN = "replace-skips-drain",
    /// S-R1: a lease that finds the version it looked up replaced gets `NotFound`.
    REPLACED_LEASE_NOT_FOUND = "replaced-lease-not-found",
    /// S-Z1: lowering `max_size` only sets the number; nothing is evicted down to it.
    RESIZE_DOES_NOT_EVICT = "resize-does-not-evict",
    /// S-Z1p: lowering `max_size` tries a victim pinned by a layer below again at once, forever
    /// (a busy loop while every other victim is in use).
    RESIZE_RETRIES_PINNED_BELOW = "resize-retries-pinned-below",
    /// W-17: raising `max_size` does not wake the adds waiting for room.
    LOST_WAKEUP_MAX_SIZE = "lost-wakeup-max-size",
    /// S2: a failed load retires the entry while the failing loader still holds it.
    RETIRE_ON_LOAD_FAILURE = "retire-on-load-failure",
    /// S2t: a caller that times out waiting for the lifecycle lock keeps its reservation.
    LEAK_RESERVATION_ON_TIMEOUT = "leak-reservation-on-timeout",
    /// S2p: cleanup runs only on normal return, so a panicking loader leaks its reservation.
    LEAK_RESERVATION_ON_PANIC = "leak-reservation-on-panic",
    /// L1: `remove` unloads without waiting for live leases to end.
    UNLOAD_WHILE_LEASED = "unload-while-leased",
    /// S3: a decorator's warm check runs without the lifecycle lock and returns at once.
    UNLOCKED_WARM_PATH = "unlocked-warm-path",
    /// S4: the cache drops the id from its queue before the inner remove, and never restores it.
    QUEUE_REMOVAL_FIRST = "queue-removal-first",
    /// S5: eviction pops skipped pins and the victim off the queue and loses them on failure.
    NO_EVICTION_RESTORE = "no-eviction-restore",
    /// S6: a touch appends without removing the existing entry.
    NO_QUEUE_DEDUP = "no-queue-dedup",
    /// S6b: cold adds queue before locking; a failed load's rollback drops every occurrence.
    ROLLBACK_REMOVES_ALL = "rollback-removes-all",
    /// S6c: admission counts registered models only, not cold loads in flight.
    CAPACITY_IGNORES_INFLIGHT = "capacity-ignores-inflight",
    /// S7: the decorator's warm check looks at the canonical id instead of the resolved id.
    CANONICAL_WARM_CHECK = "canonical-warm-check",
    /// S8: a warm add touches the queue after releasing the lifecycle lock, appending.
    WARM_TOUCH_OUTSIDE_LOCK = "warm-touch-outside-lock",
    /// S11: the new id is queued before eviction and not rolled back when a victim fails.
    APPEND_BEFORE_EVICT = "append-before-evict",
    /// S12: a lease touches the queue before the lookup, appending unknown ids.
    TOUCH_UNKNOWN = "touch-unknown",
    /// L2: eviction picks models that are in use.
    EVICT_LEASED = "evict-leased",
    /// S10: a cache keeps a pin to itself instead of forwarding it down the stack.
    PIN_NOT_FORWARDED = "pin-not-forwarded",
    /// S13: eviction waits for a victim's lifecycle lock while holding the queue lock.
    QUEUE_LOCK_DURING_EVICTION = "queue-lock-during-eviction",
    /// M-E1: `pin` takes no lifecycle lock, so an eviction that checked pins before it still
    /// unloads the model.
    PIN_UNORDERED = "pin-unordered",
    /// M-E2: eviction closes its victim with remove's blocking drain, refusing leases
    /// (`Removing`, then `Busy`) on a model it then keeps.
    EVICT_DRAINS_LEASES = "evict-drains-leases",
    /// M-L3: a lease counts itself in its slot's word before it checks the close, and leaves
    /// the count in place when it finds the slot closed (increment-then-check without undo).
    LEASE_COUNTS_BEFORE_CHECK = "lease-counts-before-check",
    /// M-L3: an eviction's non-blocking close reads the slot's word and then stores the closed
    /// state over it, instead of one compare-exchange: a lease counted in between is lost.
    EVICTION_CLOSE_NOT_ATOMIC = "eviction-close-not-atomic",
    /// M-L4: a lease's touch stores its stamp over the id's, instead of raising it: a touch
    /// that drew its stamp before a later touch of the same id, but stores it after, hides it.
    TOUCH_OVERWRITES_LATER_STAMP = "touch-overwrites-later-stamp",
    /// M-E3: a layer never learns of removals made below it (an inner cache's evictions).
    NESTED_QUEUE_STALE = "nested-queue-stale",
    /// M-E3: the registry counts a removal before it takes effect: a layer that reads the new
    /// count may find the id still registered, and then skip looking for it again.
    REMOVAL_COUNTED_FIRST = "removal-counted-first",
    /// M-E3: a layer's reconcile marks the count it read as looked at even though it left an
    /// id removed below to a busy lock holder (a layer below's eviction, which settles only its
    /// own queue).
    RECONCILE_PAST_BUSY = "reconcile-past-busy",
    /// M-E3: after its own eviction, a layer marks the stack's new count of removals as looked
    /// at without checking that its eviction was the only removal since the count it read.
    RECONCILE_PAST_OTHERS = "reconcile-past-others",
    /// M-E4: a cold add checks its capacity deadline only when nothing at all is evictable.
    DEADLINE_ONLY_WHEN_FULL = "deadline-only-when-full",
    /// M-P1: the cache asks the new model its size before queueing it.
    SIZE_BEFORE_QUEUE = "size-before-queue",
    /// M-P2: the queue is updated only when the inner remove returns normally.
    QUEUE_SKIPPED_ON_PANIC = "queue-skipped-on-panic",
    /// W-1: releasing a lifecycle lock does not wake the callers waiting for it.
    LOST_WAKEUP_LOCK_RELEASE = "lost-wakeup-lock-release",
    /// W-3: the add waiting for capacity watches for lease ends only after it planned, not
    /// before it first looked: a lease that ends in between announces nothing, and the add
    /// waits for an end that came already.
    WATCH_AFTER_PLAN = "watch-after-plan",
    /// W-2: the last lease of a closing model ends without waking the remove draining it.
    LOST_WAKEUP_LEASE_DRAIN = "lost-wakeup-lease-drain",
    /// W-3: the last lease of a model ends without waking adds that wait for room.
    LOST_WAKEUP_LEASE_END = "lost-wakeup-lease-end",
    /// W-4, W-5: releasing a lifecycle guard (an add, remove, eviction, pin or unpin done)
    /// does not wake adds that wait for room.
    LOST_WAKEUP_GUARD_RELEASE = "lost-wakeup-guard-release",
    /// W-7: an eviction that ends (unloaded or kept) does not wake the leases waiting for it.
    LOST_WAKEUP_EVICTION_SETTLED = "lost-wakeup-eviction-settled",
    /// M-E5: a lease racing an eviction's unload gets `NotFound` at once, even when the unload
    /// then fails and the model stays (found by the generated programs).
    EVICTION_REFUSES_LEASE = "eviction-refuses-lease",
    /// M-E6: a cold add that fails leaves its own queue entry behind when a layer below evicted
    /// its id meanwhile (the outer reconcile left that entry to this lock holder), so the queue
    /// names a model nobody holds (found by the generated programs, on a narrow nested stack).
    FAILED_ADD_KEEPS_STALE_ENTRY = "failed-add-keeps-stale-entry",
    /// M-PN2, M-PN2r: a cache leaves the victims it found pinned below out of its plans until
    /// its own bookkeeping changes, blind to a pin lifted or an id removed through a layer below
    /// it: an add waiting for room times out with an idle victim, or a free slot. (The bug was
    /// in a stack whose adds looked for removals below once: the switch does that too.)
    PINNED_BELOW_STAYS_OUT = "pinned-below-stays-out",
    /// S-F1u: a user's error is held plainly across the reports of it: a panicking report drops
    /// it in the unwind, where a panicking `Drop` aborts the process.
    USER_ERROR_DROPPED_IN_UNWIND = "user-error-dropped-in-unwind",
    /// S-Z1r: lowering `max_size` counts the ids a layer below removed behind the cache's back
    /// as holding slots: it evicts a live model for room that is free already.
    LOWERING_COUNTS_REMOVED_BELOW = "lowering-counts-removed-below",
    /// M-E7w: a waiting add looks for ids removed below only before its first eviction or
    /// wait: a pinned id removed below while it waits keeps its slot, and the add fails (or
    /// evicts a live model) with room free.
    ADMISSION_RECONCILES_ONCE = "admission-reconciles-once",
    /// M-B2: the byte budget's enforcement after a load gives up at the first victim it finds
    /// busy (its lock held), pinned below or in use, though other models are idle: the bytes
    /// stay over `max_bytes` until the next load.
    BYTES_STOP_AT_BUSY_VICTIM = "bytes-stop-at-busy-victim",
    /// M-R3n: a cache reads a model's size through a lease of the layer below, which an inner
    /// cache counts as a use: a replace through nested caches moves the model to the inner
    /// cache's most recent end, and the two orders disagree.
    SIZE_READ_TOUCHES_BELOW = "size-read-touches-below",
    /// C-P6z: a cold add through a cache whose inner call panics after it registered the model
    /// (a report of the load) leaves the model queued but unsized: the cache's bytes undercount
    /// it for its whole stay, and the byte budget is not enforced after the add.
    PANIC_SKIPS_SIZE = "panic-skips-size",
    /// W-2u: the end of a draining slot's last lease notifies the remove waiting for it
    /// without passing through the waiters' monitor: a notify that lands while the remove holds
    /// the monitor between its look at the lease word and its wait is lost.
    USE_WORD_NOTIFY_UNPASSED = "use-word-notify-unpassed",
    /// M-C5o: under the `Overflow` policy an add that finds fewer idle victims than it needs
    /// evicts none of them and overflows: each add past a pinned model raises the overshoot by
    /// one while idle models stay resident.
    OVERFLOW_EVICTS_NOTHING = "overflow-evicts-nothing",
    /// S-G1l: a load that outlasts a shutdown's wait for its lifecycle lock registers its model
    /// after the shutdown returned: the id stays resident past the shutdown, and the racing add
    /// succeeds though the shutdown began before it registered.
    REGISTERED_AFTER_SHUTDOWN = "registered-after-shutdown",
    /// S-G1l: a model an add (or a replace) loaded, refused because a shutdown began meanwhile,
    /// is dropped without its `unload`: the one model a shutdown never unloads.
    REFUSED_LOAD_NOT_UNLOADED = "refused-load-not-unloaded",
    /// M-C6s: a cold add whose every planned victim was locked by another call (or went in use,
    /// or was pinned) between its plan and its eviction waits for a change instead of planning
    /// again: an idle model the plan did not name stays resident, nothing wakes the add, and it
    /// sleeps out its capacity wait (found by the generated programs).
    SKIPPED_ROUND_WAITS = "skipped-round-waits",
}
