//! The `terminal` tool on the local backend (Python `tools/terminal_tool.py`): every command
//! passes the approval gate, runs under `bash -c` in the session's working directory (which
//! persists between calls), and returns `{"output", "exit_code", "error"}` with output capped,
//! ANSI-stripped and trimmed. `background: true` hands the command to the process registry.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};

use super::approval::ApprovalOutcome;
use super::approval::parse::outline;
use super::context::ToolCtx;
use super::env::command_env;
use super::error::ToolError;
use super::local::{ShellCommand, find_bash, run_foreground};
use super::registry::{ToolEntry, check_fn, handler};
pub use super::terminal_result::interpret_exit_code;
use super::terminal_result::{blocked, render, started};
use super::terminal_script::{cwd_marker, extract_cwd, wrap_command};

const DESCRIPTION: &str = "Runs a bash command on this Linux host. The working directory and files persist from call to call.\n\nPrefer the dedicated tools: read_file to read, search_files to search or list, patch to edit, write_file to create files. Use terminal for builds, installs, git, scripts, networking and process control.\n\nForeground (default): the call returns as soon as the command ends, so a high timeout costs nothing when the command is quick. Background (background=true): returns a session_id at once; for servers, watchers and long jobs. The process tool then reports on it ('poll', 'wait'). Do not background with nohup, setsid, disown or a trailing '&' in a foreground call. After starting a server, confirm it is ready (health check or log line) before testing it in a separate call, rather than sleeping.\n\nNothing interactive: vim, nano and pagers hang without a TTY (pipe git output through cat).\n";

pub fn schema(limits: &super::context::ToolLimits) -> Value {
    let max = limits.foreground_max_timeout.as_secs();
    let default = limits.terminal_timeout.as_secs();
    json!({
        "name": "terminal",
        "description": DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Bash command line to run"},
                "background": {
                    "type": "boolean",
                    "description": "Start the command detached and return its session_id at once (servers, watchers, long jobs); follow it with the process tool.",
                    "default": false
                },
                "timeout": {
                    "type": "integer",
                    "description": format!("Seconds before a foreground command is killed (default {default}, at most {max}; longer work belongs in background=true). The call ends when the command does, not at the timeout."),
                    "minimum": 1
                },
                "workdir": {
                    "type": "string",
                    "description": "Absolute directory to run this one command in; the session's directory when omitted."
                }
            },
            "required": ["command"]
        }
    })
}

static WORKDIR_SAFE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9/\\:_\-.~ +@=,]+$").expect("regex"));

/// Refuses a workdir with shell metacharacters (Python `_validate_workdir`).
fn validate_workdir(workdir: &str) -> Option<String> {
    if workdir.is_empty() || WORKDIR_SAFE.is_match(workdir) {
        return None;
    }
    let bad = workdir
        .chars()
        .find(|c| !WORKDIR_SAFE.is_match(&c.to_string()))?;
    let shown = if bad == '\'' {
        "\"'\"".to_owned()
    } else {
        format!("'{bad}'")
    };
    Some(format!(
        "Blocked: workdir may not contain {shown}. Give a plain path with no shell metacharacters."
    ))
}

static LONG_LIVED: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:dev|start|serve|watch)\b",
        r"(?i)\bdocker\s+compose\s+up\b",
        r"(?i)\bnext\s+dev\b",
        r"(?i)\bvite(?:\s|$)",
        r"(?i)\bnodemon\b",
        r"(?i)\buvicorn\b",
        r"(?i)\bgunicorn\b",
        r"(?i)\bpython(?:3)?\s+-m\s+http\.server\b",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("regex"))
    .collect()
});

fn looks_like_help_or_version(command: &str) -> bool {
    let normalized = command
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    normalized.contains(" --help")
        || normalized.ends_with(" -h")
        || normalized.contains(" --version")
        || normalized.ends_with(" -v")
}

/// Foreground commands that would never return get sent to background mode instead
/// (Python `_foreground_background_guidance`), judged on the parsed command: quoted text is
/// never mistaken for `nohup` or `&`.
fn foreground_background_guidance(command: &str) -> Option<&'static str> {
    if looks_like_help_or_version(command) {
        return None;
    }
    let script = outline(command).ok()?;
    if script
        .command_names()
        .any(|name| matches!(name, "nohup" | "disown" | "setsid"))
    {
        return Some(
            "Not run: nohup, disown or setsid in a foreground call leaves a process nobody tracks. Start it with terminal(background=true), then check readiness and test in later calls.",
        );
    }
    if script.background {
        return Some(
            "Not run: '&' in a foreground call leaves a process nobody tracks. Start it with terminal(background=true), then check readiness and test in later calls.",
        );
    }
    let long_lived = script
        .invocations
        .iter()
        .filter(|inv| inv.depth == 0)
        .any(|inv| {
            let words: Vec<&str> = inv.words.iter().map(|w| w.shown()).collect();
            let text = words.join(" ");
            LONG_LIVED.iter().any(|re| re.is_match(&text))
        });
    if long_lived {
        return Some(
            "Not run: this looks like a server or watcher, which never ends in the foreground. Start it with background=true, confirm it is up (health endpoint or log line), then test in a later call.",
        );
    }
    None
}

/// `cwd` if it is a usable directory, else its nearest existing ancestor, else `/tmp`.
fn safe_cwd(cwd: &Path) -> PathBuf {
    let mut candidate = Some(cwd);
    while let Some(dir) = candidate {
        if dir.is_dir() {
            return dir.to_path_buf();
        }
        candidate = dir.parent();
    }
    PathBuf::from("/tmp")
}

/// Runs the tool.
pub async fn terminal(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let command = match args.get("command") {
        Some(Value::String(c)) => c.clone(),
        other => {
            let kind = match other {
                None | Some(Value::Null) => "NoneType",
                Some(Value::Bool(_)) => "bool",
                Some(Value::Number(_)) => "int",
                Some(Value::Array(_)) => "list",
                Some(Value::Object(_)) => "dict",
                Some(Value::String(_)) => "str",
            };
            return Ok(blocked(
                &format!("Invalid command: expected string, got {kind}"),
                "error",
            ));
        }
    };
    let background = args
        .get("background")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let requested = args
        .get("timeout")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0);
    let max = ctx.limits.foreground_max_timeout.as_secs();
    if !background && let Some(t) = requested.filter(|t| *t > max) {
        return Ok(json!({"error": format!(
            "A foreground timeout of {t}s is over the {max}s limit; run long commands with background=true."
        )})
        .to_string());
    }
    if !background && let Some(guidance) = foreground_background_guidance(&command) {
        return Ok(blocked(guidance, "error"));
    }
    let start_dir = match args.get("workdir").and_then(Value::as_str) {
        Some(w) if !w.is_empty() => ctx.shell_cwd().join(w),
        _ => ctx.shell_cwd(),
    };
    let outcome = ctx
        .approvals
        .check_in_dir(&ctx.session_id, &command, Some(&start_dir), &ctx.cancel)
        .await;
    let approval_note = match outcome {
        ApprovalOutcome::Allowed => None,
        ApprovalOutcome::Approved { description } => {
            Some(format!("The user approved this command ({description})."))
        }
        ApprovalOutcome::Denied(message) | ApprovalOutcome::Blocked(message) => {
            return Ok(blocked(&message, "blocked"));
        }
    };
    let workdir = args
        .get("workdir")
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty());
    if let Some(error) = workdir.and_then(validate_workdir) {
        tracing::warn!(session_id = %ctx.session_id, "blocked dangerous workdir");
        return Ok(blocked(&error, "blocked"));
    }
    let timeout = Duration::from_secs(requested.unwrap_or(ctx.limits.terminal_timeout.as_secs()));
    if let Some(sandbox) = ctx.sandbox.clone() {
        let request = super::terminal_sandboxed::Request {
            command: &command,
            background,
            workdir,
            timeout,
            approval_note,
        };
        return Ok(super::terminal_sandboxed::run(&ctx, &sandbox, request).await);
    }
    let shell_cwd = safe_cwd(&ctx.shell_cwd());
    let env = command_env(&ctx.env, &ctx.home);

    if background {
        let cwd = match workdir {
            Some(w) => safe_cwd(&shell_cwd.join(w)),
            None => shell_cwd,
        };
        return Ok(
            match ctx.processes.spawn(
                &command,
                &cwd,
                &ctx.session_id,
                env,
                ctx.caller.process_origin(),
            ) {
                Ok(session) => started(&session, approval_note),
                Err(e) => json!({"output": "", "exit_code": -1,
                "error": format!("Failed to start background process: {e}")})
                .to_string(),
            },
        );
    }

    let marker = cwd_marker();
    let target = workdir.map_or_else(|| shell_cwd.display().to_string(), str::to_owned);
    let script = wrap_command(&command, &target, &marker);
    let shell = ShellCommand {
        script,
        cwd: shell_cwd,
        env,
        stdin: false,
    };
    let run = match run_foreground(&shell, timeout, &ctx.cancel, ctx.limits.max_output_chars).await
    {
        Ok(run) => run,
        Err(e) => {
            return Ok(json!({"output": "", "exit_code": -1,
                "error": format!("Command execution failed: {e}")})
            .to_string());
        }
    };
    let mut output = run.output;
    if let Some(cwd) = extract_cwd(&mut output, &marker).filter(|c| c.is_dir())
        && ctx.limits.keep_cwd
    {
        ctx.processes.set_session_cwd(&ctx.session_id, &cwd);
    }
    Ok(render(
        &ctx,
        &command,
        &output,
        run.exit_code,
        run.interrupted,
        approval_note,
    ))
}

pub fn entry(limits: &super::context::ToolLimits) -> ToolEntry {
    ToolEntry::new("terminal", "terminal", schema(limits), handler(terminal))
        .with_check(check_fn(|ctx: &ToolCtx| find_bash(&ctx.env).is_file()))
        .with_emoji("💻")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_interpreted_by_the_last_command() {
        assert_eq!(
            interpret_exit_code("cat x | grep foo", 1),
            Some("No matches found (not an error)")
        );
        assert_eq!(
            interpret_exit_code("FOO=1 /usr/bin/diff a b", 1),
            Some("Files differ (expected, not an error)")
        );
        assert_eq!(interpret_exit_code("grep foo x", 2), None);
        assert_eq!(
            interpret_exit_code("curl -f x", 22),
            Some("The server answered with an HTTP error status (4xx/5xx)")
        );
        assert_eq!(interpret_exit_code("false", 1), None);
        assert_eq!(interpret_exit_code("grep x", 0), None);
    }

    #[test]
    fn long_lived_foreground_commands_are_redirected() {
        assert!(foreground_background_guidance("nohup server &").is_some());
        assert!(foreground_background_guidance("sleep 10 & echo hi").is_some());
        assert!(foreground_background_guidance("npm run dev").is_some());
        assert!(foreground_background_guidance("git commit -m 'use setsid & nohup'").is_none());
        assert!(foreground_background_guidance("uvicorn --help").is_none());
        assert!(foreground_background_guidance("ls -la").is_none());
        // The parser sees a glued `&`, and knows quoted ones are text.
        assert!(foreground_background_guidance("sleep 300 &echo hi").is_some());
        assert!(foreground_background_guidance("echo 'a & b' \"nohup\"").is_none());
        assert!(foreground_background_guidance("x=$(nohup true)").is_some());
        // A server name inside a substitution is an argument, not a server being started.
        assert!(foreground_background_guidance("kill -9 $(pgrep -f vite)").is_none());
    }

    #[test]
    fn workdirs_with_metacharacters_are_refused() {
        assert_eq!(validate_workdir("/srv/app-1"), None);
        let err = validate_workdir("/tmp; rm -rf /").unwrap();
        assert!(
            err.starts_with("Blocked: workdir may not contain ';'"),
            "{err}"
        );
    }

    #[test]
    fn the_cwd_marker_is_extracted_and_removed() {
        let marker = "__HERMES_CWD_abc__";
        let mut out = format!("hello\n\n{marker}/tmp/x{marker}\n");
        assert_eq!(extract_cwd(&mut out, marker), Some(PathBuf::from("/tmp/x")));
        assert_eq!(out, "hello\n");
        let mut none = "plain".to_owned();
        assert_eq!(extract_cwd(&mut none, marker), None);
        assert_eq!(
            wrap_command("echo 'a'", "~/w d", marker).lines().next(),
            Some("command cd -- $HOME/'w d' || exit 126")
        );
    }
}
