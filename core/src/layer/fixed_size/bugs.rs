//! The bookkeeping reached around the lock protocol, for the model checker's historical bugs of
//! callers that went around it (an unlocked warm path, a pin or unpin that updates this layer
//! outside the id's lifecycle lock, a clear that drops the pins, ...). Their bodies live in the
//! checker, over the real stack: [`ManagerExt`](crate::ManagerExt) leaves no way around the
//! protocol, and this is the one door, hidden from the docs and named for what it does.

use super::FixedSizeCache;
use crate::id::ModelId;
use crate::manager::Manager;

impl<M: Manager> FixedSizeCache<M> {
    /// This layer's bookkeeping without its lifecycle locks. Only the model checker's historical
    /// bugs call it: every change through it breaks the guarantees of the type.
    #[doc(hidden)]
    pub fn around_the_protocol(&self) -> AroundTheProtocol<'_, M> {
        AroundTheProtocol(self)
    }
}

/// See [`FixedSizeCache::around_the_protocol`]: each method is one bookkeeping step, under the
/// bookkeeping monitor only.
#[doc(hidden)]
#[derive(Debug)]
pub struct AroundTheProtocol<'a, M: Manager>(&'a FixedSizeCache<M>);

impl<M: Manager> AroundTheProtocol<'_, M> {
    /// Moves `id` to the back of the queue, if queued.
    pub fn touch(&self, id: &ModelId) {
        self.0.book.with(|b| b.touch(id));
    }

    /// Moves `id` to the back of the queue, queueing it if it was not.
    pub fn touch_appending(&self, id: &ModelId) {
        self.0.book.with(|b| b.touch_appending(id));
    }

    /// Appends `id` to the queue, even if it is queued already.
    pub fn enqueue(&self, id: &ModelId) {
        self.0.book.with(|b| b.enqueue_again(id));
    }

    /// Queues `id` once, at the back (as an admitted add does).
    pub fn push(&self, id: &ModelId) {
        self.0.book.with(|b| b.push(id));
    }

    /// Drops every queue entry of `id`.
    pub fn dequeue_all(&self, id: &ModelId) {
        self.0.book.with(|b| b.dequeue_all(id));
    }

    /// Pins `id` in this layer.
    pub fn pin(&self, id: &ModelId) {
        self.0.book.with(|b| b.pinned.insert(id.clone()));
    }

    /// Unpins `id` in this layer.
    pub fn unpin(&self, id: &ModelId) {
        self.0.book.with(|b| b.unpin(id));
    }

    /// Drops every pin of this layer.
    pub fn drop_pins(&self) {
        self.0.book.with(|b| b.pinned.clear());
    }
}
