//! Starting and stopping child processes, shared by the terminal tool and cron's scripts:
//! the scrubbed environment a child sees ([`env`]) and process-group handling ([`group`]).
//! It sits below both so neither reaches into the other for it.

pub mod env;
pub mod group;

pub use env::command_env;
pub use group::{exit_code, find_bash, kill_group};
