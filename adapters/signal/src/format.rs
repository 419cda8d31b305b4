//! Markdown from the model → Signal's own formatting: plain text plus style ranges, which
//! signal-cli's `send` takes as `textStyle` entries `start:length:STYLE` counted in UTF-16
//! code units (signal-cli(1), `send --text-style`; styles BOLD, ITALIC, SPOILER,
//! STRIKETHROUGH, MONOSPACE). Signal shows no Markdown, so the markers are removed and the
//! ranges carry the emphasis; list markers become bullets.

/// The text to send and its `textStyle` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Styled {
    pub text: String,
    pub styles: Vec<String>,
}

struct Out {
    text: String,
    /// UTF-16 length of `text`, kept as it grows.
    units: usize,
    styles: Vec<(usize, usize, &'static str)>,
}

impl Out {
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.units += s.encode_utf16().count();
    }

    /// Runs `write`, then styles what it wrote.
    fn styled(&mut self, style: &'static str, write: impl FnOnce(&mut Out)) {
        let start = self.units;
        write(self);
        if self.units > start {
            self.styles.push((start, self.units - start, style));
        }
    }
}

/// Converts `markdown`; `plain` keeps the text exactly as given (the fallback after the
/// daemon refused the styled form).
pub fn to_signal(markdown: &str, plain: bool) -> Styled {
    if plain {
        return Styled {
            text: markdown.to_owned(),
            styles: Vec::new(),
        };
    }
    let mut out = Out {
        text: String::new(),
        units: 0,
        styles: Vec::new(),
    };
    let mut rest = markdown;
    while !rest.is_empty() {
        match rest.find("```") {
            Some(open) => {
                lines(&rest[..open], &mut out);
                let after = &rest[open + 3..];
                let Some(close) = after.find("```") else {
                    lines(&rest[open..], &mut out);
                    break;
                };
                let block = &after[..close];
                // The fence's language tag runs to the first newline.
                let code = match block.split_once('\n') {
                    Some((tag, code)) if !tag.contains(char::is_whitespace) => code,
                    _ => block,
                };
                out.styled("MONOSPACE", |o| o.push(code.trim_end_matches('\n')));
                rest = &after[close + 3..];
            }
            None => {
                lines(rest, &mut out);
                break;
            }
        }
    }
    let mut styles = out.styles;
    styles.sort();
    Styled {
        text: out.text,
        styles: styles
            .into_iter()
            .map(|(start, len, style)| format!("{start}:{len}:{style}"))
            .collect(),
    }
}

/// Prose: headings become bold lines, list markers bullets, the rest inline Markdown.
fn lines(text: &str, out: &mut Out) {
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push("\n");
        }
        let trimmed = line.trim_start_matches([' ', '\t']);
        let indent = &line[..line.len() - trimmed.len()];
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            out.push(indent);
            out.styled("BOLD", |o| inline(trimmed[hashes..].trim(), o));
            continue;
        }
        let bullet = ["- ", "* ", "+ "]
            .iter()
            .find_map(|m| trimmed.strip_prefix(m));
        match bullet {
            Some(item) if indent.len() <= 3 => {
                out.push(indent);
                out.push("• ");
                inline(item, out);
            }
            _ => inline(line, out),
        }
    }
}

/// Delimited spans, longest markers first; an unclosed marker stays as typed.
const SPANS: &[(&str, &str)] = &[
    ("**", "BOLD"),
    ("__", "BOLD"),
    ("~~", "STRIKETHROUGH"),
    ("||", "SPOILER"),
    ("`", "MONOSPACE"),
    ("*", "ITALIC"),
    ("_", "ITALIC"),
];

fn inline(text: &str, out: &mut Out) {
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some((marker, style, inner, after)) = span_at(rest) {
            if style == "MONOSPACE" {
                out.styled(style, |o| o.push(inner));
            } else {
                out.styled(style, |o| inline(inner, o));
            }
            rest = after;
            let _ = marker;
            continue;
        }
        out.push(&rest[..c.len_utf8()]);
        rest = &rest[c.len_utf8()..];
    }
}

/// A span opening at the start of `text`: (marker, style, inner text, text after it).
fn span_at(text: &str) -> Option<(&'static str, &'static str, &str, &str)> {
    for &(marker, style) in SPANS {
        let Some(body) = text.strip_prefix(marker) else {
            continue;
        };
        // An opener must touch its text: `* item` and `a * b` are not emphasis.
        if body.starts_with(char::is_whitespace) || body.is_empty() {
            continue;
        }
        let single = marker.len() == 1 && marker != "`";
        let mut from = 0;
        while let Some(found) = body[from..].find(marker) {
            let at = from + found;
            let inner = &body[..at];
            let after = &body[at + marker.len()..];
            let doubled = single && after.starts_with(marker);
            // `_` inside a word (snake_case) closes nothing.
            let mid_word = marker == "_" && after.starts_with(char::is_alphanumeric);
            let closes =
                !(inner.is_empty() || inner.ends_with(char::is_whitespace) || doubled || mid_word);
            if closes {
                return Some((marker, style, inner, after));
            }
            from = at + marker.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styled(text: &str) -> (String, Vec<String>) {
        let s = to_signal(text, false);
        (s.text, s.styles)
    }

    #[test]
    fn emphasis_markers_become_ranges_in_utf16_units() {
        let (text, styles) = styled("😀 **bold** and *it* ~~gone~~ `x*y*`");
        assert_eq!(text, "😀 bold and it gone x*y*");
        // The emoji is two UTF-16 units, so "bold" starts at 3.
        assert_eq!(
            styles,
            [
                "3:4:BOLD",
                "12:2:ITALIC",
                "15:4:STRIKETHROUGH",
                "20:4:MONOSPACE"
            ]
        );
    }

    #[test]
    fn headings_lists_and_code_blocks() {
        let (text, styles) = styled("# Title\n- one\n* two\n```rust\nlet a = *b*;\n```");
        assert_eq!(text, "Title\n• one\n• two\nlet a = *b*;");
        assert_eq!(styles, ["0:5:BOLD", "18:12:MONOSPACE"]);
    }

    #[test]
    fn stray_markers_stay_as_typed_and_plain_is_untouched() {
        assert_eq!(
            styled("a * b, snake_case_name, 2*3"),
            ("a * b, snake_case_name, 2*3".into(), vec![])
        );
        let plain = to_signal("**x**", true);
        assert_eq!((plain.text.as_str(), plain.styles.len()), ("**x**", 0));
    }

    #[test]
    fn nested_emphasis_keeps_both_ranges() {
        let (text, styles) = styled("**bold _both_**");
        assert_eq!(text, "bold both");
        assert_eq!(styles, ["0:9:BOLD", "5:4:ITALIC"]);
    }
}
