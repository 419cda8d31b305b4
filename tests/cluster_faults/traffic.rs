//! The traffic of a fault run: how the fake model answers each message (a greeting, or a
//! terminal command that appends the message's tag to a file the test reads, then a text),
//! a gate that holds the model's answers while the test arms a trap, and the webhook posts.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::cluster_support::{ClusterRig, WAIT};
use crate::plan::Message;
use crate::support::fake_model::{Reply, Step};

/// Holds the model's answers while closed (each request waits), so a wave's turns are still
/// under way when the test arms a trap for their replies.
#[derive(Clone)]
pub struct AnswerGate {
    closed: Arc<AtomicBool>,
    permits: Arc<Semaphore>,
}

impl AnswerGate {
    fn new() -> Self {
        Self {
            closed: Arc::new(AtomicBool::new(false)),
            permits: Arc::new(Semaphore::new(0)),
        }
    }

    /// Holds every answer from now on (the permits an earlier opening left are withdrawn).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.permits.forget_permits(usize::MAX);
    }

    /// Lets every waiting answer through and stops holding new ones.
    pub fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
        self.permits.add_permits(1_000);
    }
}

/// The text the model's final answer to a tagged message carries.
pub fn final_answer(tag: &str, tool: bool) -> String {
    match tool {
        true => format!("ran the tool for {tag}"),
        false => format!("hello {tag}"),
    }
}

/// The tag (`msgNxWz`: letters and digits only, which no Markdown escaping touches) in a
/// text, if any.
pub fn tag_in(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|word| word.len() > 4 && word.starts_with("msg") && word.ends_with('z'))
}

/// Installs the run's model on `rig`: its answers, held by the returned gate when closed.
/// `effects` is the file the tool appends each tag to.
pub fn install_model(rig: &ClusterRig, effects: &Path) -> AnswerGate {
    let gate = AnswerGate::new();
    let held = gate.clone();
    let effects = effects.to_path_buf();
    rig.model.set_responder(Arc::new(move |body: &Value| {
        let reply = answer(body, &effects);
        match held.closed.load(Ordering::SeqCst) {
            true => Step::Gated {
                reply,
                gate: held.permits.clone(),
            },
            false => Step::Slow {
                reply,
                delay: Duration::from_millis(40),
            },
        }
    }));
    gate
}

/// The model's answer: after a tool result, the final text; to a message asking for the
/// tool, the terminal command; otherwise a greeting.
fn answer(body: &Value, effects: &Path) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let Some(tag) = tag_in(&last_user) else {
        return Reply::text(format!("no tag in {last_user:?}"));
    };
    let after_tool = messages.last().is_some_and(|m| m["role"] == "tool");
    let wants_tool = last_user.contains("run the tool");
    match (wants_tool, after_tool) {
        (true, false) => Reply::tool_call(
            "terminal",
            json!({"command": format!("echo '{tag}' >> '{}'", effects.display())}),
        ),
        (true, true) => Reply::text(final_answer(tag, true)),
        (false, _) => Reply::text(final_answer(tag, false)),
    }
}

/// Posts `message` to its instance, or, when that one is down or refuses, to the next one
/// up (as a balancer with health checks and Telegram's own retries would), until one
/// answers 200; `up[n]` says which instances may be posted to.
pub async fn post(rig: &ClusterRig, message: &Message, up: &[bool]) -> usize {
    let deadline = tokio::time::Instant::now() + WAIT;
    let count = rig.instances.len();
    let mut attempt = 0;
    loop {
        let n = (message.instance + attempt) % count;
        attempt += 1;
        if up[n] {
            let status = rig
                .post_as(n, message.update_id, message.chat, &message.text())
                .await;
            if let Ok(200) = status {
                return n;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no instance took {} ({})",
            message.tag,
            message.update_id
        );
        if attempt % count == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Posts a wave: every chat's message at once (each chat's are in order: a wave is posted
/// only once the previous one was accepted).
pub async fn post_wave(rig: &ClusterRig, wave: &[Message], up: &[bool]) -> Vec<usize> {
    futures_util::future::join_all(wave.iter().map(|m| post(rig, m, up))).await
}
