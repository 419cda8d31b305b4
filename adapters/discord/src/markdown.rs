//! Plain-text sends: the core's fallback after a formatting refusal sends the text with
//! every Discord markdown character escaped, so it shows exactly as written.

/// Backslash-escapes Discord's markdown characters (`\ * _ ~ ` | > # - [ ] ( )`) and
/// neutralises mass mentions.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '~' | '`' | '|' | '>' | '#' | '-' | '[' | ']' | '(' | ')'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out.replace("@everyone", "@\u{200b}everyone")
        .replace("@here", "@\u{200b}here")
}

#[cfg(test)]
mod tests {
    #[test]
    fn markdown_characters_are_escaped() {
        assert_eq!(
            super::escape_markdown("**a** _b_ `c`"),
            "\\*\\*a\\*\\* \\_b\\_ \\`c\\`"
        );
        assert_eq!(
            super::escape_markdown("hi @everyone"),
            "hi @\u{200b}everyone"
        );
    }
}
