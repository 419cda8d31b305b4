//! What every fault run must show once its faults are lifted, per inbound message: one reply
//! in its chat naming it, the replies of each chat in the order it sent them, one recorded
//! answer of the model's (and one recorded tool call where the model asked for the tool),
//! the tool's side effect once, and nothing left unanswered or owed.
//!
//! Model calls are counted from the shared history, not from the fake model's requests: a
//! turn taken over after its instance died or lost its lease mid-call runs again from the
//! stored history and asks the model again, by design, when the first call's answer was
//! never recorded. The requests per message are printed alongside.

use std::collections::HashMap;

use sqlx::postgres::PgPool;

use crate::cluster_support::ClusterRig;
use crate::plan::Plan;
use crate::traffic::{final_answer, tag_in};

/// How a reply resent without knowing whether it went out begins (Telegram's MarkdownV2
/// escaping of `state::RECOVERED_MARKER`'s text as the fake records it).
const RECOVERED: &str = "♻";

/// Whether a bot message is an acknowledgement of the busy rules, not an answer.
fn is_ack(text: &str) -> bool {
    ["⏳", "⚡", "⏩"].iter().any(|mark| text.starts_with(mark))
}

/// Every message's answer has reached its chat, no journaled event is open and no reply is
/// owed: the run may be checked (a duplicate can still come later; the caller also waits
/// for every instance to make progress).
pub async fn all_answered(rig: &ClusterRig, pool: &PgPool, plan: &Plan) -> bool {
    let sent = rig.sent_to_anyone();
    let answered = plan.messages().all(|m| {
        sent.iter()
            .any(|s| s.chat_id == m.chat && s.text.contains(&m.tag) && !is_ack(&s.text))
    });
    answered && open_rows(pool).await == (0, 0)
}

/// Journaled events not answered, and replies not delivered.
async fn open_rows(pool: &PgPool) -> (i64, i64) {
    let events: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM hermesd_inbound_events WHERE state IN ('received', 'processing')",
    )
    .fetch_one(pool)
    .await
    .expect("count open events");
    let owed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_obligations WHERE state NOT IN ('delivered', 'abandoned')",
    )
    .fetch_one(pool)
    .await
    .expect("count owed replies");
    (events, owed)
}

/// Every violation of the run's promises, one line each.
pub async fn violations(
    rig: &ClusterRig,
    pool: &PgPool,
    plan: &Plan,
    effects: &str,
) -> Vec<String> {
    let mut found = Vec::new();
    let sent = rig.sent_to_anyone();
    let rows: Vec<(String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT role, content, tool_calls FROM messages ORDER BY id")
            .fetch_all(pool)
            .await
            .expect("read the history");
    let started: Vec<String> = sqlx::query_scalar("SELECT call_id FROM hermesd_tool_starts")
        .fetch_all(pool)
        .await
        .expect("read the tool-start marks");
    let requests = rig.model.requests();
    let mut effect_lines: HashMap<&str, usize> = HashMap::new();
    for line in effects.lines() {
        *effect_lines.entry(line.trim()).or_default() += 1;
    }
    for m in plan.messages() {
        let tag = m.tag.as_str();
        let replies: Vec<&str> = sent
            .iter()
            .filter(|s| s.text.contains(tag) && !is_ack(&s.text))
            .map(|s| s.text.as_str())
            .collect();
        let elsewhere = sent
            .iter()
            .filter(|s| s.chat_id != m.chat && s.text.contains(tag))
            .count();
        // The one window no fence closes: a send that reached the platform while its process
        // was paused or killed before recording it delivered. The survivor that takes the
        // reply over cannot tell, and resends it with Hermes's recovered marker (the
        // platforms offer no idempotency key; docs/cluster.md lists the window). That copy,
        // after the original, is allowed and printed; any other second copy is a violation.
        let marked_resend = replies.len() == 2
            && !replies[0].starts_with(RECOVERED)
            && replies[1].starts_with(RECOVERED);
        if marked_resend && elsewhere == 0 {
            println!("note: {tag}: resent with the recovered marker (a send cut off in flight)");
        }
        match replies.len() {
            1 if elsewhere == 0 => {}
            2 if marked_resend && elsewhere == 0 => {}
            0 => found.push(format!("{tag}: lost (no reply)")),
            n => found.push(format!(
                "{tag}: {n} replies ({elsewhere} in another chat): {replies:?}"
            )),
        }
        let count_rows = |role: &str, needle: &str| {
            rows.iter()
                .filter(|(r, content, calls)| {
                    r == role
                        && (content.as_deref().is_some_and(|c| c.contains(needle))
                            || calls.as_deref().is_some_and(|c| c.contains(needle)))
                })
                .count()
        };
        let users = count_rows("user", tag);
        let answers = count_rows("assistant", &final_answer(tag, m.tool));
        if users != 1 || answers != 1 {
            found.push(format!(
                "{tag}: history has {users} user messages and {answers} recorded final answers"
            ));
        }
        let effect_runs = effect_lines.get(tag).copied().unwrap_or(0);
        if m.tool {
            // The call's arguments carry the tag; the answer text does not.
            let calls = rows
                .iter()
                .filter(|(r, _, calls)| {
                    r == "assistant" && calls.as_deref().is_some_and(|c| c.contains(tag))
                })
                .count();
            let marked = call_ids(&rows, tag).iter().any(|id| started.contains(id));
            if calls == 1 && effect_runs == 0 && marked {
                // The window no mark closes: the process died or lost its hold while the
                // tool ran (after its start was marked, before its effect), so the resumed
                // turn may not run it again (at most once; docs/cluster.md).
                println!("note: {tag}: the tool was cut off while it ran (marked as started)");
            } else if calls == 1 && effect_runs == 0 {
                // A recorded call that never started must be run by the resumed turn.
                found.push(format!(
                    "{tag}: the tool call was recorded, never started, and never ran (the \
                     resumed turn did not run it)"
                ));
            } else if calls != 1 || effect_runs != 1 {
                found.push(format!(
                    "{tag}: {calls} recorded tool calls, the tool ran {effect_runs} times"
                ));
            }
        } else if effect_runs != 0 {
            found.push(format!(
                "{tag}: no tool asked for, it ran {effect_runs} times"
            ));
        }
        let calls_for = requests
            .iter()
            .filter(|r| tag_in(&r.last_message_text()) == Some(tag))
            .count();
        if calls_for != 1 {
            println!("note: {tag}: {calls_for} model requests ended with its user message");
        }
    }
    // Order within each chat: the first answer naming each message, in sending order.
    let chats: Vec<i64> = plan.waves[0].iter().map(|m| m.chat).collect();
    for chat in chats {
        let expected: Vec<&str> = plan
            .messages()
            .filter(|m| m.chat == chat)
            .map(|m| m.tag.as_str())
            .collect();
        let mut seen: Vec<&str> = Vec::new();
        for s in sent
            .iter()
            .filter(|s| s.chat_id == chat && !is_ack(&s.text))
        {
            if let Some(tag) = tag_in(&s.text)
                && !seen.contains(&tag)
            {
                seen.push(tag);
            }
        }
        if seen != expected {
            found.push(format!(
                "chat {chat}: answered in the order {seen:?}, sent as {expected:?}"
            ));
        }
    }
    let (events, owed) = open_rows(pool).await;
    if events != 0 || owed != 0 {
        found.push(format!(
            "{events} journaled events open, {owed} replies owed"
        ));
    }
    found
}

/// A reply as the report shows it: chat, text, state, attempts, owner, token, last error.
type LedgerRow = (
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
);

/// Every owed or recently sent reply and every backend waiting on a lock, for a report on a
/// run that stalled.
pub async fn ledger_rows(pool: &PgPool) -> Vec<String> {
    let rows: Vec<LedgerRow> = sqlx::query_as(
        "SELECT chat_id, left(content, 60), state, attempts, owner_instance, owner_token, \
                    last_error FROM delivery_obligations ORDER BY created_at",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|(chat, content, state, attempts, owner, token, error)| {
            format!(
                "ledger: chat {chat} {content:?} {state} attempts {attempts} owner {owner:?}/{token:?} {error:?}"
            )
        })
        .collect();
    let waiting: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT state, wait_event_type, left(query, 120) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND (wait_event_type = 'Lock' OR state LIKE 'idle in transaction%')",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    out.extend(
        waiting
            .into_iter()
            .map(|(state, wait, query)| format!("backend {state:?} waits {wait:?}: {query:?}")),
    );
    out
}

/// A history row as the report shows it: id, session, role, content, tool calls, timestamp.
type HistoryRow = (i64, String, String, Option<String>, Option<String>, f64);

/// The shared history and journal of the chats named in `problems`, for the report.
pub async fn rows_for(pool: &PgPool, plan: &Plan, problems: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for chat in plan.waves[0].iter().map(|m| m.chat) {
        let named = plan
            .messages()
            .any(|m| m.chat == chat && problems.iter().any(|p| p.contains(&m.tag)))
            || problems.iter().any(|p| p.contains(&format!("chat {chat}")));
        if !named {
            continue;
        }
        let key = format!("%:dm:{chat}");
        let events: Vec<(i64, String, String, f64)> = sqlx::query_as(
            "SELECT seq, event_id, state, received_at FROM hermesd_inbound_events \
             WHERE session_key LIKE $1 ORDER BY seq",
        )
        .bind(&key)
        .fetch_all(pool)
        .await
        .unwrap_or_default();
        for (seq, event, state, at) in events {
            out.push(format!(
                "chat {chat} journal: seq {seq} event {event} {state} received_at {at:.3}"
            ));
        }
        let rows: Vec<HistoryRow> = sqlx::query_as(
            "SELECT m.id, m.session_id, m.role, m.content, m.tool_calls, m.timestamp \
             FROM messages m JOIN sessions s ON s.id = m.session_id \
             WHERE s.user_id = $1 ORDER BY m.id",
        )
        .bind(chat.to_string())
        .fetch_all(pool)
        .await
        .unwrap_or_default();
        for (id, session, role, content, calls, at) in rows {
            let text: String = content
                .or(calls)
                .unwrap_or_default()
                .chars()
                .take(70)
                .collect();
            out.push(format!(
                "chat {chat} history: #{id} {session} {role} {text:?} at {at:.3}"
            ));
        }
    }
    out
}

/// The ids of the recorded tool calls whose arguments name `tag`.
fn call_ids(rows: &[(String, Option<String>, Option<String>)], tag: &str) -> Vec<String> {
    rows.iter()
        .filter(|(role, _, _)| role == "assistant")
        .filter_map(|(_, _, calls)| calls.as_deref())
        .filter_map(|calls| serde_json::from_str::<serde_json::Value>(calls).ok())
        .flat_map(|calls| calls.as_array().cloned().unwrap_or_default())
        .filter(|call| call.to_string().contains(tag))
        .filter_map(|call| call.get("id").and_then(|id| id.as_str()).map(str::to_owned))
        .collect()
}
