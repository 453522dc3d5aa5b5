//! [`StoreLoader`]: models built from an in-memory store of weights.

use std::collections::BTreeMap;

use resident::{BoxError, Loader, Model, ModelId};

/// Builds [`StoredModel`]s from a fixed store of weights by model id.
#[derive(Debug, Clone, Default)]
pub struct StoreLoader {
    weights: BTreeMap<String, Vec<f32>>,
}

/// The store has no weights under the id asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no weights stored for model {0:?}")]
pub struct UnknownModel(pub String);

impl StoreLoader {
    /// A loader of an empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// This loader with `weights` stored under `id`.
    pub fn with_model(mut self, id: &str, weights: &[f32]) -> Self {
        self.weights.insert(id.to_owned(), weights.to_vec());
        self
    }
}

impl Loader for StoreLoader {
    type Model = StoredModel;

    fn load(&self, id: &ModelId) -> Result<StoredModel, BoxError> {
        let weights = self.weights.get(id.as_str()).ok_or_else(|| UnknownModel(id.as_str().to_owned()))?;
        Ok(StoredModel { weights: weights.clone() })
    }
}

/// A model: a weight vector that scores inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredModel {
    weights: Vec<f32>,
}

impl StoredModel {
    /// The dot product of the weights with `input`.
    pub fn score(&self, input: &[f32]) -> f32 {
        self.weights.iter().zip(input).map(|(w, x)| w * x).sum()
    }
}

impl Model for StoredModel {
    fn size_bytes(&self) -> u64 {
        u64::try_from(std::mem::size_of_val(self.weights.as_slice())).unwrap_or(u64::MAX)
    }
}
