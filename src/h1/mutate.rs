//! Small changes to wire bytes at the places framing turns on, for the
//! fuzz properties of both ends and the differential test against hyper:
//! one way to mutate a message, so every test of framing breaks it alike.

/// Bytes framing turns on: line ends, white space, separators, a digit, a
/// hex letter, a quote, and two control bytes.
pub const SHARP: &[u8] = b"\r\n \t;:,0aF\"\x00\x7f";

/// `wire` with each mutation applied in turn: `(place, how, byte)` inserts
/// `byte` (`how` 0), removes a byte (1) or overwrites one with `byte` (2) at
/// `place`, taken modulo the length so any place fits any message.
pub fn mutate(mut wire: Vec<u8>, mutations: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(place, how, byte) in mutations {
        let at = place % (wire.len() + 1);
        match how {
            0 => wire.insert(at, byte),
            1 if at < wire.len() => {
                wire.remove(at);
            }
            _ if at < wire.len() => wire[at] = byte,
            _ => {}
        }
    }
    wire
}
