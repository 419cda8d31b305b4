//! Detection: hardline commands (never run), dangerous commands (ask first) and the
//! `sudo -S` guard. The command is parsed (`parse.rs`) and every simple command judged
//! (`judge/`); the Hermes pattern table is kept as a floor and run over the command's text
//! and over a plain rendering of every simple command and pipeline the parser found, so
//! quoting and escapes cannot hide a command from it and Hermes's approval keys still apply.

use std::cell::RefCell;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::judge::{Context, Finding, KEY_UNREADABLE, judge_script};
use super::normalize::{DetectionEnv, clean_command, fold_homes};
use super::parse::{Invocation, Scope, Script, Word, read_script};
use super::patterns::{DANGEROUS, HARDLINE, Pattern, is_match};
use crate::tools::sensitive::Places;

const MAX_DETECTION_COMMAND_CHARS: usize = 128_000;
const MAX_SEPARATOR_FREE_COMMAND_CHARS: usize = 4_096;
const MAX_DETECTION_SEGMENTS: usize = 25_000;
pub const PARSER_LIMIT_DESCRIPTION: &str = "command parser limit exceeded";

/// Where the Hermes home is assumed to be when the tools were given none.
const HERMES_HOME_FALLBACK: &str = ".hermes";

/// A reason to ask: `key` is what approvals are stored under (as in Hermes, the pattern's
/// description where a Hermes pattern applies), `description` is what the user is shown.
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

impl From<Finding> for DangerMatch {
    fn from(f: Finding) -> Self {
        DangerMatch {
            key: f.key,
            description: f.description,
        }
    }
}

/// Everything detection found about one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assessment {
    /// Never runs, whatever the settings.
    pub hardline: Option<String>,
    /// Needs approval, for each of these reasons (Hermes pattern keys first).
    pub dangers: Vec<DangerMatch>,
    /// The texts the pattern table and `approvals.deny` are matched against.
    pub variants: Vec<String>,
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
fn is_verification_artifact_cleanup(script: &Script, env: &DetectionEnv) -> bool {
    let Some(temp_dir) = &env.temp_dir else {
        return false;
    };
    let [only] = script.invocations.as_slice() else {
        return false;
    };
    let argv: Option<Vec<&str>> = only.words.iter().map(|w| w.value.as_deref()).collect();
    let Some(["rm", "-f", operand]) = argv.as_deref() else {
        return false;
    };
    if !only.redirects.is_empty() {
        return false;
    }
    let operand = Path::new(operand);
    let Some(name) = operand.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if operand != temp_dir.join(name) {
        return false;
    }
    let target = std::fs::canonicalize(operand).unwrap_or_else(|_| operand.to_path_buf());
    target.parent() == Some(temp_dir.as_path()) && VERIFY_ARTIFACT.is_match(name)
}

/// A simple command as plain text: known values, unknown words as written, redirections.
fn render(inv: &Invocation) -> String {
    // `${IFS}` is how a word hides the spaces between a command and its arguments.
    let shown = |w: &Word| match (&w.value, &w.guess) {
        (Some(v), _) | (None, Some(v)) => v.clone(),
        (None, None) => w.raw.replace("${IFS}", " ").replace("$IFS", " "),
    };
    let mut parts: Vec<String> = inv.words.iter().map(shown).collect();
    for r in &inv.redirects {
        parts.push(format!("{} {}", r.operator, r.target.shown()));
    }
    parts.join(" ")
}

/// The renderings of every simple command and every pipeline of `script`.
fn renderings(script: &Script) -> Vec<String> {
    let mut out: Vec<String> = script.invocations.iter().map(render).collect();
    for range in &script.pipelines {
        let depth = script.invocations[range.start].depth;
        let stages: Vec<String> = script.invocations[range.clone()]
            .iter()
            .filter(|inv| inv.depth == depth)
            .map(render)
            .collect();
        out.push(stages.join(" | "));
    }
    out
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

fn matches<'a>(patterns: &'a [Pattern], variants: &[String]) -> Vec<&'a Pattern> {
    let texts: Vec<String> = variants.iter().map(|v| for_matching(v)).collect();
    patterns
        .iter()
        .filter(|p| texts.iter().any(|t| is_match(&p.regex, t)))
        .collect()
}

/// Parses and judges `command` run in `cwd` (unknown: relative paths are judged as if in
/// either home).
pub fn assess(command: &str, env: &DetectionEnv, cwd: Option<&Path>) -> Assessment {
    if parser_limit_exceeded(command) {
        return Assessment {
            hardline: Some(PARSER_LIMIT_DESCRIPTION.to_owned()),
            dangers: vec![DangerMatch::new(PARSER_LIMIT_DESCRIPTION)],
            variants: vec![command.to_owned()],
        };
    }
    let cleaned = clean_command(command);
    let home = env.user_home();
    let fallback_hermes = home.map(|h| format!("{h}/{HERMES_HOME_FALLBACK}"));
    let hermes_home = env.hermes_home().or(fallback_hermes.as_deref());
    let places = Places::new(
        home.map(Path::new),
        Path::new(hermes_home.unwrap_or("/nonexistent-hermes-home")),
    );
    let ctx = Context {
        places: &places,
        home,
        hermes_home,
        nested: RefCell::new(Vec::new()),
    };
    let mut scope = Scope::new(home, hermes_home, cwd);
    let initial_scope = scope.clone();
    let mut findings = Vec::new();
    let mut variants = vec![fold_homes(&cleaned, env)];
    match read_script(&cleaned, &mut scope) {
        Ok(script) => {
            if is_verification_artifact_cleanup(&script, env) {
                return Assessment::default();
            }
            judge_script(&script, &ctx, &initial_scope, &mut findings);
            variants.extend(renderings(&script).iter().map(|r| fold_homes(r, env)));
        }
        Err(e) => {
            findings.push(Finding {
                key: KEY_UNREADABLE.to_owned(),
                description: format!("{KEY_UNREADABLE}: {e}"),
            });
            // With no tree to go by, every operator may start a command: the pattern table
            // sees each piece on a line of its own, so the hardline floor still applies.
            // Quotes and backslashes are dropped: they can only hide a word here.
            let pieces: String = cleaned
                .chars()
                .filter(|c| !"\"'\\".contains(*c))
                .map(|c| if ";&|(){}`".contains(c) { '\n' } else { c })
                .collect();
            variants.push(fold_homes(&pieces, env));
        }
    }
    // Text handed to `eval`, `sh -c` and shells' here-documents was judged above; its
    // simple commands go through the pattern table too.
    for text in ctx.nested.take() {
        variants.push(fold_homes(&text, env));
        let mut nested_scope = initial_scope.clone();
        if let Ok(script) = read_script(&text, &mut nested_scope) {
            variants.extend(renderings(&script).iter().map(|r| fold_homes(r, env)));
        }
    }
    variants.dedup();
    let hardline = matches(&HARDLINE, &variants)
        .first()
        .map(|p| p.description.to_owned());
    let mut dangers: Vec<DangerMatch> = matches(&DANGEROUS, &variants)
        .into_iter()
        .map(|p| DangerMatch::new(p.description))
        .collect();
    for finding in findings {
        if !dangers.iter().any(|d| d.key == finding.key) {
            dangers.push(finding.into());
        }
    }
    Assessment {
        hardline,
        dangers,
        variants,
    }
}

/// A command that must never run through the agent (root wipe, mkfs, raw disk writes,
/// fork bomb, kill -1, shutdown), whatever the approval mode. Returns the description.
pub fn detect_hardline_command(command: &str, env: &DetectionEnv) -> Option<String> {
    assess(command, env, None).hardline
}

/// The first reason `command` needs approval, without folding home directories.
pub fn detect_dangerous_command(command: &str) -> Option<DangerMatch> {
    detect_dangerous_command_in(command, &DetectionEnv::default())
}

/// The first reason `command` needs approval (a Hermes pattern where one applies), with
/// absolute home paths folded as `env` describes.
pub fn detect_dangerous_command_in(command: &str, env: &DetectionEnv) -> Option<DangerMatch> {
    assess(command, env, None).dangers.into_iter().next()
}

static SUDO_STDIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?:^|[;&|`\n]|&&|\|\||\$\()\s*sudo\s+-S\b").expect("regex"));

pub const SUDO_STDIN_DESCRIPTION: &str = "sudo password guessing via stdin (sudo -S)";

/// `sudo -S` with no configured `SUDO_PASSWORD` is the model guessing passwords.
pub fn detect_sudo_stdin(assessment: &Assessment) -> bool {
    assessment.variants.iter().any(|v| SUDO_STDIN.is_match(v))
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
        let sudo = |c: &str| detect_sudo_stdin(&assess(c, &env, None));
        assert!(sudo("echo pw | sudo -S apt install x"));
        assert!(sudo("sudo -S ls"));
        assert!(sudo("s\\udo -S ls"));
        assert!(!sudo("sudo ls -S"));
        assert!(!sudo("echo 'visudo -S'"));
    }
}
