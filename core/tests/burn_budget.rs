//! A shared loader refuses a model file that cannot fit its group's RAM budget before it reads
//! the file: no module and no tensor is built, which a counting global allocator shows (a refused
//! load allocates under 64 KiB, the model itself is ~19 KiB and the file is read whole by a load).
//! One test in this binary, so that no other test's allocations are counted.
#![cfg(feature = "burn")]

use std::alloc::System;
use std::path::PathBuf;

use resident::burn::zoo::MlpSpec;
use resident::burn::{BurnError, Cpu, SharedLoader, SharedWeights};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{Loader, ModelId};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models")
}

fn burn_error(error: resident::BoxError) -> BurnError {
    error.downcast_ref::<BurnError>().cloned().unwrap_or_else(|| panic!("not a BurnError: {error}"))
}

#[test]
fn a_file_larger_than_the_budget_is_refused_before_it_is_read() {
    let dir = models_dir();
    let len = std::fs::metadata(dir.join("mlp.safetensors")).expect("fixture").len();
    let arch = Arc::new(MlpSpec { d_in: 16, hidden: 32, d_out: 4 });
    let group: Arc<CacheGroup<SharedWeights<MlpSpec, Cpu>>> = CacheGroup::new(len / 2).expect("cap");
    let loader = SharedLoader::new(Arc::clone(&arch), &dir, &group, "cpu:0").expect("cpu device");
    let id = ModelId::new("mlp").expect("id");

    let region = Region::new(GLOBAL);
    let refused = loader.load(&id).map(drop);
    let allocated = region.change().bytes_allocated;
    let error = burn_error(refused.expect_err("over the budget"));
    assert!(
        matches!(error, BurnError::TooLarge { bytes, cap, .. } if bytes == len && cap == len / 2),
        "{error}"
    );
    assert!(allocated < 64 * 1024, "a refused load allocated {allocated} bytes");

    // A garbage file of the same size is refused for its size too (not parsed: not Corrupt).
    let tmp = std::env::temp_dir().join(format!("resident-budget-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    std::fs::write(tmp.join("junk.safetensors"), vec![0xAB; len as usize]).expect("write");
    let junk = SharedLoader::new(arch, &tmp, &group, "cpu:0").expect("cpu device");
    let error = burn_error(junk.load(&ModelId::new("junk").expect("id")).map(drop).expect_err("junk"));
    assert!(matches!(error, BurnError::TooLarge { .. }), "{error}");
    let _ = std::fs::remove_dir_all(tmp);
}
