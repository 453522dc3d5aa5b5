//! One value handed from one scenario thread to another: an explicit sync point, typed by what
//! it carries.

use resident::runtime::{Arc, Monitor};

use super::World;
use crate::runtime::SimRuntime;

/// A value of type `T` posted once by one thread and awaited by another.
pub struct Mailbox<R: SimRuntime, T: Send + 'static> {
    /// `None` until posted.
    slot: R::Monitor<Option<T>>,
}

impl<R: SimRuntime, T: Clone + Default + Send + 'static> Mailbox<R, T> {
    /// Posts `value`, waking the thread that waits for it.
    pub fn post(&self, value: T) {
        self.slot.with(|slot| *slot = Some(value));
        self.slot.notify_all();
    }

    /// Blocks until the post; the posted value.
    pub fn wait(&self) -> T {
        self.slot.wait_until(None, |slot| slot.clone()).unwrap_or_default()
    }
}

impl<R: SimRuntime, S> World<R, S> {
    /// A mailbox for one value between two threads.
    pub fn mailbox<T: Send + 'static>(&self) -> Arc<Mailbox<R, T>> {
        Arc::new(Mailbox { slot: self.rt.monitor(None) })
    }

    /// A mailbox that carries no value: one thread tells another it got somewhere.
    pub fn signal(&self) -> Arc<Mailbox<R, ()>> {
        self.mailbox()
    }
}
