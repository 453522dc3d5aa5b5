//! Freshness across `drop_model` for the generated cache programs: once `drop_model(k)` has
//! returned, no call that begins afterwards is served weights of `k` (or of a submodel `k:*`)
//! that were admitted before the drop began, or that a load read before the drop began and
//! admitted while it ran (C-D6: a load in flight across the drop serves its own caller, never
//! a later one). Weights a `put` hands over during the drop are exempt (fresh as far as the cache
//! can tell, SPEC 3.3).
//!
//! Recorded with plain std primitives (no scheduling points) on a logical clock of call events.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The clock, the weights admitted so far, and the drops that began and that ended.
#[derive(Default)]
pub struct Freshness {
    clock: AtomicU64,
    /// Serial of weights → how old they are: when a load read them, or when the `put` that
    /// handed them over returned.
    admitted: Mutex<BTreeMap<u64, u64>>,
    /// `(key, began, ended)` of every `drop_model` that returned.
    drops: Mutex<Vec<(String, u64, u64)>>,
    /// `(key, began)` of every `drop_model` that began.
    begun: Mutex<Vec<(String, u64)>>,
}

/// Whether a drop of `dropped` covers `key`: the key itself or one of its submodels.
fn covers(dropped: &str, key: &str) -> bool {
    key.strip_prefix(dropped).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

impl Freshness {
    /// The next tick of the clock (never 0): a call's invocation or response, or a serial.
    pub fn now(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The call that built weights `serial` returned with them admitted: `loaded` if its load
    /// read them (their serial is the tick of that read), else handed over by a `put`.
    pub fn admitted(&self, serial: u64, loaded: bool) {
        let at = self.now();
        let read = if loaded { serial } else { at };
        self.admitted.lock().expect("freshness lock").insert(serial, read);
    }

    /// A `drop_model(key)` begins; returns when.
    pub fn dropping(&self, key: &str) -> u64 {
        let began = self.now();
        self.begun.lock().expect("freshness lock").push((key.to_owned(), began));
        began
    }

    /// Whether weights of `key` admitted by a call invoked at `invoked` may still be the store's:
    /// every `drop_model` of `key` (or of its model) that has begun had returned before that
    /// call began.
    pub fn never_dropped(&self, key: &str, invoked: u64) -> bool {
        let ended = |began: u64| {
            let drops = self.drops.lock().expect("freshness lock");
            drops.iter().find(|(_, b, _)| *b == began).map(|(_, _, ended)| *ended)
        };
        let begun = self.begun.lock().expect("freshness lock").clone();
        begun
            .iter()
            .filter(|(dropped, _)| covers(dropped, key))
            .all(|(_, began)| ended(*began).is_some_and(|ended| ended < invoked))
    }

    /// A `drop_model(key)` that began at `began` (from [`Freshness::dropping`]) has returned.
    pub fn dropped(&self, key: &str, began: u64) {
        let ended = self.now();
        self.drops.lock().expect("freshness lock").push((key.to_owned(), began, ended));
    }

    /// Whether weights `serial` of `key`, handed out by a call invoked at `invoked`, had been
    /// dropped: some drop of `key` or of its model ended before `invoked` and began after the
    /// weights were read (by a load) or handed over (by a `put` that returned).
    pub fn dropped_before(&self, key: &str, serial: u64, invoked: u64) -> bool {
        let Some(&admitted) = self.admitted.lock().expect("freshness lock").get(&serial) else {
            return false;
        };
        let drops = self.drops.lock().expect("freshness lock");
        drops
            .iter()
            .any(|(dropped, began, ended)| covers(dropped, key) && *ended < invoked && admitted < *began)
    }

    /// Whether weights `serial` of `key` were read (or handed over) before some drop of `key`
    /// or of its model began: once every drop has returned, the store may not hold them as the
    /// key's current weights (C-D6), or later loads would adopt what was dropped.
    pub fn read_before_a_drop(&self, key: &str, serial: u64) -> bool {
        let Some(&read) = self.admitted.lock().expect("freshness lock").get(&serial) else {
            return false;
        };
        let drops = self.drops.lock().expect("freshness lock");
        drops.iter().any(|(dropped, began, _)| covers(dropped, key) && read < *began)
    }
}
