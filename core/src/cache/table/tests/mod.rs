//! The record table alone, driven by random programs with no runtime, no lock and no threads,
//! against a model of what the cache promises (`crate::cache`'s A4/A5, SPEC 3.x): the handles
//! the program holds are the truth about which records are protected.
//!
//! After every step: a record a live handle protects is never taken out; a record dropped or
//! shut down since its admission is never served again; a stale record leaves at its last
//! release; each record leaves once; the map holds exactly the occupants the model expects and
//! `bytes_resident` is their sum; `resident()` lists them and the detached records still held;
//! room is made least recently used first, records that give bytes back before those that do
//! not; keep-alive expiry takes exactly the free records idle for the keep-alive. The device
//! copies: see [`device`].

mod device;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::{Claim, Entry, Gone, Table};
use crate::cache::weights::{CanonicalId, is_model_or_submodel};
use crate::runtime::Arc;

const KEYS: [&str; 4] = ["a", "a:x", "b", "c"];

/// A record: its number in the program, key and bytes; `shared` stands for a canonical a peer
/// also holds (taking the record out gives nothing back).
#[derive(Debug)]
struct Rec {
    id: usize,
    key: String,
    bytes: u64,
    shared: bool,
}

impl Entry for Rec {
    fn key(&self) -> &str {
        &self.key
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn canonical(&self) -> Option<CanonicalId> {
        None
    }

    fn shared_elsewhere(&self) -> bool {
        self.shared
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `get` (a hit hands out a hold).
    Get(usize),
    /// A `put` that found no live occupant first: `insert` (a join when one appeared).
    Insert { key: usize, bytes: u64, shared: bool },
    /// `admit_existing`.
    Readmit(usize),
    /// Turns the handle's claim into the next (admission → hold → lock).
    Convert(usize),
    /// Drops the handle.
    Release(usize),
    /// `drop_model`'s part here.
    Drop(usize),
    /// `shutdown`'s part here.
    Shutdown,
    /// Room for `want` bytes: evicts until the evictions give back at least that much.
    MakeRoom(u64),
    /// Sets the keep-alive (in seconds).
    KeepAlive(Option<u64>),
    /// Time passes (seconds), then expiry runs.
    Expire(u64),
    /// A locker looks at its record's device copy, and claims the move when it is absent.
    Place(usize),
    /// `get`, lock, place (a move of `bytes` that succeeds) and release, in a row.
    Use { key: usize, bytes: u64 },
    /// The oldest move in flight ends: a copy of `bytes`, or none (`fails`).
    Settle { bytes: u64, fails: bool },
    /// A placement needing `need` device bytes under a budget of `cap` offloads unlocked copies.
    MakeDeviceRoom { need: u64, cap: u64 },
    /// The device budget is lowered to `cap`.
    LowerDevice(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let handle = 0..4usize;
    prop_oneof![
        4 => key.clone().prop_map(Op::Get),
        4 => (key.clone(), 1..5u64, proptest::bool::weighted(0.4))
            .prop_map(|(key, bytes, shared)| Op::Insert { key, bytes, shared }),
        1 => key.clone().prop_map(Op::Readmit),
        3 => handle.clone().prop_map(Op::Convert),
        4 => handle.clone().prop_map(Op::Release),
        1 => key.clone().prop_map(Op::Drop),
        1 => Just(Op::Shutdown),
        2 => (0..8u64).prop_map(Op::MakeRoom),
        1 => proptest::option::of(1..3u64).prop_map(Op::KeepAlive),
        2 => (0..3u64).prop_map(Op::Expire),
        3 => handle.prop_map(Op::Place),
        3 => (key, 1..4u64).prop_map(|(key, bytes)| Op::Use { key, bytes }),
        2 => (1..4u64, proptest::bool::weighted(0.2)).prop_map(|(bytes, fails)| Op::Settle { bytes, fails }),
        1 => (1..6u64, 1..8u64).prop_map(|(need, cap)| Op::MakeDeviceRoom { need, cap }),
        1 => (0..8u64).prop_map(Op::LowerDevice),
    ]
}

/// What the model knows of one record.
#[derive(Debug, Clone)]
struct Known {
    key: String,
    bytes: u64,
    shared: bool,
    /// Dropped or shut down since admitted: must never be served again.
    stale: bool,
    /// The occupant of its key now.
    attached: bool,
    /// Taken out of the table (evicted).
    gone: bool,
    /// When it was last used, in the order of the program's steps.
    used_at: u64,
    /// When it was admitted or last released (read only while it is free).
    idle_since: Option<Duration>,
    /// The bytes of its device copy, if one is resident.
    copy: Option<u64>,
    /// A move of it to the device is in flight.
    moving: bool,
}

// ---- The model and its checks -------------------------------------------------------------------

struct World {
    table: Table<Rec>,
    known: Vec<Known>,
    /// The handles the program holds: each a claim on a record.
    handles: Vec<(Arc<Rec>, Claim)>,
    now: Duration,
    step: u64,
    keep_alive: Option<Duration>,
    shut_down: bool,
    gets: u64,
    /// The moves in flight, oldest first.
    moves: Vec<Arc<Rec>>,
    /// Records admitted into the map.
    admitted: u64,
    /// Records that left the map (evicted or replaced while stale), and their bytes.
    left: (u64, u64),
}

impl World {
    fn new() -> Self {
        let (known, handles) = (Vec::new(), Vec::new());
        let table = Table::new(Duration::from_secs(60));
        let (now, moves) = (Duration::ZERO, Vec::new());
        let (admitted, left) = (0, (0, 0));
        Self {
            table,
            known,
            handles,
            now,
            step: 0,
            keep_alive: None,
            shut_down: false,
            gets: 0,
            moves,
            admitted,
            left,
        }
    }

    fn claims(&self, id: usize) -> usize {
        self.handles.iter().filter(|(r, _)| r.id == id).count()
    }

    fn occupant(&self, key: &str) -> Option<usize> {
        self.known.iter().position(|k| k.key == key && k.attached)
    }

    /// Whether handle `h` is the lock of a move in flight.
    fn moving_under(&self, h: usize) -> bool {
        let (record, claim) = &self.handles[h];
        *claim == Claim::Lock && self.moves.iter().any(|m| Arc::ptr_eq(m, record))
    }

    fn touch(&mut self, id: usize) {
        self.known[id].used_at = self.step;
    }

    /// Records the evictions of one call: each free, attached, and now gone.
    fn took_out(&mut self, gone: &[Gone<Rec>]) -> Result<(), TestCaseError> {
        for g in gone {
            let id = g.record().id;
            prop_assert!(!self.known[id].gone, "record {id} taken out twice");
            prop_assert!(self.known[id].attached, "record {id} taken out while detached");
            prop_assert_eq!(self.claims(id), 0, "record {} taken out while a handle protects it", id);
            let k = &mut self.known[id];
            (k.gone, k.attached) = (true, false);
            self.left = (self.left.0 + 1, self.left.1 + k.bytes);
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        self.step += 1;
        match *op {
            Op::Get(key) => self.get(KEYS[key])?,
            Op::Insert { key, bytes, shared } => self.insert(KEYS[key], bytes, shared)?,
            Op::Readmit(key) => {
                let expected = self.occupant(KEYS[key]).filter(|&id| !self.known[id].stale);
                let got = self.table.admit_existing(KEYS[key]);
                prop_assert_eq!(got.as_ref().map(|r| r.id), expected);
                self.handles.extend(got.map(|r| (r, Claim::Admitting)));
            }
            Op::Convert(h) if h < self.handles.len() => self.convert(h),
            // A lock is held until the move it claimed ends, as `lock_on_device` holds it.
            Op::Release(h) if h < self.handles.len() && !self.moving_under(h) => self.release(h)?,
            Op::Convert(_) | Op::Release(_) => {}
            Op::Drop(key) => self.drop_model(KEYS[key])?,
            Op::Shutdown => self.shutdown()?,
            Op::MakeRoom(want) => self.make_room(want)?,
            Op::KeepAlive(secs) => {
                let keep_alive = secs.map(Duration::from_secs);
                prop_assert_eq!(self.table.set_keep_alive(keep_alive), !self.shut_down);
                if !self.shut_down {
                    self.keep_alive = keep_alive;
                    if keep_alive.is_none() {
                        // Turned off, the table forgets when each record became idle.
                        self.known.iter_mut().for_each(|k| k.idle_since = None);
                    }
                }
            }
            Op::Expire(secs) => self.expire(secs)?,
            Op::Place(h) if h < self.handles.len() => self.place(h)?,
            Op::Place(_) => {}
            Op::Use { key, bytes } => self.use_on_device(KEYS[key], bytes)?,
            Op::Settle { bytes, fails } => self.settle(bytes, fails),
            Op::MakeDeviceRoom { need, cap } => self.make_device_room(need, cap)?,
            Op::LowerDevice(cap) => self.lower_device(cap)?,
        }
        self.check()
    }

    fn get(&mut self, key: &str) -> Result<(), TestCaseError> {
        self.gets += 1;
        let expected = self.occupant(key).filter(|&id| !self.known[id].stale);
        let got = self.table.get(key, false);
        prop_assert_eq!(got.as_ref().map(|r| r.id), expected, "get {}", key);
        if let Some(record) = got {
            self.touch(record.id);
            self.handles.push((record, Claim::Hold));
        }
        Ok(())
    }

    fn insert(&mut self, key: &str, bytes: u64, shared: bool) -> Result<(), TestCaseError> {
        let id = self.known.len();
        let fresh = Arc::new(Rec { id, key: key.to_owned(), bytes, shared });
        let live = self.occupant(key).filter(|&o| !self.known[o].stale);
        let inserted = self.table.insert(fresh, self.now, |_| false, (false, false));
        let (stale, attached, gone, used_at, idle_since) = (false, false, false, 0, Some(self.now));
        let (owned, copy, moving) = (key.to_owned(), None, false);
        self.known.push(Known {
            key: owned,
            bytes,
            shared,
            stale,
            attached,
            gone,
            used_at,
            idle_since,
            copy,
            moving,
        });
        match live {
            Some(joined) => {
                prop_assert_eq!(inserted.record.id, joined, "an admission joins the live occupant");
                prop_assert!(inserted.spare.is_some() && inserted.replaced.is_none());
                self.known[id].gone = true;
            }
            None => {
                let replaced = self.occupant(key);
                prop_assert_eq!(inserted.record.id, id);
                prop_assert_eq!(inserted.replaced.as_ref().map(|(g, _)| g.record().id), replaced);
                if let Some(old) = replaced {
                    self.known[old].attached = false;
                    // Claimed by nothing, it leaves the cache now; else at its last release.
                    let now = self.claims(old) == 0;
                    prop_assert_eq!(inserted.replaced.as_ref().map(|(_, now)| *now), Some(now));
                    if now {
                        self.known[old].gone = true;
                        self.left = (self.left.0 + 1, self.left.1 + self.known[old].bytes);
                    }
                }
                self.admitted += 1;
                let k = &mut self.known[id];
                (k.attached, k.stale, k.idle_since) = (true, self.shut_down, Some(self.now));
                self.touch(id);
            }
        }
        self.handles.push((Arc::clone(&inserted.record), Claim::Admitting));
        Ok(())
    }

    fn convert(&mut self, h: usize) {
        let (record, from) = (Arc::clone(&self.handles[h].0), self.handles[h].1);
        let to = match from {
            Claim::Admitting => Claim::Hold,
            Claim::Hold => Claim::Lock,
            Claim::Lock => return,
        };
        self.table.convert(&record, (from, to), (false, false));
        self.handles[h].1 = to;
        if self.known[record.id].attached {
            self.touch(record.id);
        }
    }

    fn release(&mut self, h: usize) -> Result<(), TestCaseError> {
        let (record, claim) = self.handles.remove(h);
        let released = self.table.release(&record, claim, self.claim_time(), (false, false, false));
        let id = record.id;
        let attached = self.known[id].attached;
        let free = attached && self.claims(id) == 0;
        prop_assert_eq!(released.freed, free, "release of {}", id);
        let unlocked = claim == Claim::Lock && attached && !self.locked(id) && self.known[id].copy.is_some();
        prop_assert_eq!(released.copy_unlocked, unlocked, "an unlocked copy may be offloaded");
        let evicted: Vec<Gone<Rec>> = released.evicted.into_iter().collect();
        // A detached record leaves the cache at its last release, as a stale occupant does.
        let detached_last = !attached && !self.known[id].gone && self.claims(id) == 0;
        prop_assert_eq!(
            evicted.len(),
            usize::from((free && self.known[id].stale) || detached_last),
            "a stale record leaves at its last release"
        );
        if detached_last {
            prop_assert_eq!(evicted[0].record().id, id);
            self.known[id].gone = true;
            self.left = (self.left.0 + 1, self.left.1 + self.known[id].bytes);
        } else {
            self.took_out(&evicted)?;
        }
        let expires = self.keep_alive.filter(|_| free && evicted.is_empty()).map(|k| self.now + k);
        prop_assert_eq!(released.expires, expires);
        if attached {
            self.known[id].idle_since = self.claim_time();
        }
        Ok(())
    }

    fn drop_model(&mut self, key: &str) -> Result<(), TestCaseError> {
        let gone = self.table.mark_dropped(key, (false, false));
        let dropped: Vec<usize> = (0..self.known.len())
            .filter(|&id| self.known[id].attached && is_model_or_submodel(&self.known[id].key, key))
            .collect();
        self.took_out(&gone)?;
        for id in dropped {
            self.known[id].stale = true;
            prop_assert!(self.known[id].gone || self.claims(id) > 0, "a free dropped record stays");
        }
        Ok(())
    }

    fn shutdown(&mut self) -> Result<(), TestCaseError> {
        let (gone, retained, cancelled) = self.table.mark_shut_down(false);
        prop_assert_eq!(cancelled, self.keep_alive.is_some() && !self.shut_down);
        (self.shut_down, self.keep_alive) = (true, None);
        self.took_out(&gone)?;
        let mut held: Vec<String> = Vec::new();
        let attached: Vec<usize> = (0..self.known.len()).filter(|&id| self.known[id].attached).collect();
        for id in attached {
            self.known[id].stale = true;
            prop_assert!(self.claims(id) > 0, "a free record stays after shutdown");
            held.push(self.known[id].key.clone());
        }
        held.sort();
        prop_assert_eq!(retained, held);
        Ok(())
    }

    fn make_room(&mut self, want: u64) -> Result<(), TestCaseError> {
        let gone = self.table.evict_lru_while(|pending| pending >= want, false);
        // What each candidate gives back and when it was used, before the evictions.
        let candidates: BTreeMap<usize, (bool, u64)> = (0..self.known.len())
            .filter(|&id| self.known[id].attached && self.claims(id) == 0)
            .map(|id| (id, (self.known[id].shared, self.known[id].used_at)))
            .collect();
        let order: Vec<usize> = gone.iter().map(|g| g.record().id).collect();
        self.took_out(&gone)?;
        let freed: u64 =
            order.iter().filter(|&&id| !self.known[id].shared).map(|&id| self.known[id].bytes).sum();
        prop_assert!(freed >= want || order.len() == candidates.len(), "stopped before the room was made");
        let before_last = order.split_last().map_or(0, |(_, rest)| {
            rest.iter().filter(|&&id| !self.known[id].shared).map(|&id| self.known[id].bytes).sum()
        });
        prop_assert!(order.is_empty() || before_last < want, "evicted past the room asked for");
        // Least recently used first, records that give bytes back before those that do not:
        // each victim precedes every candidate left.
        let rank = |id: &usize| candidates[id];
        for pair in order.windows(2) {
            prop_assert!(rank(&pair[0]) <= rank(&pair[1]), "victims out of order: {:?}", order);
        }
        if let Some(last) = order.last() {
            for left in candidates.keys().filter(|id| !order.contains(id)) {
                prop_assert!(rank(last) <= rank(left), "{} evicted before {}", last, left);
            }
        }
        Ok(())
    }

    /// The time a release happens at, as the cache passes it: only while a keep-alive is set.
    fn claim_time(&self) -> Option<Duration> {
        self.keep_alive.map(|_| self.now)
    }

    fn expire(&mut self, secs: u64) -> Result<(), TestCaseError> {
        self.now += Duration::from_secs(secs);
        let expected: Vec<usize> = match self.keep_alive {
            None => Vec::new(),
            Some(k) => {
                let free: Vec<usize> = (0..self.known.len())
                    .filter(|&id| self.known[id].attached && self.claims(id) == 0)
                    .collect();
                // An untimed record (released while no keep-alive was set) starts now.
                let now = self.now;
                free.into_iter()
                    .filter(|&id| now - *self.known[id].idle_since.get_or_insert(now) >= k)
                    .collect()
            }
        };
        let gone = self.table.expire(self.now, false);
        let mut got: Vec<usize> = gone.iter().map(|g| g.record().id).collect();
        got.sort_unstable();
        prop_assert_eq!(&got, &expected, "expiry at {:?}", self.now);
        self.took_out(&gone)
    }

    /// The map's occupants, their bytes, and what `resident()` lists.
    fn check(&mut self) -> Result<(), TestCaseError> {
        let mut occupants: Vec<String> =
            self.known.iter().filter(|k| k.attached).map(|k| k.key.clone()).collect();
        occupants.sort();
        prop_assert_eq!(self.table.keys(), occupants);
        let bytes: u64 = self.known.iter().filter(|k| k.attached).map(|k| k.bytes).sum();
        let stats = self.table.stats();
        prop_assert_eq!(stats.bytes_resident, bytes);
        prop_assert_eq!(stats.hits + stats.misses, self.gets);
        // Every record that left the map was counted as evicted once, a replaced one too.
        prop_assert_eq!(stats.admissions, self.admitted);
        prop_assert_eq!((stats.evictions, stats.bytes_evicted), self.left);
        let held =
            |id: usize| self.handles.iter().any(|(r, _)| r.id == id) || self.moves.iter().any(|r| r.id == id);
        let held_detached = |id: usize| !self.known[id].attached && held(id);
        let mut listed: Vec<(String, bool)> =
            self.table.resident().into_iter().map(|r| (r.key, r.detached)).collect();
        // The map's records first, in key order (the map itself has none), then the detached.
        let in_map = listed.iter().take_while(|(_, detached)| !detached).count();
        prop_assert!(listed[..in_map].is_sorted(), "resident() out of key order: {:?}", listed);
        prop_assert!(listed[in_map..].iter().all(|(_, detached)| *detached));
        let pinned: Vec<String> = self
            .table
            .pinned("d")
            .iter()
            .map(|p| p.split(" (").next().unwrap_or_default().to_owned())
            .collect();
        let mut claimed: Vec<String> = (0..self.known.len())
            .filter(|&id| self.known[id].attached && self.claims(id) > 0)
            .map(|id| self.known[id].key.clone())
            .collect();
        claimed.sort();
        prop_assert_eq!(pinned, claimed, "pinned() lists the claimed records in key order");
        let mut expected: Vec<(String, bool)> = (0..self.known.len())
            .filter(|&id| self.known[id].attached || (held_detached(id) && !self.known[id].gone))
            .map(|id| (self.known[id].key.clone(), !self.known[id].attached))
            .collect();
        listed.sort();
        expected.sort();
        prop_assert_eq!(listed, expected);
        self.check_device()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn the_table_keeps_the_cache_promises(program in proptest::collection::vec(op(), 1..60)) {
        let mut world = World::new();
        for (step, op) in program.iter().enumerate() {
            world.apply(op).map_err(|e| TestCaseError::fail(format!("step {step} ({op:?}): {e}")))?;
        }
    }
}
