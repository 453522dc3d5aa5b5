//! [`Architecture`]: what resident needs to know about a burn model family — how to build its
//! module, the tensors it takes and answers ([`TensorSpec`]: a name, a [`DataType`], a shape of
//! any rank with `-1` for a dimension of any size), and how to run it on burn tensor data.

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, TensorData};

use super::error::BurnError;
use crate::error::{BoxError, SourceError};

/// An element type of a model's tensor, named as the Open Inference Protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// 32-bit floats (`FP32`): images, features, activations.
    Fp32,
    /// 64-bit signed integers (`INT64`): token ids, class indices.
    Int64,
}

impl DataType {
    /// The protocol's name: `FP32`, `INT64`.
    pub fn protocol_name(self) -> &'static str {
        match self {
            Self::Fp32 => "FP32",
            Self::Int64 => "INT64",
        }
    }

    /// burn's element type.
    pub fn dtype(self) -> DType {
        match self {
            Self::Fp32 => DType::F32,
            Self::Int64 => DType::I64,
        }
    }
}

/// One tensor a model takes or answers: its name, its element type and its shape, `-1` for a
/// dimension of any size (the batch, a sequence's length).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    /// The tensor's name (the protocol's `name`).
    pub name: String,
    /// Its element type.
    pub datatype: DataType,
    /// Its shape: a size per dimension, `-1` for any size.
    pub shape: Vec<i64>,
}

impl TensorSpec {
    /// A tensor `name` of `datatype` and `shape`.
    pub fn new(name: impl Into<String>, datatype: DataType, shape: impl Into<Vec<i64>>) -> Self {
        Self { name: name.into(), datatype, shape: shape.into() }
    }

    /// Whether a tensor of `shape` fits this one: the same rank, every fixed size equal, any
    /// size where `-1` (another negative size admits nothing).
    pub fn admits(&self, shape: &[usize]) -> bool {
        shape.len() == self.shape.len()
            && self
                .shape
                .iter()
                .zip(shape)
                .all(|(&want, &got)| want == -1 || usize::try_from(want) == Ok(got))
    }

    /// Whether this is a batch of fixed-size rows: any number along the first dimension
    /// (`-1`), fixed sizes along the others.
    pub fn is_batch_of_rows(&self) -> bool {
        self.shape.first() == Some(&-1) && self.row_width().is_some()
    }

    /// Elements per index of the first dimension (the product of the others), if every other
    /// dimension is fixed: a "row" of a batch.
    pub fn row_width(&self) -> Option<usize> {
        self.shape.iter().skip(1).try_fold(1_usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
    }
}

// ---- The architecture ---------------------------------------------------------------------------

/// A burn model family: builds its module on any backend, declares the tensors it takes and
/// answers, and runs on burn tensor data of those.
pub trait Architecture: Send + Sync + 'static {
    /// The module on backend `B`.
    type Module<B: Backend>: Module<B> + Sync + 'static;

    /// The tensors the model takes, in the order [`Architecture::forward`] receives them.
    fn inputs(&self) -> Vec<TensorSpec>;

    /// The tensors it answers, in the order [`Architecture::forward`] returns them.
    fn outputs(&self) -> Vec<TensorSpec>;

    /// The module's structure on `device`, with placeholder weights that loading replaces.
    fn init<B: Backend>(&self, device: &B::Device) -> Self::Module<B>;

    /// The names of the tensors the module takes from a file, as the file's header names them,
    /// if the architecture can say without building the module. A loader then declares only
    /// their bytes to the RAM budget (a file may hold more: optimizer state, other heads);
    /// `None` (the default) declares every tensor of the file, an upper bound.
    fn tensor_names(&self) -> Option<Vec<String>> {
        None
    }

    /// Runs `inputs` through `module` on `device`: one tensor per declared input, in order, each
    /// of its declared element type and of a shape its declaration admits (resident checks
    /// that first); returns one tensor per declared output, in order.
    fn forward<B: Backend>(
        &self,
        module: &Self::Module<B>,
        device: &B::Device,
        inputs: Vec<TensorData>,
    ) -> Result<Vec<TensorData>, BoxError>;
}

/// Runs `inputs` through `module`, after checking them against `arch`'s declaration (their
/// count, element types, shapes and byte lengths) and refusing empty ones: a mismatch is
/// [`BurnError::Tensor`], never a panic of the backend. The outputs are checked against the declaration too.
pub(super) fn run<A: Architecture, B: Backend>(
    arch: &A,
    module: &A::Module<B>,
    device: &B::Device,
    inputs: Vec<TensorData>,
) -> Result<Vec<TensorData>, BurnError> {
    let declared = arch.inputs();
    if inputs.len() != declared.len() {
        let names: Vec<&str> = declared.iter().map(|spec| spec.name.as_str()).collect();
        return Err(BurnError::Tensor {
            name: names.join(", "),
            reason: format!("{} tensors given, the model takes {}", inputs.len(), declared.len()),
        });
    }
    for (spec, data) in declared.iter().zip(&inputs) {
        checked(spec, data)?;
        // Backends divide by a batch's size (ndarray's matmul panics on zero rows).
        if data.shape.contains(&0) {
            let reason = format!("shape {:?} holds no element: nothing to run", data.shape);
            return Err(BurnError::Tensor { name: spec.name.clone(), reason });
        }
    }
    let failed = |source: BoxError| BurnError::Forward { source: SourceError::new(source) };
    let outputs = arch.forward(module, device, inputs).map_err(failed)?;
    let declared = arch.outputs();
    if outputs.len() != declared.len() {
        let reason = format!("the model answered {} tensors, it declares {}", outputs.len(), declared.len());
        return Err(failed(reason.into()));
    }
    for (spec, data) in declared.iter().zip(&outputs) {
        checked(spec, data).map_err(|error| failed(error.into()))?;
    }
    Ok(outputs)
}

/// `data` against `spec`: its element type and its shape.
fn checked(spec: &TensorSpec, data: &TensorData) -> Result<(), BurnError> {
    let mismatch = |reason: String| BurnError::Tensor { name: spec.name.clone(), reason };
    if data.dtype != spec.datatype.dtype() {
        return Err(mismatch(format!(
            "{:?} elements, declared {}",
            data.dtype,
            spec.datatype.protocol_name()
        )));
    }
    if !spec.admits(&data.shape) {
        return Err(mismatch(format!("shape {:?}, declared {:?}", data.shape, spec.shape)));
    }
    Ok(())
}

/// Runs whole rows of `input` through a model of one `FP32` input and one `FP32` output (rows
/// along the first dimension, each as wide as the rest of the input's declared shape): the
/// output rows, flat.
pub(super) fn run_rows<A: Architecture, B: Backend>(
    arch: &A,
    module: &A::Module<B>,
    device: &B::Device,
    input: &[f32],
) -> Result<Vec<f32>, BurnError> {
    let (inputs, outputs) = (arch.inputs(), arch.outputs());
    let ([spec], [_]) = (inputs.as_slice(), outputs.as_slice()) else {
        let reason = format!(
            "rows go to a model of one input and one output, not {} and {}",
            inputs.len(),
            outputs.len()
        );
        return Err(BurnError::Tensor { name: String::new(), reason });
    };
    let width = spec.row_width().unwrap_or(0);
    if width == 0 || input.is_empty() || !input.len().is_multiple_of(width) {
        return Err(BurnError::Input { len: input.len(), width });
    }
    let mut shape = vec![input.len() / width];
    shape.extend(spec.shape.iter().skip(1).map(|&d| usize::try_from(d).unwrap_or(0)));
    let mut outputs = run(arch, module, device, vec![TensorData::new(input.to_vec(), shape)])?;
    let failed = |error: BoxError| BurnError::Forward { source: SourceError::new(error) };
    outputs.remove(0).convert::<f32>().into_vec::<f32>().map_err(|e| failed(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_admits_shapes_of_its_rank_and_fixed_sizes() {
        let image = TensorSpec::new("input", DataType::Fp32, [-1, 1, 8, 8]);
        assert!(image.admits(&[3, 1, 8, 8]) && image.admits(&[0, 1, 8, 8]));
        assert!(!image.admits(&[3, 64]) && !image.admits(&[3, 2, 8, 8]));
        assert_eq!(image.row_width(), Some(64));
        assert!(image.is_batch_of_rows());
        let odd = TensorSpec::new("odd", DataType::Fp32, [-2, 4]);
        assert!(!odd.admits(&[3, 4]) && !odd.is_batch_of_rows(), "only -1 is any size");
        assert!(!TensorSpec::new("fixed", DataType::Fp32, [4, 16]).is_batch_of_rows());
        let tokens = TensorSpec::new("ids", DataType::Int64, [-1, -1]);
        assert!(tokens.admits(&[2, 17]));
        assert_eq!(tokens.row_width(), None, "a row of any length");
        assert!(!tokens.is_batch_of_rows());
        assert_eq!(DataType::Int64.protocol_name(), "INT64");
    }

    /// A declared dimension: mostly fixed sizes, some `-1`, now and then another negative.
    fn dimension() -> impl proptest::strategy::Strategy<Value = i64> {
        use proptest::prelude::*;
        prop_oneof![6 => 0_i64..5, 3 => Just(-1_i64), 1 => -4_i64..-1]
    }

    proptest::proptest! {
        /// `admits`, `row_width` and `is_batch_of_rows` agree with one another on any
        /// declaration, and the element types name themselves as the protocol and burn do.
        #[test]
        fn a_declaration_answers_consistently(
            shape in proptest::collection::vec(dimension(), 0..5),
            batch in 0_usize..4,
            int in proptest::bool::ANY,
        ) {
            let datatype = if int { DataType::Int64 } else { DataType::Fp32 };
            let spec = TensorSpec::new("t", datatype, shape.clone());
            let fixed_rest = shape.iter().skip(1).all(|&d| d >= 0);
            proptest::prop_assert_eq!(spec.row_width().is_some(), fixed_rest);
            if let Some(width) = spec.row_width() {
                let product: i64 = shape.iter().skip(1).product();
                proptest::prop_assert_eq!(Ok(width), usize::try_from(product));
            }
            proptest::prop_assert_eq!(spec.is_batch_of_rows(), shape.first() == Some(&-1) && fixed_rest);
            // A concrete shape of the declaration's fixed sizes, `batch` where it allows any.
            let concrete: Option<Vec<usize>> =
                shape.iter().map(|&d| if d == -1 { Some(batch) } else { usize::try_from(d).ok() }).collect();
            match concrete {
                Some(concrete) => proptest::prop_assert!(spec.admits(&concrete), "{:?} {:?}", spec, concrete),
                None => proptest::prop_assert!(shape.iter().any(|&d| d < -1)),
            }
            if let Some((&first, rest)) = shape.split_first() {
                let wider: Vec<usize> = std::iter::once(usize::try_from(first).map_or(batch, |d| d + 1))
                    .chain(rest.iter().map(|&d| usize::try_from(d).unwrap_or(batch)))
                    .collect();
                proptest::prop_assert_eq!(spec.admits(&wider), first == -1 && rest.iter().all(|&d| d >= -1));
            }
            proptest::prop_assert!(!spec.admits(&vec![batch; shape.len() + 1]), "another rank");
            let (name, dtype) = (datatype.protocol_name(), datatype.dtype());
            proptest::prop_assert_eq!(name, if int { "INT64" } else { "FP32" });
            proptest::prop_assert_eq!(dtype, if int { DType::I64 } else { DType::F32 });
        }
    }
}
