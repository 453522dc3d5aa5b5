//! `resident`'s own switches: each names one historical bug and the scenario that catches it.

use super::Mutant;

mutants! {
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
    /// S-D1c: the RAM budget's wait for room ignores the call's deadline.
    DEADLINE_SKIPS_ROOM = "deadline-skips-room",
    /// S-D1c: a wait for another device's load of the key ignores the call's deadline.
    DEADLINE_SKIPS_LOAD_WAIT = "deadline-skips-load-wait",
    /// S-D1v: lowering a device budget waits for locked copies past its call's deadline.
    DEADLINE_SKIPS_DEVICE_ROOM = "deadline-skips-device-room",
    /// S-D2: `pin` waits for the lifecycle lock past its call's deadline.
    DEADLINE_SKIPS_PIN = "deadline-skips-pin",
    /// S-D2: placing a record on the device (`lock_on_device`) waits past its call's deadline.
    DEADLINE_SKIPS_DEVICE_WAIT = "deadline-skips-device-wait",
    /// S-D2: `put` waits for RAM room past its call's deadline.
    DEADLINE_SKIPS_PUT = "deadline-skips-put",
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
    /// C-P5: a panicking eviction callback resumes unwinding from a guard's `Drop` that runs
    /// while its thread already unwinds another panic (the process aborts).
    PANIC_ESCAPES_UNWINDING_DROP = "panic-escapes-unwinding-drop",
    /// C-P6: a contended lifecycle lock or lease reports its wait to the metrics recorder (user
    /// code) before the guard or lease that releases the claim exists.
    REPORT_BEFORE_HANDLE = "report-before-handle",
    /// M-B1: a replace records the new version's size but never evicts down to `max_bytes`.
    REPLACE_SKIPS_MAX_BYTES = "replace-skips-max-bytes",
    /// S-Z2, S-Z3: a load waiting for room reads the cap and the overflow policy once, before
    /// its first round: a policy switched on or a cap lowered below it later goes unseen.
    ROOM_WAIT_READS_LIMITS_ONCE = "room-wait-reads-limits-once",
    /// S-Z2: lowering the RAM cap does not wake the loads waiting for room.
    LOST_WAKEUP_CAP_LOWERED = "lost-wakeup-cap-lowered",
    /// S-Z3: switching the overflow policy on does not wake the loads waiting for room.
    LOST_WAKEUP_OVERFLOW_ON = "lost-wakeup-overflow-on",
    /// S-F2: the expiry of a caller's bounded wait inside a load is recorded as the load's
    /// failure: shared with the callers waiting behind it, and remembered by the negative cache.
    EXPIRY_SHARED_AS_FAILURE = "expiry-shared-as-failure",
    /// C-B4: a room request deferred to a busy peer is honoured only if a load already waits
    /// for room; its requester, still asking other peers, then sleeps its whole room wait.
    DEFERRED_ROOM_NEEDS_WAITER = "deferred-room-needs-waiter",
    /// C-D6: weights a load built across a `drop_model` of their key are registered as its
    /// current canonical: later loads, on every device, adopt the dropped weights.
    LOAD_ACROSS_DROP_REGISTERED = "load-across-drop-registered",
    /// a replace loads as an add does, so a cache-backed loader serves the weights it
    /// already holds (the old version's) instead of reading the source again.
    REPLACE_ADOPTS_CACHED = "replace-adopts-cached",
    /// a cache-backed load serves weights read from an earlier version of their source
    /// (a record or a peer's canonical) without comparing the source's identity.
    SOURCE_IDENTITY_IGNORED = "source-identity-ignored",
    /// a load whose look at the source predates a change drops the newer weights another
    /// caller read from the whole group, and reads the source again.
    STALE_LOOK_DROPS_NEWER = "stale-look-drops-newer",
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
    /// S-Z4: `get_or_put` compares the declared size with the cap before anything else: a key
    /// resident in the cache is refused `TooLarge` once the cap drops below it, and a shut-down
    /// group answers `TooLarge` instead of `ShutDown`.
    TOO_LARGE_BEFORE_HIT = "too-large-before-hit",
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
    /// S-G3: a group's shutdown does not wake the loads waiting for RAM room: the first sleeps
    /// out its room wait.
    LOST_WAKEUP_ROOM_SHUTDOWN = "lost-wakeup-room-shutdown",
    /// S-G3: a load waiting for RAM room goes on waiting after its group shut down, and ends in
    /// `NoRoom` (or loads into a group that is gone) instead of `ShutDown`.
    ROOM_WAIT_IGNORES_SHUTDOWN = "room-wait-ignores-shutdown",
    /// S-O1r: a load that finds room under the RAM budget reserves it though loads that came
    /// earlier still look for room.
    ROOM_SEEKERS_BARGE = "room-seekers-barge",
    /// S-O1r: the first load looking for room leaves the line (served, refused or out of time)
    /// without waking the next.
    LOST_WAKEUP_ROOM_SEEKER_LEFT = "lost-wakeup-room-seeker-left",
    /// S-Z2b: lowering the RAM cap wakes the first load looking for room but not the loads in
    /// line behind it: one now too large for the cap sleeps out its room wait.
    LOST_WAKEUP_CAP_LOWERED_BEHIND = "lost-wakeup-cap-lowered-behind",
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
    /// S-G1: shutdown settles only the ids registered when it starts, missing adds in flight.
    SHUTDOWN_REGISTRY_ONLY = "shutdown-registry-only",
    /// S-G2: shutdown lists the registered ids, then the other ids with a lifecycle entry by
    /// asking the registry again: an in-place replace that registers its new version between
    /// the two reads is in neither list, and stays registered after the shutdown.
    SHUTDOWN_IDS_TORN = "shutdown-ids-torn",
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
    /// S-Z1c: lowering the RAM cap only sets the number; nothing is evicted down to it.
    CAP_LOWERED_WITHOUT_EVICTING = "cap-lowered-without-evicting",
    /// W-18: raising the RAM cap does not wake the loads waiting for room.
    LOST_WAKEUP_CAP_RAISED = "lost-wakeup-cap-raised",
    /// S-Z1d: lowering a device budget only sets the number; no copy is offloaded down to it.
    DEVICE_BUDGET_LOWERED_WITHOUT_OFFLOADING = "device-budget-lowered-without-offloading",
    /// W-19: raising a device budget does not wake the lockers waiting for device room.
    LOST_WAKEUP_DEVICE_BUDGET_RAISED = "lost-wakeup-device-budget-raised",
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
    /// C-R1: shutdown lets go of retained records' canonicals (a peer reload copies them).
    SHUTDOWN_RELEASES_WEIGHTS = "shutdown-releases-weights",
    /// C-R2: evicting a shared record after shutdown also debits its bytes from the cache's
    /// non-shared count (upstream read a flag that shutdown had flipped).
    MIS_DEBIT_SHARED = "mis-debit-shared",
    /// C-R3/C-R23: eviction paths treat records inside their admission window as free.
    ADMISSION_UNPROTECTED = "admission-unprotected",
    /// C-R4/C-R27: a release finds its record by key, not identity.
    KEY_MATCH_RELEASE = "key-match-release",
    /// C-R5/C-R14: `get` arms the first-use hold in a second critical section after the lookup.
    HOLD_AFTER_LOOKUP = "hold-after-lookup",
    /// C-R6/C-R12: dropping an unused admission or hold releases nothing.
    UNUSED_HANDLE_LEAKS = "unused-handle-leaks",
    /// C-R7: an admission clears every other record's first-use holds.
    SIBLING_ADMISSION_CLEARS_HOLDS = "sibling-admission-clears-holds",
    /// C-R8: a stale record is evicted at its last unlock even while another handle holds it.
    STALE_UNLOCK_IGNORES_HOLDS = "stale-unlock-ignores-holds",
    /// C-R18: a busy peer drops reconcile requests: its releases honour neither the pending
    /// flag nor the overshoot (upstream before #9263).
    DEFERRED_RECONCILE_SKIPPED = "deferred-reconcile-skipped",
    /// C-R19: a requester sets a peer's reconcile flag only after its try of the peer's lock
    /// failed, so the holder may release and check the flag in between (lost wakeup).
    FLAG_SET_AFTER_TRY = "flag-set-after-try",
    /// C-R21: a reconcile clears the flag after its critical section instead of inside it,
    /// erasing a request that landed meanwhile (set/clear race).
    FLAG_CLEARED_LATE = "flag-cleared-late",
    /// C-K1: keep-alive expiry takes records that are held but not yet locked.
    KEEP_ALIVE_EVICTS_HELD = "keep-alive-evicts-held",
    /// C-R22: a release honours only a peer's request, not its own cache's overshoot.
    NO_OWN_RECONCILE = "no-own-reconcile",
    /// C-R28: adoption peeks, and the insert does not re-check for a live canonical.
    ADOPT_BY_PEEK = "adopt-by-peek",
    /// C-D1: `get` arms a hold on a stale occupant (serving dropped or shut-down weights).
    GET_SERVES_STALE = "get-serves-stale",
    /// C-D2: `drop_model(key)` invalidates only `key` in the store, not its `key:*` submodels.
    DROP_KEY_ONLY = "drop-key-only",
    /// C-D2: `drop_model` acts on the calling cache only, not on its peers.
    DROP_ONE_CACHE = "drop-one-cache",
    /// C-D3: an admission inserts an adopted canonical without re-checking that `drop_model`
    /// did not invalidate it meanwhile.
    ADOPT_ACROSS_DROP = "adopt-across-drop",
    /// C-D4: user code (spare weights' `Drop`, inline evictions and their callbacks) runs after
    /// a claim is counted and before the handle that releases it exists.
    CLAIM_BEFORE_HANDLE = "claim-before-handle",
    /// C-P1: a claimed move charges nothing to the device budget until it settles.
    MOVE_UNCHARGED = "move-uncharged",
    /// C-P2: a device copy used through a detached record is no longer counted.
    DETACHED_COPY_UNCOUNTED = "detached-copy-uncounted",
    /// C-P3: the move claim is created only after user code (offloaded copies' `Drop`, inline
    /// reconciles) ran, so a panic there strands the slot in `Moving`.
    MOVE_CLAIM_LATE = "move-claim-late",
    /// C-P3: a wait for another thread's move has no bound.
    MOVE_WAIT_UNBOUNDED = "move-wait-unbounded",
    /// C-P4: replacing a stale slot drops its device copy under the state lock.
    STALE_COPY_DROPPED_LOCKED = "stale-copy-dropped-locked",
    /// C-R4: a stale record replaced by a new admission of its key leaves the cache at its
    /// holders' last release unreported: no eviction counted, no callback, no metric.
    REPLACED_STALE_UNREPORTED = "replaced-stale-unreported",
    /// C-P7: a `put` holds the caller's weights plainly across user code (expiry, room
    /// requests, room making): a panic there drops them in its unwind, where their own
    /// panicking `Drop` aborts the process.
    PUT_WEIGHTS_DROPPED_IN_UNWIND = "put-weights-dropped-in-unwind",
    /// C-P6r: a handle lets go of its record after releasing its claim: a release whose report
    /// panics drops the record's last reference in that unwind, where the weights' own
    /// panicking `Drop` aborts the process.
    RECORD_DROPPED_IN_RELEASE_UNWIND = "record-dropped-in-release-unwind",
    /// C-P8: a cache whose last reference goes in an unwind (a handle let go by a panic) drops
    /// its records, and so their weights (user code), in that unwind, where a panicking `Drop`
    /// aborts the process.
    CACHE_DROPPED_IN_UNWIND = "cache-dropped-in-unwind",
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
    /// W-6: a move that settles does not wake lockers waiting for it.
    LOST_WAKEUP_MOVE_SETTLED = "lost-wakeup-move-settled",
    /// W-7: an eviction that ends (unloaded or kept) does not wake the leases waiting for it.
    LOST_WAKEUP_EVICTION_SETTLED = "lost-wakeup-eviction-settled",
    /// W-8 / X-1: a load of `get_or_put` that ends does not wake the devices waiting for it.
    LOST_WAKEUP_LOAD_FINISHED = "lost-wakeup-load-finished",
    /// `get_or_put` is not single-flight across the group: every device reads the file.
    GET_OR_PUT_NOT_SINGLE_FLIGHT = "get-or-put-not-single-flight",
    /// M-E5: a lease racing an eviction's unload gets `NotFound` at once, even when the unload
    /// then fails and the model stays (found by the generated programs).
    EVICTION_REFUSES_LEASE = "eviction-refuses-lease",
    /// evicting a record also forgets its key's canonical in the store, though a peer
    /// still uses it: the next load on another device builds a second copy of the same weights.
    EVICTION_FORGETS_CANONICAL = "eviction-forgets-canonical",
    /// `drop_model` evicts records in use (locked, held or admitting), as if they were idle.
    DROP_EVICTS_LOCKED = "drop-evicts-locked",
    /// an admission that ends after its cache was shut down is not stale at birth, so its
    /// record outlives the shutdown.
    ADMISSION_IGNORES_SHUTDOWN = "admission-ignores-shutdown",
    /// `DeviceCache::resident` upgrades the detached records it reports: when their holder lets
    /// go meanwhile, the inspection is the last owner and runs the weights' `Drop` (user code,
    /// which may panic) inside a read-only call (found by the generated cache programs).
    INSPECTION_UPGRADES_DETACHED = "inspection-upgrades-detached",
    /// M-E6: a cold add that fails leaves its own queue entry behind when a layer below evicted
    /// its id meanwhile (the outer reconcile left that entry to this lock holder), so the queue
    /// names a model nobody holds (found by the generated programs, on a narrow nested stack).
    FAILED_ADD_KEEPS_STALE_ENTRY = "failed-add-keeps-stale-entry",
    /// W-8: the group's shutdown does not wake the callers of `get_or_put` waiting for another
    /// device's load; they sleep until that load ends.
    LOST_WAKEUP_GROUP_SHUTDOWN = "lost-wakeup-group-shutdown",
    /// C-L1: every look-up round of `get_or_put` restarts its load wait, so a caller that waits
    /// behind one failing load after another is not bounded by its first deadline.
    LOAD_WAIT_RESTARTS = "load-wait-restarts",
    /// C-B1: `get_or_put` runs the load first and reserves its bytes only to admit it, so
    /// concurrent loads allocate past the cap before any of them is counted.
    RESERVE_AFTER_LOAD = "reserve-after-load",
    /// C-B2: a load that panics forgets its RAM reservation, which then counts forever.
    RAM_RESERVATION_LEAKS_ON_PANIC = "ram-reservation-leaks-on-panic",
    /// W-9: a debit of the RAM budget (a charge or a reservation dropped) does not wake the
    /// loads waiting for room.
    LOST_WAKEUP_BUDGET_DEBIT = "lost-wakeup-budget-debit",
    /// W-10: a release that leaves a record evictable does not wake the loads waiting for room.
    LOST_WAKEUP_ROOM_RELEASE = "lost-wakeup-room-release",
    /// W-10: a load waiting for room counts itself among the watchers only after its look, just
    /// before it waits: a release in between, seeing no watcher, wakes nobody.
    ROOM_WATCH_LATE = "room-watch-late",
    /// C-B3: a cache's shutdown cancels its keep-alive but does not tell the timer thread, which
    /// sleeps on (and never exits while the group lives).
    TIMER_NOT_CANCELLED = "timer-not-cancelled",
    /// C-P6s: a cache's shutdown reports itself (user code: the tracing subscriber) and honours
    /// peers' room requests while the group marks its caches, so a panic there leaves the
    /// caches after it open.
    SHUTDOWN_REPORTS_WHILE_MARKING = "shutdown-reports-while-marking",
    /// C-P6t: the keep-alive timer thread reports its start and a panic caught during expiry
    /// (user code: the tracing subscriber) outside every catch, so a panicking subscriber ends
    /// the thread for good while the group still counts it running.
    TIMER_REPORTS_UNCAUGHT = "timer-reports-uncaught",
    /// W-17: a release while its thread unwinds (a guard dropped by a panic) skips a peer's
    /// pending room request (no user code while unwinding) without waking the load that left
    /// it, which sleeps out its room wait though the lock is free again.
    LOST_WAKEUP_UNWINDING_RELEASE = "lost-wakeup-unwinding-release",
    /// M-PN2, M-PN2r: a cache leaves the victims it found pinned below out of its plans until
    /// its own bookkeeping changes, blind to a pin lifted or an id removed through a layer below
    /// it: an add waiting for room times out with an idle victim, or a free slot. (The bug was
    /// in a stack whose adds looked for removals below once: the switch does that too.)
    PINNED_BELOW_STAYS_OUT = "pinned-below-stays-out",
    /// W-11: a release that leaves a record idle does not wake the keep-alive timer.
    LOST_WAKEUP_KEEP_ALIVE_RELEASE = "lost-wakeup-keep-alive-release",
    /// W-11l: the keep-alive timer leaves the deadline it slept to published while it looks
    /// at the caches, so a release its look missed reads that deadline, finds its own no
    /// earlier, and skips the wake-up.
    LOST_WAKEUP_ARMED_WHILE_LOOKING = "lost-wakeup-armed-while-looking",
    /// W-12x: a keep-alive set while the timer runs reads `running` in one critical section and
    /// pokes the timer in another: a timer that decided to exit in between (it found no
    /// keep-alive) leaves the new one without a timer.
    TIMER_START_SPLIT = "timer-start-split",
    /// W-12: a keep-alive set while the timer sleeps does not wake it.
    LOST_WAKEUP_KEEP_ALIVE_SET = "lost-wakeup-keep-alive-set",
    /// W-15: dropping a cache whose keep-alive kept the timer running does not wake the timer,
    /// which sleeps on while the group lives.
    LOST_WAKEUP_TIMER_CACHE_DROP = "lost-wakeup-timer-cache-drop",
    /// W-13: unlocking a record whose copy is on the device does not wake the lockers waiting
    /// for device room.
    LOST_WAKEUP_DEVICE_UNLOCK = "lost-wakeup-device-unlock",
    /// W-13: a device copy dropped (or a failed move's charge released) does not wake the
    /// lockers waiting for device room.
    LOST_WAKEUP_DEVICE_DEBIT = "lost-wakeup-device-debit",
    /// W-22: a `drop_model`'s (or a room request's) finish honours the room requests left while
    /// it held the cache's lock only if its evictions' user code returned: a panicking eviction
    /// callback strands a peer's request, and its load sleeps out its room wait.
    FINISH_SKIPS_DRAIN_ON_PANIC = "finish-skips-drain-on-panic",
    /// W-12p: `set_keep_alive` honours a peer's pending room request before it starts the
    /// timer: a panicking eviction there (user code) leaves the keep-alive in force with no
    /// timer, and idle records never expire without traffic.
    KEEP_ALIVE_SET_DRAINS_FIRST = "keep-alive-set-drains-first",
    /// C-P6x, C-P6v, C-P6m: lowering the RAM cap (a device budget, `max_size`) reports before it
    /// evicts (offloads): a panicking subscriber leaves the bound lowered and the stack over it.
    RESIZE_REPORTED_FIRST = "resize-reported-first",
    /// X-5p: a load reports stale weights before it drops their key: a panicking subscriber
    /// leaves the old version resident and adoptable.
    STALE_DROP_REPORTED_FIRST = "stale-drop-reported-first",
    /// `CacheLoader` keys weights by the bare id: a replace of `m` drops `m:v2`'s.
    FILE_KEYS_NEST = "file-keys-nest",
    /// S-F1u: a user's error is held plainly across the reports of it: a panicking report drops
    /// it in the unwind, where a panicking `Drop` aborts the process.
    USER_ERROR_DROPPED_IN_UNWIND = "user-error-dropped-in-unwind",
    /// W-23, W-23p: a load's round of room making evicts here (and asks its peers) once and
    /// trusts the bytes it expected: when a peer adopted the weights of a record taken out,
    /// which then gave nothing back, the load waits for a change that never comes while an idle
    /// record would make its room.
    ROOM_ROUND_TRUSTS_ITS_GUESS = "room-round-trusts-its-guess",
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
    /// C-P6w: lowering the RAM cap evicts cache by cache, and a panicking eviction (a
    /// callback) in one ends the pass: the caches after it keep their idle records, the budget
    /// stays over the lowered cap.
    CAP_PASS_STOPS_AT_PANIC = "cap-pass-stops-at-panic",
}
