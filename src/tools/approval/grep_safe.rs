//! Hides single-quoted `grep -P` pattern operands from detection (Python
//! `_quoted_grep_pattern_spans`): `grep -P '(rm -rf /|x)'` searches text, it runs nothing.
//! An ambiguous or malformed grep parse hides nothing and is reported, so callers fail closed.

use super::shell::{basename, chars, command_word_spans, string, top_level_segments};
use super::words::deobfuscate_word;

/// A shell word with its span and whether it is wholly single-quoted (inert data).
struct Token {
    value: String,
    start: usize,
    end: usize,
    inert: bool,
}

/// Shell words of `segment` from `start`, or `None` on malformed quoting.
fn tokens_with_spans(segment: &[char], start: usize) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut i = start;
    while i < segment.len() {
        while i < segment.len() && segment[i].is_whitespace() {
            i += 1;
        }
        if i >= segment.len() {
            break;
        }
        let token_start = i;
        let mut value = String::new();
        let mut quote: Option<char> = None;
        while i < segment.len() && (quote.is_some() || !segment[i].is_whitespace()) {
            let ch = segment[i];
            if let Some(q) = quote {
                if ch == q {
                    quote = None;
                    i += 1;
                } else if ch == '\\' && q == '"' && i + 1 < segment.len() {
                    value.push(segment[i + 1]);
                    i += 2;
                } else {
                    value.push(ch);
                    i += 1;
                }
            } else if ch == '\'' || ch == '"' {
                quote = Some(ch);
                i += 1;
            } else if ch == '\\' {
                value.push(*segment.get(i + 1)?);
                i += 2;
            } else {
                value.push(ch);
                i += 1;
            }
        }
        if quote.is_some() {
            return None;
        }
        let raw = string(&segment[token_start..i]);
        let inert = (raw.starts_with('\'') && raw.ends_with('\''))
            || (raw.contains("='") && raw.ends_with('\''));
        tokens.push(Token {
            value,
            start: token_start,
            end: i,
            inert,
        });
    }
    Some(tokens)
}

const GREP_OPTIONS_WITH_ARG: [&str; 14] = [
    "--after-context",
    "--before-context",
    "--binary-files",
    "--context",
    "--directories",
    "--devices",
    "--exclude",
    "--exclude-dir",
    "--exclude-from",
    "--include",
    "--label",
    "--max-count",
    "--regexp",
    "--file",
];
const GREP_SHORT_OPTIONS_WITH_ARG: &str = "ABCDdefm";

/// Spans (in `command` characters) of quoted PCRE grep patterns; `true` when the parse was
/// ambiguous or malformed.
fn quoted_grep_pattern_spans(c: &[char]) -> (Vec<(usize, usize)>, bool) {
    let mut spans = Vec::new();
    for (seg_at, seg_end) in top_level_segments(c) {
        let segment = &c[seg_at..seg_end];
        for (start, end) in command_word_spans(segment) {
            let word = deobfuscate_word(&string(&segment[start..end]));
            let name = basename(&word).to_lowercase();
            if name != "grep" && name != "egrep" {
                continue;
            }
            let Some(tokens) = tokens_with_spans(segment, start) else {
                return (Vec::new(), true);
            };
            let args = &tokens[1.min(tokens.len())..];
            let mut pcre = false;
            let mut explicit_patterns = false;
            let mut pattern_indexes: Vec<usize> = Vec::new();
            let mut operand_index: Option<usize> = None;
            let mut options = true;
            let mut i = 0;
            while i < args.len() {
                let token = args[i].value.as_str();
                if options && token == "--" {
                    options = false;
                    i += 1;
                    continue;
                }
                if options && token.starts_with("--") {
                    let (option, equals) = match token.split_once('=') {
                        Some((o, _)) => (o, true),
                        None => (token, false),
                    };
                    if option == "--perl-regexp" {
                        pcre = true;
                    }
                    if option == "--regexp" || option == "--file" {
                        explicit_patterns = true;
                    }
                    if GREP_OPTIONS_WITH_ARG.contains(&option) && !equals {
                        if i + 1 >= args.len() {
                            return (Vec::new(), true);
                        }
                        if option == "--regexp" {
                            pattern_indexes.push(i + 1);
                        }
                        i += 2;
                        continue;
                    }
                    if option == "--regexp" && equals {
                        pattern_indexes.push(i);
                    }
                    i += 1;
                    continue;
                }
                if options && token.starts_with('-') && token != "-" {
                    let letters: Vec<char> = token.chars().skip(1).collect();
                    for (j, &ch) in letters.iter().enumerate() {
                        if ch == 'P' {
                            pcre = true;
                        }
                        if ch == 'e' || ch == 'f' {
                            explicit_patterns = true;
                        }
                        if GREP_SHORT_OPTIONS_WITH_ARG.contains(ch) {
                            if j + 1 < letters.len() {
                                if ch == 'e' {
                                    pattern_indexes.push(i);
                                }
                            } else {
                                if i + 1 >= args.len() {
                                    return (Vec::new(), true);
                                }
                                if ch == 'e' {
                                    pattern_indexes.push(i + 1);
                                }
                                i += 1;
                            }
                            break;
                        }
                    }
                    i += 1;
                    continue;
                }
                if operand_index.is_none() {
                    operand_index = Some(i);
                }
                i += 1;
            }
            if !explicit_patterns {
                match operand_index {
                    Some(index) => pattern_indexes.push(index),
                    None => return (Vec::new(), pcre),
                }
            }
            if pcre {
                for index in pattern_indexes {
                    if let Some(token) = args.get(index)
                        && token.inert
                    {
                        spans.push((seg_at + token.start, seg_at + token.end));
                    }
                }
            }
        }
    }
    (spans, false)
}

/// `command` with quoted grep PCRE operands blanked out, and whether the parse failed.
pub fn grep_safe_variant(command: &str) -> (String, bool) {
    let c = chars(command);
    let (mut spans, malformed) = quoted_grep_pattern_spans(&c);
    if malformed || spans.is_empty() {
        return (command.to_owned(), malformed);
    }
    spans.sort_unstable();
    let mut out = String::new();
    let mut previous = 0;
    for (start, end) in spans {
        if start < previous {
            continue;
        }
        out.extend(&c[previous..start]);
        out.extend(std::iter::repeat_n(' ', end - start));
        previous = end;
    }
    out.extend(&c[previous..]);
    (out, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blanks_only_quoted_pcre_operands() {
        let (v, bad) = grep_safe_variant("grep -P '(rm -rf /|x)' log.txt");
        assert!(!bad);
        assert_eq!(v, format!("grep -P {} log.txt", " ".repeat(14)));
        // Not PCRE: left as is.
        assert_eq!(
            grep_safe_variant("grep 'rm -rf /' f").0,
            "grep 'rm -rf /' f"
        );
        // Double quotes still expand: not inert.
        assert_eq!(
            grep_safe_variant("grep -P \"rm -rf /\" f").0,
            "grep -P \"rm -rf /\" f"
        );
        // A missing option argument is malformed.
        assert!(grep_safe_variant("grep -P -e").1);
        assert!(grep_safe_variant("grep -P 'x").1);
    }
}
