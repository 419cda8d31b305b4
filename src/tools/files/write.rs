//! `write_file` and `patch`: atomic writes (temp file in the same directory, mode kept,
//! rename) that preserve a file's CRLF endings and BOM, refuse unparsable JSON/YAML and
//! read_file's numbered display text, and `patch` replace mode with its uniqueness check.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::diff::unified_diff;
use super::guard::{approve_writes, unapproved};
use super::read::open_nofollow;
use super::text::{
    BOM, detect_line_ending, extension, is_internal_file_tool_content, normalize_line_endings,
    strip_bom,
};
use super::v4a::{apply_v4a, patch_paths};
use super::{arg_str, blocking};
use crate::tools::approval::write_atomically;
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::paths::resolve;
use crate::tools::tool_error;

/// The current text of a file, `None` when it does not exist or is not UTF-8.
pub(super) fn read_text(path: &Path) -> Option<String> {
    let mut file = open_nofollow(path).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

/// Syntax gate for structured formats: a write that does not parse is refused.
fn syntax_error(ext: &str, content: &str) -> Option<String> {
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

fn lint_result(ext: Option<&str>) -> Value {
    match ext {
        Some(".json" | ".yaml" | ".yml") => json!({"status": "ok", "output": ""}),
        Some(ext) => json!({"status": "skipped", "message": format!("No linter for {ext} files")}),
        None => json!({"status": "skipped", "message": "No linter for this file type"}),
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

fn write_blocking(ctx: &ToolCtx, raw: &str, content: &str, approved: &[PathBuf]) -> String {
    let resolved = match resolve(ctx, raw) {
        Ok(path) => path,
        Err(e) => return tool_error(e.to_string()),
    };
    if let Some(message) = unapproved(ctx, &resolved, raw, approved) {
        return tool_error(message);
    }
    if is_internal_file_tool_content(content) {
        return tool_error(
            "Not written: this is read_file output with its 'N|' line-number prefixes. Write the file's real text without them.",
        );
    }
    let shown = resolved.display().to_string();
    let mut result = Map::new();
    match write_preserving(&resolved, raw, content) {
        Ok((bytes, dirs_created)) => {
            let ext = extension(&shown);
            result.insert("bytes_written".into(), json!(bytes));
            result.insert("dirs_created".into(), json!(dirs_created));
            result.insert("lint".into(), lint_result(ext.as_deref()));
            result.insert("resolved_path".into(), json!(shown));
            result.insert("files_modified".into(), json!([shown]));
        }
        Err(error) => {
            result.insert("bytes_written".into(), json!(0));
            result.insert("dirs_created".into(), json!(false));
            result.insert("error".into(), json!(error.to_string()));
            result.insert("resolved_path".into(), json!(shown));
        }
    }
    Value::Object(result).to_string()
}

/// Runs `write_file`.
pub async fn write_file(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let Some(raw) = arg_str(&args, "path")
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
    else {
        return Ok(tool_error(
            "write_file: 'path' is missing. Call it again with both 'path' and 'content'.",
        ));
    };
    let content = match args.get("content") {
        None => {
            return Ok(tool_error(
                "write_file: 'content' is missing (a path came without it, typically an argument lost in a long context). Call it again with the whole content.",
            ));
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            let kind = match other {
                Value::Null => "NoneType",
                Value::Bool(_) => "bool",
                Value::Number(_) => "int",
                Value::Array(_) => "list",
                _ => "dict",
            };
            return Ok(tool_error(format!(
                "write_file: 'content' was a {kind}; pass the file's text as a string."
            )));
        }
    };
    let approved = match approve_writes(&ctx, std::slice::from_ref(&raw)).await {
        Ok(approved) => approved,
        Err(refusal) => return Ok(tool_error(refusal.to_string())),
    };
    blocking(move || write_blocking(&ctx, &raw, &content, &approved)).await
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

fn patch_failure(error: &str) -> String {
    let mut result = json!({"success": false, "error": error});
    if error.contains("does not occur") {
        result["_hint"] = json!(
            "The file may have changed: read_file shows its current text, search_files finds where the text went."
        );
    }
    result.to_string()
}

fn patch_replace_blocking(
    ctx: &ToolCtx,
    raw: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    approved: &[PathBuf],
) -> String {
    let resolved = match resolve(ctx, raw) {
        Ok(path) => path,
        Err(e) => return tool_error(e.to_string()),
    };
    if let Some(message) = unapproved(ctx, &resolved, raw, approved) {
        return tool_error(message);
    }
    let shown = resolved.display().to_string();
    let Some(original) = read_text(&resolved) else {
        return patch_failure(&format!("Failed to read file: {shown}"));
    };
    let (content, _) = strip_bom(&original);
    let mut updated = match replace_exact(content, old, new, replace_all) {
        Ok(updated) => updated,
        Err(error) => return patch_failure(&error.to_string()),
    };
    if let Some(ending) = detect_line_ending(content) {
        updated = normalize_line_endings(&updated, ending);
    }
    if let Err(error) = write_preserving(&resolved, raw, &updated) {
        return patch_failure(&format!("Failed to write changes: {error}"));
    }
    let on_disk = read_text(&resolved).unwrap_or_default();
    let normalize = |s: &str| {
        s.trim_start_matches(BOM)
            .replace("\r\n", "\n")
            .replace('\r', "\n")
    };
    if normalize(&on_disk) != normalize(&updated) {
        return patch_failure(&format!(
            "After writing {shown} the file does not hold the patched text, so the patch did not take. Read the file again and redo it."
        ));
    }
    let diff = unified_diff(
        content,
        &updated,
        &format!("a/{shown}"),
        &format!("b/{shown}"),
    );
    let ext = extension(&shown);
    json!({
        "success": true,
        "diff": diff,
        "files_modified": [shown],
        "lint": lint_result(ext.as_deref()),
        "resolved_path": shown,
    })
    .to_string()
}

/// Runs `patch`.
pub async fn patch(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let mode = arg_str(&args, "mode").unwrap_or("replace").to_owned();
    match mode.as_str() {
        "replace" => {
            let Some(raw) = arg_str(&args, "path")
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
            else {
                return Ok(tool_error("path required"));
            };
            let (Some(old), Some(new)) =
                (arg_str(&args, "old_string"), arg_str(&args, "new_string"))
            else {
                return Ok(tool_error("old_string and new_string required"));
            };
            let (old, new) = (old.to_owned(), new.to_owned());
            let replace_all = args
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let approved = match approve_writes(&ctx, std::slice::from_ref(&raw)).await {
                Ok(approved) => approved,
                Err(refusal) => return Ok(tool_error(refusal.to_string())),
            };
            blocking(move || patch_replace_blocking(&ctx, &raw, &old, &new, replace_all, &approved))
                .await
        }
        "patch" => {
            let Some(text) = arg_str(&args, "patch")
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
            else {
                return Ok(tool_error("patch content required"));
            };
            let approved = match approve_writes(&ctx, &patch_paths(&text)).await {
                Ok(approved) => approved,
                Err(refusal) => return Ok(tool_error(refusal.to_string())),
            };
            blocking(move || apply_v4a(&ctx, &text, &approved)).await
        }
        other => Ok(tool_error(format!("Unknown mode: {other}"))),
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
