//! The Discord gateway client: a thin client of our own on tokio-tungstenite (see
//! ARCHITECTURE.md for why not serenity). `connection` runs one socket, `session` keeps a
//! session alive across sockets.

pub mod budget;
pub mod connection;
pub mod session;

pub use connection::{Dispatch, INTENTS};
