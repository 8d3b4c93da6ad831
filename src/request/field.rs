//! A field of the request named in the client's own words, for a refusal,
//! a drop and the header that reports it.

/// A field of a request that a target cannot honour, named as the client
/// wrote it, so the skip, the 400 and `x-baton-dropped-params` can say
/// which, and `unsupported_params = "drop"` can take it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// A top-level field, by name.
    Top(String),
    /// What of top-level field `.0` baton passes through untranslated (all
    /// of it, or the rest of a field it translates in part, such as
    /// `thinking` beside its budget): dropping it leaves what was translated.
    Untranslated(String),
    /// A field of message `.0`, by name.
    Message(usize, String),
    /// Content part `.1` of message `.0`, and what it is.
    Part(usize, usize, &'static str),
    /// Top-level field `.0`, which the target cannot honour together with
    /// field `.1`; dropping it takes out `.0` only.
    Together(String, String),
    /// One of the client API's own tools (a built-in tool, Codex's
    /// `namespace` of functions) that only that API takes: its type and its
    /// name, if it has one. Dropping it takes out that tool only.
    Tool {
        /// The tool's `type`.
        kind: String,
        /// Its `name`, when it has one.
        name: Option<String>,
    },
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
            Field::Top(name) | Field::Untranslated(name) => f.write_str(name),
            Field::Message(i, name) => write!(f, "messages[{i}].{name}"),
            Field::Part(i, j, what) => write!(f, "messages[{i}].content[{j}] ({what})"),
            Field::Together(name, with) => write!(f, "{name} (together with {with})"),
            Field::Tool { kind, name: Some(name) } => write!(f, "tools ({kind} {name})"),
            Field::Tool { kind, name: None } => write!(f, "tools ({kind})"),
        }
    }
}

/// Whether a field's value asks for nothing: `null`, `false`.
pub fn asks_nothing(value: &serde_json::Value) -> bool {
    matches!(value, serde_json::Value::Null | serde_json::Value::Bool(false))
}

/// The client's own tools baton keeps under `tools` (what only its API
/// takes), each as the field that names it.
pub(super) fn own_tools(tools: &serde_json::Value) -> impl Iterator<Item = Field> + '_ {
    tools.as_array().into_iter().flatten().map(|tool| Field::Tool {
        kind: tool["type"].as_str().unwrap_or("unknown").to_owned(),
        name: tool["name"].as_str().map(str::to_owned),
    })
}

/// Whether `tool` is the one `field` names.
pub(super) fn is_tool(field: &Field, tool: &serde_json::Value) -> bool {
    matches!(field, Field::Tool { kind, name }
        if tool["type"].as_str() == Some(kind.as_str()) && tool["name"].as_str() == name.as_deref())
}
