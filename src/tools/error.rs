//! The error a tool handler returns. The registry renders it for the model as
//! `{"error": "[TOOL_ERROR] Tool execution failed: <Kind>: <message>"}`.

/// Why a tool handler failed. Expected, model-facing failures ("file not found") are not
/// errors: tools report those inside their own JSON result, as the Python tools do.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema.
    #[error("{0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Store(#[from] crate::state::StoreError),
    /// Anything else that stopped the tool.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// The error's kind, shown where Python shows the exception type name.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "InvalidArguments",
            ToolError::Io(_) => "IoError",
            ToolError::Store(_) => "StoreError",
            ToolError::Failed(_) => "ToolFailed",
        }
    }
}
