//! Reading the files: `$HERMES_HOME/.env` merged into a copy of the environment map, then
//! `config.yaml` with the `HERMES__SECTION__KEY` overrides layered on by the config crate.
//! Nothing here touches the process environment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::LazyLock;

use config::{Environment, File, FileFormat};
use regex::{Captures, Regex};
use serde_json::Value;

use super::error::ConfigError;

/// `HERMES__APPROVALS__TIMEOUT=30` overrides `approvals.timeout`. The double underscore after
/// the prefix keeps Hermes' own `HERMES_*` variables (`HERMES_HOME`, ...) out of the config.
pub const ENV_PREFIX: &str = "HERMES";
pub const ENV_SEPARATOR: &str = "__";

/// `env` plus the entries of the `.env` file at `path` whose names `env` does not have yet.
/// A missing file is fine. Bad lines are reported (by line number, never by value) and skipped.
pub fn merge_dotenv(
    path: &Path,
    env: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<ConfigError>) {
    let mut merged = env.clone();
    let mut errors = Vec::new();
    let contents = match std::fs::read_to_string(path) {
        Ok(contents) => contents,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return (merged, errors),
        Err(error) => {
            errors.push(ConfigError::new(
                path.display().to_string(),
                format!("cannot read: {error}"),
            ));
            return (merged, errors);
        }
    };
    let contents = contents.strip_prefix('\u{feff}').unwrap_or(&contents);
    // Note: dotenvy resolves `${VAR}` references against the process environment, which is
    // read but never written.
    for item in dotenvy::Iter::new(contents.as_bytes()) {
        match item {
            // The first definition in the file wins, and the environment beats the file.
            Ok((name, value)) => {
                merged.entry(name).or_insert(value);
            }
            Err(dotenvy::Error::LineParse(line, _)) => {
                errors.push(dotenv_line_error(path, contents, &line));
            }
            Err(other) => {
                errors.push(ConfigError::new(
                    path.display().to_string(),
                    other.to_string(),
                ));
            }
        }
    }
    (merged, errors)
}

/// Names the line number and the variable, never the value: the line may hold a token.
fn dotenv_line_error(path: &Path, contents: &str, line: &str) -> ConfigError {
    let line_number = contents
        .find(line)
        .map(|offset| contents[..offset].matches('\n').count() + 1);
    let name = line
        .split('=')
        .next()
        .map(|name| name.trim().trim_start_matches("export ").trim())
        .filter(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    let location = match line_number {
        Some(number) => format!("{}:{number}", path.display()),
        None => path.display().to_string(),
    };
    let subject = match name {
        Some(name) => format!("cannot parse the entry for {name}"),
        None => "cannot parse this line".to_owned(),
    };
    ConfigError::new(
        location,
        format!("{subject} (check quotes; value not shown)"),
    )
}

/// `config.yaml` (optional) with the `HERMES__*` entries of `env` on top, as one JSON tree.
pub fn read_config_tree(path: &Path, env: &BTreeMap<String, String>) -> Result<Value, ConfigError> {
    let overrides: config::Map<String, String> = env
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let layered = config::Config::builder()
        .add_source(File::from(path).format(FileFormat::Yaml).required(false))
        .add_source(
            Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .source(Some(overrides)),
        )
        .build()
        .map_err(|error| file_error(path, &error))?;
    layered
        .try_deserialize::<Value>()
        .map_err(|error| file_error(path, &error))
}

/// `${NAME}` inside a string value, as Hermes' `_expand_env_vars` matches it.
static ENV_REFERENCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{([^}]+)\}").expect("the pattern is valid"));

/// Replaces `${NAME}` in every string value with `env[NAME]`, as Hermes does on load; a name
/// that is not set stays as written. Returns those unset names so the caller can warn.
pub fn expand_env_refs(value: &mut Value, env: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut unset = BTreeSet::new();
    expand_into(value, env, &mut unset);
    unset
}

fn expand_into(value: &mut Value, env: &BTreeMap<String, String>, unset: &mut BTreeSet<String>) {
    match value {
        Value::String(text) if text.contains("${") => {
            let expanded = ENV_REFERENCE.replace_all(text, |captures: &Captures<'_>| {
                match env.get(&captures[1]) {
                    Some(found) => found.clone(),
                    None => {
                        unset.insert(captures[1].to_owned());
                        captures[0].to_owned()
                    }
                }
            });
            *text = expanded.into_owned();
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| expand_into(item, env, unset)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|item| expand_into(item, env, unset)),
        _ => {}
    }
}

fn file_error(path: &Path, error: &config::ConfigError) -> ConfigError {
    let message = match error {
        config::ConfigError::FileParse { cause, .. } => {
            // yaml-rust2 says "... at byte 12 line 3 column 5"; the byte offset only adds noise.
            let mut cause = cause.to_string();
            // Some causes end with " in <relative path>"; the key already names the file.
            if let Some(file_name) = path.file_name().and_then(|name| name.to_str())
                && cause.ends_with(file_name)
                && let Some(start) = cause.rfind(" in ")
            {
                cause.truncate(start);
            }
            let cause = match (cause.find(" at byte "), cause.find(" line ")) {
                (Some(start), Some(line)) if line > start => {
                    format!("{} at{}", &cause[..start], &cause[line..])
                }
                _ => cause,
            };
            format!("invalid YAML: {cause}")
        }
        other => other.to_string(),
    };
    ConfigError::new(path.display().to_string(), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn dotenv_fills_only_missing_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(
            &path,
            "\u{feff}# comment\nFROM_FILE=file\nSET_BOTH=file\nexport QUOTED=\"a b\"\nFROM_FILE=second\n",
        )
        .unwrap();
        let (merged, errors) = merge_dotenv(&path, &env(&[("SET_BOTH", "process"), ("EMPTY", "")]));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(merged["FROM_FILE"], "file");
        assert_eq!(merged["SET_BOTH"], "process");
        assert_eq!(merged["QUOTED"], "a b");
        assert_eq!(merged["EMPTY"], "");
        let (missing, errors) = merge_dotenv(&dir.path().join("nope"), &env(&[("A", "1")]));
        assert!(errors.is_empty());
        assert_eq!(missing, env(&[("A", "1")]));
    }

    #[test]
    fn dotenv_errors_name_the_line_not_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, "GOOD=1\nTELEGRAM_BOT_TOKEN='123:SECRETVALUE\n").unwrap();
        let (merged, errors) = merge_dotenv(&path, &BTreeMap::new());
        assert_eq!(merged["GOOD"], "1");
        assert_eq!(errors.len(), 1);
        let message = errors[0].to_string();
        assert!(!message.contains("SECRETVALUE"), "{message}");
        assert!(
            message.contains(".env:2: cannot parse the entry for TELEGRAM_BOT_TOKEN"),
            "{message}"
        );
    }

    #[test]
    fn env_overrides_need_the_double_underscore_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "approvals:\n  timeout: 30\n  mode: manual\nCaseKept: 1\n",
        )
        .unwrap();
        let tree = read_config_tree(
            &path,
            &env(&[
                ("HERMES__APPROVALS__TIMEOUT", "0123"),
                ("HERMES__TELEGRAM__EXTRA__ALLOWED_CHATS", "-1,-2"),
                ("HERMES_HOME", "/somewhere"),
                ("HERMES_GATEWAY_BUSY_INPUT_MODE", "queue"),
            ]),
        )
        .unwrap();
        assert_eq!(
            tree,
            json!({
                "approvals": {"timeout": "0123", "mode": "manual"},
                "telegram": {"extra": {"allowed_chats": "-1,-2"}},
                "CaseKept": 1,
            })
        );
    }

    #[test]
    fn env_references_expand_like_hermes() {
        let mut tree = json!({
            "telegram": {"token": "${TG}", "extra": {"list": ["a-${TG}-b", 5]}},
            "model": {"api_key": "${NOT_SET}"},
        });
        let unset = expand_env_refs(&mut tree, &env(&[("TG", "123:abc")]));
        assert_eq!(
            tree,
            json!({
                "telegram": {"token": "123:abc", "extra": {"list": ["a-123:abc-b", 5]}},
                "model": {"api_key": "${NOT_SET}"},
            })
        );
        assert_eq!(unset.into_iter().collect::<Vec<_>>(), ["NOT_SET"]);
    }

    #[test]
    fn missing_and_empty_files_are_empty_trees() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_config_tree(&dir.path().join("config.yaml"), &BTreeMap::new()).unwrap();
        assert_eq!(missing, json!({}));
        let path = dir.path().join("empty.yaml");
        std::fs::write(&path, "# only a comment\n").unwrap();
        assert_eq!(
            read_config_tree(&path, &BTreeMap::new()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "model:\n  provider: openai\n bad: [unclosed\n").unwrap();
        let error = read_config_tree(&path, &BTreeMap::new()).unwrap_err();
        assert_eq!(error.key, path.display().to_string());
        assert!(
            error.message.starts_with("invalid YAML: "),
            "{}",
            error.message
        );
        assert!(error.message.contains("line 3"), "{}", error.message);
        assert!(!error.message.contains("byte"), "{}", error.message);
    }
}
