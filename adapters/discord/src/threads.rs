//! Auto-threads opened only for senders the core accepted. A thread started from a
//! message gets the message's id (<https://discord.com/developers/docs/resources/channel#start-thread-from-message>),
//! so the adapter hands the event over already addressed to the thread it *would* open,
//! and opens it only when the core's answer is `Recorded` (or `Duplicate`): a stranger's
//! mention is `Refused` and opens nothing. Until the thread exists, sends addressed to it
//! wait here (the core may answer before `POST .../threads` returns); if Discord refuses
//! the thread for good, they go to the parent channel, after a notice saying so.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hermes_adapter::SendErrorKind;
use tokio::sync::watch;

use crate::directory::ChannelInfo;
use crate::gating;
use crate::inner::Inner;
use crate::model::{Message, channel_kind};

/// Discord's "A thread has already been created for this message".
const THREAD_ALREADY_CREATED: u64 = 160_004;
/// Attempts at a thread that fails transiently (5xx, 429, timeouts).
const ATTEMPTS: u32 = 4;
/// How long a send waits for a thread being opened.
const OPEN_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
enum ThreadState {
    Opening,
    Open,
    /// Discord refused the thread: sends go to this (parent) channel.
    InParent(String),
}

/// Threads being opened, and the ones that could not be (redirected to their parent).
#[derive(Debug, Default)]
pub struct ThreadGate {
    states: Mutex<HashMap<String, watch::Sender<ThreadState>>>,
}

impl ThreadGate {
    fn set(&self, thread_id: &str, state: ThreadState) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        match states.get(thread_id) {
            Some(sender) => {
                sender.send_replace(state.clone());
            }
            None => {
                states.insert(thread_id.to_owned(), watch::channel(state.clone()).0);
            }
        }
        // Waiters already hold a receiver; an open thread needs no entry any more.
        if matches!(state, ThreadState::Open) {
            states.remove(thread_id);
        }
    }

    fn forget(&self, thread_id: &str) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sender) = states.remove(thread_id) {
            sender.send_replace(ThreadState::Open);
        }
    }

    /// Where a send addressed to `channel_id` goes: the channel itself, once a thread being
    /// opened exists; its parent when Discord refused the thread.
    pub async fn target(&self, channel_id: &str) -> String {
        let receiver = {
            let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
            match states.get(channel_id) {
                Some(sender) => sender.subscribe(),
                None => return channel_id.to_owned(),
            }
        };
        let mut receiver = receiver;
        let settled =
            tokio::time::timeout(OPEN_WAIT, receiver.wait_for(|s| *s != ThreadState::Opening))
                .await;
        match settled {
            Ok(Ok(state)) => match &*state {
                ThreadState::InParent(parent) => parent.clone(),
                _ => channel_id.to_owned(),
            },
            _ => channel_id.to_owned(),
        }
    }
}

/// The thread `message` would open in `parent` (not created yet): sends to it wait until
/// [`open`] or [`abandon`] settles it.
pub fn plan(inner: &Inner, message: &Message, parent: &ChannelInfo) -> ChannelInfo {
    let info = ChannelInfo {
        id: message.id.clone(),
        kind: channel_kind::PUBLIC_THREAD,
        name: Some(gating::auto_thread_name(&message.content)),
        guild_id: parent.guild_id.clone(),
        parent_id: Some(parent.id.clone()),
        topic: None,
        owner_id: Some(inner.bot_id()),
    };
    inner.threads.set(&info.id, ThreadState::Opening);
    info
}

/// The core did not take the message (refused sender, or shutdown): no thread.
pub fn abandon(inner: &Inner, thread: &ChannelInfo) {
    inner.threads.forget(&thread.id);
}

/// Opens the planned thread for an accepted message. Transient failures are retried; a
/// refusal (missing permission, archived channel, ...) is told to the user in the parent
/// channel, where the answer then goes.
pub async fn open(inner: &Inner, message: &Message, thread: ChannelInfo) {
    let parent = thread.parent_id.clone().unwrap_or_default();
    let name = thread.name.clone().unwrap_or_else(|| "Hermes".into());
    let mut delay = Duration::from_millis(500);
    let mut attempt = 1;
    let error = loop {
        match inner.rest.start_thread(&parent, &message.id, &name).await {
            Ok(_) => break None,
            Err(error) if error.code == Some(THREAD_ALREADY_CREATED) => break None,
            Err(error)
                if attempt < ATTEMPTS
                    && matches!(
                        error.kind,
                        SendErrorKind::Transient
                            | SendErrorKind::RateLimited
                            | SendErrorKind::Ambiguous
                    ) =>
            {
                tokio::time::sleep(error.retry_after.unwrap_or(delay).max(delay)).await;
                delay *= 2;
                attempt += 1;
            }
            Err(error) => break Some(error),
        }
    };
    match error {
        None => {
            inner.with_directory(|d| {
                d.upsert(thread.clone());
                d.bot_threads.insert(thread.id.clone());
                d.auto_threads.insert(thread.id.clone());
                d.known_conversations.insert(thread.id.clone());
            });
            inner.threads.set(&thread.id, ThreadState::Open);
        }
        Some(error) => {
            tracing::warn!(platform = "discord", %error, "auto-thread creation failed; answering in the channel");
            let notice = serde_json::json!({
                "content": "⚠️ Discord refused the new thread; you will get the answer right here instead.",
            });
            if let Err(error) = inner.rest.create_message(&parent, &notice, &[]).await {
                tracing::warn!(platform = "discord", %error, "could not tell the user about the failed thread");
            }
            inner.threads.set(&thread.id, ThreadState::InParent(parent));
        }
    }
}
