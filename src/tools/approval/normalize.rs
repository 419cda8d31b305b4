//! The machine facts detection depends on, and the light clean-up of a command's text before
//! the kept Hermes pattern table is run over it: ANSI escapes, NUL bytes, Unicode
//! compatibility forms and line continuations are undone and absolute home paths are folded
//! to `~/` and `~/.hermes/`, so the patterns see the spelling they were written for. Quoting,
//! escapes and expansions are the parser's business (`parse.rs`), not this file's.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::UnicodeNormalization;

use crate::tools::ansi::strip_ansi;

/// The machine facts detection depends on: home directories to fold into `~/` and
/// `~/.hermes/`, and the temp directory for the verification-cleanup exemption.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetectionEnv {
    /// The user's home as written and as resolved (`$HOME`, realpath).
    pub user_homes: Vec<String>,
    /// `HERMES_HOME` as written and as resolved.
    pub hermes_homes: Vec<String>,
    /// The resolved temp directory (`/tmp` by default).
    pub temp_dir: Option<PathBuf>,
}

impl DetectionEnv {
    /// Builds the facts from a home directory, a Hermes home and a temp directory,
    /// resolving symlinks where the paths exist.
    pub fn new(user_home: Option<&Path>, hermes_home: Option<&Path>, temp_dir: &Path) -> Self {
        fn with_resolved(path: Option<&Path>) -> Vec<String> {
            let Some(path) = path else {
                return Vec::new();
            };
            let mut out = vec![path.display().to_string()];
            if let Ok(real) = std::fs::canonicalize(path) {
                let real = real.display().to_string();
                if !out.contains(&real) {
                    out.push(real);
                }
            }
            out
        }
        Self {
            user_homes: with_resolved(user_home),
            hermes_homes: with_resolved(hermes_home),
            temp_dir: Some(std::fs::canonicalize(temp_dir).unwrap_or_else(|_| temp_dir.into())),
        }
    }

    /// The user's home as the tools see it (`$HOME`).
    pub fn user_home(&self) -> Option<&str> {
        self.user_homes.first().map(String::as_str)
    }

    /// The Hermes home as the tools see it (`$HERMES_HOME`).
    pub fn hermes_home(&self) -> Option<&str> {
        self.hermes_homes.first().map(String::as_str)
    }
}

static LINE_CONTINUATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\\\r?\n").expect("regex"));
/// Shell metacharacters, quotes and whitespace end a path token.
const PATH_TAIL: &str = r#"(?P<tail>(?:[/\\][^/\\\s'"`;|&<>()]*)+)"#;

/// A regex matching `path` at the start of an absolute path (either separator), or `None`
/// for a degenerate path with fewer than two components (`/`, `C:\`).
fn home_prefix_fold_regex(path: &str) -> Option<Regex> {
    let components: Vec<&str> = path.split(['/', '\\']).filter(|c| !c.is_empty()).collect();
    if components.len() < 2 {
        return None;
    }
    let body = components
        .iter()
        .map(|c| regex::escape(c))
        .collect::<Vec<_>>()
        .join(r"[/\\]+");
    Regex::new(&format!(r"[/\\]*{body}{PATH_TAIL}")).ok()
}

fn fold_home_prefixes(command: String, paths: &[String], replacement: &str) -> String {
    let mut sorted: Vec<&String> = paths.iter().filter(|p| !p.is_empty()).collect();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.len()));
    sorted.dedup();
    let mut command = command;
    for path in sorted {
        if let Some(re) = home_prefix_fold_regex(path) {
            command = re
                .replace_all(&command, |caps: &regex::Captures<'_>| {
                    format!("{replacement}{}", caps["tail"].replace('\\', "/"))
                })
                .into_owned();
        }
    }
    command
}

/// The command without terminal escapes, NUL bytes, compatibility characters and line
/// continuations: what the parser reads.
pub fn clean_command(command: &str) -> String {
    let command = strip_ansi(command).replace('\0', "");
    let command: String = command.nfkc().collect();
    LINE_CONTINUATION.replace_all(&command, "").into_owned()
}

/// `text` with absolute home paths folded to `~/` and `~/.hermes/`.
pub fn fold_homes(text: &str, env: &DetectionEnv) -> String {
    // The more specific Hermes home first: it usually lives under the user home.
    let command = fold_home_prefixes(text.to_owned(), &env.hermes_homes, "~/.hermes");
    fold_home_prefixes(command, &env.user_homes, "~")
}

/// The command's text as the pattern table sees it.
#[cfg(test)]
fn normalize_command_for_detection(command: &str, env: &DetectionEnv) -> String {
    let command = clean_command(command);
    // The more specific Hermes home first: it usually lives under the user home.
    let command = fold_home_prefixes(command, &env.hermes_homes, "~/.hermes");
    fold_home_prefixes(command, &env.user_homes, "~")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> DetectionEnv {
        DetectionEnv {
            user_homes: vec!["/home/alice".into()],
            hermes_homes: vec!["/home/alice/.hermes".into()],
            temp_dir: None,
        }
    }

    #[test]
    fn undoes_terminal_and_unicode_tricks() {
        let cases = [
            ("rm -rf \\\n/", "rm -rf /"),
            ("\x1b[31mrm\x1b[0m -rf /", "rm -rf /"),
            ("ｒｍ -rf /", "rm -rf /"),
            ("rm\0 -rf /", "rm -rf /"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                normalize_command_for_detection(input, &env()),
                expected,
                "{input:?}"
            );
        }
    }

    #[test]
    fn folds_absolute_homes() {
        assert_eq!(
            normalize_command_for_detection("echo x >> /home/alice/.bashrc", &env()),
            "echo x >> ~/.bashrc"
        );
        assert_eq!(
            normalize_command_for_detection(
                "sed -i s/a/b/ /home/alice/.hermes/config.yaml",
                &env()
            ),
            "sed -i s/a/b/ ~/.hermes/config.yaml"
        );
        // A bare home with nothing under it, and a degenerate home, are left alone.
        assert_eq!(
            normalize_command_for_detection("cd /home/alice", &env()),
            "cd /home/alice"
        );
        let root = DetectionEnv {
            user_homes: vec!["/".into()],
            ..DetectionEnv::default()
        };
        assert_eq!(
            normalize_command_for_detection("cat /etc/x", &root),
            "cat /etc/x"
        );
    }
}
