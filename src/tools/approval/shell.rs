//! A small, non-executing shell reader for detection (ported from `tools/approval.py`):
//! top-level segments, quote-aware command starts and command words with their wrappers.
//! Positions are character indices.

use std::sync::LazyLock;

use regex::Regex;

use super::words::deobfuscate_word;

/// Words that run the next word as the command (`sudo rm`, `env X=1 rm`).
const COMMAND_WRAPPER_WORDS: [&str; 8] = [
    "sudo", "env", "exec", "nohup", "setsid", "time", "command", "builtin",
];
const SUDO_OPTIONS_WITH_ARG: [&str; 10] = [
    "-c",
    "--close-from",
    "-g",
    "--group",
    "-h",
    "--host",
    "-p",
    "--prompt",
    "-u",
    "--user",
];

static ENV_ASSIGNMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^[A-Za-z_][A-Za-z0-9_]*=.*$").expect("regex"));
pub fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

pub fn string(c: &[char]) -> String {
    c.iter().collect()
}

pub(super) fn starts_with(c: &[char], at: usize, prefix: &str) -> bool {
    prefix
        .chars()
        .enumerate()
        .all(|(k, p)| c.get(at + k) == Some(&p))
}

/// Character spans of the top-level `;`, `&`, `|`, newline separated segments.
pub fn top_level_segments(c: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let (mut start, mut index) = (0, 0);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    while index < c.len() {
        let ch = c[index];
        if escaped {
            escaped = false;
        } else if ch == '\\' && quote != Some('\'') {
            escaped = true;
        } else if let Some(q) = quote {
            if ch == q {
                quote = None;
            }
        } else if ch == '\'' || ch == '"' {
            quote = Some(ch);
        } else if matches!(ch, ';' | '&' | '|' | '\n') {
            if start < index {
                spans.push((start, index));
            }
            if matches!(ch, '&' | '|') && c.get(index + 1) == Some(&ch) {
                index += 1;
            }
            start = index + 1;
        }
        index += 1;
    }
    if start < c.len() {
        spans.push((start, c.len()));
    }
    spans
}

fn skip_whitespace(c: &[char], mut pos: usize) -> usize {
    while pos < c.len() && c[pos].is_whitespace() {
        pos += 1;
    }
    pos
}

/// The offset after a balanced `$(...)` starting at `start`.
pub fn scan_dollar_paren_end(c: &[char], start: usize) -> Option<usize> {
    let mut depth = 1;
    let mut quote: Option<char> = None;
    let mut i = start + 2;
    while i < c.len() {
        let ch = c[i];
        if let Some(q) = quote {
            if ch == '\\' && q == '"' && i + 1 < c.len() {
                i += 2;
                continue;
            }
            if ch == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if ch == '\'' || ch == '"' {
            quote = Some(ch);
            i += 1;
            continue;
        }
        if ch == '\\' && i + 1 < c.len() {
            i += 2;
            continue;
        }
        if starts_with(c, i, "$(") {
            depth += 1;
            i += 2;
            continue;
        }
        if ch == ')' {
            depth -= 1;
            i += 1;
            if depth == 0 {
                return Some(i);
            }
            continue;
        }
        i += 1;
    }
    None
}

pub fn scan_backtick_end(c: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < c.len() {
        if c[i] == '\\' && i + 1 < c.len() {
            i += 2;
            continue;
        }
        if c[i] == '`' {
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// One shell word starting at `pos` (after whitespace), without expanding anything.
pub fn read_shell_word(c: &[char], pos: usize) -> (usize, usize) {
    let start = skip_whitespace(c, pos);
    let mut i = start;
    let mut quote: Option<char> = None;
    while i < c.len() {
        let ch = c[i];
        if let Some(q) = quote {
            if ch == '\\' && q == '"' && i + 1 < c.len() {
                i += 2;
                continue;
            }
            if ch == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if ch == '\'' || ch == '"' {
            quote = Some(ch);
            i += 1;
            continue;
        }
        if ch == '\\' && i + 1 < c.len() {
            i += 2;
            continue;
        }
        if starts_with(c, i, "$(") {
            i = scan_dollar_paren_end(c, i).unwrap_or(i + 2);
            continue;
        }
        if starts_with(c, i, "${") {
            i = c[i + 2..]
                .iter()
                .position(|&x| x == '}')
                .map_or(i + 2, |p| i + 2 + p + 1);
            continue;
        }
        if ch == '`' {
            i = scan_backtick_end(c, i).unwrap_or(i + 1);
            continue;
        }
        if ch.is_whitespace() || matches!(ch, ';' | '&' | '|') {
            break;
        }
        i += 1;
    }
    (start, i)
}

/// Quote-aware positions where a new command begins (after separators, `$(`, `(`, `{`).
pub fn command_starts(c: &[char]) -> Vec<usize> {
    let mut starts = vec![0];
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        match quote {
            Some('\'') => {
                if ch == '\'' {
                    quote = None;
                }
                i += 1;
                continue;
            }
            Some(_) => {
                if ch == '\\' && i + 1 < c.len() {
                    i += 2;
                    continue;
                }
                if ch == '"' {
                    quote = None;
                    i += 1;
                    continue;
                }
                if starts_with(c, i, "$(") {
                    starts.push(i + 2);
                    i += 2;
                    continue;
                }
                i += 1;
                continue;
            }
            None => {}
        }
        if ch == '\'' || ch == '"' {
            quote = Some(ch);
            i += 1;
            continue;
        }
        if ch == '\\' && i + 1 < c.len() {
            i += 2;
            continue;
        }
        if starts_with(c, i, "$(") {
            starts.push(i + 2);
            i += 2;
            continue;
        }
        match ch {
            '(' | '{' | ';' => {
                starts.push(i + 1);
                i += 1;
            }
            '&' | '|' => {
                if c.get(i + 1) == Some(&ch) {
                    starts.push(i + 2);
                    i += 2;
                } else {
                    starts.push(i + 1);
                    i += 1;
                }
            }
            '\n' => {
                starts.push(i + 1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    let mut seen = Vec::new();
    for start in starts {
        let start = skip_whitespace(c, start);
        if start < c.len() && !seen.contains(&start) {
            seen.push(start);
        }
    }
    seen
}

/// The command with a newline inserted before every real command start, so the
/// start-anchored patterns see subshells and brace groups.
pub fn mark_command_starts(command: &str) -> String {
    let c = chars(command);
    let mut offsets: Vec<usize> = command_starts(&c).into_iter().filter(|&o| o > 0).collect();
    if offsets.is_empty() {
        return command.to_owned();
    }
    offsets.sort_unstable();
    let mut out = String::with_capacity(command.len() + offsets.len());
    let mut previous = 0;
    for offset in offsets {
        out.extend(&c[previous..offset]);
        out.push('\n');
        previous = offset;
    }
    out.extend(&c[previous..]);
    out
}

/// `(start, end)` of every command-position word, including wrapper words and leading
/// `VAR=value` assignments before the real command.
pub fn command_word_spans(c: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    for command_start in command_starts(c) {
        let mut pos = command_start;
        let mut prefix_words = 0;
        let mut skip_wrapper_options = false;
        let mut skip_next_wrapper_arg = false;
        while prefix_words < 12 {
            let (word_start, word_end) = read_shell_word(c, pos);
            if word_start == word_end {
                break;
            }
            let deobfuscated = deobfuscate_word(&string(&c[word_start..word_end]));
            let lower = deobfuscated.to_lowercase();
            if skip_next_wrapper_arg {
                skip_next_wrapper_arg = false;
                pos = word_end;
                prefix_words += 1;
                continue;
            }
            if skip_wrapper_options && lower.starts_with('-') {
                let option = lower.split('=').next().unwrap_or_default();
                skip_next_wrapper_arg =
                    !lower.contains('=') && SUDO_OPTIONS_WITH_ARG.contains(&option);
                pos = word_end;
                prefix_words += 1;
                continue;
            }
            spans.push((word_start, word_end));
            prefix_words += 1;
            if COMMAND_WRAPPER_WORDS.contains(&lower.as_str()) {
                skip_wrapper_options = lower == "sudo" || lower == "env";
                pos = word_end;
                continue;
            }
            if ENV_ASSIGNMENT.is_match(&deobfuscated) {
                skip_wrapper_options = false;
                pos = word_end;
                continue;
            }
            break;
        }
    }
    spans
}

/// The final path component, as `os.path.basename`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_command_words() {
        let c = chars("echo 'a;b' && sudo -u root rm -rf x | FOO=1 bash -c 'y'");
        let segs: Vec<String> = top_level_segments(&c)
            .into_iter()
            .map(|(s, e)| string(&c[s..e]))
            .collect();
        assert_eq!(
            segs,
            [
                "echo 'a;b' ",
                " sudo -u root rm -rf x ",
                " FOO=1 bash -c 'y'"
            ]
        );
        let words: Vec<String> = command_word_spans(&c)
            .into_iter()
            .map(|(s, e)| string(&c[s..e]))
            .collect();
        assert_eq!(words, ["echo", "sudo", "rm", "FOO=1", "bash"]);
    }

    #[test]
    fn command_starts_are_marked_outside_quotes() {
        assert_eq!(mark_command_starts("(reboot)"), "(\nreboot)");
        assert_eq!(
            mark_command_starts("echo \"(reboot)\""),
            "echo \"(reboot)\""
        );
    }
}
