//! The shared-weight cache: several [`DeviceCache`]s (one per device) over one
//! [`WeightStore`] of canonical CPU weights and one global [`RamBudget`], grouped by a
//! [`CacheGroup`].
//!
//! # Guarantees
//! - A1: the budget counts each live canonical once plus each non-shared resident record, by
//!   construction: canonicals and non-shared charges debit in their `Drop`.
//! - A2: at most one live canonical per key across all peers (adoption upgrades the store's
//!   `Weak` under its lock), unless the key was invalidated.
//! - A4/A5: every eviction acts only on the current occupant of its key (identity), and never on
//!   a locked, held or admitting record; a stale record is evicted by its last release.
//! - A6: dropping every handle and the caches (with or without `shutdown`) releases every
//!   record, canonical and budget byte.
//!
//! The first-use hold of [`DeviceCache::get`] is armed in the same critical section as the
//! lookup, and every handle's `Drop` releases its claim; this replaces upstream's weakref
//! finalizers, deferred worker and epochs.

mod budget;
mod device;
mod drops;
mod expiry;
mod get_or_put;
mod group;
mod ledger;
mod member;
mod offload;
mod placement;
mod record;
mod room;
mod room_request;
mod single_flight;
mod sizing;
mod sourced;
mod table;
mod weights;

pub use budget::{CacheId, NonSharedCharge, RamBudget, Reservation, SharedCharge};
pub use device::{
    Admission, CacheStats, DeviceCache, EvictionCallback, LoadedModel, ModelGuard, PutOptions, Resident,
};
pub use get_or_put::Declared;
pub use group::CacheGroup;
pub use placement::{DeviceGuard, DeviceWeights};
pub use sizing::{MachineRam, RamCapError, RamSource, machine_ram, ram_cap};
pub use sourced::Sourced;
pub use weights::{Canonical, CanonicalId, WeightStore};
