//! `hooks:` and `hooks_auto_accept` — the operator's shell commands that run at points of an
//! agent turn (Hermes 0.19's shell hooks). Each event name maps to a list of entries with a
//! `command` (split like a shell would, never run through one), an optional `matcher` (a
//! regular expression the whole tool name must match; tool events only) and a `timeout` in
//! seconds (1 to 300, default 60).
//!
//! Hermes skips a malformed entry with a log line; hermesd refuses the file instead, naming
//! the key, because a guard the operator believes is on must not silently be off. Events
//! Hermes knows but hermesd never fires are reported as not supported.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::parse::{Issues, at, kind};

/// Every event name Hermes accepts under `hooks:` (`hermes_cli/plugins.py` VALID_HOOKS).
#[rustfmt::skip]
pub const HOOK_EVENTS: &[&str] = &[
    "api_request_error", "kanban_task_blocked", "kanban_task_claimed", "kanban_task_completed",
    "on_session_end", "on_session_finalize", "on_session_reset", "on_session_start",
    "post_api_request", "post_approval_response", "post_llm_call", "post_tool_call",
    "pre_api_request", "pre_approval_request", "pre_gateway_dispatch", "pre_llm_call",
    "pre_tool_call", "pre_verify", "subagent_start", "subagent_stop", "transform_llm_output",
    "transform_terminal_output", "transform_tool_result",
];

/// The events hermesd fires; the others are accepted and reported as not supported.
pub const FIRED_EVENTS: &[&str] = &[
    "on_session_end",
    "on_session_start",
    "post_llm_call",
    "post_tool_call",
    "pre_llm_call",
    "pre_tool_call",
];

/// Events whose entries may carry a `matcher` (the tool name is known there).
const TOOL_EVENTS: &[&str] = &["pre_tool_call", "post_tool_call"];

/// Sub-keys of `hooks:` that are settings, not events (Hermes's output-spill budget).
const NOT_EVENTS: &[&str] = &["output_spill"];

pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 60;
pub const MAX_HOOK_TIMEOUT_SECS: u64 = 300;

/// One configured hook: `hooks.<event>[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookSpec {
    pub event: String,
    /// As written (trimmed): the allowlist is keyed by this exact text, as in Hermes.
    pub command: String,
    /// The regular expression as written; `None` matches every tool.
    pub matcher: Option<String>,
    pub timeout_secs: u64,
}

impl HookSpec {
    /// Whether this hook fires for `tool` (the matcher must match the whole name).
    pub fn matches_tool(&self, tool: &str) -> bool {
        match &self.matcher {
            None => true,
            Some(pattern) => regex::Regex::new(&format!("^(?:{pattern})$"))
                .map(|re| re.is_match(tool))
                .unwrap_or(false),
        }
    }
}

/// The validated `hooks:` block and the consent settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HooksConfig {
    pub hooks: Vec<HookSpec>,
    /// `hooks_auto_accept: true` or `HERMES_ACCEPT_HOOKS` set to a true value: a hook not yet
    /// approved is approved (and recorded) at start-up instead of being skipped.
    pub auto_accept: bool,
}

fn truthy(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Validates `hooks:` and `hooks_auto_accept` (`env` only for `HERMES_ACCEPT_HOOKS`).
pub fn hooks(
    issues: &mut Issues,
    block: Option<&Value>,
    auto_accept: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> HooksConfig {
    let from_env = env.get("HERMES_ACCEPT_HOOKS").is_some_and(|v| truthy(v));
    let from_config = issues.bool(at("hooks_auto_accept", auto_accept), false);
    HooksConfig {
        hooks: entries(issues, block),
        auto_accept: from_env || from_config,
    }
}

fn entries(issues: &mut Issues, block: Option<&Value>) -> Vec<HookSpec> {
    let map = match block {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            issues.error(
                "hooks",
                format!(
                    "expected a mapping of event names to lists of hooks, got {}",
                    kind(other)
                ),
            );
            return Vec::new();
        }
    };
    let mut specs = Vec::new();
    for (event, list) in map {
        let key = format!("hooks.{event}");
        if NOT_EVENTS.contains(&event.as_str()) {
            issues.ignored.push(key);
            continue;
        }
        if !HOOK_EVENTS.contains(&event.as_str()) {
            let hint = closest(event, HOOK_EVENTS)
                .map(|name| format!(" (did you mean '{name}'?)"))
                .unwrap_or_default();
            issues.error(key, format!("'{event}' is not a hook event{hint}"));
            continue;
        }
        let items = match list {
            Value::Null => continue,
            Value::Array(items) => items,
            other => {
                issues.error(
                    key,
                    format!("expected a list of hooks, got {}", kind(other)),
                );
                continue;
            }
        };
        if !items.is_empty() && !FIRED_EVENTS.contains(&event.as_str()) {
            issues.ignored.push(key.clone());
        }
        for (index, item) in items.iter().enumerate() {
            if let Some(spec) = entry(issues, event, &format!("{key}[{index}]"), item) {
                specs.push(spec);
            }
        }
    }
    specs
}

fn entry(issues: &mut Issues, event: &str, key: &str, item: &Value) -> Option<HookSpec> {
    let Value::Object(fields) = item else {
        issues.error(
            key,
            format!("expected a mapping with a 'command', got {}", kind(item)),
        );
        return None;
    };
    for name in fields.keys() {
        if !["command", "matcher", "timeout"].contains(&name.as_str()) {
            issues.warn(format!("unknown key '{key}.{name}'"));
        }
    }
    let command = issues.string(at(format!("{key}.command"), fields.get("command")));
    let Some(command) = command else {
        issues.error(format!("{key}.command"), "a hook needs a non-empty command");
        return None;
    };
    if shlex::split(&command).is_none_or(|argv| argv.is_empty()) {
        issues.error(
            format!("{key}.command"),
            "cannot be split into words (an unclosed quote?)",
        );
        return None;
    }
    let timeout_secs = issues.uint(
        at(format!("{key}.timeout"), fields.get("timeout")),
        DEFAULT_HOOK_TIMEOUT_SECS,
        1,
        MAX_HOOK_TIMEOUT_SECS,
    );
    let mut matcher = issues.string(at(format!("{key}.matcher"), fields.get("matcher")));
    if let Some(pattern) = &matcher {
        if !TOOL_EVENTS.contains(&event) {
            issues.warn(format!(
                "{key}.matcher is ignored: only pre_tool_call and post_tool_call hooks match \
                 tool names; this hook runs on every {event}"
            ));
            matcher = None;
        } else if let Err(error) = regex::Regex::new(&format!("^(?:{pattern})$")) {
            issues.error(
                format!("{key}.matcher"),
                format!("not a valid regular expression: {error}"),
            );
            return None;
        }
    }
    Some(HookSpec {
        event: event.to_owned(),
        command,
        matcher,
        timeout_secs,
    })
}

/// The known name nearest to `name` (edit distance at most a third of its length).
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|candidate| (distance(name, candidate), *candidate))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, candidate)| candidate)
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(block: Value) -> (HooksConfig, Issues) {
        let mut issues = Issues::default();
        let config = hooks(&mut issues, Some(&block), None, &BTreeMap::new());
        (config, issues)
    }

    fn error_text(issues: &Issues) -> String {
        issues
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn entries_are_typed_with_defaults_and_matchers() {
        let (config, issues) = parse(json!({
            "pre_tool_call": [
                {"command": " ~/hooks/guard.sh ", "matcher": "terminal|write_file", "timeout": 5},
                {"command": "python3 /h/audit.py"}
            ],
            "on_session_end": null,
        }));
        assert!(issues.errors.is_empty(), "{}", error_text(&issues));
        assert_eq!(config.hooks.len(), 2);
        let guard = &config.hooks[0];
        assert_eq!(guard.command, "~/hooks/guard.sh");
        assert_eq!(guard.timeout_secs, 5);
        assert!(guard.matches_tool("terminal"));
        assert!(guard.matches_tool("write_file"));
        assert!(
            !guard.matches_tool("terminal_x"),
            "the whole name must match"
        );
        assert_eq!(config.hooks[1].timeout_secs, DEFAULT_HOOK_TIMEOUT_SECS);
        assert!(config.hooks[1].matches_tool("anything"));
    }

    #[test]
    fn an_unknown_event_is_an_error_naming_the_closest_event() {
        let (_, issues) = parse(json!({"pre_tool_cal": [{"command": "x"}]}));
        let text = error_text(&issues);
        assert!(text.contains("hooks.pre_tool_cal"), "{text}");
        assert!(text.contains("did you mean 'pre_tool_call'"), "{text}");
    }

    #[test]
    fn timeout_outside_one_to_three_hundred_is_an_error() {
        for bad in [json!(0), json!(301), json!("soon")] {
            let (_, issues) = parse(json!({"post_tool_call": [{"command": "x", "timeout": bad}]}));
            let text = error_text(&issues);
            assert!(text.contains("hooks.post_tool_call[0].timeout"), "{text}");
        }
        let (config, issues) = parse(json!({"post_tool_call": [{"command": "x", "timeout": 300}]}));
        assert!(issues.errors.is_empty());
        assert_eq!(config.hooks[0].timeout_secs, 300);
    }

    #[test]
    fn bad_entries_are_errors_naming_the_key() {
        let cases = [
            (
                json!({"pre_tool_call": [{"matcher": "x"}]}),
                "hooks.pre_tool_call[0].command",
            ),
            (
                json!({"pre_tool_call": [{"command": "a 'b"}]}),
                "hooks.pre_tool_call[0].command",
            ),
            (
                json!({"pre_tool_call": [{"command": "a", "matcher": "("}]}),
                "hooks.pre_tool_call[0].matcher",
            ),
            (json!({"pre_tool_call": "a"}), "hooks.pre_tool_call"),
            (json!({"pre_tool_call": ["a"]}), "hooks.pre_tool_call[0]"),
            (json!(["a"]), "hooks"),
        ];
        for (block, key) in cases {
            let (_, issues) = parse(block.clone());
            let text = error_text(&issues);
            assert!(text.contains(key), "{block}: {text}");
        }
    }

    #[test]
    fn a_matcher_on_a_non_tool_event_is_dropped_with_a_warning() {
        let (config, issues) = parse(json!({"pre_llm_call": [{"command": "a", "matcher": "x"}]}));
        assert!(issues.errors.is_empty());
        assert_eq!(config.hooks[0].matcher, None);
        assert!(
            issues
                .warnings
                .iter()
                .any(|w| w.contains("matcher is ignored"))
        );
    }

    #[test]
    fn events_hermesd_never_fires_are_reported_as_not_supported() {
        let (config, issues) = parse(json!({
            "transform_tool_result": [{"command": "a"}],
            "pre_tool_call": [{"command": "b"}],
            "output_spill": {"max_chars": 10},
        }));
        assert!(issues.errors.is_empty());
        assert_eq!(config.hooks.len(), 2);
        assert_eq!(
            issues.ignored,
            ["hooks.output_spill", "hooks.transform_tool_result"]
        );
    }

    #[test]
    fn consent_comes_from_the_config_key_or_the_environment() {
        let mut issues = Issues::default();
        let on = hooks(&mut issues, None, Some(&json!(true)), &BTreeMap::new());
        assert!(on.auto_accept);
        let env = BTreeMap::from([("HERMES_ACCEPT_HOOKS".to_owned(), "yes".to_owned())]);
        assert!(hooks(&mut issues, None, None, &env).auto_accept);
        assert!(!hooks(&mut issues, None, None, &BTreeMap::new()).auto_accept);
        let env = BTreeMap::from([("HERMES_ACCEPT_HOOKS".to_owned(), "0".to_owned())]);
        assert!(!hooks(&mut issues, None, Some(&json!(false)), &env).auto_accept);
    }
}
