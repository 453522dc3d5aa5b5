//! The cache half of a [`World`]: peer caches over one store and budget on a checker runtime,
//! scripted weights and device copies (their user code checks that it runs outside every
//! monitor, and may block or panic), mailboxes for explicit sync points between threads, and the
//! accounting checks (A1, A2, A5, A6).

use std::collections::BTreeSet;
use std::marker::PhantomData;

use resident::BoxError;
use resident::cache::{CacheGroup, DeviceCache, DeviceWeights};
use resident::runtime::Arc;

use crate::latch::Latch;
use crate::runtime::{Counter, SimRuntime};
use crate::world::World;
use crate::world::checks::{self, ensure_outside_monitors};

/// What a scripted weight's or copy's user code does besides checking where it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Behaviour {
    /// The weights' `Drop` panics while the script is armed.
    pub drop_panics: bool,
    /// The device copy's `Drop` panics while the script is armed.
    pub copy_drop_panics: bool,
    /// `to_device` waits for the device script's gate.
    pub gated_move: bool,
    /// `to_device` returns an error while the script is armed.
    pub move_fails: bool,
}

/// Weights of a scenario model: a number (scenarios use the byte count), the device bytes a copy
/// needs, and scripted user code.
pub struct Weights<R: SimRuntime> {
    /// The number standing for the tensors.
    pub value: u64,
    /// Which load built them, for checks that tell weights apart (0: not numbered).
    pub serial: u64,
    /// The version of their source they were read from (0 unless set).
    pub version: u64,
    behaviour: Behaviour,
    device: Option<Arc<Script<R>>>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: SimRuntime> Weights<R> {
    /// Weights with no script beyond the "outside every monitor" check.
    pub fn plain(value: u64) -> Self {
        Self {
            value,
            serial: 0,
            version: 0,
            behaviour: Behaviour::default(),
            device: None,
            _runtime: PhantomData,
        }
    }

    /// Weights whose user code does `behaviour`, placed through `device`.
    pub fn scripted(value: u64, behaviour: Behaviour, device: &Arc<Script<R>>) -> Self {
        Self {
            value,
            serial: 0,
            version: 0,
            behaviour,
            device: Some(Arc::clone(device)),
            _runtime: PhantomData,
        }
    }

    /// The same weights, read from version `version` of their source.
    pub fn of_version(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    /// The same weights, numbered `serial`; scripted ones count as alive (see
    /// [`Script::alive`]) until dropped.
    pub fn numbered(mut self, serial: u64) -> Self {
        self.serial = serial;
        if let Some(script) = &self.device {
            script.numbered.lock().expect("serials lock").insert(serial);
        }
        self
    }
}

impl<R: SimRuntime> resident::cache::Sourced for Weights<R> {
    type Source = u64;

    fn source(&self) -> u64 {
        self.version
    }
}

impl<R: SimRuntime> Drop for Weights<R> {
    fn drop(&mut self) {
        // First, with no scheduling point since the last reference went: a checker that finds
        // these weights alive could still have reached them.
        if let Some(script) = &self.device {
            script.numbered.lock().expect("serials lock").remove(&self.serial);
        }
        ensure_outside_monitors::<R>("a weights' Drop");
        if self.behaviour.drop_panics && self.device.as_ref().is_some_and(|s| s.armed()) {
            super::inject_panic("a weights' Drop", false);
        }
    }
}

/// Devices a script tells apart (the names [`CacheWorld`] gives its caches).
const DEVICES: usize = 4;

/// The scripted side of a world: a device byte budget the scripted moves hold each device to,
/// counters of live copies and moves in flight, a gate that gated moves wait for, and an arming
/// switch for scripted panics (so that weights outliving their scenario drop quietly).
pub struct Script<R: SimRuntime> {
    budget: u64,
    armed: R::Counter,
    /// Bytes of scripted device copies alive now, over every device.
    pub live: R::Counter,
    /// Per device (`cuda:{i}`): bytes of copies alive plus moves in flight, in one counter: what
    /// a move checks (two counters read one after the other would count a move that just ended
    /// twice). One canonical may be placed on several devices, each charged on its own.
    held: Vec<R::Counter>,
    /// Bytes of moves inside `to_device` now.
    pub moving: R::Counter,
    /// Moves that entered `to_device`.
    pub started: Latch<R>,
    /// Opened (non-zero) by the scenario; gated moves wait for it.
    pub gate: Latch<R>,
    /// Serials of numbered scripted weights not dropped yet: plain std bookkeeping, no
    /// scheduling point.
    numbered: std::sync::Mutex<BTreeSet<u64>>,
}

impl<R: SimRuntime> Script<R> {
    /// A device of `budget` bytes; scripted panics armed.
    pub fn new(rt: &R, budget: u64) -> Arc<Self> {
        let script = Self {
            budget,
            armed: rt.counter(),
            live: rt.counter(),
            held: (0..DEVICES).map(|_| rt.counter()).collect(),
            moving: rt.counter(),
            started: Latch::new(rt),
            gate: Latch::new(rt),
            numbered: std::sync::Mutex::default(),
        };
        script.armed.add(1);
        Arc::new(script)
    }

    /// Whether scripted panics fire.
    pub fn armed(&self) -> bool {
        self.armed.get() > 0
    }

    /// Scripted panics stop firing.
    pub fn disarm(&self) {
        if self.armed() {
            self.armed.sub(1);
        }
    }

    /// The per-device counter of `device` (`cuda:{i}`).
    fn held(&self, device: &str) -> &R::Counter {
        let index = device.strip_prefix("cuda:").and_then(|i| i.parse::<usize>().ok());
        &self.held[index.filter(|&i| i < DEVICES).unwrap_or_else(|| panic!("unscripted device {device:?}"))]
    }

    /// Whether the scripted weights numbered `serial` are alive (not dropped yet).
    pub fn alive(&self, serial: u64) -> bool {
        self.numbered.lock().expect("serials lock").contains(&serial)
    }

    /// Blocks until `n` moves have entered `to_device`.
    pub fn wait_for_moves(&self, n: usize) {
        self.started.wait_for(n);
    }
}

/// A scripted device copy: counted live until dropped.
pub struct SimCopy<R: SimRuntime> {
    bytes: u64,
    panics: bool,
    device: Arc<Script<R>>,
    /// The device it lives on.
    on: String,
}

impl<R: SimRuntime> Drop for SimCopy<R> {
    fn drop(&mut self) {
        ensure_outside_monitors::<R>("a device copy's Drop");
        self.device.live.sub(self.bytes as usize);
        self.device.held(&self.on).sub(self.bytes as usize);
        if self.panics && self.device.armed() {
            super::inject_panic("a device copy's Drop", false);
        }
    }
}

impl<R: SimRuntime> DeviceWeights for Weights<R> {
    type OnDevice = SimCopy<R>;

    fn device_bytes(&self) -> u64 {
        self.value
    }

    /// Checks, from inside the move, that live copies plus moves in flight fit the device
    /// budget (C-P1, C-P2), then waits for the gate if gated.
    fn to_device(&self, on: &str) -> Result<SimCopy<R>, BoxError> {
        ensure_outside_monitors::<R>("to_device");
        let device = Arc::clone(self.device.as_ref().expect("placed weights are scripted"));
        if self.behaviour.move_fails && device.armed() {
            return Err(format!("scripted to_device failure on {on}").into());
        }
        let bytes = self.value as usize;
        device.moving.add(bytes);
        let used = device.held(on).add(bytes) + bytes;
        device.started.add(1);
        checks::device_within_budget(used as u64, device.budget, on);
        if self.behaviour.gated_move {
            device.gate.wait_for(1);
        }
        device.live.add(bytes);
        device.moving.sub(bytes);
        Ok(SimCopy { bytes: self.value, panics: self.behaviour.copy_drop_panics, device, on: on.to_owned() })
    }
}

/// The cache half of a world: peer caches sharing one store and one budget.
pub struct Peers<R: SimRuntime> {
    /// Store and budget.
    pub group: Arc<CacheGroup<Weights<R>, R>>,
    /// `cuda:0`, `cuda:1`, ...
    pub caches: Vec<Arc<DeviceCache<Weights<R>, R>>>,
}

/// A world whose half under test is a group of peer caches.
pub type CacheWorld<R> = World<R, Peers<R>>;

impl<R: SimRuntime> CacheWorld<R> {
    /// `peers` caches over a budget of `cap` bytes with the overflow policy on: admissions
    /// overshoot the cap and releases reconcile it, the soft budget upstream has and the
    /// catalogue's `C-R*` schedules explore.
    pub fn new(rt: R, cap: u64, peers: usize) -> Self {
        let world = Self::hard(rt, cap, peers);
        world.group.budget().set_overflow(true);
        world
    }

    /// `peers` caches over a hard budget of `cap` bytes (the production default): loads
    /// reserve their room first, and wait for it or fail typed (SPEC 3.11).
    pub fn hard(rt: R, cap: u64, peers: usize) -> Self {
        let group = CacheGroup::with_runtime(cap, rt.clone()).expect("valid cap");
        let caches = (0..peers).map(|i| group.cache(&format!("cuda:{i}"))).collect();
        World::of(rt, Peers { group, caches })
    }

    /// Gives every cache a device budget of `bytes`, and returns the script that holds the
    /// scripted moves to it.
    pub fn with_device(&self, bytes: u64) -> Arc<Script<R>> {
        for cache in &self.caches {
            cache.set_device_budget(Some(bytes), resident::CallOptions::new()).expect("a valid budget");
        }
        Script::new(&self.rt, bytes)
    }

    /// A script for weights that are never placed on a device.
    pub fn script(&self) -> Arc<Script<R>> {
        Script::new(&self.rt, u64::MAX)
    }

    /// Turns keep-alive off in every cache and joins the keep-alive timer thread: the group's
    /// one background actor, which may be mid-eviction (a record out of its slot, its bytes not
    /// yet debited) when the scenario threads are all done.
    pub fn stop_expiry(&self) {
        for cache in &self.caches {
            // Refused by a cache already shut down, whose keep-alive is off for good.
            let _ = cache.set_keep_alive(None);
        }
        self.rt.join_background();
    }
}
