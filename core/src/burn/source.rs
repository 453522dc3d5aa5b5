//! Reading model files with plain reads into owned memory, never through a memory map.
//!
//! A mapped file that shrinks while it is mapped (a `cp` over it truncates it first) kills the
//! process with `SIGBUS` on the next read of a page past its new end. So the loader reads the
//! header and the whole file with ordinary reads, bounded by the length the file had when it
//! was opened: a file that changes meanwhile reads short or long, which is a typed
//! [`BurnError::Changed`], and a truncated or corrupt file is a typed error from the parse.
//!
//! What was read is named by a [`FileIdentity`] (length, modification time, inode): a rewrite
//! changes it, so weights cached under one identity are never served for another.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

use super::error::BurnError;
use crate::error::SourceError;

/// The most header bytes a SafeTensors file may declare (the format's own limit).
const MAX_HEADER: u64 = 100_000_000;

/// What a model file was when it was opened: a rewrite changes at least one field. A save
/// that renames a new file into place changes the inode; a rewrite in place that keeps the
/// length (and even the header) changes the modification and status-change times — to the
/// file system's clock granularity: two rewrites of one length within one tick of that clock
/// (a few milliseconds on Linux) look alike. Save by renaming into place where that matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Its length in bytes.
    pub len: u64,
    /// Its modification time in nanoseconds since the Unix epoch, where the platform has it.
    pub modified_ns: Option<u128>,
    /// Its status-change time (seconds, nanoseconds), on Unix: moved by every write, and not
    /// settable by a user as the modification time is.
    pub changed: Option<(i64, i64)>,
    /// Its inode number, on Unix.
    pub inode: Option<u64>,
}

impl FileIdentity {
    fn of(meta: &Metadata) -> Self {
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|since| since.as_nanos());
        #[cfg(unix)]
        let (changed, inode) = {
            use std::os::unix::fs::MetadataExt;
            (Some((meta.ctime(), meta.ctime_nsec())), Some(meta.ino()))
        };
        #[cfg(not(unix))]
        let (changed, inode) = (None, None);
        Self { len: meta.len(), modified_ns, changed, inode }
    }

    /// The identity of the file at `path` now.
    pub fn of_path(path: &Path) -> Result<Self, BurnError> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => Ok(Self::of(&meta)),
            Ok(_) => Err(BurnError::NotFound { path: path.to_owned() }),
            Err(error) => Err(io_error(path, error)),
        }
    }
}

/// A SafeTensors header, read alone: each tensor's name and stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Header {
    /// `(name, bytes)` of every tensor, in the header's order.
    pub(super) tensors: Vec<(String, u64)>,
}

/// Opens `path` and reads its identity from the open file (so the two name the same file).
/// Opened without blocking: a named pipe put where a model file was expected is refused as
/// not a file, where a plain open would wait for a writer forever (holding the load's claim
/// and reservation). Reads of a regular file are not affected; an open that would block (a
/// write lease another process holds) is an I/O error that keeps its source, for the caller to
/// try again (a blocking open after a look at the path could meet a pipe swapped in between).
fn open(path: &Path) -> Result<(File, FileIdentity), BurnError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| io_error(path, e))?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        return Err(BurnError::NotFound { path: path.to_owned() });
    }
    Ok((file, FileIdentity::of(&meta)))
}

/// Reads exactly `len` bytes of `file`: `None` if it has one byte more or fewer (it changed
/// while read). The buffer is allocated once, fallibly (a huge or sparse file is an error,
/// not an abort), and never grows: the byte past `len` is probed apart.
fn read_exact_len(file: &mut File, len: u64) -> std::io::Result<Option<Vec<u8>>> {
    let too_large =
        || std::io::Error::new(std::io::ErrorKind::OutOfMemory, "the file is too large for memory");
    let capacity = usize::try_from(len).map_err(|_| too_large())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(capacity).map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))?;
    Read::by_ref(file).take(len).read_to_end(&mut bytes)?;
    let mut probe = [0_u8; 1];
    let longer = loop {
        match file.read(&mut probe) {
            Ok(n) => break n > 0,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    Ok((bytes.len() as u64 == len && !longer).then_some(bytes))
}

/// Reads the whole file at `path` into memory: its bytes and the identity they came from. With
/// `checked`, the length a budget check allowed, a file that has grown past it since is
/// [`BurnError::Changed`] before anything is allocated.
pub(super) fn read_file(path: &Path, checked: Option<u64>) -> Result<(FileIdentity, Vec<u8>), BurnError> {
    let changed = || BurnError::Changed { path: path.to_owned() };
    let (mut file, identity) = open(path)?;
    if checked.is_some_and(|checked| identity.len > checked) {
        return Err(changed());
    }
    let bytes =
        read_exact_len(&mut file, identity.len).map_err(|e| io_error(path, e))?.ok_or_else(changed)?;
    // A rewrite during the read that kept the length still moves the modification time (to
    // the file system's clock granularity): what was read may then mix two versions.
    let after = file.metadata().map(|meta| FileIdentity::of(&meta)).map_err(|e| io_error(path, e))?;
    if after != identity {
        return Err(changed());
    }
    Ok((identity, bytes))
}

/// Reads the header of the SafeTensors file at `path` alone (its 8-byte length, then the JSON
/// it announces), checking the tensors it declares lie within the file.
pub(super) fn read_header(path: &Path) -> Result<(FileIdentity, Header), BurnError> {
    let (mut file, identity) = open(path)?;
    let mut prefix = [0_u8; 8];
    let short = |path: &Path| corrupt(path, "the file is shorter than its header".into());
    if identity.len < 8 {
        return Err(short(path));
    }
    // The file was long enough when opened: a short read now is a truncation meanwhile.
    let failed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => BurnError::Changed { path: path.to_owned() },
        _ => io_error(path, e),
    };
    file.read_exact(&mut prefix).map_err(failed)?;
    let n = u64::from_le_bytes(prefix);
    let data = identity.len.checked_sub(8).and_then(|rest| rest.checked_sub(n));
    let Some(data) = data.filter(|_| n <= MAX_HEADER) else {
        return Err(corrupt(path, format!("a header of {n} bytes in a file of {}", identity.len).into()));
    };
    // At most the file's length (checked above), which the budget check already allowed.
    let mut json = vec![0_u8; usize::try_from(n).map_err(|_| short(path))?];
    file.read_exact(&mut json).map_err(failed)?;
    let tensors = parse_header(&json, data).map_err(|why| corrupt(path, why.into()))?;
    Ok((identity, Header { tensors }))
}

/// Every tensor of a header, `(name, bytes)`, each within `data` bytes of tensor data.
fn parse_header(json: &[u8], data: u64) -> Result<Vec<(String, u64)>, String> {
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(json).map_err(|e| format!("the header is not a JSON object: {e}"))?;
    let mut tensors = Vec::with_capacity(header.len());
    for (name, info) in header {
        if name == "__metadata__" {
            continue;
        }
        let offsets = info
            .get("data_offsets")
            .and_then(serde_json::Value::as_array)
            .and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)))
            .ok_or_else(|| format!("tensor {name} has no data offsets"))?;
        let (start, end) = offsets;
        if start > end || end > data {
            return Err(format!("tensor {name} lies at {start}..{end}, outside the {data} bytes of data"));
        }
        tensors.push((name, end - start));
    }
    Ok(tensors)
}

fn corrupt(path: &Path, why: crate::error::BoxError) -> BurnError {
    BurnError::Corrupt { path: path.to_owned(), source: SourceError::new(why) }
}

fn io_error(path: &Path, error: std::io::Error) -> BurnError {
    if error.kind() == std::io::ErrorKind::NotFound {
        BurnError::NotFound { path: path.to_owned() }
    } else {
        corrupt(path, error.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_checked_against_the_data_it_announces() {
        let json =
            br#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert_eq!(parse_header(json, 8), Ok(vec![("a".to_owned(), 8)]));
        assert!(parse_header(json, 7).is_err(), "a tensor past the data");
        assert!(parse_header(br#"{"a":{"data_offsets":[8,0]}}"#, 8).is_err(), "offsets backwards");
        assert!(parse_header(br#"{"a":{"dtype":"F32"}}"#, 8).is_err(), "no offsets");
        assert!(parse_header(b"[1]", 8).is_err(), "not an object");
    }

    /// A scratch file of `bytes` under the system's temporary directory, named for `test`.
    fn scratch(test: &str, bytes: Option<&[u8]>) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("resident-source-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let path = dir.join("m.safetensors");
        let _ = std::fs::remove_file(&path);
        if let Some(bytes) = bytes {
            std::fs::write(&path, bytes).expect("a scratch file");
        }
        path
    }

    #[test]
    fn a_read_of_a_length_is_exact_or_none() {
        let path = scratch("exact", Some(b"0123456789"));
        let read = |len| read_exact_len(&mut File::open(&path).expect("opens"), len).expect("reads");
        assert_eq!(read(10).as_deref(), Some(&b"0123456789"[..]));
        assert_eq!(read(9), None, "a file longer than its length");
        assert_eq!(read(11), None, "a file shorter than its length");
        std::fs::remove_dir_all(path.parent().expect("a directory")).expect("cleaned up");
    }

    /// A named pipe where the model file was expected is refused at once: a plain open would
    /// wait for a writer forever.
    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_not_waited_on() {
        let path = scratch("fifo", None);
        let made = std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
        assert!(matches!(read_file(&path, None), Err(BurnError::NotFound { .. })));
        assert!(matches!(read_header(&path), Err(BurnError::NotFound { .. })));
        std::fs::remove_dir_all(path.parent().expect("a directory")).expect("cleaned up");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any bytes as a header, and any JSON object of tensors with any offsets: a list of
        /// tensors within the data, or a typed refusal — never a panic.
        #[test]
        fn any_header_is_tensors_within_the_data_or_refused(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..128),
            offsets in proptest::collection::vec((proptest::num::u64::ANY, proptest::num::u64::ANY), 0..4),
            data in proptest::num::u64::ANY,
        ) {
            let _ = parse_header(&bytes, data);
            let entries: Vec<String> = offsets
                .iter()
                .enumerate()
                .map(|(i, (start, end))| format!(r#""t{i}":{{"dtype":"F32","data_offsets":[{start},{end}]}}"#))
                .collect();
            let json = format!("{{{}}}", entries.join(","));
            match parse_header(json.as_bytes(), data) {
                Ok(tensors) => {
                    proptest::prop_assert_eq!(tensors.len(), offsets.len());
                    proptest::prop_assert!(offsets.iter().all(|(s, e)| s <= e && *e <= data));
                }
                Err(_) => proptest::prop_assert!(offsets.iter().any(|(s, e)| s > e || *e > data)),
            }
        }
    }
}
