//! [`Architecture`]: what resident needs to know about a burn model family.

use burn::module::Module;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// A burn model family: builds its module on any backend and runs it on flat rows.
pub trait Architecture: Send + Sync + 'static {
    /// The module on backend `B`.
    type Module<B: Backend>: Module<B> + Sync + 'static;

    /// Values in one input row.
    fn input_width(&self) -> usize;

    /// Values in one output row.
    fn output_width(&self) -> usize;

    /// The module's structure on `device`, with placeholder weights that loading replaces.
    fn init<B: Backend>(&self, device: &B::Device) -> Self::Module<B>;

    /// The names of the tensors the module takes from a file, as the file's header names them,
    /// if the architecture can say without building the module. A loader then declares only
    /// their bytes to the RAM budget (a file may hold more: optimizer state, other heads);
    /// `None` (the default) declares every tensor of the file, an upper bound.
    fn tensor_names(&self) -> Option<Vec<String>> {
        None
    }

    /// Runs `input` (`[rows, input_width]`) through `module`; returns `[rows, output_width]`.
    fn forward<B: Backend>(&self, module: &Self::Module<B>, input: Tensor<B, 2>) -> Tensor<B, 2>;
}
