//! Markdown → Slack mrkdwn, ported pass for pass from the reference's `format_message`:
//! code spans and fences are protected first, links become `<url|text>`, `&<>` are escaped
//! in the remaining text, then headers, bold, italics and strike are rewritten. Each
//! rewritten piece hides behind a placeholder so later passes never touch it.
//!
//! The reference relies on look-around, so this uses `fancy-regex` with the same patterns.

use std::sync::LazyLock;

use fancy_regex::{Captures, Regex};

struct Patterns {
    fence: Regex,
    inline_code: Regex,
    link: Regex,
    entity: Regex,
    quote: Regex,
    header: Regex,
    bold_in_header: Regex,
    bold_italic: Regex,
    bold: Regex,
    italic: Regex,
    strike: Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("static mrkdwn pattern");
    Patterns {
        fence: re(r"(```(?:[^\n]*\n)?[\s\S]*?```)"),
        inline_code: re(r"(`[^`]+`)"),
        link: re(r"(?<!!)\[([^\]]+)\]\(([^()]*(?:\([^()]*\)[^()]*)*)\)"),
        entity: re(r"(<(?:[@#!]|(?:https?|mailto|tel):)[^>\n]+>)"),
        quote: re(r"(?m)^(>+\s)"),
        header: re(r"(?m)^#{1,6}\s+(.+)$"),
        bold_in_header: re(r"\*\*(.+?)\*\*"),
        bold_italic: re(r"\*\*\*(.+?)\*\*\*"),
        bold: re(r"\*\*(.+?)\*\*"),
        italic: re(r"(?<!\*)\*(\S(?:[^*\n]*?\S)?)\*(?!\*)"),
        strike: re(r"~~(.+?)~~"),
    }
});

/// Stashes converted pieces behind `\0SL<n>\0` keys.
#[derive(Default)]
struct Placeholders(Vec<(String, String)>);

impl Placeholders {
    fn stash(&mut self, value: String) -> String {
        let key = format!("\x00SL{}\x00", self.0.len());
        self.0.push((key.clone(), value));
        key
    }

    /// Replaces every match of `pattern` by a placeholder holding `convert(captures)`.
    fn protect(
        &mut self,
        text: &str,
        pattern: &Regex,
        mut convert: impl FnMut(&Captures<'_, str>) -> String,
    ) -> String {
        pattern
            .replace_all(text, |caps: &Captures<'_, str>| {
                let value = convert(caps);
                self.stash(value)
            })
            .into_owned()
    }

    /// Restores in reverse order, so a piece that wraps earlier pieces is expanded first.
    fn restore(self, mut text: String) -> String {
        for (key, value) in self.0.into_iter().rev() {
            text = text.replace(&key, &value);
        }
        text
    }
}

fn group(caps: &Captures<'_, str>, i: usize) -> String {
    caps.get(i)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default()
}

/// Converts standard Markdown to Slack mrkdwn.
pub fn to_mrkdwn(content: &str) -> String {
    if content.is_empty() {
        return String::new();
    }
    let p = &*PATTERNS;
    let mut stash = Placeholders::default();
    let mut text = stash.protect(content, &p.fence, |c| group(c, 0));
    text = stash.protect(&text, &p.inline_code, |c| group(c, 0));
    text = stash.protect(&text, &p.link, |c| {
        let label = group(c, 1);
        let mut url = group(c, 2).trim().to_owned();
        if url.starts_with('<') && url.ends_with('>') {
            url = url[1..url.len() - 1].trim().to_owned();
        }
        format!("<{url}|{label}>")
    });
    text = stash.protect(&text, &p.entity, |c| group(c, 1));
    text = stash.protect(&text, &p.quote, |c| group(c, 0));
    text = escape(
        &text
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">"),
    );
    text = stash.protect(&text, &p.header, |c| {
        let inner = group(c, 1).trim().to_owned();
        let inner = p.bold_in_header.replace_all(&inner, "$1");
        format!("*{inner}*")
    });
    text = stash.protect(&text, &p.bold_italic, |c| format!("*_{}_*", group(c, 1)));
    text = stash.protect(&text, &p.bold, |c| format!("*{}*", group(c, 1)));
    text = stash.protect(&text, &p.italic, |c| format!("_{}_", group(c, 1)));
    text = stash.protect(&text, &p.strike, |c| format!("~{}~", group(c, 1)));
    stash.restore(text)
}

/// Escapes Slack's three control characters (used for plain text too).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_table_matches_the_reference() {
        let table: &[(&str, &str)] = &[
            ("**bold**", "*bold*"),
            ("*italic*", "_italic_"),
            ("_italic_", "_italic_"),
            ("***both***", "*_both_*"),
            ("~~gone~~", "~gone~"),
            ("a * b * c", "a * b * c"),
            ("`a **b** <c>`", "`a **b** <c>`"),
            (
                "```rust\nlet x = a && b;\n```",
                "```rust\nlet x = a && b;\n```",
            ),
            ("[docs](https://x.io/a_(b))", "<https://x.io/a_(b)|docs>"),
            ("![img](https://x.io/i.png)", "![img](https://x.io/i.png)"),
            (
                "see <https://x.io> & <@U123>",
                "see <https://x.io> &amp; <@U123>",
            ),
            ("1 < 2 > 0", "1 &lt; 2 &gt; 0"),
            ("already &amp; escaped", "already &amp; escaped"),
            ("## Title **x**", "*Title x*"),
            ("> quoted *it*", "> quoted _it_"),
            ("**[link](https://a.b)**", "*<https://a.b|link>*"),
            ("", ""),
        ];
        for (input, expected) in table {
            assert_eq!(to_mrkdwn(input), *expected, "input {input:?}");
        }
    }
}
