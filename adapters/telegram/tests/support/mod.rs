//! Test harness: a recording stand-in for the core (an `AdapterContext` built from an mpsc
//! channel, deduping on event_id like the real core, with scripted record failures), and
//! helpers to start the adapter against the fake Bot API.
#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_telegram::FakeTelegram;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, DeadLetter, Inbound, MessageEvent, Progress,
    RecordOutcome,
};
use hermes_telegram::{Settings, TelegramAdapter};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(30);

/// What the core saw: every event handed over (duplicates included) and its answer.
pub struct TestCore {
    pub ctx: AdapterContext,
    events: mpsc::UnboundedReceiver<(MessageEvent, RecordOutcome)>,
    /// Dead letters handed over; each is answered `Recorded`.
    dead_letters: mpsc::UnboundedReceiver<DeadLetter>,
    script: Arc<Mutex<VecDeque<RecordOutcome>>>,
}

impl TestCore {
    pub fn new() -> Self {
        Self::with_journal(&[])
    }

    /// A core whose journal already holds `event_ids`, as recorded by an earlier process
    /// that died before the adapter confirmed them to Telegram.
    pub fn with_journal(event_ids: &[i64]) -> Self {
        let journaled: HashSet<String> = event_ids.iter().map(|id| id.to_string()).collect();
        let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(64);
        let (events_tx, events) = mpsc::unbounded_channel();
        let script: Arc<Mutex<VecDeque<RecordOutcome>>> = Arc::default();
        let answers = script.clone();
        tokio::spawn(async move {
            let mut recorded = journaled;
            while let Some(inbound) = inbound_rx.recv().await {
                let scripted = answers.lock().unwrap().pop_front();
                let outcome = match scripted {
                    Some(outcome) => outcome,
                    None if recorded.contains(&inbound.event.event_id) => RecordOutcome::Duplicate,
                    None => RecordOutcome::Recorded,
                };
                if outcome == RecordOutcome::Recorded {
                    recorded.insert(inbound.event.event_id.clone());
                }
                let _ = events_tx.send((inbound.event, outcome));
                let _ = inbound.recorded.send(outcome);
            }
        });
        let (letters_tx, mut letters_rx) = mpsc::channel(16);
        let (kept_tx, dead_letters) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(hermes_adapter::DeadLetterInbound { letter, recorded }) =
                letters_rx.recv().await
            {
                let _ = kept_tx.send(letter);
                let _ = recorded.send(RecordOutcome::Recorded);
            }
        });
        let ctx = AdapterContext {
            inbound: inbound_tx,
            dead_letters: letters_tx,
            progress: Progress::new(),
            shutdown: CancellationToken::new(),
            ingress: hermes_adapter::Ingress::solo(),
        };
        Self {
            ctx,
            events,
            dead_letters,
            script,
        }
    }

    /// The next `n` record answers are `outcome` (then back to record-and-dedupe).
    pub fn answer_next(&self, outcome: RecordOutcome, n: usize) {
        self.script
            .lock()
            .unwrap()
            .extend(std::iter::repeat_n(outcome, n));
    }

    /// The next event handed to the core, with the answer it got.
    pub async fn next(&mut self) -> (MessageEvent, RecordOutcome) {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event within 30 s")
            .expect("core channel open")
    }

    /// The next dead letter handed to the core (answered `Recorded`).
    pub async fn next_dead_letter(&mut self) -> DeadLetter {
        tokio::time::timeout(WAIT, self.dead_letters.recv())
            .await
            .expect("a dead letter within 30 s")
            .expect("core channel open")
    }

    pub async fn next_event(&mut self) -> MessageEvent {
        self.next().await.0
    }

    /// Events already handed over, without waiting.
    pub fn drain(&mut self) -> Vec<MessageEvent> {
        let mut out = Vec::new();
        while let Ok((event, _)) = self.events.try_recv() {
            out.push(event);
        }
        out
    }
}

/// Settings pointing at `fake`, with short polls, merged with `extra`.
pub fn settings(fake: &FakeTelegram, extra: Value) -> Settings {
    settings_with_env(fake, extra, &[])
}

pub fn settings_with_env(fake: &FakeTelegram, extra: Value, env: &[(&str, &str)]) -> Settings {
    let mut map: Map<String, Value> = json!({
        "base_url": fake.url(),
        "poll_timeout_seconds": 1,
        "poll_margin_seconds": 5,
    })
    .as_object()
    .cloned()
    .unwrap();
    if let Value::Object(overrides) = extra {
        map.extend(overrides);
    }
    let env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_config(fake.token(), &map, &env).expect("valid settings")
}

/// A running adapter and the handle of its `run` task.
pub struct Running {
    pub adapter: Arc<TelegramAdapter>,
    pub task: tokio::task::JoinHandle<Result<(), AdapterError>>,
    pub shutdown: CancellationToken,
}

impl Running {
    pub async fn stop(self) -> Result<(), AdapterError> {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("run returns after shutdown")
            .expect("run task")
    }
}

/// Starts the adapter with `core`'s channel and its own shutdown token (so a core can
/// outlive one adapter run and serve the next, as across a restart).
pub fn start(settings: Settings, core: &TestCore) -> Running {
    let mut ctx = core.ctx.clone();
    ctx.shutdown = CancellationToken::new();
    start_with_ctx(settings, ctx)
}

/// Waits until the adapter has taken the backlog it found at start (its first poll answered,
/// the next one sent). The backlog is handed over update by update; what is pushed from now on
/// is new to it and may be merged (split pastes, albums).
pub async fn wait_backlog_taken(fake: &FakeTelegram) {
    fake.wait_for_calls("getUpdates", 2, WAIT)
        .await
        .expect("the adapter polls");
}

/// Waits until a getUpdates offset has confirmed `update_id` (the adapter is done with it).
pub async fn wait_confirmed(fake: &FakeTelegram, update_id: i64) {
    let wait = async {
        loop {
            if fake.confirmed_offset() > update_id {
                return;
            }
            let polls = fake.calls_of("getUpdates").len();
            fake.wait_for_calls("getUpdates", polls + 1, WAIT)
                .await
                .expect("another poll");
        }
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .expect("update confirmed within 30 s");
}

/// Sends a prompt with buttons through the adapter; returns the message id.
pub async fn send_prompt(
    adapter: &TelegramAdapter,
    chat_id: &str,
    text: &str,
    buttons: &[(&str, &str)],
) -> i64 {
    let buttons = buttons
        .iter()
        .map(|(label, data)| hermes_adapter::Button {
            label: label.to_string(),
            data: data.to_string(),
        })
        .collect();
    let outbound = hermes_adapter::Outbound {
        chat_id: chat_id.to_owned(),
        thread_id: None,
        kind: hermes_adapter::OutboundKind::Prompt {
            text: text.to_owned(),
            buttons,
        },
    };
    let result = adapter.send(outbound).await;
    assert!(result.is_ok(), "prompt sent: {result:?}");
    result
        .message_id
        .expect("message id")
        .parse()
        .expect("numeric id")
}

/// A core whose answers the test gives by hand, one inbound event at a time.
pub struct ManualCore {
    pub ctx: AdapterContext,
    inbound: mpsc::Receiver<Inbound>,
}

impl ManualCore {
    pub fn new() -> Self {
        let (inbound_tx, inbound) = mpsc::channel::<Inbound>(64);
        let ctx = AdapterContext {
            inbound: inbound_tx,
            dead_letters: mpsc::channel(1).0,
            progress: Progress::new(),
            shutdown: CancellationToken::new(),
            ingress: hermes_adapter::Ingress::solo(),
        };
        Self { ctx, inbound }
    }

    pub async fn next(&mut self) -> Inbound {
        tokio::time::timeout(WAIT, self.inbound.recv())
            .await
            .expect("an event within 30 s")
            .expect("core channel open")
    }
}

pub fn start_with_ctx(settings: Settings, ctx: AdapterContext) -> Running {
    let adapter = Arc::new(TelegramAdapter::new(settings));
    let runner = adapter.clone();
    let shutdown = ctx.shutdown.clone();
    let task = tokio::spawn(async move { runner.run(ctx).await });
    Running {
        adapter,
        task,
        shutdown,
    }
}

/// A log sink shared with the test.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
