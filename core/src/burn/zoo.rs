//! Two small architectures, for the fixtures, the tests and the serving example: an MLP and a
//! convolutional net. `generate` fills them with weights drawn from a seed by a fixed formula,
//! so a seed names the same model on every machine and backend.

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::architecture::{Architecture, DataType, TensorSpec};
use crate::error::BoxError;

/// `n` values in `[-scale, scale)` from `seed` (splitmix64).
fn draw(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // The top 24 bits, exactly representable in an f32.
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 2.0 - 1.0) * scale
        })
        .collect()
}

fn param<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    device: &B::Device,
) -> Param<Tensor<B, D>> {
    let n = shape.iter().product();
    let scale = 1.0 / (shape[0].max(1) as f32).sqrt();
    Param::from_data(TensorData::new(draw(seed, n, scale), shape), device)
}

fn linear<B: Backend>(d_in: usize, d_out: usize, seed: u64, device: &B::Device) -> Linear<B> {
    let mut layer = empty_linear(d_in, d_out, device);
    layer.weight = param(seed, [d_in, d_out], device);
    layer.bias = Some(param(seed ^ 1, [d_out], device));
    layer
}

/// The weight and bias tensors of the layers named `layers`.
fn linear_names(layers: &[&str]) -> Vec<String> {
    layers.iter().flat_map(|layer| [format!("{layer}.weight"), format!("{layer}.bias")]).collect()
}

fn empty_linear<B: Backend>(d_in: usize, d_out: usize, device: &B::Device) -> Linear<B> {
    LinearConfig::new(d_in, d_out).with_initializer(Initializer::Zeros).init(device)
}

// ---- The MLP ------------------------------------------------------------------------------------

/// A two-layer perceptron.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    fc1: Linear<B>,
    act: Relu,
    fc2: Linear<B>,
}

/// The shape of an [`Mlp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpSpec {
    /// Inputs.
    pub d_in: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Outputs.
    pub d_out: usize,
}

impl MlpSpec {
    /// The MLP whose weights `seed` names.
    pub fn generate<B: Backend>(&self, seed: u64, device: &B::Device) -> Mlp<B> {
        Mlp {
            fc1: linear(self.d_in, self.hidden, seed, device),
            act: Relu::new(),
            fc2: linear(self.hidden, self.d_out, seed.wrapping_add(2), device),
        }
    }
}

/// A size as a declared dimension.
fn dim(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

/// The one tensor of `inputs`, of rank `rank` (resident checks the declaration before
/// `forward`; a direct caller gets an error, not a backend panic).
fn only(inputs: Vec<TensorData>, rank: usize) -> Result<TensorData, BoxError> {
    let mut inputs = inputs.into_iter();
    match (inputs.next(), inputs.next()) {
        (Some(data), None) if data.shape.len() == rank && data.dtype.is_float() => Ok(data),
        (Some(data), None) => {
            Err(format!("a {:?} tensor of shape {:?}, not of rank {rank}", data.dtype, data.shape).into())
        }
        _ => Err("not one input tensor".into()),
    }
}

impl Architecture for MlpSpec {
    type Module<B: Backend> = Mlp<B>;

    /// `input`, `FP32`, `[batch, d_in]`.
    fn inputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec::new("input", DataType::Fp32, [-1, dim(self.d_in)])]
    }

    /// `output`, `FP32`, `[batch, d_out]`.
    fn outputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec::new("output", DataType::Fp32, [-1, dim(self.d_out)])]
    }

    fn init<B: Backend>(&self, device: &B::Device) -> Mlp<B> {
        Mlp {
            fc1: empty_linear(self.d_in, self.hidden, device),
            act: Relu::new(),
            fc2: empty_linear(self.hidden, self.d_out, device),
        }
    }

    fn tensor_names(&self) -> Option<Vec<String>> {
        Some(linear_names(&["fc1", "fc2"]))
    }

    fn forward<B: Backend>(
        &self,
        module: &Mlp<B>,
        device: &B::Device,
        inputs: Vec<TensorData>,
    ) -> Result<Vec<TensorData>, BoxError> {
        let input = Tensor::<B, 2>::from_data(only(inputs, 2)?, device);
        let output = module.fc2.forward(module.act.forward(module.fc1.forward(input)));
        Ok(vec![output.try_into_data()?])
    }
}

// ---- The CNN ------------------------------------------------------------------------------------

/// A convolution, a global average pool and a linear head, on one-channel square images.
#[derive(Module, Debug)]
pub struct Cnn<B: Backend> {
    conv: Conv2d<B>,
    act: Relu,
    pool: AdaptiveAvgPool2d,
    head: Linear<B>,
}

/// The shape of a [`Cnn`]; inputs are one-channel `side × side` images, `[batch, 1, side,
/// side]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CnnSpec {
    /// Image side.
    pub side: usize,
    /// Convolution channels.
    pub channels: usize,
    /// Outputs.
    pub d_out: usize,
}

impl CnnSpec {
    fn conv<B: Backend>(&self, device: &B::Device) -> Conv2d<B> {
        Conv2dConfig::new([1, self.channels], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .with_initializer(Initializer::Zeros)
            .init(device)
    }

    /// The net whose weights `seed` names.
    pub fn generate<B: Backend>(&self, seed: u64, device: &B::Device) -> Cnn<B> {
        let mut conv = self.conv(device);
        conv.weight = param(seed, [self.channels, 1, 3, 3], device);
        conv.bias = Some(param(seed ^ 1, [self.channels], device));
        Cnn {
            conv,
            act: Relu::new(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: linear(self.channels, self.d_out, seed.wrapping_add(2), device),
        }
    }
}

impl Architecture for CnnSpec {
    type Module<B: Backend> = Cnn<B>;

    /// `input`, `FP32`, `[batch, 1, side, side]`: images, one channel.
    fn inputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec::new("input", DataType::Fp32, [-1, 1, dim(self.side), dim(self.side)])]
    }

    /// `output`, `FP32`, `[batch, d_out]`.
    fn outputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec::new("output", DataType::Fp32, [-1, dim(self.d_out)])]
    }

    fn init<B: Backend>(&self, device: &B::Device) -> Cnn<B> {
        Cnn {
            conv: self.conv(device),
            act: Relu::new(),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: empty_linear(self.channels, self.d_out, device),
        }
    }

    fn tensor_names(&self) -> Option<Vec<String>> {
        Some(linear_names(&["conv", "head"]))
    }

    fn forward<B: Backend>(
        &self,
        module: &Cnn<B>,
        device: &B::Device,
        inputs: Vec<TensorData>,
    ) -> Result<Vec<TensorData>, BoxError> {
        let images = Tensor::<B, 4>::from_data(only(inputs, 4)?, device);
        let [rows, ..] = images.dims();
        let features = module.pool.forward(module.act.forward(module.conv.forward(images)));
        let output = module.head.forward(features.reshape([rows, self.channels]));
        Ok(vec![output.try_into_data()?])
    }
}
