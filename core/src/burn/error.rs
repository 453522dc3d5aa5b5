//! [`BurnError`]: every way loading, placing or running a burn model fails.

use std::path::PathBuf;

use crate::error::SourceError;

/// A typed error from the burn adapter; nothing in it panics on bad files or bad input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BurnError {
    /// No file for the model.
    #[error("model file {} not found", path.display())]
    NotFound {
        /// The file looked for.
        path: PathBuf,
    },
    /// The file exists but cannot be read or parsed as SafeTensors.
    #[error("model file {} is unreadable or corrupt: {source}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What went wrong: the I/O error, or burn-store's.
        source: SourceError,
    },
    /// The file changed while it was read (a rewrite or a truncation: it read short or long,
    /// or its length or modification time moved meanwhile). Nothing was loaded; a later load
    /// reads it again.
    #[error("model file {} changed while it was read", path.display())]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The loaded module takes more bytes than the file's header declared: it was dropped and
    /// its reservation released (nothing is charged past a declaration).
    #[error("model file {} declared {declared} bytes but its module takes {actual}", path.display())]
    OverDeclared {
        /// The file.
        path: PathBuf,
        /// The bytes the header declared.
        declared: u64,
        /// The bytes the loaded module takes.
        actual: u64,
    },
    /// The file's tensors do not fit the architecture (missing tensors, wrong shapes or dtypes).
    #[error("model file {} does not match the architecture: {message}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What did not match.
        message: String,
    },
    /// The file (or the tensors its header declares) is larger than a budget it must fit:
    /// refused before any module or tensor is built.
    #[error("model file {} needs {bytes} bytes; the {budget} is {cap}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bytes it needs (its length, or its tensors' bytes).
        bytes: u64,
        /// Which budget refused it (`RAM budget`, `device budget`).
        budget: &'static str,
        /// That budget's cap.
        cap: u64,
    },
    /// A model id that cannot name a file (empty, or with a path separator or `..`).
    #[error("model id `{id}` cannot name a model file")]
    BadId {
        /// The id.
        id: String,
    },
    /// A device name this backend does not serve.
    #[error("device `{name}` is not a {backend} device")]
    UnknownDevice {
        /// The name.
        name: String,
        /// The backend.
        backend: &'static str,
    },
    /// The CUDA driver library cannot be found, so no CUDA device can be used.
    #[error("CUDA is unavailable: {reason}")]
    CudaUnavailable {
        /// Why.
        reason: String,
    },
    /// Copying the weights to a device failed.
    #[error("copying the weights to {device} failed: {message}")]
    Transfer {
        /// The device.
        device: String,
        /// What went wrong.
        message: String,
    },
    /// No input, or input rows of the wrong width.
    #[error("{len} input values are not one or more whole rows of {width}")]
    Input {
        /// Values given.
        len: usize,
        /// Values per row.
        width: usize,
    },
    /// A tensor given to (or answered by) a model does not match its declaration
    /// ([`Architecture::inputs`](super::Architecture::inputs),
    /// [`Architecture::outputs`](super::Architecture::outputs)): another count, element type,
    /// shape or byte length. An output's mismatch comes wrapped in [`BurnError::Forward`].
    #[error("tensor `{name}` does not match the model's declaration: {reason}")]
    Tensor {
        /// The declared tensor (or tensors) concerned.
        name: String,
        /// What differs.
        reason: String,
    },
    /// The backend failed to produce the output.
    #[error("the forward pass failed: {source}")]
    Forward {
        /// The backend's error.
        source: SourceError,
    },
}
