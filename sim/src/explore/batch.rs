//! Many explorations at once: a batch of (scenario, checker) jobs spread over worker threads
//! (every core by default), optionally within a time budget shared across the batch.
//!
//! Each checker keeps its state per thread (the current execution, its trace, its first
//! violation), so explorations on different threads never meet; `cargo test` runs scenarios
//! the same way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{Checker, Outcome, Plan, explore};
use crate::scenario::Scenario;

/// How a batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// Worker threads (at least one).
    pub threads: usize,
    /// The wall time the whole batch may take: each job, as it starts, gets an even share of
    /// what is left (times the threads) and stops there with the executions it ran.
    pub time: Option<Duration>,
}

impl Batch {
    /// One worker per core, no time budget.
    pub fn new() -> Self {
        Self { threads: std::thread::available_parallelism().map_or(1, usize::from), time: None }
    }
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

/// One job of a batch.
pub type Job<'a> = (&'a Scenario, Checker);

/// Explores every job with `plan` on `batch.threads` workers; calls `done` as each finishes
/// (from the worker, with the count finished so far). The outcomes come back in job order.
/// Loom's exhaustive searches, the longest jobs, start first, so that no worker is left with
/// one at the end while the others idle.
pub fn explore_batch(
    jobs: &[Job<'_>],
    plan: &Plan,
    batch: Batch,
    done: impl Fn(&Outcome, usize) + Sync,
) -> Vec<Outcome> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].1 != Checker::Loom);
    let start = Instant::now();
    let threads = batch.threads.clamp(1, jobs.len().max(1));
    let explore_one = |taken: usize, &(scenario, checker): &Job| {
        let share = batch.time.map(|time| {
            let left = time.saturating_sub(start.elapsed());
            // Its share of the workers' time left, and never more than the wall time left.
            left.mul_f64(threads as f64 / (jobs.len() - taken) as f64).min(left)
        });
        explore(scenario, checker, plan.clone().with_time_limit(share))
    };
    parallel(jobs, &order, threads, explore_one, done)
}

/// Maps `f` over `items` on `threads` workers, taking them in `order` (`f` also gets how many
/// were taken before); calls `done` as each finishes, with the count finished so far. The
/// results come back in item order.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    order: &[usize],
    threads: usize,
    f: impl Fn(usize, &T) -> R + Sync,
    done: impl Fn(&R, usize) + Sync,
) -> Vec<R> {
    let (next, finished) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let taken = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&at) = order.get(taken) else { return };
                    let result = f(taken, &items[at]);
                    done(&result, finished.fetch_add(1, Ordering::Relaxed) + 1);
                    results.lock().expect("no worker panics holding it")[at] = Some(result);
                }
            });
        }
    });
    let results = results.into_inner().expect("the workers are done");
    results.into_iter().map(|r| r.expect("every item ran")).collect()
}

/// Executions and the time spent on them, summed per checker.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Throughput {
    /// Executions run.
    pub executions: usize,
    /// Time the explorations took, summed over the jobs (on all threads: the work, not the wall).
    pub busy_s: f64,
}

impl Throughput {
    /// Executions per second of one worker.
    pub fn per_second(&self) -> f64 {
        if self.busy_s > 0.0 { self.executions as f64 / self.busy_s } else { 0.0 }
    }
}

/// The batch's executions by checker, in the order random, PCT, loom (checkers that ran none
/// are left out).
pub fn throughput(outcomes: &[Outcome]) -> Vec<(Checker, Throughput)> {
    [Checker::Random, Checker::Pct, Checker::Loom]
        .into_iter()
        .map(|checker| {
            let mine = outcomes.iter().filter(|o| o.checker == checker);
            let t = mine.fold(Throughput::default(), |t, o| Throughput {
                executions: t.executions + o.iterations,
                busy_s: t.busy_s + o.elapsed.as_secs_f64(),
            });
            (checker, t)
        })
        .filter(|(_, t)| t.executions > 0)
        .collect()
}
