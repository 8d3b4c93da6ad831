//! Fresh identifiers for requests and answers: a prefix, then random 64-bit
//! words in lowercase hex. Written digit by digit rather than through
//! `format!`, whose machinery cost a request about 1,000 instructions per id.

/// `prefix` followed by `words` random 64-bit words, each as 16 lowercase
/// hex digits: `random_id("req_", 1)` is like `req_3f2a9c0d1b7e4f60`.
pub fn random_id(prefix: &str, words: usize) -> String {
    hex_id(prefix, std::iter::repeat_with(|| fastrand::u64(..)).take(words))
}

/// `prefix` followed by each of `words` as 16 lowercase hex digits.
fn hex_id(prefix: &str, words: impl ExactSizeIterator<Item = u64>) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(prefix.len() + 16 * words.len());
    id.push_str(prefix);
    for word in words {
        id.extend((0..16).rev().map(|nibble| char::from(DIGITS[((word >> (nibble * 4)) & 0xf) as usize])));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_word_is_written_as_format_writes_it_padded_to_sixteen_digits() {
        for word in [0, 1, 0xf, 0x1234_5678_9abc_def0, u64::MAX, 0x00ff_0000_0000_00a0] {
            assert_eq!(hex_id("req_", [word].into_iter()), format!("req_{word:016x}"));
        }
        assert_eq!(hex_id("resp_", [1, u64::MAX].into_iter()), format!("resp_{:016x}{:016x}", 1, u64::MAX));
        assert_eq!(hex_id("x", std::iter::empty()), "x");
    }

    #[test]
    fn fresh_ids_differ_and_have_their_length() {
        let (a, b) = (random_id("chatcmpl-", 1), random_id("chatcmpl-", 1));
        assert_ne!(a, b);
        assert_eq!(a.len(), "chatcmpl-".len() + 16);
        assert!(a["chatcmpl-".len()..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{a}");
        assert_eq!(random_id("resp_", 2).len(), "resp_".len() + 32);
    }
}
