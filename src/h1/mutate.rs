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

/// What every framing fuzz property runs with: 64 cases in `cargo test`,
/// `PROPTEST_CASES` of them in a long run, and no file of failures written
/// into the source tree (a failure prints its input and seed).
#[cfg(test)]
pub(crate) fn fuzz_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(64),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Messages of `whole`, mutated at up to four of the places framing turns on
/// (four inputs in five), or bytes of any kind.
#[cfg(test)]
pub(crate) fn mutated_or_any(
    whole: impl proptest::strategy::Strategy<Value = Vec<u8>> + 'static,
) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let mutations = prop::collection::vec((any::<usize>(), 0u8..3, prop::sample::select(SHARP)), 0..4);
    let mutated = (whole, mutations).prop_map(|(wire, mutations)| mutate(wire, &mutations));
    prop_oneof![4 => mutated, 1 => prop::collection::vec(any::<u8>(), 0..512)]
}
