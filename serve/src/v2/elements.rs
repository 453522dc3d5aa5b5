//! A tensor's JSON `data`, read straight into `f32`s while it is parsed: numbers, flat or nested
//! in arrays (row-major), each a finite `FP32` value. No JSON tree is built, so a request's
//! elements cost four bytes each, not a `serde_json::Value` (about 32) each; and a decode run
//! through [`capped`] stops at its cap, so however long the body, the elements decoded are at
//! most the cap.

use std::cell::Cell;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};

/// The elements of a tensor's `data`, flattened, and how they were nested.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Elements(pub(crate) Vec<f32>, pub(crate) Layout);

impl<'de> Deserialize<'de> for Elements {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        let mut layout = Layout::default();
        Append { out: &mut out, layout: &mut layout, depth: 0 }.deserialize(deserializer)?;
        Ok(Self(out, layout))
    }
}

/// How a tensor's `data` nests its numbers: the length of the arrays at each depth (the first
/// one met there), and whether every array at a depth has that length and every number sits
/// at the same depth.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Indexed by depth (an inner array ends before the one holding it).
    dims: Vec<Option<usize>>,
    leaves: Option<usize>,
    ragged: bool,
}

impl Layout {
    /// Whether data of this layout is a tensor of `shape`: its natural nesting (an array per
    /// dimension), flat (one array, or one number: its count is checked apart), or between
    /// the two — an array per leading dimension, the innermost arrays holding the rest of the
    /// tensor flattened (a batch sent a row at a time). Never ragged.
    pub(crate) fn fits(&self, shape: &[usize]) -> bool {
        let Some(dims) = self.dims.iter().copied().collect::<Option<Vec<usize>>>() else { return false };
        let Some((&innermost, leading)) = dims.split_last().filter(|_| !self.ragged) else {
            return !self.ragged;
        };
        if leading.is_empty() {
            return true;
        }
        let Some((outer, rest)) = (leading.len() < shape.len()).then(|| shape.split_at(leading.len())) else {
            return false;
        };
        let flattened = rest.iter().try_fold(1_usize, |n, &d| n.checked_mul(d));
        leading == outer && flattened == Some(innermost)
    }

    fn array(&mut self, depth: usize, len: usize) {
        if self.dims.len() <= depth {
            self.dims.resize(depth + 1, None);
        }
        match self.dims[depth] {
            Some(seen) => self.ragged |= seen != len,
            None => self.dims[depth] = Some(len),
        }
    }

    fn number(&mut self, depth: usize) {
        self.ragged |= *self.leaves.get_or_insert(depth) != depth;
    }
}

/// Why a capped decode refused its elements, beside the parser's own error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Refused {
    /// More elements than the cap.
    TooMany(u64),
    /// An element past `f32`'s range (`1e39`).
    NonFinite(f64),
}

thread_local! {
    /// Elements still readable by the decode running on this thread, and its cap (`None`: no
    /// cap).
    static LEFT: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    /// Why the decode running on this thread refused its elements.
    static REFUSED: Cell<Option<Refused>> = const { Cell::new(None) };
}

/// Runs `decode` on this thread with at most `cap` elements readable by every [`Elements`] it
/// parses together; returns its result and, if it failed on the elements, why.
pub(crate) fn capped<T>(cap: u64, decode: impl FnOnce() -> T) -> (T, Option<Refused>) {
    /// Puts the outer decode's cap and refusal back, even if `decode` panics (the thread is
    /// then reused by the pool).
    struct Restore(Option<(u64, u64)>, Option<Refused>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LEFT.set(self.0);
            REFUSED.set(self.1);
        }
    }
    let restore = Restore(LEFT.replace(Some((cap, cap))), REFUSED.take());
    let result = decode();
    let refused = REFUSED.get();
    drop(restore);
    (result, refused)
}

impl Refused {
    /// The answer to a request refused for its elements: 413 past the cap, 400 for a value
    /// `f32` cannot hold.
    pub(crate) fn error(self) -> crate::error::ApiError {
        use axum::http::StatusCode;
        match self {
            Self::TooMany(cap) => crate::error::ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("more than {cap} elements; the server takes at most {cap}"),
            ),
            Self::NonFinite(value) => {
                crate::error::ApiError::bad_request("bad_input", format!("{value} is not a finite f32 input"))
            }
        }
    }
}

fn refuse<E: de::Error>(why: Refused) -> E {
    REFUSED.set(Some(why));
    E::custom(match why {
        Refused::TooMany(cap) => format!("more than {cap} elements"),
        Refused::NonFinite(value) => format!("{value} is not a finite FP32 value"),
    })
}

/// Appends the numbers of one JSON value (a number or an array), at `depth` in the data, to a
/// vector, noting its layout.
struct Append<'a> {
    out: &'a mut Vec<f32>,
    layout: &'a mut Layout,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Append<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FP32 numbers, flat or in nested arrays")
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        #[allow(clippy::cast_possible_truncation, reason = "FP32 data: rounding to f32 is the protocol's")]
        let element = value as f32;
        if !element.is_finite() {
            return Err(refuse(Refused::NonFinite(value)));
        }
        if let Some((left, cap)) = LEFT.get() {
            let Some(left) = left.checked_sub(1) else { return Err(refuse(Refused::TooMany(cap))) };
            LEFT.set(Some((left, cap)));
        }
        self.layout.number(self.depth);
        self.out.push(element);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        #[allow(clippy::cast_precision_loss, reason = "FP32 data: rounding is the protocol's")]
        self.visit_f64(value as f64)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        #[allow(clippy::cast_precision_loss, reason = "FP32 data: rounding is the protocol's")]
        self.visit_f64(value as f64)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Self { out, layout, depth } = self;
        let mut len = 0;
        while seq
            .next_element_seed(Append { out: &mut *out, layout: &mut *layout, depth: depth + 1 })?
            .is_some()
        {
            len += 1;
        }
        layout.array(depth, len);
        Ok(())
    }
}

/// A JSON array of at most `N` items, refused while it is parsed once it has more: a request's
/// small lists (a shape's dimensions, its input and output tensors) cannot grow past their few
/// entries, whatever the body's size.
#[derive(Debug, PartialEq)]
pub(super) struct Bounded<T, const N: usize>(pub(super) Vec<T>);

impl<T, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Bounded<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(BoundedVisitor::<T, N>(std::marker::PhantomData))
    }
}

struct BoundedVisitor<T, const N: usize>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for BoundedVisitor<T, N> {
    type Value = Bounded<T, N>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of at most {N} items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element()? {
            if out.len() == N {
                return Err(de::Error::custom(format!("more than {N} items")));
            }
            out.push(item);
        }
        Ok(Bounded(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Option<Vec<f32>> {
        serde_json::from_str::<Elements>(json).ok().map(|e| e.0)
    }

    #[test]
    fn nested_and_flat_data_read_the_same_and_anything_else_is_refused() {
        assert_eq!(read("[1.0, 2, 3.5, -4]"), Some(vec![1.0, 2.0, 3.5, -4.0]));
        assert_eq!(read("[[1.0, 2], [3.5, -4]]"), read("[1.0, 2, 3.5, -4]"));
        assert_eq!(read("7"), Some(vec![7.0]));
        for bad in ["[1e39]", "[\"1\"]", "[null]", "{\"a\": 1}", "[[1], true]"] {
            assert_eq!(read(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_layout_fits_a_shape_flat_nested_or_by_rows() {
        let layout = |json| serde_json::from_str::<Elements>(json).map(|e| e.1).expect("read");
        let flat = layout("[1, 2, 3, 4, 5, 6]");
        assert!(flat.fits(&[2, 3]) && flat.fits(&[6]) && flat.fits(&[1, 2, 3]));
        let nested = layout("[[1, 2, 3], [4, 5, 6]]");
        assert!(nested.fits(&[2, 3]) && nested.fits(&[2, 3, 1]) && nested.fits(&[2, 1, 3]), "rows flattened");
        assert!(!nested.fits(&[3, 2]) && !nested.fits(&[6]) && !nested.fits(&[1, 2, 3]));
        assert!(layout("[[[1], [2]]]").fits(&[1, 2, 1]));
        assert!(!layout("[[[1], [2]]]").fits(&[2, 1, 1]));
        for ragged in ["[[1], [2, 3, 4]]", "[[1, 2], 3, 4]", "[1, [2]]", "[[1, 2], [[3], [4]]]"] {
            let layout = layout(ragged);
            assert!(!layout.fits(&[2, 2]) && !layout.fits(&[4]) && !layout.fits(&[3]), "{ragged}");
        }
        assert!(layout("7").fits(&[1]), "one number: the count is checked apart");
    }

    #[test]
    fn a_capped_decode_stops_at_its_cap_across_tensors() {
        let (two, refused) = capped(4, || serde_json::from_str::<[Elements; 2]>("[[1, 2], [3, 4]]"));
        assert_eq!((two.map(|[a, b]| (a.0.len(), b.0.len())).ok(), refused), (Some((2, 2)), None));
        let (over, refused) = capped(3, || serde_json::from_str::<[Elements; 2]>("[[1, 2], [3, 4]]"));
        assert!(over.is_err());
        assert!(matches!(refused, Some(Refused::TooMany(_))), "{refused:?}");
        let (_, refused) = capped(9, || serde_json::from_str::<Elements>("[1e39]"));
        assert_eq!(refused, Some(Refused::NonFinite(1e39)));
        assert_eq!(read("[1, 2, 3]").map(|v| v.len()), Some(3), "no cap outside a capped decode");
    }

    #[test]
    fn a_bounded_array_stops_at_its_bound() {
        let read = |json| serde_json::from_str::<Bounded<i64, 2>>(json).ok().map(|b| b.0);
        assert_eq!(read("[1, -1]"), Some(vec![1, -1]));
        assert_eq!(read("[]"), Some(vec![]));
        assert_eq!(read("[1, 2, 3]"), None);
        assert_eq!(read("{\"a\": 1}"), None);
    }
}
