//! Detection: hardline commands (never run), dangerous commands (ask first) and the
//! `sudo -S` guard, over every spelling variant of a command (Python `detect_*`).

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::exec_flags::{MALFORMED_EXEC_DESCRIPTION, execution_flag_findings};
use super::grep_safe::grep_safe_variant;
use super::normalize::{DetectionEnv, normalize_command_for_detection};
use super::patterns::{DANGEROUS, HARDLINE, Pattern, is_match};
use super::shell::{chars, command_word_spans, mark_command_starts, string};
use super::words::{deobfuscate_word, shlex_split};

const MAX_DETECTION_COMMAND_CHARS: usize = 128_000;
const MAX_SEPARATOR_FREE_COMMAND_CHARS: usize = 4_096;
const MAX_DETECTION_SEGMENTS: usize = 25_000;
pub const PARSER_LIMIT_DESCRIPTION: &str = "command parser limit exceeded";

/// A dangerous-pattern match: `key` is what approvals are stored under (the description,
/// as in current Hermes), `description` is what the user is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DangerMatch {
    pub key: String,
    pub description: String,
}

impl DangerMatch {
    fn new(description: &str) -> Self {
        Self {
            key: description.to_owned(),
            description: description.to_owned(),
        }
    }
}

/// Over-long or separator-heavy input is refused before any parsing (fails closed).
fn parser_limit_exceeded(command: &str) -> bool {
    let length = command.chars().count();
    if length > MAX_DETECTION_COMMAND_CHARS {
        return true;
    }
    let separators = command
        .chars()
        .filter(|c| matches!(c, ';' | '&' | '|' | '\n'))
        .count();
    if length > MAX_SEPARATOR_FREE_COMMAND_CHARS && separators == 0 {
        return true;
    }
    separators >= MAX_DETECTION_SEGMENTS
}

static VERIFY_ARTIFACT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^hermes-(?:verify|ad-hoc)-[A-Za-z0-9_.-]+$").expect("regex"));

/// `rm -f <tmp>/hermes-verify-*` removing one of Hermes's own temp scripts is not dangerous.
fn is_verification_artifact_cleanup(command: &str, env: &DetectionEnv) -> bool {
    let Some(temp_dir) = &env.temp_dir else {
        return false;
    };
    let Some(argv) = shlex_split(command) else {
        return false;
    };
    if argv.len() != 3 || argv[0] != "rm" || argv[1] != "-f" {
        return false;
    }
    let operand = Path::new(&argv[2]);
    let Some(name) = operand.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if operand != temp_dir.join(name) {
        return false;
    }
    let target = std::fs::canonicalize(operand).unwrap_or_else(|_| operand.to_path_buf());
    target.parent() == Some(temp_dir.as_path()) && VERIFY_ARTIFACT.is_match(name)
}

/// Every spelling of `command` the patterns must see, in the Python order: the grep-safe
/// normalised form, payloads of `bash -c`-style options (recursively), the form with command
/// starts marked, and forms with each command word de-obfuscated.
pub(super) fn command_detection_variants(command: &str, env: &DetectionEnv) -> Vec<String> {
    let normalized = normalize_command_for_detection(command, env);
    let (grep_safe, _) = grep_safe_variant(&normalized);
    let mut variants = vec![grep_safe.clone()];
    let push = |variant: String, variants: &mut Vec<String>| -> bool {
        if variants.contains(&variant) {
            false
        } else {
            variants.push(variant);
            true
        }
    };
    let mut pending = vec![normalized.clone()];
    while let Some(variant) = pending.pop() {
        for (_, payload) in execution_flag_findings(&variant) {
            let Some(payload) = payload.filter(|p| !p.is_empty()) else {
                continue;
            };
            if push(payload.clone(), &mut variants) {
                let marked = mark_command_starts(&payload);
                if marked != payload {
                    push(marked, &mut variants);
                }
                pending.push(payload);
            }
        }
    }
    let marked = mark_command_starts(&grep_safe);
    if marked != grep_safe {
        push(marked, &mut variants);
    }
    let c = chars(&normalized);
    for (start, end) in command_word_spans(&c) {
        let word = string(&c[start..end]);
        let deobfuscated = deobfuscate_word(&word);
        if deobfuscated.is_empty() || deobfuscated == word {
            continue;
        }
        let variant = format!("{}{deobfuscated}{}", string(&c[..start]), string(&c[end..]));
        push(variant, &mut variants);
    }
    variants
}

/// Python's `$` also matches before a final newline; dropping one trailing newline gives
/// the Rust `$` the same reach.
fn for_matching(variant: &str) -> String {
    let lower = variant.to_lowercase();
    match lower.strip_suffix('\n') {
        Some(stripped) => stripped.to_owned(),
        None => lower,
    }
}

fn first_match<'a>(patterns: &'a [Pattern], variants: &[String]) -> Option<&'a Pattern> {
    variants.iter().find_map(|variant| {
        let text = for_matching(variant);
        patterns.iter().find(|p| is_match(&p.regex, &text))
    })
}

/// A command that must never run through the agent (root wipe, mkfs, raw disk writes,
/// fork bomb, kill -1, shutdown), whatever the approval mode. Returns the description.
pub fn detect_hardline_command(command: &str, env: &DetectionEnv) -> Option<String> {
    if parser_limit_exceeded(command) {
        return Some(PARSER_LIMIT_DESCRIPTION.to_owned());
    }
    let normalized = normalize_command_for_detection(command, env);
    if grep_safe_variant(&normalized).1 {
        return Some(MALFORMED_EXEC_DESCRIPTION.to_owned());
    }
    let variants = command_detection_variants(command, env);
    first_match(&HARDLINE, &variants).map(|p| p.description.to_owned())
}

/// The first dangerous pattern `command` matches, without folding home directories.
pub fn detect_dangerous_command(command: &str) -> Option<DangerMatch> {
    detect_dangerous_command_in(command, &DetectionEnv::default())
}

/// The first dangerous pattern `command` matches (then execution-flag findings such as
/// `python -c`), with absolute home paths folded as `env` describes.
pub fn detect_dangerous_command_in(command: &str, env: &DetectionEnv) -> Option<DangerMatch> {
    if parser_limit_exceeded(command) {
        return Some(DangerMatch::new(PARSER_LIMIT_DESCRIPTION));
    }
    if is_verification_artifact_cleanup(command, env) {
        return None;
    }
    let variants = command_detection_variants(command, env);
    if let Some(pattern) = first_match(&DANGEROUS, &variants) {
        return Some(DangerMatch::new(pattern.description));
    }
    let normalized = normalize_command_for_detection(command, env);
    execution_flag_findings(&normalized)
        .into_iter()
        .next()
        .map(|(description, _)| DangerMatch::new(&description))
}

static SUDO_STDIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?:^|[;&|`\n]|&&|\|\||\$\()\s*sudo\s+-S\b").expect("regex"));

pub const SUDO_STDIN_DESCRIPTION: &str = "sudo password guessing via stdin (sudo -S)";

/// `sudo -S` with no configured `SUDO_PASSWORD` is the model guessing passwords.
pub fn detect_sudo_stdin(command: &str, env: &DetectionEnv) -> bool {
    SUDO_STDIN.is_match(&normalize_command_for_detection(command, env).to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_fail_closed_and_cleanup_is_exempt() {
        let huge = "a".repeat(5000);
        assert_eq!(
            detect_dangerous_command(&huge).map(|m| m.key),
            Some(PARSER_LIMIT_DESCRIPTION.to_owned())
        );
        let dir = tempfile::tempdir().unwrap();
        let env = DetectionEnv::new(None, None, dir.path());
        let tmp = env.temp_dir.clone().unwrap();
        let script = tmp.join("hermes-verify-abc.py");
        let cmd = format!("rm -f {}", script.display());
        assert_eq!(detect_dangerous_command_in(&cmd, &env), None);
        // Any other absolute rm target is still "delete in root path".
        let other = format!("rm -f {}", tmp.join("important.db").display());
        assert_eq!(
            detect_dangerous_command_in(&other, &env).map(|m| m.key),
            Some("delete in root path".to_owned())
        );
        let recursive = format!("rm -rf {}", script.display());
        assert!(detect_dangerous_command_in(&recursive, &env).is_some());
    }

    #[test]
    fn sudo_stdin_guard() {
        let env = DetectionEnv::default();
        assert!(detect_sudo_stdin("echo pw | sudo -S apt install x", &env));
        assert!(detect_sudo_stdin("sudo -S ls", &env));
        assert!(!detect_sudo_stdin("sudo ls -S", &env));
        assert!(!detect_sudo_stdin("echo 'visudo -S'", &env));
    }
}
