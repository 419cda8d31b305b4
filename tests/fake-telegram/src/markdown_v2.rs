//! A strict MarkdownV2 checker, so the fake rejects what Telegram rejects ("can't parse
//! entities") and measures the visible text (escapes and markup excluded) in UTF-16 units,
//! the way Telegram applies its 4096 limit.

const RESERVED: &str = "_*[]()~`>#+-=|{}.!";

/// Returns the visible text's UTF-16 length, or Telegram's error description.
pub fn visible_utf16_len(text: &str) -> Result<usize, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut visible = 0usize;
    let mut open: Vec<&'static str> = Vec::new();
    let mut in_link_text = false;
    let mut at_line_start = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts_line = at_line_start;
        at_line_start = c == '\n';
        match c {
            '\\' => {
                let Some(next) = chars.get(i + 1) else {
                    return Err(parse_error("Can't find end of the escape sequence"));
                };
                visible += next.len_utf16();
                i += 2;
                continue;
            }
            '`' if chars[i..].starts_with(&['`', '`', '`']) => {
                i = skip_code(&chars, i + 3, true, &mut visible)?;
                continue;
            }
            '`' => {
                i = skip_code(&chars, i + 1, false, &mut visible)?;
                continue;
            }
            '*' => toggle(&mut open, "bold"),
            '~' => toggle(&mut open, "strikethrough"),
            '_' if chars.get(i + 1) == Some(&'_') => {
                toggle(&mut open, "underline");
                i += 1;
            }
            '_' => toggle(&mut open, "italic"),
            '|' if chars.get(i + 1) == Some(&'|') => {
                toggle(&mut open, "spoiler");
                i += 1;
            }
            '[' if !in_link_text => in_link_text = true,
            ']' if in_link_text => {
                in_link_text = false;
                if chars.get(i + 1) != Some(&'(') {
                    return Err(reserved(']'));
                }
                i = skip_url(&chars, i + 2)?;
                continue;
            }
            '>' if starts_line => {}
            c if RESERVED.contains(c) => return Err(reserved(c)),
            c => visible += c.len_utf16(),
        }
        i += 1;
    }
    if let Some(entity) = open.first() {
        return Err(parse_error(&format!("Can't find end of {entity} entity")));
    }
    if in_link_text {
        return Err(parse_error("Can't find end of a url"));
    }
    Ok(visible)
}

fn toggle(open: &mut Vec<&'static str>, entity: &'static str) {
    if open.last() == Some(&entity) {
        open.pop();
    } else {
        open.push(entity);
    }
}

/// Skips a code span or pre block; inside, only `` ` `` and `\` are special.
fn skip_code(
    chars: &[char],
    mut i: usize,
    pre: bool,
    visible: &mut usize,
) -> Result<usize, String> {
    if pre {
        // The optional language name up to the first newline is not visible text.
        let line_end = chars[i..].iter().position(|c| *c == '\n');
        let fence_end = find_fence(chars, i);
        if let (Some(nl), Some(end)) = (line_end, fence_end)
            && i + nl < end
        {
            i += nl + 1;
        }
    }
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let Some(next) = chars.get(i + 1) else {
                    return Err(parse_error("Can't find end of the escape sequence"));
                };
                *visible += next.len_utf16();
                i += 2;
            }
            '`' if pre && chars[i..].starts_with(&['`', '`', '`']) => return Ok(i + 3),
            '`' if !pre => return Ok(i + 1),
            '`' => return Err(parse_error("Can't find end of Pre entity")),
            c => {
                *visible += c.len_utf16();
                i += 1;
            }
        }
    }
    let entity = if pre { "Pre" } else { "Code" };
    Err(parse_error(&format!("Can't find end of {entity} entity")))
}

fn find_fence(chars: &[char], from: usize) -> Option<usize> {
    (from..chars.len().saturating_sub(2)).find(|&j| chars[j..].starts_with(&['`', '`', '`']))
}

/// Skips a link URL after `](`; inside, `)` and `\` must be escaped.
fn skip_url(chars: &[char], mut i: usize) -> Result<usize, String> {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            ')' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(parse_error("Can't find end of a url"))
}

fn reserved(c: char) -> String {
    parse_error(&format!(
        "Character '{c}' is reserved and must be escaped with the preceding '\\'"
    ))
}

fn parse_error(detail: &str) -> String {
    format!("Bad Request: can't parse entities: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_escaped_text_and_entities() {
        assert_eq!(visible_utf16_len(r"a\.b"), Ok(3));
        assert_eq!(visible_utf16_len("*bold* _it_ __u__ ~s~ ||sp||"), Ok(14));
        assert_eq!(visible_utf16_len("`a.b` ```rust\nfn x() {}\n```"), Ok(14));
        assert_eq!(visible_utf16_len(r"[a\.b](http://x.y/\(z\))"), Ok(3));
        assert_eq!(visible_utf16_len("> quote"), Ok(6));
        assert_eq!(visible_utf16_len("😀中"), Ok(3));
    }

    #[test]
    fn rejects_unescaped_reserved_and_unclosed() {
        assert!(
            visible_utf16_len("a.b")
                .unwrap_err()
                .contains("can't parse entities")
        );
        assert!(visible_utf16_len("*open").is_err());
        assert!(visible_utf16_len("`open").is_err());
        assert!(visible_utf16_len("a > b").is_err());
        assert!(visible_utf16_len("trailing\\").is_err());
    }
}
