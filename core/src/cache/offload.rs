//! Changing a device budget while serving (SPEC 1.12): lowering it offloads idle device copies
//! down to it, least recently used first, and waits (bounded) for locked ones.

use super::device::DeviceCache;
use super::record::Record;
use super::table::{Copy, Table};
use crate::deadline::CallOptions;
use crate::error::{CacheError, InvalidConfig};
use crate::mutants::Mutant;
use crate::runtime::Runtime;
use crate::telemetry;

/// What one look at the cache found, lowering toward `cap`.
enum Lowering {
    /// Within the budget (or no budget any more): done.
    Within,
    /// Drop these offloaded copies outside the lock (user code); what stays over once they
    /// are dropped, if anything.
    Offloaded(Vec<Copy>, Option<Over>),
    /// Over, and every copy left in a slot is locked or moving.
    Held(Over),
}

/// What keeps the device bytes over the budget.
struct Over {
    cap: u64,
    /// Every copy alive and move in flight, including copies no slot holds (used through a
    /// detached record, or offloaded and being dropped).
    used: u64,
    /// The keys whose copies are locked or moving.
    locked: Vec<String>,
}

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Limits the bytes of device copies this cache keeps (`None`: no limit), while serving
    /// (SPEC 1.12). It counts the copies' bytes, not what the device's allocator keeps reserved
    /// after they are freed.
    ///
    /// A lock that needs room offloads unlocked copies, smallest first, and waits (boundedly,
    /// woken by unlocks and dropped copies) while locked copies hold the room. Raising the
    /// budget wakes those waits. Lowering it holds for every later placement at once, then
    /// offloads the copies of unlocked records down to it, least recently used first, waiting
    /// for locked ones to be unlocked at most the cache's
    /// [move wait](DeviceCache::set_move_wait) (and `options`); what is still over then is
    /// [`CacheError::DeviceOverBudget`] (the new budget stays). `Ok` means the copies fit the
    /// new budget at some point of the call: one that does not lower it but finds the copies
    /// over it (another call's lowering still at work) offloads and waits too. Zero is
    /// [`CacheError::InvalidConfig`], and nothing changes.
    ///
    /// ```
    /// use resident::CallOptions;
    /// use resident::cache::CacheGroup;
    /// let group = CacheGroup::<Vec<u8>>::new(1_000)?;
    /// let gpu = group.cache("gpu");
    /// gpu.set_device_budget(Some(4 << 30), CallOptions::new())?;
    /// gpu.set_device_budget(Some(1 << 30), CallOptions::new())?; // nothing placed: nothing to offload
    /// assert_eq!(gpu.device_budget_cap(), Some(1 << 30));
    /// assert!(gpu.set_device_budget(Some(0), CallOptions::new()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_device_budget(&self, bytes: Option<u64>, options: CallOptions) -> Result<(), CacheError> {
        if bytes == Some(0) {
            return Err(InvalidConfig { field: "device_budget", reason: "must be greater than zero" }.into());
        }
        let budget = self.device_budget();
        let rt = self.runtime();
        let lowered = budget.set_cap(bytes);
        if rt.mutant(Mutant::DEVICE_BUDGET_LOWERED_WITHOUT_OFFLOADING) {
            return Ok(());
        }
        // Reported once the copies fit (or the wait ran out): a panicking subscriber (user
        // code) must find the offloading done.
        let report_first = rt.mutant(Mutant::RESIZE_REPORTED_FIRST);
        if report_first {
            tracing::info!(device = %self.device(), budget = ?bytes, lowered, "device budget changed");
        }
        let offloaded = self.offload_to_budget(options);
        if !report_first {
            let fits = offloaded.is_ok();
            tracing::info!(device = %self.device(), budget = ?bytes, lowered, fits, "device budget changed");
        }
        offloaded
    }

    /// Offloads unlocked copies, least recently used first, until the copies fit the device
    /// budget, waiting (bounded by `options` and the move wait) for locked ones to be unlocked.
    fn offload_to_budget(&self, options: CallOptions) -> Result<(), CacheError> {
        let budget = self.device_budget();
        let rt = self.runtime();
        // Even when not lowered: a concurrent lowering may still be offloading, and `Ok` means
        // the copies fit the budget at some point of this call.
        let wait = options.deadline(rt).bound(rt, self.move_wait(), Mutant::DEADLINE_SKIPS_DEVICE_ROOM);
        let deadline = rt.now().checked_add(wait);
        loop {
            // Read before looking: room made while looking ends the wait for it at once.
            let seen = budget.room_epoch();
            // The cap is read again each time: a later call may have changed it.
            let cap = budget.cap();
            let expired = || deadline.is_some_and(|d| rt.now() >= d);
            let over = match self.with_state(|s| lower(s, cap, budget.used(true))) {
                Lowering::Within => return Ok(()),
                Lowering::Offloaded(copies, over) => {
                    drop(copies);
                    match over {
                        None => return Ok(()),
                        // Others may keep placing and unlocking copies: the deadline bounds
                        // this path too.
                        Some(_) if !expired() => continue,
                        Some(over) => over,
                    }
                }
                Lowering::Held(over) => over,
            };
            if expired() {
                let Over { cap, used, locked } = over;
                let device = self.device().to_owned();
                let over = CacheError::DeviceOverBudget { device, budget: cap, used, locked, waited: wait };
                return Err(telemetry::cache_refused(over));
            }
            let left = deadline.map(|d| d.saturating_sub(rt.now()));
            let _ = budget.wait_for_room(seen, left);
        }
    }
}

/// Under the cache's state: takes the copies of unlocked records out of their slots, least
/// recently used first, until `used` would be within `cap` once they are dropped.
fn lower<W, R: Runtime>(s: &mut Table<Record<W, R>>, cap: Option<u64>, used: u64) -> Lowering {
    let Some(cap) = cap.filter(|&cap| used > cap) else { return Lowering::Within };
    let (offloaded, used) = s.offload_lru(cap, used);
    let over = (used > cap).then(|| Over { cap, used, locked: s.keys_on_device() });
    match (offloaded.is_empty(), over) {
        (false, over) => Lowering::Offloaded(offloaded, over),
        (true, Some(over)) => Lowering::Held(over),
        (true, None) => Lowering::Within,
    }
}
