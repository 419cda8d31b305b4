//! `write_file` and `patch`: arguments, approval, read_file's numbered display text refused,
//! and the replies. The edits themselves — atomic writes (temp file in the same directory,
//! mode kept, rename) that preserve a file's CRLF endings and BOM and refuse unparsable
//! JSON/YAML, and `patch` replace mode with its uniqueness check — are in `edit.rs`.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::diff::unified_diff;
use super::edit::{read_text, replace_exact, write_preserving};
use super::guard::{approve_writes, unapproved};
use super::remote::{Place, place};
use super::text::{
    BOM, detect_line_ending, extension, is_internal_file_tool_content, normalize_line_endings,
    strip_bom,
};
use super::v4a::{apply_v4a, patch_paths};
use super::{arg_str, blocking};
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::paths::resolve;
use crate::tools::tool_error;

fn lint_result(ext: Option<&str>) -> Value {
    match ext {
        Some(".json" | ".yaml" | ".yml") => json!({"status": "ok", "output": ""}),
        Some(ext) => json!({"status": "skipped", "message": format!("No linter for {ext} files")}),
        None => json!({"status": "skipped", "message": "No linter for this file type"}),
    }
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
    let ctx = match place(ctx).await {
        Place::Host(ctx) => ctx,
        Place::Remote(remote) => return Ok(remote.write(&raw, &content).await),
        Place::Failed(result) => return Ok(result),
    };
    let approved = match approve_writes(&ctx, std::slice::from_ref(&raw)).await {
        Ok(approved) => approved,
        Err(refusal) => return Ok(tool_error(refusal.to_string())),
    };
    blocking(move || write_blocking(&ctx, &raw, &content, &approved)).await
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
    let ctx = match place(ctx).await {
        Place::Host(ctx) => ctx,
        Place::Remote(remote) => return Ok(patch_remote(&remote, &mode, &args).await),
        Place::Failed(result) => return Ok(result),
    };
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

/// `patch` on a container or remote machine: replace mode only.
async fn patch_remote(remote: &super::remote::Remote, mode: &str, args: &Value) -> String {
    if mode != "replace" {
        return tool_error(
            "mode='patch' (V4A) is not available when files live in a container or on a remote machine; use mode='replace' for each change.",
        );
    }
    let (Some(raw), Some(old), Some(new)) = (
        arg_str(args, "path").filter(|p| !p.is_empty()),
        arg_str(args, "old_string"),
        arg_str(args, "new_string"),
    ) else {
        return tool_error("path, old_string and new_string required");
    };
    let all = args
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    remote.replace(raw, old, new, all).await
}
