//! Text helpers shared by the agent and the emulator: the one streaming
//! UTF-8 decoder (kernel output arrives in arbitrary byte chunks) and the one
//! number formatter of every message that shows a number.

/// Incremental UTF-8 decoding of a byte stream: a character split across two
/// reads is rebuilt, invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes what can be decoded, keeping an incomplete trailing character.
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    // `valid` was just checked by from_utf8, so this never falls back.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match err.error_len() {
                        Some(len) => {
                            out.push('\u{FFFD}');
                            rest = &after[len..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }
}

/// `1500` -> `1,500` (en-US grouping, as every rayito message).
pub(crate) fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_split_characters() {
        let mut dec = Utf8Decoder::default();
        let bytes = "añb".as_bytes();
        assert_eq!(dec.decode(&bytes[..2]), "a");
        assert_eq!(dec.decode(&bytes[2..]), "ñb");
        assert_eq!(dec.decode(b"\xffx"), "\u{FFFD}x");
    }

    #[test]
    fn groups_thousands_like_en_us() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(300_000), "300,000");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}
