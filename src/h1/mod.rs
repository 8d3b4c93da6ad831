//! HTTP/1.1 message framing without I/O, shared by both ends baton speaks:
//! the client for provider requests and the server for client requests.
//! How a body is framed ([`Framing`]), taking it out of the bytes read
//! ([`BodyState`]), and the header rules both sides read a head by. Errors
//! are kinds, not text: each side words them for the message it reads and
//! the peer that sent it.

mod framing;
mod headers;
#[cfg(any(test, feature = "test-support"))]
pub mod mutate;

pub use framing::{BodyState, Chunk, Framing, Step};
pub use headers::{HeaderError, content_length, keep_alive, last_token, put_field};

/// What is wrong with a body's framing, as sent by the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingError {
    /// A chunk-size line that is not a hexadecimal size.
    InvalidChunkSize,
    /// A chunk-size line longer than any real one.
    LongSizeLine,
    /// A chunk-size line ended by a bare LF instead of CRLF.
    BareLineFeed,
    /// A chunk extension holding a CR or another control byte.
    InvalidChunkExtension,
    /// A chunk's data not followed by CRLF.
    NoCrlfAfterData,
    /// Trailers larger than baton reads.
    LargeTrailers,
    /// More trailer fields than baton reads.
    ManyTrailers,
    /// Trailers that do not parse.
    InvalidTrailers(httparse::Error),
    /// The connection closed before the body's end.
    CutShort,
}

impl FramingError {
    /// What is wrong, said of `message` ("the response") sent by `peer`
    /// ("the provider").
    pub fn describe(&self, message: &str, peer: &str) -> String {
        match self {
            FramingError::InvalidChunkSize => format!("{message} has a chunk size that is not valid"),
            FramingError::LongSizeLine => {
                format!("{message} has a chunk-size line longer than {} KiB", framing::SIZE_LINE_LIMIT / 1024)
            }
            FramingError::BareLineFeed => format!("{message} has a chunk-size line ended by a bare LF, not CRLF"),
            FramingError::InvalidChunkExtension => {
                format!("{message} has a chunk extension holding a CR or a control character")
            }
            FramingError::NoCrlfAfterData => "a chunk's data is not followed by CRLF".to_owned(),
            FramingError::LargeTrailers => {
                format!("{message}'s trailers are larger than {} KiB", framing::TRAILER_LIMIT / 1024)
            }
            FramingError::ManyTrailers => format!("{message} has more than {} trailers", framing::MAX_TRAILERS),
            FramingError::InvalidTrailers(err) => format!("{message}'s trailers are not valid: {err}"),
            FramingError::CutShort => format!("{peer} closed the connection before the body's end"),
        }
    }
}
