//! The typed stream of what an agent is doing, consumed by the terminal chat and the gateway.

use std::time::Duration;

/// One thing that happened during a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A model call started (`true`) or returned (`false`).
    Thinking(bool),
    /// Visible text as the model streams it.
    Delta(String),
    /// Reasoning text as the model streams it.
    Reasoning(String),
    /// The streamed text so far is void (the provider failed mid-stream and the call is being
    /// retried or sent to a fallback): displays must discard what they showed.
    StreamRestart,
    ToolStarted {
        call_id: String,
        name: String,
        emoji: String,
        /// A short preview of the arguments (e.g. the command), for progress lines.
        preview: String,
    },
    ToolFinished {
        call_id: String,
        name: String,
        ok: bool,
        elapsed: Duration,
    },
    /// One model call + tool round completed.
    Step {
        iteration: u32,
    },
    /// The conversation was compressed and continues in a new child session.
    Compressed {
        from: String,
        to: String,
    },
    Status(String),
}
