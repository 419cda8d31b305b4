//! What a running turn shows while it works: streamed deltas to an HTTP API client; to a
//! chat, tool-progress lines (per `display.tool_progress`) and, when streaming is on and the
//! platform can edit, a preview message edited in place.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::agent::AgentEvent;
use crate::config::ToolProgress;
use crate::gateway::delivery::send_checked;
use crate::gateway::router::live::Live;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::Job;

/// Forwards a turn's events: streamed deltas to an API client; to a chat, tool-progress
/// lines (per `display.tool_progress`) and, when streaming is on and the platform can
/// edit, a preview message edited in place. Resolves to the preview's message id.
pub(in crate::gateway::router) fn spawn_progress(
    responder: &Arc<Responder>,
    live: &Live,
    job: &Job,
    session_id: &str,
    mut progress: crate::agent::EventStream,
) -> Option<tokio::task::JoinHandle<Option<String>>> {
    if let Some(api) = &job.api {
        let deltas = api.deltas.clone()?;
        return Some(tokio::spawn(async move {
            while let Some(event) = progress.recv().await {
                if deltas.send(event).is_err() {
                    break;
                }
            }
            None
        }));
    }
    let platform = job.event.source.platform.clone();
    let display = &live.config.display;
    let overrides = display.platforms.get(&platform);
    let mode = overrides
        .and_then(|p| p.tool_progress)
        .unwrap_or(display.tool_progress);
    let can_edit = responder
        .link(&platform)
        .is_some_and(|l| l.adapter.capabilities().edits);
    let streaming = overrides
        .and_then(|p| p.streaming)
        .unwrap_or(live.config.streaming.enabled)
        && can_edit;
    let mut preview = streaming.then(|| StreamPreview::new(&live.config.streaming));
    let responder = responder.clone();
    let source = job.event.source.clone();
    let hooks = live.events.clone();
    let session_id = session_id.to_owned();
    // Its lines and edits are checked against the turn's session hold
    // (`gateway/delivery/fenced.rs`): a refused one is skipped.
    Some(tokio::spawn(crate::coord::inherit_fence(async move {
        let mut last_tool = String::new();
        // The tools started since the last model call, for the `agent:step` gateway hook.
        let mut step_tools: Vec<String> = Vec::new();
        while let Some(event) = progress.recv().await {
            match event {
                AgentEvent::Step { iteration } => {
                    let names = std::mem::take(&mut step_tools);
                    hooks.emit(
                        "agent:step",
                        serde_json::json!({
                            "platform": source.platform,
                            "user_id": source.user_id.clone().unwrap_or_default(),
                            "session_id": session_id,
                            "iteration": iteration,
                            "tool_names": names,
                        }),
                    );
                }
                AgentEvent::Delta(text) => {
                    if let Some(preview) = preview.as_mut() {
                        preview.push(&responder, &source, &text).await;
                    }
                }
                AgentEvent::StreamRestart => {
                    if let Some(preview) = preview.as_mut() {
                        preview.text.clear();
                    }
                }
                AgentEvent::ToolStarted {
                    name,
                    emoji,
                    preview: args,
                    ..
                } => {
                    let show = match mode {
                        ToolProgress::Off => false,
                        ToolProgress::New => name != last_tool,
                        ToolProgress::All | ToolProgress::Verbose => true,
                    };
                    last_tool = name.clone();
                    step_tools.push(name.clone());
                    if show {
                        let line = if args.is_empty() {
                            format!("{emoji} {name}")
                        } else {
                            format!("{emoji} {name}: {args}")
                        };
                        let line = crate::logging::mask_secrets(&line);
                        responder.send_direct(&source, &line).await;
                    }
                }
                _ => {}
            }
        }
        preview.and_then(|p| p.message_id)
    })))
}

/// Flood-control answers after which a preview stops being edited (Hermes's rule).
const MAX_FLOOD_HITS: u32 = 3;

/// Edit-in-place streaming: the first `buffer_threshold` characters open a preview
/// message, then it is edited at most every `edit_interval` until the turn ends. The
/// preview is best effort (never journaled); the final reply goes through the ledger as an
/// edit of the preview (`respond_by_edit`).
struct StreamPreview {
    text: String,
    message_id: Option<String>,
    last_edit: Option<Instant>,
    interval: Duration,
    threshold: usize,
    cursor: String,
    flood_hits: u32,
}

impl StreamPreview {
    fn new(config: &crate::config::StreamingConfig) -> Self {
        Self {
            text: String::new(),
            message_id: None,
            last_edit: None,
            interval: Duration::from_secs_f64(config.edit_interval_secs.max(0.1)),
            threshold: config.buffer_threshold as usize,
            cursor: config.cursor.clone(),
            flood_hits: 0,
        }
    }

    async fn push(
        &mut self,
        responder: &Responder,
        source: &hermes_adapter::SessionSource,
        delta: &str,
    ) {
        self.text.push_str(delta);
        if self.flood_hits >= MAX_FLOOD_HITS {
            return;
        }
        let due = self.last_edit.is_none_or(|t| t.elapsed() >= self.interval);
        if !due || self.text.chars().count() < self.threshold {
            return;
        }
        let Some(link) = responder.link(&source.platform) else {
            return;
        };
        let limit = link.adapter.capabilities().message_limit;
        let unit = link.adapter.capabilities().length_unit;
        // The final reply is masked by the agent; the preview shows the text so far, masked too.
        let shown = format!(
            "{}{}",
            crate::logging::mask_secrets(&self.text),
            self.cursor
        );
        if unit.measure(&shown) > limit {
            // Past one message: stop previewing; the final reply is chunked by delivery.
            self.flood_hits = MAX_FLOOD_HITS;
            return;
        }
        let kind = match &self.message_id {
            None => hermes_adapter::OutboundKind::Text {
                text: shown,
                reply_to: None,
                plain: true,
            },
            Some(id) => hermes_adapter::OutboundKind::Edit {
                message_id: id.clone(),
                text: shown,
            },
        };
        let outbound = hermes_adapter::Outbound {
            chat_id: source.chat_id.clone(),
            thread_id: source.thread_id.clone(),
            kind,
        };
        let Some(result) = send_checked(link.adapter.as_ref(), outbound).await else {
            return;
        };
        self.last_edit = Some(Instant::now());
        match result.kind() {
            None => {
                if self.message_id.is_none() {
                    self.message_id = result.message_id;
                }
            }
            Some(hermes_adapter::SendErrorKind::RateLimited) => self.flood_hits += 1,
            Some(_) => self.flood_hits = MAX_FLOOD_HITS,
        }
    }
}
