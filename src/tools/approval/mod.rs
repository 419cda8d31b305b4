//! Dangerous-command approval (Python `tools/approval.py`): the `DANGEROUS_PATTERNS` and
//! hardline tables, detection over normalised and de-obfuscated command variants, and the
//! [`ApprovalGate`] that asks the user and remembers session and permanent approvals.

mod allowlist;
mod detect;
mod exec_flags;
mod gate;
mod grep_safe;
mod normalize;
#[cfg(test)]
mod pattern_tests;
mod patterns;
mod shell;
mod words;

pub use allowlist::{
    AllowlistChange, AllowlistError, append_to_command_allowlist, write_atomically,
};
pub use detect::{
    DangerMatch, PARSER_LIMIT_DESCRIPTION, detect_dangerous_command, detect_dangerous_command_in,
    detect_hardline_command,
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
