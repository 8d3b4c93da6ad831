//! What the model may do besides write: the tools it may call, and the form
//! its answer must take.

use serde_json::Value;

/// A function the model may call, with its JSON Schema parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// What the function does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
    /// OpenAI's `strict` (arguments held exactly to the schema).
    pub strict: Option<bool>,
    /// Anthropic-style `cache_control`.
    pub cache: Option<Value>,
}

/// The one property of the function a freeform tool (the Responses API's
/// `custom`, such as Codex's `apply_patch`) becomes for a target without
/// such tools: the tool's whole input, as the model writes it.
pub const FREEFORM_INPUT: &str = "input";

/// Whether, and which, tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool may be called.
    None,
    /// Some tool must be called.
    Required,
    /// This function must be called.
    Function(String),
}

/// The form the answer must take.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Prose, the default.
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid for a schema.
    JsonSchema(JsonSchema),
}

/// A named JSON Schema the answer must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    /// The schema's name.
    pub name: String,
    /// What the answer is, for the model.
    pub description: Option<String>,
    /// The schema itself.
    pub schema: Value,
    /// OpenAI's `strict`.
    pub strict: Option<bool>,
}
