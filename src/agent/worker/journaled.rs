//! Gateway turns tied to an inbound event: the user's message and the event's `processing`
//! mark are stored in one write, and the turn's photos are kept (`turn_images.rs`: under the
//! home, or shared by the instances of a cluster) until it ends, so a restart — or another
//! instance — can finish a started turn with the same pixels.

use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError, TurnOutcome};
use crate::agent::event_channel::EventSink;
use crate::agent::history;
use crate::agent::message::{ChatMessage, ImagePart, Role, ToolCall};

impl Agent {
    /// Runs a gateway turn for an inbound event: the user's message is stored and the event
    /// marked `processing` in one write, so a restart can tell a started turn from a new one.
    pub async fn run_journaled_turn(
        &mut self,
        user_text: &str,
        inbound: (&str, &str),
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.deps.memory.reset_consolidation_failures();
        self.marks_tool_starts = true;
        let mut message = ChatMessage::user(user_text);
        message.images = std::mem::take(&mut self.pending_images);
        // The pixels stay out of state.db; kept under the home until the turn ends so a
        // resume after a crash sends them again.
        let kept_images = !message.images.is_empty();
        self.keep_turn_images(inbound, message.images.clone()).await;
        let stored = history::to_stored(&self.session_id, &message, None);
        let (platform, event_id) = inbound;
        self.deps
            .store
            .start_turn(stored, platform, event_id)
            .await?;
        self.history.push(message);
        let outcome = self.continue_then_forget_images(events, cancel).await;
        // A text-only turn kept nothing (and a run of this event before a crash had the
        // same payload, so neither did it): nothing to forget, no statement on a cluster.
        if kept_images {
            self.forget_turn_images(inbound).await;
        }
        outcome
    }

    /// Finishes the turn for `inbound` a previous process started (its user message is
    /// already stored): a stored final answer is returned as is; otherwise the loop
    /// continues from the stored history, the turn's photos back on its user message.
    pub async fn resume_journaled_turn(
        &mut self,
        inbound: (&str, &str),
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.marks_tool_starts = true;
        if let Some(outcome) = self.stored_answer() {
            self.forget_turn_images(inbound).await;
            return Ok(outcome);
        }
        let kept = self.deps.turn_images.clone();
        let owned = (inbound.0.to_owned(), inbound.1.to_owned());
        let images = tokio::task::spawn_blocking(move || kept.load((&owned.0, &owned.1)))
            .await
            .unwrap_or_default();
        if let Some(user) = self
            .history
            .iter_mut()
            .rev()
            .find(|m| m.role == crate::agent::message::Role::User)
        {
            user.images = images;
        }
        self.run_calls_never_started(events, cancel).await?;
        let outcome = self.continue_then_forget_images(events, cancel).await;
        self.forget_turn_images(inbound).await;
        outcome
    }

    pub(super) async fn keep_turn_images(&self, inbound: (&str, &str), images: Vec<ImagePart>) {
        if images.is_empty() {
            return;
        }
        let kept = self.deps.turn_images.clone();
        let owned = (inbound.0.to_owned(), inbound.1.to_owned());
        let saved =
            tokio::task::spawn_blocking(move || kept.save((&owned.0, &owned.1), &images)).await;
        if let Ok(Err(e)) = saved {
            tracing::warn!(error = %e, "cannot keep the turn's photos for a resume");
        }
    }

    pub(super) async fn forget_turn_images(&self, inbound: (&str, &str)) {
        let kept = self.deps.turn_images.clone();
        let owned = (inbound.0.to_owned(), inbound.1.to_owned());
        let _ = tokio::task::spawn_blocking(move || kept.remove((&owned.0, &owned.1))).await;
    }
}

impl Agent {
    /// A resumed journaled turn whose stored history ends in a tool round with calls left
    /// without a result runs those no mark says started (the previous holder stopped before
    /// running them), and stores their results. A call marked as started may have run, so it
    /// is never run again: the request gives it the "unavailable" result.
    async fn run_calls_never_started(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), AgentError> {
        let Some(round) = self
            .history
            .iter()
            .rposition(|m| m.role != Role::Tool)
            .filter(|&i| self.history[i].role == Role::Assistant)
        else {
            return Ok(());
        };
        let answered: Vec<&str> = self.history[round + 1..]
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        let unanswered: Vec<ToolCall> = self.history[round]
            .tool_calls
            .iter()
            .filter(|c| !answered.contains(&c.id.as_str()))
            .cloned()
            .collect();
        if unanswered.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = unanswered.iter().map(|c| c.id.clone()).collect();
        let started = self
            .deps
            .store
            .started_tool_calls(&self.session_id, &ids)
            .await?;
        let never: Vec<ToolCall> = unanswered
            .into_iter()
            .filter(|c| !started.contains(&c.id))
            .collect();
        if never.is_empty() {
            return Ok(());
        }
        tracing::info!(session_id = %self.session_id, calls = never.len(),
            "running the recorded tool calls of a resumed turn that never started");
        let results = super::tool_round::run(self, &never, events, cancel).await?;
        let model = self.model_name();
        for (call, result) in never.iter().zip(results) {
            let mut message = ChatMessage::tool_result(call.id.clone(), call.name.clone(), result);
            crate::agent::tool_images::attach(&self.deps, &model, &mut message).await;
            self.push(message, None).await?;
        }
        Ok(())
    }
}
