//! `display.background_process_notifications`: what a chat is told when a background
//! process its agent started ends. Hermes 0.19's values (`all`, `result`, `error`, `off`;
//! YAML `false` is `off`; anything else warns and means `all`; the env var
//! `HERMES_BACKGROUND_NOTIFICATIONS` wins over the file) plus hermesd's own `concise`: one
//! line when it ends, whatever the exit code, without its output.

use std::collections::BTreeMap;

use serde_json::Value;

use super::env_overrides::{BACKGROUND_NOTIFICATIONS, env_leaf};
use super::parse::{Issues, Leaf, at};

/// `display.background_process_notifications`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessNotices {
    /// Hermes's default: the final message with output; Hermes also posts running-output
    /// updates, which hermesd does not (reported once at start when chosen).
    #[default]
    All,
    /// The final message with output, whatever the exit code.
    Result,
    /// The final message with output, only when the exit code is not 0.
    Error,
    /// hermesd extension: one line (id, command, exit code, runtime), no output.
    Concise,
    Off,
}

impl ProcessNotices {
    pub const NAMES: &[&str] = &["all", "result", "error", "concise", "off"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "all" => Self::All,
            "result" => Self::Result,
            "error" => Self::Error,
            "concise" => Self::Concise,
            "off" => Self::Off,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether an exit with `code` (`None`: unknown, e.g. killed) is told in this mode.
    pub fn tells(self, code: Option<i32>) -> bool {
        match self {
            Self::All | Self::Result | Self::Concise => true,
            Self::Error => code != Some(0),
            Self::Off => false,
        }
    }
}

/// The mode from the env var (first) or the file's `display.background_process_notifications`.
pub fn parse(
    issues: &mut Issues,
    raw: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> ProcessNotices {
    let leaf = env_leaf(env, BACKGROUND_NOTIFICATIONS)
        .or_else(|| at("display.background_process_notifications", raw));
    let Some(Leaf { key, value }) = leaf else {
        return ProcessNotices::default();
    };
    let name = match &value {
        Value::Bool(false) => return ProcessNotices::Off,
        Value::String(text) if text.trim().is_empty() => return ProcessNotices::default(),
        Value::String(text) => text.trim().to_ascii_lowercase(),
        other => other.to_string(),
    };
    ProcessNotices::from_name(&name).unwrap_or_else(|| {
        issues.warn(format!(
            "{key}: unknown value {name:?} (expected one of {}); using \"all\"",
            ProcessNotices::NAMES.join(", ")
        ));
        ProcessNotices::All
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(raw: Option<Value>, env: &[(&str, &str)]) -> (ProcessNotices, Vec<String>) {
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut issues = Issues::default();
        let mode = parse(&mut issues, raw.as_ref(), &env);
        assert!(issues.errors.is_empty());
        (mode, issues.warnings)
    }

    #[test]
    fn modes_follow_hermes_and_add_concise() {
        let s = |t: &str| Some(Value::String(t.into()));
        assert_eq!(mode(None, &[]).0, ProcessNotices::All);
        for name in ProcessNotices::NAMES {
            let (parsed, warnings) = mode(s(&format!(" {} ", name.to_uppercase())), &[]);
            assert_eq!(parsed.as_str(), *name);
            assert!(warnings.is_empty());
        }
        assert_eq!(mode(Some(Value::Bool(false)), &[]).0, ProcessNotices::Off);
        assert_eq!(mode(s(""), &[]).0, ProcessNotices::All);
        let (unknown, warnings) = mode(s("loud"), &[]);
        assert_eq!(unknown, ProcessNotices::All);
        assert!(
            warnings[0].contains("display.background_process_notifications"),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("\"loud\""), "{warnings:?}");
        let (yes, warnings) = mode(Some(Value::Bool(true)), &[]);
        assert_eq!((yes, warnings.len()), (ProcessNotices::All, 1));
    }

    #[test]
    fn the_env_var_wins_over_the_file() {
        let file = Some(Value::String("off".into()));
        let env = [(BACKGROUND_NOTIFICATIONS, "error")];
        assert_eq!(mode(file.clone(), &env).0, ProcessNotices::Error);
        let (unknown, warnings) = mode(file.clone(), &[(BACKGROUND_NOTIFICATIONS, "nope")]);
        assert_eq!(unknown, ProcessNotices::All);
        assert!(
            warnings[0].starts_with(BACKGROUND_NOTIFICATIONS),
            "{warnings:?}"
        );
        // An empty env var is unset.
        assert_eq!(
            mode(file, &[(BACKGROUND_NOTIFICATIONS, " ")]).0,
            ProcessNotices::Off
        );
    }

    #[test]
    fn which_exits_each_mode_tells() {
        use ProcessNotices::*;
        for (mode, ok, failed, unknown) in [
            (All, true, true, true),
            (Result, true, true, true),
            (Concise, true, true, true),
            (Error, false, true, true),
            (Off, false, false, false),
        ] {
            assert_eq!(
                (mode.tells(Some(0)), mode.tells(Some(3)), mode.tells(None)),
                (ok, failed, unknown),
                "{mode:?}"
            );
        }
    }
}
