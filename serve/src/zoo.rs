//! [`Zoo`]: resident's two zoo architectures (the MLP and the CNN) as one burn
//! [`Architecture`], so that models of both share one [`CacheGroup`](resident::cache::CacheGroup)
//! and its one RAM budget.
//!
//! A [`SharedLoader`](resident::burn::SharedLoader) serves a single architecture *value*: the
//! server keeps one loader per distinct value ([`CatalogueLoader`](crate::CatalogueLoader)), all
//! of one type, over one group.

use burn::module::{Devices, Module, ModuleMapper, ModuleVisitor};
use burn::tensor::TensorData;
use burn::tensor::backend::Backend;
use resident::BoxError;
use resident::burn::zoo::{Cnn, CnnSpec, Mlp, MlpSpec};
use resident::burn::{Architecture, TensorSpec};

use crate::limits::Activation;

/// One of the zoo's architectures, with its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoo {
    /// A two-layer perceptron.
    Mlp(MlpSpec),
    /// A convolutional net on square one-channel images.
    Cnn(CnnSpec),
}

impl Zoo {
    /// The architecture a manifest entry names: `kind` `mlp` with `sizes` `[d_in, hidden,
    /// d_out]`, or `cnn` with `[side, channels, d_out]`; `None` for any other kind.
    pub fn from_kind(kind: &str, sizes: [usize; 3]) -> Option<Self> {
        let [a, b, c] = sizes;
        match kind {
            "mlp" => Some(Self::Mlp(MlpSpec { d_in: a, hidden: b, d_out: c })),
            "cnn" => Some(Self::Cnn(CnnSpec { side: a, channels: b, d_out: c })),
            _ => None,
        }
    }

    /// Elements of an input row (all of an input's dimensions but the batch).
    pub fn input_width(&self) -> usize {
        self.inputs().first().and_then(TensorSpec::row_width).unwrap_or(0)
    }

    /// Elements of an output row.
    pub fn output_width(&self) -> usize {
        self.outputs().first().and_then(TensorSpec::row_width).unwrap_or(0)
    }

    /// Output elements per input element (an output row's width over an input row's).
    pub fn expansion(&self) -> f64 {
        let (input, output) = (self.input_width().max(1), self.output_width());
        // Widths are far below f64's exact integers.
        #[allow(clippy::cast_precision_loss)]
        let ratio = output as f64 / input as f64;
        ratio
    }

    /// What this architecture's forward pass holds at once
    /// ([`activation_floats`](Self::activation_floats) a row, and per input element).
    pub fn activation(&self) -> Activation {
        let per_row = self.activation_floats();
        // Widths are far below f64's exact integers.
        #[allow(clippy::cast_precision_loss)]
        let per_element = per_row as f64 / self.input_width().max(1) as f64;
        Activation { per_row, per_element }
    }

    /// An upper bound on the floats one row's forward pass holds at once: the input row's copy,
    /// each layer's output (a convolution's unfolded 3×3 patches included), the output row's
    /// copies — twice over, for a backend's scratch space.
    pub fn activation_floats(&self) -> u64 {
        let floats = match *self {
            Self::Mlp(MlpSpec { d_in, hidden, d_out }) => d_in + 2 * hidden + 3 * d_out,
            Self::Cnn(CnnSpec { side, channels, d_out }) => {
                side * side * (1 + 9 + 3 * channels) + channels + 3 * d_out
            }
        };
        2 * u64::try_from(floats).unwrap_or(u64::MAX / 2)
    }
}

/// A [`Zoo`] module: the zoo's own module, with the shape it was built for.
///
/// Its parameters are the inner module's, under the inner module's own names (`fc1.weight`,
/// `conv.bias`, ...): the variant adds no path component, so the fixture files load as they
/// are.
#[derive(Debug, Clone)]
pub enum ZooModule<B: Backend> {
    /// An MLP.
    Mlp(MlpSpec, Mlp<B>),
    /// A CNN.
    Cnn(CnnSpec, Cnn<B>),
}

/// The record of a [`ZooModule`]: the inner module's record, in the slot of its variant.
type ZooRecord<B> = (Option<<Mlp<B> as Module<B>>::Record>, Option<<Cnn<B> as Module<B>>::Record>);

impl<B: Backend> Module<B> for ZooModule<B> {
    type Record = ZooRecord<B>;

    fn collect_devices(&self, devices: Devices<B>) -> Devices<B> {
        match self {
            Self::Mlp(_, m) => m.collect_devices(devices),
            Self::Cnn(_, m) => m.collect_devices(devices),
        }
    }

    fn fork(self, device: &B::Device) -> Self {
        match self {
            Self::Mlp(spec, m) => Self::Mlp(spec, m.fork(device)),
            Self::Cnn(spec, m) => Self::Cnn(spec, m.fork(device)),
        }
    }

    fn to_device(self, device: &B::Device) -> Self {
        match self {
            Self::Mlp(spec, m) => Self::Mlp(spec, m.to_device(device)),
            Self::Cnn(spec, m) => Self::Cnn(spec, m.to_device(device)),
        }
    }

    /// Visits the inner module's parameters, entering no module of its own.
    fn visit<V: ModuleVisitor<B>>(&self, visitor: &mut V) {
        match self {
            Self::Mlp(_, m) => m.visit(visitor),
            Self::Cnn(_, m) => m.visit(visitor),
        }
    }

    /// Maps the inner module's parameters, entering no module of its own.
    fn map<M: ModuleMapper<B>>(self, mapper: &mut M) -> Self {
        match self {
            Self::Mlp(spec, m) => Self::Mlp(spec, m.map(mapper)),
            Self::Cnn(spec, m) => Self::Cnn(spec, m.map(mapper)),
        }
    }

    /// Loads the record of the module's own variant; a record of the other variant changes
    /// nothing.
    fn load_record(self, record: Self::Record) -> Self {
        match (self, record) {
            (Self::Mlp(spec, m), (Some(record), _)) => Self::Mlp(spec, m.load_record(record)),
            (Self::Cnn(spec, m), (_, Some(record))) => Self::Cnn(spec, m.load_record(record)),
            (module, _) => module,
        }
    }

    fn into_record(self) -> Self::Record {
        match self {
            Self::Mlp(_, m) => (Some(m.into_record()), None),
            Self::Cnn(_, m) => (None, Some(m.into_record())),
        }
    }
}

impl Architecture for Zoo {
    type Module<B: Backend> = ZooModule<B>;

    fn inputs(&self) -> Vec<TensorSpec> {
        match self {
            Self::Mlp(spec) => spec.inputs(),
            Self::Cnn(spec) => spec.inputs(),
        }
    }

    fn outputs(&self) -> Vec<TensorSpec> {
        match self {
            Self::Mlp(spec) => spec.outputs(),
            Self::Cnn(spec) => spec.outputs(),
        }
    }

    fn init<B: Backend>(&self, device: &B::Device) -> ZooModule<B> {
        match *self {
            Self::Mlp(spec) => ZooModule::Mlp(spec, spec.init(device)),
            Self::Cnn(spec) => ZooModule::Cnn(spec, spec.init(device)),
        }
    }

    fn tensor_names(&self) -> Option<Vec<String>> {
        match self {
            Self::Mlp(spec) => spec.tensor_names(),
            Self::Cnn(spec) => spec.tensor_names(),
        }
    }

    /// Runs the module's own architecture (the shape it was built for).
    fn forward<B: Backend>(
        &self,
        module: &ZooModule<B>,
        device: &B::Device,
        inputs: Vec<TensorData>,
    ) -> Result<Vec<TensorData>, BoxError> {
        match module {
            ZooModule::Mlp(spec, m) => spec.forward(m, device, inputs),
            ZooModule::Cnn(spec, m) => spec.forward(m, device, inputs),
        }
    }
}
