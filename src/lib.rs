//! hermesd: a long-running messaging gateway daemon for the Hermes agent.
//!
//! The library holds everything; `main.rs` only sets up logging and calls [`cli`].
#![forbid(unsafe_code)]

pub mod agent;
pub mod cli;
pub mod clock;
pub mod config;
pub mod coord;
pub mod cron;
pub mod gateway;
pub mod heap_stats;
pub mod home;
pub mod hooks;
pub mod logging;
pub mod process;
pub mod skills;
pub mod state;
pub mod tools;
