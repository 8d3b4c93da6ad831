//! The ways a simulated provider can misbehave: the fault classes baton
//! must survive before and after the first token, and the misbehaving bytes
//! of the chaos benchmark.

/// A way for a simulated provider to misbehave: one fault class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Accept the connection and close it at once, without an answer.
    Refuse,
    /// Answer 503 with a JSON error body.
    Http5xx,
    /// Answer 429 with `Retry-After`.
    Http429,
    /// Accept the request and never answer.
    StallHeaders,
    /// Send 200 and SSE headers, then nothing.
    StallFirstToken,
    /// Send the provider's pre-token events (role chunk, `message_start`, ping), then nothing.
    RoleThenStall,
    /// Send 200 and SSE headers, then close the connection.
    CloseBeforeToken,
    /// Send an event no decoder can read.
    Malformed,
    /// Send the provider's error event before any token.
    ErrorEvent,
    /// Answer correctly, but only after [`MockProvider::slow_first_token`](super::MockProvider::slow_first_token).
    SlowFirstToken,
    /// Send a few tokens, then nothing.
    MidstreamStall,
    /// Send a few tokens, then end the body without the end marker.
    MidstreamClose,
    /// Send a few tokens, then an event no decoder can read.
    MidstreamMalformed,
    /// Send a few tokens, then the provider's error event.
    MidstreamErrorEvent,
    /// Answer 200 with a JSON body instead of an event stream.
    NotSse,
    /// Answer 400: the request itself is wrong, and no other provider would take it.
    BadRequest,
    /// Answer 400 with the provider's own words for a prompt over the context window.
    ContextLength,
    /// Send 200 and SSE headers, then `data: ` and bytes without a newline,
    /// as fast as the client reads them, until it goes away.
    DataFlood,
    /// Answer correctly, after a first event whose one line is several MiB
    /// long (an unknown field of padding that decoders ignore).
    HugeLine,
    /// Send a first event that is JSON of the provider's shape with the
    /// wrong types (a number for the text, a string for an index).
    WrongTypes,
    /// Answer correctly, with every usage count at `u64::MAX`.
    OverflowUsage,
    /// Answer 429 with `Retry-After: 18446744073709551615` (`u64::MAX` seconds).
    RetryAfterOverflow,
    /// Answer correctly, then, if the connection is still idle 20 ms later,
    /// write a second whole response on it that no request asked for.
    StrayResponse,
    /// Answer correctly, with a second whole response that no request asked
    /// for right behind it, in the same write.
    TrailingResponse,
    /// Answer with the provider's content-filter refusal before any token
    /// (OpenAI's and Azure's `content_filter`, Anthropic's `refusal`,
    /// Gemini's `SAFETY`): an answer, not a fault, unless the route says so.
    ContentFilter,
    /// Answer 401, as a provider answers a credential it no longer takes:
    /// an expired or revoked token.
    Unauthorized,
    /// Answer a token exchange (Vertex AI's) with 429, as Google's token
    /// endpoint does when it throttles; chat requests are answered. A kind
    /// without a token exchange is not given this fault.
    TokenThrottled,
}

impl Fault {
    /// The classes that strike before the first token, from refuse to
    /// slow_first_token: what the fault benchmark and the chaos mix run.
    pub const PRE_COMMIT: [Fault; 10] = [
        Fault::Refuse,
        Fault::Http5xx,
        Fault::Http429,
        Fault::StallHeaders,
        Fault::StallFirstToken,
        Fault::RoleThenStall,
        Fault::CloseBeforeToken,
        Fault::Malformed,
        Fault::ErrorEvent,
        Fault::SlowFirstToken,
    ];

    /// Every fault a simulated provider can inject.
    pub const ALL: [Fault; 27] = {
        let mut all = [Fault::Refuse; 27];
        let mut i = 0;
        while i < all.len() {
            let pre = Self::PRE_COMMIT.len();
            all[i] = if i < pre { Self::PRE_COMMIT[i] } else { Self::LATER[i - pre] };
            i += 1;
        }
        all
    };

    /// The faults that are not [`Fault::PRE_COMMIT`]'s: mid-stream and misbehaving bytes.
    const LATER: [Fault; 17] = [
        Fault::MidstreamStall,
        Fault::MidstreamClose,
        Fault::MidstreamMalformed,
        Fault::MidstreamErrorEvent,
        Fault::NotSse,
        Fault::BadRequest,
        Fault::ContextLength,
        Fault::DataFlood,
        Fault::HugeLine,
        Fault::WrongTypes,
        Fault::OverflowUsage,
        Fault::RetryAfterOverflow,
        Fault::StrayResponse,
        Fault::TrailingResponse,
        Fault::ContentFilter,
        Fault::Unauthorized,
        Fault::TokenThrottled,
    ];

    /// Whether the fault cuts an answer short after a few tokens.
    pub fn cuts_short(self) -> bool {
        matches!(
            self,
            Fault::MidstreamStall | Fault::MidstreamClose | Fault::MidstreamMalformed | Fault::MidstreamErrorEvent
        )
    }

    /// The class name used on the command line and in the docs.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Refuse => "refuse",
            Fault::Http5xx => "http_5xx",
            Fault::Http429 => "http_429",
            Fault::StallHeaders => "stall_headers",
            Fault::StallFirstToken => "stall_first_token",
            Fault::RoleThenStall => "role_then_stall",
            Fault::CloseBeforeToken => "close_before_token",
            Fault::Malformed => "malformed",
            Fault::ErrorEvent => "error_event",
            Fault::SlowFirstToken => "slow_first_token",
            Fault::MidstreamStall => "midstream_stall",
            Fault::MidstreamClose => "midstream_close",
            Fault::MidstreamMalformed => "midstream_malformed",
            Fault::MidstreamErrorEvent => "midstream_error_event",
            Fault::NotSse => "not_sse",
            Fault::BadRequest => "bad_request",
            Fault::ContextLength => "context_length",
            Fault::DataFlood => "data_flood",
            Fault::HugeLine => "huge_line",
            Fault::WrongTypes => "wrong_types",
            Fault::OverflowUsage => "overflow_usage",
            Fault::RetryAfterOverflow => "retry_after_overflow",
            Fault::StrayResponse => "stray_response",
            Fault::TrailingResponse => "trailing_response",
            Fault::ContentFilter => "content_filter",
            Fault::Unauthorized => "unauthorized",
            Fault::TokenThrottled => "token_throttled",
        }
    }

    /// Parses a class name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|fault| fault.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_a_distinct_name_that_parses_back() {
        for fault in Fault::ALL {
            assert_eq!(Fault::from_name(fault.name()), Some(fault), "{} parses back", fault.name());
        }
        let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len(), "no two faults share a name");
    }
}
