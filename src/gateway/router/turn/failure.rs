//! When a turn fails inside hermesd rather than at the model: the user gets one short
//! sentence with an incident id (see `gateway::incident`) and the log the details under that
//! id. A panicking turn is also cleaned up here, so its session keeps answering.

use std::any::Any;
use std::sync::Arc;

use crate::gateway::incident::Incident;
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::{Job, Slot};
use crate::gateway::router::turn::TurnRunner;
use crate::state::StoreError;

/// Cleans up after `job` panicked (see `run_job`): the slot stops saying "running", the
/// cached agent is dropped (the next turn reloads the conversation from state.db), the
/// event is answered and counted, and the steer texts the turn never read are returned to
/// run next.
impl TurnRunner {
    pub(in crate::gateway::router) async fn turn_panicked(
        &self,
        slot: &Arc<Slot>,
        job: &Job,
        panic: Box<dyn Any + Send>,
    ) -> Vec<String> {
        // Read before any await: the payload is not `Sync`.
        let message = panic_message(panic.as_ref());
        drop(panic);
        GatewayMetrics::incr(&self.metrics.turn_panics);
        let running = {
            let mut state = slot.lock();
            state.agent = None;
            state.running.take()
        };
        let incident = Incident::new();
        tracing::error!(
            incident = incident.id(),
            session_key = %slot.key,
            platform = %job.event.source.platform,
            event_id = %job.event.event_id,
            panic = %message,
            "a turn panicked; its session goes on"
        );
        answer_incident(&self.responder, job, &incident).await;
        match running.filter(|running| !running.stopped) {
            Some(running) => crate::gateway::router::steer::leftover(&running),
            None => Vec::new(),
        }
    }
}

/// Answers `job` with `incident`'s sentence (an API request gets it as its error).
pub(in crate::gateway::router) async fn answer_incident(
    responder: &Arc<Responder>,
    job: &Job,
    incident: &Incident,
) {
    match &job.api {
        Some(api) => crate::gateway::router::responder::Responder::answer_api_error(
            api,
            crate::gateway::router::slot::ApiTurnError::Incident(incident.user_text()),
        ),
        None => responder.respond(job, &incident.user_text()).await,
    }
}

/// A store error as a command's answer: what the user can act on (no such session, a title
/// taken or invalid) in its own words; anything internal as an incident, logged with `doing`.
pub(in crate::gateway::router) fn store_error_text(e: &StoreError, doing: &str) -> String {
    if meant_for_the_user(e) {
        return format!("⚠️ {e}");
    }
    let incident = Incident::new();
    tracing::error!(incident = incident.id(), error = %e, "{doing} failed");
    incident.user_text()
}

fn meant_for_the_user(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::SessionNotFound(_)
            | StoreError::AmbiguousPrefix { .. }
            | StoreError::Invalid(_)
            | StoreError::TitleInUse { .. }
    )
}

/// The panic's message, when it has one.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_store_errors_become_incidents_and_user_mistakes_stay_readable() {
        let taken = StoreError::TitleInUse {
            title: "plans".into(),
            holder: "s1".into(),
        };
        assert_eq!(store_error_text(&taken, "renaming"), format!("⚠️ {taken}"));
        let internal = StoreError::WriteFailed("disk I/O error at /var/lib/x".into());
        let text = store_error_text(&internal, "renaming");
        assert!(text.contains("(incident "), "{text}");
        assert!(!text.contains("disk") && !text.contains("/var"), "{text}");
        assert!(store_error_text(&StoreError::Closed, "x").contains("(incident "));
    }
}
