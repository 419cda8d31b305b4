//! A scripted in-process platform for component tests of the gateway's outbound path: it
//! records every `Outbound` with the (virtual) time it was sent and answers from a queue of
//! scripted results; unscripted sends succeed with ids `m1`, `m2`, … Optionally it enforces
//! a real length limit smaller than the one it advertises (a platform that says "too long").

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, Outbound, OutboundKind,
    SendErrorKind, SendResult,
};
use tokio::time::Instant;

/// One scripted answer: wait `delay`, then return `result`.
#[derive(Debug, Clone)]
pub struct Step {
    pub delay: Duration,
    pub result: SendResult,
}

#[derive(Debug)]
pub struct ScriptedAdapter {
    capabilities: Capabilities,
    real_limit: Option<usize>,
    script: Mutex<VecDeque<Step>>,
    sent: Mutex<Vec<(Instant, Outbound)>>,
    next_id: AtomicU64,
}

impl ScriptedAdapter {
    pub fn new(message_limit: usize, length_unit: LengthUnit) -> Self {
        Self {
            capabilities: Capabilities {
                message_limit,
                length_unit,
                edits: true,
                typing: true,
                buttons: false,
                threads: true,
                command_prefix: '/',
                voice_caption_limit: None,
            },
            real_limit: None,
            script: Mutex::new(VecDeque::new()),
            sent: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
        }
    }

    /// Texts longer than `limit` (in the advertised unit) are refused as `TooLong`.
    pub fn with_real_limit(mut self, limit: usize) -> Self {
        self.real_limit = Some(limit);
        self
    }

    pub fn answer(&self, result: SendResult) -> &Self {
        self.answer_after(Duration::ZERO, result)
    }

    pub fn answer_after(&self, delay: Duration, result: SendResult) -> &Self {
        self.script
            .lock()
            .unwrap()
            .push_back(Step { delay, result });
        self
    }

    pub fn sent(&self) -> Vec<(Instant, Outbound)> {
        self.sent.lock().unwrap().clone()
    }

    /// The text messages sent, as `(text, reply_to, plain)`.
    pub fn texts(&self) -> Vec<(String, Option<String>, bool)> {
        self.sent()
            .into_iter()
            .filter_map(|(_, o)| match o.kind {
                OutboundKind::Text {
                    text,
                    reply_to,
                    plain,
                } => Some((text, reply_to, plain)),
                _ => None,
            })
            .collect()
    }

    pub fn send_times(&self) -> Vec<Instant> {
        self.sent().into_iter().map(|(at, _)| at).collect()
    }
}

impl Adapter for ScriptedAdapter {
    fn platform(&self) -> &'static str {
        "scripted"
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities.clone()
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        Box::pin(async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        })
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        self.sent
            .lock()
            .unwrap()
            .push((Instant::now(), outbound.clone()));
        let too_long = match (&outbound.kind, self.real_limit) {
            (OutboundKind::Text { text, .. }, Some(limit)) => {
                self.capabilities.length_unit.measure(text) > limit
            }
            _ => false,
        };
        // A refusal for length consumes no scripted answer: the platform never got that far.
        let step = if too_long {
            None
        } else {
            self.script.lock().unwrap().pop_front()
        };
        Box::pin(async move {
            if too_long {
                return SendResult::failed(SendErrorKind::TooLong, "message is too long");
            }
            match step {
                Some(step) => {
                    tokio::time::sleep(step.delay).await;
                    step.result
                }
                None => {
                    let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
                    SendResult::sent(Some(format!("m{n}")))
                }
            }
        })
    }
}
