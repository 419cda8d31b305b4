//! One tool as the registry holds it (the fields of Python's `ToolEntry`): its schema, its
//! handler and its availability check. Below both the registry and the MCP overlay, which
//! each hold entries.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::context::ToolCtx;
use super::error::ToolError;

/// What a handler returns: the model-facing result string, or an error the registry wraps.
pub type ToolFuture = BoxFuture<'static, Result<String, ToolError>>;
/// A tool implementation.
pub type Handler = Arc<dyn Fn(ToolCtx, Value) -> ToolFuture + Send + Sync>;
/// An availability check; `false` (or a panic) hides the tool from the model.
pub type CheckFn = Arc<dyn Fn(&ToolCtx) -> bool + Send + Sync>;

/// Wraps an async function as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(ToolCtx, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, ToolError>> + Send + 'static,
{
    Arc::new(move |ctx, args| Box::pin(f(ctx, args)))
}

/// Wraps a function as a [`CheckFn`].
pub fn check_fn(f: impl Fn(&ToolCtx) -> bool + Send + Sync + 'static) -> CheckFn {
    Arc::new(f)
}

/// One registered tool (the fields of Python's `ToolEntry`).
#[derive(Clone)]
pub struct ToolEntry {
    pub name: String,
    pub toolset: String,
    /// The model-facing schema: `description` and `parameters`.
    pub schema: Value,
    pub handler: Handler,
    pub check_fn: Option<CheckFn>,
    /// Environment variables the tool needs (shown in UIs only).
    pub requires_env: Vec<String>,
    /// Informational: every Rust handler is async; Python distinguishes them.
    pub is_async: bool,
    /// Registry metadata; defaults to the schema's description.
    pub description: String,
    pub emoji: String,
}

impl ToolEntry {
    pub fn new(name: &str, toolset: &str, schema: Value, handler: Handler) -> Self {
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Self {
            name: name.to_owned(),
            toolset: toolset.to_owned(),
            schema,
            handler,
            check_fn: None,
            requires_env: Vec::new(),
            is_async: true,
            description,
            emoji: String::new(),
        }
    }

    pub fn with_check(mut self, check: CheckFn) -> Self {
        self.check_fn = Some(check);
        self
    }

    pub fn with_emoji(mut self, emoji: &str) -> Self {
        self.emoji = emoji.to_owned();
        self
    }

    pub fn with_requires_env(mut self, vars: &[&str]) -> Self {
        self.requires_env = vars.iter().map(|v| (*v).to_owned()).collect();
        self
    }
}

impl fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.name)
            .field("toolset", &self.toolset)
            .field("has_check_fn", &self.check_fn.is_some())
            .field("emoji", &self.emoji)
            .finish_non_exhaustive()
    }
}
