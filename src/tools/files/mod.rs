//! The file tools (Python `tools/file_tools.py` and `file_operations.py`): `read_file`,
//! `write_file`, `patch` (replace and V4A) and `search_files`, all confined to the allowed
//! roots by [`crate::tools::paths`]. File I/O runs on the blocking pool.

mod diff;
mod read;
mod search;
mod text;
mod v4a;
mod write;

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};

pub use read::read_file;
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

fn read_file_schema() -> Value {
    json!({
        "name": "read_file",
        "description": "Read a text file with line numbers and pagination. Use this instead of cat/head/tail in terminal. Output format: 'LINE_NUM|CONTENT'. Suggests similar filenames if not found. Use offset and limit for large files. Reads exceeding ~100K characters are truncated on a line boundary and return a next_offset; continue with offset to read the rest. NOTE: Cannot read images or other binary files.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (absolute, relative, or ~/path)"},
                "offset": {"type": "integer", "description": "Line number to start reading from (1-indexed, default: 1)", "default": 1, "minimum": 1},
                "limit": {"type": "integer", "description": "Maximum number of lines to read (default: 500, max: 2000)", "default": 500, "maximum": 2000}
            },
            "required": ["path"]
        }
    })
}

fn write_file_schema() -> Value {
    json!({
        "name": "write_file",
        "description": "Write content to a file, completely replacing existing content. Use this instead of echo/cat heredoc in terminal. Creates parent directories automatically. OVERWRITES the entire file — use 'patch' for targeted edits. .json and .yaml content that does not parse is refused.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file to write (will be created if it doesn't exist, overwritten if it does)"},
                "content": {"type": "string", "description": "Complete content to write to the file"}
            },
            "required": ["path", "content"]
        }
    })
}

fn patch_schema() -> Value {
    json!({
        "name": "patch",
        "description": "Targeted find-and-replace edits in files. Use this instead of sed/awk in terminal. Matching is exact: old_string must appear in the file verbatim, including whitespace and indentation. Returns a unified diff.\n\nREPLACE MODE (mode='replace', default): find a unique string and replace it. REQUIRED PARAMETERS: mode, path, old_string, new_string.\nPATCH MODE (mode='patch'): apply V4A multi-file patches for bulk changes. REQUIRED PARAMETERS: mode, patch.",
        "parameters": {
            "type": "object",
            "properties": {
                "mode": {
                    "type": "string",
                    "enum": ["replace", "patch"],
                    "description": "Edit mode. 'replace' (default): requires path + old_string + new_string. 'patch': requires patch content only.",
                    "default": "replace"
                },
                "path": {"type": "string", "description": "REQUIRED when mode='replace'. File path to edit."},
                "old_string": {"type": "string", "description": "REQUIRED when mode='replace'. Exact text to find and replace. Must be unique in the file unless replace_all=true. Include surrounding context lines to ensure uniqueness."},
                "new_string": {"type": "string", "description": "REQUIRED when mode='replace'. Replacement text. Pass empty string '' to delete the matched text."},
                "replace_all": {"type": "boolean", "description": "Replace all occurrences instead of requiring a unique match (default: false)", "default": false},
                "patch": {"type": "string", "description": "REQUIRED when mode='patch'. V4A format patch content. Format:\n*** Begin Patch\n*** Update File: path/to/file\n@@ context hint @@\n context line\n-removed line\n+added line\n*** End Patch"}
            },
            "required": ["mode"]
        }
    })
}

fn search_files_schema() -> Value {
    json!({
        "name": "search_files",
        "description": "Search file contents or find files by name. Use this instead of grep/rg/find/ls in terminal.\n\nContent search (target='content'): Regex search inside files. Output modes: full matches with line numbers, file paths only, or match counts.\n\nFile search (target='files'): Find files by glob pattern (e.g., '*.py', '*config*'). Also use this instead of ls — results sorted by modification time.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regex pattern for content search, or glob pattern (e.g., '*.py') for file search"},
                "target": {"type": "string", "enum": ["content", "files"], "description": "'content' searches inside file contents, 'files' searches for files by name", "default": "content"},
                "path": {"type": "string", "description": "Directory or file to search in (default: current working directory)", "default": "."},
                "file_glob": {"type": "string", "description": "Filter files by pattern in grep mode (e.g., '*.py' to only search Python files)"},
                "limit": {"type": "integer", "description": "Maximum number of results to return (default: 50)", "default": 50},
                "offset": {"type": "integer", "description": "Skip first N results for pagination (default: 0)", "default": 0},
                "output_mode": {"type": "string", "enum": ["content", "files_only", "count"], "description": "Output format for grep mode: 'content' shows matching lines with line numbers, 'files_only' lists file paths, 'count' shows match counts per file", "default": "content"},
                "context": {"type": "integer", "description": "Number of context lines before and after each match (grep mode only)", "default": 0}
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
