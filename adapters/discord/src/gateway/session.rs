//! The session loop: keeps one gateway session alive across connections. It RESUMEs after
//! a dropped socket, a zombie or RECONNECT, re-IDENTIFYs after a non-resumable
//! INVALID_SESSION or a close code that ends the session, backs off between failed
//! attempts — and between short-lived connections: only a session that started (READY or
//! RESUMED) and then lived for `stable_after` resets the backoff, so a socket closed right
//! after IDENTIFY cannot make it reconnect at once, forever — spends IDENTIFYs within the
//! `session_start_limit` budget, and turns authentication close codes into `Fatal`.

use std::time::Duration;

use hermes_adapter::{AdapterError, Progress};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::budget::SharedBudget;
use super::connection::{self, ConnectParams, ConnectionEnd, Dispatch, ResumeState};
use crate::settings::Settings;

/// Close codes after which reconnecting cannot help.
fn fatal_close(code: u16) -> Option<&'static str> {
    match code {
        4004 => Some("Discord rejected the bot token (gateway close 4004 Authentication failed)"),
        4010 => Some("Discord gateway close 4010: invalid shard"),
        4011 => Some("Discord gateway close 4011: sharding required"),
        4012 => Some("Discord gateway close 4012: invalid API version"),
        4013 => Some("Discord gateway close 4013: invalid intents"),
        4014 => Some(
            "Discord gateway close 4014: disallowed intents (enable the Message Content intent for the bot in the Developer Portal)",
        ),
        _ => None,
    }
}

/// Close codes after which the session cannot be resumed.
fn session_lost(code: u16) -> bool {
    matches!(code, 4007 | 4009)
}

/// Runs the gateway until shutdown (`Ok`) or until reconnecting cannot help / keeps
/// failing (`Err`). Dispatches go to `dispatches` in order.
pub async fn run(
    settings: &Settings,
    gateway_url: &str,
    progress: &Progress,
    shutdown: &CancellationToken,
    dispatches: &mpsc::Sender<Dispatch>,
    budget: Option<SharedBudget>,
    shard: [u32; 2],
) -> Result<(), AdapterError> {
    let mut resume: Option<ResumeState> = None;
    let mut failures = 0u32;
    let mut backoff = settings.reconnect_min;
    loop {
        let url = resume
            .as_ref()
            .and_then(|r| r.resume_url.clone())
            .unwrap_or_else(|| gateway_url.to_owned());
        let resuming = resume.is_some();
        if let (false, Some(budget)) = (resuming, budget.as_ref()) {
            let wait = budget
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .before_identify(tokio::time::Instant::now());
            if !wait.is_zero() {
                tracing::warn!(
                    platform = "discord",
                    wait_ms = wait.as_millis() as u64,
                    "waiting for Discord's identify budget (session_start_limit)"
                );
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
        let outcome = connection::run(
            ConnectParams {
                url: &url,
                net: &settings.net,
                token: &settings.token,
                timeout: settings.http_timeout,
                progress,
                shutdown,
                dispatches,
                shard,
            },
            &mut resume,
        )
        .await;
        tracing::info!(platform = "discord", end = ?outcome.end, resuming, "gateway connection ended");
        let mut delay = Duration::ZERO;
        match outcome.end {
            ConnectionEnd::Shutdown | ConnectionEnd::ConsumerGone => return Ok(()),
            ConnectionEnd::Closed { code: Some(code) } if fatal_close(code).is_some() => {
                return Err(AdapterError::Fatal(
                    fatal_close(code).unwrap_or_default().to_owned(),
                ));
            }
            ConnectionEnd::Closed { code: Some(code) } if session_lost(code) => resume = None,
            ConnectionEnd::InvalidSession { resumable } => {
                if !resumable {
                    resume = None;
                }
                delay = settings.invalid_session_delay;
            }
            ConnectionEnd::Zombie | ConnectionEnd::Reconnect => {}
            ConnectionEnd::Closed { .. } | ConnectionEnd::Io(_) => {}
        }
        if outcome.ready && outcome.lasted >= settings.stable_after {
            failures = 0;
            backoff = settings.reconnect_min;
        } else {
            failures += 1;
            if failures >= settings.max_connect_failures {
                return Err(AdapterError::Retryable(format!(
                    "the Discord gateway could not be reached or kept closing {failures} times in a row"
                )));
            }
            delay = delay.max(backoff);
            backoff = (backoff * 2).min(settings.reconnect_max);
            // A resume URL that keeps failing is abandoned for the main gateway URL.
            if failures >= 2 {
                resume = resume.map(|r| ResumeState {
                    resume_url: None,
                    ..r
                });
            }
        }
        if !delay.is_zero() {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authentication_and_intent_closes_are_fatal_and_others_are_not() {
        assert!(fatal_close(4004).is_some());
        assert!(fatal_close(4014).unwrap().contains("Message Content"));
        for code in [1000, 1006, 4000, 4007, 4008, 4009] {
            assert!(fatal_close(code).is_none(), "{code}");
        }
        assert!(session_lost(4009) && !session_lost(4000));
    }
}
