//! The adapter's shared state: settings, the REST client, who the bot is, and the
//! [`Directory`]. Locks are std mutexes held only for map operations, never across awaits.

use std::sync::Mutex;

use hermes_adapter::SessionSource;

use crate::directory::{ChannelInfo, Directory};
use crate::inbound;
use crate::model::Message;
use crate::rest::RestClient;
use crate::settings::Settings;
use crate::threads::ThreadGate;

#[derive(Debug)]
pub struct Inner {
    pub settings: Settings,
    pub rest: RestClient,
    identity: Mutex<Identity>,
    directory: Mutex<Directory>,
    /// Auto-threads being opened (sends to them wait) or refused (sends go to the parent).
    pub threads: ThreadGate,
}

#[derive(Debug, Default, Clone)]
struct Identity {
    bot_id: String,
    application_id: Option<String>,
}

impl Inner {
    pub fn new(settings: Settings) -> Self {
        let rest = RestClient::new(
            &settings.net,
            &settings.api_base_url,
            settings.token.clone(),
            settings.http_timeout,
        );
        Self {
            settings,
            rest,
            identity: Mutex::new(Identity::default()),
            directory: Mutex::new(Directory::default()),
            threads: ThreadGate::default(),
        }
    }

    pub fn bot_id(&self) -> String {
        self.identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bot_id
            .clone()
    }

    pub fn application_id(&self) -> Option<String> {
        self.identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .application_id
            .clone()
    }

    pub fn set_identity(&self, bot_id: &str, application_id: Option<String>) {
        let mut identity = self.identity.lock().unwrap_or_else(|e| e.into_inner());
        identity.bot_id = bot_id.to_owned();
        if application_id.is_some() {
            identity.application_id = application_id;
        }
    }

    pub fn with_directory<T>(&self, f: impl FnOnce(&mut Directory) -> T) -> T {
        let mut directory = self.directory.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut directory)
    }

    pub fn already_handed_over(&self, message_id: &str) -> bool {
        self.with_directory(|d| d.handed_over.contains(message_id))
    }

    /// The channel from the directory, else from `GET /channels/{id}` (then cached).
    pub async fn channel(&self, channel_id: &str) -> Option<ChannelInfo> {
        if let Some(info) = self.with_directory(|d| d.channels.get(channel_id).cloned()) {
            return Some(info);
        }
        // A 429 is "later", not "unknown": the REST client waits reads' 429s out.
        match self.rest.get_channel(channel_id).await {
            Ok(channel) => {
                let info = ChannelInfo::from_channel(&channel, None);
                self.with_directory(|d| d.upsert(info.clone()));
                if let Some(parent) = info.parent_id.clone()
                    && self.with_directory(|d| !d.channels.contains_key(&parent))
                    && let Ok(parent) = self.rest.get_channel(&parent).await
                {
                    self.with_directory(|d| d.upsert(ChannelInfo::from_channel(&parent, None)));
                }
                Some(info)
            }
            Err(error) => {
                tracing::warn!(platform = "discord", %error, "channel lookup failed");
                None
            }
        }
    }

    /// "Guild / #channel" like the reference; threads read "Guild / #parent / thread".
    fn chat_name(&self, chat: &ChannelInfo) -> Option<String> {
        self.with_directory(|d| {
            let name = chat.name.clone()?;
            let guild = chat.guild_id.as_ref().and_then(|g| d.guild_names.get(g));
            let parent = chat
                .parent_id
                .as_ref()
                .and_then(|p| d.channels.get(p))
                .and_then(|p| p.name.clone());
            let mut full = String::new();
            if let Some(guild) = guild {
                full.push_str(&format!("{guild} / "));
            }
            match parent {
                Some(parent) => full.push_str(&format!("#{parent} / {name}")),
                None => full.push_str(&format!("#{name}")),
            }
            Some(full)
        })
    }

    pub fn source_for(
        &self,
        chat: &ChannelInfo,
        is_dm: bool,
        thread_id: Option<String>,
        message: &Message,
        role_authorized: bool,
    ) -> SessionSource {
        let user_name = message
            .member
            .as_ref()
            .and_then(|m| m.nick.clone())
            .unwrap_or_else(|| message.author.display_name().to_owned());
        let mut source = inbound::source(
            chat,
            if is_dm { None } else { self.chat_name(chat) },
            is_dm,
            thread_id,
            &message.author.id,
            &user_name,
            message.author.bot,
        );
        source.role_authorized = role_authorized;
        source
    }

    pub fn source_for_user(
        &self,
        chat: &ChannelInfo,
        is_dm: bool,
        user_id: &str,
        user_name: &str,
    ) -> SessionSource {
        let thread_id = chat.is_thread().then(|| chat.id.clone());
        inbound::source(
            chat,
            if is_dm { None } else { self.chat_name(chat) },
            is_dm,
            thread_id,
            user_id,
            user_name,
            false,
        )
    }
}
