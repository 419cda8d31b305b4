//! One agent turn for one event: prepare the session's agent, run the turn with typing and
//! tool-progress lines (or streamed deltas for the HTTP API), and answer the event once.

pub(super) mod budget;
pub(super) mod failure;
pub(super) mod media;
pub(super) mod pending_media;
pub(super) mod progress;
pub(super) mod title;
mod voice;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::MessageEvent;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentError;
use crate::gateway::incident::Incident;
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::API_PLATFORM;
use crate::gateway::router::handles::{LiveCell, Stopping};
use crate::gateway::router::responder::Responder;
use crate::gateway::router::session::Sessions;
use crate::gateway::router::slot::ApiTurnError;
use crate::gateway::router::slot::{Job, Running, Slot};
use crate::gateway::router::turn::budget::TURN_TIMEOUT_NOTICE;
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

/// Runs agent turns. Its parts are what a turn reads and answers through: the current
/// settings and agent, the session book, the responder, the metrics and the shutdown flag.
pub(in crate::gateway::router) struct TurnRunner {
    pub live: Arc<LiveCell>,
    pub sessions: Arc<Sessions>,
    pub responder: Arc<Responder>,
    pub metrics: Arc<GatewayMetrics>,
    pub stopping: Stopping,
}

/// How a turn ended, for the worker that ran it.
pub(in crate::gateway::router) enum TurnEnd {
    /// The event was answered (or, at shutdown, left unfinished for the next start); the
    /// steer texts the turn never read come back to become the next turn.
    Finished(Vec<String>),
    /// The session's lease was lost mid-turn (PostgreSQL): nothing was answered, and the
    /// cluster link decides what becomes of the job. `recorded`: the turn's user message
    /// was stored before the loss.
    LeaseLost {
        error: crate::state::StoreError,
        recorded: bool,
    },
}

impl TurnRunner {
    /// Runs `job`'s turn in `slot` and answers its event once (see the module docs).
    pub(in crate::gateway::router) async fn run(&self, slot: &Arc<Slot>, job: &Job) -> TurnEnd {
        let live = self.live.get();
        let deps = match &live.agent {
            Ok(deps) => deps.clone(),
            Err(reason) => {
                self.responder
                    .respond(job, &no_provider_text(&reason.to_string()))
                    .await;
                return TurnEnd::Finished(Vec::new());
            }
        };
        let event = &job.event;
        // The chat's `/model` choice (a `--once` choice first, used up by this turn), which
        // also decides whether a photo can be shown.
        let once = slot.lock().once_model.take();
        let chosen = once.or_else(|| {
            (event.source.platform != API_PLATFORM)
                .then(|| self.sessions.model_choice(&slot.key))
                .flatten()
        });
        let model = chosen
            .as_ref()
            .map(|c| c.model.clone())
            .unwrap_or_else(|| deps.model_name());
        // A session created by this turn starts on the chosen model, if it is still served.
        let served = chosen
            .as_ref()
            .filter(|c| {
                deps.client
                    .endpoints()
                    .iter()
                    .any(|e| e.model == c.model || c.served_by(e))
            })
            .map(|c| c.model.clone());
        let Some(start) = media::turn_start(&self.responder, &live, job, &model).await else {
            return TurnEnd::Finished(Vec::new());
        };
        let mut prepared = match self
            .sessions
            .prepare_agent(
                &live.config,
                slot,
                &event.source,
                &deps,
                job.resumed,
                served.as_deref(),
            )
            .await
        {
            Ok(prepared) => prepared,
            Err(AgentError::Store(error)) if error.is_lease_lost() => {
                return TurnEnd::LeaseLost {
                    error,
                    recorded: false,
                };
            }
            Err(e) => {
                let incident = Incident::new();
                tracing::error!(incident = incident.id(), session_key = %slot.key, error = %e, "cannot prepare the session");
                failure::answer_incident(&self.responder, job, &incident).await;
                return TurnEnd::Finished(Vec::new());
            }
        };
        if let Some(notice) = prepared.notice.take() {
            self.responder.send_direct(&event.source, &notice).await;
        }
        let mut agent = prepared.agent;
        agent.attach_images(start.images);
        // The operator's `agent.system_prompt` (what `/personality` sets), then an API
        // caller's own `system`: both per request, neither stored with the session.
        agent.set_request_system(crate::agent::layered_system(
            &live.config.personality.system_prompt,
            job.api.as_ref().and_then(|api| api.system.as_deref()),
        ));
        // The cached agent may have served someone else's turn in this session: whom this
        // turn acts for decides the tools it is offered (a guest's are fewer).
        agent.set_caller(crate::tools::context::Caller {
            authority: job.authority,
            platform: event.source.platform.clone(),
            chat_id: event.source.chat_id.clone(),
            user_id: event.source.user_id.clone(),
            thread_id: event.source.thread_id.clone(),
        });
        // A choice whose provider no endpoint has any more (or a record written by another
        // Hermes naming providers differently) still picks its model from any provider.
        let any_provider = chosen
            .as_ref()
            .map(|c| crate::agent::provider::ModelChoice::configured(c.model.clone(), None));
        if !agent.set_model(chosen.as_ref()) && !agent.set_model(any_provider.as_ref()) {
            // The model was removed from config.yaml (or its listing's server) since
            // `/model` chose it.
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
        let budget = budget::watch_turn_budget(&live.config.agent, &self.responder, slot);
        crate::gateway::router::fault::maybe_panic(&live.env, &event.text);
        let typing = self
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
        let hook_session = agent.session_id().to_owned();
        let forwarder =
            progress::spawn_progress(&self.responder, &live, job, &hook_session, progress);
        GatewayMetrics::incr(&self.metrics.turns_started);
        let text = start.text;
        let inbound = (event.source.platform.as_str(), event.event_id.as_str());
        if agent.history().is_empty() {
            let mut context = crate::gateway::event_hooks::chat_context(&event.source, &slot.key);
            context["session_id"] = hook_session.clone().into();
            live.events.emit("session:start", context);
        }
        live.events.emit(
            "agent:start",
            crate::gateway::event_hooks::agent_context(&event.source, &hook_session, &event.text),
        );
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
        // After the progress forwarder ended: its agent:step events are queued before this.
        if let Ok(outcome) = &result {
            live.events.emit(
                "agent:end",
                crate::gateway::event_hooks::agent_end_context(
                    &event.source,
                    &outcome.session_id,
                    &event.text,
                    &outcome.reply,
                ),
            );
        }
        // A completed turn edits its streamed preview into the reply (`respond_by_edit`);
        // any other outcome removes the preview before answering.
        let completed = matches!(&result, Ok(outcome) if !outcome.interrupted);
        let preview = match preview {
            Some(message_id) if !completed => {
                self.responder
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
                let by_shutdown = self.stopping.is_set() && !stopped && !timed_out;
                if timed_out {
                    // Out of its budget: the event's one answer says so.
                    GatewayMetrics::incr(&self.metrics.turns_failed);
                    slot.lock().agent = Some(agent);
                    match &job.api {
                        Some(api) => {
                            crate::gateway::router::responder::Responder::answer_api_error(
                                api,
                                ApiTurnError::TimedOut,
                            )
                        }
                        None => self.responder.respond(job, TURN_TIMEOUT_NOTICE).await,
                    }
                } else if !by_shutdown {
                    slot.lock().agent = Some(agent);
                    self.responder.answer_silently(job).await;
                } else if let Some(api) = &job.api {
                    crate::gateway::router::responder::Responder::answer_api_error(
                        api,
                        ApiTurnError::ShuttingDown,
                    );
                }
            }
            Ok(outcome) => {
                GatewayMetrics::incr(&self.metrics.turns_completed);
                if outcome.session_id != self.slot_session(slot)
                    && event.source.platform != API_PLATFORM
                    && let Err(e) = self
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
                // A spoken reply carries its voice note (`voice.rs`).
                let answer = if answered {
                    voice::maybe_speak(&live, &deps, event, reply.clone()).await
                } else {
                    reply.clone()
                };
                match preview {
                    Some(preview_id) => {
                        self.responder
                            .respond_by_edit(job, &answer, Some(&outcome.session_id), preview_id)
                            .await
                    }
                    None => {
                        self.responder
                            .respond_in(job, &answer, Some(&outcome.session_id))
                            .await
                    }
                }
                if answered {
                    title::spawn_auto_title(
                        &live,
                        &self.responder,
                        &event.source,
                        &outcome.session_id,
                        &event.text,
                        &reply,
                        early_exchange,
                    );
                }
            }
            Err(e) => {
                GatewayMetrics::incr(&self.metrics.turns_failed);
                GatewayMetrics::incr(&self.metrics.agent_errors);
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
                                self.responder
                                    .respond(job, &format!("⚠️ Sorry, that failed: {shown}"))
                                    .await
                            }
                        }
                    }
                    // Another instance took the session over (this one stalled past its
                    // lease): that instance answers the event; this one stays silent.
                    AgentError::Store(error) if error.is_lease_lost() => {
                        return TurnEnd::LeaseLost {
                            error,
                            recorded: agent.turn_recorded(),
                        };
                    }
                    // Another holder answered this event while the session was away from
                    // this instance (a queued copy outlived a lost hold): nothing to do.
                    AgentError::Store(error) if error.is_already_answered() => {
                        tracing::info!(session_key = %slot.key, %error,
                            "not run again: the event was answered by another holder of the session");
                    }
                    // Our own failure: details to the log, an incident id to the user.
                    AgentError::Store(e) => {
                        let incident = Incident::new();
                        tracing::error!(incident = incident.id(), session_key = %slot.key, error = %e, "turn failed");
                        failure::answer_incident(&self.responder, job, &incident).await;
                    }
                }
            }
        }
        TurnEnd::Finished(leftover)
    }

    /// The session id the slot's key routes to now.
    fn slot_session(&self, slot: &Slot) -> String {
        self.sessions
            .current_session_id(&slot.key)
            .unwrap_or_default()
    }
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
