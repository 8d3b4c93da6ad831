//! What a turn asks of its target: the client's request as it came, or the
//! rest of an answer that broke after it reached the client, worded for
//! each target (a prefilled partial answer only where the target takes one,
//! kept reasoning only for the provider that wrote it).

use super::splice;
use crate::config::Target;
use crate::event::ChatRequest;

/// What a turn asks of its target: the client's request, or the rest of an
/// answer that broke after it reached the client.
#[derive(Clone, Copy)]
pub(super) enum Ask<'a> {
    /// The client's request as it came.
    Fresh(&'a ChatRequest),
    /// Continue `partial`, the answer so far to `original`.
    Resume {
        /// The client's request.
        original: &'a ChatRequest,
        /// The text the client already has.
        partial: &'a str,
    },
}

/// The request one target is sent: the client's, or a copy made for the
/// target, boxed — every future of an attempt holds it, and a request in
/// flight holds every such future.
pub(super) enum Asked<'a> {
    Borrowed(&'a ChatRequest),
    Owned(Box<ChatRequest>),
}

impl std::ops::Deref for Asked<'_> {
    type Target = ChatRequest;

    fn deref(&self) -> &ChatRequest {
        match self {
            Asked::Borrowed(request) => request,
            Asked::Owned(request) => request,
        }
    }
}

impl<'a> Ask<'a> {
    /// The client's request, whatever this attempt asks.
    pub(super) fn original(&self) -> &'a ChatRequest {
        match *self {
            Ask::Fresh(request) | Ask::Resume { original: request, .. } => request,
        }
    }

    /// Whether this is the client's own request rather than a continuation.
    pub(super) fn is_fresh(&self) -> bool {
        matches!(self, Ask::Fresh(_))
    }

    /// The request for `target`, and whether it prefills the partial answer:
    /// a continuation does that only where the target declares it can.
    pub(super) fn request_for(&self, target: &Target) -> (Asked<'a>, bool) {
        match *self {
            Ask::Fresh(request) => match request.for_provider(&target.provider.name) {
                Some(read) => (Asked::Owned(Box::new(read)), false),
                None => (Asked::Borrowed(request), false),
            },
            Ask::Resume { original, partial } if target.prefill => {
                (owned_for(target, splice::prefill_request(original, partial)), true)
            }
            Ask::Resume { .. } => (self.instruction(target), false),
        }
    }

    /// A continuation asked for in a final user message, for a target that
    /// rejected the prefilled one (a fresh request stays as it is).
    pub(super) fn instruction(&self, target: &Target) -> Asked<'a> {
        match *self {
            Ask::Fresh(_) => self.request_for(target).0,
            Ask::Resume { original, partial } => owned_for(target, splice::instruction_request(original, partial)),
        }
    }
}

/// `request`, made for `target`, as the target may read it.
fn owned_for<'a>(target: &Target, request: ChatRequest) -> Asked<'a> {
    let read = request.for_provider(&target.provider.name).unwrap_or(request);
    Asked::Owned(Box::new(read))
}
