//! Reply text made fit to be read aloud: markdown that a listener cannot see is taken out
//! (code blocks, link targets, bare URLs, emphasis marks, headers, bullets, rules), then the
//! text is cut to what a voice note should hold and to the provider's limit.

use std::sync::LazyLock;

use regex::Regex;

/// Longest text spoken in one reply (Hermes's cap), before the provider's own limit.
pub const MAX_SPOKEN_CHARS: usize = 4000;

static CODE_BLOCK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?s)```.*?```").unwrap());
static LINK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"!?\[([^\]]*)\]\([^)]*\)").unwrap());
static URL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"https?://\S+").unwrap());
static BOLD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\*\*([^*]+)\*\*|__([^_]+)__").unwrap());
static ITALIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\*([^*\n]+)\*|\b_([^_\n]+)_\b").unwrap());
static CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]*)`").unwrap());
static HEADER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s{0,3}#{1,6}\s+").unwrap());
static BULLET: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(?:[-*+]|\d+[.)])\s+").unwrap());
static RULE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*(?:[-*_]\s*){3,}$").unwrap());
static BLANKS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\n{3,}").unwrap());

/// `text` without the markdown a listener cannot hear.
pub fn strip(text: &str) -> String {
    let text = CODE_BLOCK.replace_all(text, " ");
    let text = LINK.replace_all(&text, "$1");
    let text = URL.replace_all(&text, "");
    let text = RULE.replace_all(&text, "");
    let text = BOLD.replace_all(&text, "$1$2");
    let text = ITALIC.replace_all(&text, "$1$2");
    let text = CODE.replace_all(&text, "$1");
    let text = HEADER.replace_all(&text, "");
    let text = BULLET.replace_all(&text, "");
    let text = BLANKS.replace_all(&text, "\n\n");
    text.trim().to_owned()
}

/// The first `max` characters of `text` (a cut, never a refusal).
pub fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_listener_cannot_see_is_removed() {
        let cases = [
            ("**Bold** and *it* and __b__", "Bold and it and b"),
            ("See [the docs](https://x.test/a) now", "See the docs now"),
            ("Go to https://x.test/a?b=c now", "Go to  now"),
            ("# Title\n## Sub\ntext", "Title\nSub\ntext"),
            ("- one\n* two\n1. three", "one\ntwo\nthree"),
            ("before\n```rust\nfn x() {}\n```\nafter", "before\n \nafter"),
            ("run `ls -l` here", "run ls -l here"),
            ("a\n\n---\n\n\n\nb", "a\n\nb"),
            ("snake_case_name stays", "snake_case_name stays"),
        ];
        for (input, spoken) in cases {
            assert_eq!(strip(input), spoken, "{input:?}");
        }
    }

    #[test]
    fn cutting_counts_characters_not_bytes() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("hi", 10), "hi");
        assert_eq!(cut("日本語", 1), "日");
    }
}
