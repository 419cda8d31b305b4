//! Missed-message backfill after a new gateway session (a RESUME replays what was missed;
//! a new session does not). It scans recent history of the configured channels (allowed ∪
//! free-response by default, `*` for all), their active threads, the bot's threads and the
//! DM channels the adapter knows, and hands over — through the live path, so the guild
//! rules apply — messages addressed to the bot that have no later bot reply. Bounded by
//! count, age and dispatches per scan; the core dedupes on the message id, so nothing is
//! answered twice.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_adapter::AdapterContext;

use crate::inbound;
use crate::inner::Inner;
use crate::model::{Message, channel_kind, snowflake_at, snowflake_key};

/// Channels to scan, in a stable order.
fn channels_to_scan(inner: &Inner) -> Vec<String> {
    let settings = &inner.settings.backfill;
    let mut wanted: BTreeSet<String> = settings.channels.clone();
    if wanted.is_empty() {
        wanted.extend(inner.settings.allowed_channels.iter().cloned());
        wanted.extend(inner.settings.free_response_channels.iter().cloned());
    }
    let bot_id = inner.bot_id();
    inner.with_directory(|d| {
        let mut scan: BTreeSet<String> = BTreeSet::new();
        let all = wanted.contains("*");
        let mut parents: BTreeSet<String> = BTreeSet::new();
        for info in d.channels.values() {
            let text_like = !info.is_thread()
                && !channel_kind::is_dm(info.kind)
                && info.kind != channel_kind::FORUM;
            if text_like && (all || d.channel_keys(info).iter().any(|k| wanted.contains(k))) {
                scan.insert(info.id.clone());
                parents.insert(info.id.clone());
            }
        }
        // Ids the directory does not know yet (the channel is fetched by its id).
        for entry in &wanted {
            if !entry.is_empty() && entry.chars().all(|c| c.is_ascii_digit()) {
                scan.insert(entry.clone());
                parents.insert(entry.clone());
            }
        }
        for info in d.channels.values() {
            if info.is_thread()
                && (info.parent_id.as_ref().is_some_and(|p| parents.contains(p))
                    || d.is_bot_thread(info, &bot_id))
            {
                scan.insert(info.id.clone());
            }
        }
        scan.extend(d.known_conversations.iter().cloned());
        scan.extend(d.bot_threads.iter().cloned());
        scan.into_iter().collect()
    })
}

/// Whether a later bot message answers `message`: a reply referencing it, or any bot
/// message in the thread started from it. Outage notices do not count.
fn answered(
    message: &Message,
    later: &[Message],
    bot_id: &str,
    thread_messages: &[Message],
) -> bool {
    let is_bot_answer = |m: &Message| m.author.id == bot_id && !is_down_notice(&m.content);
    later.iter().any(|m| {
        is_bot_answer(m)
            && m.message_reference
                .as_ref()
                .and_then(|r| r.message_id.as_deref())
                == Some(message.id.as_str())
    }) || thread_messages.iter().any(is_bot_answer)
}

/// The reference's outage-notice recogniser ("hermes is down", "the gateway was offline").
fn is_down_notice(content: &str) -> bool {
    let text = content.to_lowercase();
    let subjects = ["hermes", "the agent", "agent", "the gateway", "gateway"];
    let states = [
        "is",
        "was",
        "appears to be",
        "is currently",
        "was currently",
    ];
    let conditions = ["down", "offline", "unavailable", "not running"];
    subjects.iter().any(|s| {
        states.iter().any(|st| {
            conditions
                .iter()
                .any(|c| text.contains(&format!("{s} {st} {c}")))
        })
    })
}

/// Runs one scan; returns how many messages were handed over.
pub async fn run(inner: &Inner, ctx: &AdapterContext) -> usize {
    let settings = &inner.settings.backfill;
    if !settings.enabled {
        return 0;
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let cutoff = snowflake_at(now_ms.saturating_sub(settings.max_age.as_millis() as u64));
    let bot_id = inner.bot_id();
    let mut dispatched = 0;
    let mut scanned = 0;
    for channel_id in channels_to_scan(inner) {
        if ctx.shutdown.is_cancelled() || dispatched >= settings.max_dispatches {
            break;
        }
        let mut messages = match inner
            .rest
            .list_messages(&channel_id, settings.limit, None)
            .await
        {
            Ok(messages) => messages,
            Err(error) => {
                tracing::debug!(platform = "discord", channel_id, %error, "backfill cannot read history");
                continue;
            }
        };
        messages.retain(|m| snowflake_key(&m.id) >= cutoff);
        messages.sort_by_key(|m| snowflake_key(&m.id));
        for (index, message) in messages.iter().enumerate() {
            if dispatched >= settings.max_dispatches {
                break;
            }
            scanned += 1;
            if message.author.id == bot_id || inner.already_handed_over(&message.id) {
                continue;
            }
            let thread_messages = match &message.thread {
                Some(thread) => inner
                    .rest
                    .list_messages(&thread.id, 25, None)
                    .await
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            if answered(message, &messages[index + 1..], &bot_id, &thread_messages) {
                continue;
            }
            if inbound::handle(inner, ctx, message.clone()).await {
                dispatched += 1;
            }
        }
    }
    tracing::info!(
        platform = "discord",
        scanned,
        dispatched,
        "missed-message backfill complete"
    );
    dispatched
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_explicit_outage_notices_are_recognised() {
        assert!(super::is_down_notice("Sorry, Hermes is down right now"));
        assert!(super::is_down_notice("the gateway was offline"));
        assert!(!super::is_down_notice(
            "Here is the answer: the server is down-scaled"
        ));
    }
}
