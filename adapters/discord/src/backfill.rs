//! Missed-message backfill after a new gateway session (a RESUME replays what was missed;
//! a new session does not). It scans every channel the bot answers in — known DM channels,
//! the bot's threads and the active threads of the channels it may speak in, and the guild
//! text channels the rules let it answer in (or `missed_message_backfill.channels` when
//! set) — paging back through history to the newest message seen by an earlier scan of
//! this process (else to the window's start), and hands over, through the live path so the
//! guild rules apply, every message without a later bot answer. Nothing is cut by a count:
//! the work is paced (`max_dispatches` hand-overs per second) and bounded by the window
//! and a time budget; messages older than the window are logged as skipped. The core
//! dedupes on the message id, so nothing is answered twice.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_adapter::AdapterContext;
use tokio::time::Instant;

use crate::inbound;
use crate::inner::Inner;
use crate::model::{Message, channel_kind, snowflake_at, snowflake_key};
use crate::place::Origin;
use crate::rest::Page;

/// A scan stops starting new channels after this long (the rest is logged).
const SCAN_BUDGET: Duration = Duration::from_secs(600);

/// Channels to scan, in a stable order.
fn channels_to_scan(inner: &Inner) -> Vec<String> {
    let settings = &inner.settings;
    let wanted: BTreeSet<String> = settings.backfill.channels.clone();
    // Without an explicit list: every channel the bot may answer in.
    let answerable = |keys: &BTreeSet<String>| {
        let hit =
            |set: &BTreeSet<String>| set.contains("*") || keys.iter().any(|k| set.contains(k));
        (settings.allowed_channels.is_empty() || hit(&settings.allowed_channels))
            && !hit(&settings.ignored_channels)
    };
    let bot_id = inner.bot_id();
    inner.with_directory(|d| {
        let mut scan: BTreeSet<String> = BTreeSet::new();
        let all = wanted.contains("*");
        let mut parents: BTreeSet<String> = BTreeSet::new();
        for info in d.channels.values() {
            let text_like = !info.is_thread()
                && !channel_kind::is_dm(info.kind)
                && info.kind != channel_kind::FORUM;
            let keys = d.channel_keys(info);
            let chosen = if wanted.is_empty() {
                answerable(&keys)
            } else {
                all || keys.iter().any(|k| wanted.contains(k))
            };
            if text_like && chosen {
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

/// Reads `channel_id`'s history newer than `floor`, paging back from the newest message;
/// returns it oldest first, the messages older than `floor` seen on the last page, and
/// whether the read reached `floor` (a page that failed leaves it short).
async fn read_since(
    inner: &Inner,
    channel_id: &str,
    floor: u64,
    page_size: usize,
) -> Option<(Vec<Message>, Vec<Message>, bool)> {
    let mut newer = Vec::new();
    let mut older = Vec::new();
    let mut before = None;
    let mut complete = true;
    loop {
        let page = match before {
            None => {
                inner
                    .rest
                    .list_messages(channel_id, page_size, Page::Latest)
                    .await
            }
            Some(id) => {
                inner
                    .rest
                    .list_messages(channel_id, page_size, Page::Before(id))
                    .await
            }
        };
        let page = match page {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!(platform = "discord", channel_id, %error, "backfill cannot read history; the channel is read again at the next new session");
                if newer.is_empty() {
                    return None;
                }
                complete = false;
                break;
            }
        };
        let full = page.len() >= page_size;
        let oldest = page.iter().map(|m| snowflake_key(&m.id)).min();
        for message in page {
            if snowflake_key(&message.id) > floor {
                newer.push(message);
            } else {
                older.push(message);
            }
        }
        match oldest {
            Some(oldest) if full && oldest > floor => before = Some(oldest),
            _ => break,
        }
    }
    newer.sort_by_key(|m| snowflake_key(&m.id));
    newer.dedup_by(|a, b| a.id == b.id);
    Some((newer, older, complete))
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
    let deadline = Instant::now() + SCAN_BUDGET;
    let bot_id = inner.bot_id();
    let mut dispatched = 0;
    let mut scanned = 0;
    let mut burst = (Instant::now(), 0usize);
    let channels = channels_to_scan(inner);
    for (position, channel_id) in channels.iter().enumerate() {
        if ctx.shutdown.is_cancelled() {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                platform = "discord",
                unscanned = ?&channels[position..],
                "backfill time budget spent; these channels are scanned after the next new session"
            );
            break;
        }
        let seen_to = inner.with_directory(|d| d.scanned_to.get(channel_id).copied());
        let floor = seen_to.unwrap_or(0).max(cutoff);
        let Some((messages, older, complete)) =
            read_since(inner, channel_id, floor, settings.limit).await
        else {
            continue;
        };
        if seen_to.is_none_or(|seen| seen < cutoff) {
            for message in older.iter().filter(|m| {
                snowflake_key(&m.id) < cutoff
                    && m.author.id != bot_id
                    && !inner.already_handed_over(&m.id)
                    && !answered(m, &messages, &bot_id, &[])
            }) {
                tracing::info!(
                    platform = "discord",
                    channel_id,
                    message_id = %message.id,
                    window_seconds = settings.max_age.as_secs(),
                    "missed message older than the backfill window skipped"
                );
            }
        }
        for (index, message) in messages.iter().enumerate() {
            scanned += 1;
            if message.author.id == bot_id || inner.already_handed_over(&message.id) {
                continue;
            }
            let thread_messages = match &message.thread {
                Some(thread) => inner
                    .rest
                    .list_messages(&thread.id, 25, Page::Latest)
                    .await
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            if answered(message, &messages[index + 1..], &bot_id, &thread_messages) {
                continue;
            }
            // Paced, never cut: `max_dispatches` hand-overs per second.
            if burst.1 >= settings.max_dispatches {
                tokio::time::sleep_until(burst.0 + Duration::from_secs(1)).await;
                burst = (Instant::now(), 0);
            } else if burst.0.elapsed() >= Duration::from_secs(1) {
                burst = (Instant::now(), 0);
            }
            if inbound::handle(inner, ctx, message.clone(), Origin::History).await {
                dispatched += 1;
                burst.1 += 1;
            }
        }
        // A read cut short leaves the mark where it was, so the next scan reads it all.
        if let Some(newest) = messages.last().filter(|_| complete) {
            let newest = snowflake_key(&newest.id);
            inner.with_directory(|d| d.scanned_to.insert(channel_id.clone(), newest));
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
