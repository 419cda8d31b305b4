//! The operator's consent to each hook: `$HERMES_HOME/shell-hooks-allowlist.json`, in the
//! layout Hermes writes, so an approval given to either program counts for both:
//!
//! ```json
//! {"approvals": [{"event": "pre_tool_call", "command": "~/guard.sh",
//!                 "approved_at": "2026-01-01T00:00:00.000000Z",
//!                 "script_mtime_at_approval": "2026-01-01T00:00:00Z"}]}
//! ```
//!
//! An approval is keyed by the exact (event, command) pair. Entries and keys we do not know
//! are kept as they are. Changes take an exclusive `flock` on the sibling `.lock` file (the
//! lock Hermes takes) and replace the file atomically, private (0600) when new.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use serde_json::{Map, Value, json};

use crate::home::HermesHome;

pub const ALLOWLIST_FILE: &str = "shell-hooks-allowlist.json";

/// File endings that mark the script in a command like `python3 /x/hook.py`.
const SCRIPT_ENDINGS: &[&str] = &[
    ".sh", ".bash", ".zsh", ".fish", ".py", ".pyw", ".rb", ".pl", ".lua", ".js", ".mjs", ".cjs",
    ".ts",
];

/// One recorded approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub event: String,
    pub command: String,
    pub approved_at: Option<String>,
}

pub fn path(home: &HermesHome) -> PathBuf {
    home.path().join(ALLOWLIST_FILE)
}

/// The file's content, or an empty list when it is missing or unreadable (as Hermes reads
/// it: a damaged file means nothing is approved, never that everything is).
fn load_value(file: &Path) -> Map<String, Value> {
    let parsed = std::fs::read_to_string(file)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok());
    let mut map = match parsed {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if !map.get("approvals").is_some_and(Value::is_array) {
        map.insert("approvals".to_owned(), Value::Array(Vec::new()));
    }
    map
}

fn entries(map: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    map.get("approvals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn is_pair(entry: &Map<String, Value>, event: &str, command: &str) -> bool {
    entry.get("event").and_then(Value::as_str) == Some(event)
        && entry.get("command").and_then(Value::as_str) == Some(command)
}

/// Every recorded approval.
pub fn approvals(home: &HermesHome) -> Vec<Approval> {
    let map = load_value(&path(home));
    entries(&map)
        .filter_map(|entry| {
            Some(Approval {
                event: entry.get("event")?.as_str()?.to_owned(),
                command: entry.get("command")?.as_str()?.to_owned(),
                approved_at: entry
                    .get("approved_at")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect()
}

/// Whether the operator approved `command` for `event`.
pub fn is_approved(home: &HermesHome, event: &str, command: &str) -> bool {
    entries(&load_value(&path(home))).any(|entry| is_pair(entry, event, command))
}

/// Records an approval of (`event`, `command`), replacing an older one of the same pair.
/// `user_home` expands a leading `~` when the script's modification time is noted.
pub fn approve(
    home: &HermesHome,
    event: &str,
    command: &str,
    user_home: Option<&Path>,
) -> io::Result<()> {
    let entry = json!({
        "event": event,
        "command": command,
        "approved_at": now_iso(),
        "script_mtime_at_approval": script_mtime_iso(command, user_home),
    });
    update(home, |list| {
        list.retain(|e| !e.as_object().is_some_and(|e| is_pair(e, event, command)));
        list.push(entry);
    })
}

/// Removes every approval of `command` (for any event); returns how many went.
pub fn revoke(home: &HermesHome, command: &str) -> io::Result<usize> {
    let mut removed = 0;
    update(home, |list| {
        let before = list.len();
        list.retain(|e| {
            e.as_object()
                .and_then(|e| e.get("command"))
                .and_then(Value::as_str)
                != Some(command)
        });
        removed = before - list.len();
    })?;
    Ok(removed)
}

/// Read-modify-write of the approvals under the shared lock.
fn update(home: &HermesHome, change: impl FnOnce(&mut Vec<Value>)) -> io::Result<()> {
    crate::home::private::create_dir_all(home.path())?;
    let file = path(home);
    let lock_path = home.path().join(format!("{ALLOWLIST_FILE}.lock"));
    let lock: File = crate::home::private::open_options()
        .create(true)
        .append(true)
        .open(&lock_path)?;
    flock(&lock, FlockOperation::LockExclusive)?;
    let mut map = load_value(&file);
    if let Some(Value::Array(list)) = map.get_mut("approvals") {
        change(list);
    }
    // Pretty, two-space indented, keys sorted: the bytes Hermes's json.dumps writes.
    let text = serde_json::to_string_pretty(&Value::Object(map)).map_err(io::Error::other)?;
    let temp = home
        .path()
        .join(format!("{ALLOWLIST_FILE}.{}.tmp", std::process::id()));
    crate::home::private::write(&temp, text.as_bytes())?;
    let renamed = std::fs::rename(&temp, &file);
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    let _ = flock(&lock, FlockOperation::Unlock);
    renamed
}

fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The script a command runs (for its modification time): the first word with a script
/// ending, else the first that looks like a path, else the program itself.
pub fn script_of(command: &str) -> Option<String> {
    let words = shlex::split(command)?;
    words
        .iter()
        .find(|w| {
            let lower = w.to_ascii_lowercase();
            SCRIPT_ENDINGS.iter().any(|end| lower.ends_with(end))
        })
        .or_else(|| words.iter().find(|w| w.contains('/') || w.starts_with('~')))
        .or_else(|| words.first())
        .cloned()
}

/// `~` and `~/...` with the user's home directory.
pub fn expand_tilde(word: &str, user_home: Option<&Path>) -> PathBuf {
    match (word.strip_prefix('~'), user_home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
        _ => PathBuf::from(word),
    }
}

fn script_mtime_iso(command: &str, user_home: Option<&Path>) -> Value {
    let Some(script) = script_of(command) else {
        return Value::Null;
    };
    std::fs::metadata(expand_tilde(&script, user_home))
        .and_then(|meta| meta.modified())
        .map(|time| {
            Value::String(
                chrono::DateTime::<chrono::Utc>::from(time)
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            )
        })
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home() -> (tempfile::TempDir, HermesHome) {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        (dir, home)
    }

    #[test]
    fn an_approval_hermes_wrote_counts_and_unknown_fields_survive_our_writes() {
        let (_dir, home) = home();
        // What Hermes 0.19's _record_approval + save_allowlist write (json.dumps, indent=2,
        // sort_keys=True), plus a key of a future version.
        let hermes = r#"{
  "approvals": [
    {
      "approved_at": "2026-11-30T10:00:00.123456Z",
      "command": "~/.hermes/agent-hooks/guard.sh",
      "event": "pre_tool_call",
      "script_mtime_at_approval": null
    }
  ],
  "future_key": 1
}"#;
        std::fs::write(path(&home), hermes).unwrap();
        assert!(is_approved(
            &home,
            "pre_tool_call",
            "~/.hermes/agent-hooks/guard.sh"
        ));
        assert!(!is_approved(
            &home,
            "post_tool_call",
            "~/.hermes/agent-hooks/guard.sh"
        ));
        assert!(!is_approved(
            &home,
            "pre_tool_call",
            "~/.hermes/agent-hooks/guard.sh "
        ));

        approve(&home, "post_llm_call", "/bin/true", None).unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(path(&home)).unwrap()).unwrap();
        assert_eq!(written["future_key"], 1);
        let list = written["approvals"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["command"], "~/.hermes/agent-hooks/guard.sh");
        let ours = &list[1];
        assert_eq!(ours["event"], "post_llm_call");
        assert_eq!(ours["command"], "/bin/true");
        let at = ours["approved_at"].as_str().unwrap();
        assert!(at.ends_with('Z') && at.contains('T'), "{at}");
        // /bin/true exists: its modification time is noted, as Hermes does.
        assert!(ours["script_mtime_at_approval"].is_string());
    }

    #[test]
    fn our_file_reads_as_hermes_reads_it() {
        let (_dir, home) = home();
        approve(&home, "pre_tool_call", "python3 /h/guard.py", None).unwrap();
        approve(&home, "pre_tool_call", "python3 /h/guard.py", None).unwrap();
        let text = std::fs::read_to_string(path(&home)).unwrap();
        // Hermes's _is_allowlisted: a dict with "approvals", a list of dicts with the pair.
        let value: Value = serde_json::from_str(&text).unwrap();
        let list = value["approvals"].as_array().unwrap();
        assert_eq!(
            list.len(),
            1,
            "a second approval of one pair replaces the first"
        );
        assert_eq!(list[0]["event"], "pre_tool_call");
        assert_eq!(list[0]["command"], "python3 /h/guard.py");
        assert!(text.starts_with("{\n  \"approvals\": [\n    {\n"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path(&home)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the file is private: {mode:o}");
    }

    #[test]
    fn revoke_removes_every_event_of_a_command() {
        let (_dir, home) = home();
        approve(&home, "pre_tool_call", "/h/a.sh", None).unwrap();
        approve(&home, "post_tool_call", "/h/a.sh", None).unwrap();
        approve(&home, "post_tool_call", "/h/b.sh", None).unwrap();
        assert_eq!(revoke(&home, "/h/a.sh").unwrap(), 2);
        assert_eq!(revoke(&home, "/h/a.sh").unwrap(), 0);
        let left: Vec<_> = approvals(&home).into_iter().map(|a| a.command).collect();
        assert_eq!(left, ["/h/b.sh"]);
    }

    #[test]
    fn a_damaged_file_approves_nothing() {
        let (_dir, home) = home();
        for text in ["not json", "[1]", r#"{"approvals": {"event": "x"}}"#] {
            std::fs::write(path(&home), text).unwrap();
            assert!(approvals(&home).is_empty(), "{text}");
        }
    }

    #[test]
    fn the_script_of_a_command_is_found_like_hermes_finds_it() {
        assert_eq!(
            script_of("python3 /h/hook.py --x").as_deref(),
            Some("/h/hook.py")
        );
        assert_eq!(
            script_of("/usr/bin/env bash hook.sh").as_deref(),
            Some("hook.sh")
        );
        assert_eq!(script_of("~/bin/guard").as_deref(), Some("~/bin/guard"));
        assert_eq!(script_of("guard --flag").as_deref(), Some("guard"));
        assert_eq!(
            expand_tilde("~/bin/g", Some(Path::new("/home/op"))),
            PathBuf::from("/home/op/bin/g")
        );
    }
}
