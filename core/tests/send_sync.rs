//! The handles users move between threads are `Send + Sync` on the production runtime: no
//! checker-only state (a mutant flag, a `Cell`) hides in them.

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
