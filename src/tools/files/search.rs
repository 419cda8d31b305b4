//! `search_files`: regex search inside files (ripgrep-style: Rust regex syntax, hidden and
//! binary files skipped) and file-name globbing sorted newest first, with a result cap,
//! offset pagination and a 60-second budget. Symlinks are not followed while walking.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use regex::Regex;
use serde_json::{Map, Value, json};

use super::read::open_nofollow;
use super::{arg_str, blocking};
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::fnmatch::Glob;
use crate::tools::paths::{Walls, read_block_error, resolve};
use crate::tools::tool_error;

const SEARCH_BUDGET: Duration = Duration::from_secs(60);
const MAX_LINE_CHARS: usize = 500;
/// Below this many matches the verbose array is already compact.
const DENSIFY_MIN_MATCHES: usize = 5;

struct Walk {
    files: Vec<(PathBuf, SystemTime)>,
    timed_out: bool,
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with('.') && n != "." && n != "..")
}

/// Regular files under `root` (or `root` itself), skipping hidden entries and symlinks.
fn walk(root: &Path, deadline: Instant) -> Walk {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut timed_out = false;
    while let Some(dir) = stack.pop() {
        if Instant::now() > deadline {
            timed_out = true;
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if meta.is_file() {
            files.push((dir, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
            continue;
        }
        if !meta.is_dir() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<_> = entries.filter_map(Result::ok).collect();
        children.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        for entry in children {
            if is_hidden(&entry.file_name()) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let modified = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                files.push((entry.path(), modified));
            }
        }
    }
    Walk { files, timed_out }
}

/// The path as the model named it: the search path it gave, joined with the rest.
fn display(shown_root: &str, root: &Path, file: &Path) -> String {
    match file.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => shown_root.to_owned(),
        Ok(rel) => format!("{}/{}", shown_root.trim_end_matches('/'), rel.display()),
        Err(_) => file.display().to_string(),
    }
}

fn glob_matches(glob: &Glob, pattern: &str, rel: &str, name: &str) -> bool {
    if pattern.contains('/') {
        glob.is_match(rel) || glob.is_match(name)
    } else {
        glob.is_match(name)
    }
}

struct Params<'a> {
    pattern: &'a str,
    shown_root: &'a str,
    file_glob: Option<&'a str>,
    limit: usize,
    offset: usize,
    output_mode: &'a str,
    context: usize,
    /// The read rules, applied to every file whose content is searched.
    walls: Walls,
}

fn search_names(root: &Path, p: &Params<'_>) -> Map<String, Value> {
    // `**/x` and `dir/x` match on the last component, as Python's find fallback does.
    let name_pattern = if p.pattern.starts_with("**/") || p.pattern.contains('/') {
        p.pattern.rsplit('/').next().unwrap_or(p.pattern)
    } else {
        p.pattern
    };
    let mut result = Map::new();
    let Some(glob) = Glob::new(name_pattern) else {
        result.insert("total_count".into(), json!(0));
        result.insert(
            "error".into(),
            json!(format!("Invalid glob pattern: {}", p.pattern)),
        );
        return result;
    };
    let walked = walk(root, Instant::now() + SEARCH_BUDGET);
    let mut files: Vec<_> = walked
        .files
        .into_iter()
        .filter(|(path, _)| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            glob.is_match(&name)
        })
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total = files.len();
    let page: Vec<String> = files
        .iter()
        .skip(p.offset)
        .take(p.limit)
        .map(|(path, _)| display(p.shown_root, root, path))
        .collect();
    result.insert("total_count".into(), json!(total));
    if !page.is_empty() {
        result.insert("files".into(), json!(page));
    }
    if total > p.offset + p.limit || walked.timed_out {
        result.insert("truncated".into(), json!(true));
    }
    if walked.timed_out {
        result.insert("limit_reason".into(), json!("search_timeout"));
    }
    result
}

/// Whether a file looks binary (a NUL byte in its first 8 KiB), as ripgrep decides.
fn binary_file(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|&b| b == 0)
}

fn search_contents(root: &Path, p: &Params<'_>) -> Map<String, Value> {
    let mut result = Map::new();
    let regex = match Regex::new(p.pattern) {
        Ok(re) => re,
        Err(e) => {
            result.insert("total_count".into(), json!(0));
            result.insert(
                "error".into(),
                json!(format!("Search failed: regex parse error: {e}")),
            );
            return result;
        }
    };
    let glob = p.file_glob.and_then(Glob::new);
    let deadline = Instant::now() + SEARCH_BUDGET;
    let walked = walk(root, deadline);
    let mut timed_out = walked.timed_out;
    let mut files = walked.files;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut matches: Vec<(String, usize, String)> = Vec::new();
    let mut files_with: Vec<String> = Vec::new();
    let mut counts = Map::new();
    let mut total = 0usize;
    let mut skipped: Vec<&'static str> = Vec::new();
    for (path, _) in files {
        if Instant::now() > deadline {
            timed_out = true;
            break;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rel = path
            .strip_prefix(root)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let (Some(glob), Some(pattern)) = (&glob, p.file_glob)
            && !glob_matches(glob, pattern, &rel, &name)
        {
            continue;
        }
        if let Some(wall) = p.walls.guard_read(&path) {
            skipped.push(wall.reason());
            continue;
        }
        let Ok(mut file) = open_nofollow(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if std::io::Read::read_to_end(&mut file, &mut bytes).is_err() || binary_file(&bytes) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let shown = display(p.shown_root, root, &path);
        let hits: Vec<usize> = (0..lines.len())
            .filter(|&i| regex.is_match(lines[i]))
            .collect();
        if hits.is_empty() {
            continue;
        }
        files_with.push(shown.clone());
        counts.insert(shown.clone(), json!(hits.len()));
        // Hits are ascending, so context windows only ever overlap the previous one.
        let mut next_unemitted = 0usize;
        for &hit in &hits {
            let from = hit.saturating_sub(p.context).max(next_unemitted);
            let to = (hit + p.context).min(lines.len() - 1);
            for (i, line) in lines.iter().enumerate().take(to + 1).skip(from) {
                next_unemitted = i + 1;
                total += 1;
                if matches.len() < p.offset + p.limit {
                    let content: String = line.chars().take(MAX_LINE_CHARS).collect();
                    matches.push((shown.clone(), i + 1, content));
                }
            }
        }
    }
    match p.output_mode {
        "files_only" => {
            result.insert("total_count".into(), json!(files_with.len()));
            let page: Vec<String> = files_with
                .into_iter()
                .skip(p.offset)
                .take(p.limit)
                .collect();
            if !page.is_empty() {
                result.insert("files".into(), json!(page));
            }
        }
        "count" => {
            let sum: u64 = counts.values().filter_map(Value::as_u64).sum();
            result.insert("total_count".into(), json!(sum));
            if !counts.is_empty() {
                result.insert("counts".into(), Value::Object(counts));
            }
        }
        _ => {
            result.insert("total_count".into(), json!(total));
            let page: Vec<(String, usize, String)> = matches.into_iter().skip(p.offset).collect();
            if page.len() >= DENSIFY_MIN_MATCHES {
                let mut text = Vec::new();
                let mut current: Option<&str> = None;
                for (path, line, content) in &page {
                    if current != Some(path.as_str()) {
                        text.push(path.clone());
                        current = Some(path.as_str());
                    }
                    text.push(format!("  {line}: {}", content.trim_end()));
                }
                result.insert("matches_format".into(), json!("grouped by file: a path line, then one indented '<line>: <content>' row per match in it"));
                result.insert("matches_text".into(), json!(text.join("\n")));
            } else if !page.is_empty() {
                let list: Vec<Value> = page
                    .into_iter()
                    .map(|(path, line, content)| json!({"path": path, "line": line, "content": content}))
                    .collect();
                result.insert("matches".into(), json!(list));
            }
            if total > p.offset + p.limit {
                result.insert("truncated".into(), json!(true));
            }
        }
    }
    if timed_out {
        result.insert("truncated".into(), json!(true));
        result.insert("limit_reason".into(), json!("search_timeout"));
    }
    if !skipped.is_empty() {
        result.insert("skipped_protected".into(), skipped_note(&skipped));
    }
    result
}

/// How many files the read rules kept out of a content search, and why (never which lines).
fn skipped_note(reasons: &[&'static str]) -> Value {
    let mut why: Vec<&str> = reasons.to_vec();
    why.sort_unstable();
    why.dedup();
    json!({
        "count": reasons.len(),
        "why": why,
        "note": "These files are protected (credentials, keys): their contents were not searched. Ask the user if you need something from them.",
    })
}

fn search_blocking(ctx: &ToolCtx, args: &Value) -> String {
    let pattern = arg_str(args, "pattern").unwrap_or_default();
    let target = match arg_str(args, "target").unwrap_or("content") {
        "grep" => "content",
        "find" => "files",
        other => other,
    };
    let shown_root = arg_str(args, "path")
        .filter(|p| !p.is_empty())
        .unwrap_or(".");
    let (limit, offset) = super::page(args);
    let context = args
        .get("context")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .clamp(0, 50) as usize;
    let root = match resolve(ctx, shown_root) {
        Ok(root) => root,
        Err(e) => return tool_error(e.to_string()),
    };
    if let Some(message) = read_block_error(ctx, &root, shown_root) {
        return tool_error(message);
    }
    if !root.exists() {
        return json!({"total_count": 0, "error": format!("Path not found: {shown_root}")})
            .to_string();
    }
    let params = Params {
        pattern,
        shown_root,
        file_glob: arg_str(args, "file_glob").filter(|g| !g.is_empty()),
        limit,
        offset,
        output_mode: arg_str(args, "output_mode").unwrap_or("content"),
        context,
        walls: Walls::of(ctx),
    };
    let mut result = if target == "files" {
        search_names(&root, &params)
    } else {
        search_contents(&root, &params)
    };
    if result.get("truncated") == Some(&json!(true)) {
        result.insert("hint".into(), json!(format!(
            "More results exist: offset={} shows the next page; a tighter pattern or file_glob gives fewer.",
            offset + limit
        )));
    }
    Value::Object(result).to_string()
}

/// Runs the tool.
pub async fn search_files(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    if arg_str(&args, "pattern").is_none_or(str::is_empty) {
        return Ok(tool_error(
            "search_files: missing required field 'pattern'.",
        ));
    }
    let ctx = match super::remote::place(ctx).await {
        super::remote::Place::Host(ctx) => ctx,
        super::remote::Place::Remote(remote) => return Ok(remote.search(&args).await),
        super::remote::Place::Failed(result) => return Ok(result),
    };
    blocking(move || search_blocking(&ctx, &args)).await
}
