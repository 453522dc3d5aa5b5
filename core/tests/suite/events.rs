//! What resident reports through `tracing`, read back by a subscriber that takes events only
//! (as many do: no spans, no callsite hints). Every claim a cache hands out and takes back is
//! reported after its handle exists; a subscriber that filters on events must see each report.
//!
//! The subscriber is this binary's global one, keeping the events of the test's thread: a
//! scoped one (`with_default`) races the other tests' threads for each callsite's cached
//! interest, and loses events now and then.

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use resident::cache::{CacheGroup, PutOptions};

/// Keeps the message of every event of one thread; enables events and nothing else.
#[derive(Clone)]
struct Messages {
    thread: ThreadId,
    seen: Arc<Mutex<Vec<String>>>,
}

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Messages {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.is_event()
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        if std::thread::current().id() != self.thread {
            return;
        }
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        self.seen.lock().expect("messages").push(message);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn an_event_only_subscriber_sees_every_claim_of_a_get_and_lock() {
    let group = CacheGroup::<u64>::new(1 << 20).expect("cap");
    let cache = group.cache("cuda:0");
    let messages = Messages { thread: std::thread::current().id(), seen: Arc::default() };
    tracing::subscriber::set_global_default(messages.clone()).expect("this binary's only global subscriber");
    let admission = cache.put("m", 7, 64, PutOptions::default()).expect("room");
    drop(admission.into_loaded().lock());
    drop(cache.get("m").expect("resident").lock());
    let seen = messages.seen.lock().expect("messages").clone();
    let count = |name: &str| seen.iter().filter(|m| *m == name).count();
    assert_eq!(count("claim converted"), 3, "admission to hold, hold to lock, twice: {seen:?}");
    assert_eq!(count("claim released"), 2, "each guard's release: {seen:?}");
    assert_eq!(count("get"), 1, "{seen:?}");
}
