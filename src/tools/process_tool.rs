//! The `process` tool (Python `_handle_process`): list, poll, log, wait, kill, write, submit
//! and close for background processes. A session only sees the processes it started.

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};
use super::tool_error;

pub fn schema() -> Value {
    json!({
        "name": "process",
        "description": "Manage background processes started with terminal(background=true). Actions: 'list' (show all), 'poll' (check status + new output), 'log' (full output with pagination), 'wait' (block until done or timeout), 'kill' (terminate), 'write' (send raw stdin data without newline), 'submit' (send data + Enter, for answering prompts), 'close' (close stdin/send EOF).",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["list", "poll", "log", "wait", "kill", "write", "submit", "close"],
                    "description": "Action to perform on background processes"
                },
                "session_id": {
                    "type": "string",
                    "description": "Process session ID (from terminal background output). Required for all actions except 'list'."
                },
                "data": {
                    "type": "string",
                    "description": "Text to send to process stdin (for 'write' and 'submit' actions)"
                },
                "timeout": {
                    "type": "integer",
                    "description": "Max seconds to block for 'wait' action. Returns partial output on timeout.",
                    "minimum": 1
                },
                "offset": {
                    "type": "integer",
                    "description": "Line offset for 'log' action (default: last 200 lines)"
                },
                "limit": {
                    "type": "integer",
                    "description": "Max lines to return for 'log' action",
                    "minimum": 1
                }
            },
            "required": ["action"]
        }
    })
}

fn text_of(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Runs the tool.
pub async fn process(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let action = args
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = text_of(args.get("session_id"));
    let registry = &ctx.processes;
    if action == "list" {
        return Ok(json!({"processes": registry.list(Some(&ctx.session_id))}).to_string());
    }
    if !matches!(
        action,
        "poll" | "log" | "wait" | "kill" | "write" | "submit" | "close"
    ) {
        return Ok(tool_error(format!(
            "Unknown process action: {action}. Use: list, poll, log, wait, kill, write, submit, close"
        )));
    }
    if id.is_empty() {
        return Ok(tool_error(format!("session_id is required for {action}")));
    }
    // Another session's process is as good as absent.
    let owned = registry
        .get(&id)
        .is_some_and(|s| s.session_key == ctx.session_id);
    if !owned {
        return Ok(
            json!({"status": "not_found", "error": format!("No process with ID {id}")}).to_string(),
        );
    }
    let result = match action {
        "poll" => registry.poll(&id),
        "log" => {
            let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
            let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(200) as usize;
            registry.read_log(&id, offset, limit)
        }
        "wait" => {
            let timeout = args.get("timeout").and_then(Value::as_u64);
            let max = ctx.limits.terminal_timeout.as_secs();
            registry.wait(&id, timeout, max, &ctx.cancel).await
        }
        "kill" => registry.kill(&id, "process.kill").await,
        "write" => registry.write_stdin(&id, &text_of(args.get("data"))).await,
        "submit" => {
            let data = format!("{}\n", text_of(args.get("data")));
            registry.write_stdin(&id, &data).await
        }
        _ => registry.close_stdin(&id).await,
    };
    Ok(result.to_string())
}

pub fn entry() -> ToolEntry {
    ToolEntry::new("process", "terminal", schema(), handler(process)).with_emoji("⚙️")
}
