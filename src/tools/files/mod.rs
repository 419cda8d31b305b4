//! The file tools (Python `tools/file_tools.py` and `file_operations.py`): `read_file`,
//! `write_file`, `patch` (replace and V4A) and `search_files`, all confined to the allowed
//! roots by [`crate::tools::paths`]. File I/O runs on the blocking pool.

mod diff;
mod edit;
mod guard;
mod read;
mod remote;
mod search;
mod text;
mod v4a;
mod write;

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};

pub use remote::read_file;
pub use search::search_files;
pub use v4a::{PatchOperation, parse_v4a_patch};
pub use write::{patch, write_file};

/// Runs blocking file work off the async threads.
async fn blocking<F>(f: F) -> Result<String, ToolError>
where
    F: FnOnce() -> String + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Failed(format!("file task failed: {e}")))
}

fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// `limit` (default 50, at least 1) and `offset` (default 0) of a search call.
fn page(args: &Value) -> (usize, usize) {
    let limit = args
        .get("limit")
        .and_then(Value::as_i64)
        .unwrap_or(50)
        .max(1) as usize;
    let offset = args
        .get("offset")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .max(0) as usize;
    (limit, offset)
}

fn read_file_schema() -> Value {
    json!({
        "name": "read_file",
        "description": "Returns a text file's lines as 'LINE_NUM|CONTENT', a window at a time (offset, limit). A read past ~100K characters stops at a line boundary and gives next_offset to continue from. A missing path gets similarly named files suggested. Text only: binary files and images are refused.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path: absolute, relative to the working directory, or ~/..."},
                "offset": {"type": "integer", "description": "First line to return, counting from 1 (default 1)", "default": 1, "minimum": 1},
                "limit": {"type": "integer", "description": "How many lines to return (default 500, at most 2000)", "default": 500, "maximum": 2000}
            },
            "required": ["path"]
        }
    })
}

fn write_file_schema() -> Value {
    json!({
        "name": "write_file",
        "description": "Creates or overwrites a whole file with the given content, making missing parent directories. For changing part of a file use patch. .json and .yaml content that does not parse is refused.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path to create or overwrite"},
                "content": {"type": "string", "description": "The full new content of the file"}
            },
            "required": ["path", "content"]
        }
    })
}

fn patch_schema() -> Value {
    json!({
        "name": "patch",
        "description": "Edits files in place and returns a unified diff. mode='replace' (default) swaps old_string for new_string in path; old_string must occur verbatim, whitespace and indentation included, and only once unless replace_all=true. mode='patch' applies a V4A patch that may touch several files.",
        "parameters": {
            "type": "object",
            "properties": {
                "mode": {
                    "type": "string",
                    "enum": ["replace", "patch"],
                    "description": "'replace' (default) uses path, old_string and new_string; 'patch' uses only patch.",
                    "default": "replace"
                },
                "path": {"type": "string", "description": "replace mode: the file to edit."},
                "old_string": {"type": "string", "description": "replace mode: the exact text to replace. Add neighbouring lines if needed to make it occur only once."},
                "new_string": {"type": "string", "description": "replace mode: the text to put in its place ('' deletes it)."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence rather than demanding exactly one (default false)", "default": false},
                "patch": {"type": "string", "description": "patch mode: a V4A patch, e.g.\n*** Begin Patch\n*** Update File: src/app.py\n@@ nearby line @@\n unchanged\n-old\n+new\n*** End Patch"}
            },
            "required": ["mode"]
        }
    })
}

fn search_files_schema() -> Value {
    json!({
        "name": "search_files",
        "description": "Greps file contents or lists files. target='content' (default) matches a regex against lines and reports matching lines with numbers, just the files, or counts per file. target='files' lists files whose names match a glob such as '*.py', newest first; use it to list directories too.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "A regex for target='content'; a filename glob for target='files'"},
                "target": {"type": "string", "enum": ["content", "files"], "description": "'content': search inside files; 'files': match file names", "default": "content"},
                "path": {"type": "string", "description": "Where to search: a directory or one file (default: the working directory)", "default": "."},
                "file_glob": {"type": "string", "description": "Content search only: restrict to files matching this glob, e.g. '*.rs'"},
                "limit": {"type": "integer", "description": "Most results to return (default 50)", "default": 50},
                "offset": {"type": "integer", "description": "Results to skip, for paging (default 0)", "default": 0},
                "output_mode": {"type": "string", "enum": ["content", "files_only", "count"], "description": "Content search only: 'content' gives numbered matching lines, 'files_only' the file paths, 'count' matches per file", "default": "content"},
                "context": {"type": "integer", "description": "Content search only: lines of context around each match", "default": 0}
            },
            "required": ["pattern"]
        }
    })
}

/// The four file tools, ready to register.
pub fn entries() -> Vec<ToolEntry> {
    vec![
        ToolEntry::new(
            "read_file",
            "file",
            read_file_schema(),
            handler(|ctx: ToolCtx, args: Value| read_file(ctx, args)),
        )
        .with_emoji("📖"),
        ToolEntry::new(
            "write_file",
            "file",
            write_file_schema(),
            handler(|ctx: ToolCtx, args: Value| write_file(ctx, args)),
        )
        .with_emoji("✍️"),
        ToolEntry::new(
            "patch",
            "file",
            patch_schema(),
            handler(|ctx: ToolCtx, args: Value| patch(ctx, args)),
        )
        .with_emoji("🔧"),
        ToolEntry::new(
            "search_files",
            "file",
            search_files_schema(),
            handler(|ctx: ToolCtx, args: Value| search_files(ctx, args)),
        )
        .with_emoji("🔎"),
    ]
}
