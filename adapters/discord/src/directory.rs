//! What the adapter knows about the Discord world between events: channels (from
//! GUILD_CREATE, CHANNEL_*/THREAD_* dispatches and REST lookups), the threads the bot takes
//! part in, DM channels worth backfilling, and the message ids already handed to the core
//! (so a duplicate dispatch or an overlapping backfill is never handed over twice).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use crate::model::{Channel, channel_kind};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    pub id: String,
    pub kind: u8,
    pub name: Option<String>,
    pub guild_id: Option<String>,
    pub parent_id: Option<String>,
    pub topic: Option<String>,
    pub owner_id: Option<String>,
}

impl ChannelInfo {
    pub fn from_channel(channel: &Channel, guild_id: Option<&str>) -> Self {
        Self {
            id: channel.id.clone(),
            kind: channel.kind,
            name: channel.name.clone(),
            guild_id: channel.guild_id.clone().or(guild_id.map(str::to_owned)),
            parent_id: channel.parent_id.clone(),
            topic: channel.topic.clone(),
            owner_id: channel.owner_id.clone(),
        }
    }

    /// A DM channel known by its id only.
    pub fn dm(id: &str) -> Self {
        Self::bare(id, channel_kind::DM, None)
    }

    /// A guild channel known by its id (and guild) only.
    pub fn in_guild(id: &str, guild_id: Option<String>) -> Self {
        Self::bare(id, 0, guild_id)
    }

    fn bare(id: &str, kind: u8, guild_id: Option<String>) -> Self {
        Self {
            id: id.to_owned(),
            kind,
            name: None,
            guild_id,
            parent_id: None,
            topic: None,
            owner_id: None,
        }
    }

    pub fn is_thread(&self) -> bool {
        channel_kind::is_thread(self.kind)
    }
}

/// A bounded set of recently handed-over ids (oldest forgotten first).
#[derive(Debug)]
pub struct RecentIds {
    order: VecDeque<String>,
    set: HashSet<String>,
    capacity: usize,
}

impl RecentIds {
    pub fn new(capacity: usize) -> Self {
        Self {
            order: VecDeque::new(),
            set: HashSet::new(),
            capacity,
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }

    pub fn insert(&mut self, id: &str) {
        if self.set.insert(id.to_owned()) {
            self.order.push_back(id.to_owned());
            while self.order.len() > self.capacity {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

#[derive(Debug)]
pub struct Directory {
    pub channels: HashMap<String, ChannelInfo>,
    pub guild_names: HashMap<String, String>,
    /// Guild id → boost level (`premium_tier`), for the upload limit.
    pub guild_tiers: HashMap<String, u8>,
    /// Threads the bot created or answered in (no mention needed there).
    pub bot_threads: HashSet<String>,
    /// Threads the bot opened itself (auto-threads): the only ones renamed from a
    /// session title.
    pub auto_threads: HashSet<String>,
    /// DM channels and threads to include in backfill scans.
    pub known_conversations: BTreeSet<String>,
    pub handed_over: RecentIds,
    /// Message ids being handled right now (live and backfill never both take one).
    pub in_progress: HashSet<String>,
    /// Channel id → the newest message id a backfill scan read there (the next scan in
    /// this process pages back to it, not further).
    pub scanned_to: HashMap<String, u64>,
}

impl Default for Directory {
    fn default() -> Self {
        Self {
            channels: HashMap::new(),
            guild_names: HashMap::new(),
            guild_tiers: HashMap::new(),
            bot_threads: HashSet::new(),
            auto_threads: HashSet::new(),
            known_conversations: BTreeSet::new(),
            handed_over: RecentIds::new(20_000),
            in_progress: HashSet::new(),
            scanned_to: HashMap::new(),
        }
    }
}

impl Directory {
    pub fn upsert(&mut self, info: ChannelInfo) {
        self.channels.insert(info.id.clone(), info);
    }

    /// The keys channel rules match against: id, name and `#name` of the channel and, for
    /// threads, of the parent (reference `_discord_channel_keys`).
    pub fn channel_keys(&self, channel: &ChannelInfo) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        let mut add = |info: &ChannelInfo| {
            keys.insert(info.id.clone());
            if let Some(name) = info
                .name
                .as_deref()
                .map(str::trim)
                .filter(|n| !n.is_empty())
            {
                keys.insert(name.to_owned());
                keys.insert(format!("#{name}"));
            }
        };
        add(channel);
        if let Some(parent_id) = &channel.parent_id {
            match self.channels.get(parent_id) {
                Some(parent) => add(parent),
                None => {
                    keys.insert(parent_id.clone());
                }
            }
        }
        keys
    }

    /// The most a bot may upload in `channel_id`: 10 MiB, 50 MiB in guilds at boost level 2,
    /// 100 MiB at level 3 (<https://discord.com/developers/docs/reference#uploading-files>;
    /// `premium_tier` in <https://discord.com/developers/docs/resources/guild#guild-object>).
    pub fn upload_limit(&self, channel_id: &str) -> u64 {
        const MIB: u64 = 1024 * 1024;
        let tier = self
            .channels
            .get(channel_id)
            .and_then(|c| c.guild_id.as_ref())
            .and_then(|g| self.guild_tiers.get(g))
            .copied()
            .unwrap_or(0);
        match tier {
            3 => 100 * MIB,
            2 => 50 * MIB,
            _ => 10 * MIB,
        }
    }

    /// Whether the bot takes part in `thread` (remembered, or the bot owns it).
    pub fn is_bot_thread(&self, thread: &ChannelInfo, bot_id: &str) -> bool {
        self.bot_threads.contains(&thread.id) || thread.owner_id.as_deref() == Some(bot_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_forget_the_oldest_beyond_capacity() {
        let mut ids = RecentIds::new(2);
        ids.insert("a");
        ids.insert("b");
        ids.insert("a");
        ids.insert("c");
        assert!(!ids.contains("a") && ids.contains("b") && ids.contains("c"));
    }

    #[test]
    fn thread_keys_include_the_parent() {
        let mut directory = Directory::default();
        let info = |id: &str, name: &str, parent: Option<&str>| ChannelInfo {
            id: id.into(),
            kind: if parent.is_some() { 11 } else { 0 },
            name: Some(name.into()),
            guild_id: Some("g".into()),
            parent_id: parent.map(Into::into),
            topic: None,
            owner_id: None,
        };
        directory.upsert(info("1", "general", None));
        let thread = info("2", "chat", Some("1"));
        let keys = directory.channel_keys(&thread);
        assert_eq!(
            keys,
            ["1", "2", "#chat", "#general", "chat", "general"]
                .map(String::from)
                .into()
        );
    }
}
