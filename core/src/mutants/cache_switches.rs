//! `resident`'s own switches in the cache group (the device caches, their budgets and the
//! loader over them): each names one historical bug and the scenario that catches it.

use super::Mutant;

mutants! {
    CACHE;
    /// S-D1c: the RAM budget's wait for room ignores the call's deadline.
    DEADLINE_SKIPS_ROOM = "deadline-skips-room",
    /// S-D1c: a wait for another device's load of the key ignores the call's deadline.
    DEADLINE_SKIPS_LOAD_WAIT = "deadline-skips-load-wait",
    /// S-D1v: lowering a device budget waits for locked copies past its call's deadline.
    DEADLINE_SKIPS_DEVICE_ROOM = "deadline-skips-device-room",
    /// S-D2: placing a record on the device (`lock_on_device`) waits past its call's deadline.
    DEADLINE_SKIPS_DEVICE_WAIT = "deadline-skips-device-wait",
    /// S-D2: `put` waits for RAM room past its call's deadline.
    DEADLINE_SKIPS_PUT = "deadline-skips-put",
    /// C-P5: a panicking eviction callback resumes unwinding from a guard's `Drop` that runs
    /// while its thread already unwinds another panic (the process aborts).
    PANIC_ESCAPES_UNWINDING_DROP = "panic-escapes-unwinding-drop",
    /// C-P6: a contended lifecycle lock or lease reports its wait to the metrics recorder (user
    /// code) before the guard or lease that releases the claim exists.
    REPORT_BEFORE_HANDLE = "report-before-handle",
    /// S-Z2, S-Z3: a load waiting for room reads the cap and the overflow policy once, before
    /// its first round: a policy switched on or a cap lowered below it later goes unseen.
    ROOM_WAIT_READS_LIMITS_ONCE = "room-wait-reads-limits-once",
    /// S-Z2: lowering the RAM cap does not wake the loads waiting for room.
    LOST_WAKEUP_CAP_LOWERED = "lost-wakeup-cap-lowered",
    /// S-Z3: switching the overflow policy on does not wake the loads waiting for room.
    LOST_WAKEUP_OVERFLOW_ON = "lost-wakeup-overflow-on",
    /// C-B4: a room request deferred to a busy peer is honoured only if a load already waits
    /// for room; its requester, still asking other peers, then sleeps its whole room wait.
    DEFERRED_ROOM_NEEDS_WAITER = "deferred-room-needs-waiter",
    /// C-D6: weights a load built across a `drop_model` of their key are registered as its
    /// current canonical: later loads, on every device, adopt the dropped weights.
    LOAD_ACROSS_DROP_REGISTERED = "load-across-drop-registered",
    /// a cache-backed load serves weights read from an earlier version of their source
    /// (a record or a peer's canonical) without comparing the source's identity.
    SOURCE_IDENTITY_IGNORED = "source-identity-ignored",
    /// a load whose look at the source predates a change drops the newer weights another
    /// caller read from the whole group, and reads the source again.
    STALE_LOOK_DROPS_NEWER = "stale-look-drops-newer",
    /// S-Z4: `get_or_put` compares the declared size with the cap before anything else: a key
    /// resident in the cache is refused `TooLarge` once the cap drops below it, and a shut-down
    /// group answers `TooLarge` instead of `ShutDown`.
    TOO_LARGE_BEFORE_HIT = "too-large-before-hit",
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
    /// S-Z1c: lowering the RAM cap only sets the number; nothing is evicted down to it.
    CAP_LOWERED_WITHOUT_EVICTING = "cap-lowered-without-evicting",
    /// W-18: raising the RAM cap does not wake the loads waiting for room.
    LOST_WAKEUP_CAP_RAISED = "lost-wakeup-cap-raised",
    /// S-Z1d: lowering a device budget only sets the number; no copy is offloaded down to it.
    DEVICE_BUDGET_LOWERED_WITHOUT_OFFLOADING = "device-budget-lowered-without-offloading",
    /// W-19: raising a device budget does not wake the lockers waiting for device room.
    LOST_WAKEUP_DEVICE_BUDGET_RAISED = "lost-wakeup-device-budget-raised",
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
    /// C-R5c: `lock` turns its hold into a lock in two critical sections (the hold released in
    /// the first, the lock counted in the second): an eviction between them finds the record
    /// free.
    CONVERSION_IN_TWO_STEPS = "conversion-in-two-steps",
    /// C-R5s: `lock` counts its lock without stamping the use: the record keeps the stamp of its
    /// `get`, older than uses that came after it.
    LOCK_USE_UNSTAMPED = "lock-use-unstamped",
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
    /// W-6: a move that settles does not wake lockers waiting for it.
    LOST_WAKEUP_MOVE_SETTLED = "lost-wakeup-move-settled",
    /// W-8 / X-1: a load of `get_or_put` that ends does not wake the devices waiting for it.
    LOST_WAKEUP_LOAD_FINISHED = "lost-wakeup-load-finished",
    /// `get_or_put` is not single-flight across the group: every device reads the file.
    GET_OR_PUT_NOT_SINGLE_FLIGHT = "get-or-put-not-single-flight",
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
    /// W-23, W-23p: a load's round of room making evicts here (and asks its peers) once and
    /// trusts the bytes it expected: when a peer adopted the weights of a record taken out,
    /// which then gave nothing back, the load waits for a change that never comes while an idle
    /// record would make its room.
    ROOM_ROUND_TRUSTS_ITS_GUESS = "room-round-trusts-its-guess",
    /// C-P6w: lowering the RAM cap evicts cache by cache, and a panicking eviction (a
    /// callback) in one ends the pass: the caches after it keep their idle records, the budget
    /// stays over the lowered cap.
    CAP_PASS_STOPS_AT_PANIC = "cap-pass-stops-at-panic",
    /// C-B4m: a placement waits for another thread's move of its record inside the cache's
    /// state monitor: the wait releases the state lock without honouring the room request a
    /// peer's load left while the placement decided, and the load sleeps out the move.
    MOVE_WAIT_HOLDS_STATE = "move-wait-holds-state",
}
