//! Device placement: moving a locked record's weights to its cache's device, within a per-cache
//! device budget.
//!
//! [`LoadedModel::lock_on_device`] locks the record (so nothing evicts it), then makes sure its
//! weights have a copy on the device: an existing copy is shared; otherwise room is made by
//! offloading the device copies of *unlocked* records, smallest first, and the move runs outside
//! every lock. One move per record at a time: a second locker waits for the first one's move
//! and shares its copy. A failed move leaves the record resident on the CPU, unlocked, and
//! returns a typed error. Device allocators (burn's memory pools among them) keep freed memory
//! reserved, so the budget counts the copies this cache keeps, not what the driver reports.

use std::any::Any;
use std::fmt;
use std::ops::Deref;

use super::device::{State, device_bytes};
use super::loaded::{LoadedModel, ModelGuard};
use super::record::{DeviceCopy, Record};
use crate::error::{BoxError, CacheError};
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime};

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
    guard: ModelGuard<W, R>,
    copy: Arc<W::OnDevice>,
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

type Copy = Arc<dyn Any + Send + Sync>;

/// What the first critical section of a placement decided.
enum Step {
    /// A copy is resident: share it.
    Ready(Copy),
    /// This locker moves the weights (`keep`: record the copy on the slot); the offloaded
    /// copies are dropped outside the lock.
    Move { offloaded: Vec<Copy>, keep: bool },
}

impl<W: DeviceWeights, R: Runtime> LoadedModel<W, R> {
    /// Locks the record and places it on the cache's device (see the module docs). On error the
    /// lock is released and the record stays resident on the CPU.
    pub fn lock_on_device(self) -> Result<DeviceGuard<W, R>, CacheError> {
        let guard = self.lock();
        let (cache, record) = (guard.cache(), guard.locked());
        let need = record.weights().device_bytes();
        let decided = cache.state().wait_until(None, |s| decide(s, record, need));
        cache.drain_requests();
        let step = decided.map_err(|_| CacheError::DeviceMove {
            key: record.key.clone(),
            message: "gave up waiting for another move".to_owned(),
        })??;
        let copy = match step {
            Step::Ready(copy) => copy,
            Step::Move { offloaded, keep } => {
                drop(offloaded);
                // Settles the slot on every path, a panicking mover included, so that waiters
                // never wait for a move that will not finish.
                let claim = keep.then(|| MoveClaim { cache, record, need, settled: false });
                let moved = record.weights().to_device(cache.device()).map(|copy| Arc::new(copy) as Copy);
                if let Some(claim) = claim {
                    claim.settle(moved.as_ref().ok());
                }
                moved
                    .map_err(|e| CacheError::DeviceMove { key: record.key.clone(), message: e.to_string() })?
            }
        };
        let copy = copy.downcast::<W::OnDevice>().map_err(|_| CacheError::DeviceMove {
            key: record.key.clone(),
            message: "the device copy has another type".to_owned(),
        })?;
        Ok(DeviceGuard { guard, copy })
    }
}

/// Under the cache's state: share a resident copy, wait for a move in progress, or claim the
/// move after offloading unlocked copies (smallest first) until `need` fits the budget.
fn decide<W, R: Runtime>(
    s: &mut State<W, R>,
    record: &Arc<Record<W, R>>,
    need: u64,
) -> Option<Result<Step, CacheError>> {
    let budget = s.device_budget;
    let mut used = device_bytes(s);
    let Some(slot) = s.slots.get_mut(&record.key).filter(|v| Arc::ptr_eq(&v.record, record)) else {
        // Detached (replaced while stale): move it for this use only.
        return Some(Ok(Step::Move { offloaded: Vec::new(), keep: false }));
    };
    match &slot.device {
        DeviceCopy::Resident { copy, .. } => return Some(Ok(Step::Ready(Arc::clone(copy)))),
        DeviceCopy::Moving => return None,
        DeviceCopy::Absent => {}
    }
    let mut offloaded = Vec::new();
    if let Some(budget) = budget {
        // Refuse up front when even offloading every unlocked copy would not make room, so that
        // a refusal offloads nothing.
        let freeable: u64 = s
            .slots
            .values()
            .filter(|v| v.locks == 0)
            .map(|v| match v.device {
                DeviceCopy::Resident { bytes, .. } => bytes,
                DeviceCopy::Absent | DeviceCopy::Moving => 0,
            })
            .sum();
        let pinned = used - freeable;
        if pinned + need > budget {
            return Some(Err(CacheError::DeviceFull {
                key: record.key.clone(),
                needed: need,
                budget,
                used: pinned,
            }));
        }
        while used + need > budget {
            let victim = s
                .slots
                .iter()
                .filter(|(_, v)| v.locks == 0)
                .filter_map(|(k, v)| match v.device {
                    DeviceCopy::Resident { bytes, .. } => Some((bytes, k.clone())),
                    DeviceCopy::Absent | DeviceCopy::Moving => None,
                })
                .min();
            let Some((bytes, key)) = victim else {
                return Some(Err(CacheError::DeviceFull {
                    key: record.key.clone(),
                    needed: need,
                    budget,
                    used,
                }));
            };
            if let Some(v) = s.slots.get_mut(&key)
                && let DeviceCopy::Resident { copy, .. } =
                    std::mem::replace(&mut v.device, DeviceCopy::Absent)
            {
                offloaded.push(copy);
            }
            used -= bytes;
        }
    }
    if let Some(slot) = s.slots.get_mut(&record.key) {
        slot.device = DeviceCopy::Moving;
    }
    Some(Ok(Step::Move { offloaded, keep: true }))
}

/// A claimed move: settles the slot when done, or (unwinding) marks it absent again.
struct MoveClaim<'a, W: DeviceWeights, R: Runtime> {
    cache: &'a Arc<super::DeviceCache<W, R>>,
    record: &'a Arc<Record<W, R>>,
    need: u64,
    settled: bool,
}

impl<W: DeviceWeights, R: Runtime> MoveClaim<'_, W, R> {
    fn settle(mut self, copy: Option<&Copy>) {
        self.settled = true;
        self.cache.with_state(|s| settle(s, self.record, self.need, copy));
        self.cache.state().notify_all();
    }
}

impl<W: DeviceWeights, R: Runtime> Drop for MoveClaim<'_, W, R> {
    fn drop(&mut self) {
        if !self.settled {
            self.cache.with_state(|s| settle(s, self.record, self.need, None));
            self.cache.state().notify_all();
        }
    }
}

/// Under the cache's state: record the move's outcome on the record, if it is still the occupant.
fn settle<W, R: Runtime>(s: &mut State<W, R>, record: &Arc<Record<W, R>>, need: u64, copy: Option<&Copy>) {
    if let Some(slot) = s.slots.get_mut(&record.key).filter(|v| Arc::ptr_eq(&v.record, record)) {
        slot.device = match copy {
            Some(copy) => DeviceCopy::Resident { copy: Arc::clone(copy), bytes: need },
            None => DeviceCopy::Absent,
        };
    }
}
