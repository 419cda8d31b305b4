//! The question a tool puts to the user and the callback that asks it, below both the
//! `clarify` tool and the [`ToolCtx`](super::context::ToolCtx) that carries the callback.

use std::sync::Arc;

use futures_util::future::BoxFuture;

/// A question for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClarifyRequest {
    pub session_id: String,
    pub question: String,
    /// `None` for an open-ended question.
    pub choices: Option<Vec<String>>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClarifyError {
    /// No running turn in any chat belongs to the asking session.
    #[error("no chat is waiting for this question")]
    NoChat,
    /// The question was withdrawn before anyone answered (the turn ended or was stopped).
    #[error("the question was cancelled")]
    Cancelled,
    /// The gateway is stopping.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The terminal's input ended before an answer (`hermesd chat`).
    #[error("no answer: input closed")]
    InputClosed,
}

/// Asks the user and resolves to their answer (a choice or free text), or why the
/// question could not be asked or answered.
pub type ClarifyCallback =
    Arc<dyn Fn(ClarifyRequest) -> BoxFuture<'static, Result<String, ClarifyError>> + Send + Sync>;
