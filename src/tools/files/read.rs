//! `read_file`: paginated, line-numbered reads (`N|line`), with binary and device guards, a
//! character budget that ends on a line boundary, and similar-name suggestions for a file
//! that does not exist.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{Value, json};

use super::text::{
    BOM, add_line_numbers, extension, has_binary_extension, looks_binary, truncate_to_char_budget,
};
use super::{arg_str, blocking};
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::paths::{PathError, read_block_error, resolve};
use crate::tools::tool_error;

pub(super) const DEFAULT_LIMIT: i64 = 500;
const LARGE_FILE_HINT_BYTES: u64 = 512_000;

pub(super) fn int_arg(args: &Value, key: &str, default: i64) -> i64 {
    match args.get(key) {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(default),
        _ => default,
    }
}

/// Opens without following a symlink in the last component: the path was resolved just
/// before, so a link appearing now is a swap and is refused.
pub(super) fn open_nofollow(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

fn result_shell(file_size: u64) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("content".into(), json!(""));
    map.insert("total_lines".into(), json!(0));
    map.insert("file_size".into(), json!(file_size));
    map.insert("truncated".into(), json!(false));
    map.insert("is_binary".into(), json!(false));
    map.insert("is_image".into(), json!(false));
    map
}

/// Up to five names in the same directory that look like the one asked for.
fn similar_files(raw: &str, resolved_dir: Option<&Path>) -> Vec<String> {
    let shown_dir = Path::new(raw)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".into());
    let Some(dir) = resolved_dir else {
        return Vec::new();
    };
    let name = Path::new(raw)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let stem = Path::new(&name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = extension(&name);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.truncate(50);
    let mut scored: Vec<(u32, String)> = Vec::new();
    for candidate in names {
        let lower = candidate.to_lowercase();
        let cand_stem = Path::new(&lower)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let score = if lower == name {
            100
        } else if cand_stem == stem {
            90
        } else if lower.starts_with(&name) || name.starts_with(&lower) {
            70
        } else if lower.contains(&name) {
            60
        } else if name.contains(&lower) && lower.chars().count() > 2 {
            40
        } else if ext.is_some() && extension(&lower) == ext {
            let common = lower
                .chars()
                .filter(|c| name.contains(*c))
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            let needed = name.chars().count().max(lower.chars().count()) as f64 * 0.4;
            if common as f64 >= needed { 30 } else { 0 }
        } else {
            0
        };
        if score > 0 {
            scored.push((
                score,
                format!("{}/{candidate}", shown_dir.trim_end_matches('/')),
            ));
        }
    }
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    scored.into_iter().take(5).map(|(_, p)| p).collect()
}

fn not_found(raw: &str, dir: Option<&Path>) -> String {
    let mut map = result_shell(0);
    map.insert("error".into(), json!(format!("File not found: {raw}")));
    let similar = similar_files(raw, dir);
    if !similar.is_empty() {
        map.insert("similar_files".into(), json!(similar));
    }
    Value::Object(map).to_string()
}

fn read_blocking(ctx: &ToolCtx, raw: &str, offset: usize, limit: usize) -> String {
    let resolved = match resolve(ctx, raw) {
        Ok(path) => path,
        Err(PathError::Unresolvable { .. }) => return not_found(raw, None),
        Err(e) => return tool_error(e.to_string()),
    };
    if has_binary_extension(&resolved.to_string_lossy()) {
        let ext = extension(&resolved.to_string_lossy()).unwrap_or_default();
        return tool_error(format!(
            "'{raw}' is a binary file ({ext}); read_file only shows text. Inspect it with terminal tools."
        ));
    }
    if let Some(message) = read_block_error(ctx, &resolved, raw) {
        return tool_error(message);
    }
    let metadata = match std::fs::metadata(&resolved) {
        Ok(m) => m,
        Err(_) => return not_found(raw, resolved.parent()),
    };
    if metadata.is_dir() {
        return tool_error(format!(
            "'{raw}' is a directory. Use search_files(target='files', path='{raw}') to list it."
        ));
    }
    if !metadata.is_file() {
        return tool_error(format!(
            "'{raw}' is a device, which would block or never end; not read."
        ));
    }
    let file_size = metadata.len();
    let file = match open_nofollow(&resolved) {
        Ok(f) => f,
        Err(e) => return tool_error(format!("Failed to read file: {e}")),
    };
    render(ctx, file, file_size, offset, limit)
}

/// The tool's result for a file's bytes read from `source`: binary content refused, the
/// window of lines numbered, the character budget applied.
pub(super) fn render(
    ctx: &ToolCtx,
    source: impl Read,
    file_size: u64,
    offset: usize,
    limit: usize,
) -> String {
    let mut reader = BufReader::new(source);
    let mut sample = Vec::new();
    if reader.by_ref().take(1000).read_to_end(&mut sample).is_err()
        || looks_binary(&String::from_utf8_lossy(&sample))
    {
        let mut map = result_shell(file_size);
        map.insert("is_binary".into(), json!(true));
        map.insert(
            "error".into(),
            json!("Binary content, not shown; inspect it with terminal tools."),
        );
        return Value::Object(map).to_string();
    }
    let mut whole = std::io::Cursor::new(sample).chain(reader);
    let end_line = offset + limit - 1;
    let mut lines: Vec<String> = Vec::new();
    let mut total_lines = 0usize;
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match whole.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return tool_error(format!("Failed to read file: {e}")),
        }
        line_no += 1;
        if buf.ends_with(b"\n") {
            total_lines += 1;
            buf.pop();
            if buf.ends_with(b"\r") {
                buf.pop();
            }
        }
        if line_no >= offset && line_no <= end_line {
            let mut text = String::from_utf8_lossy(&buf).into_owned();
            if line_no == 1 && text.starts_with(BOM) {
                text.remove(0);
            }
            lines.push(text);
        }
    }
    let mut map = result_shell(file_size);
    let content = add_line_numbers(&lines, offset, ctx.limits.max_line_length);
    let truncated = total_lines > end_line;
    map.insert("total_lines".into(), json!(total_lines));
    map.insert("truncated".into(), json!(truncated));
    if truncated {
        map.insert(
            "hint".into(),
            json!(format!(
                "Lines {offset}-{end_line} of {total_lines}; offset={} reads on",
                end_line + 1
            )),
        );
    }
    let max_chars = ctx.limits.max_read_chars;
    let (content, kept, cut) = truncate_to_char_budget(&content, max_chars);
    if cut {
        let next_offset = offset + kept;
        let mut hint = format!(
            "Cut at the {}-char limit of one read after {kept} line(s): lines {offset}-{} of {total_lines} shown; offset={next_offset} reads on.",
            crate::tools::output::thousands(max_chars),
            next_offset - 1
        );
        if content
            .split('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .count()
            >= max_chars
        {
            hint.push_str(" The first line alone is longer than the limit and was cut; offset cannot reach the rest of it.");
        }
        map.insert("truncated".into(), json!(true));
        map.insert("truncated_by".into(), json!("bytes"));
        map.insert("next_offset".into(), json!(next_offset));
        map.insert("hint".into(), json!(hint));
    }
    map.insert("content".into(), json!(content));
    if file_size > LARGE_FILE_HINT_BYTES
        && limit > 200
        && map.get("truncated") == Some(&json!(true))
    {
        map.insert(
            "_hint".into(),
            json!(format!(
                "Large file ({} bytes): read just the part you need with offset and limit.",
                crate::tools::output::thousands(file_size as usize)
            )),
        );
    }
    Value::Object(map).to_string()
}

/// Runs the tool on the host's files (`remote::read_file` decides where it runs).
pub(super) async fn read_host_file(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let raw = arg_str(&args, "path").unwrap_or_default().to_owned();
    if raw.is_empty() {
        return Ok(tool_error("read_file: missing required field 'path'."));
    }
    let offset = int_arg(&args, "offset", 1).max(1) as usize;
    let max_lines = ctx.limits.max_read_lines as i64;
    let limit = int_arg(&args, "limit", DEFAULT_LIMIT).clamp(1, max_lines.max(1)) as usize;
    blocking(move || read_blocking(&ctx, &raw, offset, limit)).await
}
