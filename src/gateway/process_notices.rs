//! Telling a chat that a background process its agent started has ended
//! (`display.background_process_notifications`). The process registry broadcasts each end
//! (`tools/process_registry/exits.rs`); this task turns one into a notice recorded in the
//! delivery ledger for the chat the process came from (as `admin_send.rs` records an
//! out-of-turn message) and hands it to the chat's lane, so it is sent once like any reply.
//! The mode is read at each exit, so a reload applies to the next one.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::config::ProcessNotices;
use crate::gateway::router::Router;
use crate::state::NewObligation;
use crate::tools::process_registry::ProcessExit;

/// The session key notices are recorded under (they belong to no conversation).
pub const SESSION_PREFIX: &str = "proc:";

/// Characters of the command a concise notice shows.
const COMMAND_CHARS: usize = 80;

/// The notice for `exit` in `mode`; `None` when the mode does not tell this exit.
pub fn notice_text(mode: ProcessNotices, exit: &ProcessExit) -> Option<String> {
    if !mode.tells(exit.exit_code) {
        return None;
    }
    let code = match exit.exit_code {
        Some(code) => format!("exit code {code}"),
        None => "no exit code (killed or lost)".to_owned(),
    };
    if mode == ProcessNotices::Concise {
        let mut command: String = exit.command.chars().take(COMMAND_CHARS).collect();
        if exit.command.chars().count() > COMMAND_CHARS {
            command.push('…');
        }
        let command = command.replace(['\n', '`'], " ");
        return Some(format!(
            "⚙️ Background process `{}` (`{command}`) ended: {code}, after {}s.",
            exit.id, exit.runtime_secs
        ));
    }
    // A command's output may print credentials; they are masked like the logs'.
    let tail = crate::logging::mask_secrets(exit.output_tail.trim_end());
    let output = if tail.is_empty() {
        "It printed nothing.".to_owned()
    } else {
        format!(
            "Its last output:\n```\n{}\n```",
            tail.replace("```", "`\u{200b}``")
        )
    };
    Some(format!(
        "⚙️ Background process `{}` ended with {code} after {}s.\n{output}",
        exit.id, exit.runtime_secs
    ))
}

/// Posts a notice for every exit `exits` reports until `stop`.
pub async fn run(
    router: Arc<Router>,
    mut exits: tokio::sync::broadcast::Receiver<ProcessExit>,
    stop: CancellationToken,
) {
    loop {
        let exit = tokio::select! {
            _ = stop.cancelled() => return,
            exit = exits.recv() => exit,
        };
        match exit {
            Ok(exit) => notify(&router, &exit).await,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "background process ends came faster than they could be told; some were not"
                );
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn notify(router: &Router, exit: &ProcessExit) {
    let mode = router
        .live()
        .config
        .display
        .background_process_notifications;
    let Some(text) = notice_text(mode, exit) else {
        tracing::info!(process = %exit.id, code = ?exit.exit_code, mode = mode.as_str(), "background process ended; its chat is not told in this mode");
        return;
    };
    let origin = &exit.origin;
    if !router.platform_names().contains(&origin.platform) {
        return;
    }
    let obligation = NewObligation {
        session_key: format!("{SESSION_PREFIX}{}:{}", origin.platform, origin.chat_id),
        message_ref: exit.id.clone(),
        platform: origin.platform.clone(),
        chat_id: origin.chat_id.clone(),
        thread_id: origin.thread_id.clone(),
        content: text,
    };
    match router.store().create_obligation_if_new(obligation).await {
        Ok((id, true)) => {
            tracing::info!(process = %exit.id, code = ?exit.exit_code, obligation_id = %id, "background process end recorded for its chat");
            router.send_recorded(&origin.platform, &origin.chat_id, vec![id]);
        }
        Ok((_, false)) => {}
        Err(e) => {
            tracing::warn!(process = %exit.id, error = %e, "cannot record a background process notice");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::process_registry::ProcessOrigin;

    fn exit(code: Option<i32>, output: &str) -> ProcessExit {
        ProcessExit {
            id: "proc_0123456789ab".into(),
            command: format!("make {}", "x".repeat(100)),
            exit_code: code,
            output_tail: output.into(),
            origin: ProcessOrigin {
                platform: "telegram".into(),
                chat_id: "42".into(),
                thread_id: None,
            },
            started_at: std::time::SystemTime::UNIX_EPOCH,
            runtime_secs: 7,
        }
    }

    #[test]
    fn notices_per_mode() {
        let failed = exit(Some(3), "boom\n");
        let full = notice_text(ProcessNotices::Error, &failed).unwrap();
        assert!(
            full.contains("`proc_0123456789ab` ended with exit code 3 after 7s"),
            "{full}"
        );
        assert!(full.ends_with("```\nboom\n```"), "{full}");
        assert_eq!(
            notice_text(ProcessNotices::Error, &exit(Some(0), "ok")),
            None
        );
        assert_eq!(notice_text(ProcessNotices::Off, &failed), None);
        let concise = notice_text(ProcessNotices::Concise, &exit(Some(0), "lots")).unwrap();
        assert_eq!(concise.lines().count(), 1, "{concise}");
        assert!(!concise.contains("lots"), "{concise}");
        assert!(concise.contains("exit code 0, after 7s"), "{concise}");
        assert!(concise.contains('…'), "{concise}");
        let quiet = notice_text(ProcessNotices::Result, &exit(None, "")).unwrap();
        assert!(
            quiet.contains("no exit code") && quiet.ends_with("It printed nothing."),
            "{quiet}"
        );
    }

    #[test]
    fn output_cannot_close_the_code_block() {
        let text = notice_text(ProcessNotices::All, &exit(Some(1), "a\n```\nb")).unwrap();
        assert_eq!(text.matches("```").count(), 2, "{text}");
    }
}
