//! The inputs of `tests/fuzz.rs`: the fixtures, generators of bodies from
//! noise to nearly valid SSE, and the mutations that bend a valid body.

use std::fmt;
use std::sync::LazyLock;

use baton::providers::ProviderKind;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::Value;

/// Bytes that print as an escaped byte string, so a failing case reads.
#[derive(Clone)]
pub struct Body(pub Vec<u8>);

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

/// A recorded transcript, `fixtures/<provider>/<name>.sse`.
#[derive(Clone)]
pub struct Fixture {
    pub kind: ProviderKind,
    pub name: String,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Fixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fixtures/{}/{}", self.kind, self.name)
    }
}

pub static FIXTURES: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let mut fixtures = Vec::new();
    for kind in ProviderKind::ALL {
        let dir = format!("{}/fixtures/{}", env!("CARGO_MANIFEST_DIR"), kind.name());
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{dir}: {err}"));
        let mut paths: Vec<_> = entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect();
        // SSE transcripts, and AWS event streams for the kinds that frame so.
        paths.retain(|path| path.extension().is_some_and(|ext| ext == "sse" || ext == "eventstream"));
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let name = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
            fixtures.push(Fixture { kind, name, bytes });
        }
    }
    assert!(!fixtures.is_empty(), "fixtures are found");
    fixtures
});

/// The fixture `fixtures/<kind>/<name>.sse`.
pub fn fixture(kind: ProviderKind, name: &str) -> &'static Fixture {
    FIXTURES
        .iter()
        .find(|fixture| fixture.kind == kind && fixture.name == name)
        .unwrap_or_else(|| panic!("no fixtures/{kind}/{name}"))
}

/// Valid chat requests, from the smallest to one using every field.
pub const REQUESTS: &[&str] = &[
    r#"{"model":"fast","messages":[{"role":"user","content":"Hi"}]}"#,
    r#"{"model":"fast","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.2,"top_p":0.9,"n":1,"stop":["\n\n"],"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Weather?"}]},{"role":"assistant","content":null}]}"#,
    r#"{"model":"fast","max_completion_tokens":10,"stop":"END","tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"messages":[{"role":"developer","content":"x"},{"role":"user","content":"Paris?"}]}"#,
];

/// Wire snippets of every provider and of the request, as SSE data or JSON.
const SNIPPETS: &[&[u8]] = &[
    br#"{"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}"#,
    br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}"#,
    br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
    br#"{"error":{"message":"boom"}}"#,
    b"[DONE]",
    br#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}"#,
    br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
    br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
    br#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}"#,
    br#"{"type":"message_stop"}"#,
    br#"{"candidates":[{"content":{"parts":[{"text":"hi"},{"functionCall":{"name":"f","args":{}}}]}}]}"#,
    br#"{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}"#,
    br#"{"promptFeedback":{"blockReason":"SAFETY"}}"#,
    br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
];

/// Pieces of SSE and JSON syntax, and bytes that are not text.
const SYNTAX: &[&[u8]] = &[
    b"data: ",
    b"data:",
    b"event: ",
    b"id: 1",
    b"retry: 10",
    b": ping",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\0",
    b"\xff",
    b"\xc3",
    b"\xef\xbb\xbf",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"null",
    b"18446744073709551615",
    b"1e400",
    b"-1",
];

/// Arbitrary bytes, a soup of syntax and snippets, or well-formed SSE events
/// around any data: from noise to inputs that reach deep into a decoder.
pub fn any_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        1 => vec(any::<u8>(), 0..2048),
        1 => vec(piece(), 0..64).prop_map(|pieces| pieces.concat()),
        2 => vec(sse_event(), 0..12).prop_map(|events| events.concat()),
    ]
    .prop_map(Body)
}

fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), 1..12),
        2 => select(SYNTAX).prop_map(<[u8]>::to_vec),
        1 => select(SNIPPETS).prop_map(<[u8]>::to_vec),
    ]
}

/// One SSE event: maybe a name or a comment, a data line, and mostly a blank line.
fn sse_event() -> impl Strategy<Value = Vec<u8>> {
    const NAMES: &[&[u8]] = &[b"", b"event: error\n", b"event: ping\n", b"event: message_stop\n", b": keep-alive\n"];
    const ENDS: &[&[u8]] = &[b"\n\n", b"\r\n\r\n", b"\r\r", b"\n", b""];
    let data = prop_oneof![
        3 => select(SNIPPETS).prop_map(<[u8]>::to_vec),
        1 => vec(piece(), 0..6).prop_map(|pieces| pieces.concat()),
    ];
    (select(NAMES), data, select(ENDS))
        .prop_map(|(name, data, end)| [name, &b"data: "[..], data.as_slice(), end].concat())
}

pub fn cuts() -> impl Strategy<Value = Vec<Index>> {
    vec(any::<Index>(), 0..8)
}

/// A fixture, then something after it: garbage, or another whole answer of
/// the same provider with other words.
pub fn fixture_and_tail() -> impl Strategy<Value = (Fixture, Body)> {
    select(FIXTURES.as_slice()).prop_flat_map(|fixture| {
        let answers: Vec<Body> =
            FIXTURES.iter().filter(|other| other.kind == fixture.kind).map(|other| Body(other.bytes.clone())).collect();
        (Just(fixture), prop_oneof![select(answers), any_body()])
    })
}

/// One change to a body; positions are fractions, so any body can take any change.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// XORs one byte with a non-zero mask.
    Flip { at: Index, mask: u8 },
    /// Inserts bytes, often SSE or JSON syntax.
    Insert { at: Index, bytes: Body },
    /// Removes up to `len` bytes.
    Delete { at: Index, len: usize },
    /// Replaces one value of one JSON line (the whole document included) with raw JSON text.
    Replace { line: Index, node: Index, with: String },
    /// Removes one key of one JSON object.
    DropKey { line: Index, node: Index, key: Index },
    /// Repeats one SSE event (the bytes up to and with a blank line).
    Repeat { event: Index },
    /// Swaps two SSE events.
    Swap { a: Index, b: Index },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => (any::<Index>(), piece()).prop_map(|(at, bytes)| Mutation::Insert { at, bytes: Body(bytes) }),
        1 => (any::<Index>(), 1..64usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        3 => (any::<Index>(), any::<Index>(), wrong_value())
            .prop_map(|(line, node, with)| Mutation::Replace { line, node, with }),
        1 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(line, node, key)| Mutation::DropKey { line, node, key }),
        1 => any::<Index>().prop_map(|event| Mutation::Repeat { event }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Swap { a, b }),
    ]
}

/// JSON a field may not expect: other types, numbers no integer or float
/// holds, lone surrogates, nesting deeper than the parser's recursion limit.
fn wrong_value() -> impl Strategy<Value = String> {
    const FIXED: &[&str] = &[
        "null",
        "true",
        "0",
        "-1",
        "1.5",
        "\"\"",
        "\"text\"",
        "[]",
        "{}",
        "[null]",
        "{\"type\":null}",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "4294967296",
        "1e400",
        "-1e400",
        "\"\\ud800\"",
        "\"\\u0000\"",
    ];
    prop_oneof![
        select(FIXED).prop_map(str::to_owned),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (1usize..300).prop_map(|depth| "[".repeat(depth) + &"]".repeat(depth)),
        (1usize..300).prop_map(|depth| "{\"a\":".repeat(depth) + "1" + &"}".repeat(depth)),
    ]
}

pub fn mutate(body: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    mutations.iter().fold(body.to_vec(), apply)
}

fn apply(mut body: Vec<u8>, mutation: &Mutation) -> Vec<u8> {
    match mutation {
        Mutation::Flip { at, mask } if !body.is_empty() => {
            let at = at.index(body.len());
            body[at] ^= mask;
        }
        Mutation::Flip { .. } => {}
        Mutation::Insert { at, bytes } => {
            let at = at.index(body.len() + 1);
            body.splice(at..at, bytes.0.iter().copied());
        }
        Mutation::Delete { at, len } => {
            let at = at.index(body.len() + 1);
            body.drain(at..(at + len).min(body.len()));
        }
        Mutation::Replace { line, node, with } => {
            return edit_json_line(&body, line, |mut value| {
                if let Some(target) = nth_node(&mut value, node) {
                    *target = Value::String(PLACEHOLDER.to_owned());
                }
                value.to_string().replace(&format!("\"{PLACEHOLDER}\""), with)
            });
        }
        Mutation::DropKey { line, node, key } => {
            return edit_json_line(&body, line, |mut value| {
                if let Some(Value::Object(map)) = nth_node(&mut value, node)
                    && let Some(name) = map.keys().nth(key.index(map.len().max(1))).cloned()
                {
                    map.remove(&name);
                }
                value.to_string()
            });
        }
        Mutation::Repeat { event } => {
            let mut events = sse_events(&body);
            if !events.is_empty() {
                let at = event.index(events.len());
                events.insert(at, events[at].clone());
            }
            return events.concat();
        }
        Mutation::Swap { a, b } => {
            let mut events = sse_events(&body);
            if !events.is_empty() {
                let len = events.len();
                events.swap(a.index(len), b.index(len));
            }
            return events.concat();
        }
    }
    body
}

/// Stands for the value a [`Mutation::Replace`] puts in, until the JSON is text.
const PLACEHOLDER: &str = "baton-fuzz-placeholder";

/// Rewrites one line that holds JSON, after `data:` or alone (a request body),
/// with `edit`; a body without such a line comes back as it was.
fn edit_json_line(body: &[u8], line: &Index, edit: impl FnOnce(Value) -> String) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = body.split(|byte| *byte == b'\n').map(<[u8]>::to_vec).collect();
    let json: Vec<(usize, usize, Value)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let start = line.strip_prefix(b"data:").map_or(0, |rest| line.len() - rest.trim_ascii_start().len());
            serde_json::from_slice(&line[start..]).ok().map(|value| (i, start, value))
        })
        .collect();
    if json.is_empty() {
        return body.to_vec();
    }
    let (i, start, value) = json[line.index(json.len())].clone();
    lines[i].truncate(start);
    lines[i].extend_from_slice(edit(value).as_bytes());
    lines.join(&b'\n')
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// The value `at` picks among all of `value`'s, in pre-order, itself included.
fn nth_node<'a>(value: &'a mut Value, at: &Index) -> Option<&'a mut Value> {
    fn walk<'a>(value: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
        if *n == 0 {
            return Some(value);
        }
        *n -= 1;
        match value {
            Value::Array(items) => items.iter_mut().find_map(|item| walk(item, n)),
            Value::Object(map) => map.values_mut().find_map(|item| walk(item, n)),
            _ => None,
        }
    }
    let mut n = at.index(count_nodes(value));
    walk(value, &mut n)
}

/// `body` as SSE events, each up to and with its blank line; the rest last.
pub fn sse_events(body: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.windows(2).position(|window| window == b"\n\n") {
        events.push(rest[..at + 2].to_vec());
        rest = &rest[at + 2..];
    }
    if !rest.is_empty() {
        events.push(rest.to_vec());
    }
    events
}
