//! Helpers of the benchmarks: the load-average gate every round starts behind, the ratio table
//! `benches/read_path.rs` prints, and the tiny model both benchmarks serve ([`tiny`]). Two
//! shared cores make a busy machine the largest error in a benchmark, so a round starts only
//! when the one-minute load average is low, and every figure is the median of several
//! interleaved rounds.

pub mod tiny;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The one-minute load average (`None` where the platform has none).
pub fn load_average() -> Option<f64> {
    let one = sysinfo::System::load_average().one;
    (one > 0.0 || cfg!(target_os = "linux")).then_some(one)
}

/// This process's resident set size in bytes (`None` where it cannot be read).
pub fn rss_bytes() -> Option<u64> {
    let pid = sysinfo::get_current_pid().ok()?;
    let mut system = sysinfo::System::new();
    system.refresh_processes(sysinfo::ProcessesToUpdate::Some(&[pid]), true);
    system.process(pid).map(sysinfo::Process::memory)
}

/// Waits until the one-minute load average is at most `max` (checking every five seconds),
/// for at most `patience`; returns the load the round starts at and whether it had to wait.
pub fn wait_until_quiet(max: f64, patience: Duration) -> (Option<f64>, bool) {
    let start = Instant::now();
    let mut waited = false;
    loop {
        let load = load_average();
        match load {
            Some(l) if l > max && start.elapsed() < patience => {
                if !waited {
                    println!("load average {l:.2} > {max}: waiting for a quiet machine");
                }
                waited = true;
                std::thread::sleep(Duration::from_secs(5));
            }
            _ => return (load, waited),
        }
    }
}

/// The median of `values` (`NaN` if empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nanoseconds per operation of each case, one value per round.
#[derive(Debug, Default)]
pub struct Rounds {
    ns_per_op: BTreeMap<String, Vec<f64>>,
}

impl Rounds {
    /// Records one round's nanoseconds per operation of `case`.
    pub fn record(&mut self, case: &str, ns_per_op: f64) {
        self.ns_per_op.entry(case.to_owned()).or_default().push(ns_per_op);
    }

    /// The median over rounds of `case`'s nanoseconds per operation.
    pub fn median_ns(&self, case: &str) -> f64 {
        self.ns_per_op.get(case).map_or(f64::NAN, |v| median(v))
    }

    /// The median over rounds of `baseline`'s time per operation over `case`'s, each round's
    /// ratio taken within that round: `case`'s throughput relative to `baseline`'s.
    pub fn ratio(&self, case: &str, baseline: &str) -> f64 {
        let (Some(c), Some(b)) = (self.ns_per_op.get(case), self.ns_per_op.get(baseline)) else {
            return f64::NAN;
        };
        let per_round: Vec<f64> = c.iter().zip(b).map(|(c, b)| b / c).collect();
        median(&per_round)
    }
}
