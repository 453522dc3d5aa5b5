//! The fixture burn models, loaded from their files through the manager and the shared-weight
//! cache, give the stored outputs; bad files, ids and inputs give typed errors.
#![cfg(feature = "burn")]

use std::path::{Path, PathBuf};

use resident::burn::zoo::{CnnSpec, MlpSpec};
use resident::burn::{Architecture, BurnError, Cpu, FileLoader, SharedLoader, SharedWeights, copy_to};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{FixedSizeCache, FixedSizeConfig, Loader, ManagerError, ManagerExt, ModelManager};

#[derive(serde::Deserialize)]
struct Expected {
    id: String,
    kind: String,
    sizes: [usize; 3],
    input: Vec<f32>,
    output: Vec<f32>,
}

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models")
}

fn expected() -> Vec<Expected> {
    #[derive(serde::Deserialize)]
    struct File {
        models: Vec<Expected>,
    }
    let text =
        std::fs::read_to_string(models_dir().join("expected.json")).expect("fixtures/models/expected.json");
    serde_json::from_str::<File>(&text).expect("valid expected.json").models
}

fn fixture(kind: &str) -> Expected {
    expected().into_iter().find(|e| e.kind == kind).expect("fixture of that kind")
}

fn mlp_spec(e: &Expected) -> MlpSpec {
    MlpSpec { d_in: e.sizes[0], hidden: e.sizes[1], d_out: e.sizes[2] }
}

fn cnn_spec(e: &Expected) -> CnnSpec {
    CnnSpec { side: e.sizes[0], channels: e.sizes[1], d_out: e.sizes[2] }
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{what}[{i}]: got {g}, stored {w}");
    }
}

/// Loads the fixture through a manager and checks its output on the stored input.
fn check_through_manager<A: Architecture>(arch: A, e: &Expected) {
    let manager = ModelManager::new(FileLoader::new(arch, &models_dir()));
    manager.add_model(&e.id, None).expect("fixture loads");
    let output = manager.infer(&e.id, |model| model.infer(&e.input)).expect("resident").expect("forward");
    assert_close(&output, &e.output, &e.id);
    let stats = manager.infer(&e.id, |model| model.stats()).unwrap();
    let file = std::fs::metadata(models_dir().join(format!("{}.safetensors", e.id))).unwrap().len();
    assert_eq!(stats.peak_bytes, stats.bytes + file, "the load peaks at the tensors plus the mapped file");
}

#[test]
fn every_fixture_loads_through_the_manager_and_gives_its_stored_output() {
    let all = expected();
    assert_eq!(all.len(), 2);
    for e in &all {
        match e.kind.as_str() {
            "mlp" => check_through_manager(mlp_spec(e), e),
            "cnn" => check_through_manager(cnn_spec(e), e),
            other => panic!("unknown fixture kind {other}"),
        }
    }
}

#[test]
fn byte_sizes_are_the_tensors_own() {
    let e = fixture("mlp");
    let spec = mlp_spec(&e);
    let manager = ModelManager::new(FileLoader::new(spec, &models_dir()));
    manager.add_model("mlp", None).unwrap();
    let params = spec.d_in * spec.hidden + spec.hidden + spec.hidden * spec.d_out + spec.d_out;
    let size = manager.infer("mlp", resident::Model::size_bytes).unwrap();
    assert_eq!(size, (params * 4) as u64, "f32 parameters, 4 bytes each");
}

fn load_error<A: Architecture>(arch: A, dir: &Path, id: &str) -> BurnError {
    let manager = ModelManager::new(FileLoader::new(arch, dir));
    let err = manager.add_model(id, None).expect_err("the load must fail");
    assert!(manager.is_empty(), "a failed load registers nothing");
    let ManagerError::Load { source, .. } = err else { panic!("not a load error: {err:?}") };
    source.downcast_ref::<BurnError>().cloned().unwrap_or_else(|| panic!("not a BurnError: {source:?}"))
}

/// A SafeTensors file with the MLP's tensor names and shapes, every tensor of `dtype` (zeros).
fn mlp_file_of_dtype(path: &Path, spec: MlpSpec, dtype: &str, width: usize) {
    let tensors = [
        ("fc1.bias", vec![spec.hidden]),
        ("fc1.weight", vec![spec.d_in, spec.hidden]),
        ("fc2.bias", vec![spec.d_out]),
        ("fc2.weight", vec![spec.hidden, spec.d_out]),
    ];
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (name, shape) in &tensors {
        let len = shape.iter().product::<usize>() * width;
        header.insert(
            (*name).to_owned(),
            serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len] }),
        );
        offset += len;
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header);
    bytes.resize(bytes.len() + offset, 0);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn bad_files_and_ids_are_typed_errors_and_register_nothing() {
    let e = fixture("mlp");
    let scratch = std::env::temp_dir().join(format!("resident-burn-errors-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("garbage.safetensors"), b"\x10\0\0\0\0\0\0\0not a header at all").unwrap();
    let mlp = std::fs::read(models_dir().join("mlp.safetensors")).unwrap();
    std::fs::write(scratch.join("truncated.safetensors"), &mlp[..mlp.len() / 2]).unwrap();

    // burn-store alone would panic (f16 on ndarray) or load f64 to fail later in forward.
    mlp_file_of_dtype(&scratch.join("half.safetensors"), mlp_spec(&e), "F16", 2);
    mlp_file_of_dtype(&scratch.join("double.safetensors"), mlp_spec(&e), "F64", 8);
    mlp_file_of_dtype(&scratch.join("float.safetensors"), mlp_spec(&e), "F32", 4);
    for id in ["half", "double"] {
        let err = load_error(mlp_spec(&e), &scratch, id);
        assert!(
            matches!(&err, BurnError::Mismatch { message, .. } if message.contains("dtype")),
            "{id}: {err:?}"
        );
    }
    let manager = ModelManager::new(FileLoader::new(mlp_spec(&e), &scratch));
    manager.add_model("float", None).expect("the same layout in f32 loads");

    assert!(matches!(load_error(mlp_spec(&e), &scratch, "absent"), BurnError::NotFound { .. }));
    assert!(matches!(load_error(mlp_spec(&e), &scratch, "garbage"), BurnError::Corrupt { .. }));
    assert!(matches!(load_error(mlp_spec(&e), &scratch, "truncated"), BurnError::Corrupt { .. }));
    let wider = MlpSpec { hidden: mlp_spec(&e).hidden + 1, ..mlp_spec(&e) };
    assert!(matches!(load_error(wider, &models_dir(), "mlp"), BurnError::Mismatch { .. }));
    let other = cnn_spec(&fixture("cnn"));
    assert!(matches!(load_error(other, &models_dir(), "mlp"), BurnError::Mismatch { .. }));
    assert!(matches!(load_error(mlp_spec(&e), &models_dir(), "nested/mlp"), BurnError::BadId { .. }));
    std::fs::remove_dir_all(&scratch).unwrap();
}

#[test]
fn input_that_is_not_whole_rows_is_a_typed_error() {
    let e = fixture("cnn");
    let manager = ModelManager::new(FileLoader::new(cnn_spec(&e), &models_dir()));
    manager.add_model("cnn", None).unwrap();
    let err = manager.infer("cnn", |m| m.infer(&e.input[..e.input.len() - 1])).unwrap().unwrap_err();
    assert!(matches!(err, BurnError::Input { .. }), "{err:?}");
}

#[test]
fn named_tensors_run_as_declared_and_anything_else_is_a_typed_error() {
    use burn::tensor::TensorData;
    let e = fixture("cnn");
    let spec = cnn_spec(&e);
    let declared = spec.inputs();
    assert_eq!(declared.len(), 1);
    assert_eq!(declared[0].shape, [-1, 1, spec.side as i64, spec.side as i64], "images, [N, C, H, W]");
    assert_eq!(declared[0].datatype, resident::burn::DataType::Fp32);
    let manager = ModelManager::new(FileLoader::new(spec, &models_dir()));
    manager.add_model("cnn", None).unwrap();
    let rows = e.input.len() / (spec.side * spec.side);
    let images = TensorData::new(e.input.clone(), [rows, 1, spec.side, spec.side]);
    let outputs = manager.infer("cnn", |m| m.run(vec![images])).unwrap().expect("forward");
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].shape.to_vec(), [rows, spec.d_out]);
    assert_close(&outputs[0].to_vec::<f32>().unwrap(), &e.output, "named");
    let wrong = [
        vec![TensorData::new(e.input.clone(), [rows, spec.side * spec.side])],
        vec![TensorData::new(vec![1_i64; rows * spec.side * spec.side], [rows, 1, spec.side, spec.side])],
        vec![],
    ];
    for inputs in wrong {
        let err = manager.infer("cnn", |m| m.run(inputs)).unwrap().unwrap_err();
        assert!(matches!(err, BurnError::Tensor { .. }), "{err:?}");
    }
}

#[test]
fn a_real_tensor_copy_gives_the_same_outputs() {
    let e = fixture("cnn");
    let spec = cnn_spec(&e);
    let (cpu, _) = resident::burn::load(&spec, &models_dir().join("cnn.safetensors")).unwrap();
    let copy = copy_to::<CnnSpec, Cpu>(&spec, &cpu, &Default::default(), "cpu").unwrap();
    // The CNN's natural input: images, [batch, 1, side, side].
    let side = spec.side;
    let rows = e.input.len() / (side * side);
    let images = burn::tensor::TensorData::new(e.input.clone(), [rows, 1, side, side]);
    let mut outputs = spec.forward(&copy, &Default::default(), vec![images]).expect("forward");
    let output = outputs.remove(0).to_vec::<f32>().unwrap();
    assert_close(&output, &e.output, "copy");
}

#[test]
fn two_device_caches_share_one_copy_of_the_cpu_weights() {
    let e = fixture("mlp");
    let spec = Arc::new(mlp_spec(&e));
    let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).unwrap();
    let device = |name: &str| {
        let loader = SharedLoader::new(Arc::clone(&spec), &models_dir(), &group, name).unwrap();
        FixedSizeCache::new(ModelManager::new(loader), FixedSizeConfig::new(1)).unwrap()
    };
    let (gpu0, gpu1) = (device("cpu:0"), device("cpu:1"));
    gpu0.add_model("mlp", None).unwrap();
    gpu1.add_model("mlp", None).unwrap();
    let bytes = gpu0.infer("mlp", resident::Model::size_bytes).unwrap();
    assert_eq!(group.budget().in_use(), bytes, "one canonical, counted once");
    assert_eq!(group.store().live_keys(), ["mlp"]);
    for cache in [&gpu0, &gpu1] {
        let output = cache.infer("mlp", |m| m.infer(&e.input)).unwrap().unwrap();
        assert_close(&output, &e.output, "served");
        let declared = cache.infer("mlp", |m| (m.architecture().inputs(), m.architecture().outputs()));
        assert_eq!(declared.unwrap(), (spec.inputs(), spec.outputs()), "the architecture served");
    }
    let shared =
        gpu0.infer("mlp", |a| gpu1.infer("mlp", |b| a.guard().cpu().shares_weights_with(b.guard().cpu())));
    assert!(shared.unwrap().unwrap(), "both devices lock records over one canonical");
    gpu0.remove("mlp").unwrap();
    gpu1.remove("mlp").unwrap();
    assert_eq!(group.budget().in_use(), bytes, "unloaded from the devices, still resident on the CPU");
}

#[test]
fn a_device_the_backend_cannot_serve_is_refused_up_front() {
    let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).unwrap();
    let spec = Arc::new(mlp_spec(&fixture("mlp")));
    let err = SharedLoader::new(spec, &models_dir(), &group, "cuda:0").unwrap_err();
    assert!(matches!(err, BurnError::UnknownDevice { .. }), "{err:?}");
}

/// The inputs `expected.json` stores for a model of `width` inputs: `rows` fixed rows.
fn fixed_input(width: usize, rows: usize) -> Vec<f32> {
    (0..width * rows).map(|i| ((i * 37 % 101) as f32 / 101.0) - 0.5).collect()
}

/// One fixture model regenerated from its seed into `dir`: its entry of `expected.json`, after
/// checking that the saved file, loaded back through the loader, gives the generated module's
/// own outputs.
fn regenerate<A: Architecture>(
    dir: &Path,
    (id, kind, sizes, seed): (&str, &str, [usize; 3], u64),
    arch: A,
    module: A::Module<Cpu>,
) -> serde_json::Value {
    let rows = 3;
    let declared = arch.inputs().remove(0);
    let width = declared.row_width().expect("fixed rows");
    let input = fixed_input(width, rows);
    let mut shape = vec![rows];
    shape.extend(declared.shape[1..].iter().map(|&d| usize::try_from(d).expect("a fixed size")));
    let batch = burn::tensor::TensorData::new(input.clone(), shape);
    let mut direct = arch.forward(&module, &Default::default(), vec![batch]).expect("forward");
    let direct = direct.remove(0).to_vec::<f32>().expect("f32 outputs");
    resident::burn::save(&module, &dir.join(format!("{id}.safetensors"))).expect("saved");
    let model = FileLoader::new(arch, dir).load(&resident::ModelId::new(id).expect("id")).expect("reloads");
    let output = model.infer(&input).expect("forward");
    assert_eq!(output, direct, "{id}: the saved and reloaded model differs from the generated one");
    serde_json::json!({ "id": id, "kind": kind, "sizes": sizes, "seed": seed, "rows": rows,
                        "input": input, "output": output })
}

/// The fixture models regenerate from their seeds to the stored inputs and outputs. With
/// `RESIDENT_WRITE_FIXTURES=DIR` the regenerated files and `expected.json` are written to `DIR`
/// (`just models` rewrites `fixtures/models/` this way); otherwise to a scratch folder.
#[test]
fn the_fixture_models_regenerate_from_their_seeds() {
    let scratch = std::env::temp_dir().join(format!("resident-fixtures-{}", std::process::id()));
    let dir = std::env::var_os("RESIDENT_WRITE_FIXTURES").map_or_else(|| scratch.clone(), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("fixture folder");
    let device = Default::default();
    let mlp = MlpSpec { d_in: 16, hidden: 32, d_out: 4 };
    let cnn = CnnSpec { side: 8, channels: 6, d_out: 3 };
    let models = vec![
        regenerate(&dir, ("mlp", "mlp", [16, 32, 4], 11), mlp, mlp.generate::<Cpu>(11, &device)),
        regenerate(&dir, ("cnn", "cnn", [8, 6, 3], 23), cnn, cnn.generate::<Cpu>(23, &device)),
    ];
    if dir == scratch {
        for stored in expected() {
            let fresh = models.iter().find(|m| m["id"] == stored.id.as_str()).expect("regenerated");
            let floats =
                |key: &str| -> Vec<f32> { serde_json::from_value(fresh[key].clone()).expect("floats") };
            assert_eq!(floats("input"), stored.input, "{}: the stored input", stored.id);
            assert_close(&floats("output"), &stored.output, &format!("{} regenerated", stored.id));
        }
        std::fs::remove_dir_all(&scratch).expect("scratch removed");
    } else {
        let json = serde_json::to_string_pretty(&serde_json::json!({ "models": models })).expect("json");
        std::fs::write(dir.join("expected.json"), json + "\n").expect("expected.json written");
    }
}

/// Writes a SafeTensors file of zero-filled F32 tensors named and shaped as `tensors`.
fn write_safetensors(path: &Path, tensors: &[(&str, &[usize])]) {
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<usize>() * 4;
        header.insert(
            (*name).to_owned(),
            serde_json::json!({ "dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes] }),
        );
        offset += bytes;
    }
    let header = serde_json::to_vec(&serde_json::Value::Object(header)).expect("a header");
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header);
    file.resize(file.len() + offset, 0);
    std::fs::write(path, file).expect("write the model file");
}

#[test]
fn a_shared_loader_declares_the_architectures_tensors_not_the_whole_file() {
    let spec = Arc::new(mlp_spec(&fixture("mlp")));
    let (d_in, hidden, d_out) = (spec.d_in, spec.hidden, spec.d_out);
    let dir = std::env::temp_dir().join(format!("resident-declared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let extra = 10_000;
    write_safetensors(
        &dir.join("extra.safetensors"),
        &[
            ("fc1.weight", &[d_in, hidden]),
            ("fc1.bias", &[hidden]),
            ("fc2.weight", &[hidden, d_out]),
            ("fc2.bias", &[d_out]),
            ("optimizer.momentum", &[extra]),
        ],
    );
    let module_bytes = ((d_in * hidden + hidden + hidden * d_out + d_out) * 4) as u64;
    let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).unwrap();
    let loader = SharedLoader::new(Arc::clone(&spec), &dir, &group, "cpu:0").unwrap();
    let id = resident::ModelId::new("extra").unwrap();
    assert_eq!(
        loader.declared_bytes(&id).unwrap(),
        Some(module_bytes),
        "the optimizer state is not declared"
    );
    let served = loader.load(&id).expect("the module's tensors load; the extra one is ignored");
    assert_eq!(group.budget().in_use(), module_bytes, "charged as declared");
    drop(served);
    let _ = std::fs::remove_dir_all(dir);
}

/// An MLP whose declared outputs are whatever the test says: a model that breaks its own
/// declaration.
struct Redeclared {
    inner: MlpSpec,
    outputs: Vec<resident::burn::TensorSpec>,
}

impl Architecture for Redeclared {
    type Module<B: burn::tensor::backend::Backend> = resident::burn::zoo::Mlp<B>;

    fn inputs(&self) -> Vec<resident::burn::TensorSpec> {
        self.inner.inputs()
    }

    fn outputs(&self) -> Vec<resident::burn::TensorSpec> {
        self.outputs.clone()
    }

    fn init<B: burn::tensor::backend::Backend>(&self, device: &B::Device) -> Self::Module<B> {
        self.inner.init(device)
    }

    fn forward<B: burn::tensor::backend::Backend>(
        &self,
        module: &Self::Module<B>,
        device: &B::Device,
        inputs: Vec<burn::tensor::TensorData>,
    ) -> Result<Vec<burn::tensor::TensorData>, resident::BoxError> {
        self.inner.forward(module, device, inputs)
    }
}

#[test]
fn an_output_that_breaks_its_declaration_is_the_models_typed_error() {
    use resident::burn::{DataType, TensorSpec};
    let e = fixture("mlp");
    let inner = mlp_spec(&e);
    let rows = e.input.len() / inner.d_in;
    let d_out = i64::try_from(inner.d_out).unwrap();
    let declarations = [
        vec![TensorSpec::new("output", DataType::Int64, [-1, d_out])],
        vec![TensorSpec::new("output", DataType::Fp32, [-1, d_out + 1])],
        vec![
            TensorSpec::new("output", DataType::Fp32, [-1, d_out]),
            TensorSpec::new("more", DataType::Fp32, [-1]),
        ],
    ];
    for outputs in declarations {
        let arch = Redeclared { inner, outputs: outputs.clone() };
        let model =
            FileLoader::new(arch, &models_dir()).load(&resident::ModelId::new("mlp").unwrap()).unwrap();
        let input = burn::tensor::TensorData::new(e.input.clone(), [rows, inner.d_in]);
        let err = model.run(vec![input]).unwrap_err();
        assert!(matches!(err, BurnError::Forward { .. }), "{outputs:?}: {err:?}");
    }
    // Zero rows are refused before the backend sees them (ndarray's matmul divides by them).
    let arch = Redeclared { inner, outputs: inner.outputs() };
    let model = FileLoader::new(arch, &models_dir()).load(&resident::ModelId::new("mlp").unwrap()).unwrap();
    let empty = burn::tensor::TensorData::new(Vec::<f32>::new(), [0, inner.d_in]);
    assert!(matches!(model.run(vec![empty]), Err(BurnError::Tensor { .. })));
    let cnn = cnn_spec(&fixture("cnn"));
    let manager = ModelManager::new(FileLoader::new(cnn, &models_dir()));
    manager.add_model("cnn", None).unwrap();
    let empty = burn::tensor::TensorData::new(Vec::<f32>::new(), [0, 1, cnn.side, cnn.side]);
    let refused = manager.infer("cnn", |m| m.run(vec![empty])).unwrap();
    assert!(matches!(refused, Err(BurnError::Tensor { .. })), "{refused:?}");
}
