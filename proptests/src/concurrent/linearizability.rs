//! A linearizability checker for small histories: Wing & Gong's search with Lowe's memo of
//! `(linearized set, state)` pairs.
//!
//! A history is a list of [`Call`]s, each with an invocation time and, if it returned, a
//! response time and its result. It is linearizable if some total order of the calls respects
//! real time (a call that returned before another was invoked comes first) and the sequential
//! [`Spec`], run in that order, allows every recorded result. A call whose outcome is unknown
//! (it panicked, or never returned) may take effect between its invocation and its return (if
//! it returned at all), with any result, or not at all.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

/// One call of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<Op, Ret> {
    /// The thread that made it.
    pub thread: usize,
    /// What was called.
    pub op: Op,
    /// Its result; `None` if unknown (it panicked, or never returned).
    pub ret: Option<Ret>,
    /// When it was invoked (a logical timestamp).
    pub invoke: u64,
    /// When it returned or unwound; `None` if it never did.
    pub response: Option<u64>,
    /// When later than its invocation, the time of the first event after the moment it may
    /// take effect from (it gave up on a wait that ended then): it comes after every call that
    /// returned before that event, and every call whose response is that event or later
    /// overlapped that moment. It still overlaps every call it overlaps from its invocation on:
    /// what it holds meanwhile explains their results.
    pub decided: Option<u64>,
}

impl<Op, Ret> Call<Op, Ret> {
    /// The time it may take effect from: its invocation, or [`Call::decided`].
    pub fn effect_from(&self) -> u64 {
        self.decided.map_or(self.invoke, |d| d.max(self.invoke))
    }
}

/// A sequential specification.
pub trait Spec {
    /// The specification's state.
    type State: Clone + Eq + Hash + Debug;
    /// Calls.
    type Op: Debug;
    /// Results.
    type Ret: Debug;

    /// The states that call `at` of `history` can lead to from `state` when it takes effect
    /// there with its recorded result (any result, if unknown). Empty: the result is impossible
    /// in `state`. `history` is at hand for results that depend on what overlapped the call.
    fn step(&self, state: &Self::State, history: &[Call<Self::Op, Self::Ret>], at: usize)
    -> Vec<Self::State>;
}

/// Whether some call of `history` other than `at`, for which `relevant` holds, overlapped call
/// `at` in real time (neither returned before the other was invoked), from the time `at` may
/// take effect ([`Call::effect_from`]): what explains its result held then.
pub fn overlapping<Op, Ret>(
    history: &[Call<Op, Ret>],
    at: usize,
    relevant: impl Fn(&Call<Op, Ret>) -> bool,
) -> bool {
    overlapping_at(history, at, |_, call| relevant(call))
}

/// Whether some other call of `history` for which `relevant` (given its index) holds overlapped
/// call `at`.
pub fn overlapping_at<Op, Ret>(
    history: &[Call<Op, Ret>],
    at: usize,
    relevant: impl Fn(usize, &Call<Op, Ret>) -> bool,
) -> bool {
    let me = &history[at];
    history.iter().enumerate().any(|(j, other)| {
        j != at
            && relevant(j, other)
            && other.response.is_none_or(|r| me.effect_from() <= r)
            && me.response.is_none_or(|r| other.invoke < r)
    })
}

/// Why a history is not linearizable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLinearizable {
    /// The longest prefix of calls (indices into the history) that some order linearizes.
    pub longest_prefix: Vec<usize>,
}

/// The most calls a history may hold (the linearized set is a bit mask).
pub const MAX_CALLS: usize = 128;

/// Checks `history` against `spec` from `init`; on success, a witness order (indices).
pub fn check<S: Spec>(
    spec: &S,
    init: S::State,
    history: &[Call<S::Op, S::Ret>],
) -> Result<Vec<usize>, NotLinearizable> {
    assert!(history.len() <= MAX_CALLS, "histories hold at most {MAX_CALLS} calls");
    let mut search = Search { spec, history, memo: HashSet::new(), order: Vec::new(), longest: Vec::new() };
    if search.from(0, init) {
        Ok(search.order)
    } else {
        Err(NotLinearizable { longest_prefix: search.longest })
    }
}

struct Search<'h, S: Spec> {
    spec: &'h S,
    history: &'h [Call<S::Op, S::Ret>],
    memo: HashSet<(u128, S::State)>,
    order: Vec<usize>,
    longest: Vec<usize>,
}

/// Whether call `i` may take effect next, after the calls in `done`: no pending call with a
/// known result returned before `i` may take effect ([`Call::effect_from`]), and no call
/// already in effect may only have taken effect after `i` returned.
fn may_go_next<Op, Ret>(history: &[Call<Op, Ret>], done: impl Fn(usize) -> bool, i: usize) -> bool {
    let call = &history[i];
    (0..history.len()).filter(|&j| j != i).all(|j| {
        let other = &history[j];
        if done(j) {
            call.response.is_none_or(|r| other.effect_from() <= r)
        } else {
            other.ret.is_none() || other.response.is_none_or(|r| call.effect_from() <= r)
        }
    })
}

impl<S: Spec> Search<'_, S> {
    fn from(&mut self, done: u128, state: S::State) -> bool {
        let pending = |i: usize| done & (1u128 << i) == 0;
        let indices = 0..self.history.len();
        // Every call with a known result is linearized: what is left may never have happened.
        if !indices.clone().any(|i| pending(i) && self.history[i].ret.is_some()) {
            return true;
        }
        if !self.memo.insert((done, state.clone())) {
            return false;
        }
        let candidates: Vec<usize> =
            indices.filter(|&i| pending(i) && may_go_next(self.history, |j| !pending(j), i)).collect();
        for i in candidates {
            for next in self.spec.step(&state, self.history, i) {
                self.order.push(i);
                if self.order.len() > self.longest.len() {
                    self.longest.clone_from(&self.order);
                }
                if self.from(done | (1u128 << i), next) {
                    return true;
                }
                self.order.pop();
            }
        }
        false
    }
}

/// The same question answered by trying every order (tiny histories only: the checker's
/// oracle in tests).
pub fn brute_force<S: Spec>(spec: &S, init: S::State, history: &[Call<S::Op, S::Ret>]) -> bool {
    fn go<S: Spec>(spec: &S, state: S::State, history: &[Call<S::Op, S::Ret>], done: &mut Vec<bool>) -> bool {
        if !(0..history.len()).any(|i| !done[i] && history[i].ret.is_some()) {
            return true;
        }
        for i in 0..history.len() {
            if done[i] || !may_go_next(history, |j| done[j], i) {
                continue;
            }
            for next in spec.step(&state, history, i) {
                done[i] = true;
                if go(spec, next, history, done) {
                    return true;
                }
                done[i] = false;
            }
        }
        false
    }
    go(spec, init, history, &mut vec![false; history.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register holding one value: `Write(v)` returns nothing, `Read` returns the value.
    struct Register;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Reg {
        Write(u8),
        Read,
    }

    impl Spec for Register {
        type State = u8;
        type Op = Reg;
        type Ret = u8;

        fn step(&self, state: &u8, history: &[Call<Reg, u8>], at: usize) -> Vec<u8> {
            let call = &history[at];
            match (call.op, call.ret) {
                (Reg::Write(v), _) => vec![v],
                (Reg::Read, Some(r)) if r == *state => vec![*state],
                (Reg::Read, None) => vec![*state],
                (Reg::Read, Some(_)) => vec![],
            }
        }
    }

    fn call(thread: usize, op: Reg, ret: Option<u8>, invoke: u64, response: Option<u64>) -> Call<Reg, u8> {
        Call { thread, op, ret, invoke, response, decided: None }
    }

    #[test]
    fn overlapping_write_and_reads_in_either_order_are_linearizable() {
        // Porcupine's README example, linearizable: a write of 1 overlaps a read of 0 and a read
        // of 1.
        let history = [
            call(0, Reg::Write(1), Some(0), 0, Some(10)),
            call(1, Reg::Read, Some(0), 1, Some(3)),
            call(2, Reg::Read, Some(1), 2, Some(11)),
        ];
        assert!(check(&Register, 0, &history).is_ok());
        assert!(brute_force(&Register, 0, &history));
    }

    #[test]
    fn a_read_of_the_old_value_after_a_newer_read_is_not() {
        // Porcupine's README example, not linearizable: after a read of 1 returned, a later read
        // gives 0 again.
        let history = [
            call(0, Reg::Write(1), Some(0), 0, Some(10)),
            call(1, Reg::Read, Some(1), 1, Some(3)),
            call(2, Reg::Read, Some(0), 4, Some(6)),
        ];
        let failure = check(&Register, 0, &history).unwrap_err();
        assert!(!failure.longest_prefix.is_empty());
        assert!(!brute_force(&Register, 0, &history));
    }

    #[test]
    fn an_unknown_outcome_may_or_may_not_take_effect() {
        let took_effect = [call(0, Reg::Write(1), None, 0, None), call(1, Reg::Read, Some(1), 1, Some(2))];
        assert!(check(&Register, 0, &took_effect).is_ok());
        let did_not = [call(0, Reg::Write(1), None, 0, None), call(1, Reg::Read, Some(0), 1, Some(2))];
        assert!(check(&Register, 0, &did_not).is_ok());
        let not_before_invoked =
            [call(1, Reg::Read, Some(1), 0, Some(1)), call(0, Reg::Write(1), None, 2, None)];
        assert!(check(&Register, 0, &not_before_invoked).is_err());
        // A write that panicked before a read was invoked took effect before it, or never.
        let unwound = [call(0, Reg::Write(1), None, 0, Some(1)), call(1, Reg::Read, Some(0), 2, Some(3))];
        assert!(check(&Register, 0, &unwound).is_ok());
        let unwound_then_read_twice = [
            call(0, Reg::Write(1), None, 0, Some(1)),
            call(1, Reg::Read, Some(0), 2, Some(3)),
            call(1, Reg::Read, Some(1), 4, Some(5)),
        ];
        assert!(
            check(&Register, 0, &unwound_then_read_twice).is_err(),
            "it cannot take effect after it unwound"
        );
    }

    #[test]
    fn a_call_decided_after_another_returned_comes_after_it() {
        // A read that gave up on a wait whose deadline fired after the write returned: the
        // write overlaps its invocation, yet the read comes after it.
        let overlapping =
            [call(0, Reg::Write(1), Some(0), 0, Some(3)), call(1, Reg::Read, Some(0), 1, Some(5))];
        assert!(check(&Register, 0, &overlapping).is_ok());
        let mut decided = overlapping.clone();
        decided[1].decided = Some(4);
        assert!(check(&Register, 0, &decided).is_err());
        assert!(!brute_force(&Register, 0, &decided));
        // A call that returned at the first event after the deadline overlapped that moment.
        decided[1].decided = Some(3);
        assert!(check(&Register, 0, &decided).is_ok());
        assert!(overlapping_at(&decided, 1, |_, _| true));
        decided[1].decided = Some(4);
        assert!(!overlapping_at(&decided, 1, |_, _| true));
        assert!(overlapping_at(&decided, 0, |_, _| true), "what it held overlaps the other call");
    }

    mod differential {
        use proptest::prelude::*;

        use super::*;

        fn history() -> impl Strategy<Value = Vec<Call<Reg, u8>>> {
            let one = (
                0..3usize,
                any::<bool>(),
                0..3u8,
                0..3u8,
                0..20u64,
                prop::option::weighted(0.9, 0..8u64),
                prop::bool::weighted(0.15),
            );
            prop::collection::vec(one, 1..=7).prop_map(|calls| {
                calls
                    .into_iter()
                    .map(|(thread, write, v, r, invoke, len, unknown)| {
                        let op = if write { Reg::Write(v) } else { Reg::Read };
                        let response = len.map(|l| invoke + 1 + l);
                        let ret = response.filter(|_| !unknown).map(|_| if write { 0 } else { r });
                        call(thread, op, ret, invoke, response)
                    })
                    .collect()
            })
        }

        proptest! {
            #[test]
            fn the_checker_agrees_with_trying_every_order(history in history()) {
                prop_assert_eq!(check(&Register, 0, &history).is_ok(), brute_force(&Register, 0, &history));
            }
        }
    }
}
