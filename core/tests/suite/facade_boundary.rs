//! `core` names concrete sync and time primitives only inside `src/runtime/`: everything else
//! goes through the `Runtime` facade, or the model checkers would not see it.

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    "std::sync::Mutex",
    "std::sync::RwLock",
    "std::sync::Condvar",
    "std::sync::atomic",
    "std::sync::{",
    "std::thread",
    "parking_lot",
    "Instant::now",
    "std::time::Instant",
    "std::time::{",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_sync_or_time_primitive_outside_the_runtime_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let runtime = src.join("runtime");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 5, "found only {} source files under {}", files.len(), src.display());
    let mut leaks = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&runtime)) {
        let text = std::fs::read_to_string(file).expect("readable source file");
        for (n, line) in text.lines().enumerate() {
            for pattern in FORBIDDEN.iter().filter(|p| line.contains(*p)) {
                leaks.push(format!("{}:{}: {pattern}", file.display(), n + 1));
            }
        }
    }
    assert!(leaks.is_empty(), "primitives named outside core/src/runtime/:\n{}", leaks.join("\n"));
}

#[test]
fn the_check_catches_a_leak() {
    let line = "use std::sync::Mutex;";
    assert!(FORBIDDEN.iter().any(|p| line.contains(p)));
}

/// The handles users move between threads are `Send + Sync` on the production runtime: no
/// checker-only state (a mutant flag, a `Cell`) hides in them.
mod send_sync {
    use resident::cache::{Admission, DeviceGuard, DeviceWeights, LoadedModel, ModelGuard};
    use resident::{BoxError, Lease, LifecycleGuard, Model};

    fn send_sync<T: Send + Sync>() {}

    struct M;

    impl Model for M {
        fn size_bytes(&self) -> u64 {
            0
        }

        fn unload(&self) -> Result<(), BoxError> {
            Ok(())
        }
    }

    struct W;

    impl DeviceWeights for W {
        type OnDevice = ();

        fn device_bytes(&self) -> u64 {
            0
        }

        fn to_device(&self, _device: &str) -> Result<(), BoxError> {
            Ok(())
        }
    }

    #[test]
    fn handles_are_send_and_sync_on_the_std_runtime() {
        send_sync::<Lease<M>>();
        send_sync::<LifecycleGuard<M>>();
        send_sync::<ModelGuard<W>>();
        send_sync::<LoadedModel<W>>();
        send_sync::<Admission<W>>();
        send_sync::<DeviceGuard<W>>();
    }
}
