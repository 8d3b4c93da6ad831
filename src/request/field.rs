//! A field of the request named in the client's own words, for a refusal,
//! a drop and the header that reports it.

/// A field of a request that a target cannot honour, named as the client
/// wrote it, so the skip, the 400 and `x-baton-dropped-params` can say
/// which, and `unsupported_params = "drop"` can take it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// A top-level field, by name.
    Top(String),
    /// A field of message `.0`, by name.
    Message(usize, String),
    /// Content part `.1` of message `.0`, and what it is.
    Part(usize, usize, &'static str),
    /// Top-level field `.0`, which the target cannot honour together with
    /// field `.1`; dropping it takes out `.0` only.
    Together(String, String),
}

impl Field {
    /// A top-level field.
    pub fn top(name: &str) -> Self {
        Field::Top(name.to_owned())
    }

    /// A field of message `index`.
    pub fn message(index: usize, name: &str) -> Self {
        Field::Message(index, name.to_owned())
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Top(name) => f.write_str(name),
            Field::Message(i, name) => write!(f, "messages[{i}].{name}"),
            Field::Part(i, j, what) => write!(f, "messages[{i}].content[{j}] ({what})"),
            Field::Together(name, with) => write!(f, "{name} (together with {with})"),
        }
    }
}
