//! Text handed to the model is cut at 100,000 characters (characters, not
//! bytes: a cut never splits one), with a suffix saying how much is left.

/// The most characters of one text field a tool result carries.
pub const MAX_CHARS: usize = 100_000;

/// The suffix of a cut text (`{n}`: the characters left out).
pub const SUFFIX: &str = "\n[{n} more characters]";

/// `text` cut to `max` characters plus the suffix, and whether it was cut.
pub fn truncate_to(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        None => (text.to_owned(), false),
        Some((cut, _)) => {
            let left = text[cut..].chars().count();
            let mut out = String::with_capacity(cut + 32);
            out.push_str(&text[..cut]);
            out.push_str(&SUFFIX.replace("{n}", &left.to_string()));
            (out, true)
        }
    }
}

/// [`truncate_to`] at [`MAX_CHARS`].
pub fn truncate(text: &str) -> (String, bool) {
    truncate_to(text, MAX_CHARS)
}

/// The first `max` characters of `data` read as UTF-8 (each invalid
/// sequence one U+FFFD, as `String::from_utf8_lossy` reads it), and how
/// many bytes of `data` they took.
pub fn prefix_chars(data: &[u8], max: usize) -> (String, usize) {
    let mut text = String::new();
    let mut chars = 0;
    let mut consumed = 0;
    for chunk in data.utf8_chunks() {
        for c in chunk.valid().chars() {
            if chars == max {
                return (text, consumed);
            }
            text.push(c);
            chars += 1;
            consumed += c.len_utf8();
        }
        if !chunk.invalid().is_empty() {
            if chars == max {
                return (text, consumed);
            }
            text.push(char::REPLACEMENT_CHARACTER);
            chars += 1;
            consumed += chunk.invalid().len();
        }
    }
    (text, consumed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_counts_the_bytes_it_took() {
        assert_eq!(prefix_chars("héllo".as_bytes(), 2), ("hé".to_owned(), 3));
        assert_eq!(
            prefix_chars("héllo".as_bytes(), 99),
            ("héllo".to_owned(), 6)
        );
        // An invalid byte is one character; a sequence cut at the end too.
        assert_eq!(prefix_chars(b"a\xffb", 2), ("a\u{fffd}".to_owned(), 2));
        assert_eq!(prefix_chars(b"ab\xc3", 3), ("ab\u{fffd}".to_owned(), 3));
        assert_eq!(prefix_chars(b"", 3), (String::new(), 0));
    }

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(truncate("hello"), ("hello".to_owned(), false));
        let exactly = "é".repeat(MAX_CHARS);
        assert_eq!(truncate(&exactly), (exactly.clone(), false));
    }

    #[test]
    fn long_text_is_cut_by_characters_with_the_count_left() {
        // Two-byte characters: a byte cut would split one.
        let text = "é".repeat(MAX_CHARS + 7);
        let (cut, truncated) = truncate(&text);
        assert!(truncated);
        assert_eq!(
            cut,
            format!("{}\n[7 more characters]", "é".repeat(MAX_CHARS))
        );
        let (cut, _) = truncate_to("a🦀b🦀c", 2);
        assert_eq!(cut, "a🦀\n[3 more characters]");
    }
}
