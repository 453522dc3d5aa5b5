//! Regenerates `fixtures/models/`: the fixture models (weights drawn from fixed seeds) as
//! SafeTensors files, and `expected.json` with a fixed input batch and each model's output on
//! it. Deterministic: running it again writes the same tensors and the same `expected.json`
//! (only the order of the metadata keys in a SafeTensors header may change: burn writes that map
//! in hash order).
//!
//! `cargo run --example make_fixtures [-- DIR]`

use std::path::PathBuf;

use burn::tensor::{Tensor, TensorData};
use resident::burn::zoo::{CnnSpec, MlpSpec};
use resident::burn::{Architecture, Cpu, FileLoader, save};
use resident::{Loader, ModelId};

/// One fixture model in `expected.json`.
#[derive(serde::Serialize)]
struct Expected {
    id: &'static str,
    kind: &'static str,
    /// The architecture's sizes: `[d_in, hidden, d_out]` or `[side, channels, d_out]`.
    sizes: [usize; 3],
    seed: u64,
    rows: usize,
    input: Vec<f32>,
    output: Vec<f32>,
}

fn input(width: usize, rows: usize) -> Vec<f32> {
    (0..width * rows).map(|i| ((i * 37 % 101) as f32 / 101.0) - 0.5).collect()
}

/// Saves the model `seed` names, loads it back through the loader, and records its outputs.
fn fixture<A: Architecture>(
    dir: &std::path::Path,
    (id, kind, sizes, seed): (&'static str, &'static str, [usize; 3], u64),
    arch: A,
    module: A::Module<Cpu>,
) -> Result<Expected, resident::BoxError> {
    let rows = 3;
    let input = input(arch.input_width(), rows);
    let batch = TensorData::new(input.clone(), [rows, arch.input_width()]);
    let direct = arch.forward(&module, Tensor::<Cpu, 2>::from_data(batch, &Default::default()));
    let direct = direct.into_data().to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    save(&module, &dir.join(format!("{id}.safetensors")))?;
    // The stored outputs are the generated module's; the file, loaded back, must give them too.
    let model = FileLoader::new(arch, dir).load(&ModelId::new(id)?)?;
    let output = model.infer(&input)?;
    if output != direct {
        return Err(format!("{id}: the saved and reloaded model differs from the generated one").into());
    }
    Ok(Expected { id, kind, sizes, seed, rows, input, output })
}

fn main() -> Result<(), resident::BoxError> {
    let dir = std::env::args().nth(1).map_or_else(|| PathBuf::from("fixtures/models"), PathBuf::from);
    std::fs::create_dir_all(&dir)?;
    let device = Default::default();
    let mlp = MlpSpec { d_in: 16, hidden: 32, d_out: 4 };
    let cnn = CnnSpec { side: 8, channels: 6, d_out: 3 };
    let expected = vec![
        fixture(&dir, ("mlp", "mlp", [16, 32, 4], 11), mlp, mlp.generate::<Cpu>(11, &device))?,
        fixture(&dir, ("cnn", "cnn", [8, 6, 3], 23), cnn, cnn.generate::<Cpu>(23, &device))?,
    ];
    let json = serde_json::to_string_pretty(&serde_json::json!({ "models": expected }))?;
    std::fs::write(dir.join("expected.json"), json + "\n")?;
    println!("wrote {} models and expected.json to {}", expected.len(), dir.display());
    Ok(())
}
