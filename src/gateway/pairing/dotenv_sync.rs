//! Keeping an operator's allowlist in `$HERMES_HOME/.env` in step with pairing grants, as the
//! reference does: when `{PLATFORM}_ALLOWED_USERS` is already configured, approving a user
//! appends them to it and revoking removes them. An open gateway (no allowlist) is left
//! open. Edits touch only the one line, keep every other line and the file's mode, and are
//! atomic.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::files::atomic_write;

/// Platform → its allowlist variable (the reference's `_PLATFORM_ALLOWLIST_ENV`).
const PLATFORM_ALLOWLIST_ENV: &[(&str, &str)] = &[
    ("telegram", "TELEGRAM_ALLOWED_USERS"),
    ("discord", "DISCORD_ALLOWED_USERS"),
    ("whatsapp", "WHATSAPP_ALLOWED_USERS"),
    ("whatsapp_cloud", "WHATSAPP_CLOUD_ALLOWED_USERS"),
    ("slack", "SLACK_ALLOWED_USERS"),
    ("signal", "SIGNAL_ALLOWED_USERS"),
    ("email", "EMAIL_ALLOWED_USERS"),
    ("sms", "SMS_ALLOWED_USERS"),
    ("mattermost", "MATTERMOST_ALLOWED_USERS"),
    ("matrix", "MATRIX_ALLOWED_USERS"),
    ("dingtalk", "DINGTALK_ALLOWED_USERS"),
    ("feishu", "FEISHU_ALLOWED_USERS"),
    ("wecom", "WECOM_ALLOWED_USERS"),
    ("wecom_callback", "WECOM_CALLBACK_ALLOWED_USERS"),
    ("weixin", "WEIXIN_ALLOWED_USERS"),
    ("bluebubbles", "BLUEBUBBLES_ALLOWED_USERS"),
    ("qqbot", "QQ_ALLOWED_USERS"),
    ("yuanbao", "YUANBAO_ALLOWED_USERS"),
];

/// The allowlist variable of `platform`, if it has one.
pub fn allowlist_env_var(platform: &str) -> Option<&'static str> {
    let platform = platform.trim().to_lowercase();
    PLATFORM_ALLOWLIST_ENV
        .iter()
        .find(|(name, _)| *name == platform)
        .map(|(_, var)| *var)
}

fn split_allowlist(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Appends `user_id` to the platform's allowlist if one is configured and does not already
/// cover the user. Returns whether `.env` changed.
pub fn sync_add(
    dotenv: &Path,
    env: &BTreeMap<String, String>,
    platform: &str,
    user_id: &str,
) -> io::Result<bool> {
    let Some(var) = allowlist_env_var(platform) else {
        return Ok(false);
    };
    let Some(current) = current_value(dotenv, env, var)? else {
        return Ok(false);
    };
    let mut ids = split_allowlist(&current);
    if ids.iter().any(|id| id == "*" || id == user_id) {
        return Ok(false);
    }
    ids.push(user_id.to_owned());
    save_env_value(dotenv, var, &ids.join(","))?;
    Ok(true)
}

/// Removes `user_id` from the platform's allowlist if it is listed there; an allowlist left
/// empty is removed from `.env`. Returns whether `.env` changed.
pub fn sync_remove(
    dotenv: &Path,
    env: &BTreeMap<String, String>,
    platform: &str,
    user_id: &str,
) -> io::Result<bool> {
    let Some(var) = allowlist_env_var(platform) else {
        return Ok(false);
    };
    let Some(current) = current_value(dotenv, env, var)? else {
        return Ok(false);
    };
    let ids = split_allowlist(&current);
    let remaining: Vec<String> = ids.iter().filter(|id| *id != user_id).cloned().collect();
    if remaining.len() == ids.len() {
        return Ok(false);
    }
    if remaining.is_empty() {
        remove_env_value(dotenv, var)
    } else {
        save_env_value(dotenv, var, &remaining.join(","))?;
        Ok(true)
    }
}

/// The variable's value as the reference's `os.getenv` would see it: the process
/// environment first, then the first definition in `.env` (read now, so an edit by another
/// process is seen). Blank counts as unset.
fn current_value(
    dotenv: &Path,
    env: &BTreeMap<String, String>,
    var: &str,
) -> io::Result<Option<String>> {
    if let Some(value) = env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        return Ok(Some(value.to_owned()));
    }
    let Some(contents) = read_dotenv(dotenv)? else {
        return Ok(None);
    };
    let value = dotenvy::Iter::new(contents.as_bytes())
        .filter_map(Result::ok)
        .find(|(name, _)| name == var)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty());
    Ok(value)
}

/// The file as text (invalid UTF-8 replaced, a leading BOM dropped), `None` when missing.
fn read_dotenv(path: &Path) -> io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            Ok(Some(
                text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned(),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Whether `line` assigns `key`, plainly or as `export KEY=...`.
fn line_defines_key(line: &str, key: &str) -> bool {
    let stripped = line.trim();
    let stripped = match stripped.strip_prefix("export ") {
        Some(rest) => rest.trim_start(),
        None => stripped,
    };
    stripped
        .strip_prefix(key)
        .is_some_and(|rest| rest.starts_with('='))
}

/// Quotes a value containing characters with a special meaning in dotenv files.
fn quote_env_value(value: &str) -> String {
    let needs_quoting = value.contains(['#', '"', '\''])
        || value != value.trim()
        || value.chars().any(char::is_whitespace);
    if value.is_empty() || !needs_quoting {
        return value.to_owned();
    }
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Sets `key` in `.env`: the first line defining it is replaced, otherwise a line is
/// appended. Other lines stay byte for byte; the file keeps its mode (new files are 0600).
pub fn save_env_value(path: &Path, key: &str, value: &str) -> io::Result<()> {
    let value: String = value.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    let new_line = format!("{key}={}\n", quote_env_value(&value));
    let existing = read_dotenv(path)?.unwrap_or_default();
    let mut lines: Vec<String> = existing.split_inclusive('\n').map(str::to_owned).collect();
    match lines.iter_mut().find(|line| line_defines_key(line, key)) {
        Some(line) => *line = new_line,
        None => {
            if let Some(last) = lines.last_mut()
                && !last.ends_with('\n')
            {
                last.push('\n');
            }
            lines.push(new_line);
        }
    }
    atomic_write(path, lines.concat().as_bytes(), existing_mode(path))
}

/// Removes every line defining `key`. Returns whether one was found.
pub fn remove_env_value(path: &Path, key: &str) -> io::Result<bool> {
    let Some(existing) = read_dotenv(path)? else {
        return Ok(false);
    };
    let lines: Vec<&str> = existing.split_inclusive('\n').collect();
    let kept: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|line| !line_defines_key(line, key))
        .collect();
    if kept.len() == lines.len() {
        return Ok(false);
    }
    atomic_write(path, kept.concat().as_bytes(), existing_mode(path))?;
    Ok(true)
}

/// The permission bits of `path` (following a symlink), or 0600 for a new file.
fn existing_mode(path: &Path) -> u32 {
    fs::metadata(path)
        .map(|meta| meta.permissions().mode() & 0o7777)
        .unwrap_or(0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_matched_like_the_reference() {
        assert!(line_defines_key(
            "TELEGRAM_ALLOWED_USERS=1\n",
            "TELEGRAM_ALLOWED_USERS"
        ));
        assert!(line_defines_key(
            "  export   TELEGRAM_ALLOWED_USERS=1",
            "TELEGRAM_ALLOWED_USERS"
        ));
        assert!(!line_defines_key(
            "TELEGRAM_ALLOWED_USERS_X=1",
            "TELEGRAM_ALLOWED_USERS"
        ));
        assert!(!line_defines_key(
            "# TELEGRAM_ALLOWED_USERS=1",
            "TELEGRAM_ALLOWED_USERS"
        ));
    }

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(quote_env_value("1,2,3"), "1,2,3");
        assert_eq!(quote_env_value(""), "");
        assert_eq!(quote_env_value("a b"), "\"a b\"");
        assert_eq!(quote_env_value("x#\"y"), "\"x#\\\"y\"");
    }

    #[test]
    fn only_known_platforms_have_an_allowlist_variable() {
        assert_eq!(
            allowlist_env_var("Telegram "),
            Some("TELEGRAM_ALLOWED_USERS")
        );
        assert_eq!(allowlist_env_var("qqbot"), Some("QQ_ALLOWED_USERS"));
        assert_eq!(allowlist_env_var("api_server"), None);
    }
}
