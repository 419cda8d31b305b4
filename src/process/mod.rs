//! Starting and stopping child processes, shared by the terminal tool and cron's scripts:
//! the scrubbed environment a child sees ([`env`]) and process-group handling ([`group`]).
//! It sits below both so neither reaches into the other for it.

pub mod env;
pub mod group;
pub mod output;

pub use env::command_env;
pub use group::{exit_code, find_bash, kill_group};
pub use output::read_capped;

/// `text` as one single-quoted POSIX shell word (`'` becomes `'\''`): safe to paste into a
/// script for `sh` or `bash` whatever it holds.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
