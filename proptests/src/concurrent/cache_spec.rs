//! The sequential specification of the shared-weight cache group the generated cache programs
//! run against: which keys each cache may serve, and which keys' shared weights a `get_or_put`
//! may adopt instead of loading.
//!
//! Evictions (budget pressure, `make_room`, keep-alive) are the cache's own choice, so the
//! specification never requires a key to be resident: a miss is always allowed. What it
//! forbids is serving what must be gone:
//! - a `get` hit, or a `get_or_put` that returns without loading, on a key no call admitted
//!   to that cache since the key (or its model) was last dropped, or since the cache was shut
//!   down; a `get_or_put` without loading may also adopt shared weights admitted by any
//!   cache since the key was last dropped;
//! - a `get_or_put` refused with `ShutDown` before the group's shutdown began, or one that
//!   loads or adopts though it began after that shutdown returned (one that began earlier may
//!   be past its check);
//! - a `LoadWaitTimeout` with no other `get_or_put` of the key to wait for, a load failure the
//!   program did not script, or any other error.
//!
//! `drop_model` is not one atomic step: it invalidates the key's shared weights in the store,
//! then marks the key's records in each cache, one cache at a time. The history records it as
//! one call, and [`split_drops`] turns it into those events (same interval and outcome), each
//! cache's only after the store's. The group's shutdown likewise first refuses new loads, then
//! shuts each cache down.

use super::cache_program::{CACHES, CacheOp, KEYS};
use super::linearizability::{Call, Spec, overlapping};

/// What a cache program's history records: an operation as the program called it, or, after
/// [`split_drops`], one step of one. Only the operations the specification decides on are
/// recorded (`get_or_put`, `get`, `put` in every form, `drop_model`, the shutdowns). An
/// operation prints as itself, as histories and stored failures show it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CacheCall {
    /// An operation as called (a zero-timeout form is recorded as its plain form).
    Called(CacheOp),
    /// `drop_model`'s first step: the store forgets the shared weights of the key and its
    /// submodels.
    Invalidate {
        /// Index into [`KEYS`].
        key: usize,
    },
    /// `drop_model`'s step in one cache, after the store's (`invalidate` is its index).
    DropIn {
        /// Index of the cache.
        cache: usize,
        /// Index into [`KEYS`].
        key: usize,
        /// Index of the same call's [`CacheCall::Invalidate`] event.
        invalidate: usize,
    },
    /// The group's shutdown's first step: new loads are refused.
    Refuse,
    /// The group's shutdown's step in one cache, after [`CacheCall::Refuse`].
    ShutdownIn {
        /// Index of the cache.
        cache: usize,
    },
}

impl std::fmt::Debug for CacheCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheCall::Called(op) => op.fmt(f),
            CacheCall::Invalidate { key } => f.debug_struct("Invalidate").field("key", key).finish(),
            CacheCall::DropIn { cache, key, invalidate } => f
                .debug_struct("DropIn")
                .field("cache", cache)
                .field("key", key)
                .field("invalidate", invalidate)
                .finish(),
            CacheCall::Refuse => f.write_str("Refuse"),
            CacheCall::ShutdownIn { cache } => {
                f.debug_struct("Shutdown").field("cache", cache).field("group", &true).finish()
            }
        }
    }
}

/// What a call returned, reduced to what the specification decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheRet {
    /// `get_or_put` ran its loader and returned the model.
    Loaded,
    /// `get_or_put` returned the model without loading (a hit, or an adoption).
    Served,
    /// `get` found the key.
    Hit,
    /// `get` did not.
    Miss,
    /// `put` admitted the weights.
    Admitted,
    /// `drop_model` or a shutdown returned.
    Done,
    /// [`CacheError::ShutDown`](resident::CacheError::ShutDown).
    ShutDown,
    /// [`CacheError::LoadWaitTimeout`](resident::CacheError::LoadWaitTimeout).
    LoadWaitTimeout,
    /// [`CacheError::Load`](resident::CacheError::Load).
    LoadFailed,
    /// [`CacheError::NoRoom`](resident::CacheError::NoRoom): the hard budget found no room in
    /// time.
    NoRoom,
    /// [`CacheError::TooLarge`](resident::CacheError::TooLarge): larger than the cap.
    TooLarge,
    /// Any other error (the programs give no cause for one).
    Unexpected(&'static str),
}

/// What the specification knows: per cache, the keys it may serve (a bit per key), whether it
/// is shut down; per key, whether shared weights may be alive to adopt; whether the group
/// refuses loads; which `drop_model` calls have invalidated the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CacheState {
    servable: [u8; CACHES],
    shut: u8,
    adoptable: u8,
    refusing: bool,
    invalidated: u128,
}

/// The keys a drop of `KEYS[key]` covers: the key and its submodels `key:*`.
fn covered(key: usize) -> u8 {
    KEYS.iter()
        .enumerate()
        .filter(|(_, k)| {
            k.strip_prefix(KEYS[key]).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
        })
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

impl CacheState {
    fn servable(&self, cache: usize, key: usize) -> bool {
        self.servable[cache] & 1 << key != 0
    }

    fn adoptable(&self, key: usize) -> bool {
        self.adoptable & 1 << key != 0
    }

    /// An admission of `key` into `cache` (stale at birth in a cache shut down); shared weights
    /// enter the store either way.
    fn admit(&self, cache: usize, key: usize, shared: bool) -> Self {
        let mut next = self.clone();
        if self.shut & 1 << cache == 0 {
            next.servable[cache] |= 1 << key;
        }
        if shared {
            next.adoptable |= 1 << key;
        }
        next
    }
}

/// Splits every `drop_model` into its store and per-cache events, and every group shutdown
/// into its refusal and per-cache shutdowns (same interval, same outcome).
pub fn split_drops(history: &[Call<CacheCall, CacheRet>]) -> Vec<Call<CacheCall, CacheRet>> {
    let mut split = Vec::with_capacity(history.len());
    for call in history {
        let event = |op| Call { op, ..call.clone() };
        match call.op {
            CacheCall::Called(CacheOp::DropModel { key, .. }) => {
                let invalidate = split.len();
                split.push(event(CacheCall::Invalidate { key }));
                split.extend((0..CACHES).map(|cache| event(CacheCall::DropIn { cache, key, invalidate })));
            }
            CacheCall::Called(CacheOp::GroupShutdown) => {
                split.push(event(CacheCall::Refuse));
                split.extend((0..CACHES).map(|cache| event(CacheCall::ShutdownIn { cache })));
            }
            _ => split.push(call.clone()),
        }
    }
    split
}

/// The specification, with the program's scripted load failures.
#[derive(Debug, Clone)]
pub struct CacheSpec {
    /// Per key: its loads may fail or panic.
    pub load_fails: [bool; 3],
    /// The RAM budget is hard: a load or a `put` of fresh weights may be refused for room.
    pub hard_budget: bool,
    /// Per key: some cap set is below its bytes, so a load or a `put` of it may be refused as
    /// larger than the cap.
    pub too_large: [bool; 3],
}

impl Spec for CacheSpec {
    type State = CacheState;
    type Op = CacheCall;
    type Ret = CacheRet;

    fn step(&self, s: &CacheState, history: &[Call<CacheCall, CacheRet>], at: usize) -> Vec<CacheState> {
        let call = &history[at];
        let allowed = |ok: bool| if ok { vec![s.clone()] } else { Vec::new() };
        let unknown = || allowed(call.ret.is_none());
        match call.op {
            CacheCall::Called(CacheOp::GetOrPut { cache, key }) => {
                // A call that began before the group's shutdown returned may be past its check
                // and load or adopt afterwards; one that began later is refused.
                let refused_before = history.iter().any(|c| {
                    c.op == CacheCall::Refuse
                        && c.ret.is_some()
                        && c.response.is_some_and(|r| r < call.invoke)
                });
                let loaded = || if refused_before { Vec::new() } else { vec![s.admit(cache, key, true)] };
                match call.ret {
                    // Unknown (a load panicked): no effect, or a load's.
                    None => [allowed(true), loaded()].concat(),
                    Some(CacheRet::Loaded) => loaded(),
                    Some(CacheRet::Served) if s.servable(cache, key) || s.adoptable(key) => loaded(),
                    Some(CacheRet::ShutDown) => allowed(s.refusing),
                    Some(CacheRet::LoadWaitTimeout) => allowed(overlapping(
                        history,
                        at,
                        |c| matches!(c.op, CacheCall::Called(CacheOp::GetOrPut { key: k, .. }) if k == key),
                    )),
                    Some(CacheRet::LoadFailed) => allowed(self.load_fails[key]),
                    // Refused for room: no effect.
                    Some(CacheRet::NoRoom) => allowed(self.hard_budget),
                    Some(CacheRet::TooLarge) => allowed(self.too_large[key]),
                    Some(_) => Vec::new(),
                }
            }
            CacheCall::Called(CacheOp::Get { cache, key } | CacheOp::GetLocked { cache, key }) => {
                match call.ret {
                    Some(CacheRet::Hit) => allowed(s.servable(cache, key)),
                    None | Some(CacheRet::Miss) => allowed(true),
                    Some(_) => Vec::new(),
                }
            }
            CacheCall::Called(CacheOp::Put { cache, key, shared }) => match call.ret {
                None => vec![s.clone(), s.admit(cache, key, shared)],
                Some(CacheRet::Admitted) => vec![s.admit(cache, key, shared)],
                Some(CacheRet::NoRoom) => allowed(self.hard_budget),
                Some(CacheRet::TooLarge) => allowed(self.too_large[key]),
                // It would have waited for room once the group's shutdown began.
                Some(CacheRet::ShutDown) => allowed(self.hard_budget && s.refusing),
                Some(_) => Vec::new(),
            },
            // A drop or shutdown that panicked (a report of the library's own, user code) may
            // have ended before any of its steps.
            CacheCall::Invalidate { key } => {
                let mut next = s.clone();
                next.adoptable &= !covered(key);
                next.invalidated |= 1u128 << at;
                [vec![next], unknown()].concat()
            }
            CacheCall::DropIn { cache, key, invalidate } => {
                if s.invalidated & 1u128 << invalidate == 0 {
                    return unknown();
                }
                let mut next = s.clone();
                next.servable[cache] &= !covered(key);
                [vec![next], unknown()].concat()
            }
            CacheCall::Refuse => {
                let mut next = s.clone();
                next.refusing = true;
                [vec![next], unknown()].concat()
            }
            CacheCall::ShutdownIn { .. } if !s.refusing => unknown(),
            CacheCall::Called(CacheOp::Shutdown(cache)) | CacheCall::ShutdownIn { cache } => {
                let mut next = s.clone();
                next.shut |= 1 << cache;
                next.servable[cache] = 0;
                [vec![next], unknown()].concat()
            }
            CacheCall::Called(CacheOp::DropModel { .. } | CacheOp::GroupShutdown) => {
                unreachable!("split into their events before checking")
            }
            CacheCall::Called(op) => unreachable!("{op:?} is not recorded"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::linearizability::{brute_force, check};
    use super::*;

    const SPEC: CacheSpec = CacheSpec { load_fails: [false; 3], hard_budget: false, too_large: [false; 3] };

    fn call(
        thread: usize,
        op: CacheCall,
        ret: CacheRet,
        invoke: u64,
        response: u64,
    ) -> Call<CacheCall, CacheRet> {
        Call { thread, op, ret: Some(ret), invoke, response: Some(response), decided: None }
    }

    fn linearizable(history: &[Call<CacheCall, CacheRet>]) -> bool {
        let split = split_drops(history);
        let found = check(&SPEC, CacheState::default(), &split).is_ok();
        assert_eq!(
            found,
            brute_force(&SPEC, CacheState::default(), &split),
            "the checker agrees with the oracle"
        );
        found
    }

    const DROP_A: CacheCall = CacheCall::Called(CacheOp::DropModel { cache: 0, key: 0 });
    const GROUP_SHUTDOWN: CacheCall = CacheCall::Called(CacheOp::GroupShutdown);
    const PUT_A0: CacheCall = CacheCall::Called(CacheOp::Put { cache: 0, key: 0, shared: true });
    const GET_SUB1: CacheCall = CacheCall::Called(CacheOp::Get { cache: 1, key: 1 });

    #[test]
    fn a_hit_after_the_drop_of_its_model_returned_is_not_linearizable() {
        let put = CacheCall::Called(CacheOp::Put { cache: 1, key: 1, shared: true });
        let history = [
            call(0, put, CacheRet::Admitted, 0, 1),
            call(0, DROP_A, CacheRet::Done, 2, 3),
            call(1, GET_SUB1, CacheRet::Hit, 4, 5),
        ];
        assert!(!linearizable(&history));
        // Overlapping the drop, the hit may come first.
        let overlapping = [history[0].clone(), history[1].clone(), call(1, GET_SUB1, CacheRet::Hit, 2, 5)];
        assert!(linearizable(&overlapping));
    }

    #[test]
    fn a_hit_needs_an_admission_to_that_cache() {
        let history = [
            call(0, PUT_A0, CacheRet::Admitted, 0, 1),
            call(1, CacheCall::Called(CacheOp::Get { cache: 1, key: 0 }), CacheRet::Hit, 2, 3),
        ];
        assert!(!linearizable(&history));
        let miss = [
            history[0].clone(),
            call(1, CacheCall::Called(CacheOp::Get { cache: 1, key: 0 }), CacheRet::Miss, 2, 3),
        ];
        assert!(linearizable(&miss));
    }

    #[test]
    fn serving_without_a_load_needs_weights_to_adopt() {
        let served = CacheCall::Called(CacheOp::GetOrPut { cache: 1, key: 0 });
        let shared = [call(0, PUT_A0, CacheRet::Admitted, 0, 1), call(1, served, CacheRet::Served, 2, 3)];
        assert!(linearizable(&shared));
        let private = CacheCall::Called(CacheOp::Put { cache: 0, key: 0, shared: false });
        let history = [call(0, private, CacheRet::Admitted, 0, 1), call(1, served, CacheRet::Served, 2, 3)];
        assert!(!linearizable(&history));
        let dropped = [
            shared[0].clone(),
            call(0, DROP_A, CacheRet::Done, 2, 3),
            call(1, served, CacheRet::Served, 4, 5),
        ];
        assert!(!linearizable(&dropped));
    }

    #[test]
    fn an_adoption_overlapping_a_drop_goes_before_the_store_forgets_and_so_before_every_cache() {
        // The adoption took the weights before the store forgot them; a later hit on its cache
        // is not explained, since the drop's step in that cache comes after the store's.
        let served = CacheCall::Called(CacheOp::GetOrPut { cache: 1, key: 0 });
        let history = [
            call(0, PUT_A0, CacheRet::Admitted, 0, 1),
            call(0, DROP_A, CacheRet::Done, 2, 5),
            call(1, served, CacheRet::Served, 3, 6),
            call(1, CacheCall::Called(CacheOp::Get { cache: 1, key: 0 }), CacheRet::Hit, 7, 8),
        ];
        assert!(!linearizable(&history));
    }

    #[test]
    fn a_refusal_needs_the_group_shutdown_to_have_begun() {
        let load = CacheCall::Called(CacheOp::GetOrPut { cache: 0, key: 2 });
        let early = [call(0, load, CacheRet::ShutDown, 0, 1), call(1, GROUP_SHUTDOWN, CacheRet::Done, 2, 3)];
        assert!(!linearizable(&early));
        let during = [call(0, load, CacheRet::ShutDown, 0, 3), call(1, GROUP_SHUTDOWN, CacheRet::Done, 1, 2)];
        assert!(linearizable(&during));
        let after = [call(1, GROUP_SHUTDOWN, CacheRet::Done, 0, 1), call(0, load, CacheRet::Loaded, 2, 3)];
        assert!(!linearizable(&after));
    }

    #[test]
    fn a_shut_cache_serves_nothing_it_admits() {
        let history = [
            call(0, CacheCall::Called(CacheOp::Shutdown(0)), CacheRet::Done, 0, 1),
            call(0, PUT_A0, CacheRet::Admitted, 2, 3),
            call(1, CacheCall::Called(CacheOp::Get { cache: 0, key: 0 }), CacheRet::Hit, 4, 5),
        ];
        assert!(!linearizable(&history));
    }

    #[test]
    fn a_wait_timeout_needs_another_load_of_the_key() {
        let load = |cache| CacheCall::Called(CacheOp::GetOrPut { cache, key: 0 });
        let alone = [call(0, load(0), CacheRet::LoadWaitTimeout, 0, 1)];
        assert!(!linearizable(&alone));
        let behind =
            [call(0, load(0), CacheRet::LoadWaitTimeout, 0, 3), call(1, load(1), CacheRet::Loaded, 1, 2)];
        assert!(linearizable(&behind));
    }
}
