//! The fields of one JSON object of a client's body, taken out one by one,
//! for the dialects that read a body as a JSON tree: what is left is what
//! baton does not translate. Errors name the field by its path.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ApiError;

/// An object's fields not yet taken, and the path they are at (`messages[2].`).
pub(super) struct Fields {
    /// The fields left.
    pub(super) map: Map<String, Value>,
    /// Where the object is in the body, ending in `.` (empty at the top).
    pub(super) at: String,
}

impl Fields {
    /// The fields of `value`, which must be an object, at path `at`.
    pub(super) fn new(value: Value, at: &str) -> Result<Self, ApiError> {
        match value {
            Value::Object(map) => Ok(Fields { map, at: at.to_owned() }),
            _ => Err(ApiError::bad_request(format!("`{}` must be an object", at.trim_end_matches('.')))),
        }
    }

    /// Takes `name`, typed; absent and `null` are both `None`.
    pub(super) fn take<T: DeserializeOwned>(&mut self, name: &str) -> Result<Option<T>, ApiError> {
        match self.map.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|err| ApiError::bad_request(format!("invalid request body: `{}{name}`: {err}", self.at))),
        }
    }

    /// Takes `name`, which must be there.
    pub(super) fn need<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, ApiError> {
        self.take(name)?.ok_or_else(|| ApiError::bad_request(format!("`{}{name}`: field required", self.at)))
    }

    /// Puts what is left back under `name` of `into`, when anything is.
    pub(super) fn keep_rest(self, name: &str, into: &mut Fields) {
        if !self.map.is_empty() {
            into.map.insert(name.to_owned(), Value::Object(self.map));
        }
    }
}
