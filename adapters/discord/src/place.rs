//! Where a message lives: a DM or a guild channel, decided by the channel's type (from the
//! directory, else `GET /channels/{id}`), never by whether the message carries a
//! `guild_id`. Only the gateway's MESSAGE_CREATE carries `guild_id` and `member`; messages
//! read back with `GET /channels/{id}/messages` (the backfill) have neither
//! (<https://discord.com/developers/docs/resources/message#message-object>,
//! <https://discord.com/developers/docs/events/gateway-events#message-create>), so a guild
//! message from history must not be taken for a DM. The author's roles come from `member`
//! when present, else from `GET /guilds/{id}/members/{id}` when the rules need them.

use crate::directory::ChannelInfo;
use crate::inner::Inner;
use crate::model::{Message, channel_kind};

/// Where a message came from: the gateway (with its extra fields) or REST history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Gateway,
    History,
}

/// Where a message lives, as far as the rules and the session source care.
#[derive(Debug, Clone)]
pub struct Place {
    pub channel: ChannelInfo,
    pub is_dm: bool,
}

/// Resolves the message's channel; `None` when it cannot be decided (a history message
/// whose channel cannot be looked up is left for a later scan rather than guessed).
pub async fn resolve(inner: &Inner, message: &Message, origin: Origin) -> Option<Place> {
    match inner.channel(&message.channel_id).await {
        Some(mut channel) => {
            let is_dm = channel_kind::is_dm(channel.kind);
            if !is_dm && channel.guild_id.is_none() {
                channel.guild_id = message.guild_id.clone();
            }
            Some(Place { channel, is_dm })
        }
        // A gateway MESSAGE_CREATE names the guild of every guild message.
        None if origin == Origin::Gateway => match &message.guild_id {
            None => Some(Place {
                channel: ChannelInfo::dm(&message.channel_id),
                is_dm: true,
            }),
            Some(guild_id) => Some(Place {
                channel: ChannelInfo::in_guild(&message.channel_id, Some(guild_id.clone())),
                is_dm: false,
            }),
        },
        None => None,
    }
}

/// The author's role ids from `GET /guilds/{id}/members/{id}`, for a guild message read
/// from history (which has no `member`).
pub async fn author_roles(inner: &Inner, message: &Message, place: &Place) -> Vec<String> {
    let Some(guild_id) = &place.channel.guild_id else {
        return Vec::new();
    };
    match inner.rest.get_member(guild_id, &message.author.id).await {
        Ok(member) => member.roles,
        Err(error) => {
            tracing::warn!(platform = "discord", %error, "member lookup failed; roles unknown");
            Vec::new()
        }
    }
}
