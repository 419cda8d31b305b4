//! Text as PostgreSQL can hold it. PostgreSQL's `text` cannot contain U+0000, which state.db
//! uses to mark structured message content (`"\x00json:"`) and which any text from a user or a
//! tool may contain. Such values are stored with U+0000 written as U+FFFF `0` (and a literal
//! U+FFFF doubled), so every string round-trips exactly and text without either character,
//! almost all of it, is stored unchanged. Whatever copies rows between the backends
//! (`hermesd state migrate`) must apply the same mapping.

use std::borrow::Cow;

/// The escape character: a Unicode noncharacter, never part of ordinary text.
const ESCAPE: char = '\u{FFFF}';

/// `text` as stored in a PostgreSQL `text` column.
pub fn to_pg(text: &str) -> Cow<'_, str> {
    if !text.contains(['\0', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => {
                out.push(ESCAPE);
                out.push('0');
            }
            ESCAPE => {
                out.push(ESCAPE);
                out.push(ESCAPE);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The original text of a value stored by [`to_pg`].
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
            // Not written by `to_pg` (another writer's text): keep it as it is.
            Some(other) => {
                out.push(ESCAPE);
                out.push(other);
            }
        }
    }
    out
}

/// [`to_pg`] for an optional column value.
pub fn opt_to_pg(text: Option<&str>) -> Option<String> {
    text.map(|t| to_pg(t).into_owned())
}

/// [`from_pg`] for an optional column value.
pub fn opt_from_pg(stored: Option<String>) -> Option<String> {
    stored.map(from_pg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_round_trips_and_plain_text_is_unchanged() {
        for text in [
            "plain",
            "",
            "\x00json:[1]",
            "a\u{0}b\u{FFFF}c\u{FFFF}0",
            "\u{FFFF}",
            "\u{FFFF}\u{FFFF}0\0",
        ] {
            let stored = to_pg(text);
            assert!(!stored.contains('\0'), "{stored:?}");
            assert_eq!(from_pg(stored.into_owned()), text);
        }
        assert!(matches!(to_pg("plain"), Cow::Borrowed("plain")));
    }
}
