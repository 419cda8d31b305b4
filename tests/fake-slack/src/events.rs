//! Builders for the Slack event and interaction payloads a test pushes, shaped like the
//! ones Slack sends (only the fields the Hermes reference reads, plus ids).

use serde_json::{Value, json};

use crate::{BOT_ID, BOT_USER_ID, TEAM_ID};

fn message(channel: &str, channel_type: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({
        "type": "message", "channel": channel, "channel_type": channel_type, "user": user,
        "text": text, "ts": ts, "event_ts": ts, "team": TEAM_ID,
        "client_msg_id": format!("cm-{ts}"),
    })
}

/// `message.im`: a direct message.
pub fn dm(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    message(channel, "im", user, text, ts)
}

/// A top-level channel message (`message.channels`).
pub fn channel_message(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    message(channel, "channel", user, text, ts)
}

/// The `app_mention` event Slack sends alongside the channel message mentioning the bot.
pub fn app_mention(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({
        "type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts,
        "event_ts": ts, "team": TEAM_ID, "client_msg_id": format!("cm-{ts}"),
    })
}

/// A reply in the thread rooted at `thread_ts`.
pub fn thread_reply(channel: &str, user: &str, text: &str, ts: &str, thread_ts: &str) -> Value {
    let mut event = message(channel, "channel", user, text, ts);
    event["thread_ts"] = json!(thread_ts);
    event["parent_user_id"] = json!(BOT_USER_ID);
    event
}

/// A message posted by another app (`subtype: bot_message`).
pub fn bot_message(channel: &str, bot_id: &str, text: &str, ts: &str) -> Value {
    json!({
        "type": "message", "subtype": "bot_message", "channel": channel,
        "channel_type": "channel", "bot_id": bot_id, "text": text, "ts": ts, "event_ts": ts,
    })
}

/// A message our own bot posted, as Slack echoes it back.
pub fn own_message(channel: &str, text: &str, ts: &str) -> Value {
    json!({
        "type": "message", "channel": channel, "channel_type": "channel",
        "user": BOT_USER_ID, "bot_id": BOT_ID, "text": text, "ts": ts, "event_ts": ts,
    })
}

/// `message_changed`: `ts` was edited to `new_text`.
pub fn edit(channel: &str, user: &str, ts: &str, new_text: &str, event_ts: &str) -> Value {
    json!({
        "type": "message", "subtype": "message_changed", "channel": channel,
        "channel_type": "channel", "hidden": true, "ts": event_ts, "event_ts": event_ts,
        "message": {"type": "message", "user": user, "text": new_text, "ts": ts,
            "edited": {"user": user, "ts": event_ts}},
        "previous_message": {"type": "message", "user": user, "text": "old", "ts": ts},
    })
}

/// `message_deleted`: `ts` was deleted.
pub fn delete(channel: &str, ts: &str, event_ts: &str) -> Value {
    json!({
        "type": "message", "subtype": "message_deleted", "channel": channel,
        "channel_type": "channel", "hidden": true, "ts": event_ts, "deleted_ts": ts,
        "event_ts": event_ts,
    })
}

/// A button click on a prompt message.
#[derive(Debug, Clone)]
pub struct Click<'a> {
    pub user: &'a str,
    pub channel: &'a str,
    pub message_ts: &'a str,
    pub thread_ts: Option<&'a str>,
    pub action_id: &'a str,
    pub value: &'a str,
    pub label: &'a str,
    /// The prompt's section text, as Slack echoes the message's blocks.
    pub prompt_text: &'a str,
}

pub(crate) fn block_actions(click: &Click<'_>, trigger_id: &str, response_url: &str) -> Value {
    let mut message = json!({
        "type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": click.message_ts,
        "text": click.prompt_text,
        "blocks": [
            {"type": "section", "block_id": "prompt",
             "text": {"type": "mrkdwn", "text": click.prompt_text}},
            {"type": "actions", "block_id": "buttons", "elements": [
                {"type": "button", "action_id": click.action_id, "value": click.value,
                 "text": {"type": "plain_text", "text": click.label}}]},
        ],
    });
    let mut container = json!({
        "type": "message", "message_ts": click.message_ts, "channel_id": click.channel,
        "is_ephemeral": false,
    });
    if let Some(thread_ts) = click.thread_ts {
        message["thread_ts"] = json!(thread_ts);
        container["thread_ts"] = json!(thread_ts);
    }
    json!({
        "type": "block_actions",
        "user": {"id": click.user, "username": click.user, "name": click.user, "team_id": TEAM_ID},
        "api_app_id": "A0001", "token": "verification-token", "trigger_id": trigger_id,
        "team": {"id": TEAM_ID, "domain": "fake"},
        "channel": {"id": click.channel, "name": click.channel},
        "container": container, "message": message, "response_url": response_url,
        "actions": [{
            "type": "button", "action_id": click.action_id, "block_id": "buttons",
            "value": click.value, "text": {"type": "plain_text", "text": click.label},
            "action_ts": "1700000000.999999",
        }],
    })
}

/// A channel message with a `subtype`, shaped as Slack sends that subtype
/// (<https://api.slack.com/events/message#subtypes>): notices carry the user who caused
/// them and Slack's own wording; the subtype-specific fields follow each subtype's page
/// (`topic`, `purpose`, `old_name`/`name`, `item`, `bot_id`/`bot_link`, `root`).
pub fn with_subtype(channel: &str, subtype: &str, user: &str, text: &str, ts: &str) -> Value {
    let mut event = message(channel, "channel", user, text, ts);
    event["subtype"] = json!(subtype);
    let extra = match subtype {
        "channel_topic" => json!({"topic": text}),
        "channel_purpose" => json!({"purpose": text}),
        "channel_name" => json!({"old_name": "old", "name": "new"}),
        "pinned_item" => json!({"item_type": "C", "item": {"type": "message", "ts": "1.0"}}),
        "bot_add" => {
            json!({"bot_id": "BNEW", "bot_link": "<https://x.slack.com/services/BNEW|bot>"})
        }
        "thread_broadcast" => json!({"thread_ts": "1.0", "root": {"ts": "1.0", "user": user,
            "text": "root", "type": "message"}}),
        _ => json!({}),
    };
    if let (Value::Object(event), Value::Object(extra)) = (&mut event, extra) {
        event.extend(extra);
    }
    if subtype != "file_share" && subtype != "thread_broadcast" && subtype != "me_message" {
        // Notices are not typed by anyone: Slack sends no client_msg_id for them.
        event.as_object_mut().map(|e| e.remove("client_msg_id"));
    }
    event
}

/// `assistant_thread_started` or `assistant_thread_context_changed` (`kind`): `user` opened
/// the assistant split view, a thread rooted at `thread_ts` in the bot's DM `dm`, while
/// looking at `context_channel` (<https://api.slack.com/events/assistant_thread_started>,
/// <https://api.slack.com/events/assistant_thread_context_changed>).
pub fn assistant_thread(
    kind: &str,
    user: &str,
    dm: &str,
    thread_ts: &str,
    context_channel: Option<&str>,
    event_ts: &str,
) -> Value {
    let mut context = json!({"team_id": TEAM_ID, "enterprise_id": null});
    if let Some(channel) = context_channel {
        context["channel_id"] = json!(channel);
    }
    json!({
        "type": kind,
        "assistant_thread": {"user_id": user, "context": context, "channel_id": dm,
            "thread_ts": thread_ts},
        "event_ts": event_ts,
    })
}
