//! One agent turn for one event: prepare the session's agent, run the turn with typing and
//! tool-progress lines (or streamed deltas for the HTTP API), and answer the event once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::MessageEvent;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::slot::{Job, Running, Slot};
use super::{API_PLATFORM, Router};
use crate::agent::AgentEvent;
use crate::config::ToolProgress;
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::typing::TypingLoop;

/// How often the typing indicator is refreshed during a turn.
const TYPING_INTERVAL: Duration = Duration::from_secs(4);

/// The reply when no model provider is configured.
pub fn no_provider_text(reason: &str) -> String {
    format!(
        "⚠️ I can't answer yet: no model provider is configured ({reason}).\n\
         Set OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY in $HERMES_HOME/.env \
         (or model.provider / model.base_url / model.api_key in config.yaml) and restart hermesd."
    )
}

/// The user's text as the agent sees it: attachments and the quoted message included.
pub fn turn_text(event: &MessageEvent) -> String {
    let mut text = event.text.clone();
    if let Some(quoted) = event.reply_to_text.as_deref().filter(|t| !t.is_empty()) {
        text = format!("[Replying to: \"{quoted}\"]\n\n{text}");
    }
    if !event.media_paths.is_empty() {
        let files: Vec<String> = event
            .media_paths
            .iter()
            .zip(
                event
                    .media_types
                    .iter()
                    .map(Some)
                    .chain(std::iter::repeat(None)),
            )
            .map(|(path, kind)| match kind {
                Some(kind) => format!("{path} ({kind})"),
                None => path.clone(),
            })
            .collect();
        text.push_str(&format!("\n\n[The user attached: {}]", files.join(", ")));
    }
    text
}

impl Router {
    pub(super) async fn run_turn(&self, slot: &Arc<Slot>, job: Job) {
        let deps = match &self.agent {
            Ok(deps) => deps.clone(),
            Err(reason) => {
                self.respond(&job, &no_provider_text(reason)).await;
                return;
            }
        };
        let event = &job.event;
        let mut prepared = match self
            .prepare_agent(slot, &event.source, &deps, job.resumed)
            .await
        {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::error!(session_key = %slot.key, error = %e, "cannot prepare the session");
                self.respond(
                    &job,
                    &format!("⚠️ Sorry, I couldn't open this conversation: {e}"),
                )
                .await;
                return;
            }
        };
        if let Some(notice) = prepared.notice.take() {
            self.send_direct(&event.source, &notice).await;
        }
        let mut agent = prepared.agent;
        let cancel = CancellationToken::new();
        let steer = Arc::new(Mutex::new(Vec::new()));
        agent.set_steer_inbox(steer.clone());
        slot.lock().running = Some(Running {
            source: event.source.clone(),
            cancel: cancel.clone(),
            started: Instant::now(),
            event_id: event.event_id.clone(),
            steer,
            stopped: false,
        });
        let typing = self.link(&event.source.platform).and_then(|link| {
            link.typing.then(|| {
                TypingLoop::start(
                    link.adapter.clone(),
                    &event.source.chat_id,
                    event.source.thread_id.as_deref(),
                    TYPING_INTERVAL,
                )
            })
        });
        let (events, progress) = mpsc::unbounded_channel();
        let forwarder = self.spawn_progress(&job, progress);
        GatewayMetrics::incr(&self.metrics.turns_started);
        let text = turn_text(event);
        let result = if job.api.is_some() {
            agent.run_turn(&text, &events, &cancel).await
        } else if job.resumed {
            agent.resume_turn(&events, &cancel).await
        } else {
            let inbound = (event.source.platform.as_str(), event.event_id.as_str());
            agent
                .run_journaled_turn(&text, inbound, &events, &cancel)
                .await
        };
        drop(events);
        drop(typing);
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        let stopped = slot
            .lock()
            .running
            .take()
            .is_some_and(|running| running.stopped);
        match result {
            Ok(outcome) if outcome.interrupted => {
                // A turn interrupted by shutdown stays unfinished: the next start resumes it.
                // One interrupted by the user is answered by the reply to what interrupted it.
                let by_shutdown = self.is_shutting_down() && !stopped;
                if !by_shutdown {
                    slot.lock().agent = Some(agent);
                    self.answer_silently(&job).await;
                } else if let Some(api) = &job.api {
                    Self::answer_api_error(api, "the gateway is shutting down");
                }
            }
            Ok(outcome) => {
                GatewayMetrics::incr(&self.metrics.turns_completed);
                if outcome.session_id != slot_session(self, slot)
                    && event.source.platform != API_PLATFORM
                    && let Err(e) = self
                        .repoint(&slot.key, &event.source, &outcome.session_id, false)
                        .await
                {
                    tracing::warn!(error = %e, "cannot repoint the session after compression");
                }
                slot.lock().agent = Some(agent);
                let reply = if outcome.reply.trim().is_empty() {
                    "(The agent finished without a reply.)".to_owned()
                } else {
                    outcome.reply
                };
                self.respond_in(&job, &reply, Some(&outcome.session_id))
                    .await;
            }
            Err(e) => {
                GatewayMetrics::incr(&self.metrics.turns_failed);
                GatewayMetrics::incr(&self.metrics.agent_errors);
                tracing::warn!(session_key = %slot.key, error = %e, "turn failed");
                match &job.api {
                    Some(api) => Self::answer_api_error(api, &e.to_string()),
                    None => {
                        self.respond(&job, &format!("⚠️ Sorry, that failed: {e}"))
                            .await
                    }
                }
            }
        }
    }

    /// Forwards a turn's events: streamed deltas to an API client, tool-progress lines to a
    /// chat (per `display.tool_progress`).
    fn spawn_progress(
        &self,
        job: &Job,
        mut progress: mpsc::UnboundedReceiver<AgentEvent>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if let Some(api) = &job.api {
            let deltas = api.deltas.clone()?;
            return Some(tokio::spawn(async move {
                while let Some(event) = progress.recv().await {
                    if deltas.send(event).is_err() {
                        break;
                    }
                }
            }));
        }
        let display = &self.config.display;
        let mode = display
            .platforms
            .get(&job.event.source.platform)
            .and_then(|p| p.tool_progress)
            .unwrap_or(display.tool_progress);
        let router = self.arc();
        let source = job.event.source.clone();
        Some(tokio::spawn(async move {
            let mut last_tool = String::new();
            while let Some(event) = progress.recv().await {
                let AgentEvent::ToolStarted {
                    name,
                    emoji,
                    preview,
                    ..
                } = event
                else {
                    continue;
                };
                let show = match mode {
                    ToolProgress::Off => false,
                    ToolProgress::New => name != last_tool,
                    ToolProgress::All | ToolProgress::Verbose => true,
                };
                last_tool = name.clone();
                if show {
                    let line = if preview.is_empty() {
                        format!("{emoji} {name}")
                    } else {
                        format!("{emoji} {name}: {preview}")
                    };
                    router.send_direct(&source, &line).await;
                }
            }
        }))
    }
}

fn slot_session(router: &Router, slot: &Slot) -> String {
    router.current_session_id(&slot.key).unwrap_or_default()
}
