//! The terminal tool's JSON results, the same on every backend: a finished command's output
//! (capped, ANSI-stripped, with what a non-zero exit code means), a background start, and a
//! refusal.

use serde_json::json;

use super::ansi::strip_ansi;
use super::approval::parse::{basename, outline};
use super::context::ToolCtx;
use super::output::truncate_head_tail;

/// A note for non-zero exit codes that are not errors (`grep` 1 = no matches), by the last
/// command the shell runs.
pub fn interpret_exit_code(command: &str, exit_code: i32) -> Option<&'static str> {
    if exit_code == 0 {
        return None;
    }
    let script = outline(command).ok()?;
    let last = script.last_top_level()?;
    let word = last.words.first()?.value.as_deref()?;
    let base = basename(word);
    let no_matches = "No matches found (not an error)";
    let differ = "Files differ (expected, not an error)";
    match (base, exit_code) {
        ("grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack", 1) => Some(no_matches),
        ("diff" | "colordiff", 1) => Some(differ),
        ("find", 1) => {
            Some("Some directories could not be read; the results shown are still usable")
        }
        ("test" | "[", 1) => Some("The test was false (an answer, not an error)"),
        ("curl", 6) => Some("Could not resolve host"),
        ("curl", 7) => Some("Failed to connect to host"),
        ("curl", 22) => Some("The server answered with an HTTP error status (4xx/5xx)"),
        ("curl", 28) => Some("Operation timed out"),
        ("git", 1) => Some("Exit 1 is routine for some git commands (git diff: the files differ)"),
        _ => None,
    }
}

pub(super) fn blocked(message: &str, status: &str) -> String {
    json!({"output": "", "exit_code": -1, "error": message, "status": status}).to_string()
}

/// The tool's JSON result for a finished foreground command.
pub(super) fn render(
    ctx: &ToolCtx,
    command: &str,
    output: &str,
    exit_code: i32,
    interrupted: bool,
    approval_note: Option<String>,
) -> String {
    let output = truncate_head_tail(output, ctx.limits.max_output_chars);
    let output = strip_ansi(&output).trim().to_owned();
    let mut result = json!({"output": output, "exit_code": exit_code, "error": null});
    if let Some(note) = approval_note {
        if interrupted {
            result["approval"] =
                json!(format!("{}, then interrupted.", note.trim_end_matches('.')));
        } else {
            result["approval"] = json!(note);
        }
    }
    if let Some(meaning) = interpret_exit_code(command, exit_code) {
        result["exit_code_meaning"] = json!(meaning);
    }
    result.to_string()
}

/// The result of a background start.
pub(super) fn started(
    session: &super::process_registry::ProcessSession,
    approval_note: Option<String>,
) -> String {
    let mut result = json!({
        "output": "Background process started",
        "session_id": session.id,
        "pid": session.pid,
        "exit_code": 0,
        "error": null,
        "hint": "No notice comes when it exits: the process tool's 'poll' or 'wait' gives its result.",
    });
    if let Some(note) = approval_note {
        result["approval"] = json!(note);
    }
    result.to_string()
}
