//! Shell-style wildcard matching with Python `fnmatch.fnmatchcase` semantics (`*`, `?`,
//! `[seq]`, `[!seq]`), used for command allowlist/deny globs and file-name search.

use regex::Regex;

/// Translates a glob into an anchored regex, like Python's `fnmatch.translate`.
pub fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::from("(?s)^");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => {
                // Consecutive stars are one star.
                while i < chars.len() && chars[i] == '*' {
                    i += 1;
                }
                out.push_str(".*");
            }
            '?' => out.push('.'),
            '[' => {
                let mut j = i;
                if j < chars.len() && chars[j] == '!' {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str(r"\[");
                    continue;
                }
                let body: String = chars[i..j].iter().collect();
                i = j + 1;
                let (negate, body) = match body.strip_prefix('!') {
                    Some(rest) => (true, rest.to_owned()),
                    None => (false, body),
                };
                if body.is_empty() {
                    // `[]` never matches, `[!]` matches any character.
                    out.push_str(if negate { "." } else { "[^\\s\\S]" });
                    continue;
                }
                out.push('[');
                if negate {
                    out.push('^');
                }
                for ch in body.chars() {
                    match ch {
                        '\\' | '[' | ']' | '^' | '&' | '~' => {
                            out.push('\\');
                            out.push(ch);
                        }
                        _ => out.push(ch),
                    }
                }
                out.push(']');
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
    }
    out.push('$');
    out
}

/// Case-sensitive glob match of the whole `name`.
pub fn fnmatchcase(name: &str, pattern: &str) -> bool {
    Regex::new(&translate(pattern)).is_ok_and(|re| re.is_match(name))
}

/// A compiled glob, for matching many names.
#[derive(Debug, Clone)]
pub struct Glob(Regex);

impl Glob {
    pub fn new(pattern: &str) -> Option<Self> {
        Regex::new(&translate(pattern)).ok().map(Glob)
    }

    pub fn is_match(&self, name: &str) -> bool {
        self.0.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_like_python_fnmatchcase() {
        let cases = [
            ("podman ps", "podman *", true),
            ("podman", "podman *", false),
            ("main.rs", "*.rs", true),
            ("main.RS", "*.rs", false),
            ("a1", "a?", true),
            ("a12", "a?", false),
            ("b", "[abc]", true),
            ("d", "[!abc]", true),
            ("a", "[!abc]", false),
            ("x[y", "x[y", true),
            ("a.b", "a.b", true),
            ("axb", "a.b", false),
            ("line1\nline2", "line1*", true),
        ];
        for (name, pattern, expected) in cases {
            assert_eq!(
                fnmatchcase(name, pattern),
                expected,
                "{name:?} vs {pattern:?}"
            );
        }
        assert!(Glob::new("*config*").is_some_and(|g| g.is_match("myconfig.yaml")));
    }
}
