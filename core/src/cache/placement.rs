//! Device placement: moving a locked record's weights to its cache's device, within a per-cache
//! device budget.
//!
//! [`LoadedModel::lock_on_device`] locks the record (so nothing evicts it), then makes sure its
//! weights have a copy on the device: an existing copy is shared; otherwise room is made by
//! offloading the device copies of *unlocked* records, smallest first, and the move runs outside
//! every lock. When locked copies (or moves in flight) leave no room, the lock waits for room —
//! woken by an unlock that lets a copy go, a copy dropped, a failed move's charge released —
//! and fails with [`CacheError::DeviceFull`] once the wait is over; a copy larger than the
//! whole budget is refused at once. One move per record at a time: a second locker waits for
//! the first one's move and shares its copy. Every wait of one placement together is bounded by
//! the cache's move wait. A failed move leaves the record resident on the CPU, unlocked, and
//! returns a typed error.
//!
//! The budget counts bytes of the device copies this cache keeps alive, not what the device
//! driver reports: device allocators (burn's memory pools among them) may keep freed memory
//! reserved for reuse, so the driver's figure can stay above the budget's after copies go.
//!
//! # The device budget
//! Device bytes in use are every device copy alive — counted by construction until its
//! destructor has run, whether it is resident, used through a detached record or offloaded —
//! plus every move in flight (charged in the critical section that claims it): at every step
//! that sum stays within the budget. Making room offloads unlocked copies and claims nothing:
//! the locker drops them (user code) holding no claim, then decides again. A claimed move is
//! settled by a [`MoveClaim`] created right after the claim, before any user code (a
//! reconcile's callbacks, `to_device`) runs, so a panic there settles the slot and wakes the
//! waiters.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use super::device::{LoadedModel, ModelGuard};
use super::ledger::{DeviceBudget, Placed};
use super::record::Record;
use super::table::{Copy, OnDevice, Table};
use crate::deadline::{CallOptions, Deadline};
use crate::error::{BoxError, CacheError, SourceError};
use crate::held::Held;
use crate::mutants::Mutant;
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime, TimedOut};
use crate::telemetry;

/// What a cache needs from a model's weights to place them on its device.
pub trait DeviceWeights: Send + Sync + 'static {
    /// The weights' form on a device.
    type OnDevice: Send + Sync + 'static;

    /// Device bytes a copy needs.
    fn device_bytes(&self) -> u64;

    /// Copies the weights to `device`. May fail; may block.
    fn to_device(&self, device: &str) -> Result<Self::OnDevice, BoxError>;
}

/// A record locked and placed on its cache's device. Dereferences to the device copy.
pub struct DeviceGuard<W: DeviceWeights, R: Runtime = StdRuntime> {
    // Dropped first: the copy is let go before the record is unlocked, so an unlocked record's
    // copy is held by its slot alone and offloading it frees it.
    copy: Arc<Placed<W::OnDevice, R>>,
    guard: ModelGuard<W, R>,
}

impl<W: DeviceWeights, R: Runtime> DeviceGuard<W, R> {
    /// The CPU side: the lock this placement holds.
    pub fn cpu(&self) -> &ModelGuard<W, R> {
        &self.guard
    }

    /// Whether `other` uses the very same device copy.
    pub fn same_copy(&self, other: &DeviceGuard<W, R>) -> bool {
        Arc::ptr_eq(&self.copy, &other.copy)
    }
}

impl<W: DeviceWeights, R: Runtime> Deref for DeviceGuard<W, R> {
    type Target = W::OnDevice;

    fn deref(&self) -> &W::OnDevice {
        &self.copy
    }
}

impl<W: DeviceWeights, R: Runtime> fmt::Debug for DeviceGuard<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceGuard").field("key", &self.guard.key()).finish()
    }
}

/// What one critical section of a placement decided.
enum Step {
    /// A copy is resident: share it.
    Ready(Copy),
    /// Room is made: drop these offloaded copies outside the lock (no claim held), then decide
    /// again.
    Offload(Vec<Copy>),
    /// This locker moves the weights (the move is charged to the device budget). `offloaded` is
    /// empty but under the C-P3 mutant, which offloads and claims in one step.
    Move { offloaded: Vec<Copy> },
    /// No room now, but the copy fits the budget once locked copies go: wait for room (an
    /// unlock or a debit) and decide again; this error once the wait is over.
    Full(CacheError),
}

// ---- Locking on the device ----------------------------------------------------------------------

impl<W: DeviceWeights, R: Runtime> LoadedModel<W, R> {
    /// Locks the record and places it on the cache's device (see the module docs). On error the
    /// lock is released and the record stays resident on the CPU. The waits — for another
    /// thread's move of the same record, for device room — are bounded together by
    /// [`DeviceCache::move_wait`](super::DeviceCache::move_wait). A caller that itself keeps the
    /// copies whose room it needs placed waits that whole bound, then gets
    /// [`CacheError::DeviceFull`].
    pub fn lock_on_device(self) -> Result<DeviceGuard<W, R>, CacheError> {
        self.lock_on_device_until(Deadline::NONE)
    }

    /// [`LoadedModel::lock_on_device`] with its waits bounded by `options` too (SPEC 1.10):
    /// the tighter of the move wait and the call's own bound.
    pub fn lock_on_device_with(self, options: CallOptions) -> Result<DeviceGuard<W, R>, CacheError> {
        let deadline = options.deadline(self.cache().runtime());
        self.lock_on_device_until(deadline)
    }

    /// [`LoadedModel::lock_on_device`] with its waits bounded by `deadline` too: what a
    /// [`Loader::load_until`](crate::Loader::load_until) passes on.
    pub fn lock_on_device_until(self, deadline: Deadline) -> Result<DeviceGuard<W, R>, CacheError> {
        let guard = self.lock();
        let copy = match Placement::new(&guard, deadline).run() {
            Ok(copy) => copy,
            Err(error) => {
                // Held across the lock's release (user code): it may keep a mover's error.
                let error = Held::<_, R>::new(error, true);
                drop(guard);
                return Err(error.into_inner());
            }
        };
        let copy = copy.downcast::<Placed<W::OnDevice, R>>().map_err(|_| CacheError::DeviceMove {
            key: guard.key().to_owned(),
            source: SourceError::new("the device copy has another type".into()),
        })?;
        Ok(DeviceGuard { copy, guard })
    }
}

// ---- One placement ------------------------------------------------------------------------------

/// One placement of a locked record: the device bytes it needs and the one bound on all its
/// waits, however many times it offloads and decides again.
struct Placement<'a, W: DeviceWeights, R: Runtime> {
    cache: &'a Arc<super::DeviceCache<W, R>>,
    record: &'a Arc<Record<W, R>>,
    need: u64,
    /// The bound (`None`: unbounded, the C-P4 mutant).
    wait: Option<Duration>,
    start: Duration,
}

impl<'a, W: DeviceWeights, R: Runtime> Placement<'a, W, R> {
    fn new(guard: &'a ModelGuard<W, R>, deadline: Deadline) -> Self {
        let (cache, record) = (guard.cache(), guard.locked());
        let need = record.weights().device_bytes();
        let runtime = cache.runtime();
        let wait = (!runtime.mutant(Mutant::MOVE_WAIT_UNBOUNDED))
            .then(|| deadline.bound(runtime, cache.move_wait(), Mutant::DEADLINE_SKIPS_DEVICE_WAIT));
        Self { cache, record, need, wait, start: cache.now() }
    }

    /// What is left of the bound.
    fn left(&self) -> Option<Duration> {
        self.wait.map(|w| w.saturating_sub(self.cache.now().saturating_sub(self.start)))
    }

    /// Decides under the cache's state (see [`decide`]), waiting for another thread's move of
    /// the record outside that state, within what is left of the placement's bound: every
    /// release of the state lock honours pending requests, and a wait inside it (a condition
    /// variable's) would release it without (a peer's load asking for room then sleeps out the
    /// move). A refusal or the end of the wait is this placement's error.
    fn decide(&self) -> Result<Step, CacheError> {
        let (cache, runtime, budget) = (self.cache, self.cache.runtime(), self.cache.device_budget());
        if runtime.mutant(Mutant::MOVE_WAIT_HOLDS_STATE) {
            return self.decide_waiting_in_state(self.left());
        }
        loop {
            // Read before deciding: a move settled while deciding ends the wait at once.
            let seen = cache.moves().epoch();
            let decided = cache.state().with(|s| decide(s, budget, self.record, self.need, runtime));
            match decided {
                Some(Ok(step)) => return Ok(step),
                Some(Err(error)) => {
                    cache.drain_requests();
                    return Err(telemetry::cache_refused(error));
                }
                None => cache.drain_requests(),
            }
            let left = self.left();
            if left.is_some_and(|left| left.is_zero()) || cache.moves().wait_past(seen, left).is_err() {
                return Err(self.move_timed_out());
            }
        }
    }

    /// The refusal of a placement whose wait for another thread's move ran out.
    fn move_timed_out(&self) -> CacheError {
        let waited = self.wait.unwrap_or_default();
        let key = self.record.key.clone();
        telemetry::cache_refused(CacheError::DeviceMoveTimeout { key, waited })
    }

    /// Decides until a copy is ready or this placement moved one, offloading and waiting for
    /// room in between.
    fn run(self) -> Result<Copy, CacheError> {
        let (cache, record, need) = (self.cache, self.record, self.need);
        loop {
            // Read before deciding: room made while deciding ends the wait for it at once.
            let seen = cache.device_budget().room_epoch();
            match self.decide()? {
                Step::Full(full) => {
                    cache.drain_requests();
                    let left = self.left();
                    if left.is_some_and(|left| left.is_zero()) {
                        return Err(telemetry::cache_refused(full));
                    }
                    // A timeout goes round once more: the last decision says whether it fits.
                    let _ = cache.device_budget().wait_for_room(seen, left);
                }
                Step::Ready(copy) => {
                    cache.drain_requests();
                    return Ok(copy);
                }
                Step::Offload(copies) => {
                    cache.drain_requests();
                    drop(copies);
                }
                Step::Move { offloaded } if cache.runtime().mutant(Mutant::MOVE_CLAIM_LATE) => {
                    cache.drain_requests();
                    drop(offloaded);
                    return run_move(MoveClaim { cache, record, need, settled: false });
                }
                Step::Move { offloaded } => {
                    // The claim settles the slot on every path, a panicking mover included, so it
                    // exists before any user code runs.
                    let claim = MoveClaim { cache, record, need, settled: false };
                    drop(offloaded);
                    cache.drain_requests();
                    return run_move(claim);
                }
            }
        }
    }
}

/// Runs the claimed move outside every lock and settles it: a copy takes over the move's charge.
fn run_move<W: DeviceWeights, R: Runtime>(claim: MoveClaim<'_, W, R>) -> Result<Copy, CacheError> {
    let (cache, record) = (claim.cache, claim.record);
    match record.weights().to_device(cache.device()) {
        Ok(copy) => {
            let placed: Copy = Arc::new(cache.device_budget().place(copy, claim.need));
            claim.settle(Some(&placed));
            Ok(placed)
        }
        Err(error) => {
            // Held across the settling (its drain runs user code): a panic there must not drop
            // the mover's error plainly in its unwind.
            let error = Held::<_, R>::new(error, true);
            claim.settle(None);
            Err(CacheError::DeviceMove {
                key: record.key.clone(),
                source: SourceError::new(error.into_inner()),
            })
        }
    }
}

/// Under the cache's state: share a resident copy, wait for a move in progress, offload unlocked
/// copies (smallest first) until `need` fits, or claim the move, charging it to the device
/// budget. A detached record (replaced while stale) moves for this use only.
fn decide<W, R: Runtime>(
    s: &mut Table<Record<W, R>>,
    budget: &DeviceBudget<R>,
    record: &Arc<Record<W, R>>,
    need: u64,
    runtime: &R,
) -> Option<Result<Step, CacheError>> {
    let attached = match s.on_device(record) {
        OnDevice::Ready(copy) => return Some(Ok(Step::Ready(copy))),
        OnDevice::Moving => return None,
        OnDevice::Absent => true,
        OnDevice::Detached => false,
    };
    let charge_moves = !runtime.mutant(Mutant::MOVE_UNCHARGED);
    let offloaded = match budget.cap() {
        Some(cap) => {
            let used = if runtime.mutant(Mutant::DETACHED_COPY_UNCOUNTED) {
                s.slot_device_bytes().saturating_add(if charge_moves { budget.moving() } else { 0 })
            } else {
                budget.used(charge_moves)
            };
            match s.offload_smallest(&record.key, need, cap, used) {
                Ok(offloaded) => offloaded,
                // Locked copies may go: wait for them (a copy larger than the budget never fits).
                Err(error) if need <= cap => return Some(Ok(Step::Full(error))),
                Err(error) => return Some(Err(error)),
            }
        }
        None => Vec::new(),
    };
    if !offloaded.is_empty() && !runtime.mutant(Mutant::MOVE_CLAIM_LATE) {
        return Some(Ok(Step::Offload(offloaded)));
    }
    if charge_moves && budget.claim_move(need).is_none() {
        let key = record.key.clone();
        return Some(Err(CacheError::SizeOverflow { key, bytes: need, what: "device budget" }));
    }
    if attached {
        s.mark_moving(record);
    }
    Some(Ok(Step::Move { offloaded }))
}

/// A claimed move: settles the slot when done, or (unwinding) marks it absent again and
/// releases the move's charge; either way it wakes the lockers waiting for this move.
struct MoveClaim<'a, W: DeviceWeights, R: Runtime> {
    cache: &'a Arc<super::DeviceCache<W, R>>,
    record: &'a Arc<Record<W, R>>,
    need: u64,
    settled: bool,
}

impl<W: DeviceWeights, R: Runtime> MoveClaim<'_, W, R> {
    fn settle(mut self, copy: Option<&Copy>) {
        self.settled = true;
        self.finish(copy);
    }

    fn finish(&self, copy: Option<&Copy>) {
        if copy.is_none() && !self.cache.runtime().mutant(Mutant::MOVE_UNCHARGED) {
            self.cache.device_budget().end_move(self.need);
        }
        self.cache.state().with(|s| s.settle_move(self.record, self.need, copy));
        self.cache.moves().bump_at(Mutant::LOST_WAKEUP_MOVE_SETTLED);
        if self.cache.runtime().mutant(Mutant::MOVE_WAIT_HOLDS_STATE) {
            self.cache.state().notify_all();
        }
        // Reconciles run user code; never start one while unwinding (a second panic aborts).
        if !R::panicking() {
            self.cache.drain_requests();
        }
    }
}

impl<W: DeviceWeights, R: Runtime> Drop for MoveClaim<'_, W, R> {
    fn drop(&mut self) {
        if !self.settled {
            self.finish(None);
        }
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: DeviceWeights, R: Runtime> Placement<'_, W, R> {
    /// C-B4m (`move-wait-holds-state`): the wait for another thread's move is the state
    /// monitor's own: its condition variable releases the state lock without honouring the
    /// room requests a peer's load left while this placement decided.
    fn decide_waiting_in_state(&self, left: Option<Duration>) -> Result<Step, CacheError> {
        let (cache, runtime, budget) = (self.cache, self.cache.runtime(), self.cache.device_budget());
        let decide = |s: &mut Table<Record<W, R>>| decide(s, budget, self.record, self.need, runtime);
        let decided = cache.state().wait_until(left, decide);
        if !matches!(decided, Ok(Ok(_))) {
            cache.drain_requests();
        }
        match decided {
            Ok(Ok(step)) => Ok(step),
            Ok(Err(error)) => Err(telemetry::cache_refused(error)),
            Err(TimedOut) => Err(self.move_timed_out()),
        }
    }
}
