//! The agent: the conversation's message format, the model providers it talks to, and the
//! loop that runs one conversation turn by turn with tools, approvals and compression.

pub mod activity;
pub mod assembly;
pub mod budget;
pub mod compress;
pub mod deps;
pub mod event_channel;
pub mod events;
pub mod history;
pub mod media;
pub mod message;
mod prompt;
pub mod provider;
pub mod session_id;
pub mod title;
mod todo_history;
mod tool_images;
pub mod tool_offer;
mod turn_images;
pub mod workdir;
mod worker;

pub use activity::Activity;
pub use assembly::assemble;
pub use deps::{AgentDeps, AgentSettings, UserPrompts};
pub use event_channel::{EventSink, EventStream, event_channel};
pub use events::AgentEvent;
pub use prompt::layered_system;
pub use session_id::new_session_id;
pub use worker::{Agent, AgentError, Compressed, SteerInbox, TurnOutcome};
