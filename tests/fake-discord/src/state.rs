//! The fake's world: users, channels, message history, gateway sessions, recorded calls
//! and armed faults. One mutex guards it all; every change bumps a watch counter so tests
//! wait on events instead of sleeping.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::time::iso8601;

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
pub const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// One REST call as the fake received it.
#[derive(Debug, Clone)]
pub struct RestCall {
    pub method: String,
    /// The path with numeric segments replaced by `{id}` (`POST /channels/{id}/messages`).
    pub route: String,
    pub path: String,
    pub query: String,
    /// The JSON body (for multipart: the `payload_json` part), `Null` when empty.
    pub body: Value,
    /// File names of multipart attachments.
    pub files: Vec<String>,
    pub status: u16,
}

/// A message the bot created (`POST /channels/{id}/messages` accepted), with the moment
/// the fake stored it: what benchmarks time replies by.
#[derive(Debug, Clone)]
pub struct CreatedMessage {
    pub channel_id: String,
    pub content: String,
    pub at: std::time::Instant,
}

/// One gateway frame the fake received from a client.
#[derive(Debug, Clone)]
pub struct GatewayFrame {
    pub connection: u64,
    pub op: u64,
    pub d: Value,
    /// When the fake received it.
    pub at: std::time::Instant,
}

/// A fault armed for the next calls of one REST route.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// 429 with `retry_after` (seconds) in the JSON body and the headers.
    RateLimited { retry_after: f64 },
    /// An arbitrary status with a Discord-shaped error body.
    Status(u16),
}

/// What a gateway connection task is told to do by the test API.
#[derive(Debug)]
pub enum ConnCommand {
    Frame(String),
    /// Close with a close frame and this code.
    Close(u16),
    /// Drop the TCP connection without a close frame.
    Drop,
}

#[derive(Debug)]
pub struct Connection {
    pub id: u64,
    pub session_id: Option<String>,
    pub tx: mpsc::UnboundedSender<ConnCommand>,
    pub acking: bool,
}

#[derive(Debug, Default)]
pub struct Session {
    /// Every dispatch of the session, with its sequence number, for RESUME replay.
    pub events: Vec<(u64, Value)>,
    pub valid: bool,
}

#[derive(Debug, Clone)]
pub struct Channel {
    pub id: String,
    pub kind: u8,
    pub name: Option<String>,
    pub guild_id: Option<String>,
    pub parent_id: Option<String>,
    /// For DM channels: the other user.
    pub recipient: Option<Value>,
    /// For threads: the creator.
    pub owner_id: Option<String>,
}

impl Channel {
    pub fn to_json(&self) -> Value {
        let mut channel = json!({"id": self.id, "type": self.kind});
        if let Some(name) = &self.name {
            channel["name"] = json!(name);
        }
        if let Some(guild_id) = &self.guild_id {
            channel["guild_id"] = json!(guild_id);
        }
        if let Some(parent_id) = &self.parent_id {
            channel["parent_id"] = json!(parent_id);
        }
        if let Some(owner_id) = &self.owner_id {
            channel["owner_id"] = json!(owner_id);
        }
        if let Some(recipient) = &self.recipient {
            channel["recipients"] = json!([recipient]);
        }
        channel
    }
}

#[derive(Debug)]
pub struct State {
    pub token: String,
    pub bot_user: Value,
    pub application_id: String,
    pub guild_id: String,
    pub guild_name: String,
    pub heartbeat_interval_ms: u64,
    pub ws_url: String,
    pub base_url: String,
    last_snowflake: u64,
    counter: u64,
    pub channels: BTreeMap<String, Channel>,
    /// Channel id → messages in id order.
    pub history: HashMap<String, Vec<Value>>,
    pub attachments: HashMap<String, Vec<u8>>,
    /// Voice messages are refused with 50173 (a channel where the bot may not send them).
    pub voice_messages_forbidden: bool,
    pub commands: Vec<Value>,
    /// Interaction id → what the fake needs to answer its callbacks and token calls.
    pub interactions: HashMap<String, crate::interactions::InteractionRecord>,
    pub calls: Vec<RestCall>,
    /// Calls no route of the fake serves (a test should fail on any).
    pub unrouted: Vec<String>,
    pub frames: Vec<GatewayFrame>,
    pub faults: HashMap<String, VecDeque<Fault>>,
    pub gateway_lookup_status: Option<u16>,
    pub connections: Vec<Connection>,
    pub next_connection: u64,
    pub sessions: HashMap<String, Session>,
    /// The current session of each shard, by shard id
    /// (https://discord.com/developers/docs/events/gateway#sharding).
    pub shard_sessions: BTreeMap<u64, String>,
    /// The shard count the client identified with (1 until it says otherwise).
    pub num_shards: u64,
    /// Guilds besides the first one (`guild_id`), by id, with their names.
    pub other_guilds: BTreeMap<String, String>,
    pub next_session: u64,
    pub duplicate_dispatches: u32,
    pub max_message_chars: usize,
    /// Listeners told about every message the bot creates (see `FakeDiscord::tap_created`).
    pub created_taps: Vec<mpsc::UnboundedSender<CreatedMessage>>,
    /// The next IDENTIFYs are answered by closing the socket (code 4000) instead of READY.
    pub close_after_identify: u32,
    /// `session_start_limit` of `GET /gateway/bot`.
    pub session_start_limit: Value,
    /// How long attachment downloads take (a slow CDN).
    pub attachment_delay: std::time::Duration,
    /// Rate limits and the invalid-request count (`crate::limits`).
    pub limits: crate::limits::Limits,
    /// Guild members: user id → role ids (served by `GET /guilds/{id}/members/{id}`).
    pub members: HashMap<String, Vec<String>>,
}

impl State {
    pub fn new(token: &str, heartbeat_interval_ms: u64) -> Self {
        let mut state = Self {
            token: token.to_owned(),
            bot_user: Value::Null,
            application_id: String::new(),
            guild_id: String::new(),
            guild_name: "Hermes Test Guild".into(),
            heartbeat_interval_ms,
            ws_url: String::new(),
            base_url: String::new(),
            last_snowflake: 0,
            counter: 0,
            channels: BTreeMap::new(),
            history: HashMap::new(),
            attachments: HashMap::new(),
            voice_messages_forbidden: false,
            commands: Vec::new(),
            interactions: HashMap::new(),
            calls: Vec::new(),
            unrouted: Vec::new(),
            frames: Vec::new(),
            faults: HashMap::new(),
            gateway_lookup_status: None,
            connections: Vec::new(),
            next_connection: 1,
            sessions: HashMap::new(),
            shard_sessions: BTreeMap::new(),
            num_shards: 1,
            other_guilds: BTreeMap::new(),
            next_session: 1,
            duplicate_dispatches: 0,
            max_message_chars: 2000,
            created_taps: Vec::new(),
            members: HashMap::new(),
            limits: Default::default(),
            attachment_delay: Duration::ZERO,
            close_after_identify: 0,
            session_start_limit: json!({"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}),
        };
        let bot_id = state.snowflake(Duration::ZERO);
        state.bot_user = user_json(&bot_id, "hermes", true);
        state.application_id = bot_id;
        state.guild_id = state.snowflake(Duration::ZERO);
        state
    }

    /// A new unique id whose embedded timestamp is `age` in the past.
    pub fn snowflake(&mut self, age: Duration) -> String {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        let ms = now_ms.saturating_sub(age.as_millis() as u64) - DISCORD_EPOCH_MS;
        self.counter += 1;
        let id = (ms << 22) | (self.counter & 0x3f_ffff);
        // Ids created "now" must increase even within one millisecond.
        let id = if age.is_zero() {
            let id = id.max(self.last_snowflake + 1);
            self.last_snowflake = id;
            id
        } else {
            id
        };
        id.to_string()
    }

    pub fn bot_id(&self) -> String {
        self.bot_user["id"].as_str().unwrap_or_default().to_owned()
    }

    pub fn guild_create(&self) -> Value {
        self.guild_create_of(&self.guild_id)
    }

    /// Every guild's id, the first one first.
    pub fn guild_ids(&self) -> Vec<String> {
        std::iter::once(self.guild_id.clone())
            .chain(self.other_guilds.keys().cloned())
            .collect()
    }

    /// The shard that receives a guild's events: `(guild_id >> 22) % num_shards`; DMs go to
    /// shard 0 (https://discord.com/developers/docs/events/gateway#sharding).
    pub fn shard_of(&self, guild_id: Option<&str>) -> u64 {
        guild_id
            .and_then(|id| id.parse::<u64>().ok())
            .map_or(0, |id| (id >> 22) % self.num_shards.max(1))
    }

    pub fn guild_create_of(&self, guild_id: &str) -> Value {
        let (threads, channels): (Vec<&Channel>, Vec<&Channel>) = self
            .channels
            .values()
            .filter(|c| c.guild_id.as_deref() == Some(guild_id))
            .partition(|c| c.kind == 11 || c.kind == 12);
        let name = self.other_guilds.get(guild_id).unwrap_or(&self.guild_name);
        json!({
            "id": guild_id,
            "name": name,
            "unavailable": false,
            "premium_tier": 0,
            "channels": channels.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            "threads": threads.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            "roles": [],
            "members": [],
        })
    }

    /// Stores a message in its channel's history (kept in id order).
    pub fn store_message(&mut self, message: Value) {
        let channel_id = message["channel_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = |m: &Value| m["id"].as_str().and_then(|s| s.parse::<u64>().ok());
        let list = self.history.entry(channel_id).or_default();
        let position = list.partition_point(|m| key(m) < key(&message));
        list.insert(position, message);
    }

    pub fn find_message_mut(&mut self, channel_id: &str, message_id: &str) -> Option<&mut Value> {
        self.history
            .get_mut(channel_id)?
            .iter_mut()
            .find(|m| m["id"] == message_id)
    }

    pub fn take_fault(&mut self, route: &str) -> Option<Fault> {
        let queue = self.faults.get_mut(route)?;
        let fault = queue.pop_front();
        if queue.is_empty() {
            self.faults.remove(route);
        }
        fault
    }

    /// Appends a dispatch to the current session and sends it to the live connection (if
    /// any): events sent while no client is connected are replayed on RESUME.
    pub fn dispatch(&mut self, event: &str, data: Value) {
        let shard = self.shard_of(data["guild_id"].as_str());
        self.dispatch_on(shard, event, data);
    }

    /// Dispatches on shard `shard`'s current session.
    pub fn dispatch_on(&mut self, shard: u64, event: &str, data: Value) {
        let Some(session_id) = self.shard_sessions.get(&shard).cloned() else {
            return;
        };
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return;
        };
        let seq = session.events.len() as u64 + 1;
        let frame = json!({"op": 0, "t": event, "s": seq, "d": data});
        session.events.push((seq, frame.clone()));
        let copies = if self.duplicate_dispatches > 0 {
            self.duplicate_dispatches -= 1;
            2
        } else {
            1
        };
        if let Some(conn) = self
            .connections
            .iter()
            .rev()
            .find(|c| c.session_id.as_deref() == Some(session_id.as_str()))
        {
            for _ in 0..copies {
                let _ = conn.tx.send(ConnCommand::Frame(frame.to_string()));
            }
        }
    }

    pub fn live_connection(&self) -> Option<&Connection> {
        self.connections.last()
    }
}

pub fn user_json(id: &str, name: &str, bot: bool) -> Value {
    json!({
        "id": id,
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": null,
        "bot": bot,
    })
}

/// A Discord Message object as the REST API returns it: no `guild_id` and no `member`
/// (<https://discord.com/developers/docs/resources/message#message-object> lists neither;
/// they are extra fields of the gateway's MESSAGE_CREATE only, see [`gateway_message`]).
pub fn message_json(id: &str, channel_id: &str, author: &Value, content: &str) -> Value {
    let ms = id.parse::<u64>().map(|n| (n >> 22) + DISCORD_EPOCH_MS);
    let message = json!({
        "id": id,
        "channel_id": channel_id,
        "type": 0,
        "author": author,
        "content": content,
        "timestamp": iso8601(ms.unwrap_or(DISCORD_EPOCH_MS)),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "components": [],
    });
    message
}

/// The MESSAGE_CREATE form of a stored (REST) message: in a guild, the gateway adds
/// `guild_id` and the author's partial `member`
/// (<https://discord.com/developers/docs/events/gateway-events#message-create>).
pub fn gateway_message(mut message: Value, guild_id: Option<&str>, roles: &[String]) -> Value {
    if let Some(guild_id) = guild_id {
        message["guild_id"] = json!(guild_id);
        message["member"] = json!({"roles": roles, "nick": null});
    }
    message
}
