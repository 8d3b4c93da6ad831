//! The first element of a JSON array, the rest skipped unread: a provider's
//! chunk lists its choices or candidates, of which baton reads only the
//! first, so no list is allocated for them on every event.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};

/// An array's first element, if it has one; the others are checked only
/// for being JSON.
pub(super) struct First<T>(pub(super) Option<T>);

impl<T> Default for First<T> {
    /// No array at all reads as an empty one.
    fn default() -> Self {
        First(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(FirstVisitor(PhantomData))
    }
}

struct FirstVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
    type Value = First<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
        let first = seq.next_element()?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(First(first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_element_and_skips_the_rest() {
        let first: First<u32> = serde_json::from_str(r#"[7, {"any": ["thing"]}, "else"]"#).unwrap_or_default();
        assert_eq!(first.0, Some(7), "the first of three");
        let empty: First<u32> = serde_json::from_str("[]").unwrap_or(First(Some(1)));
        assert_eq!(empty.0, None, "an empty array has no first");
        assert!(serde_json::from_str::<First<u32>>("null").is_err(), "null is not an array");
        assert!(serde_json::from_str::<First<u32>>(r#"["x"]"#).is_err(), "the first must be what was asked for");
    }
}
