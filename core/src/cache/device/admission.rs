//! Admission: `put`, `adopt` and the admission they share — a record inserted for a key under
//! the budgets, re-checked against `drop_model` in the critical section that inserts it.

use super::*;
use crate::first_panic::FirstPanic;
use crate::held::Held;

// ---- Admitting a record -------------------------------------------------------------------------

impl<W: Send + Sync + 'static, R: Runtime> DeviceCache<W, R> {
    /// Admits `weights` (of `bytes`) under `key` and returns the admission the loader turns
    /// into a [`LoadedModel`]. A key already resident is admitted again (no second copy); with
    /// `shared`, a canonical alive in any peer is adopted. Keys follow the model-id rules (a
    /// `:sub` suffix names a submodel), up to [`ModelId::MAX_KEY_LEN`] bytes: a bad key is
    /// [`CacheError::InvalidKey`]; a size that
    /// would overflow the budget's sums is [`CacheError::SizeOverflow`]; both change nothing.
    ///
    /// Weights that are neither resident here nor adoptable need `bytes` of room: the budget is
    /// a hard limit, so `put` reserves them first ([`RamBudget`](crate::cache::RamBudget) explains how
    /// room is made and waited for) and fails with [`CacheError::NoRoom`] (dropping `weights`)
    /// when none comes in time, unless the budget's overflow policy is on; one that would wait
    /// once the group is [shut down](crate::cache::CacheGroup::shutdown) fails with
    /// [`CacheError::ShutDown`] instead. Prefer [`DeviceCache::get_or_put`], which reserves
    /// *before* the weights are built.
    pub fn put(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
    ) -> Result<Admission<W, R>, CacheError> {
        self.put_with(key, weights, bytes, how, CallOptions::new())
    }

    /// [`DeviceCache::put`] with its wait for room bounded by `options` too (SPEC 1.10): the
    /// tighter of the budget's room wait and the call's own bound, then
    /// [`CacheError::NoRoom`], `weights` dropped, nothing admitted.
    pub fn put_with(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
        options: CallOptions,
    ) -> Result<Admission<W, R>, CacheError> {
        let deadline = options.deadline(self.runtime());
        let deadline = if self.mutant(Mutant::DEADLINE_SKIPS_PUT) { Deadline::NONE } else { deadline };
        self.put_reserved(key, weights, bytes, how, Prepared { reservation: None, deadline, since: None })
    }

    /// [`DeviceCache::put`] of weights a load `prepared` for: charged out of its reservation
    /// (made before they were built); without one, fresh weights reserve their room here,
    /// waiting for it until its deadline at the latest. A reservation that is not needed (the
    /// key is resident or adoptable) is released once the admission exists. Weights built
    /// across a drop of the key are admitted stale ([`Prepared::since`]).
    pub(crate) fn put_reserved(
        self: &Arc<Self>,
        key: &str,
        weights: W,
        bytes: u64,
        how: PutOptions,
        prepared: Prepared<R>,
    ) -> Result<Admission<W, R>, CacheError> {
        let Prepared { reservation, deadline, since } = prepared;
        // Held across the user code below (expiry, room requests, room making, reports): a
        // panic there drops them in its unwind, under a catch.
        let guarded = !self.mutant(Mutant::PUT_WEIGHTS_DROPPED_IN_UNWIND);
        let weights = Held::<W, R>::new(weights, guarded);
        ModelId::validate_key(key)?;
        let cap = self.group.budget.cap();
        if bytes > cap {
            return Err(telemetry::cache_refused(CacheError::TooLarge { key: key.to_owned(), bytes, cap }));
        }
        self.expire_idle();
        if how.prefetch && self.with_state(|s| s.is_shut_down()) {
            return Err(telemetry::cache_refused(CacheError::ShutDown { key: key.to_owned() }));
        }
        if let Some(record) = self.admit_existing(key) {
            // The caller's weights are not needed; they are dropped (user code) only once the
            // admission exists — never implicitly at return, where a panic would leak it.
            let admission = self.hand_out_then(
                || Admission::new(Arc::clone(self), record),
                move || drop((weights, reservation)),
            );
            return Ok(admission);
        }
        if self.mutant(Mutant::SIBLING_ADMISSION_CLEARS_HOLDS) {
            self.with_state(Table::clear_holds);
        }
        // Adopting a live canonical adds no bytes, so it needs no room.
        let adopted = if how.shared { self.group.store.adopt(key) } else { None };
        let (source, reservation) = match adopted {
            // The caller's weights (and the room reserved for them) are not needed: dropped now,
            // before any claim is counted.
            // The canonical is held across their `Drop` (user code): if it panics, the canonical
            // may be the last reference, and its own weights' `Drop` runs in that unwind.
            Some(canonical) => {
                let canonical = Held::<_, R>::new(canonical, guarded);
                drop((weights, reservation));
                (Source::Adopted(canonical.into_inner()), None)
            }
            None if reservation.is_some() => (Source::Fresh { weights, since }, reservation),
            None => match self.reserve_room(key, bytes, deadline) {
                Ok(reservation) => (Source::Fresh { weights, since }, reservation),
                Err(refused) => {
                    drop(weights);
                    return Err(refused);
                }
            },
        };
        self.admit(key, source, bytes, how, reservation)
    }

    /// Admits the canonical of `key` that is alive in some cache of the group, without weights of
    /// the caller's: `Ok(None)` when none is alive (the caller then loads the weights and calls
    /// [`DeviceCache::put`]). A key already resident here is admitted again. Unlike adopting by
    /// cloning the canonical's weights into a `put`, an adoption that races `drop_model` is
    /// stale at birth, so dropped weights are never registered anew.
    pub fn adopt(self: &Arc<Self>, key: &str) -> Result<Option<Admission<W, R>>, CacheError> {
        ModelId::validate_key(key)?;
        self.expire_idle();
        if let Some(record) = self.admit_existing(key) {
            return Ok(Some(self.hand_out(|| Admission::new(Arc::clone(self), record))));
        }
        let Some(canonical) = self.group.store.adopt(key) else { return Ok(None) };
        let bytes = canonical.bytes();
        self.admit(key, Source::Adopted(canonical), bytes, PutOptions::default(), None).map(Some)
    }

    /// Registers the record of a `put` or an `adopt` and hands out its admission.
    pub(super) fn admit(
        self: &Arc<Self>,
        key: &str,
        source: Source<W, R>,
        bytes: u64,
        how: PutOptions,
        mut reservation: Option<Reservation<R>>,
    ) -> Result<Admission<W, R>, CacheError> {
        let residency = self.residency(key, source, bytes, how, reservation.as_mut())?;
        let bytes = residency.shared().map_or(bytes, |canonical| canonical.bytes());
        let fresh = Arc::new(Record {
            key: key.to_owned(),
            key_hash: crate::cache::table::key_hash(key),
            bytes,
            residency,
        });
        let now = self.group.runtime.now();
        let recheck = !self.mutant(Mutant::ADOPT_ACROSS_DROP);
        let copy_under_lock = self.mutant(Mutant::STALE_COPY_DROPPED_LOCKED);
        let ignore_shutdown = self.mutant(Mutant::ADMISSION_IGNORES_SHUTDOWN);
        let store = &self.group.store;
        let born_dropped =
            |r: &Record<W, R>| recheck && r.shared().is_some_and(|c| !store.is_current(key, c));
        let flags = (ignore_shutdown, copy_under_lock);
        let Inserted { record, spare, replaced } =
            self.state.with(|s| s.insert(fresh, now, born_dropped, flags));
        let device = &self.device;
        let admission = self.hand_out_then(
            || Admission::new(Arc::clone(self), record),
            move || {
                self.let_go_of_replaced(replaced, (spare, reservation));
                tracing::debug!(%device, key, bytes, "admitted");
            },
        );
        if self.group.budget.excess() > 0 {
            for peer in self.group.peers(self.id) {
                peer.request_reconcile();
            }
        }
        Ok(admission)
    }

    /// After an admission's handle exists: drops what it did not need (`spare` weights, the
    /// reservation's remainder) and the stale occupant it `replaced` (its device copy), which
    /// its holders' last release evicts, or, if nothing claimed it any more, left the cache here
    /// (reported as the `drop_model` or shutdown that marked it). All user code: each part is
    /// caught, and the first panic goes on after both.
    fn let_go_of_replaced<T>(&self, replaced: Option<(Gone<Record<W, R>>, bool)>, unneeded: T) {
        let mut first = FirstPanic::<R>::new();
        first.run(move || drop(unneeded));
        match replaced {
            Some((gone, true)) => first.run(|| self.finish_evictions(vec![gone], EvictedBy::Dropped)),
            replaced => first.run(move || drop(replaced)).map(|()| 0),
        };
        first.resume_on(&self.group.runtime);
    }

    /// Where the weights of an admission of `key` will live: the adopted canonical (which keeps
    /// the size it was charged with), the fresh weights registered as the key's canonical
    /// (`shared`), or a private copy charged to this cache — out of `reservation` if any.
    fn residency(
        &self,
        key: &str,
        source: Source<W, R>,
        bytes: u64,
        how: PutOptions,
        reservation: Option<&mut Reservation<R>>,
    ) -> Result<Residency<W, R>, CacheError> {
        let overflow = || CacheError::SizeOverflow { key: key.to_owned(), bytes, what: "RAM budget" };
        // An adopted canonical keeps the size it was charged with. Adoption upgrades the store's
        // weak reference under its lock; the insert re-checks for one that came alive meanwhile
        // (the C-R28 mutant does not). Refused weights are dropped here, outside every lock.
        Ok(match source {
            Source::Adopted(canonical) => Residency::Shared(canonical),
            Source::Fresh { weights, .. } if how.shared && self.mutant(Mutant::ADOPT_BY_PEEK) => {
                Residency::Shared(
                    self.group
                        .store
                        .insert_unchecked(key, weights.into_inner(), bytes)
                        .map_err(|_| overflow())?,
                )
            }
            Source::Fresh { weights, since } if how.shared => {
                let since = since.filter(|_| !self.mutant(Mutant::LOAD_ACROSS_DROP_REGISTERED));
                Residency::Shared(
                    self.group
                        .store
                        .insert_reserved(key, weights.into_inner(), bytes, reservation, since)
                        .map_err(|_| overflow())?
                        .0,
                )
            }
            Source::Fresh { weights, .. } => {
                // Held across the charge's report (user code).
                let charge = self
                    .group
                    .budget
                    .charge_non_shared(self.id, bytes, reservation)
                    .map_err(|_| overflow())?;
                Residency::Own { weights: weights.into_inner(), _charge: charge }
            }
        })
    }

    /// The live record of `key` here, with an admission counted on it (the caller hands out
    /// the handle that releases it, which honours the reconcile requests that arrived while the
    /// lock was held); on a miss, honours them itself, as every holder of the lock does.
    pub(super) fn admit_existing(&self, key: &str) -> Option<Arc<Record<W, R>>> {
        let record = self.state.with(|s| s.admit_existing(key));
        if record.is_none() {
            self.drain_requests();
        }
        record
    }
}
