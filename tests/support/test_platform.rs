//! An in-process chat platform speaking the adapter contract, for end-to-end tests of the
//! gateway core: the test injects events (as a platform would deliver them, waiting for the
//! record answer before "acknowledging"), and every outbound operation is recorded and can
//! be awaited. Nothing of the core is mocked: the real runner, router, store and agent run.
#![allow(dead_code)]

use std::sync::Mutex;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, ChatType, LengthUnit, MessageEvent,
    Outbound, OutboundKind, RecordOutcome, SendResult, SessionSource,
};
use tokio::sync::{mpsc, oneshot, watch};

type Delivery = (MessageEvent, oneshot::Sender<RecordOutcome>);

#[derive(Debug)]
pub struct TestPlatform {
    name: &'static str,
    capabilities: Capabilities,
    events: mpsc::UnboundedSender<Delivery>,
    inbox: tokio::sync::Mutex<mpsc::UnboundedReceiver<Delivery>>,
    sent: Mutex<Vec<Outbound>>,
    sent_count: watch::Sender<usize>,
    next_id: Mutex<u64>,
}

impl TestPlatform {
    pub fn new(name: &'static str, message_limit: usize, unit: LengthUnit) -> Self {
        let (events, inbox) = mpsc::unbounded_channel();
        Self {
            name,
            capabilities: Capabilities {
                message_limit,
                length_unit: unit,
                edits: true,
                typing: true,
                buttons: true,
                threads: true,
                command_prefix: '/',
                voice_caption_limit: None,
            },
            events,
            inbox: tokio::sync::Mutex::new(inbox),
            sent: Mutex::new(Vec::new()),
            sent_count: watch::channel(0).0,
            next_id: Mutex::new(0),
        }
    }

    /// Delivers an event as the platform would and returns the core's record answer.
    pub async fn inject(&self, event: MessageEvent) -> RecordOutcome {
        let (tx, rx) = oneshot::channel();
        self.events.send((event, tx)).expect("adapter running");
        tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .expect("record answer in time")
            .expect("record answer")
    }

    /// Every outbound operation so far.
    pub fn sent(&self) -> Vec<Outbound> {
        self.sent.lock().unwrap().clone()
    }

    /// Texts (messages and prompts) sent to `chat`, in order.
    pub fn texts_to(&self, chat: &str) -> Vec<String> {
        self.sent()
            .into_iter()
            .filter(|o| o.chat_id == chat)
            .filter_map(|o| match o.kind {
                OutboundKind::Text { text, .. } | OutboundKind::Prompt { text, .. } => Some(text),
                _ => None,
            })
            .collect()
    }

    /// Waits until `chat` received at least `count` texts; returns them all.
    pub async fn wait_texts(&self, chat: &str, count: usize) -> Vec<String> {
        let mut changes = self.sent_count.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let texts = self.texts_to(chat);
            if texts.len() >= count {
                return texts;
            }
            let changed = tokio::time::timeout_at(deadline, changes.changed()).await;
            assert!(
                changed.is_ok(),
                "chat {chat} got {} of {count} texts: {texts:#?}",
                texts.len()
            );
        }
    }

    /// Waits until everything sent so far satisfies `done`; returns it.
    #[allow(dead_code)]
    pub async fn wait_sent(&self, done: impl Fn(&[Outbound]) -> bool) -> Vec<Outbound> {
        let mut changes = self.sent_count.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let sent = self.sent();
            if done(&sent) {
                return sent;
            }
            let changed = tokio::time::timeout_at(deadline, changes.changed()).await;
            assert!(changed.is_ok(), "never sent what was awaited: {sent:#?}");
        }
    }

    /// Waits until the texts sent to `chat` satisfy `done`; returns them.
    pub async fn wait_until(&self, chat: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let mut changes = self.sent_count.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let texts = self.texts_to(chat);
            if done(&texts) {
                return texts;
            }
            let changed = tokio::time::timeout_at(deadline, changes.changed()).await;
            assert!(
                changed.is_ok(),
                "chat {chat} never got what was awaited: {texts:#?}"
            );
        }
    }

    fn record(&self, outbound: Outbound) -> String {
        let id = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        self.sent.lock().unwrap().push(outbound);
        self.sent_count.send_modify(|n| *n += 1);
        format!("m{id}")
    }
}

impl Adapter for TestPlatform {
    fn platform(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities.clone()
    }

    fn liveness_window(&self) -> Duration {
        Duration::from_secs(3600)
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        async move {
            ctx.progress.report();
            let mut inbox = self.inbox.lock().await;
            loop {
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => return Ok(()),
                    delivery = inbox.recv() => {
                        let Some((event, answer)) = delivery else { return Ok(()) };
                        let outcome = ctx.deliver(event).await;
                        ctx.progress.report();
                        let _ = answer.send(outcome);
                    }
                }
            }
        }
        .boxed()
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        async move {
            let typing = matches!(outbound.kind, OutboundKind::Typing);
            let id = self.record(outbound);
            SendResult::sent((!typing).then_some(id))
        }
        .boxed()
    }
}

/// A DM text event from user `user` in chat `user`.
pub fn dm(event_id: &str, user: &str, text: &str) -> MessageEvent {
    let mut event = MessageEvent::text(event_id, SessionSource::dm("telegram", user, user), text);
    event.message_id = Some(format!("in-{event_id}"));
    event
}

/// A group message from `user` in `chat`.
pub fn group(event_id: &str, chat: &str, user: &str, text: &str) -> MessageEvent {
    let source = SessionSource {
        chat_type: ChatType::Group,
        ..SessionSource::dm("telegram", chat, user)
    };
    MessageEvent::text(event_id, source, text)
}
