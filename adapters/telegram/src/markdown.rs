//! Markdown → Telegram MarkdownV2, ported from the reference's `format_message`: code spans
//! and fences are protected first (only `\` and `` ` `` escaped inside), links, headers,
//! bold, italic, strikethrough, spoilers and blockquotes are translated, everything else is
//! escaped, and a final pass escapes stray `( ) { }`. `strip` is the reference's plain-text
//! fallback (`_strip_mdv2`). Pipe tables are left as escaped text (the reference rewrites
//! them first; that cosmetic step is not ported).

use std::sync::LazyLock;

use regex::{Captures, Regex};

const SPECIAL: &str = r"_*[]()~`>#+-=|{}.!\";

/// Escapes every MarkdownV2 special character with a backslash.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        if SPECIAL.contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex")
}

static FENCED: LazyLock<Regex> = LazyLock::new(|| re(r"(```(?:[^\n]*\n)?[\s\S]*?```)"));
static INLINE_CODE: LazyLock<Regex> = LazyLock::new(|| re(r"(`[^`]+`)"));
static LINK: LazyLock<Regex> =
    LazyLock::new(|| re(r"\[([^\]]+)\]\(([^()]*(?:\([^()]*\)[^()]*)*)\)"));
static HEADER: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^#{1,6}\s+(.+)$"));
static BOLD: LazyLock<Regex> = LazyLock::new(|| re(r"\*\*(.+?)\*\*"));
static ITALIC: LazyLock<Regex> = LazyLock::new(|| re(r"\*([^*\n]+)\*"));
static STRIKE: LazyLock<Regex> = LazyLock::new(|| re(r"~~(.+?)~~"));
static SPOILER: LazyLock<Regex> = LazyLock::new(|| re(r"\|\|(.+?)\|\|"));
static QUOTE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^((?:\*\*)?>{1,3}) (.+)$"));
static CODE_SEGMENT: LazyLock<Regex> = LazyLock::new(|| re(r"(```[\s\S]*?```|`[^`]+`)"));

/// Values stashed behind `\0PHn\0` tokens so later passes cannot touch them.
struct Placeholders(Vec<(String, String)>);

impl Placeholders {
    fn stash(&mut self, value: String) -> String {
        let key = format!("\u{0}PH{}\u{0}", self.0.len());
        self.0.push((key.clone(), value));
        key
    }
}

/// Converts the agent's Markdown into MarkdownV2 text Telegram accepts.
pub fn to_markdown_v2(content: &str) -> String {
    if content.is_empty() {
        return String::new();
    }
    let mut ph = Placeholders(Vec::new());
    let mut text = FENCED
        .replace_all(content, |c: &Captures| {
            let raw = &c[0];
            let open_end = match raw[3..].find('\n') {
                Some(_) => raw.find('\n').map(|i| i + 1).unwrap_or(3),
                None => 3,
            };
            let body = &raw[open_end..raw.len() - 3];
            let body = body.replace('\\', "\\\\").replace('`', "\\`");
            ph.stash(format!("{}{body}```", &raw[..open_end]))
        })
        .into_owned();
    text = INLINE_CODE
        .replace_all(&text, |c: &Captures| ph.stash(c[0].replace('\\', "\\\\")))
        .into_owned();
    text = LINK
        .replace_all(&text, |c: &Captures| {
            let url = c[2].replace('\\', "\\\\").replace(')', "\\)");
            ph.stash(format!("[{}]({url})", escape(&c[1])))
        })
        .into_owned();
    text = HEADER
        .replace_all(&text, |c: &Captures| {
            let inner = BOLD.replace_all(c[1].trim(), "$1");
            ph.stash(format!("*{}*", escape(&inner)))
        })
        .into_owned();
    text = BOLD
        .replace_all(&text, |c: &Captures| {
            ph.stash(format!("*{}*", escape(&c[1])))
        })
        .into_owned();
    text = ITALIC
        .replace_all(&text, |c: &Captures| {
            ph.stash(format!("_{}_", escape(&c[1])))
        })
        .into_owned();
    text = STRIKE
        .replace_all(&text, |c: &Captures| {
            ph.stash(format!("~{}~", escape(&c[1])))
        })
        .into_owned();
    text = SPOILER
        .replace_all(&text, |c: &Captures| {
            ph.stash(format!("||{}||", escape(&c[1])))
        })
        .into_owned();
    text = QUOTE
        .replace_all(&text, |c: &Captures| {
            let (prefix, content) = (&c[1], &c[2]);
            if prefix.starts_with("**") && content.ends_with("||") {
                return ph.stash(format!(
                    "{prefix} {}||",
                    escape(&content[..content.len() - 2])
                ));
            }
            ph.stash(format!("{prefix} {}", escape(content)))
        })
        .into_owned();
    text = escape(&text);
    for (key, value) in ph.0.iter().rev() {
        text = text.replace(key, value);
    }
    escape_stray_brackets(&text)
}

/// The reference's safety net: outside code, escape `( ) { }` that are neither escaped nor
/// part of a `[text](url)` link.
fn escape_stray_brackets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for code in CODE_SEGMENT.find_iter(text) {
        out.push_str(&escape_segment(&text[last..code.start()]));
        out.push_str(code.as_str());
        last = code.end();
    }
    out.push_str(&escape_segment(&text[last..]));
    out
}

fn escape_segment(segment: &str) -> String {
    let chars: Vec<char> = segment.chars().collect();
    let mut out = String::with_capacity(segment.len());
    for (s, &ch) in chars.iter().enumerate() {
        if matches!(ch, '(' | ')' | '{' | '}') && !keep_bracket(&chars, s, ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

fn keep_bracket(chars: &[char], s: usize, ch: char) -> bool {
    if s > 0 && chars[s - 1] == '\\' {
        return true;
    }
    if ch == '(' && s > 0 && chars[s - 1] == ']' {
        return true;
    }
    if ch == ')' {
        let before: String = chars[..s].iter().collect();
        if before.contains("](") {
            let mut depth = 0i32;
            let stop = s.saturating_sub(2000);
            for j in (stop..s).rev() {
                if chars[j] == '(' {
                    depth -= 1;
                    if depth < 0 {
                        return j > 0 && chars[j - 1] == ']';
                    }
                } else if chars[j] == ')' {
                    depth += 1;
                }
            }
        }
    }
    false
}

static UNESCAPE: LazyLock<Regex> = LazyLock::new(|| re(r"\\([_*\[\]()~`>#+\-=|{}.!\\])"));
static STRIP_BOLD2: LazyLock<Regex> = LazyLock::new(|| re(r"\*\*([^*]+)\*\*"));
static STRIP_BOLD: LazyLock<Regex> = LazyLock::new(|| re(r"\*([^*]+)\*"));
static STRIP_ITALIC: LazyLock<fancy_regex::Regex> =
    LazyLock::new(|| fancy_regex::Regex::new(r"(?<!\w)_([^_]+)_(?!\w)").expect("static regex"));
static STRIP_STRIKE: LazyLock<Regex> = LazyLock::new(|| re(r"~([^~]+)~"));
static STRIP_SPOILER: LazyLock<Regex> = LazyLock::new(|| re(r"\|\|([^|]+)\|\|"));

/// MarkdownV2 text with escapes and formatting markers removed (the plain fallback).
pub fn strip(text: &str) -> String {
    let cleaned = UNESCAPE.replace_all(text, "$1");
    let cleaned = STRIP_BOLD2.replace_all(&cleaned, "$1");
    let cleaned = STRIP_BOLD.replace_all(&cleaned, "$1");
    let cleaned = STRIP_ITALIC.replace_all(&cleaned, "$1");
    let cleaned = STRIP_STRIKE.replace_all(&cleaned, "$1");
    STRIP_SPOILER.replace_all(&cleaned, "$1").into_owned()
}

/// What the user should see when formatting is off: the agent's Markdown rendered and then
/// stripped, as the reference's plain-text fallback does.
pub fn to_plain(content: &str) -> String {
    strip(&to_markdown_v2(content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_table() {
        let cases = [
            ("Hello world", "Hello world"),
            ("v1.2.3!", r"v1\.2\.3\!"),
            (
                r"_*[]()~`>#+-=|{}.!",
                r"\_\*\[\]\(\)\~\`\>\#\+\-\=\|\{\}\.\!",
            ),
            ("**bold** and *it*", "*bold* and _it_"),
            ("**a.b**", r"*a\.b*"),
            ("~~gone~~", "~gone~"),
            ("||secret||", "||secret||"),
            ("# Title!", r"*Title\!*"),
            ("> quoted.", r"> quoted\."),
            ("use `a_b(c)` now.", r"use `a_b(c)` now\."),
            ("`back\\slash`", r"`back\\slash`"),
            (
                "```rust\nfn x() { `y` }\n```",
                "```rust\nfn x() { \\`y\\` }\n```",
            ),
            ("[docs](https://x.y/a_(b))", r"[docs](https://x.y/a_\(b\))"),
            ("[a.b](http://h/p)", r"[a\.b](http://h/p)"),
            ("snake_case_name", r"snake\_case\_name"),
            ("1 + 1 = 2", r"1 \+ 1 \= 2"),
            ("- item\n- item2", "\\- item\n\\- item2"),
            ("😀 中文 (x)", r"😀 中文 \(x\)"),
        ];
        for (input, expected) in cases {
            assert_eq!(to_markdown_v2(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn plain_fallback_strips_markers_but_keeps_snake_case() {
        assert_eq!(
            to_plain("**bold** v1.2 my_var_name"),
            "bold v1.2 my_var_name"
        );
        assert_eq!(strip(r"\(1/3\)"), "(1/3)");
    }
}
