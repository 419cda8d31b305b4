//! The subset of Discord's objects the adapter reads, decoded leniently: unknown fields
//! are ignored and missing optional ones default, so a Discord API addition never breaks
//! ingestion.

use serde::Deserialize;

/// Channel types the adapter distinguishes (Discord `type` values).
pub mod channel_kind {
    pub const DM: u8 = 1;
    pub const GROUP_DM: u8 = 3;
    pub const ANNOUNCEMENT_THREAD: u8 = 10;
    pub const PUBLIC_THREAD: u8 = 11;
    pub const PRIVATE_THREAD: u8 = 12;
    pub const FORUM: u8 = 15;

    pub fn is_thread(kind: u8) -> bool {
        matches!(kind, ANNOUNCEMENT_THREAD | PUBLIC_THREAD | PRIVATE_THREAD)
    }

    pub fn is_dm(kind: u8) -> bool {
        matches!(kind, DM | GROUP_DM)
    }
}

/// Message types the adapter handles (others — joins, pins, thread starters — are skipped).
pub mod message_kind {
    pub const DEFAULT: u8 = 0;
    pub const REPLY: u8 = 19;
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

impl User {
    pub fn display_name(&self) -> &str {
        self.global_name.as_deref().unwrap_or(&self.username)
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Member {
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub nick: Option<String>,
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Attachment {
    pub id: String,
    #[serde(default)]
    pub filename: String,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub size: u64,
    pub url: String,
    /// Set on voice messages' audio (with `waveform`).
    #[serde(default)]
    pub duration_secs: Option<f64>,
    #[serde(default)]
    pub waveform: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct MessageReference {
    #[serde(default)]
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    #[serde(default)]
    pub guild_id: Option<String>,
    pub author: User,
    #[serde(default)]
    pub member: Option<Member>,
    #[serde(default)]
    pub content: String,
    #[serde(default, rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub mentions: Vec<User>,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    #[serde(default)]
    pub message_reference: Option<MessageReference>,
    #[serde(default)]
    pub referenced_message: Option<Box<Message>>,
    /// The thread started from this message, if any.
    #[serde(default)]
    pub thread: Option<Channel>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Channel {
    pub id: String,
    #[serde(default, rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub guild_id: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub topic: Option<String>,
    /// For threads: who created it.
    #[serde(default)]
    pub owner_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Guild {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    /// Boost level 0–3 (raises the upload limit).
    #[serde(default)]
    pub premium_tier: u8,
    #[serde(default)]
    pub channels: Vec<Channel>,
    #[serde(default)]
    pub threads: Vec<Channel>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Application {
    pub id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Ready {
    pub user: User,
    pub session_id: String,
    #[serde(default)]
    pub resume_gateway_url: Option<String>,
    #[serde(default)]
    pub application: Option<Application>,
    /// The guilds whose GUILD_CREATE follows.
    #[serde(default)]
    pub guilds: Vec<UnavailableGuild>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct UnavailableGuild {
    pub id: String,
}

/// A slash-command option; subcommands and groups carry their own `options`
/// (<https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-interaction-data-option-structure>).
#[derive(Debug, Clone, Deserialize, Default)]
pub struct CommandOption {
    pub name: String,
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    #[serde(default)]
    pub options: Vec<CommandOption>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct InteractionData {
    #[serde(default)]
    pub custom_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub options: Vec<CommandOption>,
}

/// Interaction types (Discord `type` values).
pub mod interaction_kind {
    pub const APPLICATION_COMMAND: u8 = 2;
    pub const MESSAGE_COMPONENT: u8 = 3;
}

#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    pub id: String,
    #[serde(default)]
    pub application_id: String,
    #[serde(rename = "type")]
    pub kind: u8,
    pub token: String,
    #[serde(default)]
    pub channel_id: Option<String>,
    #[serde(default)]
    pub guild_id: Option<String>,
    #[serde(default)]
    pub member: Option<Member>,
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub message: Option<serde_json::Value>,
    #[serde(default)]
    pub data: InteractionData,
}

impl Interaction {
    /// The invoking user: `member.user` in guilds, `user` in DMs.
    pub fn invoker(&self) -> Option<&User> {
        self.member
            .as_ref()
            .and_then(|m| m.user.as_ref())
            .or(self.user.as_ref())
    }
}

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
pub const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Seconds since the Unix epoch encoded in a snowflake id.
pub fn snowflake_unix_seconds(id: &str) -> Option<f64> {
    let id: u64 = id.parse().ok()?;
    Some(((id >> 22) + DISCORD_EPOCH_MS) as f64 / 1000.0)
}

/// The smallest snowflake created at `unix_ms` (for `after=` history queries).
pub fn snowflake_at(unix_ms: u64) -> u64 {
    unix_ms.saturating_sub(DISCORD_EPOCH_MS) << 22
}

/// Orders snowflakes numerically (ids are decimal strings of varying length).
pub fn snowflake_key(id: &str) -> u64 {
    id.parse().unwrap_or(0)
}
