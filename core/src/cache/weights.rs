//! [`WeightStore`]: canonical CPU weights per key, shared by every device cache.
//!
//! The store maps `key → Weak<Canonical>`. Adopting a canonical is upgrading the `Weak` under the
//! store's monitor, and inserting re-checks for a live canonical in the same critical section, so
//! two caches can never end up with two live canonicals for one key (A2), and an adoption can
//! never race the last release (upstream race 28): either the upgrade wins and the bytes stay
//! counted once, or the canonical is gone and the insert registers (and charges) a new one.
//!
//! [`WeightStore::invalidate`] forgets a key: later loads build fresh weights, while holders of
//! the old canonical keep it alive, and counted, until they let go.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};

use super::budget::{NoReservation, Overflow, RamBudget, Reservation, SharedCharge};
use super::drops::Drops;
use crate::held::Held;
use crate::runtime::{Arc, Monitor, Runtime, StdRuntime, Weak};

/// One canonical set of CPU weights; its bytes are counted for exactly as long as it lives.
pub struct Canonical<W, R: Runtime = StdRuntime> {
    id: CanonicalId,
    key: String,
    bytes: u64,
    weights: W,
    _charge: SharedCharge<R>,
}

/// The identity of one [`Canonical`]: equal for the records that share it, and never reused
/// within its [`WeightStore`] (the store numbers the canonicals it creates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanonicalId(u64);

impl<W, R: Runtime> Canonical<W, R> {
    /// Its identity (see [`CanonicalId`]).
    pub fn id(&self) -> CanonicalId {
        self.id
    }

    /// The key it was registered under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its size in bytes, as charged to the budget.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl<W, R: Runtime> Deref for Canonical<W, R> {
    type Target = W;

    fn deref(&self) -> &W {
        &self.weights
    }
}

impl<W, R: Runtime> fmt::Debug for Canonical<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Canonical").field("key", &self.key).field("bytes", &self.bytes).finish()
    }
}

/// Canonical CPU weights per key, shared by every device cache on one [`RamBudget`].
pub struct WeightStore<W: Send + Sync + 'static, R: Runtime = StdRuntime> {
    budget: Arc<RamBudget<R>>,
    map: R::Monitor<Registry<W, R>>,
}

/// The store's map, how many canonicals it has created (the next one's [`CanonicalId`]), and
/// the drops of names ([`WeightStore::drop_mark`]).
struct Registry<W, R: Runtime> {
    by_key: BTreeMap<String, Weak<Canonical<W, R>>>,
    created: u64,
    /// The names given to `invalidate` or `invalidate_model` most recently.
    drops: Drops,
}

impl<W, R: Runtime> Registry<W, R> {
    /// The identity of the canonical about to be created.
    fn next_id(&mut self) -> CanonicalId {
        self.created += 1;
        CanonicalId(self.created)
    }
}

impl<W, R: Runtime> Deref for Registry<W, R> {
    type Target = BTreeMap<String, Weak<Canonical<W, R>>>;

    fn deref(&self) -> &Self::Target {
        &self.by_key
    }
}

impl<W, R: Runtime> DerefMut for Registry<W, R> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.by_key
    }
}

// ---- The store ----------------------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> WeightStore<W, R> {
    /// An empty store charging `budget`.
    pub fn new(budget: Arc<RamBudget<R>>, runtime: &R) -> Arc<Self> {
        let registry = Registry { by_key: BTreeMap::new(), created: 0, drops: Drops::default() };
        Arc::new(Self { budget, map: runtime.monitor(registry) })
    }

    /// The budget this store charges.
    pub fn budget(&self) -> &Arc<RamBudget<R>> {
        &self.budget
    }

    /// The live canonical of `key`, if some holder keeps it alive.
    pub fn adopt(&self, key: &str) -> Option<Arc<Canonical<W, R>>> {
        self.map.with(|m| m.get(key).and_then(Weak::upgrade))
    }

    /// Registers `weights` (of `bytes`) as the canonical of `key` and charges the budget —
    /// unless a live canonical appeared meanwhile, which is adopted instead. The second value
    /// says whether `weights` were adopted away (and so dropped, outside every lock). If the
    /// charge would overflow the budget's sums, nothing is registered and the weights come back.
    ///
    /// Under a hard budget (no overflow policy) new weights must fit the budget now — the store
    /// makes no room and does not wait (a [`DeviceCache`](super::DeviceCache) does) — or they
    /// come back, nothing charged. While loads wait for room ([`RamBudget::waiting`]) the room
    /// that appears is theirs, in arrival order (SPEC 2.14): the weights come back then too.
    ///
    /// [`RamBudget::waiting`]: super::RamBudget::waiting
    pub fn insert(&self, key: &str, weights: W, bytes: u64) -> Result<(Arc<Canonical<W, R>>, bool), W> {
        if self.budget.overflow() {
            return self.insert_reserved(key, weights, bytes, None, None);
        }
        if let Some(live) = self.adopt(key) {
            // The canonical adopted may be its last reference: held across the spare weights'
            // `Drop` (user code), it is let go under a catch if that panics.
            let live = Held::<_, R>::new(live, true);
            drop(weights);
            return Ok((live.into_inner(), true));
        }
        // Held across the reservation's report (user code).
        let weights = Held::<_, R>::new(weights, true);
        match self.budget.reserve_or_why(bytes, None) {
            Ok(mut reservation) => {
                self.insert_reserved(key, weights.into_inner(), bytes, Some(&mut reservation), None)
            }
            // Switched on since it was read.
            Err(NoReservation::Overflow) => {
                self.insert_reserved(key, weights.into_inner(), bytes, None, None)
            }
            Err(NoReservation::TooLarge { .. } | NoReservation::NoRoom | NoReservation::Behind) => {
                Err(weights.into_inner())
            }
        }
    }

    /// [`WeightStore::insert`], charging the weights out of `reservation` (which is left with
    /// what it held beyond `bytes`, or untouched if a live canonical was adopted instead).
    ///
    /// `since` is a [drop mark](WeightStore::drop_mark) taken before the weights were built: if
    /// `key` was dropped since, the weights may be the dropped ones (a load in flight
    /// across `drop_model`, C-D6), so they are charged but never registered — the admission
    /// that brings them is stale at birth, and later loads read afresh.
    pub(crate) fn insert_reserved(
        &self,
        key: &str,
        weights: W,
        bytes: u64,
        reservation: Option<&mut Reservation<R>>,
        since: Option<u64>,
    ) -> Result<(Arc<Canonical<W, R>>, bool), W> {
        let mut spare = Some(weights);
        let canonical = self.map.with(|m| {
            if let Some(live) = m.get(key).and_then(Weak::upgrade) {
                return Ok(live);
            }
            let charge = self.budget.charge_shared(bytes, reservation)?;
            let weights = spare.take().expect("weights are used once");
            let id = m.next_id();
            let canonical = Arc::new(Canonical { id, key: key.to_owned(), bytes, weights, _charge: charge });
            if since.is_none_or(|since| !m.drops.moved(key, since)) {
                m.insert(key.to_owned(), Arc::downgrade(&canonical));
            }
            Ok::<_, Overflow>(canonical)
        });
        match canonical {
            // The canonical adopted may be its last reference (its holders let go meanwhile): held
            // across the spare weights' `Drop` (user code), it is let go under a catch if that
            // panics, never in the unwind.
            Ok(canonical) => {
                let adopted = spare.is_some();
                let canonical = Held::<_, R>::new(canonical, true);
                drop(spare);
                Ok((canonical.into_inner(), adopted))
            }
            Err(Overflow) => Err(spare.take().expect("refused weights come back")),
        }
    }

    /// Forgets `key`: the next load builds fresh weights. Live holders keep the old canonical
    /// (and its bytes stay counted) until they let go.
    pub fn invalidate(&self, key: &str) {
        let forgotten = self.map.with(|m| {
            m.drops.record(key);
            m.remove(key)
        });
        drop(forgotten);
    }

    /// Forgets `key` and every submodel key `key:*` (see [`WeightStore::invalidate`]).
    pub(crate) fn invalidate_model(&self, key: &str) {
        let forgotten = self.map.with(|m| {
            m.drops.record(key);
            let keys: Vec<String> = m.keys().filter(|k| is_model_or_submodel(k, key)).cloned().collect();
            keys.iter().filter_map(|k| m.remove(k)).collect::<Vec<_>>()
        });
        drop(forgotten);
    }

    /// A mark of the drops ([`WeightStore::invalidate`], `drop_model`) so far: a load takes one
    /// before it builds weights, and its admission registers them only if no drop covering its
    /// key (of the key, or of a model it is a submodel of) came after it.
    pub(crate) fn drop_mark(&self) -> u64 {
        self.map.with(|m| m.drops.mark())
    }

    /// Whether `canonical` is still the one registered for `key` (not invalidated since it was
    /// adopted or inserted).
    pub(crate) fn is_current(&self, key: &str, canonical: &Arc<Canonical<W, R>>) -> bool {
        let current = Arc::downgrade(canonical);
        self.map.with(|m| m.get(key).is_some_and(|w| w.ptr_eq(&current)))
    }

    /// Keys with a live canonical, in order.
    pub fn live_keys(&self) -> Vec<String> {
        self.map.with(|m| {
            m.retain(|_, w| w.strong_count() > 0);
            m.keys().cloned().collect()
        })
    }
}

/// Whether `candidate` is `model` itself or one of its submodels (`model:sub`).
pub(crate) fn is_model_or_submodel(candidate: &str, model: &str) -> bool {
    candidate.strip_prefix(model).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

impl<W: Send + Sync + 'static, R: Runtime> fmt::Debug for WeightStore<W, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeightStore").field("budget", &self.budget).finish_non_exhaustive()
    }
}

// Historical bugs: the bodies of the switches above (see `crate::mutants`).
impl<W: Send + Sync + 'static, R: Runtime> WeightStore<W, R> {
    /// Mutant C-R28: registers `weights` without re-checking for a live canonical (the peek
    /// that preceded it may be stale), overwriting the key's entry.
    pub(crate) fn insert_unchecked(
        &self,
        key: &str,
        weights: W,
        bytes: u64,
    ) -> Result<Arc<Canonical<W, R>>, W> {
        let mut spare = Some(weights);
        let canonical = self.map.with(|m| {
            let charge = self.budget.charge_shared(bytes, None).ok()?;
            let weights = spare.take().expect("weights are used once");
            let id = m.next_id();
            let canonical = Arc::new(Canonical { id, key: key.to_owned(), bytes, weights, _charge: charge });
            m.insert(key.to_owned(), Arc::downgrade(&canonical));
            Some(canonical)
        });
        canonical.ok_or_else(|| spare.take().expect("refused weights come back"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Arc<WeightStore<Vec<u8>>> {
        let rt = StdRuntime::new();
        WeightStore::new(RamBudget::new(1000, &rt).unwrap(), &rt)
    }

    #[test]
    fn a_live_canonical_is_adopted_and_counted_once() {
        let store = store();
        let (a, adopted) = store.insert("m", vec![1; 10], 10).unwrap();
        assert!(!adopted);
        let (b, adopted) = store.insert("m", vec![2; 10], 10).unwrap();
        assert!(adopted && Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&store.adopt("m").unwrap(), &a));
        assert_eq!(store.budget().in_use(), 10);
        drop((a, b));
        assert_eq!(store.budget().in_use(), 0, "the last holder's drop debits");
        assert!(store.adopt("m").is_none());
        assert!(store.live_keys().is_empty());
    }

    #[test]
    fn invalidate_forgets_the_key_but_keeps_the_old_bytes_counted() {
        let store = store();
        let (old, _) = store.insert("m", vec![0; 10], 10).unwrap();
        assert!(store.is_current("m", &old));
        store.invalidate("m");
        assert!(!store.is_current("m", &old));
        assert!(store.adopt("m").is_none(), "a rebuild never adopts the invalidated canonical");
        let (new, adopted) = store.insert("m", vec![1; 12], 12).unwrap();
        assert!(!adopted && !Arc::ptr_eq(&old, &new));
        assert_eq!(store.budget().in_use(), 22);
        drop(old);
        assert_eq!(store.budget().in_use(), 12);
        assert_eq!(new[0], 1);
    }

    #[test]
    fn invalidating_a_model_forgets_its_submodels_only() {
        let store = store();
        let kept: Vec<_> = ["m", "m:vae", "m:unet", "mx", "n:m"]
            .into_iter()
            .map(|k| store.insert(k, vec![0; 1], 1).unwrap().0)
            .collect();
        store.invalidate_model("m");
        assert_eq!(store.live_keys(), ["mx", "n:m"]);
        drop(kept);
    }

    #[test]
    fn an_insert_that_would_overflow_the_budget_returns_the_weights() {
        let rt = StdRuntime::new();
        let store: Arc<WeightStore<Vec<u8>>> = WeightStore::new(RamBudget::new(u64::MAX, &rt).unwrap(), &rt);
        let half = u64::MAX / 2 + 1;
        let (first, _) = store.insert("a", vec![1], half).unwrap();
        assert_eq!(store.insert("b", vec![2], half).unwrap_err(), vec![2]);
        assert_eq!(store.live_keys(), ["a"]);
        assert_eq!(store.budget().in_use(), half);
        drop(first);
    }
}
