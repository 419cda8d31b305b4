//! Telegram's test glue: settings and start-up against the fake Bot API, and waits on its
//! polls. The stand-ins for the core come from the contract (`hermes_adapter::testing`).
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use fake_telegram::FakeTelegram;
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_telegram::{Settings, TelegramAdapter};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// The core stand-ins and the wait bound are the contract's, shared by every adapter.
#[allow(unused_imports)] // each test file uses its own part of it
pub use hermes_adapter::testing::{ManualCore, TestCore, WAIT};

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
    start_with_ctx(settings, core.context())
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
