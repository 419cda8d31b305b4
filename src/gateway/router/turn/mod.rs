//! One agent turn for one event: prepare the session's agent, run the turn with typing and
//! tool-progress lines (or streamed deltas for the HTTP API), and answer the event once.

pub(super) mod budget;
pub(super) mod failure;
pub(super) mod media;
pub(super) mod pending_media;
pub(super) mod prompts;
pub(super) mod title;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::MessageEvent;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentError, AgentEvent};
use crate::config::ToolProgress;
use crate::gateway::incident::Incident;
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::slot::ApiTurnError;
use crate::gateway::router::slot::{Job, Running, Slot};
use crate::gateway::router::turn::budget::TURN_TIMEOUT_NOTICE;
use crate::gateway::router::{API_PLATFORM, Router};
use crate::gateway::typing::TypingLoop;

/// Longest quote of the replied-to message shown to the agent (reference `[:500]`).
const REPLY_SNIPPET_CHARS: usize = 500;

/// How often the typing indicator is refreshed during a turn.
pub(in crate::gateway::router) const TYPING_INTERVAL: Duration = Duration::from_secs(4);

/// The reply when no model provider is configured.
pub fn no_provider_text(reason: &str) -> String {
    format!(
        "⚠️ I can't answer yet: no model provider is configured ({reason}).\n\
         Set OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY in $HERMES_HOME/.env \
         (or model.provider / model.base_url / model.api_key in config.yaml), then reload hermesd \
         (`systemctl reload hermesd` or SIGHUP)."
    )
}

/// The user's text as the agent sees it: attachments and the quoted message included.
pub fn turn_text(event: &MessageEvent) -> String {
    let mut text = event.text.clone();
    // The reference quotes at most 500 characters, and says when the quoted message is the
    // bot's own (a reply to a bot message in a thread).
    if let Some(quoted) = event.reply_to_text.as_deref().filter(|t| !t.is_empty())
        && event.reply_to_message_id.is_some()
    {
        let snippet: String = quoted.chars().take(REPLY_SNIPPET_CHARS).collect();
        text = if event.reply_to_is_own_message {
            format!("[Replying to your previous message: \"{snippet}\"]\n\n{text}")
        } else {
            format!("[Replying to: \"{snippet}\"]\n\n{text}")
        };
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

pub(in crate::gateway::router) async fn run_turn(router: &Router, slot: &Arc<Slot>, job: Job) {
    let deps = match &router.live().agent {
        Ok(deps) => deps.clone(),
        Err(reason) => {
            router
                .responder
                .respond(&job, &no_provider_text(&reason.to_string()))
                .await;
            return;
        }
    };
    let event = &job.event;
    // The chat's `/model` choice (a `--once` choice first, used up by this turn), which
    // also decides whether a photo can be shown.
    let once = slot.lock().once_model.take();
    let chosen = once.or_else(|| {
        (event.source.platform != API_PLATFORM)
            .then(|| router.sessions.model_choice(&slot.key))
            .flatten()
    });
    let model = chosen
        .as_ref()
        .map(|c| c.model.clone())
        .unwrap_or_else(|| deps.model_name());
    // A session created by this turn starts on the chosen model, if it is still served.
    let served = chosen
        .as_ref()
        .filter(|c| deps.client.endpoints().iter().any(|e| e.model == c.model))
        .map(|c| c.model.clone());
    let Some(start) = crate::gateway::router::turn::media::turn_start(router, &job, &model).await
    else {
        return;
    };
    let mut prepared = match router
        .sessions
        .prepare_agent(
            &router.live().config,
            slot,
            &event.source,
            &deps,
            job.resumed,
            served.as_deref(),
        )
        .await
    {
        Ok(prepared) => prepared,
        Err(AgentError::Store(e)) if e.is_lease_lost() => {
            crate::gateway::router::cluster::lease_lost(router, slot, &job, &e, false);
            return;
        }
        Err(e) => {
            let incident = Incident::new();
            tracing::error!(incident = incident.id(), session_key = %slot.key, error = %e, "cannot prepare the session");
            crate::gateway::router::turn::failure::answer_incident(router, &job, &incident).await;
            return;
        }
    };
    if let Some(notice) = prepared.notice.take() {
        router.responder.send_direct(&event.source, &notice).await;
    }
    let mut agent = prepared.agent;
    agent.attach_images(start.images);
    agent.set_request_system(job.api.as_ref().and_then(|api| api.system.clone()));
    // The cached agent may have served someone else's turn in this session: whom this
    // turn acts for decides the tools it is offered (a guest's are fewer).
    agent.set_caller(crate::tools::context::Caller {
        authority: job.authority,
        platform: event.source.platform.clone(),
        chat_id: event.source.chat_id.clone(),
        user_id: event.source.user_id.clone(),
    });
    // A choice whose provider no endpoint has any more (or a record written by another
    // Hermes naming providers differently) still picks its model from any provider.
    let any_provider = chosen
        .as_ref()
        .map(|c| crate::agent::provider::ModelChoice {
            model: c.model.clone(),
            provider: None,
        });
    if !agent.set_model(chosen.as_ref()) && !agent.set_model(any_provider.as_ref()) {
        // The model was removed from config.yaml since `/model` chose it.
        tracing::warn!(session_key = %slot.key, model = ?chosen, "the session's chosen model is no longer configured; using the default");
        agent.set_model(None);
    }
    let cancel = CancellationToken::new();
    let steer = Arc::new(Mutex::new(Vec::new()));
    agent.set_steer_inbox(steer.clone());
    let (events, progress) = crate::agent::event_channel();
    slot.lock().running = Some(Running {
        source: event.source.clone(),
        cancel: cancel.clone(),
        started: Instant::now(),
        event_id: event.event_id.clone(),
        steer,
        stopped: false,
        activity: events.activity(),
        timed_out: false,
    });
    let budget = crate::gateway::router::turn::budget::watch_turn_budget(router, slot);
    crate::gateway::router::fault::maybe_panic(&router.live().env, &event.text);
    let typing = router
        .responder
        .link(&event.source.platform)
        .and_then(|link| {
            link.typing.then(|| {
                TypingLoop::start(
                    link.adapter.clone(),
                    &event.source.chat_id,
                    event.source.thread_id.as_deref(),
                    TYPING_INTERVAL,
                )
            })
        });
    let forwarder = spawn_progress(router, &job, progress);
    GatewayMetrics::incr(&router.metrics.turns_started);
    let text = start.text;
    let inbound = (event.source.platform.as_str(), event.event_id.as_str());
    let result = if job.api.is_some() && job.resumed {
        // Taken up again after a lost lease, its user message already stored.
        agent.resume_turn(&events, &cancel).await
    } else if job.api.is_some() {
        agent.run_turn(&text, &events, &cancel).await
    } else if job.resumed {
        agent.resume_journaled_turn(inbound, &events, &cancel).await
    } else {
        agent
            .run_journaled_turn(&text, inbound, &events, &cancel)
            .await
    };
    drop(budget);
    drop(events);
    drop(typing);
    let preview = match forwarder {
        Some(forwarder) => forwarder.await.ok().flatten(),
        None => None,
    };
    // A completed turn edits its streamed preview into the reply (`respond_by_edit`);
    // any other outcome removes the preview before answering.
    let completed = matches!(&result, Ok(outcome) if !outcome.interrupted);
    let preview = match preview {
        Some(message_id) if !completed => {
            router
                .responder
                .delete_preview(&event.source, message_id)
                .await;
            None
        }
        preview => preview,
    };
    let running = slot.lock().running.take();
    let stopped = running.as_ref().is_some_and(|running| running.stopped);
    let timed_out = running.as_ref().is_some_and(|running| running.timed_out);
    // Steer texts the turn never read (no tool round after they came) are the next turn;
    // after `/stop` they go the way of the discarded queue.
    let leftover = match &running {
        Some(running) if !stopped => crate::gateway::router::steer::leftover(running),
        _ => Vec::new(),
    };
    match result {
        Ok(outcome) if outcome.interrupted => {
            // A turn interrupted by shutdown stays unfinished: the next start resumes it.
            // One interrupted by the user is answered by the reply to what interrupted it.
            let by_shutdown = router.is_shutting_down() && !stopped && !timed_out;
            if timed_out {
                // Out of its budget: the event's one answer says so.
                GatewayMetrics::incr(&router.metrics.turns_failed);
                slot.lock().agent = Some(agent);
                match &job.api {
                    Some(api) => crate::gateway::router::responder::Responder::answer_api_error(
                        api,
                        ApiTurnError::TimedOut,
                    ),
                    None => router.responder.respond(&job, TURN_TIMEOUT_NOTICE).await,
                }
            } else if !by_shutdown {
                slot.lock().agent = Some(agent);
                router.responder.answer_silently(&job).await;
            } else if let Some(api) = &job.api {
                crate::gateway::router::responder::Responder::answer_api_error(
                    api,
                    ApiTurnError::ShuttingDown,
                );
            }
        }
        Ok(outcome) => {
            GatewayMetrics::incr(&router.metrics.turns_completed);
            if outcome.session_id != slot_session(router, slot)
                && event.source.platform != API_PLATFORM
                && let Err(e) = router
                    .sessions
                    .repoint(&slot.key, &event.source, &outcome.session_id, false)
                    .await
            {
                tracing::warn!(error = %e, "cannot repoint the session after compression");
            }
            let early_exchange = crate::agent::title::is_early_exchange(agent.history());
            slot.lock().agent = Some(agent);
            let answered = !outcome.reply.trim().is_empty();
            let reply = if answered {
                outcome.reply
            } else {
                "(The agent finished without a reply.)".to_owned()
            };
            match preview {
                Some(preview_id) => {
                    router
                        .responder
                        .respond_by_edit(&job, &reply, Some(&outcome.session_id), preview_id)
                        .await
                }
                None => {
                    router
                        .responder
                        .respond_in(&job, &reply, Some(&outcome.session_id))
                        .await
                }
            }
            if answered {
                crate::gateway::router::turn::title::spawn_auto_title(
                    router,
                    &event.source,
                    &outcome.session_id,
                    &event.text,
                    &reply,
                    early_exchange,
                );
            }
        }
        Err(e) => {
            GatewayMetrics::incr(&router.metrics.turns_failed);
            GatewayMetrics::incr(&router.metrics.agent_errors);
            match e {
                // The model's failure, already scrubbed and meant for the user: one line
                // naming each provider tried.
                AgentError::Provider(e) => {
                    tracing::warn!(session_key = %slot.key, error = %e, "turn failed");
                    // A provider may echo any credential; none reaches the user.
                    let shown = crate::logging::mask_secrets(&e.to_string());
                    match &job.api {
                        Some(api) => {
                            crate::gateway::router::responder::Responder::answer_api_error(
                                api,
                                ApiTurnError::Provider(shown),
                            )
                        }
                        None => {
                            router
                                .responder
                                .respond(&job, &format!("⚠️ Sorry, that failed: {shown}"))
                                .await
                        }
                    }
                }
                // Another instance took the session over (this one stalled past its
                // lease): that instance answers the event; this one stays silent.
                AgentError::Store(e) if e.is_lease_lost() => {
                    crate::gateway::router::cluster::lease_lost(
                        router,
                        slot,
                        &job,
                        &e,
                        agent.turn_recorded(),
                    );
                    return;
                }
                // Our own failure: details to the log, an incident id to the user.
                AgentError::Store(e) => {
                    let incident = Incident::new();
                    tracing::error!(incident = incident.id(), session_key = %slot.key, error = %e, "turn failed");
                    crate::gateway::router::turn::failure::answer_incident(router, &job, &incident)
                        .await;
                }
            }
        }
    }
    crate::gateway::router::steer::carry_over_steer(router, slot, &job, leftover).await;
}

/// Forwards a turn's events: streamed deltas to an API client; to a chat, tool-progress
/// lines (per `display.tool_progress`) and, when streaming is on and the platform can
/// edit, a preview message edited in place. Resolves to the preview's message id.
pub(in crate::gateway::router) fn spawn_progress(
    router: &Router,
    job: &Job,
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
    let live = router.live();
    let display = &live.config.display;
    let overrides = display.platforms.get(&platform);
    let mode = overrides
        .and_then(|p| p.tool_progress)
        .unwrap_or(display.tool_progress);
    let can_edit = router
        .responder
        .link(&platform)
        .is_some_and(|l| l.adapter.capabilities().edits);
    let streaming = overrides
        .and_then(|p| p.streaming)
        .unwrap_or(live.config.streaming.enabled)
        && can_edit;
    let mut preview = streaming.then(|| StreamPreview::new(&live.config.streaming));
    let router = router.arc();
    let source = job.event.source.clone();
    Some(tokio::spawn(async move {
        let mut last_tool = String::new();
        while let Some(event) = progress.recv().await {
            match event {
                AgentEvent::Delta(text) => {
                    if let Some(preview) = preview.as_mut() {
                        preview.push(&router, &source, &text).await;
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
                    if show {
                        let line = if args.is_empty() {
                            format!("{emoji} {name}")
                        } else {
                            format!("{emoji} {name}: {args}")
                        };
                        let line = crate::logging::mask_secrets(&line);
                        router.responder.send_direct(&source, &line).await;
                    }
                }
                _ => {}
            }
        }
        preview.and_then(|p| p.message_id)
    }))
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

    async fn push(&mut self, router: &Router, source: &hermes_adapter::SessionSource, delta: &str) {
        self.text.push_str(delta);
        if self.flood_hits >= MAX_FLOOD_HITS {
            return;
        }
        let due = self.last_edit.is_none_or(|t| t.elapsed() >= self.interval);
        if !due || self.text.chars().count() < self.threshold {
            return;
        }
        let Some(link) = router.responder.link(&source.platform) else {
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
        let result = link
            .adapter
            .send(hermes_adapter::Outbound {
                chat_id: source.chat_id.clone(),
                thread_id: source.thread_id.clone(),
                kind,
            })
            .await;
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

fn slot_session(router: &Router, slot: &Slot) -> String {
    router
        .sessions
        .current_session_id(&slot.key)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use hermes_adapter::{MessageEvent, SessionSource};

    use super::turn_text;

    fn reply(quoted: &str, own: bool) -> MessageEvent {
        let mut event = MessageEvent::text("e1", SessionSource::dm("slack", "D1", "U1"), "and?");
        event.reply_to_message_id = Some("1.1".into());
        event.reply_to_text = Some(quoted.into());
        event.reply_to_is_own_message = own;
        event
    }

    #[test]
    fn quotes_follow_the_reference() {
        assert_eq!(
            turn_text(&reply("hi", false)),
            "[Replying to: \"hi\"]\n\nand?"
        );
        assert_eq!(
            turn_text(&reply("my answer", true)),
            "[Replying to your previous message: \"my answer\"]\n\nand?"
        );
        let long = "é".repeat(600);
        let quoted = turn_text(&reply(&long, false));
        assert_eq!(
            quoted,
            format!("[Replying to: \"{}\"]\n\nand?", "é".repeat(500))
        );
        let mut no_target = reply("hi", false);
        no_target.reply_to_message_id = None;
        assert_eq!(turn_text(&no_target), "and?");
    }
}
