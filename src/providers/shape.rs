//! Text chunks that differ only in their strings. An answer is hundreds
//! of chunks that repeat one another byte for byte but for the text: an
//! OpenAI-compatible server's `{"id":…,"choices":[{"index":0,"delta":
//! {"content":"…"},…}]}`, Anthropic's `content_block_delta` with a
//! `text_delta`; OpenAI's own chunks also end with an `obfuscation` string
//! of random padding. Parsing each chunk whole costs about 4,500
//! instructions with serde_json (jiter, simd-json and sonic-rs measured no
//! less on such small objects), half of all that relaying one event costs.
//!
//! A decoder that has parsed a chunk whole, and found that it says nothing
//! but one piece of text, keeps the chunk's bytes outside that text's JSON
//! string and outside any string whose value it does not read: its shape.
//! A later chunk made of the same bytes with one JSON value in each of
//! those places is the same JSON document with other values there: a
//! parser reads the bytes before each value as before, a string is one
//! token whatever it holds, and the bytes after it are read as before
//! again. So it decodes to the same events with its own text, and only its
//! values are parsed. Anything else (a quote that ends the text early and
//! goes on with other fields, a text that is no string, any other byte
//! changed) is not that chunk, and is parsed whole.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::event::Event;

/// A JSON string, kept a slice of the chunk when it has no escapes (serde
/// borrows a `Cow` field only when it is the field itself, not inside an
/// `Option`), so the chunk's shape around it can be kept.
#[derive(Debug, Deserialize)]
pub(super) struct Text<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

impl Text<'_> {
    /// The string as written in `data`, quotes included, when it is a
    /// slice of `data`.
    pub(super) fn quoted<'d>(&self, data: &'d str) -> Option<&'d str> {
        match &self.0 {
            Cow::Borrowed(contents) => quoted(data, contents),
            Cow::Owned(_) => None,
        }
    }
}

/// The bytes around the strings of the last chunk that said only text.
#[derive(Debug, Default)]
pub(super) struct TextShape {
    /// The chunk's bytes outside its strings, one run after another; empty
    /// while no shape is kept (a chunk is an object, never a bare string).
    runs: Vec<u8>,
    /// Where each run that a string follows ends in `runs`.
    ends: Vec<usize>,
    /// Which of the strings, in the chunk's order, is the text.
    text: usize,
}

impl TextShape {
    /// Keeps the shape of `data` around `text`, its text's JSON string
    /// (quotes included), and `unread`, a string whose value the decoder
    /// does not read; each must be a slice of `data`, or the shape is cleared.
    pub(super) fn keep(&mut self, data: &str, text: &str, unread: Option<&str>) {
        self.clear();
        let Some(text) = place(data, text) else { return };
        let mut strings = vec![(text, true)];
        match unread.map(|unread| place(data, unread)) {
            Some(Some(unread)) => strings.push((unread, false)),
            Some(None) => return,
            None => {}
        }
        strings.sort_by_key(|(place, _)| place.start);
        let mut at = 0;
        for (index, (place, is_text)) in strings.iter().enumerate() {
            let Some(run) = data.get(at..place.start) else { return self.clear() };
            self.runs.extend_from_slice(run.as_bytes());
            self.ends.push(self.runs.len());
            if *is_text {
                self.text = index;
            }
            at = place.end;
        }
        match data.get(at..) {
            Some(last) => self.runs.extend_from_slice(last.as_bytes()),
            None => self.clear(),
        }
    }

    /// Forgets the shape: every chunk is parsed whole until one is kept again.
    pub(super) fn clear(&mut self) {
        self.runs.clear();
        self.ends.clear();
        self.text = 0;
    }

    /// Whether a shape is kept, for tests that must know the shape is used.
    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        !self.runs.is_empty()
    }

    /// Reads `data` by the kept shape, pushing its text onto `events`
    /// (nothing for an empty text, as a decoder pushes nothing for an empty
    /// delta); false when `data` has not that shape and must be parsed whole.
    pub(super) fn read(&self, data: &str, events: &mut Vec<Event>) -> bool {
        let Some(text) = self.text(data) else { return false };
        events.extend(Some(text).filter(|text| !text.is_empty()).map(Event::Text));
        true
    }

    /// The text of `data` if it has the kept shape, unescaped; `None` when
    /// it has not, and must be parsed whole.
    pub(super) fn text(&self, data: &str) -> Option<String> {
        if self.runs.is_empty() {
            return None;
        }
        let (mut at, mut run_start, mut text) = (0, 0, None);
        for (index, &run_end) in self.ends.iter().enumerate() {
            let run = self.runs.get(run_start..run_end)?;
            if !data.as_bytes().get(at..)?.starts_with(run) {
                return None;
            }
            at += run.len();
            let rest = data.get(at..)?;
            at += if index == self.text {
                let (value, length) = value_at::<String>(rest)?;
                text = Some(value);
                length
            } else {
                value_at::<IgnoredAny>(rest)?.1
            };
            run_start = run_end;
        }
        (data.as_bytes().get(at..)? == self.runs.get(run_start..)?).then_some(())?;
        text
    }
}

/// Where `literal`, a JSON string, lies in `data`, if it is a slice of it.
fn place(data: &str, literal: &str) -> Option<Range<usize>> {
    let start = offset_in(data, literal)?;
    let place = start..start.checked_add(literal.len())?;
    (data.get(place.clone()).is_some() && literal.starts_with('"')).then_some(place)
}

/// How far into `data` the slice `part` begins, if it begins in or after
/// it; the callers check that it ends within `data` too.
fn offset_in(data: &str, part: &str) -> Option<usize> {
    (part.as_ptr() as usize).checked_sub(data.as_ptr() as usize)
}

/// The JSON value that `text` begins with, and its length in bytes.
fn value_at<T: DeserializeOwned>(text: &str) -> Option<(T, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

/// `contents`, a JSON string's contents as a slice of `data` (a string
/// without escapes, borrowed), with the quotes around it: the string as
/// written in `data`, if the bytes beside it are its quotes.
fn quoted<'a>(data: &'a str, contents: &str) -> Option<&'a str> {
    let start = offset_in(data, contents)?;
    let literal = data.get(start.checked_sub(1)?..start + contents.len() + 1)?;
    (literal.starts_with('"') && literal.ends_with('"') && literal.len() == contents.len() + 2).then_some(literal)
}

/// What a fresh decoder makes of each chunk of `chunks`, fed to it in
/// order; with `shape_of`, its shape is cleared before each chunk: the
/// same decoder made to parse every chunk whole, for tests to compare with.
#[cfg(test)]
pub(super) fn decoded<D: super::Decoder + Default>(
    shape_of: Option<fn(&mut D) -> &mut TextShape>,
    chunks: &[super::SseEvent],
) -> Vec<Result<Vec<Event>, super::ProviderError>> {
    let mut decoder = D::default();
    chunks
        .iter()
        .map(|chunk| {
            if let Some(shape_of) = shape_of {
                shape_of(&mut decoder).clear();
            }
            let mut events = Vec::new();
            decoder.on_event(chunk, &mut events).map(|()| events)
        })
        .collect()
}

/// Checks that a decoder keeps the shape of the text chunk of `shapes[0]`,
/// reads the next like it by that shape, and decodes a few such chunks as
/// it does parsed whole (so the property tests compare a path that is used).
#[cfg(test)]
pub(super) fn assert_texts_read_by_shape<D: super::Decoder + Default>(
    shapes: &[&str],
    shape_of: fn(&mut D) -> &mut TextShape,
) {
    let picks: Vec<_> = ["Hel", "lo \"w", "orld\n", "", "!"].map(|text| (0, Ok(text.to_owned()))).into();
    let chunks = chunks(shapes, &picks);
    let mut decoder = D::default();
    decoder.on_event(&chunks[0], &mut Vec::new()).expect("a text chunk");
    assert!(shape_of(&mut decoder).is_kept(), "a chunk that says only text keeps its shape");
    let next = shape_of(&mut decoder).text(&chunks[1].data);
    assert_eq!(next.as_deref(), Some("lo \"w"), "the next is read by its shape");
    assert_eq!(decoded::<D>(None, &chunks), decoded(Some(shape_of), &chunks));
}

/// Any text, or (one time in four) a fragment that is not one JSON string.
#[cfg(test)]
pub(super) fn any_text() -> impl proptest::strategy::Strategy<Value = Result<String, usize>> {
    use proptest::prelude::*;
    prop_oneof![3 => any::<String>().prop_map(Ok), 1 => any::<usize>().prop_map(Err)]
}

/// Chunks made from `shapes` (each with `TEXT` where a text goes, and
/// maybe `PAD` where a string the decoder does not read goes), each filled
/// with a text of `picks`: JSON strings, and fragments that are not one (a
/// quote that ends the string early and goes on with other fields, a value
/// of another type, a broken escape), and padding of a length the pick
/// chooses. For property tests: the decoders must read them all as they
/// read them parsed whole.
#[cfg(test)]
pub(super) fn chunks(shapes: &[&str], picks: &[(usize, Result<String, usize>)]) -> Vec<super::SseEvent> {
    const NOT_A_STRING: &[&str] = &[
        r#""a","role":"x""#,
        r#""a"},"finish_reason":"stop"}]}"#,
        r#""a","type":"thinking_delta","thinking":"b""#,
        "null",
        "7",
        r#""a\""#,
        r#""\q""#,
        r#""a" "#,
        r#" "a""#,
        "\"a\nb\"",
        "\"unterminated",
    ];
    picks
        .iter()
        .map(|(shape, text)| {
            let literal = match text {
                Ok(text) => serde_json::to_string(text).unwrap_or_default(),
                Err(fragment) => NOT_A_STRING[fragment % NOT_A_STRING.len()].to_owned(),
            };
            let padding = format!("\"{}\"", &"k3Jx"[..shape / shapes.len() % 5]);
            let data = shapes[shape % shapes.len()].replace("TEXT", &literal).replace("PAD", &padding);
            super::SseEvent::new("message", &data)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = r#"{"id":"c1","choices":[{"delta":{"content":"Hello"},"finish_reason":null}]}"#;

    fn kept_from(data: &str, contents: &str) -> TextShape {
        let at = data.find(contents).unwrap_or_default();
        let mut shape = TextShape::default();
        shape.keep(data, quoted(data, &data[at..at + contents.len()]).unwrap_or_default(), None);
        shape
    }

    #[test]
    fn a_chunk_alike_but_for_its_text_gives_its_text_unescaped() {
        let shape = kept_from(FIRST, "Hello");
        let next = r#"{"id":"c1","choices":[{"delta":{"content":" w\"or\u00e9ld\n"},"finish_reason":null}]}"#;
        assert_eq!(shape.text(next).as_deref(), Some(" w\"or\u{e9}ld\n"));
        let empty = r#"{"id":"c1","choices":[{"delta":{"content":""},"finish_reason":null}]}"#;
        assert_eq!(shape.text(empty).as_deref(), Some(""), "an empty text is still the text");
    }

    #[test]
    fn anything_but_one_string_between_the_same_bytes_is_parsed_whole() {
        let shape = kept_from(FIRST, "Hello");
        let unlike = [
            // another field changed
            r#"{"id":"c2","choices":[{"delta":{"content":"Hello"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"Hello"},"finish_reason":"stop"}]}"#,
            // a quote ends the string early: the bytes between are no one string
            r#"{"id":"c1","choices":[{"delta":{"content":"a","role":"x"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"a"},"finish_reason":"stop"},{"delta":{"content":"b"},"finish_reason":null}]}"#,
            // no string at all, or a broken one
            r#"{"id":"c1","choices":[{"delta":{"content":null},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"a\"},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"delta":{"content":"\q"},"finish_reason":null}]}"#,
            // too short to hold the bytes before and after
            r#"{"id":"c1","choices":[{"delta":{"content":"}]}"#,
            "",
        ];
        for data in unlike {
            assert_eq!(shape.text(data), None, "{data} is parsed whole");
        }
    }

    #[test]
    fn nothing_is_kept_from_a_string_that_is_not_in_the_chunk() {
        let mut shape = TextShape::default();
        shape.keep(FIRST, "\"Hello\"", None);
        assert_eq!(shape.text(FIRST), None, "a copy of the text is no place in the chunk");
        let mut shape = kept_from(FIRST, "Hello");
        shape.clear();
        assert_eq!(shape.text(FIRST), None, "a cleared shape matches nothing");
        assert_eq!(quoted(FIRST, "Hello"), None, "a string from elsewhere has no quotes in the chunk");
    }
}
