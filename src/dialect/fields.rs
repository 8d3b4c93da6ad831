//! The fields of one JSON object of a client's body, taken out one by one,
//! for the dialects that read a body as a JSON tree: what is left is what
//! baton does not translate. Errors name the field by its path.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ApiError;

/// A request body read as JSON into `T`. A body that is not JSON at all
/// is told so, with where it broke, rather than in the parser's words
/// alone; one that is JSON of the wrong shape names what was wrong.
pub(super) fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|err| {
        ApiError::bad_request(match err.classify() {
            serde_json::error::Category::Syntax
            | serde_json::error::Category::Eof
            | serde_json::error::Category::Io => {
                format!(
                    "the request body is not valid JSON (line {}, column {}: {}); send one JSON object",
                    err.line(),
                    err.column(),
                    bare(&err)
                )
            }
            serde_json::error::Category::Data => format!("invalid request body: {err}"),
        })
    })
}

/// A JSON error's words without the place serde_json appends to them.
fn bare(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let place = format!(" at line {} column {}", err.line(), err.column());
    text.strip_suffix(&place).map_or(text.clone(), str::to_owned)
}

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

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_json_is_told_so_and_where() {
        let message =
            |body: &[u8]| json_body::<Value>(body).err().map(|err| err.message().to_owned()).unwrap_or_default();
        assert_eq!(
            message(b"{model: 1}"),
            "the request body is not valid JSON (line 1, column 2: key must be a string); send one JSON object"
        );
        assert!(message(b"{\"model\": ").starts_with("the request body is not valid JSON (line 1, column 10: EOF"));
        assert!(json_body::<Value>(b"{}").is_ok());
        let shape = json_body::<Vec<u8>>(b"{}").err().map(|err| err.message().to_owned()).unwrap_or_default();
        assert!(shape.starts_with("invalid request body: invalid type"), "{shape}");
    }
}
