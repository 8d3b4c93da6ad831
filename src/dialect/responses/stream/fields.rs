//! The shapes the Responses stream writes: the fixed text around each kind
//! of delta, and the fields of the events serialised whole.

use serde::Serialize;
use serde_json::Value;

/// What a kind of delta event writes around its sequence number and text.
pub(super) struct DeltaKind<'a> {
    pub(super) head: &'static [u8],
    pub(super) tail: &'a [u8],
}

/// An `output_text.delta`.
pub(super) const TEXT_DELTA: DeltaKind<'static> = DeltaKind {
    head: b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":",
    tail: b",\"logprobs\":[]}\n\n",
};

/// A `reasoning_summary_text.delta`.
pub(super) const SUMMARY_DELTA: DeltaKind<'static> = DeltaKind {
    head: b"event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":",
    tail: b"}\n\n",
};

/// A `function_call_arguments.delta`.
pub(super) const ARGUMENTS_DELTA: DeltaKind<'static> = DeltaKind {
    head: b"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":",
    tail: b"}\n\n",
};

/// An event: its type, its number, then its own fields.
#[derive(Serialize)]
pub(super) struct Tagged<'a, T> {
    #[serde(rename = "type")]
    pub(super) kind: &'a str,
    pub(super) sequence_number: u64,
    #[serde(flatten)]
    pub(super) fields: &'a T,
}

/// The fields of an event that carries the whole `response`.
#[derive(Serialize)]
pub(super) struct Wrapped {
    pub(super) response: Value,
}

/// The fields of `output_item.added` and `.done`.
#[derive(Serialize)]
pub(super) struct ItemDone<'a> {
    pub(super) output_index: usize,
    pub(super) item: &'a Value,
}

/// Where a part's event points: its item, the item's place, and the part's.
#[derive(Serialize, Clone, Copy, Default)]
pub(super) struct PartAt<'a> {
    pub(super) item_id: &'a str,
    pub(super) output_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) content_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) summary_index: Option<u32>,
}

/// The fields of a `.done` event of a part or a call, borrowed from its item.
#[derive(Serialize, Default)]
pub(super) struct Done<'a> {
    #[serde(flatten)]
    pub(super) at: PartAt<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) text: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) part: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) input: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) logprobs: Option<&'a Value>,
}
