//! Dangerous-command approval (Python `tools/approval.py`): every command is parsed with the
//! project's one shell parser and each simple command in it judged (`parse`, `judge`,
//! `paths`), the Hermes `DANGEROUS_PATTERNS` and hardline tables are kept as a floor over the
//! parsed commands, and the [`ApprovalGate`] asks the user and remembers session and permanent
//! approvals under Hermes's keys.

mod allowlist;
mod detect;
mod gate;
mod judge;
#[cfg(test)]
mod judge_tests;
mod normalize;
pub mod parse;
#[cfg(test)]
mod pattern_tests;
mod patterns;

pub use allowlist::{
    AllowlistChange, AllowlistError, append_to_command_allowlist, write_atomically,
};
pub use detect::{
    Assessment, DangerMatch, PARSER_LIMIT_DESCRIPTION, assess, detect_dangerous_command,
    detect_dangerous_command_in, detect_hardline_command,
};
pub use gate::{
    ApprovalDecision, ApprovalGate, ApprovalOutcome, ApprovalPrompt, ApprovalRequest,
    ApprovalSettings,
};
pub use normalize::DetectionEnv;

/// The dangerous-pattern descriptions (approval keys), in match order.
pub fn dangerous_pattern_keys() -> Vec<&'static str> {
    patterns::DANGEROUS.iter().map(|p| p.description).collect()
}

/// The hardline descriptions, in match order.
pub fn hardline_pattern_descriptions() -> Vec<&'static str> {
    patterns::HARDLINE.iter().map(|p| p.description).collect()
}
