//! A wire-level fake Discord for hermesd's tests and benchmarks.
//!
//! One HTTP server on `127.0.0.1:0` serves both the gateway WebSocket (`/gw`) and the REST
//! API (`/api/v10/...`), speaking the real protocol, recording every call and every
//! gateway frame, with switches to inject faults (dropped sockets, unanswered heartbeats,
//! INVALID_SESSION, RECONNECT, close codes, 429s, 5xx, duplicate dispatches). Tests drive
//! it through [`FakeDiscord`]: push messages and button clicks, seed channel history for
//! backfill, and wait (never sleep) for what the adapter did.
#![forbid(unsafe_code)]

mod gateway;
mod incoming;
pub mod interactions;
mod limits;
mod rest;
pub mod state;
mod time;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{any, get};
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use incoming::{FakeUser, Incoming};
pub use rest::normalise_route;
pub use state::{Channel, CreatedMessage, Fault, GatewayFrame, RestCall, State};

use interactions::InteractionRecord;
use state::{ConnCommand, gateway_message, message_json};

/// How long [`FakeDiscord::wait_for`] waits before failing the test.
pub const WAIT: Duration = Duration::from_secs(30);

/// State shared by the server tasks and the test handle.
#[derive(Debug)]
pub struct Shared {
    state: Mutex<State>,
    version: watch::Sender<u64>,
}

impl Shared {
    /// Runs `f` on the state and wakes every waiter.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let result = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut state)
        };
        self.version.send_modify(|v| *v += 1);
        result
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&state)
    }
}

/// The running fake. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeDiscord {
    shared: Arc<Shared>,
    addr: std::net::SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeDiscord {
    /// Starts a fake that accepts `token`, announcing `heartbeat_interval` in HELLO.
    pub async fn start(token: &str, heartbeat_interval: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake discord");
        let addr = listener.local_addr().expect("fake discord address");
        let (version, _) = watch::channel(0);
        let mut state = State::new(token, heartbeat_interval.as_millis() as u64);
        state.ws_url = format!("ws://{addr}/gw");
        state.base_url = format!("http://{addr}");
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            version,
        });
        let app = Router::new()
            .route("/gw", get(gateway::upgrade))
            .fallback(any(rest::handle))
            .with_state(shared.clone());
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            shared,
            addr,
            server,
        }
    }

    pub fn api_base_url(&self) -> String {
        format!("http://{}/api/v10", self.addr)
    }

    pub fn gateway_url(&self) -> String {
        format!("ws://{}/gw", self.addr)
    }

    pub fn bot_user(&self) -> FakeUser {
        self.shared.read(|s| FakeUser {
            id: s.bot_id(),
            name: "hermes".into(),
            bot: true,
            roles: Vec::new(),
        })
    }

    pub fn guild_id(&self) -> String {
        self.shared.read(|s| s.guild_id.clone())
    }

    pub fn application_id(&self) -> String {
        self.shared.read(|s| s.application_id.clone())
    }

    pub fn new_user(&self, name: &str, bot: bool, roles: &[&str]) -> FakeUser {
        let id = self.shared.update(|s| {
            let id = s.snowflake(Duration::ZERO);
            s.members
                .insert(id.clone(), roles.iter().map(|r| (*r).to_owned()).collect());
            id
        });
        FakeUser {
            id,
            name: name.to_owned(),
            bot,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    /// A guild text channel, announced with GUILD_CREATE/CHANNEL_CREATE semantics: it is
    /// in the next READY's GUILD_CREATE, and live clients get CHANNEL_CREATE.
    pub fn add_text_channel(&self, name: &str) -> String {
        self.add_channel(0, Some(name), None)
    }

    pub fn add_thread(&self, parent_id: &str, name: &str) -> String {
        self.add_channel(11, Some(name), Some(parent_id))
    }

    /// A text channel in `guild_id` (see [`FakeDiscord::add_guild_in_shard`]).
    pub fn add_text_channel_in(&self, guild_id: &str, name: &str) -> String {
        self.add_channel_in(Some(guild_id), 0, Some(name), None)
    }

    /// Another guild the bot is in, whose id puts it in shard `shard` of `count`
    /// (`(guild_id >> 22) % count`); live clients of that shard get its GUILD_CREATE.
    pub fn add_guild_in_shard(&self, name: &str, shard: u64, count: u64) -> String {
        self.shared.update(|s| {
            let id = loop {
                let id = s.snowflake(Duration::ZERO);
                if (id.parse::<u64>().unwrap_or(0) >> 22) % count == shard {
                    break id;
                }
                // Ids move to the next millisecond within one: this spins briefly.
            };
            s.other_guilds.insert(id.clone(), name.to_owned());
            let guild = s.guild_create_of(&id);
            let shard = s.shard_of(Some(&id));
            s.dispatch_on(shard, "GUILD_CREATE", guild);
            id
        })
    }

    fn add_channel(&self, kind: u8, name: Option<&str>, parent: Option<&str>) -> String {
        self.add_channel_in(None, kind, name, parent)
    }

    fn add_channel_in(
        &self,
        guild_id: Option<&str>,
        kind: u8,
        name: Option<&str>,
        parent: Option<&str>,
    ) -> String {
        self.shared.update(|s| {
            let id = s.snowflake(Duration::ZERO);
            let guild_id = guild_id.map_or_else(|| s.guild_id.clone(), str::to_owned);
            let channel = Channel {
                id: id.clone(),
                kind,
                name: name.map(str::to_owned),
                guild_id: Some(guild_id),
                parent_id: parent.map(str::to_owned),
                recipient: None,
                owner_id: None,
            };
            let event = if kind == 11 {
                "THREAD_CREATE"
            } else {
                "CHANNEL_CREATE"
            };
            s.dispatch(event, channel.to_json());
            s.channels.insert(id.clone(), channel);
            id
        })
    }

    /// The DM channel between the bot and `user`.
    pub fn add_dm_channel(&self, user: &FakeUser) -> String {
        self.shared.update(|s| {
            let id = s.snowflake(Duration::ZERO);
            s.channels.insert(
                id.clone(),
                Channel {
                    id: id.clone(),
                    kind: 1,
                    name: None,
                    guild_id: None,
                    parent_id: None,
                    recipient: Some(user.json()),
                    owner_id: None,
                },
            );
            id
        })
    }

    /// The message as stored and served by REST (no `guild_id`, no `member`).
    fn build_message(s: &mut State, incoming: &Incoming) -> Value {
        let id = s.snowflake(incoming.age);
        let mut message = message_json(
            &id,
            &incoming.channel_id,
            &incoming.author.json(),
            &incoming.content,
        );
        message["mentions"] = json!(
            incoming
                .mentions
                .iter()
                .map(FakeUser::json)
                .collect::<Vec<_>>()
        );
        if let Some(reply_to) = &incoming.reply_to {
            message["type"] = json!(19);
            message["message_reference"] =
                json!({"message_id": reply_to, "channel_id": incoming.channel_id});
            let referenced = s
                .history
                .get(&incoming.channel_id)
                .and_then(|list| list.iter().find(|m| m["id"] == *reply_to).cloned());
            if let Some(referenced) = referenced {
                message["referenced_message"] = referenced;
            }
        }
        let mut attachments = Vec::new();
        for (index, (file_name, content_type, bytes)) in incoming.attachments.iter().enumerate() {
            let key = format!("{id}/{index}/{file_name}");
            s.attachments.insert(key.clone(), bytes.clone());
            let mut attachment = json!({
                "id": format!("{id}{index}"),
                "filename": file_name,
                "content_type": content_type,
                "size": bytes.len(),
                "url": format!("{}/attachments/{key}", s.base_url),
                "proxy_url": format!("{}/attachments/{key}", s.base_url),
            });
            if incoming.voice_message {
                attachment["duration_secs"] = json!(1.0);
                attachment["waveform"] = json!("AAAA");
            }
            attachments.push(attachment);
        }
        message["attachments"] = json!(attachments);
        if incoming.voice_message {
            message["flags"] = json!(8192);
        }
        message
    }

    /// Stores the message and dispatches MESSAGE_CREATE; returns its id.
    pub fn push_message(&self, incoming: Incoming) -> String {
        self.shared.update(|s| {
            let message = Self::build_message(s, &incoming);
            let id = message["id"].as_str().unwrap_or_default().to_owned();
            s.store_message(message.clone());
            let guild_id = s
                .channels
                .get(&incoming.channel_id)
                .and_then(|c| c.guild_id.clone());
            let message = gateway_message(message, guild_id.as_deref(), &incoming.author.roles);
            s.dispatch("MESSAGE_CREATE", message);
            id
        })
    }

    /// Stores the message in history only (sent while the bot was away); returns its id.
    pub fn add_history_message(&self, incoming: Incoming) -> String {
        self.shared.update(|s| {
            let message = Self::build_message(s, &incoming);
            let id = message["id"].as_str().unwrap_or_default().to_owned();
            s.store_message(message);
            id
        })
    }

    /// Dispatches INTERACTION_CREATE for a click on a button of `message_id`; returns
    /// the interaction id.
    pub fn push_button_click(
        &self,
        channel_id: &str,
        message_id: &str,
        user: &FakeUser,
        custom_id: &str,
    ) -> String {
        self.shared.update(|s| {
            let id = s.snowflake(Duration::ZERO);
            let message = s
                .history
                .get(channel_id)
                .and_then(|list| list.iter().find(|m| m["id"] == message_id).cloned())
                .unwrap_or(json!({"id": message_id, "channel_id": channel_id}));
            let mut interaction = json!({
                "id": id,
                "application_id": s.application_id,
                "type": 3,
                "token": format!("itoken-{id}"),
                "version": 1,
                "channel_id": channel_id,
                "message": message,
                "data": {"custom_id": custom_id, "component_type": 2},
            });
            Self::add_invoker(s, &mut interaction, channel_id, user);
            s.interactions.insert(
                id.clone(),
                InteractionRecord::new(channel_id, Some(message_id), &id),
            );
            s.dispatch("INTERACTION_CREATE", interaction);
            id
        })
    }

    /// Dispatches INTERACTION_CREATE for a slash command with string options.
    pub fn push_slash_command(
        &self,
        channel_id: &str,
        user: &FakeUser,
        name: &str,
        options: &[(&str, &str)],
    ) -> String {
        let options: Vec<Value> = options
            .iter()
            .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
            .collect();
        self.push_command_options(channel_id, user, name, Value::Array(options))
    }

    /// Dispatches INTERACTION_CREATE for a slash command with these `options` (any shape:
    /// subcommands and groups nest their own `options`).
    pub fn push_command_options(
        &self,
        channel_id: &str,
        user: &FakeUser,
        name: &str,
        options: Value,
    ) -> String {
        self.shared.update(|s| {
            let id = s.snowflake(Duration::ZERO);
            let mut interaction = json!({
                "id": id,
                "application_id": s.application_id,
                "type": 2,
                "token": format!("itoken-{id}"),
                "version": 1,
                "channel_id": channel_id,
                "data": {"id": "1", "name": name, "type": 1, "options": options},
            });
            Self::add_invoker(s, &mut interaction, channel_id, user);
            s.interactions
                .insert(id.clone(), InteractionRecord::new(channel_id, None, &id));
            s.dispatch("INTERACTION_CREATE", interaction);
            id
        })
    }

    fn add_invoker(s: &State, interaction: &mut Value, channel_id: &str, user: &FakeUser) {
        match s.channels.get(channel_id).and_then(|c| c.guild_id.clone()) {
            Some(guild_id) => {
                interaction["guild_id"] = json!(guild_id);
                interaction["member"] = json!({"user": user.json(), "roles": user.roles});
            }
            None => interaction["user"] = user.json(),
        }
    }

    // ---- faults ----

    /// The next `count` calls of `route` (e.g. `POST /channels/{id}/messages`) fail so.
    pub fn fail_next(&self, route: &str, fault: Fault, count: usize) {
        self.shared.update(|s| {
            let queue = s.faults.entry(route.to_owned()).or_default();
            queue.extend(std::iter::repeat_n(fault, count));
        });
    }

    /// The next `count` IDENTIFYs get their socket closed (4000) instead of READY.
    pub fn close_after_identify(&self, count: u32) {
        self.shared.update(|s| s.close_after_identify += count);
    }

    /// What `GET /gateway/bot` reports as `session_start_limit`.
    pub fn set_session_start_limit(&self, limit: Value) {
        self.shared.update(|s| s.session_start_limit = limit);
    }

    /// Voice messages are refused from now on with 50173, as in a channel where the bot
    /// lacks the permission to send them.
    pub fn forbid_voice_messages(&self) {
        self.shared.update(|s| s.voice_messages_forbidden = true);
    }

    /// Attachment downloads take `delay` from now on (a slow CDN).
    pub fn delay_attachments(&self, delay: Duration) {
        self.shared.update(|s| s.attachment_delay = delay);
    }

    /// `Some(status)`: `GET /gateway[/bot]` fails with that status.
    pub fn set_gateway_lookup_status(&self, status: Option<u16>) {
        self.shared.update(|s| s.gateway_lookup_status = status);
    }

    /// Drops the live gateway socket without a close frame.
    pub fn drop_socket(&self) {
        self.command_live(ConnCommand::Drop);
    }

    /// Closes the live gateway socket with a close frame carrying `code`.
    pub fn close_gateway(&self, code: u16) {
        self.command_live(ConnCommand::Close(code));
    }

    /// The live connection stops answering heartbeats (a zombie); new ones answer.
    pub fn stop_acking_heartbeats(&self) {
        self.shared.update(|s| {
            if let Some(conn) = s.connections.last_mut() {
                conn.acking = false;
            }
        });
    }

    /// The next `count` dispatches are sent twice.
    pub fn duplicate_next_dispatches(&self, count: u32) {
        self.shared.update(|s| s.duplicate_dispatches += count);
    }

    /// Sends op 9 (not resumable) and forgets the session: the client must IDENTIFY.
    pub fn invalidate_session(&self) {
        self.shared.update(|s| {
            if let Some(session) = s
                .shard_sessions
                .get(&0)
                .and_then(|id| s.sessions.get_mut(id))
            {
                session.valid = false;
            }
            if let Some(conn) = s.live_connection() {
                let _ = conn
                    .tx
                    .send(ConnCommand::Frame(json!({"op": 9, "d": false}).to_string()));
            }
        });
    }

    /// Sends op 7 RECONNECT on the live connection.
    pub fn request_reconnect(&self) {
        self.command_live(ConnCommand::Frame(json!({"op": 7, "d": null}).to_string()));
    }

    /// Dispatches an arbitrary event on the current session.
    pub fn dispatch(&self, event: &str, data: Value) {
        self.shared.update(|s| s.dispatch(event, data));
    }

    fn command_live(&self, command: ConnCommand) {
        self.shared.update(|s| {
            if let Some(conn) = s.live_connection() {
                let _ = conn.tx.send(command);
            }
        });
    }

    // ---- observation ----

    /// Reads the state under the lock.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        self.shared.read(f)
    }

    pub fn calls_to(&self, route: &str) -> Vec<RestCall> {
        self.read(|s| {
            s.calls
                .iter()
                .filter(|c| c.route == route)
                .cloned()
                .collect()
        })
    }

    /// Gateway frames with `op` received from clients.
    pub fn frames_with_op(&self, op: u64) -> Vec<GatewayFrame> {
        self.read(|s| s.frames.iter().filter(|f| f.op == op).cloned().collect())
    }

    /// Every message the bot creates from now on, as it is stored (for benchmarks that
    /// time each reply without scanning the recorded calls).
    pub fn tap_created(&self) -> tokio::sync::mpsc::UnboundedReceiver<CreatedMessage> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.shared.update(|s| s.created_taps.push(tx));
        rx
    }

    /// Waits until `probe` returns `Some`, re-checking after every state change; panics
    /// with `what` after [`WAIT`].
    pub async fn wait_for<T>(&self, what: &str, probe: impl FnMut(&State) -> Option<T>) -> T {
        self.wait_within(WAIT, what, probe).await
    }

    /// As [`FakeDiscord::wait_for`] with another bound (a cluster test through several
    /// instances and kills waits longer).
    pub async fn wait_within<T>(
        &self,
        bound: Duration,
        what: &str,
        probe: impl FnMut(&State) -> Option<T>,
    ) -> T {
        match self.try_wait_within(bound, probe).await {
            Some(found) => found,
            None => panic!("fake discord: timed out waiting for {what}"),
        }
    }

    /// As [`FakeDiscord::wait_within`], but `None` after `bound` instead of a panic, so the
    /// caller can say what is missing.
    pub async fn try_wait_within<T>(
        &self,
        bound: Duration,
        mut probe: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        let mut version = self.shared.version.subscribe();
        let wait = async {
            loop {
                if let Some(found) = self.read(&mut probe) {
                    return found;
                }
                if version.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(bound, wait).await.ok()
    }

    /// Waits until at least `count` calls of `route` were recorded; returns them all.
    pub async fn wait_for_calls(&self, route: &str, count: usize) -> Vec<RestCall> {
        self.wait_for(&format!("{count} × {route}"), |s| {
            let calls: Vec<RestCall> = s
                .calls
                .iter()
                .filter(|c| c.route == route)
                .cloned()
                .collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }

    /// Waits until at least `count` gateway frames with `op` were received.
    pub async fn wait_for_frames(&self, op: u64, count: usize) -> Vec<GatewayFrame> {
        self.wait_for(&format!("{count} gateway frames with op {op}"), |s| {
            let frames: Vec<GatewayFrame> =
                s.frames.iter().filter(|f| f.op == op).cloned().collect();
            (frames.len() >= count).then_some(frames)
        })
        .await
    }
}
