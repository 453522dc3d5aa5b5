//! The scenario catalogue: one named scenario per schedule id of SPEC §5 (`docs/catalogue.md`
//! lists them).
//!
//! A scenario is a small concurrent program over `resident` (two to four threads), generic over
//! the checker runtime. It raises a [`Violation`](crate::violation::Violation) when an
//! invariant breaks, inside a thread or in the quiescence checks after every thread is joined.
//! Each scenario names the mutants it must catch.

mod bounds;
mod budget;
mod cache;
mod clear;
mod composition;
mod deadlines;
mod drop_model;
mod eviction;
mod instrumentation;
mod keep_alive;
pub mod layers;
mod lru;
mod manager;
mod overload;
mod panics;
mod placement;
mod register;
mod replace;
mod resize;
mod shutdown;
mod wakeups;

use std::sync::LazyLock;

use resident::mutants::Mutant;

use crate::program;
use crate::runtime::Time;
pub use crate::scenario::{Scenario, execute_with};

/// Why loom cannot run a scenario whose race needs a failing `try_lock`.
const TRY_LOCK_NEVER_FAILS: &str = "the race needs a try_lock to fail inside another thread's critical section; loom 0.7.3 treats a thread trying a held lock as blocked (loom #376), so no try_lock ever fails, even with a yield inside the holder's critical section (probed: 19 executions instead of 163, the mutant survives)";

/// Why loom cannot run a scenario whose user code panics while another panic unwinds.
const PANIC_IN_UNWIND_ABORTS_LOOM: &str = "its user code panics while its thread unwinds another panic, and loom's threads share one OS thread: a context switch inside the unwind lets another loom thread see the unwind as its own, which aborts the process";

/// Why S-F1u runs under shuttle only.
const ABORT_VERDICT_NEEDS_NAMED_THREADS: &str = "its check (a user's error dropped in an unwind outside a catch entered during it) needs the catches of the checker thread that unwinds, and loom's threads share one OS thread and cannot be named: loom gives no verdict there, and the mutant survives (probed); shuttle's random and PCT schedulers explore it";

/// Why M-P1 runs under shuttle only.
const SIZE_PANIC_UNWINDS_THROUGH_LOOM: &str = "its size_bytes panics while the add holds a lease and a lifecycle reservation, and their release during the unwind reads the registry's reader-writer lock: loom may switch threads there, and another loom thread's generator ending inside the unwind (its threads share one OS thread) aborts the process (probed: generator::yield_::done panics in cleanup); shuttle's random and PCT schedulers explore it";

/// Why M-P2r, M-P2s, M-P2t and M-P2u run under shuttle only.
const REPORT_BESIDE_AN_UNWIND: &str = "one thread's report must fire while the other thread is suspended half-way through its unwind: loom's threads share one OS thread and cannot be told apart from a panic hook, so the second thread looks unwinding too, and its report is skipped as an unwinding thread's is; shuttle's random and PCT schedulers explore it";

/// Why C-R9 runs under shuttle only.
const HOLDER_UNWIND_READS_ATOMICS: &str = "its holders panic with a guard alive, and the guard's release during the unwind reads the cache's atomics (whether a keep-alive is set, whether the budget is over its cap, whether a reconcile is pending): loom may switch threads there, and another loom thread's generator ending inside the unwind (its threads share one OS thread) aborts the process (probed); shuttle's random and PCT schedulers explore it";

/// Why loom runs C-D5's correct code only.
const REFCOUNT_RACE_INVISIBLE_TO_LOOM: &str = "its mutant races two threads' drops of one record's reference count (std's `Arc`, which loom does not model), and the two threads' other operations on shared state are independent reads: loom's partial-order reduction then never reorders them, so no bound explores the race (probed: 61 executions at bound 2, 211 at bound 3, the mutant survives); shuttle's random and PCT schedulers preempt at every scheduling point and find it";

/// Why a notify lost between a waiter's look and its wait is found under shuttle only.
const NOTIFY_WINDOW_NEEDS_SHUTTLE: &str = "its mutant's notify is lost only when it lands while the waiter holds the monitor between its look and its wait; the sim preempts a waiter there under shuttle only, because loom keeps a mutex's value in a std mutex that a guard held across a scheduling point poisons when another loom thread (on the same OS thread) unwinds meanwhile, and loom unwraps it";

/// Why the RAM-line scenarios run under shuttle only.
const TWO_ROOM_WAITERS_OUTGROW_LOOM: &str = "two loads under a hard budget, both waiting for room, give loom at a preemption bound of one more than 460,000 executions without finishing in two minutes (probed, also with the third thread folded into the main one); shuttle's random and PCT schedulers explore it";

/// Why loom runs a keep-alive timer scenario's correct code only.
const TIMER_DEADLOCK_ABORTS_LOOM: &str = "its mutant leaves the main thread and the keep-alive timer blocked for good, and loom aborts the process on that deadlock (a non-unwinding panic; probed) instead of reporting it";

macro_rules! scenario {
    ($id:literal, $desc:literal, time: $t:ident, loom: $l:expr, targets: [$($m:ident),*], $body:path) => {
        scenario!(@ $id, $desc, $t, [$($m),*], $body).loom_bound($l)
    };
    // Under loom, but its mutants under shuttle only.
    ($id:literal, $desc:literal, time: $t:ident, loom: $l:expr, loom_mutants_abort: $why:expr, targets: [$($m:ident),*], $body:path) => {
        scenario!(@ $id, $desc, $t, [$($m),*], $body).loom_bound($l).loom_correct_only($why)
    };
    ($id:literal, $desc:literal, time: $t:ident, no_loom: $why:expr, targets: [$($m:ident),*], $body:path) => {
        scenario!(@ $id, $desc, $t, [$($m),*], $body).without_loom($why)
    };
    (@ $id:literal, $desc:literal, $t:ident, [$($m:ident),*], $body:path) => {
        Scenario::new($id, $desc, program!($body)).time(Time::$t)$(.must_kill(Mutant::$m))*
    };
}

macro_rules! one_deep {
    ($id:literal, time: $t:ident, $body:ident) => {
        Scenario::new(
            $id,
            "the catalogue scenario of the same id, on a one-deep stack",
            program!(layers::$body::<_, layers::OneDeep>),
        )
        .time(Time::$t)
        .without_loom("a one-deep twin: loom checks the catalogue scenario of the same id")
    };
}

/// Every scenario, in catalogue order.
pub static CATALOGUE: LazyLock<Vec<Scenario>> = LazyLock::new(|| {
    vec![
        scenario!("M-S1", "split lock generation: remove(X) races two add(X) (upstream S1)",
        time: Off, loom: 2, targets: [RETIRE_WHILE_HELD], manager::split_generation),
        scenario!("M-S1b", "the naive fix: retire the entry after release while a waiter holds it (S1b)",
        time: Off, loom: 2, targets: [RETIRE_AFTER_RELEASE], manager::split_generation),
        scenario!("M-S2", "loader failure while a waiter holds the old generation (S2)",
        time: Off, loom: 1, targets: [RETIRE_ON_LOAD_FAILURE], manager::load_failure),
        scenario!("M-S2t", "S2 where waiters time out: every reservation is released (S2, timeout)",
        time: Any, loom: 1, targets: [LEAK_RESERVATION_ON_TIMEOUT], manager::load_failure),
        scenario!("M-S2p", "S2 where the loader panics: the panic reaches its caller only (S2, panic)",
        time: Off, loom: 2, targets: [LEAK_RESERVATION_ON_PANIC], manager::load_panic),
        scenario!("M-L1", "remove never unloads a model under a live lease",
        time: Off, loom: 1, targets: [UNLOAD_WHILE_LEASED], manager::remove_under_lease),
        scenario!("M-L3", "the lease word: two leases race an eviction's compare-exchange close and a remove's draining close (1.5, 2.10)",
        time: Off, loom: 2, targets: [LEASE_COUNTS_BEFORE_CHECK, EVICTION_CLOSE_NOT_ATOMIC, LOST_WAKEUP_LEASE_DRAIN], manager::lease_word),
        scenario!("M-L4", "LRU stamps: two leases' touches race each other and an evicting add's order; a later touch is never hidden (2.3)",
        time: Off, loom: 2, targets: [TOUCH_OVERWRITES_LATER_STAMP], lru::stamps),
        scenario!("M-S3", "a decorator's warm path must not bypass a remove in progress (S3)",
        time: Any, loom: 1, targets: [UNLOCKED_WARM_PATH], layers::warm_path_vs_remove::<_, layers::ThreeDeep>),
        scenario!("M-S4", "a failed direct remove keeps the exact LRU order (S4)",
        time: Off, loom: 2, targets: [QUEUE_REMOVAL_FIRST], layers::failed_remove_keeps_order::<_, layers::ThreeDeep>),
        scenario!("M-S5", "a failed eviction restores skipped pins and the failed victim (S5)",
        time: Off, loom: 2, targets: [NO_EVICTION_RESTORE], layers::failed_eviction_restores::<_, layers::ThreeDeep>),
        scenario!("M-S6", "concurrent cold adds of one id queue it once (S6)",
        time: Off, loom: 2, targets: [NO_QUEUE_DEDUP], layers::concurrent_cold_adds::<_, layers::ThreeDeep>),
        scenario!("M-S6b", "a failed load's rollback must not drop a peer's queue entry (S6b)",
        time: Off, loom: 2, targets: [ROLLBACK_REMOVES_ALL], layers::rollback_keeps_peer_entry::<_, layers::ThreeDeep>),
        scenario!("M-S6c", "max_size holds under simultaneous cold loads of different ids (S6c)",
        time: Any, loom: 2, targets: [CAPACITY_IGNORES_INFLIGHT], layers::capacity_under_concurrent_loads::<_, layers::ThreeDeep>),
        scenario!("M-S7", "every layer uses the resolved id: an alias of a registered model loads (S7)",
        time: Off, loom: 2, targets: [CANONICAL_WARM_CHECK], layers::alias_uses_resolved_id::<_, layers::ThreeDeep>),
        scenario!("M-S8", "eviction racing a reload of the victim (S8)",
        time: Off, loom: 2, targets: [WARM_TOUCH_OUTSIDE_LOCK], layers::eviction_vs_reload::<_, layers::ThreeDeep>),
        scenario!("M-S9", "S2 through the cache: loader failure with waiters (S9)",
        time: Off, loom: 1, targets: [RETIRE_ON_LOAD_FAILURE], layers::load_failure_through_cache::<_, layers::ThreeDeep>),
        scenario!("M-S10", "nested stacks: cache over tracing over cache over base, all methods (S10)",
        time: Off, loom: 2, targets: [PIN_NOT_FORWARDED], layers::nested_stacks),
        scenario!("M-PN1", "a pin racing an unpin of one id in nested caches: every layer agrees on the outcome (I13)",
        time: Off, loom: 2, targets: [UNPIN_UNORDERED], layers::pin_racing_unpin_at_depth),
        scenario!("M-PN2", "a pin lifted through an inner cache serves the add an outer cache keeps waiting for that victim (2.14, I10)",
        time: Auto, loom: 1, targets: [PINNED_BELOW_STAYS_OUT], eviction::unpin_below_serves_the_waiting_add),
        scenario!("M-PN2r", "a victim pinned in an inner cache and removed there frees the slot an outer cache's add waits for (2.14, I4)",
        time: Auto, loom: 1, targets: [PINNED_BELOW_STAYS_OUT], eviction::removal_below_serves_the_waiting_add),
        scenario!("M-S11", "new id queued before eviction, then the victim's unload fails (S11)",
        time: Off, loom: 2, targets: [APPEND_BEFORE_EVICT], layers::failed_eviction_no_phantom::<_, layers::ThreeDeep>),
        scenario!("M-S12", "a lease of an unknown id, and a lease racing a remove, leave no phantom (S12)",
        time: Off, loom: 1, targets: [TOUCH_UNKNOWN], layers::touch_of_unknown_ids::<_, layers::ThreeDeep>),
        scenario!("M-S13", "no lock-order cycle between eviction and warm adds of the victims (S13)",
        time: Off, loom: 1, loom_mutants_abort: "its mutant raises a violation inside an unload while a loom mutex is held, and the unwind aborts loom (its threads share one OS thread)", targets: [QUEUE_LOCK_DURING_EVICTION], layers::lock_order::<_, layers::ThreeDeep>),
        scenario!("M-L2", "eviction skips models in use",
        time: Any, loom: 2, targets: [EVICT_LEASED], layers::eviction_skips_in_use::<_, layers::ThreeDeep>),
        scenario!("C-R1", "shutdown keeps a record in use: a peer reload adopts the same canonical (1)",
        time: Off, loom: 2, targets: [SHUTDOWN_RELEASES_WEIGHTS], cache::shutdown_keeps_weights),
        scenario!("C-R2", "shared bytes are never debited as non-shared after shutdown (2)",
        time: Off, loom: 2, targets: [MIS_DEBIT_SHARED], cache::shared_debit_after_shutdown),
        scenario!("C-R3", "shutdown inside the admission window (3)",
        time: Off, loom: 2, targets: [ADMISSION_UNPROTECTED], cache::shutdown_in_admission_window),
        scenario!("C-R4", "detached stale record, key re-admitted, old record's last release: touches only itself, evicts and reports it once (4, 3.7)",
        time: Off, loom: 2, targets: [KEY_MATCH_RELEASE, REPLACED_STALE_UNREPORTED], cache::drop_model_during_use),
        scenario!("C-R5", "shutdown between get() and the first lock (5)",
        time: Off, loom: 2, targets: [HOLD_AFTER_LOOKUP, CONVERSION_IN_TWO_STEPS], cache::shutdown_before_first_lock),
        scenario!("C-R6", "a holder dropped unused after shutdown (6)",
        time: Off, loom: 2, targets: [UNUSED_HANDLE_LEAKS], cache::abandoned_holder),
        scenario!("C-R7", "a sibling admission must not strip or evict a held record (7)",
        time: Off, loom: 2, targets: [SIBLING_ADMISSION_CLEARS_HOLDS], cache::sibling_admission),
        scenario!("C-R8", "stale unlock while a second holder exists (8)",
        time: Off, loom: 2, targets: [STALE_UNLOCK_IGNORES_HOLDS], cache::stale_unlock_with_second_holder),
        scenario!("C-R9", "holders panic while locked or held: unwinding releases everything (9-11)",
        time: Off, no_loom: HOLDER_UNWIND_READS_ATOMICS, targets: [UNUSED_HANDLE_LEAKS], cache::holder_panics),
        scenario!("C-R12", "loader cancelled between put and get, before or after shutdown (12, 15)",
        time: Off, loom: 2, targets: [UNUSED_HANDLE_LEAKS], cache::cancelled_admission),
        scenario!("C-R13", "post-shutdown prefetch refused (13)",
        time: Off, loom: 2, targets: [UNUSED_HANDLE_LEAKS], cache::prefetch_after_shutdown),
        scenario!("C-R14", "shutdown between lookup and hold: impossible by construction (14)",
        time: Off, loom: 1, targets: [HOLD_AFTER_LOOKUP], cache::hold_armed_with_lookup),
        scenario!("C-R5l", "get_locked against a shutdown: the lookup and the lock are one step, so the guard is never on an evicted record (5)",
        time: Off, loom: 2, targets: [HOLD_AFTER_LOOKUP], cache::locked_with_lookup),
        scenario!("C-R5c", "a hold becomes a lock while a put evicts for room: one critical section, so the record is never free on the way (5)",
        time: Off, loom: 2, targets: [CONVERSION_IN_TWO_STEPS], cache::lock_against_eviction_for_room),
        scenario!("C-R5s", "a lock is a use: it counts in the LRU order that a later eviction for room follows (3.2)",
        time: Off, loom: 2, targets: [LOCK_USE_UNSTAMPED], cache::lock_use_stamped),
        scenario!("C-R18", "a contended peer defers the reconcile to its next release (18)",
        time: Off, loom: 2, targets: [DEFERRED_RECONCILE_SKIPPED], cache::contended_peer_reconcile),
        scenario!("C-R19", "a reconcile request racing the busy peer's release: no lost wakeup (19)",
        time: Off, no_loom: TRY_LOCK_NEVER_FAILS, targets: [FLAG_SET_AFTER_TRY], cache::reconcile_no_lost_wakeup),
        scenario!("C-R21", "a request landing during a reconcile survives its clear (21)",
        time: Off, no_loom: TRY_LOCK_NEVER_FAILS, targets: [FLAG_CLEARED_LATE], cache::reconcile_flag_survives_clear),
        scenario!("C-R22", "own-cache overshoot reconciled at unlock (22)",
        time: Off, loom: 2, targets: [NO_OWN_RECONCILE], cache::own_overshoot),
        scenario!("C-R23", "a reconcile must not evict a just-admitted model before its first use (23)",
        time: Off, loom: 2, targets: [ADMISSION_UNPROTECTED], cache::reconcile_spares_admission),
        scenario!("C-R26", "caches dropped without shutdown release everything (26)",
        time: Off, loom: 1, targets: [UNUSED_HANDLE_LEAKS], cache::dropped_without_shutdown),
        scenario!("C-K1", "keep-alive expiry racing a lock; shutdown cancels keep-alive for good",
        time: Off, loom: 1, targets: [KEEP_ALIVE_EVICTS_HELD, CONVERSION_IN_TWO_STEPS], cache::keep_alive),
        scenario!("C-R27", "drop_model during use; a rebuild never adopts the invalidated canonical (27)",
        time: Off, loom: 2, targets: [KEY_MATCH_RELEASE], cache::drop_model_during_use),
        scenario!("C-R28", "adoption racing another load of the key: one canonical (28)",
        time: Off, loom: 2, targets: [ADOPT_BY_PEEK], cache::adoption_race),
        scenario!("M-E1", "a pin that lands while its model is being evicted is honoured (2.10)",
        time: Off, loom: 2, targets: [PIN_UNORDERED], eviction::pin_during_eviction::<_, layers::ThreeDeep>),
        scenario!("M-E2", "a lease racing an eviction: skipped or closed at once, never refused (2.10)",
        time: Any, loom: 2, targets: [EVICT_DRAINS_LEASES], eviction::lease_during_eviction::<_, layers::ThreeDeep>),
        scenario!("M-E3", "cache over cache: every layer's queue equals the registry (2.11)",
        time: Off, loom: 2, targets: [NESTED_QUEUE_STALE], eviction::nested_caches_agree),
        scenario!("M-E7", "a removal behind a cache's back is looked for: its count-based skip never keeps a stale id (2.11)",
        time: Off, loom: 3, targets: [RECONCILE_PAST_BUSY, RECONCILE_PAST_OTHERS], eviction::removals_below_are_looked_for),
        scenario!("M-E7r", "a removal behind a cache's back is looked for though a look lands between its count and its effect (2.11)",
        time: Off, loom: 1, targets: [REMOVAL_COUNTED_FIRST], eviction::removals_below_are_looked_for_by_resizes),
        scenario!("M-E7w", "a removal below while an add waits frees the slot it held: the add looks again on the round the removal wakes (2.11, 2.14)",
        time: Auto, loom: 2, targets: [ADMISSION_RECONCILES_ONCE], eviction::removal_below_while_an_add_waits_frees_its_slot),
        scenario!("M-E4", "a cold add whose victims keep being skipped fails by its deadline (2.12)",
        time: Any, loom: 2, loom_mutants_abort: "its mutant spins until loom's branch bound panics, and the unwind through guards that lock loom mutexes aborts loom", targets: [DEADLINE_ONLY_WHEN_FULL], eviction::skipped_victims_meet_the_deadline),
        scenario!("M-E5", "a lease racing an eviction whose unload fails gets the model it keeps (2.10)",
        time: Off, loom: 1, targets: [EVICTION_REFUSES_LEASE], eviction::lease_during_failed_eviction::<_, layers::ThreeDeep>),
        scenario!("M-C5o", "an add under the Overflow policy evicts the idle models it can before it loads past the limit (2.7)",
        time: Off, loom: 2, targets: [OVERFLOW_EVICTS_NOTHING], eviction::overflow_evicts_what_it_can),
        scenario!("M-C6s", "an add whose planned victims were all locked (or went in use) since its plan plans again at once and evicts an idle model it did not name: nothing else will wake it (2.7, 2.14)",
        time: Auto, loom: 2, targets: [SKIPPED_ROUND_WAITS], eviction::skipped_victims_plan_again),
        scenario!("M-E6", "a cold add that fails after a layer below evicted its id leaves no stale entry (2.11)",
        time: Off, loom: 2, targets: [FAILED_ADD_KEEPS_STALE_ENTRY], eviction::failed_add_after_inner_eviction),
        scenario!("M-P1", "size_bytes panics after a successful load: registered and queued (2.13)",
        time: Off, no_loom: SIZE_PANIC_UNWINDS_THROUGH_LOOM, targets: [SIZE_BEFORE_QUEUE], panics::size_panics_after_load::<_, layers::ThreeDeep>),
        scenario!("M-P2", "a model's Drop panics during a successful remove: no phantom entry (2.13)",
        time: Off, loom: 2, targets: [QUEUE_SKIPPED_ON_PANIC], panics::drop_panics_after_remove::<_, layers::ThreeDeep>),
        scenario!("M-P2r", "a report of a finished unload panics: the model was dropped before it, never in its unwind (2.13, 3.10)",
        time: Off, no_loom: REPORT_BESIDE_AN_UNWIND, targets: [UNLOADED_REPORTED_FIRST], panics::drop_before_unloaded_report::<_, layers::ThreeDeep>),
        scenario!("M-P2s", "a report of a replaced version's unload panics: the old version was dropped before it (1.11, 2.13, 3.10)",
        time: Off, no_loom: REPORT_BESIDE_AN_UNWIND, targets: [REPLACED_REPORTED_FIRST], panics::drop_before_replaced_report::<_, layers::ThreeDeep>),
        scenario!("M-P2t", "a lease that waited for an eviction reports the wait after it dropped the model the eviction took out (2.10, 2.13, 3.10)",
        time: Off, no_loom: REPORT_BESIDE_AN_UNWIND, targets: [LEASE_WAIT_REPORTED_HOLDING], panics::drop_before_lease_wait_report::<_, layers::ThreeDeep>),
        scenario!("M-P2v", "a replaced version's unload panics: its slot, the replace's last reference, lets go of the model under a catch in that unwind, no abort (1.11, 3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [SLOT_DROPPED_IN_UNWIND], panics::replaced_version_whose_unload_panics::<_, layers::ThreeDeep>),
        scenario!("M-P2w", "a lease let go by a panic holds the last reference to a version its replace detached: the model is dropped under a catch in that unwind, no abort (1.11, 3.10)",
        time: Auto, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [SLOT_DROPPED_IN_UNWIND], panics::detached_version_let_go_in_an_unwind::<_, layers::ThreeDeep>),
        scenario!("M-P2x", "a refused register's report panics: the model handed back is let go under a catch in that unwind, no abort (2.13, 3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [REGISTERED_MODEL_DROPPED_IN_UNWIND], panics::refused_register_whose_report_panics::<_, layers::ThreeDeep>),
        scenario!("M-P2u", "a loader panics inside Traced's span: the span is left once the panic is caught, so a subscriber that panics at its exit never does in the unwind (2.13, 3.10)",
        time: Off, no_loom: REPORT_BESIDE_AN_UNWIND, targets: [SPAN_EXITED_IN_UNWIND], panics::span_left_outside_the_unwind::<_, layers::ThreeDeep>),
        scenario!("M-P3", "an unload panics inside clear and shutdown: every other id is settled, the panic reported (1.13, 2.13)",
        time: Off, loom: 1, targets: [REMOVAL_ABANDONED_ON_PANIC], panics::panicking_unload_inside_clear_and_shutdown::<_, layers::ThreeDeep>),
        scenario!("M-P3r", "the tracing subscriber panics at shutdown's report of an id it could not unload: every later id is still settled, then the panic goes on (1.13, 3.10)",
        time: Off, loom: 1, targets: [REMOVAL_REPORT_UNCAUGHT], panics::subscriber_panics_at_a_shutdown_failure::<_, layers::ThreeDeep>),
        scenario!("M-P4", "a shutdown's wait for a loading id times out and its report panics: the id is reported, not counted removed (1.13, 3.10)",
        time: Any, loom: 1, targets: [PANIC_BEFORE_REMOVAL_COUNTED], panics::panicking_report_while_shutdown_waits::<_, layers::ThreeDeep>),
        scenario!("C-P1", "two first locks of different records race on one device: the budget holds (3.9)",
        time: Off, loom: 2, targets: [MOVE_UNCHARGED], placement::first_locks_race),
        scenario!("C-P2", "a device copy used through a detached record stays counted (3.9)",
        time: Off, loom: 2, targets: [DETACHED_COPY_UNCOUNTED], placement::detached_copy_counts),
        scenario!("C-P3", "user code panics during a move; the next locker proceeds (3.9, 3.10)",
        time: Off, no_loom: "its mutant panics while another loom thread unwinds, and loom aborts the process (loom's threads share one OS thread)", targets: [MOVE_CLAIM_LATE], placement::panic_during_move),
        scenario!("C-P3w", "a wait for another thread's hung move is bounded (3.9)",
        time: Any, no_loom: "its mutant leaves a thread blocked while another unwinds, and loom aborts the process (loom's threads share one OS thread)", targets: [MOVE_WAIT_UNBOUNDED], placement::hung_move_wait_is_bounded),
        scenario!("C-L1", "callers behind one failing load after another: the load wait is bounded once",
        time: Auto, loom: 1, targets: [LOAD_WAIT_RESTARTS], bounds::load_wait_bounded_once),
        scenario!("C-P4", "a replaced stale slot's device copy is dropped outside every lock (3.10)",
        time: Off, loom: 2, targets: [STALE_COPY_DROPPED_LOCKED], placement::replaced_copy_dropped_outside),
        scenario!("C-D1", "get after drop_model, and after shutdown, misses the stale record (3.3)",
        time: Off, loom: 2, targets: [GET_SERVES_STALE], drop_model::get_misses_stale),
        scenario!("C-D2", "drop_model(m) invalidates m:* submodels and acts on every peer (3.3)",
        time: Off, loom: 2, targets: [DROP_KEY_ONLY, DROP_ONE_CACHE], drop_model::drop_covers_submodels_and_peers),
        scenario!("C-D3", "an admission adopting a canonical races drop_model of its key (3.3)",
        time: Off, loom: 2, targets: [ADOPT_ACROSS_DROP], drop_model::adoption_races_drop),
        scenario!("C-D4", "user code panics inside put after its claim was counted: nothing stays pinned (3.10)",
        time: Off, loom: 2, targets: [CLAIM_BEFORE_HANDLE], drop_model::panic_inside_admission),
        scenario!("C-P5", "an eviction callback panics in a guard's Drop during another panic's unwind: released, no abort (2.13, 3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [PANIC_ESCAPES_UNWINDING_DROP], drop_model::eviction_callback_panics_while_unwinding),
        scenario!("C-P7", "making room for a put panics (an eviction callback): the caller's weights, whose Drop panics, are dropped under a catch in the unwind, no abort (3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [PUT_WEIGHTS_DROPPED_IN_UNWIND], drop_model::room_making_panics_with_the_callers_weights_held),
        scenario!("C-P7n", "the report of a private put's charge panics: the caller's weights, whose Drop panics, held until charged, are dropped under a catch in the unwind, no abort (3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [PUT_WEIGHTS_DROPPED_IN_UNWIND], drop_model::private_charge_report_panics_with_the_callers_weights_held),
        scenario!("C-P8", "a cache's last reference goes with a handle a panic lets go: its records' weights, whose Drop panics, are dropped under a catch in the unwind, no abort (3.10)",
        time: Off, no_loom: PANIC_IN_UNWIND_ABORTS_LOOM, targets: [CACHE_DROPPED_IN_UNWIND], drop_model::last_cache_reference_let_go_in_an_unwind),
        scenario!("C-P6", "the metrics recorder panics when a lifecycle lock wait is reported: the lock is released (3.10)",
        time: Off, loom: 2, targets: [REPORT_BEFORE_HANDLE], instrumentation::recorder_panics_after_a_lock_wait::<_, layers::ThreeDeep>),
        scenario!("C-P6z", "the metrics recorder panics at the report of an add's or a replace's load, after the model is registered: the cache sizes it and enforces max_bytes before the panic goes on (2, 3.10)",
        time: Off, loom: 1, targets: [PANIC_SKIPS_SIZE], instrumentation::recorder_panics_after_a_registered_load),
        scenario!("C-P6c", "the tracing subscriber panics right after a hold and in a guard's release: nothing stays claimed (3.10)",
        time: Off, no_loom: "its subscriber panics in one loom thread while loom may switch to another (they share one OS thread); probed: loom then reports a std mutex of the sim's own scripts poisoned (execution 4543), not a finding", targets: [REPORT_BEFORE_HANDLE], instrumentation::subscriber_panics_after_cache_claims),
        scenario!("C-P6r", "the tracing subscriber panics at the release that evicts a dropped record: the guard's last reference is let go under a catch, no abort (3.10)",
        time: Off, no_loom: "its subscriber panics in one loom thread while loom may switch to another (they share one OS thread), as C-P6c's", targets: [RECORD_DROPPED_IN_RELEASE_UNWIND], instrumentation::subscriber_panics_at_a_stale_record_s_last_release),
        scenario!("C-P6s", "the tracing subscriber panics at a cache's shutdown report: every cache of the group is shut down still (3.4, 3.10)",
        time: Off, no_loom: "its subscriber panics in one loom thread while loom may switch to another (they share one OS thread), as C-P6c's", targets: [SHUTDOWN_REPORTS_WHILE_MARKING], instrumentation::subscriber_panics_at_shutdown),
        scenario!("C-P6w", "an eviction callback panics while the RAM cap is lowered: every other cache still makes its room in that pass (1.12, 3.10)",
        time: Off, loom: 1, targets: [CAP_PASS_STOPS_AT_PANIC], instrumentation::eviction_callback_panics_while_the_cap_is_lowered),
        scenario!("C-P6x", "the tracing subscriber panics at the report of a lowered RAM cap: the idle records are evicted down to it first (1.12, 3.10)",
        time: Off, loom: 1, targets: [RESIZE_REPORTED_FIRST], instrumentation::subscriber_panics_at_a_cap_change),
        scenario!("C-P6v", "the tracing subscriber panics at the report of a lowered device budget: the unlocked copies are offloaded down to it first (1.12, 3.10)",
        time: Off, loom: 1, targets: [RESIZE_REPORTED_FIRST], instrumentation::subscriber_panics_at_a_device_budget_change),
        scenario!("C-P6m", "the tracing subscriber panics at the report of a lowered max_size: the idle models are evicted down to it first (1.12, 3.10)",
        time: Off, loom: 1, targets: [RESIZE_REPORTED_FIRST], instrumentation::subscriber_panics_at_a_max_size_change),
        scenario!("C-P6t", "the tracing subscriber panics at the keep-alive timer's reports: the timer goes on expiring idle records (3.8, 3.10)",
        time: Auto, no_loom: "its subscriber panics in one loom thread while loom may switch to another (they share one OS thread), as C-P6c's", targets: [TIMER_REPORTS_UNCAUGHT], keep_alive::subscriber_panics_in_the_timer),
        scenario!("C-D6", "a load in flight when drop_model runs is never the key's canonical: peers and later loads read fresh weights (3.3)",
        time: Off, loom: 1, targets: [LOAD_ACROSS_DROP_REGISTERED], drop_model::load_in_flight_across_drop),
        scenario!("C-D5", "an inspection racing the last release of a detached record runs no user code",
        time: Off, loom: 2, loom_mutants_abort: REFCOUNT_RACE_INVISIBLE_TO_LOOM, targets: [INSPECTION_UPGRADES_DETACHED], drop_model::inspection_races_last_release),
        scenario!("X-1", "cold loads of one key on two devices: one load per device, one file read, one canonical",
        time: Auto, loom: 1, targets: [GET_OR_PUT_NOT_SINGLE_FLIGHT, LOST_WAKEUP_LOAD_FINISHED], composition::cold_loads_on_two_devices),
        scenario!("X-2", "an eviction on one device racing a peer's add and lock of the same key: one canonical",
        time: Auto, loom: 2, targets: [EVICTION_FORGETS_CANONICAL], composition::eviction_races_peer_lock),
        scenario!("X-3", "drop_model while a lease lives: the registered model serves its old weights until removed",
        time: Auto, loom: 1, targets: [DROP_EVICTS_LOCKED, GET_SERVES_STALE], composition::drop_model_while_leased),
        scenario!("X-4", "the group shut down while a load is in flight on each device: nothing outlives it",
        time: Auto, loom: 1, targets: [ADMISSION_IGNORES_SHUTDOWN], composition::shutdown_mid_load),
        scenario!("X-5", "the source of a key changes between loads: a replace, and a load of cached weights, read the new content (1.11, 3.3)",
        time: Auto, loom: 1, targets: [REPLACE_ADOPTS_CACHED, SOURCE_IDENTITY_IGNORED], composition::source_changes_between_loads),
        scenario!("X-5p", "the tracing subscriber panics at the report of weights of an earlier version of their source: the key is dropped from the group first (1.11, 3.3, 3.10)",
        time: Off, loom: 1, targets: [STALE_DROP_REPORTED_FIRST], composition::subscriber_panics_at_a_stale_drop),
        scenario!("X-6", "a load whose look at the source predates a rewrite serves the newer weights another device read: never dropped from the group, no version read twice (1.11, 3.3)",
        time: Auto, loom: 1, targets: [STALE_LOOK_DROPS_NEWER], composition::a_stale_look_keeps_the_newer_weights),
        scenario!("X-7", "a replace of m beside an add of m:v2, a file of its own: m:v2's cached weights are adopted, never dropped with m's (1.11, 3.3)",
        time: Auto, loom: 1, targets: [FILE_KEYS_NEST], composition::a_replace_spares_an_id_that_extends_it),
        scenario!("W-1", "a release of a lifecycle lock wakes the caller waiting for it",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_LOCK_RELEASE], wakeups::lock_release),
        scenario!("W-2", "the end of the last lease wakes the remove draining it",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_LEASE_DRAIN], wakeups::lease_drain),
        scenario!("W-2u", "the end of the last lease wakes the remove draining it though the remove holds the waiters' monitor past its look",
        time: Auto, loom: 2, loom_mutants_abort: NOTIFY_WINDOW_NEEDS_SHUTTLE, targets: [USE_WORD_NOTIFY_UNPASSED], wakeups::lease_drain),
        scenario!("W-3", "the end of the victim's last lease wakes the add waiting for room",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_LEASE_END], wakeups::room_after_lease::<_, layers::ThreeDeep>),
        scenario!("W-3w", "a lease that ends while the add waiting for room plans wakes it: the add watches for lease ends before it looks",
        time: Auto, loom: 2, targets: [WATCH_AFTER_PLAN], wakeups::room_after_lease_at_once::<_, layers::ThreeDeep>),
        scenario!("W-4", "the release of the victim's lifecycle lock wakes the add waiting for room",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_GUARD_RELEASE], wakeups::room_after_lock::<_, layers::ThreeDeep>),
        scenario!("W-20", "the quiet release of a warm add's lock wakes the add waiting for room that found the victim locked",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_QUIET_RELEASE_WANTED], wakeups::room_after_warm_add::<_, layers::ThreeDeep>),
        scenario!("W-21", "a release while its thread unwinds wakes the load whose room request it leaves for later",
        time: Auto, no_loom: TRY_LOCK_NEVER_FAILS, targets: [LOST_WAKEUP_UNWINDING_RELEASE], budget::unwinding_release_wakes_the_waiter),
        scenario!("W-23", "a load whose eviction gave nothing back (a peer adopted the weights meanwhile) evicts again rather than wait: it does not sleep out its room wait",
        time: Auto, loom: 1, targets: [ROOM_ROUND_TRUSTS_ITS_GUESS], budget::a_room_round_looks_again_when_its_eviction_gave_nothing_back),
        scenario!("W-23p", "a load whose peer's eviction gave nothing back (another peer adopted the weights meanwhile) asks again rather than wait: it does not sleep out its room wait",
        time: Auto, loom: 1, targets: [ROOM_ROUND_TRUSTS_ITS_GUESS], budget::a_peer_asked_again_when_its_eviction_gave_nothing_back),
        scenario!("W-22", "a drop_model whose eviction callback panics still honours the room request a peer's load left while it held the cache: the load does not sleep out its wait",
        time: Auto, no_loom: TRY_LOCK_NEVER_FAILS, targets: [FINISH_SKIPS_DRAIN_ON_PANIC], budget::panicking_drop_finish_honours_the_room_request),
        scenario!("W-5", "an unpin of the victim wakes the add waiting for room (through the release of the lock it takes)",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_GUARD_RELEASE], wakeups::room_after_unpin::<_, layers::ThreeDeep>),
        scenario!("W-7", "an eviction that ends wakes the lease waiting for its outcome",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_EVICTION_SETTLED], eviction::lease_during_failed_eviction::<_, layers::ThreeDeep>),
        scenario!("W-8", "the group's shutdown wakes a device waiting for another device's load",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_GROUP_SHUTDOWN], wakeups::group_shutdown),
        scenario!("C-B1", "two cold admissions on two peers with room for one: reserved before loading, A7 inside both loaders (3.11)",
        time: Auto, loom: 1, targets: [RESERVE_AFTER_LOAD], budget::cold_loads_with_room_for_one),
        scenario!("C-B2", "a reservation is released on load error, panic and adoption; the waiter behind it gets the room (3.11)",
        time: Auto, no_loom: "its loader panics, and loom runs the other thread's load while the panicking one unwinds (loom's threads share one OS thread), which aborts the process", targets: [RAM_RESERVATION_LEAKS_ON_PANIC], budget::reservations_released_on_every_path),
        scenario!("C-B4", "a load's room request to a busy peer under the hard budget is honoured at the peer's release, before the load waits (3.2, 3.11)",
        time: Auto, no_loom: TRY_LOCK_NEVER_FAILS, targets: [DEFERRED_ROOM_NEEDS_WAITER], budget::busy_peer_honours_a_room_request),
        scenario!("C-B4m", "a room request left while a peer's placement decides is honoured when that placement waits for another's move (3.2, 3.11)",
        time: Auto, no_loom: TRY_LOCK_NEVER_FAILS, targets: [MOVE_WAIT_HOLDS_STATE], placement::room_request_beside_a_move_wait),
        scenario!("W-9", "a debit of the RAM budget (a failed load's reservation released) wakes the load waiting for room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_BUDGET_DEBIT], budget::debit_wakes_the_waiter),
        scenario!("W-10", "a release that leaves a record evictable wakes the load waiting for room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_ROOM_RELEASE], budget::release_wakes_the_waiter),
        scenario!("W-10w", "a release racing the look of a load that waits for room wakes it: the load watches before it looks",
        time: Auto, loom: 1, targets: [ROOM_WATCH_LATE], budget::release_racing_the_look_wakes_the_waiter),
        scenario!("C-B3", "keep-alive expires an idle record with no call; shutdown cancels it and the timer thread exits (3.8)",
        time: Auto, loom: 1, targets: [TIMER_NOT_CANCELLED], keep_alive::timer_expires_and_exits),
        scenario!("W-11", "a release that leaves a record idle wakes the sleeping keep-alive timer",
        time: Auto, loom: 1, loom_mutants_abort: TIMER_DEADLOCK_ABORTS_LOOM, targets: [LOST_WAKEUP_KEEP_ALIVE_RELEASE], keep_alive::release_wakes_the_timer),
        scenario!("W-11l", "a release during the keep-alive timer's look reads no stale deadline and wakes it",
        time: Auto, loom: 1, loom_mutants_abort: TIMER_DEADLOCK_ABORTS_LOOM, targets: [LOST_WAKEUP_ARMED_WHILE_LOOKING], keep_alive::release_during_the_timers_look),
        scenario!("W-12x", "a keep-alive set while the timer decides to exit: it looks again or is started anew",
        time: Auto, no_loom: "a timer started anew is a fifth thread beside the main thread, T1, T2 and the first timer: over loom's limit", targets: [TIMER_START_SPLIT], keep_alive::keep_alive_set_while_the_timer_exits),
        scenario!("W-12", "a keep-alive set wakes the sleeping keep-alive timer",
        time: Auto, loom: 1, loom_mutants_abort: TIMER_DEADLOCK_ABORTS_LOOM, targets: [LOST_WAKEUP_KEEP_ALIVE_SET], keep_alive::keep_alive_set_wakes_the_timer),
        scenario!("W-12p", "a keep-alive set whose honouring of a peer's room request panics has started its timer first: idle records expire with no traffic",
        time: Auto, no_loom: TRY_LOCK_NEVER_FAILS, targets: [KEEP_ALIVE_SET_DRAINS_FIRST], keep_alive::keep_alive_set_whose_drain_panics_starts_the_timer),
        scenario!("W-15", "dropping a cache with a keep-alive wakes the sleeping timer, which exits",
        time: Auto, loom: 1, loom_mutants_abort: TIMER_DEADLOCK_ABORTS_LOOM, targets: [LOST_WAKEUP_TIMER_CACHE_DROP], keep_alive::cache_drop_wakes_the_timer),
        scenario!("W-13", "an unlock that lets a device copy go wakes the locker waiting for device room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_DEVICE_UNLOCK], placement::unlock_wakes_the_device_waiter),
        scenario!("W-14", "a failed move's released charge wakes the locker waiting for device room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_DEVICE_DEBIT], placement::failed_move_wakes_the_device_waiter),
        scenario!("W-6", "a move that settles wakes the locker waiting for it",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_MOVE_SETTLED], wakeups::move_settled),
        scenario!("S-F1", "waiters of a failing load share its error; a later caller loads afresh (1.9)",
        time: Off, loom: 2, targets: [FAILURE_NOT_SHARED], manager::shared_failure),
        scenario!("S-F1n", "with the negative cache on, new callers get a remembered failure without loading (1.9)",
        time: Off, loom: 2, targets: [FAILURE_NOT_SHARED], manager::negative_cache),
        scenario!("S-F2", "a caller's wait expiring inside a load is its own error: never shared with waiters, never negatively cached (1.9, 1.10)",
        time: Off, loom: 1, targets: [EXPIRY_SHARED_AS_FAILURE], manager::expiry_is_the_callers_own),
        scenario!("S-F1d", "failed loads' errors the manager lets go of are dropped outside its monitor (user code, 3.10)",
        time: Off, loom: 2, loom_mutants_abort: "its mutant raises a violation inside the table's monitor while a loom mutex is held, and the unwind aborts loom (its threads share one OS thread)", targets: [FAILURE_DROPPED_IN_MONITOR], manager::failures_let_go_outside_the_monitor),
        scenario!("S-F1u", "the library's reports of a failed load, a failed unload and a failed call panic: the user's error is dropped under a catch in each unwind, never plainly (1.11, 3.10)",
        time: Off, no_loom: ABORT_VERDICT_NEEDS_NAMED_THREADS, targets: [USER_ERROR_DROPPED_IN_UNWIND], manager::reports_of_user_errors_panic),
        scenario!("S-D1", "per-call deadlines shorter than the configured timeouts bound the lock, drain and capacity waits (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_LOCK, DEADLINE_SKIPS_DRAIN, DEADLINE_SKIPS_CAPACITY], deadlines::manager_waits::<_, layers::ThreeDeep>),
        scenario!("S-D1l", "a per-call deadline bounds a lease's wait for an eviction's outcome (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_LEASE], deadlines::lease_wait::<_, layers::ThreeDeep>),
        scenario!("S-D1c", "a per-call deadline bounds get_or_put's waits for room and for another device's load (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_ROOM, DEADLINE_SKIPS_LOAD_WAIT], deadlines::cache_waits),
        scenario!("S-D1v", "a per-call deadline bounds the lowering of a device budget's wait for locked copies (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_DEVICE_ROOM], deadlines::device_budget_wait),
        scenario!("S-D2", "a per-call deadline bounds put's wait for RAM room and a placement's wait for device room (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_PUT, DEADLINE_SKIPS_DEVICE_WAIT], deadlines::put_and_device_waits),
        scenario!("S-D2p", "a per-call deadline bounds pin's wait for the lifecycle lock (1.10)",
        time: Auto, loom: 1, targets: [DEADLINE_SKIPS_PIN], deadlines::pin_wait::<_, layers::ThreeDeep>),
        scenario!("M-R3n", "a replace through nested caches keeps its model's place in both orders: a size read is no use of the model (1.11, 2.11)",
        time: Off, loom: 2, targets: [SIZE_READ_TOUCHES_BELOW], replace::replace_through_nested_caches_keeps_every_order),
        scenario!("S-R1", "replace racing leases and a remove: no NotFound, no lease on an unloaded version, the pin kept (1.11)",
        time: Off, loom: 1, targets: [REPLACE_REMOVES_FIRST, REPLACE_SKIPS_DRAIN, REPLACED_LEASE_NOT_FOUND], replace::replace_races_leases_and_a_remove::<_, layers::ThreeDeep>),
        scenario!("S-R2", "replace through a full cache of one, or beside only pinned models: refused at once, typed (1.11)",
        time: Auto, loom: 1, targets: [REPLACE_WAITS_FOR_NO_SLOT], replace::replace_with_no_slot_beside::<_, layers::ThreeDeep>),
        scenario!("S-R2i", "replace in place through a cache of one: leases drained, racing leases wait for v2 (never NotFound), a failed load leaves the id unregistered (1.11)",
        time: Auto, loom: 2, targets: [SWAP_LEASE_NOT_FOUND, SWAP_SKIPS_DRAIN, LOST_WAKEUP_SWAP_SETTLED], replace::replace_in_place_through_a_cache_of_one::<_, layers::ThreeDeep>),
        scenario!("M-B1", "a replace that grows a model enforces max_bytes as a cold add does, while a lease races it (2)",
        time: Off, loom: 2, targets: [REPLACE_SKIPS_MAX_BYTES], replace::replace_that_grows_enforces_max_bytes::<_, layers::ThreeDeep>),
        scenario!("M-B2", "max_bytes after an add passes over a victim pinned below (or in use) for the next idle one: the bound holds (2)",
        time: Off, loom: 2, targets: [BYTES_STOP_AT_BUSY_VICTIM], eviction::byte_budget_passes_over_a_victim_pinned_below),
        scenario!("M-B2b", "max_bytes after an add beside a removal of its victim: the busy victim's bytes count as going once, and the bound holds (2)",
        time: Off, loom: 2, targets: [BYTES_STOP_AT_BUSY_VICTIM], eviction::byte_budget_beside_a_removal),
        scenario!("S-Z1", "lowering max_size while leases end and a lease races the evictions: evicted down to it (1.12)",
        time: Off, loom: 1, targets: [RESIZE_DOES_NOT_EVICT], resize::lowering_max_size_while_serving::<_, layers::ThreeDeep>),
        scenario!("S-Z1r", "lowering max_size after a removal behind the cache's back evicts nothing: the removed id holds no slot (1.12, 2.11)",
        time: Off, loom: 2, targets: [LOWERING_COUNTS_REMOVED_BELOW], resize::lowering_max_size_after_a_removal_below),
        scenario!("S-Z1p", "lowering max_size over a model pinned only below and one in use waits, then fails by its deadline (1.12)",
        time: Auto, loom: 2, loom_mutants_abort: "its mutant spins until loom's branch bound panics, and the unwind through guards that lock loom mutexes aborts loom", targets: [RESIZE_RETRIES_PINNED_BELOW], eviction::lowering_over_a_pin_below_waits),
        scenario!("W-17", "raising max_size wakes the add waiting for room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_MAX_SIZE], resize::raising_max_size_wakes_the_add::<_, layers::ThreeDeep>),
        scenario!("S-Z1c", "lowering the RAM cap while a load runs: evicted down to it, locked records kept (1.12)",
        time: Off, loom: 1, targets: [CAP_LOWERED_WITHOUT_EVICTING], resize::lowering_the_ram_cap_while_loading),
        scenario!("W-18", "raising the RAM cap wakes the load waiting for room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_CAP_RAISED], resize::raising_the_ram_cap_wakes_the_load),
        scenario!("S-Z2", "a cap lowered below a load waiting for room refuses it at once with TooLarge (1.12, 4)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_CAP_LOWERED, ROOM_WAIT_READS_LIMITS_ONCE], resize::lowering_the_cap_below_a_waiting_load),
        scenario!("S-G3", "a group shutdown refuses the load waiting for RAM room at once (1.13, 3.11)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_ROOM_SHUTDOWN, ROOM_WAIT_IGNORES_SHUTDOWN], resize::shutdown_refuses_a_load_waiting_for_room),
        scenario!("S-Z2b", "a cap lowered below a load waiting behind another for room refuses it at once, while the first stays in line (1.12, 2.14, 4)",
        time: Auto, no_loom: TWO_ROOM_WAITERS_OUTGROW_LOOM, targets: [LOST_WAKEUP_CAP_LOWERED_BEHIND], resize::lowering_the_cap_below_a_load_behind_another),
        scenario!("S-Z3", "switching the overflow policy on wakes the load waiting for room, which goes ahead (3.11)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_OVERFLOW_ON, ROOM_WAIT_READS_LIMITS_ONCE], resize::switching_overflow_on_while_a_load_waits),
        scenario!("S-O1", "a stream of leases on the only victim: the add waiting for capacity is handed it at a lease's end, never starved (2.14)",
        time: Auto, loom: 1, targets: [CAPACITY_WAITER_LOSES_RACE], overload::a_stream_of_leases_does_not_starve_a_waiting_add::<_, layers::ThreeDeep>),
        scenario!("S-O1f", "a stream of leases on the victims of an add over a lowered max_size: each owed victim goes once idle, the next designated, never starved (1.12, 2.14)",
        time: Auto, loom: 1, targets: [LOWERED_LIMIT_STARVES_ADDS], overload::a_stream_of_leases_does_not_starve_an_add_over_a_lowered_limit::<_, layers::ThreeDeep>),
        scenario!("S-O1g", "an add served by evicting another victim gives its designation up then: the victim it designated, leased again, never waits through that eviction (2.14)",
        time: Auto, loom: 1, targets: [SERVED_KEEPS_DESIGNATION], overload::a_designation_not_needed_once_served_reopens_the_victim::<_, layers::ThreeDeep>),
        scenario!("S-O1h", "a cold add's failed load gives its slot back: the add waiting for capacity is woken then, not when the failed add's lock is released (2.14)",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_CAPACITY_CLAIM_DROPPED], overload::a_failed_load_s_slot_wakes_the_add_waiting_for_it::<_, layers::ThreeDeep>),
        scenario!("S-O1i", "a removal under a held lock frees its slot: the add waiting for capacity is woken then, not when the lock is released (2.14)",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_SLOT_FORGOTTEN], overload::a_removal_s_slot_wakes_the_add_waiting_for_it::<_, layers::ThreeDeep>),
        scenario!("S-O1j", "an eviction under a held lock frees its slot: the add waiting for capacity is woken then, not when the lock is released (2.14)",
        time: Auto, loom: 2, targets: [LOST_WAKEUP_SLOT_FORGOTTEN], overload::an_eviction_s_slot_wakes_the_add_waiting_for_it::<_, layers::ThreeDeep>),
        scenario!("S-O1b", "two adds waiting for capacity: the one that came first is served first (2.14)",
        time: Auto, loom: 1, targets: [CAPACITY_WAITERS_BARGE, PARTIAL_EVICTION_CLAIMS], overload::waiting_adds_are_served_in_arrival_order::<_, layers::ThreeDeep>),
        scenario!("S-O1c", "the first add waiting for capacity is served and wakes the next, served while the first still loads (2.14)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_CAPACITY_WAITER_LEFT], overload::the_first_waiter_served_wakes_the_next::<_, layers::ThreeDeep>),
        scenario!("S-O1d", "a pin lands on a designated victim: the waiter gives it up and the lease waiting on it goes ahead (2.10, 2.14)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_DESIGNATION_DROPPED], overload::a_designation_given_up_reopens_the_victim::<_, layers::ThreeDeep>),
        scenario!("S-O1e", "a remove takes over a designated victim: the lease waiting on its close finds it removing or gone at once (2.10, 2.14)",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_DESIGNATED_RECLOSED], overload::a_designated_victim_removed_wakes_its_leases::<_, layers::ThreeDeep>),
        scenario!("S-O1r", "two loads waiting for RAM room: the one that came first is served first (2.14, 3.11)",
        time: Auto, no_loom: TWO_ROOM_WAITERS_OUTGROW_LOOM, targets: [ROOM_SEEKERS_BARGE], overload::loads_waiting_for_room_are_served_in_arrival_order),
        scenario!("S-O1s", "the first load waiting for RAM room is served and wakes the next, served while the first still loads (2.14, 3.11)",
        time: Auto, no_loom: TWO_ROOM_WAITERS_OUTGROW_LOOM, targets: [LOST_WAKEUP_ROOM_SEEKER_LEFT], overload::the_first_load_served_wakes_the_next),
        scenario!("S-Z4", "a cap lowered below a resident key: get_or_put of it is still a hit, and a closed group refuses with ShutDown first (4, X-4)",
        time: Off, loom: 1, targets: [TOO_LARGE_BEFORE_HIT], resize::a_hit_after_the_cap_dropped_below_it),
        scenario!("S-Z1d", "lowering a device budget while a lock ends and a placement runs: offloaded down to it (1.12)",
        time: Off, loom: 1, targets: [DEVICE_BUDGET_LOWERED_WITHOUT_OFFLOADING], resize::lowering_the_device_budget_while_serving),
        scenario!("W-19", "raising a device budget wakes the locker waiting for device room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_DEVICE_BUDGET_RAISED], resize::raising_the_device_budget_wakes_the_locker),
        scenario!("S-G1", "manager shutdown racing an add that evicts and a lease: complete before it or refused, nothing half done (1.13)",
        time: Off, loom: 1, targets: [SHUTDOWN_REGISTRY_ONLY, ADD_AFTER_SHUTDOWN, LEASE_AFTER_SHUTDOWN], shutdown::shutdown_races_adds_and_leases::<_, layers::ThreeDeep>),
        scenario!("S-G1l", "a load that outlasts a shutdown's wait for its lock is refused: nothing registers after the shutdown returned, and the model it loaded is unloaded (1.13)",
        time: Auto, loom: 2, targets: [REGISTERED_AFTER_SHUTDOWN, REFUSED_LOAD_NOT_UNLOADED], shutdown::load_outlasting_a_shutdown_is_refused),
        scenario!("S-G1r", "a replace's load that outlasts a shutdown's wait for its lock is refused: the old version stays as reported, and the new one is unloaded (1.13)",
        time: Auto, loom: 2, targets: [REFUSED_LOAD_NOT_UNLOADED], shutdown::reload_outlasting_a_shutdown_is_refused),
        scenario!("S-G2", "manager shutdown racing an in-place replace: the replaced id is settled whichever step it meets, never left registered, every version unloaded (1.13, 1.11)",
        time: Off, loom: 1, targets: [SHUTDOWN_REGISTRY_ONLY, REFUSED_LOAD_NOT_UNLOADED], shutdown::shutdown_races_a_replace_in_place::<_, layers::ThreeDeep>),
        scenario!("S-CL1", "clear racing an add and a lease: pinned models removed, pins kept, every failure reported, the queue in line",
        time: Off, loom: 1, targets: [CLEAR_STOPS_AT_FIRST_FAILURE, CLEAR_EVICTS, CLEAR_BYPASSES_LAYERS, CLEAR_DROPS_PINS], clear::clear_races_an_add_and_a_lease::<_, layers::ThreeDeep>),
        scenario!("S-RG1", "register of a model built elsewhere racing a load of the same id and a lease: one registers, admitted, nothing orphaned",
        time: Off, loom: 2, targets: [REGISTER_OVERWRITES, REGISTER_UNADMITTED], register::register_races_an_add_and_a_lease::<_, layers::ThreeDeep>),
        scenario!("W-16", "the start of a shutdown wakes the add waiting for room",
        time: Auto, loom: 1, targets: [LOST_WAKEUP_SHUTDOWN], shutdown::shutdown_wakes_the_add_waiting_for_room::<_, layers::ThreeDeep>),
    ]
});

/// The cache scenarios again on a one-deep stack (cache directly over the base), to show the
/// three-deep catalogue stack behaves the same. Ids carry a `/1` suffix.
pub static ONE_DEEP: LazyLock<Vec<Scenario>> = LazyLock::new(|| {
    vec![
        one_deep!("M-S3/1", time: Any, warm_path_vs_remove),
        one_deep!("M-S4/1", time: Off, failed_remove_keeps_order),
        one_deep!("M-S5/1", time: Off, failed_eviction_restores),
        one_deep!("M-S6/1", time: Off, concurrent_cold_adds),
        one_deep!("M-S6b/1", time: Off, rollback_keeps_peer_entry),
        one_deep!("M-S6c/1", time: Any, capacity_under_concurrent_loads),
        one_deep!("M-S7/1", time: Off, alias_uses_resolved_id),
        one_deep!("M-S8/1", time: Off, eviction_vs_reload),
        one_deep!("M-S9/1", time: Off, load_failure_through_cache),
        one_deep!("M-S11/1", time: Off, failed_eviction_no_phantom),
        one_deep!("M-S12/1", time: Off, touch_of_unknown_ids),
        one_deep!("M-S13/1", time: Off, lock_order),
        one_deep!("M-L2/1", time: Any, eviction_skips_in_use),
    ]
});

/// The scenario with catalogue id `id`.
pub fn find(id: &str) -> Option<&'static Scenario> {
    CATALOGUE.iter().find(|s| s.id == id)
}
