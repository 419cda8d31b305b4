//! Text in PostgreSQL's form. A PostgreSQL `text` value cannot hold U+0000, yet state.db does:
//! Hermes marks structured message content with a leading `"\x00json:"`, and any text from a
//! user or tool may contain one. The PostgreSQL backend stores U+0000 as U+FFFF followed by
//! `0`, and a literal U+FFFF as two, so every string comes back exactly; the transfer writes
//! and reads the same form. (The same mapping as the backend's own writer; once both are on
//! one branch this file should give way to that one.)

use std::borrow::Cow;

/// A noncharacter: ordinary text never contains it.
const ESCAPE: char = '\u{FFFF}';

/// `text` as a PostgreSQL `text` column holds it.
pub fn to_pg(text: &str) -> Cow<'_, str> {
    if !text.contains(['\0', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        match c {
            '\0' => out.extend([ESCAPE, '0']),
            ESCAPE => out.extend([ESCAPE, ESCAPE]),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The text [`to_pg`] was given. An escape followed by anything else is kept as found.
pub fn from_pg(stored: String) -> String {
    if !stored.contains(ESCAPE) {
        return stored;
    }
    let mut out = String::with_capacity(stored.len());
    let mut chars = stored.chars();
    while let Some(c) = chars.next() {
        if c != ESCAPE {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('\0'),
            Some(ESCAPE) | None => out.push(ESCAPE),
            Some(other) => out.extend([ESCAPE, other]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_comes_back_and_plain_text_is_stored_as_is() {
        for text in [
            "plain 部署",
            "",
            "\x00json:[1]",
            "a\u{0}b\u{FFFF}c\u{FFFF}0",
            "\u{FFFF}",
        ] {
            let stored = to_pg(text);
            assert!(!stored.contains('\0'), "{stored:?}");
            assert_eq!(from_pg(stored.into_owned()), text);
        }
        assert!(matches!(to_pg("plain"), Cow::Borrowed("plain")));
        assert_eq!(to_pg("\x00json:"), "\u{FFFF}0json:");
    }
}
