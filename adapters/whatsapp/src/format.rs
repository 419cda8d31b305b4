//! Markdown → WhatsApp's formatting subset: `*bold*`, `_italic_`, `~strike~`, `` `code` ``
//! and ```` ``` ```` blocks (<https://faq.whatsapp.com/539178204879377>). Headers become bold
//! lines and links `text (url)`; code is left exactly as written.

/// The text with Markdown emphasis rewritten the way WhatsApp shows it.
pub fn to_whatsapp(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in markdown.split('\n') {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            out.push(line.to_owned());
            continue;
        }
        if in_fence {
            out.push(line.to_owned());
            continue;
        }
        out.push(line_to_whatsapp(line));
    }
    out.join("\n")
}

fn line_to_whatsapp(line: &str) -> String {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with(char::is_whitespace) {
        let inner = inline(line[hashes..].trim());
        let inner = inner.trim_matches('*').trim();
        return format!("*{inner}*");
    }
    inline(line)
}

/// Outside `` `code` `` spans: bold, italic, strike and links.
fn inline(line: &str) -> String {
    let mut out = String::new();
    for (i, piece) in line.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        // Odd pieces are inside a code span (when the backticks pair up).
        let inside = i % 2 == 1 && line.matches('`').count() > i;
        if inside {
            out.push_str(piece);
        } else {
            out.push_str(&emphasis(piece));
        }
    }
    out
}

const BOLD: char = '\u{1}';

fn emphasis(text: &str) -> String {
    let text = links(text);
    let text = pairs(&text, "**", BOLD);
    let text = pairs(&text, "__", BOLD);
    let text = pairs(&text, "~~", '~');
    let text = single_star_italic(&text);
    text.replace(BOLD, "*")
}

/// `open…open` pairs (non-empty, on one line) replaced by `with…with`.
fn pairs(text: &str, open: &str, with: char) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        match after.find(open) {
            Some(end) if end > 0 => {
                out.push_str(&rest[..start]);
                out.push(with);
                out.push_str(&after[..end]);
                out.push(with);
                rest = &after[end + open.len()..];
            }
            _ => break,
        }
    }
    out.push_str(rest);
    out
}

/// `*text*` (not a list bullet: no space after the opening star) → `_text_`.
fn single_star_italic(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let opens = chars[i] == '*'
            && chars
                .get(i + 1)
                .is_some_and(|c| !c.is_whitespace() && *c != '*');
        if opens && let Some(len) = chars[i + 1..].iter().position(|c| *c == '*') {
            let inner: String = chars[i + 1..i + 1 + len].iter().collect();
            if !inner.ends_with(char::is_whitespace) {
                out.push('_');
                out.push_str(&inner);
                out.push('_');
                i += len + 2;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// `[text](url)` → `text (url)`.
fn links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else { break };
        let Some(end) = after[close + 2..].find(')') else {
            break;
        };
        let label = &after[..close];
        let url = &after[close + 2..close + 2 + end];
        if label.is_empty() || label.contains('[') || url.is_empty() {
            out.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..open]);
        out.push_str(&format!("{label} ({url})"));
        rest = &after[close + 3 + end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_the_whatsapp_subset() {
        assert_eq!(
            to_whatsapp("**bold** and *it* and ~~gone~~"),
            "*bold* and _it_ and ~gone~"
        );
        assert_eq!(to_whatsapp("## **Title**"), "*Title*");
        assert_eq!(
            to_whatsapp("see [docs](https://x.y/z)"),
            "see docs (https://x.y/z)"
        );
        assert_eq!(
            to_whatsapp("* item\n* other"),
            "* item\n* other",
            "bullets stay"
        );
        assert_eq!(to_whatsapp("`**raw**` **b**"), "`**raw**` *b*");
        assert_eq!(
            to_whatsapp("```\n**kept** # as is\n```\n# Head"),
            "```\n**kept** # as is\n```\n*Head*"
        );
        assert_eq!(to_whatsapp("2 * 3 * 4"), "2 * 3 * 4");
        assert_eq!(to_whatsapp("__strong__"), "*strong*");
    }
}
