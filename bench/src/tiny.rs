//! A model of one byte whose loader always succeeds at once: what the benchmarks serve, so that
//! they time resident's own paths and nothing of a model's.

use resident::{BoxError, Loader, Model, ModelId};

/// A model of one byte.
#[derive(Debug)]
pub struct Tiny;

impl Model for Tiny {
    fn size_bytes(&self) -> u64 {
        1
    }
}

/// Loads a [`Tiny`] for any id.
#[derive(Debug)]
pub struct TinyLoader;

impl Loader for TinyLoader {
    type Model = Tiny;

    fn load(&self, _: &ModelId) -> Result<Tiny, BoxError> {
        Ok(Tiny)
    }
}

/// The eight ids the benchmarks use.
pub const IDS: [&str; 8] = ["m/0", "m/1", "m/2", "m/3", "m/4", "m/5", "m/6", "m/7"];
