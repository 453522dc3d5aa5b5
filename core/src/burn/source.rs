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
fn open(path: &Path) -> Result<(File, FileIdentity), BurnError> {
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        return Err(BurnError::NotFound { path: path.to_owned() });
    }
    Ok((file, FileIdentity::of(&meta)))
}

/// Reads exactly `len` bytes of `file`: `None` if it has one byte more or fewer (it changed
/// while read).
fn read_exact_len(file: &mut File, len: u64) -> std::io::Result<Option<Vec<u8>>> {
    let capacity =
        usize::try_from(len).map_err(|_| std::io::Error::other("the file is too large for memory"))?;
    let mut bytes = Vec::with_capacity(capacity);
    file.take(len.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 == len).then_some(bytes))
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
    file.read_exact(&mut prefix).map_err(|_| short(path))?;
    let n = u64::from_le_bytes(prefix);
    let data = identity.len.checked_sub(8).and_then(|rest| rest.checked_sub(n));
    let Some(data) = data.filter(|_| n <= MAX_HEADER) else {
        return Err(corrupt(path, format!("a header of {n} bytes in a file of {}", identity.len).into()));
    };
    // At most the file's length (checked above), which the budget check already allowed.
    let mut json = vec![0_u8; usize::try_from(n).map_err(|_| short(path))?];
    file.read_exact(&mut json).map_err(|_| short(path))?;
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
