//! The agent: the conversation's message format, the model providers it talks to, and the
//! loop that runs one conversation turn by turn.

pub mod budget;
pub mod compress;
pub mod events;
pub mod history;
pub mod message;
pub mod provider;
pub mod session_id;

pub use events::{AgentEvent, EventSink};
pub use session_id::new_session_id;
