//! The file tools where `terminal:` puts commands: on a host sandbox (bubblewrap) the tools
//! act on the host's files confined to the sandbox's directory, so they see what its commands
//! see; on a container or remote machine they read and write through the backend, so
//! `read_file` reads the container's file. Replace-mode `patch` is read, edit, write;
//! `search_files` runs `grep`/`find` in the backend. V4A patches are refused there.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::arg_str;
use super::diff::unified_diff;
use super::edit::{replace_exact, syntax_error};
use super::read::{DEFAULT_LIMIT, int_arg, render};
use super::text::{extension, has_binary_extension, is_internal_file_tool_content};
use crate::tools::backend::{Backend, BackendError, Exec, SandboxRef};
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::tool_error;

/// The largest file read or written through a remote backend in one call.
const MAX_REMOTE_BYTES: usize = 8 * 1024 * 1024;

/// Where a file tool call acts.
pub(super) enum Place {
    /// The host's files, under `ctx`'s roots (no sandbox, or a host sandbox's directory).
    Host(ToolCtx),
    /// A container or remote machine.
    Remote(Remote),
    /// The backend could not be reached; the text is the tool's result.
    Failed(String),
}

pub(super) struct Remote {
    ctx: ToolCtx,
    sandbox: SandboxRef,
    backend: Arc<dyn Backend>,
}

/// Runs `read_file` where the call acts.
pub async fn read_file(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    match place(ctx).await {
        Place::Host(ctx) => super::read::read_host_file(ctx, args).await,
        Place::Remote(remote) => Ok(remote.read(&args).await),
        Place::Failed(result) => Ok(result),
    }
}

/// Decides where `ctx`'s call acts, opening its sandbox if needed.
pub(super) async fn place(mut ctx: ToolCtx) -> Place {
    let Some(sandbox) = ctx.sandbox.clone() else {
        return Place::Host(ctx);
    };
    let backend = match sandbox.backend().await {
        Ok(backend) => backend,
        Err(e) => return Place::Failed(tool_error(format!("{e}. Files cannot be reached."))),
    };
    match backend.host_roots() {
        Some(roots) => {
            let dir = backend.default_cwd();
            ctx.cwd = PathBuf::from(&dir);
            ctx.allowed_roots = roots;
            ctx.env.insert("HOME".to_owned(), dir);
            Place::Host(ctx)
        }
        None => Place::Remote(Remote {
            ctx,
            sandbox,
            backend,
        }),
    }
}

impl Remote {
    /// `raw` as the backend reads it: relative paths from the session's directory there.
    fn path(&self, raw: &str) -> String {
        if raw.starts_with('/') || raw.starts_with('~') {
            return raw.to_owned();
        }
        let base = self
            .ctx
            .processes
            .session_cwd(&self.ctx.session_id)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| self.backend.default_cwd());
        format!("{}/{raw}", base.trim_end_matches('/'))
    }

    async fn failed(&self, error: BackendError) -> String {
        if error.is_gone() {
            self.sandbox.discard(&self.backend).await;
        }
        tool_error(error.to_string())
    }

    async fn read_bytes(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        match self.backend.read_file(path).await {
            Ok(Some(bytes)) if bytes.len() > MAX_REMOTE_BYTES => Err(tool_error(format!(
                "'{path}' is larger than {} MiB; read parts of it with terminal tools (head, sed -n).",
                MAX_REMOTE_BYTES / (1024 * 1024)
            ))),
            Ok(found) => Ok(found),
            Err(e) => Err(self.failed(e).await),
        }
    }

    /// `read_file` in the backend.
    pub(super) async fn read(&self, args: &Value) -> String {
        let raw = arg_str(args, "path").unwrap_or_default();
        if raw.is_empty() {
            return tool_error("read_file: missing required field 'path'.");
        }
        let offset = int_arg(args, "offset", 1).max(1) as usize;
        let max_lines = self.ctx.limits.max_read_lines as i64;
        let limit = int_arg(args, "limit", DEFAULT_LIMIT).clamp(1, max_lines.max(1)) as usize;
        if has_binary_extension(raw) {
            return tool_error(format!(
                "'{raw}' is a binary file; read_file only shows text. Inspect it with terminal tools."
            ));
        }
        let path = self.path(raw);
        match self.read_bytes(&path).await {
            Ok(Some(bytes)) => {
                let size = bytes.len() as u64;
                render(&self.ctx, bytes.as_slice(), size, offset, limit)
            }
            Ok(None) => tool_error(format!("File not found: {raw}")),
            Err(result) => result,
        }
    }

    /// `write_file` in the backend.
    pub(super) async fn write(&self, raw: &str, content: &str) -> String {
        if is_internal_file_tool_content(content) {
            return tool_error(
                "Not written: this is read_file output with its 'N|' line-number prefixes. Write the file's real text without them.",
            );
        }
        let path = self.path(raw);
        if let Some(reason) = extension(&path).and_then(|ext| syntax_error(&ext, content)) {
            return tool_error(format!(
                "Not written: the content for '{raw}' does not parse ({reason}); the file is untouched. Correct it and write again."
            ));
        }
        match self.backend.write_file(&path, content.as_bytes()).await {
            Ok(()) => json!({
                "bytes_written": content.len(),
                "resolved_path": path,
                "files_modified": [path],
            })
            .to_string(),
            Err(e) => self.failed(e).await,
        }
    }

    /// Replace-mode `patch` in the backend.
    pub(super) async fn replace(&self, raw: &str, old: &str, new: &str, all: bool) -> String {
        let path = self.path(raw);
        let before = match self.read_bytes(&path).await {
            Ok(Some(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => return tool_error(format!("'{raw}' is not UTF-8 text; not edited.")),
            },
            Ok(None) => return tool_error(format!("File not found: {raw}")),
            Err(result) => return result,
        };
        let after = match replace_exact(&before, old, new, all) {
            Ok(after) => after,
            Err(e) => return json!({"success": false, "error": e.to_string()}).to_string(),
        };
        if let Some(reason) = extension(&path).and_then(|ext| syntax_error(&ext, &after)) {
            return json!({"success": false, "error": format!(
                "Not written: the edited '{raw}' would not parse ({reason}); the file is untouched."
            )})
            .to_string();
        }
        if let Err(e) = self.backend.write_file(&path, after.as_bytes()).await {
            return self.failed(e).await;
        }
        json!({
            "success": true,
            "diff": unified_diff(&before, &after, &format!("a/{path}"), &format!("b/{path}")),
            "files_modified": [path],
        })
        .to_string()
    }

    /// `search_files` in the backend, through `grep` and `find`.
    pub(super) async fn search(&self, args: &Value) -> String {
        let pattern = arg_str(args, "pattern").unwrap_or_default();
        let root = self.path(
            arg_str(args, "path")
                .filter(|p| !p.is_empty())
                .unwrap_or("."),
        );
        let (limit, offset) = super::page(args);
        let files = matches!(arg_str(args, "target"), Some("files" | "find"));
        let output_mode = arg_str(args, "output_mode");
        // grep -c lists every file, most with a count of 0; only those with matches count.
        let counting = !files && output_mode == Some("count");
        let quote = crate::process::shell_quote;
        let script = if files {
            format!(
                "find {} -name {} -not -path '*/.*' 2>/dev/null | sort",
                quote(&root),
                quote(pattern)
            )
        } else {
            let mode = match output_mode {
                Some("files_only") => "-l",
                Some("count") => "-c",
                _ => "-n",
            };
            let include = arg_str(args, "file_glob")
                .filter(|g| !g.is_empty())
                .map(|g| format!("--include={} ", quote(g)))
                .unwrap_or_default();
            format!(
                "grep -rIE {mode} {include}-e {} -- {} 2>/dev/null",
                quote(pattern),
                quote(&root)
            )
        };
        let exec = Exec {
            script,
            cwd: self.backend.default_cwd(),
            env: Default::default(),
            timeout: Duration::from_secs(60),
            max_chars: self.ctx.limits.max_output_chars,
        };
        let run = match self.backend.run(&exec, &self.ctx.cancel).await {
            Ok(run) => run,
            Err(e) => return self.failed(e).await,
        };
        let lines: Vec<&str> = run
            .output
            .lines()
            .filter(|l| !l.is_empty())
            .filter(|l| !(counting && l.ends_with(":0")))
            .collect();
        let total = lines.len();
        let page: Vec<&str> = lines.iter().skip(offset).take(limit).copied().collect();
        let mut result = json!({
            "total_count": total,
            (if files { "files" } else { "matches" }): page,
        });
        if offset + limit < total {
            result["truncated"] = json!(true);
            result["hint"] = json!(format!(
                "More results exist: offset={} shows the next page.",
                offset + limit
            ));
        }
        result.to_string()
    }
}
