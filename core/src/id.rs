//! Model identifiers, validated once at the API boundary.
//!
//! A file-backed loader may turn an id into a path under its model directory, so an id is
//! refused when it could escape that directory or confuse a file system: empty ids, ids longer
//! than [`ModelId::MAX_LEN`] bytes, NUL or other control characters, backslashes, absolute paths,
//! and empty, `.` or `..` path components.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use crate::hashed::{Keyed, hash};
use crate::runtime::Arc;

/// Why a string is not a valid [`ModelId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidId {
    /// The id is the empty string.
    #[error("model id is empty")]
    Empty,
    /// The id is longer than [`ModelId::MAX_LEN`] bytes (a cache key: [`ModelId::MAX_KEY_LEN`]).
    #[error("model id is {len} bytes long; the limit is {max}")]
    TooLong {
        /// Length of the refused id in bytes.
        len: usize,
        /// The limit: [`ModelId::MAX_LEN`] (an id), [`ModelId::MAX_KEY_LEN`] (a cache key).
        max: usize,
    },
    /// The id contains a NUL, another control character, a backslash, or an invisible
    /// formatting character (a bidirectional override or isolate, a zero-width character, a
    /// byte-order mark) that would make the id read as another in a log or a listing.
    #[error("model id {id:?} contains the forbidden character {ch:?}")]
    ForbiddenChar {
        /// The refused id.
        id: String,
        /// The first forbidden character.
        ch: char,
    },
    /// The id is an absolute path.
    #[error("model id {id:?} is an absolute path")]
    Absolute {
        /// The refused id.
        id: String,
    },
    /// The id is not in Unicode's composed form (NFC): a decomposed spelling (`e` and a
    /// combining accent) would read as the composed one, another id.
    #[error("model id {id:?} is not in Unicode's composed form (NFC)")]
    NotComposed {
        /// The refused id.
        id: String,
    },
    /// The id has an empty, `.` or `..` path component.
    #[error("model id {id:?} has the path component {component:?}")]
    BadComponent {
        /// The refused id.
        id: String,
        /// The offending component.
        component: String,
    },
}

/// A validated model id, alias or resolved id (see the crate docs for the three roles).
///
/// Cheap to clone; ordered and compared by its string. Dereferences to `str` and compares with
/// one:
///
/// ```
/// use resident::ModelId;
/// let id = ModelId::new("coco/3")?;
/// assert_eq!(id, "coco/3");
/// assert_eq!("coco/3", id);
/// assert!(id.starts_with("coco/"));
/// # Ok::<(), resident::InvalidId>(())
/// ```
#[derive(Clone, Eq)]
pub struct ModelId {
    name: Arc<str>,
    /// `hashed::hash(name)`, computed once: the tables the id is filed in are given it, and two
    /// ids whose hashes differ are unequal without reading their strings.
    hash: u64,
}

// Ids are compared on every queue and table lookup, mostly against clones of themselves or
// against other ids: the same string is equal without reading it, and ids of different hashes
// are unequal without reading theirs. Hashing, equality and order all follow the content (as
// `Borrow<str>` requires); the pointer and the kept hash only short-cut it.
impl std::hash::Hash for ModelId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PartialEq for ModelId {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && (Arc::ptr_eq(&self.name, &other.name) || self.name == other.name)
    }
}

impl Ord for ModelId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.name, &other.name) {
            return std::cmp::Ordering::Equal;
        }
        self.name.cmp(&other.name)
    }
}

impl PartialOrd for ModelId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

// ---- Validation --------------------------------------------------------------------------------

impl ModelId {
    /// The longest accepted id, in bytes.
    pub const MAX_LEN: usize = 256;

    /// Validates `id`.
    ///
    /// ```
    /// use resident::ModelId;
    /// assert!(ModelId::new("coco/3").is_ok());
    /// assert!(ModelId::new("../etc/passwd").is_err());
    /// ```
    pub fn new(id: &str) -> Result<Self, InvalidId> {
        Self::validate(id)?;
        Ok(Self { name: Arc::from(id), hash: hash(id) })
    }

    /// The longest accepted cache key, in bytes: three times an id's, so that a loader may
    /// escape any id into a key (`CacheLoader` escapes `%` and `:` as three bytes each).
    pub const MAX_KEY_LEN: usize = 3 * Self::MAX_LEN;

    /// Checks `id` as [`ModelId::new`] does, without allocating.
    pub fn validate(id: &str) -> Result<(), InvalidId> {
        Self::validate_up_to(id, Self::MAX_LEN)
    }

    /// Checks a cache key: an id's rules, up to [`ModelId::MAX_KEY_LEN`] bytes.
    pub(crate) fn validate_key(key: &str) -> Result<(), InvalidId> {
        Self::validate_up_to(key, Self::MAX_KEY_LEN)
    }

    /// Checks `id` as an id of at most `max` bytes.
    fn validate_up_to(id: &str, max: usize) -> Result<(), InvalidId> {
        if id.is_empty() {
            return Err(InvalidId::Empty);
        }
        if id.len() > max {
            return Err(InvalidId::TooLong { len: id.len(), max });
        }
        // The common case, printable ASCII, needs one pass over the bytes and no decoding.
        let plain = id.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\\');
        if !plain
            && let Some(ch) =
                id.chars().find(|c| c.is_control() || *c == '\\' || (!c.is_ascii() && invisible(*c)))
        {
            return Err(InvalidId::ForbiddenChar { id: id.to_owned(), ch });
        }
        // ASCII is composed already: only other ids pay for the check.
        if !plain && !id.is_ascii() && !unicode_normalization::is_nfc(id) {
            return Err(InvalidId::NotComposed { id: id.to_owned() });
        }
        if id.starts_with('/') {
            return Err(InvalidId::Absolute { id: id.to_owned() });
        }
        let bad = |c: &[u8]| c.is_empty() || c == b"." || c == b"..";
        if id.as_bytes().split(|&b| b == b'/').any(bad)
            && let Some(component) = id.split('/').find(|c| bad(c.as_bytes()))
        {
            return Err(InvalidId::BadComponent { id: id.to_owned(), component: component.to_owned() });
        }
        Ok(())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The id's string, shared (a metrics label without a copy).
    pub(crate) fn shared(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }
}

/// A character that changes how text around it reads without showing itself — Unicode's
/// default-ignorable code points (the bidirectional marks, embeddings, overrides and isolates,
/// the zero-width characters, the soft hyphen, variation selectors, tags, fillers, the
/// byte-order mark) — or that breaks a line of a log (the line and paragraph separators).
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

impl fmt::Debug for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.name, f)
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Borrow<str> for ModelId {
    fn borrow(&self) -> &str {
        &self.name
    }
}

impl Deref for ModelId {
    type Target = str;

    /// The id's string: a `&ModelId` goes wherever a `&str` does.
    fn deref(&self) -> &str {
        &self.name
    }
}

impl PartialEq<str> for ModelId {
    fn eq(&self, other: &str) -> bool {
        &*self.name == other
    }
}

impl PartialEq<&str> for ModelId {
    fn eq(&self, other: &&str) -> bool {
        &*self.name == *other
    }
}

impl PartialEq<ModelId> for str {
    fn eq(&self, other: &ModelId) -> bool {
        self == &*other.name
    }
}

impl PartialEq<ModelId> for &str {
    fn eq(&self, other: &ModelId) -> bool {
        *self == &*other.name
    }
}

impl AsRef<str> for ModelId {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl TryFrom<&str> for ModelId {
    type Error = InvalidId;

    fn try_from(id: &str) -> Result<Self, InvalidId> {
        Self::new(id)
    }
}

/// An id is filed under the hash it keeps, and a clone of a filed id is found without reading
/// the strings.
impl Keyed<ModelId> for ModelId {
    fn hashed(&self) -> u64 {
        self.hash
    }

    fn is(&self, key: &ModelId) -> bool {
        key == self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_namespaced_ids() {
        for ok in ["coco/3", "yolov8n-640", "a", "org/project/7", "x.y"] {
            assert_eq!(ModelId::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_ids_that_escape_a_model_directory() {
        assert_eq!(ModelId::new(""), Err(InvalidId::Empty));
        assert!(matches!(ModelId::new("/etc/passwd"), Err(InvalidId::Absolute { .. })));
        assert!(matches!(ModelId::new("a/../b"), Err(InvalidId::BadComponent { .. })));
        assert!(matches!(ModelId::new(".."), Err(InvalidId::BadComponent { .. })));
        assert!(matches!(ModelId::new("a//b"), Err(InvalidId::BadComponent { .. })));
        assert!(matches!(ModelId::new("a/./b"), Err(InvalidId::BadComponent { .. })));
        assert!(matches!(ModelId::new("a\0b"), Err(InvalidId::ForbiddenChar { ch: '\0', .. })));
        assert!(matches!(ModelId::new("a\\b"), Err(InvalidId::ForbiddenChar { .. })));
        let hidden_chars = [
            '\u{202E}',
            '\u{2066}',
            '\u{200B}',
            '\u{200F}',
            '\u{FEFF}',
            '\u{061C}',
            '\u{00AD}',
            '\u{2028}',
            '\u{FE0F}',
            '\u{E0041}',
        ];
        for hidden in hidden_chars {
            let id = format!("admin{hidden}gpj.exe");
            assert!(
                matches!(ModelId::new(&id), Err(InvalidId::ForbiddenChar { ch, .. }) if ch == hidden),
                "{id:?}"
            );
        }
        assert!(ModelId::new("mod\u{e8}le/日本").is_ok(), "visible non-ASCII letters are ids");
        let decomposed = "mode\u{300}le";
        assert_eq!(ModelId::new(decomposed), Err(InvalidId::NotComposed { id: decomposed.to_owned() }));
        let long = "x".repeat(ModelId::MAX_LEN + 1);
        assert!(matches!(ModelId::new(&long), Err(InvalidId::TooLong { .. })));
    }

    /// The definition [`ModelId::validate`] implements with its fast paths: every character
    /// decoded and checked, every component split out.
    fn reference(id: &str) -> Result<(), InvalidId> {
        if id.is_empty() {
            return Err(InvalidId::Empty);
        }
        if id.len() > ModelId::MAX_LEN {
            return Err(InvalidId::TooLong { len: id.len(), max: ModelId::MAX_LEN });
        }
        if let Some(ch) = id.chars().find(|c| c.is_control() || *c == '\\' || invisible(*c)) {
            return Err(InvalidId::ForbiddenChar { id: id.to_owned(), ch });
        }
        if !unicode_normalization::is_nfc(id) {
            return Err(InvalidId::NotComposed { id: id.to_owned() });
        }
        if id.starts_with('/') {
            return Err(InvalidId::Absolute { id: id.to_owned() });
        }
        if let Some(component) = id.split('/').find(|c| c.is_empty() || *c == "." || *c == "..") {
            return Err(InvalidId::BadComponent { id: id.to_owned(), component: component.to_owned() });
        }
        Ok(())
    }

    proptest::proptest! {
        /// Ids built from the characters each check is about (separators, dots, controls, the
        /// backslash, invisible and combining characters, letters beyond ASCII) are accepted
        /// and refused exactly as the definition says, with the same error.
        #[test]
        fn validation_is_its_definition(id in "[a./\\\\ ~\\x00\\x7f\\u{80}\\u{AD}\\u{200B}\\u{300}\\u{e8}\\u{65e5}\\u{E0041}]{0,12}") {
            proptest::prop_assert_eq!(ModelId::validate(&id), reference(&id));
        }
    }
}
