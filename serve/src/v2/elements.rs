//! A tensor's JSON `data`, read straight into `f32`s while it is parsed: numbers, flat or nested
//! in arrays (row-major), each a finite `FP32` value. No JSON tree is built, so a request's
//! elements cost four bytes each, not a `serde_json::Value` (about 32) each.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};

/// The elements of a tensor's `data`, flattened.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Elements(pub(super) Vec<f32>);

impl<'de> Deserialize<'de> for Elements {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        Append(&mut out).deserialize(deserializer)?;
        Ok(Self(out))
    }
}

/// Appends the numbers of one JSON value (a number or an array) to a vector.
struct Append<'a>(&'a mut Vec<f32>);

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
            return Err(E::custom(format!("{value} is not a finite FP32 value")));
        }
        self.0.push(element);
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
        let out = self.0;
        while seq.next_element_seed(Append(&mut *out))?.is_some() {}
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
    fn a_bounded_array_stops_at_its_bound() {
        let read = |json| serde_json::from_str::<Bounded<i64, 2>>(json).ok().map(|b| b.0);
        assert_eq!(read("[1, -1]"), Some(vec![1, -1]));
        assert_eq!(read("[]"), Some(vec![]));
        assert_eq!(read("[1, 2, 3]"), None);
        assert_eq!(read("{\"a\": 1}"), None);
    }
}
