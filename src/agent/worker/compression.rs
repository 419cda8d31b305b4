//! Pre-flight compression: when the history passes the configured share of the context
//! window, its middle is summarised by the model and the conversation continues in a child
//! session that starts from the compressed history.

use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError};
use crate::agent::compress;
use crate::agent::event_channel::{EventSink, emit};
use crate::agent::events::AgentEvent;
use crate::agent::history;
use crate::agent::message::ChatMessage;
use crate::agent::provider::ModelRequest;
use crate::state::{NewSession, StoreError};

impl Agent {
    /// Pre-flight compression at the configured share of the context window.
    pub(super) async fn maybe_compress(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), AgentError> {
        let settings = &self.deps.settings;
        if !settings.compression_enabled {
            return Ok(());
        }
        let limit = (settings.context_length as f64 * settings.compression_threshold) as usize;
        if compress::estimate_tokens(&self.history) <= limit {
            return Ok(());
        }
        let Some(plan) = compress::plan(
            &self.history,
            compress::PROTECT_FIRST_N,
            settings.protect_last_n,
        ) else {
            return Ok(());
        };
        let middle = &self.history[plan.head_end..plan.tail_start];
        let request = ModelRequest {
            system: Some(compress::SUMMARISER_PROMPT.to_owned()),
            messages: vec![ChatMessage::user(compress::render_transcript(middle))],
            tools: Default::default(),
            max_tokens: None,
            stream: false,
        };
        let summary = match self.call_model(&request, events, cancel).await {
            Ok(Some(reply)) => reply.content.unwrap_or_default(),
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::warn!(session_id = %self.session_id, error = %e, "summary failed; compressing with a placeholder");
                format!(
                    "[{} earlier messages were removed; no summary is available]",
                    middle.len()
                )
            }
        };
        let compressed = compress::assemble(&self.history, plan, &summary);
        self.continue_in_child(compressed, events).await
    }

    /// `/compress`: summarises now, whatever the window's share. `focus` asks the summary
    /// to keep what concerns it; `keep_exchanges` keeps that many of the last exchanges
    /// verbatim (else `compression.protect_last_n` messages). The conversation then goes
    /// on in a child session, as after an automatic compression. `None`: too little to
    /// summarise.
    pub async fn compress_now(
        &mut self,
        focus: Option<&str>,
        keep_exchanges: Option<usize>,
        cancel: &CancellationToken,
    ) -> Result<Option<Compressed>, AgentError> {
        let before = (self.history.len(), compress::estimate_tokens(&self.history));
        let protect_last_n = match keep_exchanges {
            Some(n) => last_exchanges_len(&self.history, n),
            None => self.deps.settings.protect_last_n,
        };
        let Some(plan) = compress::plan(&self.history, compress::PROTECT_FIRST_N, protect_last_n)
        else {
            return Ok(None);
        };
        let middle = &self.history[plan.head_end..plan.tail_start];
        let mut system = compress::SUMMARISER_PROMPT.to_owned();
        if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
            system.push_str(&format!(
                "\n\nThe user asked to keep in detail whatever concerns: {focus}. Condense \
                 everything else harder."
            ));
        }
        let request = ModelRequest {
            system: Some(system),
            messages: vec![ChatMessage::user(compress::render_transcript(middle))],
            tools: Default::default(),
            max_tokens: None,
            stream: false,
        };
        let (events, _progress) = crate::agent::event_channel();
        let summary = match self.call_model(&request, &events, cancel).await? {
            Some(reply) => reply.content.unwrap_or_default(),
            None => return Ok(None),
        };
        if summary.trim().is_empty() {
            return Ok(None);
        }
        let summarised = middle.len();
        let compressed = compress::assemble(&self.history, plan, &summary);
        self.continue_in_child(compressed, &events).await?;
        Ok(Some(Compressed {
            messages: (before.0, self.history.len()),
            tokens: (before.1, compress::estimate_tokens(&self.history)),
            summarised,
        }))
    }

    /// Ends this session with reason `compression` and continues in a new child session.
    pub(super) async fn continue_in_child(
        &mut self,
        compressed: Vec<ChatMessage>,
        events: &EventSink,
    ) -> Result<(), AgentError> {
        let store = &self.deps.store;
        let parent = store
            .get_session(&self.session_id)
            .await?
            .ok_or_else(|| StoreError::SessionNotFound(self.session_id.clone()))?;
        let child_id = crate::agent::session_id::new_session_id();
        let mut child = NewSession::new(child_id.clone(), parent.source.clone());
        child.user_id = parent.user_id.clone();
        child.model = parent.model.clone();
        child.system_prompt = Some(self.system_prompt.clone());
        child.parent_session_id = Some(self.session_id.clone());
        store.create_session(child).await?;
        store.end_session(&self.session_id, "compression").await?;
        if let Some(title) = parent.title.as_deref() {
            let next = store.next_title_in_lineage(title).await?;
            store.set_session_title(&child_id, Some(&next)).await?;
        }
        for message in &compressed {
            store
                .append_message(history::to_stored(&child_id, message, None))
                .await?;
        }
        emit(
            events,
            AgentEvent::Compressed {
                from: self.session_id.clone(),
                to: child_id.clone(),
            },
        );
        tracing::info!(from = %self.session_id, to = %child_id, kept = compressed.len(), "conversation compressed");
        self.session_id = child_id;
        self.history = compressed;
        Ok(())
    }
}

/// What `/compress` did: messages and estimated tokens before and after, and how many
/// messages the summary replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed {
    pub messages: (usize, usize),
    pub tokens: (usize, usize),
    pub summarised: usize,
}

/// How many messages the last `n` exchanges span (from the `n`-th last user message on).
fn last_exchanges_len(history: &[ChatMessage], n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let starts: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == crate::agent::message::Role::User)
        .map(|(i, _)| i)
        .collect();
    match starts.len().checked_sub(n) {
        Some(at) => history.len() - starts[at],
        None => history.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_exchanges_start_at_a_user_message() {
        let history = vec![
            ChatMessage::user("a"),
            ChatMessage::assistant("b"),
            ChatMessage::user("c"),
            ChatMessage::assistant("d"),
            ChatMessage::user("e"),
            ChatMessage::assistant("f"),
        ];
        assert_eq!(last_exchanges_len(&history, 1), 2);
        assert_eq!(last_exchanges_len(&history, 2), 4);
        assert_eq!(last_exchanges_len(&history, 9), 6);
        assert_eq!(last_exchanges_len(&history, 0), 0);
    }
}
