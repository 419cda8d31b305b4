//! Writes to protected places go through the terminal's approval gate.
//!
//! `write_file` and `patch` into a place [`crate::tools::sensitive`] lists for writing (SSH,
//! shell start-up files, autostart and cron spools, the Hermes home's `.env`, config, auth,
//! pairing store, scripts, state database …) first ask the user through the same
//! [`ApprovalGate`] a terminal command does. The gate judges commands, so this adapter hands
//! it the command that would make the same write (`tee PATH`); the gate shows that to the
//! user with its approve/deny choices, and its session and permanent approvals apply as they
//! do to the command. Where nobody can be asked (cron, API turns, no prompt) the write is
//! refused with a clear error: a protected write never happens unapproved.

use std::path::{Path, PathBuf};

use crate::config::ApprovalMode;
use crate::tools::approval::{ApprovalOutcome, detect_dangerous_command_in};
use crate::tools::context::ToolCtx;
use crate::tools::paths::{resolve, write_guard, write_refusal};
use crate::tools::sensitive::Guarded;

/// The key a user's "approve for this session" is kept under for one kind of place.
fn session_key(guarded: Guarded) -> String {
    format!("file write to {}", guarded.key)
}

/// The shell command that writes `path`, as the user is shown it: `~` for the home.
fn equivalent_command(ctx: &ToolCtx, path: &Path) -> String {
    let text = path.display().to_string();
    let home = ctx.env.get("HOME").filter(|h| !h.is_empty());
    let shown = match home.and_then(|h| text.strip_prefix(h.trim_end_matches('/'))) {
        Some(rest) if rest.starts_with('/') => format!("~{rest}"),
        _ => text,
    };
    let safe = shown
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "~/._-+@%,:".contains(c));
    if safe {
        format!("tee {shown}")
    } else {
        format!("tee {}", crate::process::shell_quote(&shown))
    }
}

/// Why no approval covers a protected write; completes the refusal's "and …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoApproval {
    #[error("it was refused ({0})")]
    Denied(String),
    #[error("none could be given ({0})")]
    Blocked(String),
    #[error("this conversation had no way to ask for it")]
    NoWayToAsk,
}

/// A protected write the user did not approve; the text is the error the model reads.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", write_refusal(self.place, &self.shown, &self.why.to_string()))]
pub(super) struct WriteRefused {
    /// The path as the model named it.
    shown: String,
    place: Guarded,
    #[source]
    why: NoApproval,
}

/// Asks for every protected path among `raws` (as the model named them); returns the
/// resolved paths the user approved, or the refusal for the first one that was not. Paths
/// that do not resolve are left to the tool, which reports them.
pub(super) async fn approve_writes(
    ctx: &ToolCtx,
    raws: &[String],
) -> Result<Vec<PathBuf>, WriteRefused> {
    let mut approved = Vec::new();
    for raw in raws {
        let Ok(resolved) = resolve(ctx, raw) else {
            continue;
        };
        let Some(guarded) = write_guard(ctx, &resolved, raw) else {
            continue;
        };
        ask(ctx, guarded, &resolved, raw).await?;
        approved.push(resolved);
    }
    Ok(approved)
}

async fn ask(
    ctx: &ToolCtx,
    guarded: Guarded,
    resolved: &Path,
    shown: &str,
) -> Result<(), WriteRefused> {
    let gate = &ctx.approvals;
    let session = ctx.session_id.as_str();
    if gate.mode() == ApprovalMode::Off {
        tracing::info!(
            session_id = session,
            place = guarded.key,
            "protected write allowed: approvals are off"
        );
        return Ok(());
    }
    let key = session_key(guarded);
    if gate.is_approved(session, &key) {
        return Ok(());
    }
    let command = equivalent_command(ctx, resolved);
    let outcome = gate.check_cancellable(session, &command, &ctx.cancel).await;
    let why = match outcome {
        ApprovalOutcome::Approved { .. } => {
            tracing::info!(
                session_id = session,
                place = guarded.key,
                "protected write approved"
            );
            return Ok(());
        }
        ApprovalOutcome::Denied(reason) => NoApproval::Denied(reason),
        ApprovalOutcome::Blocked(reason) => NoApproval::Blocked(reason),
        // The judge always flags a write into a protected place, so the gate lets one
        // through unasked only when it was approved before (this session, or for good in
        // `command_allowlist`). If the judge ever stops flagging it, refuse.
        ApprovalOutcome::Allowed
            if detect_dangerous_command_in(&command, &gate.settings().detection).is_some() =>
        {
            tracing::info!(
                session_id = session,
                place = guarded.key,
                "protected write allowed: approved earlier"
            );
            return Ok(());
        }
        ApprovalOutcome::Allowed => NoApproval::NoWayToAsk,
    };
    tracing::warn!(
        session_id = session,
        place = guarded.key,
        "protected write refused"
    );
    Err(WriteRefused {
        shown: shown.to_owned(),
        place: guarded,
        why,
    })
}

/// The refusal for writing `resolved` when it is protected and not among `approved`: the
/// last check, on the blocking side, right before the write.
pub(super) fn unapproved(
    ctx: &ToolCtx,
    resolved: &Path,
    shown: &str,
    approved: &[PathBuf],
) -> Option<String> {
    let guarded = write_guard(ctx, resolved, shown)?;
    (!approved.iter().any(|p| p == resolved))
        .then(|| write_refusal(guarded, shown, "none was given for this write"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_equivalent_command_names_the_home_with_a_tilde_and_quotes_odd_paths() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolCtx::for_tests(dir.path());
        let home = PathBuf::from(ctx.env["HOME"].clone());
        assert_eq!(
            equivalent_command(&ctx, &home.join(".ssh/authorized_keys")),
            "tee ~/.ssh/authorized_keys"
        );
        assert_eq!(
            equivalent_command(&ctx, Path::new("/srv/it's here")),
            r"tee '/srv/it'\''s here'"
        );
    }
}
