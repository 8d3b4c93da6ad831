//! A JSON field's name as serde reads it: borrowed from the body, unless
//! it has escapes to undo. What reads a client's body by its fields (the
//! Chat Completions reader, the same-dialect splice) reads names so,
//! without a copy of each.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A field's name: borrowed from the body, unless it has escapes to undo.
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(name)))
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(name.to_owned())))
    }

    fn visit_string<E: de::Error>(self, name: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(name)))
    }
}
