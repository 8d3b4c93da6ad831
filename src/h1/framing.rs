//! A message body taken out of the bytes read so far, without I/O: by its
//! length, by its chunks, or up to the close. The data is split out of the
//! read buffer, not copied, and every piece of framing a peer sends is
//! bounded.

use bytes::{Buf, Bytes, BytesMut};

use super::FramingError;

/// How a message's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body at all (204, 304, the answer to `HEAD`, a request without one).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the peer closes the connection (a response only).
    Close,
}

/// The longest chunk-size line (size and extensions) read.
pub(super) const SIZE_LINE_LIMIT: usize = 4 * 1024;

/// The most trailer bytes read (and thrown away) after the last chunk.
pub(super) const TRAILER_LIMIT: usize = 16 * 1024;

/// The most trailer fields read after the last chunk.
pub(super) const MAX_TRAILERS: usize = 32;

/// What the bytes read so far hold next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Body data.
    Data(Bytes),
    /// More bytes are needed.
    More,
    /// The body's end: what follows in the buffer is not part of it.
    End,
}

/// Where a body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyState {
    /// This many more bytes, then the end.
    Length(u64),
    /// Until the close.
    Close,
    /// Chunked, at `Chunk`.
    Chunked(Chunk),
    /// Over.
    Done,
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// At a chunk-size line.
    Size,
    /// In a chunk's data, this many bytes from its end.
    Data(u64),
    /// At the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk, at its trailers.
    Trailers,
}

impl BodyState {
    /// Where a body framed by `framing` starts.
    pub fn new(framing: Framing) -> Self {
        match framing {
            Framing::Empty | Framing::Length(0) => BodyState::Done,
            Framing::Length(length) => BodyState::Length(length),
            Framing::Chunked => BodyState::Chunked(Chunk::Size),
            Framing::Close => BodyState::Close,
        }
    }

    /// The next piece of the body in `buf`, taken out of it.
    pub fn step(&mut self, buf: &mut BytesMut) -> Result<Step, FramingError> {
        match *self {
            BodyState::Done => Ok(Step::End),
            BodyState::Close if buf.is_empty() => Ok(Step::More),
            BodyState::Close => Ok(Step::Data(buf.split().freeze())),
            BodyState::Length(left) => Ok(match take(buf, left) {
                None => Step::More,
                Some((data, left)) => {
                    *self = if left == 0 { BodyState::Done } else { BodyState::Length(left) };
                    Step::Data(data)
                }
            }),
            BodyState::Chunked(chunk) => {
                let (next, step) = chunked(chunk, buf)?;
                *self = next;
                Ok(step)
            }
        }
    }

    /// What the close of the connection means here: the end of a body that
    /// runs to it, else a body cut short.
    pub fn at_close(&mut self) -> Result<Step, FramingError> {
        match *self {
            BodyState::Close | BodyState::Done => {
                *self = BodyState::Done;
                Ok(Step::End)
            }
            _ => Err(FramingError::CutShort),
        }
    }
}

/// Up to `left` bytes of `buf` and how many are left after them; none when
/// `buf` is empty.
fn take(buf: &mut BytesMut, left: u64) -> Option<(Bytes, u64)> {
    if buf.is_empty() {
        return None;
    }
    let len = usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()));
    Some((buf.split_to(len).freeze(), left - len as u64))
}

/// One step through a chunked body at `chunk`: the state after it, and what
/// it found. Framing with nothing in it (a size line, a CRLF) is passed over
/// in the same step.
fn chunked(mut chunk: Chunk, buf: &mut BytesMut) -> Result<(BodyState, Step), FramingError> {
    loop {
        chunk = match chunk {
            Chunk::Size => match size_line(buf)? {
                None => return Ok((BodyState::Chunked(chunk), Step::More)),
                Some(0) => Chunk::Trailers,
                Some(size) => Chunk::Data(size),
            },
            Chunk::Data(left) => {
                return Ok(match take(buf, left) {
                    None => (BodyState::Chunked(chunk), Step::More),
                    Some((data, 0)) => (BodyState::Chunked(Chunk::DataEnd), Step::Data(data)),
                    Some((data, left)) => (BodyState::Chunked(Chunk::Data(left)), Step::Data(data)),
                });
            }
            Chunk::DataEnd => match buf.get(..2) {
                Some(b"\r\n") => {
                    buf.advance(2);
                    Chunk::Size
                }
                None if buf.first().is_none_or(|byte| *byte == b'\r') => {
                    return Ok((BodyState::Chunked(chunk), Step::More));
                }
                _ => return Err(FramingError::NoCrlfAfterData),
            },
            Chunk::Trailers => {
                return Ok(match trailers(buf)? {
                    true => (BodyState::Done, Step::End),
                    false => (BodyState::Chunked(chunk), Step::More),
                });
            }
        };
    }
}

/// The size of the chunk whose size line starts `buf`, taken out of it;
/// none while the line is incomplete. The line is read by RFC 9112 §7.1's
/// grammar: hexadecimal digits, then extensions (white space only before
/// each `;`), then CRLF. A line ended by a bare LF, or holding a CR or another control
/// byte, is refused rather than ended somewhere else: a peer that ends it
/// elsewhere would find a request (or a response) inside this body.
fn size_line(buf: &mut BytesMut) -> Result<Option<u64>, FramingError> {
    match buf.first() {
        None => return Ok(None),
        Some(byte) if !byte.is_ascii_hexdigit() => return Err(FramingError::InvalidChunkSize),
        Some(_) => {}
    }
    let Some(end) = memchr::memchr(b'\n', &buf[..buf.len().min(SIZE_LINE_LIMIT)]) else {
        return if buf.len() >= SIZE_LINE_LIMIT { Err(FramingError::LongSizeLine) } else { Ok(None) };
    };
    let line = buf[..end].strip_suffix(b"\r").ok_or(FramingError::BareLineFeed)?;
    let digits = line.iter().take_while(|byte| byte.is_ascii_hexdigit()).count();
    let size = line[..digits].iter().try_fold(0u64, |size, digit| {
        let value = u64::from((*digit as char).to_digit(16).unwrap_or(0));
        size.checked_mul(16).and_then(|size| size.checked_add(value))
    });
    let size = size.ok_or(FramingError::InvalidChunkSize)?;
    let after = &line[digits..];
    let extensions = &after[after.iter().take_while(|byte| matches!(byte, b' ' | b'\t')).count()..];
    match extensions.first() {
        None if after.is_empty() => {}
        // White space belongs before an extension only (`chunk-ext`'s BWS).
        None => return Err(FramingError::InvalidChunkSize),
        Some(b';') if extensions.iter().all(|byte| *byte == b'\t' || (b' '..0x7f).contains(byte) || *byte >= 0x80) => {}
        Some(b';') => return Err(FramingError::InvalidChunkExtension),
        Some(_) => return Err(FramingError::InvalidChunkSize),
    }
    buf.advance(end + 1);
    Ok(Some(size))
}

/// Whether the trailers (none, most often) and the blank line that ends
/// them are all in `buf`, taken out of it when they are.
fn trailers(buf: &mut BytesMut) -> Result<bool, FramingError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILERS];
    match httparse::parse_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete((len, _))) => {
            buf.advance(len);
            Ok(true)
        }
        Ok(httparse::Status::Partial) if buf.len() >= TRAILER_LIMIT => Err(FramingError::LargeTrailers),
        Ok(httparse::Status::Partial) => Ok(false),
        Err(httparse::Error::TooManyHeaders) => Err(FramingError::ManyTrailers),
        Err(err) => Err(FramingError::InvalidTrailers(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes `wire` fed in the pieces `cuts` make, returning the body and
    /// what was left after its end.
    fn decode(framing: Framing, wire: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut state = BodyState::new(framing);
        let (mut buf, mut body, mut fed) = (BytesMut::new(), Vec::new(), 0);
        let mut edges: Vec<usize> = cuts.iter().map(|cut| cut % (wire.len() + 1)).collect();
        edges.sort_unstable();
        edges.push(wire.len());
        for edge in edges {
            buf.extend_from_slice(&wire[fed..edge.max(fed)]);
            fed = edge.max(fed);
            loop {
                match state.step(&mut buf).map_err(|err| err.describe("the response", "the provider"))? {
                    Step::Data(data) => body.extend_from_slice(&data),
                    Step::More => break,
                    Step::End => return Ok((body, [&buf[..], &wire[fed..]].concat())),
                }
            }
        }
        match state.at_close().map_err(|err| err.describe("the response", "the provider"))? {
            Step::End => Ok((body, buf.to_vec())),
            step => Err(format!("{step:?} at the close")),
        }
    }

    /// `body` in chunks of `sizes` (cycled), with an extension on some and
    /// a trailer at the end.
    fn chunked_wire(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut wire = Vec::new();
        let mut rest = body;
        for (i, size) in sizes.iter().cycle().enumerate() {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at((*size).clamp(1, rest.len()));
            let extension = if i % 2 == 1 { ";name=\"value\"" } else { "" };
            wire.extend_from_slice(format!("{:X}{extension}\r\n", piece.len()).as_bytes());
            wire.extend_from_slice(piece);
            wire.extend_from_slice(b"\r\n");
            rest = after;
        }
        wire.extend_from_slice(b"0\r\nx-checksum: abc\r\n\r\n");
        wire
    }

    #[test]
    fn a_chunked_body_is_decoded_whatever_byte_it_is_split_at() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-trailer: yes\r\n\r\nNEXT";
        for cut in 0..=wire.len() {
            let (body, rest) = decode(Framing::Chunked, wire, &[cut]).expect("decodes");
            assert_eq!(body, b"hello, world", "split at {cut}");
            assert_eq!(rest, b"NEXT", "split at {cut}: what follows the body stays in the buffer");
        }
    }

    #[test]
    fn a_length_body_ends_at_its_length_and_a_close_body_at_the_close() {
        assert_eq!(decode(Framing::Length(5), b"helloNEXT", &[2]), Ok((b"hello".to_vec(), b"NEXT".to_vec())));
        assert_eq!(decode(Framing::Close, b"hello", &[1, 3]), Ok((b"hello".to_vec(), Vec::new())));
        let short = decode(Framing::Length(9), b"hello", &[]);
        assert!(short.as_ref().is_err_and(|err| err.contains("before the body's end")), "{short:?}");
        let cut = decode(Framing::Chunked, b"5\r\nhel", &[]);
        assert!(cut.as_ref().is_err_and(|err| err.contains("before the body's end")), "{cut:?}");
    }

    #[test]
    fn bad_chunk_framing_is_refused_saying_what_is_wrong() {
        for (wire, says) in [
            (&b"zz\r\nhello\r\n0\r\n\r\n"[..], "chunk size"),
            (b"\r\nhello\r\n0\r\n\r\n", "chunk size"),
            (b"fffffffffffffffff\r\n", "chunk size"),
            (b"5\r\nhelloXX0\r\n\r\n", "CRLF"),
            // RFC 9112 §7.1.1 has no LF in an extension: read on to the next
            // CRLF, this line would make `28` the size and what follows a request.
            (b"2;\nZZ\r\n28\r\n0\r\n\r\nGET /SMUGGLED HTTP/1.1\r\n\r\n", "bare LF"),
            (b"5\nhello\r\n0\r\n\r\n", "bare LF"),
            (b"5;a=\rb\r\nhello\r\n0\r\n\r\n", "chunk extension"),
            (b"5;a=\x01\r\nhello\r\n0\r\n\r\n", "chunk extension"),
            (b"5 x\r\nhello\r\n0\r\n\r\n", "chunk size"),
            (b"5 \r\nhello\r\n0\r\n\r\n", "chunk size"),
        ] {
            let got = decode(Framing::Chunked, wire, &[]);
            assert!(got.as_ref().is_err_and(|err| err.contains(says)), "{wire:?}: {got:?}");
        }
        for fine in [&b"5 \t;a=\"b;c\"\r\nhello\r\n0\r\n\r\n"[..], b"5\r\nhello\r\n0 ;x\r\n\r\n"] {
            assert_eq!(decode(Framing::Chunked, fine, &[]), Ok((b"hello".to_vec(), Vec::new())), "{fine:?}");
        }
        let endless = [b"5;".as_slice(), &[b'x'; SIZE_LINE_LIMIT]].concat();
        assert!(decode(Framing::Chunked, &endless, &[]).is_err_and(|err| err.contains("chunk-size line")));
        let trailers = [b"0\r\n".as_slice(), &b"x-a: 1\r\n".repeat(TRAILER_LIMIT / 8 + 1)].concat();
        assert!(decode(Framing::Chunked, &trailers, &[]).is_err_and(|err| err.contains("trailers")));
    }

    proptest! {
        #[test]
        fn a_chunked_body_decodes_whatever_the_reads(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            sizes in proptest::collection::vec(1usize..80, 1..6),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let wire = [chunked_wire(&body, &sizes), b"AFTER".to_vec()].concat();
            let decoded = decode(Framing::Chunked, &wire, &cuts);
            prop_assert_eq!(decoded, Ok((body, b"AFTER".to_vec())));
        }
    }
}
