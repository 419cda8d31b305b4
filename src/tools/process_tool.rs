//! The `process` tool, the model's handle on jobs it put in the background with the terminal
//! tool: it can enumerate them, read or await their output, feed them input, stop them and
//! forget them. Each session is shown its own jobs and no one else's.

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};
use super::tool_error;

pub fn schema() -> Value {
    json!({
        "name": "process",
        "description": "Controls the processes this session started with terminal(background=true). 'list': all of them; 'poll': state and output since the last look; 'log': the whole output, paged by offset/limit; 'wait': block until it exits or timeout passes; 'kill': stop it; 'write': send data to stdin as is; 'submit': send data and a newline, e.g. to answer a prompt; 'close': end its stdin (EOF).",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["list", "poll", "log", "wait", "kill", "write", "submit", "close"],
                    "description": "What to do"
                },
                "session_id": {
                    "type": "string",
                    "description": "The session_id terminal returned when starting it; every action but 'list' needs it."
                },
                "data": {
                    "type": "string",
                    "description": "What 'write' or 'submit' sends to stdin"
                },
                "timeout": {
                    "type": "integer",
                    "description": "'wait' only: longest wait in seconds; the output so far comes back if it runs out.",
                    "minimum": 1
                },
                "offset": {
                    "type": "integer",
                    "description": "'log' only: first line to return (default: the last 200 lines)"
                },
                "limit": {
                    "type": "integer",
                    "description": "'log' only: most lines to return",
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
            "'{action}' is not something the process tool does; pick one of list, poll, log, wait, kill, write, submit, close"
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
