//! POSIX shell quoting for the commands the template writes (ready checks,
//! `dnf install`, `npm install`).

/// `word` as one POSIX shell word: unchanged when it holds only characters
/// no shell treats specially (`[A-Za-z0-9_@%+=:,./-]`, the reference's safe
/// set), otherwise in single quotes with each `'` written as `'"'"'`. The
/// empty word is `''`.
pub(crate) fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if word.is_empty() {
        return "''".to_owned();
    }
    if word.chars().all(safe) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', "'\"'\"'"))
}

/// Each word quoted, joined by single spaces.
pub(crate) fn quote_all<'a>(words: impl IntoIterator<Item = &'a String>) -> String {
    words
        .into_iter()
        .map(|w| quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_like_a_posix_shell_needs() {
        assert_eq!(quote("nginx"), "nginx");
        assert_eq!(quote("python3.12-devel"), "python3.12-devel");
        assert_eq!(quote("a=b,c:d/e@f%g+h"), "a=b,c:d/e@f%g+h");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a;rm -rf /"), "'a;rm -rf /'");
        assert_eq!(quote("ünï"), "'ünï'");
    }
}
