//! Appends an "always" approval to `command_allowlist` in `config.yaml` by editing the text
//! minimally, so comments, key order and every other setting survive. The edit is checked by
//! re-parsing (only the list may change) and written atomically (temp file, fsync, rename),
//! keeping the file's mode; a missing file is created with mode 0600.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_norway::Value;

const KEY: &str = "command_allowlist";

/// Why the allowlist could not be updated. The approval still holds for the session.
#[derive(Debug, thiserror::Error)]
pub enum AllowlistError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML, leaving it untouched: {source}")]
    Invalid {
        path: PathBuf,
        source: serde_norway::Error,
    },
    #[error("{path}: command_allowlist has a shape this editor does not change: {reason}")]
    Unsupported {
        path: PathBuf,
        #[source]
        reason: ShapeProblem,
    },
}

/// What about the file or the list keeps the editor from appending in place.
#[derive(Debug, thiserror::Error)]
pub enum ShapeProblem {
    #[error("the document is not a mapping")]
    NotAMapping,
    #[error("it is not a list")]
    NotAList,
    #[error("a flow sequence spanning several lines")]
    MultiLineFlow,
    #[error("an unexpected value {0:?}")]
    UnexpectedValue(String),
    #[error(transparent)]
    Quoting(#[from] serde_json::Error),
    #[error("the edit did not parse: {0}")]
    EditUnparsable(#[source] serde_norway::Error),
    #[error("the edit changed more than the list")]
    ChangedMore,
}

/// What the append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowlistChange {
    Added,
    AlreadyPresent,
}

fn parse(text: &str) -> Result<Value, serde_norway::Error> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_norway::from_str::<Value>(text)
}

fn current_list(doc: &Value) -> Result<Vec<String>, ShapeProblem> {
    match doc.get(KEY) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Sequence(items)) => Ok(items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => serde_norway::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            })
            .collect()),
        Some(_) => Err(ShapeProblem::NotAList),
    }
}

/// Adds `entry` to `command_allowlist` in the YAML file at `path`.
pub fn append_to_command_allowlist(
    path: &Path,
    entry: &str,
) -> Result<AllowlistChange, AllowlistError> {
    let (text, mode) = match std::fs::read_to_string(path) {
        Ok(text) => (text, existing_mode(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), None),
        Err(source) => {
            return Err(AllowlistError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let invalid = |source| AllowlistError::Invalid {
        path: path.to_owned(),
        source,
    };
    let unsupported = |reason| AllowlistError::Unsupported {
        path: path.to_owned(),
        reason,
    };
    let before = parse(&text).map_err(invalid)?;
    if !matches!(before, Value::Null | Value::Mapping(_)) {
        return Err(unsupported(ShapeProblem::NotAMapping));
    }
    let mut list = current_list(&before).map_err(unsupported)?;
    if list.iter().any(|e| e == entry) {
        return Ok(AllowlistChange::AlreadyPresent);
    }
    let edited = insert_entry(&text, entry).map_err(unsupported)?;
    let after = parse(&edited).map_err(|e| unsupported(ShapeProblem::EditUnparsable(e)))?;
    list.push(entry.to_owned());
    if current_list(&after).ok().as_ref() != Some(&list) || !same_except_key(&before, &after) {
        return Err(unsupported(ShapeProblem::ChangedMore));
    }
    write_atomically(path, edited.as_bytes(), mode).map_err(|source| AllowlistError::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(AllowlistChange::Added)
}

fn same_except_key(before: &Value, after: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        match v {
            Value::Mapping(m) => {
                let mut m = m.clone();
                m.remove(KEY);
                Value::Mapping(m)
            }
            _ => Value::Mapping(Default::default()),
        }
    };
    strip(before) == strip(after)
}

/// Splits a line's value from a trailing ` # comment` outside quotes.
fn split_comment(rest: &str) -> (&str, &str) {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, ch) in rest.char_indices() {
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => {}
            None if ch == '"' || ch == '\'' => quote = Some(ch),
            None if ch == '#' && previous.is_whitespace() => return (&rest[..i], &rest[i..]),
            None => {}
        }
        previous = ch;
    }
    (rest, "")
}

fn is_top_level_content(line: &str) -> bool {
    !line.trim().is_empty() && !line.starts_with([' ', '\t', '#', '-'])
}

/// The text with `entry` appended to the list, touching as little as possible.
fn insert_entry(text: &str, entry: &str) -> Result<String, ShapeProblem> {
    let quoted = serde_json::to_string(entry)?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    let key_line = lines.iter().position(|line| {
        line.strip_prefix(KEY)
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
    });
    let Some(key_line) = key_line else {
        let mut out = text.to_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(newline);
        }
        out.push_str(&format!("{KEY}:{newline}- {quoted}{newline}"));
        return Ok(out);
    };
    let line = lines[key_line].clone();
    let body = line.trim_end_matches(['\r', '\n']);
    let ending = &line[body.len()..];
    let after_colon = body
        .strip_prefix(KEY)
        .and_then(|r| r.trim_start().strip_prefix(':'))
        .unwrap_or_default();
    let (value, comment) = split_comment(after_colon);
    let value_trimmed = value.trim();
    let comment_part = if comment.is_empty() {
        String::new()
    } else {
        format!(" {comment}")
    };

    if let Some(inner) = value_trimmed.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return Err(ShapeProblem::MultiLineFlow);
        };
        let items = inner.trim_end();
        let new_value = if items.trim().is_empty() {
            format!("[{quoted}]")
        } else {
            format!("[{items}, {quoted}]")
        };
        lines[key_line] = format!("{KEY}: {new_value}{comment_part}{ending}");
        return Ok(lines.concat());
    }
    if !(value_trimmed.is_empty() || value_trimmed == "null" || value_trimmed == "~") {
        return Err(ShapeProblem::UnexpectedValue(value_trimmed.to_owned()));
    }
    // A block sequence (or nothing) follows: find its last item line.
    let mut last_content = key_line;
    let mut indent: Option<String> = None;
    for (i, l) in lines.iter().enumerate().skip(key_line + 1) {
        if is_top_level_content(l) {
            break;
        }
        let trimmed = l.trim_start();
        if trimmed.trim().is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent.is_none() && (trimmed.starts_with("- ") || trimmed.trim_end() == "-") {
            indent = Some(l[..l.len() - trimmed.len()].to_owned());
        }
        last_content = i;
    }
    if value_trimmed == "null" || value_trimmed == "~" {
        lines[key_line] = format!("{KEY}:{comment_part}{ending}");
    }
    let indent = indent.unwrap_or_default();
    if !lines[last_content].ends_with('\n') {
        lines[last_content].push_str(newline);
    }
    lines.insert(last_content + 1, format!("{indent}- {quoted}{newline}"));
    Ok(lines.concat())
}

#[cfg(unix)]
fn existing_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn existing_mode(_path: &Path) -> Option<u32> {
    None
}

/// Writes `bytes` to a temp file beside `path`, fsyncs it, gives it `mode` (0600 for a new
/// file) and renames it over `path`, then fsyncs the directory.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(mode.unwrap_or(0o600)))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(text: &str) -> String {
        insert_entry(text, "recursive delete").unwrap()
    }

    #[test]
    fn edits_each_list_shape_minimally() {
        assert_eq!(
            edit("command_allowlist: []     # patterns\nx: 1\n"),
            "command_allowlist: [\"recursive delete\"] # patterns\nx: 1\n"
        );
        assert_eq!(
            edit("command_allowlist: [a, 'b c']\n"),
            "command_allowlist: [a, 'b c', \"recursive delete\"]\n"
        );
        assert_eq!(
            edit("command_allowlist:\n  - a\n  # note\n  - b\nnext: 2\n"),
            "command_allowlist:\n  - a\n  # note\n  - b\n  - \"recursive delete\"\nnext: 2\n"
        );
        assert_eq!(
            edit("command_allowlist:\n- a\n"),
            "command_allowlist:\n- a\n- \"recursive delete\"\n"
        );
        assert_eq!(
            edit("a: 1\ncommand_allowlist:\nb: 2\n"),
            "a: 1\ncommand_allowlist:\n- \"recursive delete\"\nb: 2\n"
        );
        assert_eq!(
            edit("command_allowlist: null  # none yet\n"),
            "command_allowlist: # none yet\n- \"recursive delete\"\n"
        );
        assert_eq!(
            edit("a: 1"),
            "a: 1\ncommand_allowlist:\n- \"recursive delete\"\n"
        );
        assert_eq!(edit(""), "command_allowlist:\n- \"recursive delete\"\n");
        assert!(insert_entry("command_allowlist: [a,\n  b]\n", "x").is_err());
        assert!(insert_entry("command_allowlist: nope\n", "x").is_err());
    }
}
