//! The watchdog of an exploration: a stall is reported with its label, a finished exploration
//! never.

use std::sync::mpsc;
use std::time::Duration;

use resident_sim::explore::watchdog::Watchdog;

#[test]
fn an_exploration_that_stops_beating_is_reported_with_its_label() {
    let (tx, rx) = mpsc::channel();
    let dog = Watchdog::start("M-S1 / random".into(), Duration::from_millis(100), move |label, at, _| {
        let _ = tx.send((label.to_owned(), at));
    });
    dog.beat().execution();
    let (label, at) = rx.recv().expect("the watchdog reports the stall");
    assert_eq!((label.as_str(), at), ("M-S1 / random", 1));
}

#[test]
fn a_finished_exploration_is_never_reported() {
    let (tx, rx) = mpsc::channel::<()>();
    let dog = Watchdog::start("quick".into(), Duration::from_secs(3600), move |_, _, _| {
        let _ = tx.send(());
    });
    dog.beat().execution();
    drop(dog);
    assert!(rx.recv().is_err(), "the watchdog ended without acting");
}
