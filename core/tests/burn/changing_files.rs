//! Model files that change under a loader: a truncated file, a file rewritten between two
//! loads, and a file rewritten again and again while it loads. Each load is a typed error or
//! the file's content as it is then — never weights of an older version, never a signal (the
//! loader reads files into memory; a mapped file that shrinks kills the process with SIGBUS).
#![cfg(feature = "burn")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use resident::burn::zoo::MlpSpec;
use resident::burn::{
    Architecture, BurnError, Cpu, FileIdentity, FileLoader, SharedLoader, SharedWeights, save,
};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{CacheError, Manager, ManagerError, ManagerExt, ModelManager};

const SPEC: MlpSpec = MlpSpec { d_in: 4, hidden: 8, d_out: 2 };
const INPUT: &[f32] = &[0.5, -1.0, 2.0, 0.25];

/// A scratch directory of its own per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("resident-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The bytes of version `seed` of the model file, and its output on [`INPUT`].
fn version(dir: &Path, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let staging = dir.join(format!("staging-{seed}.safetensors"));
    save(&SPEC.generate::<Cpu>(seed, &Default::default()), &staging).expect("save a version");
    let manager = ModelManager::new(FileLoader::new(SPEC, dir));
    let id = format!("staging-{seed}");
    manager.add_model(&id, None).expect("the version loads");
    let output = manager.infer(&id, |m| m.infer(INPUT)).expect("registered").expect("forward");
    (std::fs::read(&staging).expect("read the version back"), output)
}

/// Rewrites `<dir>/m.safetensors` in place, as `cp` over it does: truncate, then write. Each
/// rewrite gets a modification time of its own, as rewrites further apart than the file
/// system's clock tick do (two within one tick look alike: see `FileIdentity`).
fn rewrite(dir: &Path, bytes: &[u8]) {
    static REWRITES: AtomicU64 = AtomicU64::new(0);
    let path = dir.join("m.safetensors");
    std::fs::write(&path, bytes).expect("rewrite the model file in place");
    let n = REWRITES.fetch_add(1, Ordering::Relaxed);
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + n);
    let file = std::fs::File::options().write(true).open(&path).expect("open the model file");
    // A file truncated under the writer may be gone or short: only the time matters here.
    let _ = file.set_modified(time);
}

fn load_error(manager: &impl Manager, id: &str) -> BurnError {
    let error = manager.add_model(id, None).expect_err("the load must fail");
    let ManagerError::Load { source, .. } = error else { panic!("not a load error: {error:?}") };
    source.downcast_ref::<BurnError>().cloned().unwrap_or_else(|| panic!("not a BurnError: {source:?}"))
}

#[test]
fn a_file_truncated_below_its_header_is_a_typed_error_for_both_loaders() {
    let dir = scratch("truncated");
    let (bytes, _) = version(&dir, 1);
    // Cut inside the tensor data: the header still declares all of it.
    rewrite(&dir, &bytes[..bytes.len() - 16]);
    let direct = ModelManager::new(FileLoader::new(SPEC, &dir));
    assert!(matches!(load_error(&direct, "m"), BurnError::Corrupt { .. }), "through FileLoader");
    let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).expect("a group");
    let shared =
        ModelManager::new(SharedLoader::new(Arc::new(SPEC), &dir, &group, "cpu:0").expect("a loader"));
    assert!(matches!(load_error(&shared, "m"), BurnError::Corrupt { .. }), "through SharedLoader");
    assert!(direct.is_empty() && shared.is_empty(), "a failed load registers nothing");
    assert_eq!(group.budget().in_use() + group.budget().reserved(), 0, "nothing stays counted");
    // Cut inside the header itself.
    rewrite(&dir, &bytes[..12]);
    assert!(matches!(load_error(&shared, "m"), BurnError::Corrupt { .. }), "a cut header");
    std::fs::remove_dir_all(&dir).expect("scratch removed");
}

#[test]
fn a_file_rewritten_between_loads_is_read_again_by_a_replace_and_after_a_remove() {
    let dir = scratch("rewritten");
    let (first, first_out) = version(&dir, 1);
    let (second, second_out) = version(&dir, 2);
    let (third, third_out) = version(&dir, 3);
    assert_eq!(first.len(), second.len(), "versions of one layout have one length");
    assert_ne!(first_out, second_out);
    rewrite(&dir, &first);
    let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).expect("a group");
    let loader = |device| SharedLoader::new(Arc::new(SPEC), &dir, &group, device).expect("a loader");
    let (cpu0, cpu1) = (ModelManager::new(loader("cpu:0")), ModelManager::new(loader("cpu:1")));
    let served = |manager: &ModelManager<SharedLoader<MlpSpec>>| {
        manager.infer("m", |m| m.infer(INPUT)).expect("registered").expect("forward")
    };
    let before = FileIdentity::of_path(&dir.join("m.safetensors")).expect("the file is there");
    cpu0.add_model("m", None).expect("loads");
    cpu1.add_model("m", None).expect("adopts");
    assert_eq!(served(&cpu0), first_out);
    // The same length and header, other tensors: only the modification time tells.
    rewrite(&dir, &second);
    let after = FileIdentity::of_path(&dir.join("m.safetensors")).expect("the file is there");
    assert_eq!(before.len, after.len, "one length");
    assert_ne!(before, after, "a rewrite in place changes the file's identity");
    cpu0.replace("m", None).expect("replaces");
    assert_eq!(served(&cpu0), second_out, "a replace reads the rewritten file");
    assert_eq!(served(&cpu1), first_out, "device 1's registered model serves on until replaced");
    // Removed, its record may stay cached: a later add still reads the file as it is.
    rewrite(&dir, &third);
    cpu1.remove("m").expect("removes");
    cpu1.add_model("m", None).expect("loads again");
    assert_eq!(served(&cpu1), third_out, "an add after a rewrite reads the new file");
    cpu0.shutdown();
    cpu1.shutdown();
    group.shutdown();
    assert_eq!(group.budget().in_use(), 0, "nothing stays counted");
    std::fs::remove_dir_all(&dir).expect("scratch removed");
}

#[test]
fn a_file_rewritten_while_it_loads_is_a_typed_error_or_a_whole_version() {
    let dir = scratch("rewriting");
    let versions: Vec<(Vec<u8>, Vec<f32>)> = (1..=2).map(|seed| version(&dir, seed)).collect();
    let (first, _) = &versions[0];
    rewrite(&dir, first);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The writer rewrites the file in place (truncating first, as `cp` does), cutting it
        // short now and then, until the loads are done; bounded in count too.
        s.spawn(|| {
            for round in 0..20_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (bytes, _) = &versions[round % 2];
                let cut = if round % 7 == 3 { bytes.len() / 2 } else { bytes.len() };
                rewrite(&dir, &bytes[..cut]);
            }
        });
        let outputs: Vec<&Vec<f32>> = versions.iter().map(|(_, output)| output).collect();
        let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).expect("a group");
        let direct = ModelManager::new(FileLoader::new(SPEC, &dir));
        let shared =
            ModelManager::new(SharedLoader::new(Arc::new(SPEC), &dir, &group, "cpu:0").expect("a loader"));
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..60 {
            for manager in [&direct as &dyn Probe, &shared as &dyn Probe] {
                match manager.load_and_infer() {
                    Ok(output) => {
                        assert!(outputs.contains(&&output), "a load served neither version: {output:?}");
                        loaded += 1;
                    }
                    Err(why) => {
                        assert!(changed_under_the_load(&why), "an unexpected error: {why:?}");
                        refused += 1;
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(loaded + refused, 120);
        println!("{loaded} loads served a whole version, {refused} were refused typed");
    });
    std::fs::remove_dir_all(&dir).expect("scratch removed");
}

/// Whether a load's error is one a file changing under it may cause: a typed error of the
/// file's (from the loader itself, or from the cache it went through), or a source that kept
/// changing.
fn changed_under_the_load(error: &ManagerError) -> bool {
    let ManagerError::Load { source, .. } = error else { return false };
    let file = |e: &BurnError| {
        matches!(
            e,
            BurnError::Corrupt { .. }
                | BurnError::Changed { .. }
                | BurnError::Mismatch { .. }
                | BurnError::NotFound { .. }
        )
    };
    match (source.downcast_ref::<BurnError>(), source.downcast_ref::<CacheError>()) {
        (Some(burn), _) => file(burn),
        (_, Some(CacheError::Load { source, .. })) => source.downcast_ref::<BurnError>().is_some_and(file),
        (_, Some(CacheError::SourceChanged { .. })) => true,
        _ => false,
    }
}

/// One add, infer and remove of `m` through a manager: its output, or the add's error.
trait Probe {
    fn load_and_infer(&self) -> Result<Vec<f32>, ManagerError>;
}

impl<L: resident::Loader> Probe for ModelManager<L>
where
    L::Model: Infer,
{
    fn load_and_infer(&self) -> Result<Vec<f32>, ManagerError> {
        self.add_model("m", None)?;
        let output = self.infer("m", |m| m.run(INPUT)).expect("registered").expect("forward");
        self.remove("m").expect("removes");
        Ok(output)
    }
}

/// A model that runs rows of input.
trait Infer {
    fn run(&self, input: &[f32]) -> Result<Vec<f32>, BurnError>;
}

impl Infer for resident::burn::BurnModel<MlpSpec> {
    fn run(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        self.infer(input)
    }
}

impl Infer for resident::burn::Served<MlpSpec> {
    fn run(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        self.infer(input)
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// `FileIdentity::of_path` over any sequence of rewrites: read twice with no write between,
    /// it is the same; a rewrite to another length changes it; a missing file is a typed error.
    #[test]
    fn a_file_identity_follows_rewrites(lengths in proptest::collection::vec(0usize..64, 1..6)) {
        let dir = scratch("identity");
        let path = dir.join("f.bin");
        let mut last: Option<FileIdentity> = None;
        for len in lengths {
            std::fs::write(&path, vec![7u8; len]).expect("rewrite the file in place");
            let now = FileIdentity::of_path(&path).expect("the file is there");
            proptest::prop_assert_eq!(now, FileIdentity::of_path(&path).expect("still there"));
            proptest::prop_assert_eq!(now.len, len as u64);
            if let Some(before) = last.filter(|b| b.len != now.len) {
                proptest::prop_assert_ne!(before, now);
            }
            last = Some(now);
        }
        std::fs::remove_file(&path).expect("removable");
        let missing = FileIdentity::of_path(&path);
        proptest::prop_assert!(matches!(missing, Err(BurnError::NotFound { .. })), "{:?}", missing);
    }
}

/// A valid model file's bytes (version 1 of [`SPEC`]), made once.
fn valid_file() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = scratch("valid-file");
        let bytes = version(&dir, 1).0;
        std::fs::remove_dir_all(&dir).expect("scratch removed");
        bytes
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Any model file — a valid one with bytes overwritten (its header's length, its JSON, its
    /// data), cut short, or extended — loads as the model it still is or fails with a typed
    /// error through both loaders: never a panic, and no byte stays counted.
    #[test]
    fn any_model_file_is_a_model_or_a_typed_error(
        edits in proptest::collection::vec((0usize..512, proptest::num::u8::ANY), 0..6),
        cut in proptest::option::of(0usize..600),
        tail in proptest::collection::vec(proptest::num::u8::ANY, 0..8),
    ) {
        let mut bytes = valid_file().to_vec();
        for (at, byte) in edits {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.min(bytes.len()));
        }
        bytes.extend_from_slice(&tail);
        let dir = scratch("fuzzed");
        rewrite(&dir, &bytes);
        let group = CacheGroup::<SharedWeights<MlpSpec, Cpu>>::new(1 << 20).expect("a group");
        let shared = ModelManager::new(SharedLoader::new(Arc::new(SPEC), &dir, &group, "cpu:0").expect("a loader"));
        let direct = ModelManager::new(FileLoader::new(SPEC, &dir));
        for outcome in [direct.add_model("m", None), shared.add_model("m", None)] {
            if let Err(error) = outcome {
                let ManagerError::Load { source, .. } = &error else {
                    return Err(proptest::test_runner::TestCaseError::fail(format!("not a load error: {error:?}")));
                };
                let typed = source.downcast_ref::<BurnError>().is_some() || source.downcast_ref::<CacheError>().is_some();
                proptest::prop_assert!(typed, "not the loaders' typed error: {:?}", source);
            }
        }
        // A model that loaded serves the architecture it was loaded with, whichever loader.
        if let Ok(declared) = direct.infer("m", |m| m.architecture().inputs()) {
            proptest::prop_assert_eq!(declared, SPEC.inputs());
        }
        if let Ok(declared) = shared.infer("m", |m| m.architecture().outputs()) {
            proptest::prop_assert_eq!(declared, SPEC.outputs());
        }
        drop((direct, shared));
        group.shutdown();
        proptest::prop_assert_eq!(group.budget().in_use() + group.budget().reserved(), 0);
        std::fs::remove_dir_all(&dir).expect("scratch removed");
    }
}
