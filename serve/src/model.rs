//! [`ServeModel`]: what the server needs from a resident model besides [`Model`].

use resident::Model;
use resident::burn::{Architecture, BurnError, ServeBackend, Served};

/// A resident model the server can run: whole rows of `f32` in, whole rows out.
///
/// The server's stack serves [`CatalogueModel`](crate::CatalogueModel)s (a [`Served`] model
/// and its source); a test (or a deployment) can wrap the loader
/// and its models, for instance to hold inference open, as long as the wrapper implements this.
pub trait ServeModel: Model {
    /// Runs whole rows of `input` through the model; returns the output rows, flat. Input that
    /// is not whole rows is [`BurnError::Input`].
    fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError>;

    /// The width of an input row and of an output row (the Open Inference Protocol's model
    /// metadata: `[-1, input]` in, `[-1, output]` out).
    fn widths(&self) -> (usize, usize);

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

    fn widths(&self) -> (usize, usize) {
        let architecture = self.architecture();
        (architecture.input_width(), architecture.output_width())
    }
}
