//! The world a shared-weight cache scenario runs in: peer caches over one store and budget on a
//! checker runtime, mailboxes for explicit sync points between threads, and the accounting
//! checks (A1, A2, A5, A6).

use std::collections::BTreeMap;

use resident::cache::{CacheGroup, DeviceCache, ModelGuard};
use resident::mutants::MutantSet;
use resident::runtime::Arc;

use crate::ensure;
use crate::runtime::{Counter, SimRuntime};

/// Weights of a scenario model: just a number (its bytes are declared separately).
pub type Weights = u64;

/// Peer caches sharing one store and one budget.
pub struct CacheWorld<R: SimRuntime> {
    /// The execution's runtime.
    pub rt: R,
    /// Store and budget.
    pub group: Arc<CacheGroup<Weights, R>>,
    /// `cuda:0`, `cuda:1`, ...
    pub caches: Vec<Arc<DeviceCache<Weights, R>>>,
}

impl<R: SimRuntime> CacheWorld<R> {
    /// `peers` caches over a budget of `cap` bytes, with `mutants` on.
    pub fn new(rt: R, mutants: MutantSet, cap: u64, peers: usize) -> Self {
        let group = CacheGroup::with_mutants(cap, rt.clone(), mutants).expect("valid cap");
        let caches = (0..peers).map(|i| group.cache(&format!("cuda:{i}"))).collect();
        Self { rt, group, caches }
    }

    /// A mailbox for one value between two threads.
    pub fn mailbox(&self) -> Arc<Mailbox<R>> {
        Arc::new(Mailbox { state: self.rt.counter(), value: self.rt.counter() })
    }

    /// A1 at quiescence: the budget counts each distinct live canonical once plus every private
    /// resident record, and nothing else.
    pub fn check_accounting(&self) {
        let mut canonicals: BTreeMap<usize, u64> = BTreeMap::new();
        let mut private = 0;
        for record in self.caches.iter().flat_map(|c| c.resident()) {
            match record.canonical {
                Some(id) => {
                    canonicals.insert(id, record.bytes);
                }
                None => private += record.bytes,
            }
        }
        let expected = canonicals.values().sum::<u64>() + private;
        let counted = self.group.budget().in_use();
        ensure!(counted == expected, "A1", "budget counts {counted} bytes, {expected} are alive");
    }

    /// A9 (no lost reconcile): the budget is back within its cap; `why` says what should have
    /// brought it there.
    pub fn check_within_cap(&self, why: &str) {
        let budget = self.group.budget();
        let (used, cap) = (budget.in_use(), budget.cap());
        ensure!(used <= cap, "A9", "budget {used} over cap {cap}: {why}");
    }

    /// A6: with every handle gone, shutting every cache down leaves nothing resident or counted.
    pub fn check_drained(&self) {
        for cache in &self.caches {
            cache.shutdown();
            ensure!(
                cache.keys().is_empty(),
                "A6",
                "{} keeps {:?} after shutdown with no handle left",
                cache.device(),
                cache.keys()
            );
        }
        let counted = self.group.budget().in_use();
        ensure!(counted == 0, "A6", "{counted} bytes still counted with no record left");
    }
}

/// A5: a locked record is resident in its cache (no path evicted it while locked).
pub fn ensure_resident<R: SimRuntime>(
    cache: &DeviceCache<Weights, R>,
    guard: &ModelGuard<Weights, R>,
    thread: &str,
) {
    let id = guard.canonical_id();
    let resident = cache.resident().iter().any(|r| !r.detached && r.key == guard.key() && r.canonical == id);
    ensure!(resident, "A5", "{thread} locked {} but its record was evicted", guard.key());
}

/// One value handed from one thread to another: an explicit sync point.
pub struct Mailbox<R: SimRuntime> {
    state: R::Counter,
    value: R::Counter,
}

impl<R: SimRuntime> Mailbox<R> {
    /// Posts `value` (`None`: "nothing to compare").
    pub fn post(&self, value: Option<usize>) {
        if let Some(v) = value {
            self.value.add(v);
            self.state.add(1);
        } else {
            self.state.add(2);
        }
    }

    /// Waits (yielding) for the post.
    pub fn wait(&self) -> Option<usize> {
        loop {
            match self.state.get() {
                0 => R::yield_now(),
                1 => return Some(self.value.get()),
                _ => return None,
            }
        }
    }
}
