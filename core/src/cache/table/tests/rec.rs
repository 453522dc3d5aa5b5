//! The records the table's programs admit.

use crate::cache::table::{Claims, Entry};
use crate::cache::weights::CanonicalId;
use crate::runtime::{Runtime, StdRuntime};

/// The production atomic word.
pub(super) type Word = <StdRuntime as Runtime>::Atomic;

/// A word holding 0.
pub(super) fn word() -> Word {
    StdRuntime::new().atomic(0)
}

/// A record: its number in the program, key and bytes; `shared` stands for a canonical a peer
/// also holds (taking the record out gives nothing back).
#[derive(Debug)]
pub(super) struct Rec {
    pub(super) id: usize,
    pub(super) key: String,
    pub(super) bytes: u64,
    pub(super) shared: bool,
    claims: Claims<Word>,
}

impl Rec {
    pub(super) fn new(id: usize, key: &str, bytes: u64, shared: bool) -> Self {
        Self { id, key: key.to_owned(), bytes, shared, claims: Claims::new(word()) }
    }
}

impl Entry for Rec {
    type Word = Word;

    fn claims(&self) -> &Claims<Word> {
        &self.claims
    }

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
