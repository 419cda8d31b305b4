//! The compliance suite run against the smallest adapter that honours the contract: an
//! in-memory platform that redelivers whatever is not acknowledged. It shows what a new
//! platform's rig looks like, and keeps the suite itself honest (it must pass here).
#![cfg(feature = "testing")]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::testing::ComplianceRig;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, DeadLetter, LengthUnit, MessageEvent,
    Outbound, OutboundKind, RecordOutcome, SendErrorKind, SendResult, SessionSource,
};
use tokio::task::JoinHandle;

/// One inbound item as the platform holds it until acknowledged.
#[derive(Clone)]
enum Item {
    Text(String),
    Garbled(String),
}

#[derive(Default)]
struct Platform {
    /// Deliveries not acknowledged yet, oldest first; the front is offered until acked.
    pending: VecDeque<(u64, Item)>,
    acked: Vec<u64>,
    next_id: u64,
    /// The bot's messages: text and button labels.
    shown: HashMap<String, (String, Vec<String>)>,
    typing: usize,
    rate_limit: Option<Duration>,
}

#[derive(Clone, Default)]
struct MemoryAdapter(Arc<Mutex<Platform>>);

const LIMIT: usize = 100;

impl MemoryAdapter {
    fn push(&self, item: Item) -> String {
        let mut platform = self.0.lock().unwrap();
        platform.next_id += 1;
        let id = platform.next_id;
        platform.pending.push_back((id, item));
        id.to_string()
    }

    /// Hands the oldest pending item to the core; acknowledges it only once kept.
    async fn offer(&self, ctx: &AdapterContext) {
        let front = self.0.lock().unwrap().pending.front().cloned();
        let Some((id, item)) = front else {
            return tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let source = SessionSource::dm("memory", "chat", "alice");
        let outcome = match item {
            Item::Text(text) => {
                let event = MessageEvent::text(&id.to_string(), source, &text);
                ctx.deliver(event).await
            }
            Item::Garbled(raw) => {
                let letter = DeadLetter {
                    platform: "memory".into(),
                    item_id: id.to_string(),
                    source: Some(source),
                    raw,
                    error: "not text".into(),
                };
                ctx.dead_letter(letter).await
            }
        };
        let mut platform = self.0.lock().unwrap();
        if outcome != RecordOutcome::Failed {
            platform.pending.pop_front();
            platform.acked.push(id);
        }
    }
}

impl Adapter for MemoryAdapter {
    fn platform(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: LIMIT,
            length_unit: LengthUnit::Chars,
            edits: true,
            typing: true,
            buttons: true,
            threads: false,
            command_prefix: '/',
            voice_caption_limit: Some(1024),
        }
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        Box::pin(async move {
            while !ctx.shutdown.is_cancelled() {
                tokio::select! {
                    () = self.offer(&ctx) => {}
                    () = ctx.shutdown.cancelled() => {}
                }
            }
            Ok(())
        })
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        Box::pin(async move {
            let mut platform = self.0.lock().unwrap();
            if let Some(wait) = platform.rate_limit.take() {
                return SendResult::rate_limited(wait);
            }
            let id = (platform.shown.len() + 1).to_string();
            let (text, labels) = match outbound.kind {
                OutboundKind::Text { text, .. } => (text, Vec::new()),
                OutboundKind::Prompt { text, buttons } => {
                    (text, buttons.into_iter().map(|b| b.label).collect())
                }
                OutboundKind::Edit { message_id, text } => {
                    return match platform.shown.get_mut(&message_id) {
                        Some(shown) => {
                            shown.0 = text;
                            SendResult::sent(Some(message_id))
                        }
                        None => SendResult::failed(SendErrorKind::NotFound, "no such message"),
                    };
                }
                OutboundKind::Typing => {
                    platform.typing += 1;
                    return SendResult::sent(None);
                }
                _ => return SendResult::failed(SendErrorKind::Unknown, "not supported"),
            };
            if text.chars().count() > LIMIT {
                return SendResult::failed(SendErrorKind::TooLong, "too long");
            }
            platform.shown.insert(id.clone(), (text, labels));
            SendResult::sent(Some(id))
        })
    }
}

struct Rig {
    adapter: MemoryAdapter,
    ctx: AdapterContext,
    run: JoinHandle<Result<(), AdapterError>>,
}

impl ComplianceRig for Rig {
    type Adapter = MemoryAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let adapter = MemoryAdapter::default();
        let runner = adapter.clone();
        let context = ctx.clone();
        let run = tokio::spawn(async move { runner.run(context).await });
        Self { adapter, ctx, run }
    }

    fn adapter(&self) -> &MemoryAdapter {
        &self.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        ("chat".into(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        self.adapter.push(Item::Text(text.into()))
    }

    async fn push_undecodable(&self) -> String {
        self.adapter.push(Item::Garbled("\u{fffd}\u{fffd}".into()))
    }

    fn acknowledged(&self, delivery: &str) -> Option<bool> {
        let id: u64 = delivery.parse().unwrap();
        Some(self.adapter.0.lock().unwrap().acked.contains(&id))
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        self.adapter.0.lock().unwrap().rate_limit = Some(retry_after);
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        let platform = self.adapter.0.lock().unwrap();
        platform.shown.get(message_id).map(|(text, _)| text.clone())
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        let platform = self.adapter.0.lock().unwrap();
        platform
            .shown
            .get(message_id)
            .map(|s| s.1.clone())
            .unwrap_or_default()
    }

    fn typing_shown(&self) -> usize {
        self.adapter.0.lock().unwrap().typing
    }

    async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.run.await.expect("no panic").expect("a clean stop");
    }
}

hermes_adapter::compliance_suite!(Rig);

#[tokio::test]
async fn the_whole_suite_runs_in_one_call_too() {
    hermes_adapter::testing::run_compliance_suite::<Rig>().await;
}
