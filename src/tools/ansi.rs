//! ANSI/ECMA-48 escape stripping (Python `tools/ansi_strip.py`): CSI, OSC, DCS/SOS/PM/APC
//! strings, nF escapes, single-byte Fp/Fe/Fs escapes and 8-bit C1 controls.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

static ANSI_ESCAPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?s)\x1b(?:",
        r"\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]",
        r"|\].*?(?:\x07|\x1b\\)",
        r"|[PX^_].*?(?:\x1b\\)",
        r"|[\x20-\x2f]+[\x30-\x7e]",
        r"|[\x30-\x7e]",
        r")",
        r"|\x9b[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]",
        r"|\x9d.*?(?:\x07|\x9c)",
        r"|[\x80-\x9f]",
    ))
    .expect("ANSI escape regex")
});

/// Removes escape sequences; text without ESC or C1 characters is returned unchanged.
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
    let has_escape = text
        .chars()
        .any(|c| c == '\u{1b}' || ('\u{80}'..='\u{9f}').contains(&c));
    if !has_escape {
        return Cow::Borrowed(text);
    }
    ANSI_ESCAPE.replace_all(text, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_every_escape_family() {
        let cases = [
            ("\x1b[31mred\x1b[0m", "red"),
            ("\x1b[?25lhidden", "hidden"),
            ("\x1b]0;title\x07text", "text"),
            ("\x1b]8;;http://x\x1b\\link", "link"),
            ("\x1bPdata\x1b\\after", "after"),
            ("\x1b(Bplain", "plain"),
            ("\x1b=keypad", "keypad"),
            ("\u{9b}1mC1", "C1"),
            ("a\u{85}b", "ab"),
            ("no escapes here", "no escapes here"),
        ];
        for (input, expected) in cases {
            assert_eq!(strip_ansi(input), expected, "{input:?}");
        }
        assert!(matches!(strip_ansi("plain"), Cow::Borrowed(_)));
    }
}
