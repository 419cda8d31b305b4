//! Markdown → Slack mrkdwn, after the reference's `format_message` pass order: code spans
//! and fences are protected first, links become `<url|text>`, `&<>` are escaped in the
//! remaining text, then headers, bold, italics and strike are rewritten. Each rewritten
//! piece hides behind a placeholder so later passes never touch it.
//!
//! Two departures from the reference, both from Slack's escaping rule
//! (<https://api.slack.com/reference/surfaces/formatting#escaping>): `&`, `<` and `>` are
//! escaped inside code too (Slack parses control sequences in all message text, so
//! `Vec<T>` in a fence would otherwise vanish), and only user mentions, channel mentions
//! and links pass through as control sequences. `<!channel>`, `<!here>`, `<!everyone>`,
//! `<!subteam^…>` and every other `<!…>` are escaped, so a model echoing a user's text
//! cannot ping a channel or a user group.
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
        // `<@U…>` / `<#C…>` (with an optional `|label`) and `<scheme:…>` links only.
        entity: re(r"(<(?:[@#][A-Z0-9]+(?:\|[^<>\n]*)?|(?:https?|mailto|tel):[^<>\n]+)>)"),
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
    // Code keeps its text exactly, which on Slack means escaped like everything else.
    let mut text = stash.protect(content, &p.fence, |c| escape(&group(c, 0)));
    text = stash.protect(&text, &p.inline_code, |c| escape(&group(c, 0)));
    text = stash.protect(&text, &p.link, |c| {
        let label = escape(&unescape(&group(c, 1)));
        let mut url = group(c, 2).trim().to_owned();
        if url.starts_with('<') && url.ends_with('>') {
            url = url[1..url.len() - 1].trim().to_owned();
        }
        if url.contains(['<', '>', '|', '\n']) {
            // Not a URL Slack can carry in a link: show the Markdown as written.
            return escape(&unescape(&group(c, 0)));
        }
        format!("<{url}|{label}>")
    });
    text = stash.protect(&text, &p.entity, |c| group(c, 1));
    text = stash.protect(&text, &p.quote, |c| group(c, 0));
    // Prose the model already escaped is not escaped twice.
    text = escape(&unescape(&text));
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

/// Undoes Slack's three escapes (for text a model may have escaped itself).
fn unescape(text: &str) -> String {
    text.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
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
            ("`a **b** <c>`", "`a **b** &lt;c&gt;`"),
            (
                "```rust\nlet x = a && b;\n```",
                "```rust\nlet x = a &amp;&amp; b;\n```",
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

    #[test]
    fn only_user_and_channel_mentions_and_links_stay_control_sequences() {
        let table: &[(&str, &str)] = &[
            ("<!channel> look", "&lt;!channel&gt; look"),
            ("hey <!here>!", "hey &lt;!here&gt;!"),
            ("<!everyone>", "&lt;!everyone&gt;"),
            ("<!here|here> now", "&lt;!here|here&gt; now"),
            ("<!subteam^S0123|@admins>", "&lt;!subteam^S0123|@admins&gt;"),
            ("<!subteam^S0123>", "&lt;!subteam^S0123&gt;"),
            (
                "<!date^1392734382^{date}|Feb 18>",
                "&lt;!date^1392734382^{date}|Feb 18&gt;",
            ),
            ("ask <@U0123ABC> or <@W99>", "ask <@U0123ABC> or <@W99>"),
            (
                "in <#C0123|general> and <#C9>",
                "in <#C0123|general> and <#C9>",
            ),
            ("<https://x.io/a?b=1|site>", "<https://x.io/a?b=1|site>"),
            ("<mailto:a@b.io|mail me>", "<mailto:a@b.io|mail me>"),
            ("<@U1|<!channel>>", "&lt;@U1|&lt;!channel&gt;&gt;"),
            (
                "[<!channel>](https://x.io)",
                "<https://x.io|&lt;!channel&gt;>",
            ),
            (
                "[x](https://x.io/<!here>)",
                "[x](https://x.io/&lt;!here&gt;)",
            ),
            ("**<!channel>**", "*&lt;!channel&gt;*"),
        ];
        for (input, expected) in table {
            assert_eq!(to_mrkdwn(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn code_is_escaped_like_all_other_text() {
        let table: &[(&str, &str)] = &[
            ("`Vec<T>`", "`Vec&lt;T&gt;`"),
            ("`a && b`", "`a &amp;&amp; b`"),
            ("`&amp;`", "`&amp;amp;`"),
            ("`<!channel>`", "`&lt;!channel&gt;`"),
            (
                "```html\n<div class=\"a\">&nbsp;</div>\n```",
                "```html\n&lt;div class=\"a\"&gt;&amp;nbsp;&lt;/div&gt;\n```",
            ),
            (
                "```\nfn f() -> Option<Vec<u8>> { None }\n```\nthen `x > y`",
                "```\nfn f() -&gt; Option&lt;Vec&lt;u8&gt;&gt; { None }\n```\nthen `x &gt; y`",
            ),
            (
                "```\n**not bold** <@U1>\n```",
                "```\n**not bold** &lt;@U1&gt;\n```",
            ),
        ];
        for (input, expected) in table {
            assert_eq!(to_mrkdwn(input), *expected, "input {input:?}");
        }
    }
}
