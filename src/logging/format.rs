//! Choosing the log format: people read text, log collectors parse JSON lines.

use std::collections::BTreeMap;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON lines when stderr is not a terminal and we run under systemd or in a container;
    /// text otherwise.
    #[default]
    Auto,
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// Resolves `Auto`: JSON when stderr is not a terminal and a service manager is evident —
/// `JOURNAL_STREAM` (systemd connects stderr to the journal), `container` (systemd-nspawn,
/// podman) or `/.dockerenv` (Docker). `Text` and `Json` are returned as asked.
pub fn resolve_format(
    requested: LogFormat,
    env: &BTreeMap<String, String>,
    stderr_is_terminal: bool,
    dockerenv_exists: bool,
) -> LogFormat {
    if requested != LogFormat::Auto {
        return requested;
    }
    let set = |name: &str| env.get(name).is_some_and(|value| !value.is_empty());
    let under_service = set("JOURNAL_STREAM") || set("container") || dockerenv_exists;
    if !stderr_is_terminal && under_service {
        LogFormat::Json
    } else {
        LogFormat::Text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn auto_picks_json_only_for_a_service_without_a_terminal() {
        let journal = env(&[("JOURNAL_STREAM", "8:12345")]);
        let podman = env(&[("container", "podman")]);
        let plain = env(&[]);
        let auto = LogFormat::Auto;
        assert_eq!(
            resolve_format(auto, &journal, false, false),
            LogFormat::Json
        );
        assert_eq!(resolve_format(auto, &podman, false, false), LogFormat::Json);
        assert_eq!(resolve_format(auto, &plain, false, true), LogFormat::Json);
        assert_eq!(resolve_format(auto, &journal, true, false), LogFormat::Text);
        assert_eq!(resolve_format(auto, &plain, false, false), LogFormat::Text);
        assert_eq!(resolve_format(auto, &plain, true, true), LogFormat::Text);
    }

    #[test]
    fn an_explicit_format_wins() {
        let journal = env(&[("JOURNAL_STREAM", "8:12345")]);
        assert_eq!(
            resolve_format(LogFormat::Text, &journal, false, true),
            LogFormat::Text
        );
        assert_eq!(
            resolve_format(LogFormat::Json, &env(&[]), true, false),
            LogFormat::Json
        );
    }
}
