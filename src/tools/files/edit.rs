//! The edits the file tools make, shared by `write_file`/`patch` (`write.rs`) and V4A
//! patches (`v4a.rs`): a file's current text, an atomic write that keeps the old file's
//! CRLF endings, BOM and mode and refuses JSON/YAML that does not parse, and the exact
//! replacement with its uniqueness check.

use std::path::Path;

use serde_json::Value;

use super::read::open_nofollow;
use super::text::{BOM, detect_line_ending, extension, normalize_line_endings};
use crate::tools::approval::write_atomically;

/// The current text of a file, `None` when it does not exist or is not UTF-8.
pub(super) fn read_text(path: &Path) -> Option<String> {
    let mut file = open_nofollow(path).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

/// Syntax gate for structured formats: a write that does not parse is refused.
pub(super) fn syntax_error(ext: &str, content: &str) -> Option<String> {
    match ext {
        ".json" => serde_json::from_str::<Value>(content)
            .err()
            .map(|e| e.to_string()),
        ".yaml" | ".yml" => serde_norway::from_str::<serde_norway::Value>(content)
            .err()
            .map(|e| e.to_string()),
        _ => None,
    }
}

/// Why new content was not written; the text is the error the model reads.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    /// JSON or YAML content that does not parse, caught before the file is touched.
    #[error(
        "Not written: the content for '{shown}' is not valid {ext} ({reason}); the file is untouched. Correct it and write again."
    )]
    InvalidSyntax {
        shown: String,
        ext: String,
        reason: String,
    },
    #[error("Failed to write file: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `content` to `resolved` keeping the old file's line endings, BOM and mode.
/// Returns `(bytes_written, dirs_created)`.
pub(super) fn write_preserving(
    resolved: &Path,
    shown: &str,
    content: &str,
) -> Result<(u64, bool), WriteError> {
    let ext = extension(&resolved.to_string_lossy()).unwrap_or_default();
    if let Some(reason) = syntax_error(&ext, content) {
        return Err(WriteError::InvalidSyntax {
            shown: shown.to_owned(),
            ext,
            reason,
        });
    }
    let previous = read_text(resolved);
    let mut content = content.to_owned();
    if let Some(old) = &previous {
        if detect_line_ending(old) == Some("\r\n") {
            content = normalize_line_endings(&content, "\r\n");
        }
        if old.starts_with(BOM) && !content.starts_with(BOM) {
            content.insert(0, BOM);
        }
    }
    let parent = resolved.parent().unwrap_or(Path::new("/"));
    let dirs_created = !parent.exists();
    std::fs::create_dir_all(parent)?;
    let mode = std::fs::metadata(resolved).ok().map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o7777
    });
    let mode = mode.or(Some(0o644));
    write_atomically(resolved, content.as_bytes(), mode)?;
    let written = std::fs::metadata(resolved)
        .map(|m| m.len())
        .unwrap_or(content.len() as u64);
    Ok((written, dirs_created))
}

/// Why an exact replacement was not made; the text is the error the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ReplaceError {
    #[error("old_string cannot be empty")]
    EmptyOld,
    #[error("old_string and new_string are identical")]
    NoChange,
    #[error("old_string does not occur in the file")]
    NotFound,
    #[error(
        "old_string occurs {count} times. Add surrounding text until it occurs once, or set replace_all=true."
    )]
    Ambiguous { count: usize },
}

/// Replaces `old` in `content`: it must occur exactly once unless `replace_all`.
pub(super) fn replace_exact(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<String, ReplaceError> {
    if old.is_empty() {
        return Err(ReplaceError::EmptyOld);
    }
    if old == new {
        return Err(ReplaceError::NoChange);
    }
    let count = content.matches(old).count();
    match count {
        0 => Err(ReplaceError::NotFound),
        1 => Ok(content.replacen(old, new, 1)),
        n if replace_all => Ok(content.replacen(old, new, n)),
        count => Err(ReplaceError::Ambiguous { count }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacement_requires_a_unique_match() {
        assert_eq!(replace_exact("a b a", "b", "c", false).unwrap(), "a c a");
        let err = replace_exact("a b a", "a", "c", false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "old_string occurs 2 times. Add surrounding text until it occurs once, or set replace_all=true."
        );
        assert_eq!(replace_exact("a b a", "a", "c", true).unwrap(), "c b c");
        assert_eq!(replace_exact("aaaa", "aa", "b", true).unwrap(), "bb");
        assert_eq!(
            replace_exact("x", "", "y", false).unwrap_err().to_string(),
            "old_string cannot be empty"
        );
        assert_eq!(
            replace_exact("x", "x", "x", false).unwrap_err().to_string(),
            "old_string and new_string are identical"
        );
        assert_eq!(
            replace_exact("x", "q", "y", false).unwrap_err().to_string(),
            "old_string does not occur in the file"
        );
    }
}
