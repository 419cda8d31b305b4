//! Slack's AI-app surface (<https://api.slack.com/docs/apps/ai>): the assistant split view
//! opens a thread in the bot's DM and says so with `assistant_thread_started`; the bot
//! answers with suggested prompts (`assistant.threads.setSuggestedPrompts`). When the user
//! looks at another channel beside the thread, `assistant_thread_context_changed` says
//! which, and the next message in the thread tells the agent. The thread's status while a
//! turn runs is the typing indicator (`assistant.threads.setStatus`, in `outbound`), and
//! the session's generated title becomes the thread's title
//! (`assistant.threads.setTitle`, through `rename_thread`).
//!
//! Everything here is cosmetic: it starts no turn, and a failed call only reaches the
//! debug log.

use std::sync::Arc;

use hermes_adapter::SendResult;
use serde_json::{Value, json};

use crate::adapter::Shared;
use crate::api::{Token, WebApi};
use crate::memory::{SharedMemory, key};

/// The prompts offered when an assistant thread opens: a title shown on the button and
/// the message sent when it is clicked. Slack shows at most four
/// (<https://api.slack.com/methods/assistant.threads.setSuggestedPrompts>).
pub const SUGGESTED_PROMPTS: [(&str, &str); 3] = [
    (
        "Summarise a thread",
        "Summarise the key points and open questions of the conversation I paste next.",
    ),
    (
        "Draft a reply",
        "Help me write a clear, friendly reply to the message I paste next.",
    ),
    (
        "Explain something",
        "Explain the following in plain words, with one short example.",
    ),
];

/// The heading above the suggested prompts.
const PROMPTS_TITLE: &str = "Try one of these, or just ask:";

/// An assistant thread as Slack's `assistant_thread` object describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantThread {
    /// The DM channel the thread lives in.
    pub channel_id: String,
    pub thread_ts: String,
    /// The channel the user has open beside the thread, if any.
    pub context_channel: Option<String>,
}

fn str_at(value: &Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl AssistantThread {
    /// Reads the `assistant_thread` object of an `assistant_thread_*` event.
    pub fn from_event(event: &Value) -> Option<Self> {
        Some(Self {
            channel_id: str_at(event, "/assistant_thread/channel_id")?,
            thread_ts: str_at(event, "/assistant_thread/thread_ts")?,
            context_channel: str_at(event, "/assistant_thread/context/channel_id"),
        })
    }
}

/// Handles `assistant_thread_started` / `assistant_thread_context_changed`: remembers the
/// thread and its context, and offers the suggested prompts when the thread opens.
/// Returns why the envelope is simply acknowledged.
pub fn on_event(
    event_type: &str,
    event: &Value,
    memory: &SharedMemory,
    api: &WebApi,
) -> &'static str {
    let Some(thread) = AssistantThread::from_event(event) else {
        return "assistant thread event without channel or thread";
    };
    memory
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remember_assistant_thread(thread.clone());
    if event_type != "assistant_thread_started" {
        return "assistant thread context remembered";
    }
    let body = json!({
        "channel_id": thread.channel_id,
        "thread_ts": thread.thread_ts,
        "title": PROMPTS_TITLE,
        "prompts": SUGGESTED_PROMPTS
            .iter()
            .map(|(title, message)| json!({"title": title, "message": message}))
            .collect::<Vec<_>>(),
    });
    let api = api.clone();
    tokio::spawn(async move {
        if let Err(e) = api
            .call("assistant.threads.setSuggestedPrompts", Token::Bot, &body)
            .await
        {
            tracing::debug!(platform = "slack", error = %e, "could not set the suggested prompts");
        }
    });
    "assistant thread started"
}

/// The line telling the agent which channel the user has open beside the assistant
/// thread `channel`/`thread_ts`; `None` outside assistant threads or without context.
pub fn context_note(memory: &SharedMemory, channel: &str, thread_ts: &str) -> Option<String> {
    let memory = memory.lock().unwrap_or_else(|e| e.into_inner());
    let thread = memory.assistant_threads.get(&key(channel, thread_ts))?;
    let viewing = thread.context_channel.as_deref()?;
    Some(format!(
        "[Slack assistant: the user is viewing channel <#{viewing}>]"
    ))
}

/// Sets the title of the assistant thread rooted at `thread_ts`; threads that are not
/// assistant threads the adapter saw open are left alone.
pub async fn set_title(shared: &Arc<Shared>, thread_ts: &str, title: &str) -> SendResult {
    let channel = shared
        .memory()
        .assistant_threads
        .values()
        .find(|t| t.thread_ts == thread_ts)
        .map(|t| t.channel_id.clone());
    let Some(channel) = channel else {
        return SendResult::sent(None);
    };
    let body = json!({"channel_id": channel, "thread_ts": thread_ts, "title": title});
    match shared
        .api
        .call("assistant.threads.setTitle", Token::Bot, &body)
        .await
    {
        Ok(_) => SendResult::sent(Some(thread_ts.to_owned())),
        Err(e) => e.into_send_result(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_and_its_context_are_read_from_the_event() {
        let event = json!({"type": "assistant_thread_started", "assistant_thread": {
            "user_id": "U1", "channel_id": "D1", "thread_ts": "1.5",
            "context": {"channel_id": "C9", "team_id": "T1", "enterprise_id": null}}});
        assert_eq!(
            AssistantThread::from_event(&event),
            Some(AssistantThread {
                channel_id: "D1".into(),
                thread_ts: "1.5".into(),
                context_channel: Some("C9".into()),
            })
        );
        let no_context = json!({"assistant_thread": {"channel_id": "D1", "thread_ts": "1.5",
            "context": {}}});
        assert_eq!(
            AssistantThread::from_event(&no_context)
                .unwrap()
                .context_channel,
            None
        );
        assert_eq!(AssistantThread::from_event(&json!({})), None);
    }
}
