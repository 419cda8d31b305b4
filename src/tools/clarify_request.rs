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

/// Asks the user and resolves to their answer (a choice or free text), or an error text
/// when the question could not be asked.
pub type ClarifyCallback =
    Arc<dyn Fn(ClarifyRequest) -> BoxFuture<'static, Result<String, String>> + Send + Sync>;
