//! Fresh identifiers for requests and answers: a prefix, then random hex
//! digits. Written digit by digit rather than through `format!`, whose
//! machinery cost a request about 1,000 instructions per id.

/// `prefix` followed by `digits` random lowercase hex digits:
/// `random_id("req_", 16)` is like `req_3f2a9c0d1b7e4f60`.
pub fn random_id(prefix: &str, digits: usize) -> String {
    hex_id(prefix, digits, || fastrand::u64(..))
}

/// `prefix` followed by `digits` hex digits, taken 16 at a time from the
/// words `next` gives, each from its highest digit down, as `{:016x}`
/// writes it.
fn hex_id(prefix: &str, digits: usize, mut next: impl FnMut() -> u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(prefix.len() + digits);
    id.push_str(prefix);
    let mut word = 0;
    for at in 0..digits {
        if at % 16 == 0 {
            word = next();
        }
        let shift = (15 - at % 16) * 4;
        id.push(char::from(DIGITS[((word >> shift) & 0xf) as usize]));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of `words`, one a call, then zeros.
    fn from(words: &[u64]) -> impl FnMut() -> u64 + '_ {
        let mut words = words.iter();
        move || words.next().copied().unwrap_or(0)
    }

    #[test]
    fn each_word_is_written_as_format_writes_it_padded_to_sixteen_digits() {
        for word in [0, 1, 0xf, 0x1234_5678_9abc_def0, u64::MAX, 0x00ff_0000_0000_00a0] {
            assert_eq!(hex_id("req_", 16, from(&[word])), format!("req_{word:016x}"));
        }
        assert_eq!(hex_id("resp_", 32, from(&[1, u64::MAX])), format!("resp_{:016x}{:016x}", 1, u64::MAX));
        assert_eq!(hex_id("x", 0, from(&[7])), "x");
    }

    #[test]
    fn digits_short_of_a_word_are_its_highest() {
        let words = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];
        assert_eq!(hex_id("msg_", 24, from(&words)), "msg_0123456789abcdeffedcba98");
        assert_eq!(hex_id("", 3, from(&words)), "012");
    }

    #[test]
    fn fresh_ids_differ_and_have_their_length() {
        let (a, b) = (random_id("chatcmpl-", 16), random_id("chatcmpl-", 16));
        assert_ne!(a, b);
        assert_eq!(a.len(), "chatcmpl-".len() + 16);
        assert!(a["chatcmpl-".len()..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{a}");
        assert_eq!(random_id("resp_", 32).len(), "resp_".len() + 32);
        assert_eq!(random_id("msg_", 24).len(), "msg_".len() + 24);
    }
}
