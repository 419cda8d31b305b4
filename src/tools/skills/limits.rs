//! Hermes's limits for agent-written skills: what `skill_manage` enforces and what its
//! errors name.

pub const MAX_NAME_CHARS: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_SKILL_CHARS: usize = 100_000;
pub const MAX_SUPPORT_FILE_BYTES: usize = 1_048_576;
