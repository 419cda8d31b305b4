//! The agent: the conversation's message format and the model providers it talks to.

pub mod message;
pub mod provider;
