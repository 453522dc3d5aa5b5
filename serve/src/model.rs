//! [`ServeModel`]: what the server needs from a resident model besides [`Model`].

use resident::Model;
use resident::burn::{Architecture, BurnError, ServeBackend, Served, TensorSpec};

/// A resident model the server can run: whole rows of `f32` in, whole rows out.
///
/// The server's stack serves [`CatalogueModel`](crate::CatalogueModel)s (a [`Served`] model
/// and its source); a test (or a deployment) can wrap the loader
/// and its models, for instance to hold inference open, as long as the wrapper implements this.
pub trait ServeModel: Model {
    /// Runs whole rows of `input` through the model; returns the output rows, flat. Input that
    /// is not whole rows is [`BurnError::Input`].
    fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError>;

    /// The tensors the model takes, as its architecture declares them (the Open Inference
    /// Protocol's model metadata): the server runs models of one `FP32` input.
    fn inputs(&self) -> Vec<TensorSpec>;

    /// The tensors it answers: the server runs models of one `FP32` output.
    fn outputs(&self) -> Vec<TensorSpec>;

    /// The elements of an input row and of an output row: all of the first input's and the
    /// first output's dimensions but the batch (0 if one of them has no fixed size).
    fn widths(&self) -> (usize, usize) {
        let width = |specs: Vec<TensorSpec>| specs.first().and_then(TensorSpec::row_width).unwrap_or(0);
        (width(self.inputs()), width(self.outputs()))
    }

    /// The catalogue model this one was loaded from (an alias's source), if it knows: shown in
    /// a `PUT`'s answer and in the protocol's model metadata. `None` by default.
    fn source(&self) -> Option<&str> {
        None
    }
}

impl<A: Architecture, T: ServeBackend> ServeModel for Served<A, T> {
    fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        Served::infer(self, input)
    }

    fn inputs(&self) -> Vec<TensorSpec> {
        self.architecture().inputs()
    }

    fn outputs(&self) -> Vec<TensorSpec> {
        self.architecture().outputs()
    }
}
