//! The photos and voice messages of an event, made into its turn before the agent runs
//! (`gateway::inbound_media`): transcripts are echoed, attachments the model cannot get are
//! explained in one line each, and an event left with nothing for the model is answered
//! with those lines instead of a turn.

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use crate::agent::message::ImagePart;
use crate::gateway::inbound_media;
use crate::gateway::router::live::Live;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::Job;
use crate::gateway::router::turn::turn_text;

/// What the agent's turn is built from.
pub(in crate::gateway::router) struct TurnStart {
    pub text: String,
    pub images: Vec<ImagePart>,
}

/// The turn for `job`, or `None` when the event was answered here (nothing usable).
pub(in crate::gateway::router) async fn turn_start(
    responder: &Arc<Responder>,
    live: &Live,
    job: &Job,
    model: &str,
) -> Option<TurnStart> {
    let event: &MessageEvent = &job.event;
    // An API request carries no attachments; a resumed turn's message is already stored.
    if job.api.is_some() || job.resumed || !inbound_media::has_media(event) {
        return Some(TurnStart {
            text: turn_text(event),
            images: Vec::new(),
        });
    }
    let input =
        inbound_media::prepare(event, &turn_text(event), &live.config, &live.env, model).await;
    for echo in &input.echoes {
        responder.send_direct(&event.source, echo).await;
    }
    if !input.usable {
        responder.respond(job, &input.notices.join("\n")).await;
        return None;
    }
    for notice in &input.notices {
        responder.send_direct(&event.source, notice).await;
    }
    Some(TurnStart {
        text: input.text,
        images: input.images,
    })
}
