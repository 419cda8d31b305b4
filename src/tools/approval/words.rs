//! Shell words for detection (ported from `tools/approval.py`): how quoting, escapes and
//! tiny literal substitutions can spell a command word, and a POSIX `shlex` tokenizer.

use std::sync::LazyLock;

use regex::Regex;

use super::shell::{chars, scan_backtick_end, scan_dollar_paren_end, starts_with, string};

static SIMPLE_SHELL_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_./:@%+=,-]+$").expect("regex"));
static PARAM_REPLACEMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{[^}/\s]+/[^}/]*/(?P<replacement>[^}]*)\}").expect("regex"));
static PARAM_DEFAULT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{[^}:\s]+:-(?P<default>[^}]*)\}").expect("regex"));
static ECHO_FLAGS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-[nEe]+$").expect("regex"));

fn is_simple_shell_literal(value: &str) -> bool {
    SIMPLE_SHELL_LITERAL.is_match(value)
}

/// The output of a tiny literal `echo`/`printf` substitution, without running a shell.
fn literal_command_substitution_output(script: &str) -> Option<String> {
    let tokens = shlex_split(script)?;
    let (command, mut args) = tokens.split_first()?;
    match command.to_lowercase().as_str() {
        "echo" => {
            while args.first().is_some_and(|a| ECHO_FLAGS.is_match(a)) {
                args = &args[1..];
            }
            (args.len() == 1 && is_simple_shell_literal(&args[0])).then(|| args[0].clone())
        }
        "printf" => {
            if args.len() == 1 && is_simple_shell_literal(&args[0]) {
                Some(args[0].clone())
            } else if args.len() == 2 && args[0] == "%s" && is_simple_shell_literal(&args[1]) {
                Some(args[1].clone())
            } else {
                None
            }
        }
        _ => None,
    }
}

fn replace_simple_command_substitutions(word: &str) -> String {
    let c = chars(word);
    let mut out = String::new();
    let mut i = 0;
    while i < c.len() {
        if starts_with(&c, i, "$(")
            && let Some(end) = scan_dollar_paren_end(&c, i)
            && let Some(replacement) =
                literal_command_substitution_output(&string(&c[i + 2..end - 1]))
        {
            out.push_str(&replacement);
            i = end;
            continue;
        }
        if c[i] == '`'
            && let Some(end) = scan_backtick_end(&c, i)
            && let Some(replacement) =
                literal_command_substitution_output(&string(&c[i + 1..end - 1]))
        {
            out.push_str(&replacement);
            i = end;
            continue;
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

fn replace_simple_shell_expansions(word: &str) -> String {
    let word = replace_simple_command_substitutions(word);
    let word = PARAM_REPLACEMENT.replace_all(&word, "$replacement");
    PARAM_DEFAULT.replace_all(&word, "$default").into_owned()
}

fn strip_shell_word_syntax(word: &str) -> String {
    let c = chars(word);
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if let Some(q) = quote {
            if ch == '\\' && q == '"' && i + 1 < c.len() {
                out.push(c[i + 1]);
                i += 2;
                continue;
            }
            if ch == q {
                quote = None;
                i += 1;
                continue;
            }
            out.push(ch);
            i += 1;
            continue;
        }
        if ch == '\'' || ch == '"' {
            quote = Some(ch);
            i += 1;
            continue;
        }
        if ch == '\\' && i + 1 < c.len() {
            out.push(c[i + 1]);
            i += 2;
            continue;
        }
        out.push(ch);
        i += 1;
    }
    out
}

/// How shell syntax could spell a command word: quotes, escapes and tiny literal
/// substitutions collapsed (`r\m`, `r''m`, `$(echo rm)` → `rm`).
pub fn deobfuscate_word(word: &str) -> String {
    let mut current = word.to_owned();
    for _ in 0..2 {
        let previous = current.clone();
        current = strip_shell_word_syntax(&replace_simple_shell_expansions(&current));
        if current == previous {
            break;
        }
    }
    current
}

/// POSIX `shlex.split`: `None` on an unclosed quote or a trailing backslash.
pub fn shlex_split(s: &str) -> Option<Vec<String>> {
    shlex_tokens(s, false)
}

/// Python's `shlex.shlex(posix=True, punctuation_chars="<>")` with `whitespace_split`: like
/// [`shlex_split`], but runs of `<` and `>` are tokens of their own when `split_angle`.
pub fn shlex_tokens(s: &str, split_angle: bool) -> Option<Vec<String>> {
    let c = chars(s);
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut in_token = false;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            if in_token {
                tokens.push(std::mem::take(&mut token));
                in_token = false;
            }
            i += 1;
            continue;
        }
        if split_angle && (ch == '<' || ch == '>') {
            if in_token {
                tokens.push(std::mem::take(&mut token));
                in_token = false;
            }
            let mut run = String::new();
            while i < c.len() && (c[i] == '<' || c[i] == '>') {
                run.push(c[i]);
                i += 1;
            }
            tokens.push(run);
            continue;
        }
        in_token = true;
        match ch {
            '\\' => {
                let next = *c.get(i + 1)?;
                token.push(next);
                i += 2;
            }
            '\'' => {
                let close = c[i + 1..].iter().position(|&x| x == '\'')?;
                token.extend(&c[i + 1..i + 1 + close]);
                i += close + 2;
            }
            '"' => {
                i += 1;
                loop {
                    let q = *c.get(i)?;
                    if q == '"' {
                        i += 1;
                        break;
                    }
                    if q == '\\' {
                        let next = *c.get(i + 1)?;
                        if next == '"' || next == '\\' {
                            token.push(next);
                        } else {
                            token.push('\\');
                            token.push(next);
                        }
                        i += 2;
                        continue;
                    }
                    token.push(q);
                    i += 1;
                }
            }
            _ => {
                token.push(ch);
                i += 1;
            }
        }
    }
    if in_token {
        tokens.push(token);
    }
    Some(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex_follows_posix_rules() {
        let split = |s: &str| shlex_split(s).unwrap();
        assert_eq!(
            split(r#"a 'b c' "d \"e\" \x" f\ g"#),
            ["a", "b c", r#"d "e" \x"#, "f g"]
        );
        assert_eq!(split("a '' b"), ["a", "", "b"]);
        assert!(shlex_split("'unclosed").is_none());
        assert!(shlex_split("trailing\\").is_none());
        assert_eq!(
            shlex_tokens("python3<<EOF x>y", true).unwrap(),
            ["python3", "<<", "EOF", "x", ">", "y"]
        );
    }

    #[test]
    fn words_are_deobfuscated() {
        assert_eq!(deobfuscate_word(r"r\m"), "rm");
        assert_eq!(deobfuscate_word("'r'm"), "rm");
        assert_eq!(deobfuscate_word("$(echo rm)"), "rm");
        assert_eq!(deobfuscate_word("`printf %s rm`"), "rm");
        assert_eq!(deobfuscate_word("${X:-rm}"), "rm");
    }
}
