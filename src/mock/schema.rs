//! The smallest value a JSON Schema accepts, built the same way every time,
//! so a simulated provider can answer structured output and call tools with
//! arguments a client's own validator takes.

use serde_json::{Map, Value, json};

/// How deep `$ref`s and nested objects are followed before giving up with `null`.
const MAX_DEPTH: usize = 16;

/// A value valid for `schema`: each required property (or, when none is
/// required, the first) with a value of its type — strings `text`, numbers
/// 1 (or their minimum), booleans true, arrays empty (or `minItems` copies
/// of their item), enums and consts their first value; `$ref`s into
/// `$defs` / `definitions` are followed.
pub(super) fn example(schema: &Value, text: &str) -> Value {
    Example { root: schema, text }.of(schema, 0)
}

struct Example<'a> {
    root: &'a Value,
    text: &'a str,
}

impl Example<'_> {
    fn of(&self, schema: &Value, depth: usize) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return self.resolve(target).map_or(Value::Null, |resolved| self.of(resolved, depth + 1));
        }
        if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|values| values.first()) {
            return first.clone();
        }
        if let Some(value) = schema.get("const") {
            return value.clone();
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(options) = schema.get(key).and_then(Value::as_array) {
                let chosen = options.iter().find(|option| type_of(option) != Some("null")).or(options.first());
                return chosen.map_or(Value::Null, |option| self.of(option, depth + 1));
            }
        }
        match type_of(schema) {
            Some("object") => self.object(schema, depth),
            Some("array") => {
                let count = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(8);
                let item = schema.get("items").map_or(Value::Null, |items| self.of(items, depth + 1));
                Value::Array((0..count).map(|_| item.clone()).collect())
            }
            Some("string") => json!(self.text),
            Some("integer") => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1).max(1)),
            Some("number") => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(1.0).max(1.0)),
            Some("boolean") => json!(true),
            Some("null") => Value::Null,
            _ if schema.get("properties").is_some() => self.object(schema, depth),
            _ => json!(self.text),
        }
    }

    fn object(&self, schema: &Value, depth: usize) -> Value {
        let empty = Map::new();
        let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let required: Vec<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut out = Map::new();
        for (name, property) in properties {
            if required.contains(&name.as_str()) || (required.is_empty() && out.is_empty()) {
                out.insert(name.clone(), self.of(property, depth + 1));
            }
        }
        for name in required.iter().filter(|name| !properties.contains_key(**name)) {
            out.insert((*name).to_owned(), json!(self.text));
        }
        Value::Object(out)
    }

    /// A local reference (`#/$defs/Name`), looked up in the root schema.
    fn resolve(&self, target: &str) -> Option<&Value> {
        let pointer = target.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

/// The schema's type, the first that is not `null` when it lists several.
fn type_of(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(kind) => Some(kind),
        Value::Array(kinds) => {
            let mut names = kinds.iter().filter_map(Value::as_str);
            let all: Vec<&str> = names.by_ref().collect();
            all.iter().find(|kind| **kind != "null").or(all.first()).copied()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_properties_get_a_value_of_their_type() {
        let schema = json!({"type": "object", "required": ["city", "days", "ok", "tags", "unit", "at"],
            "properties": {
                "city": {"type": "string"}, "days": {"type": "integer", "minimum": 3}, "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}}, "unit": {"enum": ["c", "f"]},
                "at": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
                "optional": {"type": "string"}}});
        assert_eq!(
            example(&schema, "x"),
            json!({"city": "x", "days": 3, "ok": true, "tags": [], "unit": "c", "at": {"lat": 1.0}})
        );
    }

    #[test]
    fn without_required_the_first_property_is_given() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "number"}}});
        assert_eq!(example(&schema, "Paris"), json!({"city": "Paris"}));
    }

    #[test]
    fn refs_nullable_types_and_unions_are_followed() {
        let schema = json!({"type": "object", "required": ["step", "note"],
            "$defs": {"Step": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}},
            "properties": {"step": {"$ref": "#/$defs/Step"},
                "note": {"anyOf": [{"type": "null"}, {"type": ["string", "null"]}]}}});
        assert_eq!(example(&schema, "x"), json!({"step": {"n": 1}, "note": "x"}));
    }

    #[test]
    fn a_reference_to_itself_ends() {
        let schema = json!({"$ref": "#"});
        assert_eq!(example(&schema, "x"), Value::Null);
    }
}
