//! hermesd: a long-running messaging gateway daemon for the Hermes agent.
//!
//! The library holds everything; `main.rs` only parses the command line and dispatches.
#![forbid(unsafe_code)]

pub mod home;
pub mod state;
